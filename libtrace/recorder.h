/* recorder.h: the recorder's internals that tests and tools reach. */
#ifndef MEMTRACE_RECORDER_H
#define MEMTRACE_RECORDER_H

#include <stddef.h>

#include "memtrace.h"

/* A malloc'd copy of the history held in memory, oldest first. 0 or
 * MEMTRACE_ENOMEM. */
int mt_recorder_history(struct memtrace_event **out, size_t *n);

#endif
