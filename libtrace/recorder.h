/* recorder.h: the recorder's internals that tests and tools reach. */
#ifndef MEMTRACE_RECORDER_H
#define MEMTRACE_RECORDER_H

#include <stddef.h>

#include "memtrace.h"

/* A malloc'd copy of the history held in memory, oldest first. 0 or
 * MEMTRACE_ENOMEM. */
int mt_recorder_history(struct memtrace_event **out, size_t *n);

/* memtrace_record_events(ev, 2), with the count known where the loops are compiled
 * (the caching allocator's free_requested + free_completed). */
int mt_record_pair(struct memtrace_event *ev);

#endif
