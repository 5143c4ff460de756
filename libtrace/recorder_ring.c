/* recorder_ring.c: the hot path and the history. Owns the history ring, the counts
 * (recorded, dropped, overflowed), and the per-thread re-entry guard and category
 * stack that every event reads.
 *
 * The history keeps the newest max_entries events exactly: appends go to the tail
 * chunk, drops advance a head offset and unmap a head chunk once it is consumed. */
#include "config.h"

#include "recorder.h"
#include "recorder_impl.h"

#include "memtrace.h"
#include "stack.h"
#include "strtab.h"
#include "mtx/util.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HCHUNK_EVENTS 65536u
#define MAX_NESTING   32

struct hchunk {
    struct hchunk *next;
    uint32_t n;
    struct memtrace_event ev[HCHUNK_EVENTS];
};

/* Guarded by mt_rec.lock. */
static struct {
    struct hchunk *head, *tail;
    struct hchunk *spare; /* a consumed head chunk kept for the next tail */
    uint32_t head_off;
    size_t hcount;
    uint64_t recorded, dropped;
    int overflowed;
} H;

static MTX_TLS int tls_busy;
static __thread uint32_t tls_categories[MAX_NESTING];
static MTX_TLS int tls_ncategories;

/* ---- history ---------------------------------------------------------------- */

/* New chunks are prefaulted in one call: faulting 1000 pages one by one on the
 * recording path costs more than the events themselves. */
static struct hchunk *hchunk_new(void)
{
    struct hchunk *c = H.spare;
    if (c != NULL) {
        H.spare = NULL;
        c->next = NULL;
        c->n = 0;
        return c;
    }
    c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
             -1, 0);
    return c == MAP_FAILED ? NULL : c;
}

static void hchunk_retire(struct hchunk *c)
{
    if (H.spare == NULL)
        H.spare = c;
    else
        mtx_unmap(c, sizeof *c);
}

static void history_free(void)
{
    struct hchunk *c = H.head;
    while (c != NULL) {
        struct hchunk *next = c->next;
        mtx_unmap(c, sizeof *c);
        c = next;
    }
    mtx_unmap(H.spare, sizeof *H.spare);
    H.spare = NULL;
    H.head = H.tail = NULL;
    H.head_off = 0;
    H.hcount = 0;
}

static void history_drop_oldest(size_t n)
{
    while (n > 0 && H.head != NULL) {
        uint32_t avail = H.head->n - H.head_off;
        uint32_t take = n < avail ? (uint32_t)n : avail;
        H.head_off += take;
        H.hcount -= take;
        H.dropped += take;
        n -= take;
        if (H.head_off == H.head->n && (H.head->n == HCHUNK_EVENTS || H.head != H.tail)) {
            struct hchunk *next = H.head->next;
            hchunk_retire(H.head);
            H.head = next;
            H.head_off = 0;
            if (H.head == NULL)
                H.tail = NULL;
        }
    }
    H.overflowed = 1;
}

/* Called with the lock held. Returns 0, or -1 when no memory is left for a chunk (the
 * event then only goes to the stream, and counts as dropped from the history). */
static int history_append_slow(const struct memtrace_event *ev)
{
    if (H.tail == NULL || H.tail->n == HCHUNK_EVENTS) {
        struct hchunk *c = hchunk_new();
        if (c == NULL) {
            H.dropped++;
            H.overflowed = 1;
            return -1;
        }
        if (H.tail != NULL)
            H.tail->next = c;
        else
            H.head = c;
        H.tail = c;
    }
    H.tail->ev[H.tail->n++] = *ev;
    H.hcount++;
    if (mt_rec.max_entries != 0 && H.hcount > mt_rec.max_entries)
        history_drop_oldest(H.hcount - mt_rec.max_entries);
    return 0;
}

/* The common case inline: room in the tail chunk, and a full ring whose oldest event
 * is not the last of its chunk, so dropping it is one offset step. */
static inline int history_append(const struct memtrace_event *ev)
{
    struct hchunk *t = H.tail;
    if (MTX_UNLIKELY(t == NULL || t->n == HCHUNK_EVENTS))
        return history_append_slow(ev);
    /* The ring is far larger than the caches: ask for the lines a few events ahead
     * now, so that the next stores do not wait for memory under the lock. */
    __builtin_prefetch((void *)((uintptr_t)&t->ev[t->n] + MT_PREFETCH_AHEAD * sizeof *ev), 1, 3);
    t->ev[t->n++] = *ev;
    if (H.hcount < mt_rec.limit) {
        H.hcount++;
        return 0;
    }
    if (MTX_LIKELY(H.head_off + 1 < H.head->n)) {
        H.head_off++;
        H.dropped++;
        H.overflowed = 1;
        return 0;
    }
    H.hcount++;
    history_drop_oldest(1);
    return 0;
}

void mt_ring_reset(void)
{
    history_free();
    H.recorded = H.dropped = 0;
    H.overflowed = 0;
}

void mt_ring_trim(void)
{
    if (mt_rec.max_entries != 0 && H.hcount > mt_rec.max_entries)
        history_drop_oldest(H.hcount - mt_rec.max_entries);
}

struct memtrace_event *mt_ring_copy(size_t *n)
{
    *n = H.hcount;
    struct memtrace_event *out = malloc((H.hcount ? H.hcount : 1) * sizeof *out);
    if (out == NULL)
        return NULL;
    size_t k = 0;
    uint32_t off = H.head_off;
    for (struct hchunk *c = H.head; c != NULL; c = c->next, off = 0) {
        memcpy(out + k, c->ev + off, (c->n - off) * sizeof *out);
        k += c->n - off;
    }
    return out;
}

int mt_ring_set_busy(int busy)
{
    int was = tls_busy;
    tls_busy = busy;
    return was;
}

int mt_recorder_history(struct memtrace_event **out, size_t *n)
{
    mt_rlock();
    *out = mt_ring_copy(n);
    mt_runlock();
    return *out ? 0 : MEMTRACE_ENOMEM;
}

void memtrace_get_counts(struct memtrace_counts *c)
{
    mt_rlock();
    c->recorded = H.recorded;
    c->dropped = H.dropped;
    c->overflowed = H.overflowed;
    mt_runlock();
}

/* ---- recording -------------------------------------------------------------- */

/* Called with the lock, while recording: stores ev unless its action is skipped. */
static inline __attribute__((always_inline)) void keep(const struct memtrace_event *ev)
{
    if (mt_rec.skip_actions & (1u << ev->action))
        return;
    H.recorded++;
    history_append(ev);
    if (mt_rec.streaming && !mt_rec.stopping)
        mt_stream_append(ev);
}

/* The category an alloc recorded now gets: the innermost one pushed on this thread. */
static inline uint32_t current_category(void)
{
    return MTX_UNLIKELY(tls_ncategories > 0) ? tls_categories[tls_ncategories - 1] : 0;
}

/* Captures and interns the current stack. Always inlined: the one frame it skips is
 * then the recorder's entry point, and the stack starts at its caller. */
static inline __attribute__((always_inline)) uint32_t capture_stack(int depth)
{
    uintptr_t ips[MEMTRACE_MAX_FRAMES];
    int nips = mt_stack_capture_as(ips, depth, 1, mt_rec.stack_kind);
    return mt_stack_intern(ips, nips);
}

/* memtrace_record_event_with's callback, under the lock, when the event is not kept. */
static __attribute__((noinline)) int locked_only(struct memtrace_event *ev, memtrace_locked_fn fn,
                                                 void *ctx, int rc)
{
    mt_rlock();
    fn(ctx, ev);
    mt_runlock();
    return rc;
}

/* One clock read, at most one stack capture and one lock for the whole batch: an
 * allocator that frees a block at once reports free_requested and free_completed
 * together. fn, when given (n is 1 then), runs under the lock before the event is
 * stored. Always inlined so that the public entry points skip one frame alike, and
 * the checks for fn vanish from those that pass none. */
static inline __attribute__((always_inline)) int record_batch(struct memtrace_event *ev, size_t n,
                                                              memtrace_locked_fn fn, void *ctx)
{
    /* Acquire: the options, set before recording began, are read without the lock. */
    int recording = atomic_load_explicit(&mt_rec.recording, memory_order_acquire);
    if (!recording && fn == NULL)
        return MEMTRACE_ESTATE;
    if (ev == NULL && n > 0)
        return MEMTRACE_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (ev[i].action >= MEMTRACE_ACTION_COUNT)
            return MEMTRACE_EINVAL;
    if (!recording)
        return locked_only(ev, fn, ctx, MEMTRACE_ESTATE);
    if (tls_busy)
        return fn != NULL ? locked_only(ev, fn, ctx, 0) : 0;
    tls_busy = 1;
    uint64_t now = 0;
    uint32_t tid = mtx_gettid();
    uint32_t stack = 0;
    int captured = 0;
    int depth = mt_rec.stack_depth;
    uint32_t skip = mt_rec.skip_actions, stacked = mt_rec.stack_actions;
    for (size_t i = 0; i < n; i++) {
        struct memtrace_event *e = &ev[i];
        uint32_t bit = 1u << e->action;
        if (skip & bit)
            continue;
        if (e->time_ns == 0)
            e->time_ns = now ? now : (now = mtx_now_ns());
        e->tid = tid;
        if (e->action == MEMTRACE_ALLOC && e->category == 0)
            e->category = current_category();
        if ((stacked & bit) && e->stack == 0) {
            if (!captured) {
                stack = capture_stack(depth);
                captured = 1;
            }
            e->stack = stack;
        }
    }
    mt_rlock();
    if (fn != NULL)
        fn(ctx, ev);
    if (atomic_load_explicit(&mt_rec.recording, memory_order_relaxed))
        for (size_t i = 0; i < n; i++)
            keep(&ev[i]);
    mt_runlock();
    tls_busy = 0;
    return 0;
}

int memtrace_record_event(struct memtrace_event *ev)
{
    if (ev == NULL)
        return MEMTRACE_EINVAL;
    return record_batch(ev, 1, NULL, NULL);
}

int memtrace_record_events(struct memtrace_event *ev, size_t n)
{
    return record_batch(ev, n, NULL, NULL);
}

/* record_batch for the caching allocator, which has no event of its own to fill: the
 * event is built once, here, with none of the checks a caller's event needs. */
uint32_t mt_record_block(const struct mt_block_event *f, int freed)
{
    int action = freed ? MEMTRACE_FREE_REQUESTED : f->action;
    uint32_t bits =
        freed ? 1u << MEMTRACE_FREE_REQUESTED | 1u << MEMTRACE_FREE_COMPLETED : 1u << action;
    /* Acquire: the options, set before recording began, are read without the lock. */
    if (!atomic_load_explicit(&mt_rec.recording, memory_order_acquire) || tls_busy)
        return 0;
    bits &= ~mt_rec.skip_actions;
    if (bits == 0)
        return 0;
    tls_busy = 1;
    struct memtrace_event ev = {
        .time_ns = mtx_now_ns(),
        .addr = f->addr,
        .size = f->size,
        .requested_size = f->requested,
        .stream = f->stream,
        .aux = f->aux,
        .device = f->device,
        .pool = f->pool,
        .tid = mtx_gettid(),
        .source = f->source,
        .action = (uint8_t)action,
    };
    if (action == MEMTRACE_ALLOC)
        ev.category = current_category();
    uint32_t stack = mt_rec.stack_actions & bits ? capture_stack(mt_rec.stack_depth) : 0;
    mt_rlock();
    if (atomic_load_explicit(&mt_rec.recording, memory_order_relaxed)) {
        ev.stack = mt_rec.stack_actions & 1u << ev.action ? stack : 0;
        keep(&ev);
        if (freed) {
            ev.action = MEMTRACE_FREE_COMPLETED;
            ev.stack = mt_rec.stack_actions & 1u << ev.action ? stack : 0;
            keep(&ev);
        }
    }
    mt_runlock();
    tls_busy = 0;
    return stack;
}

int memtrace_record_event_with(struct memtrace_event *ev, memtrace_locked_fn fn, void *ctx)
{
    if (fn == NULL)
        return ev != NULL ? record_batch(ev, 1, NULL, NULL) : MEMTRACE_EINVAL;
    if (ev == NULL)
        return locked_only(NULL, fn, ctx, 0);
    return record_batch(ev, 1, fn, ctx);
}

int memtrace_category_push(const char *name)
{
    if (name == NULL || *name == '\0')
        return MEMTRACE_EINVAL;
    if (tls_ncategories == MAX_NESTING)
        return MEMTRACE_ESTATE;
    uint32_t id = mt_strings_intern(name);
    if (id == 0)
        return MEMTRACE_ENOMEM;
    tls_categories[tls_ncategories++] = id;
    return 0;
}

int memtrace_category_pop(void)
{
    if (tls_ncategories == 0)
        return MEMTRACE_ESTATE;
    tls_ncategories--;
    return 0;
}
