/* before.h: what was live before a trace's first event (internal).
 *
 * PyTorch's snapshots and memtrace's own dumps keep the last N events of a history
 * but the whole state of the allocator, so the events usually begin with memory in
 * use. Fed the events in order, then the final state, this finds what was live
 * before the first event (see before.c), for the state that a file holds before its
 * first event (docs/REPLAY.md, rule 0). The importer and the recorder's dump use it;
 * it depends on nothing but the format's types. */
#ifndef MEMTRACE_BEFORE_H
#define MEMTRACE_BEFORE_H

#include <stddef.h>
#include <stdint.h>

#include "memtrace_snapshot.h"

struct mt_before;
struct mt_before_state {
    struct memtrace_segment *segs; /* by device, then address; blocks point into blocks */
    size_t nsegs;
    struct memtrace_block *blocks;
    size_t nblocks;
    uint64_t live_blocks; /* blocks in segs */
    uint64_t dropped;     /* blocks live before the trace that lie in none of segs */
};
/* NULL when out of memory. */
struct mt_before *mt_before_new(void);
void mt_before_free(struct mt_before *b);
/* 0 or MEMTRACE_ENOMEM. */
int mt_before_event(struct mt_before *b, const struct memtrace_event *ev);
/* The state into *out (nsegs 0: nothing was live before); the caller frees it with
 * mt_before_state_free. 0 or MEMTRACE_ENOMEM. */
int mt_before_state(struct mt_before *b, const struct memtrace_segment *final, size_t nfinal,
                    struct mt_before_state *out);
void mt_before_state_free(struct mt_before_state *s);

#endif
