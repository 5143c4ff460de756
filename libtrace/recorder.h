/* recorder.h: the recorder's internals that tests and tools reach. */
#ifndef MEMTRACE_RECORDER_H
#define MEMTRACE_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#include "memtrace.h"

/* A malloc'd copy of the history held in memory, oldest first. 0 or
 * MEMTRACE_ENOMEM. */
int mt_recorder_history(struct memtrace_event **out, size_t *n);

/* One event of the caching allocator, as it knows it: the recorder adds time, thread,
 * stack and category. */
struct mt_block_event {
    uint64_t addr, size, requested, stream, aux;
    int32_t device, pool;
    uint32_t source;
    int action; /* enum memtrace_action */
};

/* Records f as memtrace_record_event() would, or with freed set a free_requested and
 * a free_completed of f's block as one unit (f->action unused). Returns the stack id
 * captured, 0 when none was or nothing was recorded. */
uint32_t mt_record_block(const struct mt_block_event *f, int freed);

#endif
