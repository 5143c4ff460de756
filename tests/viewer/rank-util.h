/* rank-util.h: a small recording with known contents for the tests of the commands
 * that rank stacks (peak, leaks, top, flamegraph), and a reference replay of it.
 *
 * The recording: named frames in a trie of stacks (a frame with only a module, one
 * with only an address, one whose name holds ';', a newline and markup), annotations
 * "step1" and "step2" (ranges) and "ckpt" (a marker), allocations on devices 0 and 1
 * and streams 0 and 7 with categories "activations" and "weights", three temporaries
 * (a free right after its own allocation), allocations left alive at the end, and
 * segments. Event k happens at RK_T0 + k us, so event k is at offset k us.
 *
 * The reference replays the event list with plain arrays, written from the rules in
 * docs/memtrace.1, not from the model's code. */
#ifndef MEMTRACE_TESTS_RANK_UTIL_H
#define MEMTRACE_TESTS_RANK_UTIL_H

#include <stdint.h>

#include "cli-util.h"

#define RK_T0    1000000000000ull
#define RK_NSTR  12
#define RK_NFR   9
#define RK_NST   10
#define RK_NEV   25
#define RK_NOFLT (-100)

/* Strings 1..RK_NSTR. */
static const char *const rk_strs[RK_NSTR] = {
    "main",
    "train_step",
    "forward",
    "backward",
    "alloc_tensor",
    "optimizer_step",
    "/usr/lib/libtorch.so",
    "<script>x;y\nz&\"'</script>",
    "activations",
    "weights",
    "step1",
    "step2",
};
#define S_MAIN  1
#define S_MOD   7
#define S_EVIL  8
#define S_ACT   9
#define S_WT    10
#define S_STEP1 11
#define S_STEP2 12
/* "ckpt" comes as string 13, written in a second chunk with the events. */
#define S_CKPT 13

/* Frames 1..RK_NFR: 1-6 named after strings 1-6, 7 module only, 8 address only,
 * 9 the name with markup. */
static const struct mt_frame_rec rk_frames[RK_NFR] = {
    {0x401000, 0x1000, S_MOD, 1, 0, 0},      {0x402000, 0x2000, S_MOD, 2, 0, 0},
    {0x403000, 0x3000, S_MOD, 3, 0, 0},      {0x404000, 0x4000, S_MOD, 4, 0, 0},
    {0x405000, 0x5000, S_MOD, 5, 0, 0},      {0x406000, 0x6000, S_MOD, 6, 0, 0},
    {0x407000, 0x1234, S_MOD, 0, 0, 0},      {0xdeadbeef, 0, 0, 0, 0, 0},
    {0x409000, 0x9000, S_MOD, S_EVIL, 0, 0},
};

/* Stack node k (1..RK_NST): its parent (outer part) and its innermost frame. */
static const uint32_t rk_parent[RK_NST + 1] = {0, 0, 1, 2, 3, 2, 5, 2, 7, 1, 1};
static const uint32_t rk_frame[RK_NST + 1] = {0, 1, 2, 3, 5, 4, 5, 6, 7, 8, 9};

/* Frame names as the folded output writes them. */
static const char *const rk_fname[RK_NFR + 1] = {
    "",
    "main",
    "train_step",
    "forward",
    "backward",
    "alloc_tensor",
    "optimizer_step",
    "/usr/lib/libtorch.so+0x1234",
    "0xdeadbeef",
    "<script>x:y z&\"'</script>",
};

enum { RK_ALLOC, RK_FREE, RK_PUSH, RK_POP, RK_MARK, RK_SEG, RK_SEGFREE };

struct rk_ev {
    int op;
    uint64_t addr, size;
    uint32_t stack;
    int32_t device;
    uint64_t stream;
    uint32_t category; /* string id; for annotations their name */
};

static const struct rk_ev rk_evs[RK_NEV] = {
    /*  0 */ {RK_PUSH, 0, 0, 0, 0, 0, S_STEP1},
    /*  1 */ {RK_ALLOC, 0x1000, 1000, 4, 0, 0, S_ACT},
    /*  2 */ {RK_ALLOC, 0x2000, 2000, 6, 0, 7, S_ACT},
    /*  3 */ {RK_ALLOC, 0x3000, 300, 8, 1, 0, S_WT},
    /*  4 */ {RK_ALLOC, 0x4000, 64, 9, 0, 0, 0},
    /*  5 */ {RK_FREE, 0x4000, 64, 0, 0, 0, 0},
    /*  6 */ {RK_ALLOC, 0x5000, 5000, 4, 1, 7, 0},
    /*  7 */ {RK_FREE, 0x2000, 2000, 0, 0, 7, 0},
    /*  8 */ {RK_POP, 0, 0, 0, 0, 0, 0},
    /*  9 */ {RK_PUSH, 0, 0, 0, 0, 0, S_STEP2},
    /* 10 */ {RK_ALLOC, 0x6000, 4096, 10, 0, 0, S_WT},
    /* 11 */ {RK_ALLOC, 0x7000, 128, 3, 0, 0, 0},
    /* 12 */ {RK_FREE, 0x7000, 128, 0, 0, 0, 0},
    /* 13 */ {RK_ALLOC, 0x8000, 100, 0, 1, 0, 0},
    /* 14 */ {RK_FREE, 0x1000, 1000, 0, 0, 0, 0},
    /* 15 */ {RK_FREE, 0x5000, 5000, 0, 1, 7, 0},
    /* 16 */ {RK_MARK, 0, 0, 0, 0, 0, S_CKPT},
    /* 17 */ {RK_ALLOC, 0x9000, 7000, 6, 0, 7, 0},
    /* 18 */ {RK_FREE, 0x9000, 7000, 0, 0, 7, 0},
    /* 19 */ {RK_POP, 0, 0, 0, 0, 0, 0},
    /* 20 */ {RK_ALLOC, 0xa000, 256, 4, 0, 0, 0},
    /* 21 */ {RK_SEG, 0x100000, 2u << 20, 5, 0, 0, 0},
    /* 22 */ {RK_SEG, 0x300000, 4u << 20, 7, 1, 0, 0},
    /* 23 */ {RK_SEGFREE, 0x100000, 2u << 20, 0, 0, 0, 0},
    /* 24 */ {RK_ALLOC, 0xb000, 50, 8, 1, 0, 0},
};

/* Writes the recording to path; without end, the file has no end record. */
static inline void rk_write(const char *path, int end)
{
    struct memtrace_event ev[RK_NEV];
    static const uint8_t action[] = {
        [RK_ALLOC] = MEMTRACE_ALLOC,          [RK_FREE] = MEMTRACE_FREE_COMPLETED,
        [RK_PUSH] = MEMTRACE_ANNOTATE,        [RK_POP] = MEMTRACE_ANNOTATE,
        [RK_MARK] = MEMTRACE_ANNOTATE,        [RK_SEG] = MEMTRACE_SEGMENT_ALLOC,
        [RK_SEGFREE] = MEMTRACE_SEGMENT_FREE,
    };
    for (int k = 0; k < RK_NEV; k++) {
        const struct rk_ev *e = &rk_evs[k];
        memset(&ev[k], 0, sizeof(ev[k]));
        ev[k].action = action[e->op];
        ev[k].time_ns = RK_T0 + (uint64_t)k * 1000;
        ev[k].addr = e->addr;
        ev[k].size = e->size;
        ev[k].requested_size = e->size;
        ev[k].stack = e->stack;
        ev[k].device = e->device;
        ev[k].stream = e->stream;
        ev[k].category = e->category;
        ev[k].tid = 9;
        if (e->op == RK_PUSH)
            ev[k].aux = MEMTRACE_ANNOTATE_PUSH;
        else if (e->op == RK_POP)
            ev[k].aux = MEMTRACE_ANNOTATE_POP;
        else if (e->op == RK_MARK)
            ev[k].aux = MEMTRACE_ANNOTATE_MARK;
    }
    struct mt_writer *w;
    const char *ckpt[] = {"ckpt"};
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_meta(w, "{\"host\": \"testhost\", \"pid\": 1}"), "mt_writer_meta");
    cli_check(mt_writer_strings(w, 1, RK_NSTR, rk_strs), "mt_writer_strings");
    cli_check(mt_writer_frames(w, 1, RK_NFR, rk_frames), "mt_writer_frames");
    cli_check(mt_writer_stacks(w, 1, RK_NST, rk_parent + 1, rk_frame + 1), "mt_writer_stacks");
    cli_check(mt_writer_events(w, ev, 10), "mt_writer_events");
    cli_check(mt_writer_strings(w, S_CKPT, 1, ckpt), "mt_writer_strings");
    cli_check(mt_writer_events(w, ev + 10, RK_NEV - 10), "mt_writer_events");
    if (end) {
        cli_check(mt_writer_state(w, RK_T0 + RK_NEV * 1000, NULL, 0), "mt_writer_state");
        cli_check(mt_writer_end(w, "{\"dropped\": 0, \"overflowed\": false}"), "mt_writer_end");
    } else {
        mt_writer_abort(w);
    }
}

/* Which allocations count, and the window [from, to] of event indices. */
struct rk_filter {
    int device; /* RK_NOFLT: any */
    uint64_t min_size;
    uint32_t category; /* string id, 0: any */
    uint64_t from, to;
    int segments; /* the reserved level instead of the allocated one */
};

static inline struct rk_filter rk_all(void)
{
    return (struct rk_filter){RK_NOFLT, 0, 0, 0, UINT64_MAX, 0};
}

struct rk_fig {
    uint64_t bytes, count;
};

struct rk_ref {
    uint64_t peak, peak_event, end_bytes, end_count;
    struct rk_fig at_peak[RK_NST + 1]; /* live at the peak, per stack */
    struct rk_fig live[RK_NST + 1];    /* live at the end of the window */
    struct rk_fig since[RK_NST + 1];   /* live then, made inside the window */
    struct rk_fig alloc[RK_NST + 1];   /* allocated inside the window */
    struct rk_fig temp[RK_NST + 1];    /* temporaries inside the window */
};

static inline struct rk_ref rk_reference(struct rk_filter f)
{
    struct rk_ref r;
    struct {
        uint64_t addr, size, index;
        uint32_t stack;
        int counted;
    } live[RK_NEV];
    int nlive = 0;
    uint64_t cur = 0, last_alloc = UINT64_MAX;
    memset(&r, 0, sizeof(r));
    int want_alloc = f.segments ? RK_SEG : RK_ALLOC, want_free = f.segments ? RK_SEGFREE : RK_FREE;
    for (uint64_t k = 0; k < RK_NEV && k <= f.to; k++) {
        const struct rk_ev *e = &rk_evs[k];
        int in = k >= f.from;
        if (e->op == RK_ALLOC)
            last_alloc = k;
        if (e->op == want_alloc) {
            int counted = (f.device == RK_NOFLT || e->device == f.device) &&
                          e->size >= f.min_size && (!f.category || e->category == f.category);
            live[nlive].addr = e->addr;
            live[nlive].size = e->size;
            live[nlive].index = k;
            live[nlive].stack = e->stack;
            live[nlive++].counted = counted;
            if (!counted)
                continue;
            cur += e->size;
            if (in) {
                r.alloc[e->stack].bytes += e->size;
                r.alloc[e->stack].count++;
            }
            if (in && cur > r.peak) {
                r.peak = cur;
                r.peak_event = k;
                memset(r.at_peak, 0, sizeof(r.at_peak));
                for (int i = 0; i < nlive; i++)
                    if (live[i].counted) {
                        r.at_peak[live[i].stack].bytes += live[i].size;
                        r.at_peak[live[i].stack].count++;
                    }
            }
        } else if (e->op == want_free) {
            for (int i = 0; i < nlive; i++) {
                if (live[i].addr != e->addr)
                    continue;
                if (live[i].counted) {
                    cur -= live[i].size;
                    if (in && live[i].index == last_alloc && !f.segments) {
                        r.temp[live[i].stack].bytes += live[i].size;
                        r.temp[live[i].stack].count++;
                    }
                }
                live[i] = live[--nlive];
                break;
            }
        }
    }
    for (int i = 0; i < nlive; i++) {
        if (!live[i].counted)
            continue;
        r.live[live[i].stack].bytes += live[i].size;
        r.live[live[i].stack].count++;
        r.end_bytes += live[i].size;
        r.end_count++;
        if (live[i].index >= f.from) {
            r.since[live[i].stack].bytes += live[i].size;
            r.since[live[i].stack].count++;
        }
    }
    return r;
}

/* The stacks of figs with a non-zero count, largest bytes first (then count, then the
 * lower id): ids into out, their number returned. */
static inline int rk_order(const struct rk_fig *figs, uint32_t *out, int by_count)
{
    int n = 0;
    for (uint32_t s = 0; s <= RK_NST; s++)
        if (figs[s].count)
            out[n++] = s;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            const struct rk_fig *a = &figs[out[j - 1]], *b = &figs[out[j]];
            uint64_t a1 = by_count ? a->count : a->bytes, b1 = by_count ? b->count : b->bytes;
            uint64_t a2 = by_count ? a->bytes : a->count, b2 = by_count ? b->bytes : b->count;
            if (a1 > b1 || (a1 == b1 && (a2 > b2 || (a2 == b2 && out[j - 1] < out[j]))))
                break;
            uint32_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

/* Compares a JSON array of stacks (bytes, count, stack) with figs in rk_order; returns
 * 1 when equal, else 0 with a diagnostic. */
static inline int rk_stacks_match(json_t *arr, const struct rk_fig *figs, const char *what)
{
    uint32_t order[RK_NST + 1];
    int n = rk_order(figs, order, 0);
    if (json_array_size(arr) != (size_t)n) {
        diag("%s: %zu stacks, want %d", what, json_array_size(arr), n);
        return 0;
    }
    for (int k = 0; k < n; k++) {
        json_t *s = json_array_get(arr, (size_t)k);
        const struct rk_fig *g = &figs[order[k]];
        if (json_integer_value(json_object_get(s, "stack")) != order[k] ||
            (uint64_t)json_integer_value(json_object_get(s, "bytes")) != g->bytes ||
            (uint64_t)json_integer_value(json_object_get(s, "count")) != g->count) {
            diag("%s: row %d: want stack %u with %llu bytes in %llu", what, k, order[k],
                 (unsigned long long)g->bytes, (unsigned long long)g->count);
            return 0;
        }
    }
    return 1;
}

/* The frame names of stack s, innermost first, into names; its depth. */
static inline int rk_frames_of(uint32_t s, const char **names)
{
    int n = 0;
    for (; s; s = rk_parent[s])
        names[n++] = rk_fname[rk_frame[s]];
    return n;
}

#endif
