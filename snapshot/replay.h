/* replay.h: the one replay model every analysis shares (internal).
 *
 * A replay reads a .memtrace file as a stream and applies its events, in file order,
 * to one model: the live blocks and segment pieces (keyed by address), the allocated
 * and reserved levels with their peaks (in total and per device), and tallies per
 * stack (live now, live at the peak, allocated in total, temporaries). Commands are
 * passes over it: each calls mt_replay_next() and looks at the model and at what the
 * event just did (rp->eff), and none keeps a replay of its own. The rules (a free of
 * an unknown address, a replaced allocation, a partial unmap, free_requested against
 * free_completed, a truncated file) are docs/REPLAY.md's, pinned by tests/replay/.
 *
 * Memory follows live entries and distinct stacks, never the number of events. */
#ifndef MEMTRACE_REPLAY_H
#define MEMTRACE_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "addrtab.h"
#include "memtrace.h"
#include "memtrace_snapshot.h"

/* A live block (alloc) or segment piece (segment_alloc, segment_map). */
struct mt_live {
    struct mt_addrtab_head head; /* key: the address */
    uint64_t size;
    uint64_t requested;
    uint64_t stream;
    uint64_t time;  /* of the event that made it */
    uint64_t index; /* event index (0-based, in file order) of that event */
    uint32_t stack;
    uint32_t category;
    uint32_t source; /* string id of the reporting API, 0 none */
    int32_t device;
    int32_t pool;
    uint8_t pending; /* a free_requested was seen (PyTorch's active_pending_free) */
    uint8_t counted; /* passes the filter: counts in the levels and tallies */
    uint8_t mapped;  /* made by segment_map: a piece of an expandable segment */
    uint8_t initial; /* live before the first event (rule 0), not made by an event */
};

/* A level (allocated or reserved bytes) and its peak: the first event at which it
 * reached its highest value inside the window. */
struct mt_level {
    uint64_t cur;
    uint64_t peak;
    uint64_t peak_index; /* valid when peak > 0 */
    uint64_t peak_time;
    uint32_t epoch; /* how many times the peak rose (see mt_tally_at_peak) */
};

/* What happened to the model, per stack id. */
struct mt_tally {
    uint64_t live_bytes, live_count;   /* live now */
    uint64_t alloc_bytes, alloc_count; /* made in total (counted ones) */
    uint64_t temp_bytes, temp_count;   /* temporaries: freed with no allocation between */
    uint64_t saved_bytes, saved_count; /* live at the peak, if stamp is the epoch */
    uint32_t stamp;
};

struct mt_tallies {
    struct mt_tally *t; /* indexed by stack id; n entries */
    size_t n;
};

/* How many events of a kind, and their bytes. */
struct mt_count {
    uint64_t count, bytes;
};

/* Per-device levels. */
struct mt_devlevel {
    int32_t device;
    struct mt_level allocated, reserved;
    /* The device's own figures from the latest counter event (0 if none). */
    uint64_t used, total, rss;
};

/* A point in a file: a time offset from its first event, an event index, or an
 * annotation (its start for --from, its end for --to; a marker for both). */
enum mt_point_kind { MT_POINT_NONE, MT_POINT_TIME, MT_POINT_EVENT, MT_POINT_ANNOTATION };
struct mt_point {
    int kind;
    uint64_t value; /* ns after the first event, or an event index */
    const char *name;
};

/* Parses "1.5s", "250ms", "40us", "900ns" (time after the first event), "#123" or
 * "123" (event index), anything else: an annotation's name. 0, or -1 with a
 * malformed number ("12xs"). */
int mt_point_parse(const char *text, struct mt_point *p);

/* Which allocations count, and the window in which peaks are taken. Allocations that
 * fail the filter are still tracked (their frees must match), but add nothing to the
 * levels, peaks or tallies. */
struct mt_filter {
    int has_device;
    int32_t device;
    int has_stream;
    uint64_t stream;
    uint64_t min_size;    /* 0: any */
    const char *category; /* an alloc's category name, or NULL for any */
    struct mt_point from, to;
};

/* What the last event did. */
enum mt_effect_kind {
    MT_EFF_NONE,       /* counters, annotations, snapshots, oom, skipped actions */
    MT_EFF_ALLOC,      /* a block became live (eff.gone holds the one it replaced) */
    MT_EFF_FREE,       /* free_completed: eff.gone was removed */
    MT_EFF_PENDING,    /* free_requested of a live block (eff.bytes: 0 if a repeat) */
    MT_EFF_UNMATCHED,  /* a free or unmap of an address with nothing live */
    MT_EFF_SEG_ADD,    /* a segment piece became live (eff.gone: replaced) */
    MT_EFF_SEG_REMOVE, /* segment_free or segment_unmap: eff.bytes left reserved */
};

struct mt_effect {
    int kind;
    int replaced;   /* ALLOC, SEG_ADD: a live entry at the address was replaced */
    int temporary;  /* FREE: the block was the last one allocated */
    uint64_t bytes; /* bytes that entered or left the level */
    /* FREE, PENDING, SEG_REMOVE (the first piece), or the replaced entry; left as it
     * was by the other kinds, so read it only for those. */
    struct mt_live gone;
};

struct mt_replay {
    struct memtrace_reader *r;
    const char *path;
    struct mt_filter filter;
    /* The last event read, held by the reader until the next mt_replay_next (an
     * all-zero event before the first). */
    const struct memtrace_event *ev;
    struct memtrace_event none;
    uint64_t index;  /* its index; events read = index + 1 */
    uint64_t events; /* events read */
    uint64_t t_first, t_min, t_max;
    int in_window, window_done;

    /* Called for each entry of the state before the first event as the model makes
     * it live (rule 0), before event 0 is applied, for observers that keep figures
     * of their own (stats); NULL: none. e is valid during the call. */
    void (*on_initial)(void *ctx, const struct mt_live *e, int is_seg);
    void *on_initial_ctx;

    struct mt_addrtab blocks, segs; /* of struct mt_live */
    struct mt_level allocated, reserved;
    /* allocated less the blocks whose free was requested (free_requested): PyTorch's
     * allocated_bytes, where allocated is its active_bytes. The same as allocated in
     * files without free_requested. */
    struct mt_level in_use;
    struct mt_tallies block_stacks, seg_stacks;
    /* Set before the first event by a view that reads only the overall levels and
     * the live entries: the model then keeps no per-stack tallies (block_stacks and
     * seg_stacks stay empty) and no per-device allocated and reserved levels (a
     * device's counter figures, used, total and rss, are still kept). */
    int lean;
    struct mt_devlevel *dev;
    size_t ndev;

    struct mt_count allocs, frees, unmatched_frees, replaced_allocs, free_requests;
    struct mt_count seg_allocs, seg_frees, unmatched_seg_frees, replaced_segs;
    struct mt_count ooms; /* bytes: the requests' sizes */
    uint64_t oom_largest, oom_free;
    uint64_t annotations;
    uint64_t actions[MEMTRACE_ACTION_COUNT]; /* events read, per action */
    uint64_t unknown_actions;
    uint64_t last_alloc_index; /* of the latest alloc event, UINT64_MAX before one */
    uint32_t category_id;      /* the filter's category as a string id, 0 unknown yet */
    struct mt_effect eff;
    uint32_t to_tid, to_depth; /* an annotation --to: its thread and nesting */
    int to_open;
    int nomem;
};

/* Prepares a replay of the reader r (which it takes over, and closes even on failure)
 * with filter f (NULL: everything). 0 or MEMTRACE_ENOMEM. */
int mt_replay_new(struct mt_replay **out, struct memtrace_reader *r, const char *path,
                  const struct mt_filter *f);

/* Opens path and prepares a replay with filter f (NULL: everything). On failure
 * returns a negative MEMTRACE_E* code with err filled. */
int mt_replay_open(struct mt_replay **out, const char *path, const struct mt_filter *f,
                   struct memtrace_errinfo *err);

/* Reads the next event and applies it. Returns 1 with rp->ev and rp->eff describing
 * it, 0 at the end of the file or of the filter's window, or a negative code:
 * MEMTRACE_EFORMAT and friends from the reader (see memtrace_reader_error()), or
 * MEMTRACE_ENOMEM when the model could not grow. */
int mt_replay_next(struct mt_replay *rp);

/* Replays up to and including event index (or to the end, if the file is shorter).
 * Same returns as mt_replay_next, 1 when it stopped at index. */
int mt_replay_to(struct mt_replay *rp, uint64_t index);

/* Replays to the end. 0, or a negative code as mt_replay_next. */
int mt_replay_run(struct mt_replay *rp);

/* 1 if the file ended without its end record (after the end was reached). */
int mt_replay_truncated(const struct mt_replay *rp);

/* 1 if the filter's window never opened: it has a --from point that no event reached
 * before the window closed (its --to) or the replay ended. */
int mt_replay_window_missed(const struct mt_replay *rp);

/* Bytes and count that stack had live at the latest peak of the level its tallies
 * follow (allocated for block_stacks, reserved for seg_stacks). */
void mt_tally_at_peak(const struct mt_tallies *ts, const struct mt_level *l, uint32_t stack,
                      uint64_t *bytes, uint64_t *count);

/* The per-device levels of device, or NULL if it had no events. */
const struct mt_devlevel *mt_replay_device(const struct mt_replay *rp, int32_t device);

void mt_replay_close(struct mt_replay *rp);

#endif
