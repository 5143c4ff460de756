/* replay.c: the replay model of replay.h. The rules it applies are docs/REPLAY.md's;
 * every change to them changes that file and the cases under tests/replay/. */
#include "config.h"

#include "replay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mt_point_parse(const char *text, struct mt_point *p)
{
    memset(p, 0, sizeof(*p));
    if (!text || !*text)
        return -1;
    const char *s = text[0] == '#' ? text + 1 : text;
    if (*s >= '0' && *s <= '9') {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || v < 0 || v != v)
            return -1;
        static const struct {
            const char *unit;
            double ns;
        } units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
        if (*end == '\0') {
            /* A plain integer is an event index. */
            unsigned long long n = strtoull(s, &end, 10);
            if (*end != '\0')
                return -1;
            p->kind = MT_POINT_EVENT;
            p->value = n;
            return 0;
        }
        if (text[0] == '#')
            return -1;
        for (size_t k = 0; k < sizeof(units) / sizeof(units[0]); k++) {
            if (strcmp(end, units[k].unit) == 0) {
                double ns = v * units[k].ns;
                if (ns >= 1.8e19)
                    return -1;
                p->kind = MT_POINT_TIME;
                p->value = (uint64_t)ns;
                return 0;
            }
        }
        return -1;
    }
    if (text[0] == '#')
        return -1;
    p->kind = MT_POINT_ANNOTATION;
    p->name = text;
    return 0;
}

int mt_replay_new(struct mt_replay **out, struct memtrace_reader *r, const char *path,
                  const struct mt_filter *f)
{
    *out = NULL;
    struct mt_replay *rp = calloc(1, sizeof(*rp));
    if (!rp) {
        memtrace_reader_close(r);
        return MEMTRACE_ENOMEM;
    }
    rp->r = r;
    rp->ev = &rp->none;
    rp->path = path;
    if (f)
        rp->filter = *f;
    mt_addrtab_init(&rp->blocks, sizeof(struct mt_live));
    mt_addrtab_init(&rp->segs, sizeof(struct mt_live));
    rp->t_min = UINT64_MAX;
    rp->last_alloc_index = UINT64_MAX;
    rp->in_window = rp->filter.from.kind == MT_POINT_NONE;
    *out = rp;
    return 0;
}

int mt_replay_open(struct mt_replay **out, const char *path, const struct mt_filter *f,
                   struct memtrace_errinfo *err)
{
    struct memtrace_reader *r;
    *out = NULL;
    int rc = memtrace_reader_open(&r, path, err);
    if (rc < 0)
        return rc;
    rc = mt_replay_new(out, r, path, f);
    if (rc < 0 && err) {
        err->code = rc;
        err->offset = 0;
        snprintf(err->text, sizeof(err->text), "%s: %s", path, memtrace_strerror(rc));
    }
    return rc;
}

void mt_replay_close(struct mt_replay *rp)
{
    if (!rp)
        return;
    memtrace_reader_close(rp->r);
    mt_addrtab_free(&rp->blocks);
    mt_addrtab_free(&rp->segs);
    free(rp->block_stacks.t);
    free(rp->seg_stacks.t);
    free(rp->dev);
    free(rp);
}

int mt_replay_truncated(const struct mt_replay *rp)
{
    return memtrace_reader_truncated(rp->r);
}

int mt_replay_window_missed(const struct mt_replay *rp)
{
    return rp->filter.from.kind != MT_POINT_NONE && !rp->in_window;
}

static struct mt_tally *tally(struct mt_replay *rp, struct mt_tallies *ts, uint32_t stack)
{
    if (rp->lean)
        return NULL;
    /* The reader checks stack ids against its table; this keeps a tally array from
     * ever being sized by a number a file made up. */
    if (stack > memtrace_reader_stack_count(rp->r))
        stack = 0;
    if (stack >= ts->n) {
        size_t n = ts->n ? ts->n : 256;
        while (n <= stack)
            n *= 2;
        struct mt_tally *t = realloc(ts->t, n * sizeof(*t));
        if (!t) {
            rp->nomem = 1;
            return NULL;
        }
        memset(t + ts->n, 0, (n - ts->n) * sizeof(*t));
        ts->t = t;
        ts->n = n;
    }
    return &ts->t[stack];
}

void mt_tally_at_peak(const struct mt_tallies *ts, const struct mt_level *l, uint32_t stack,
                      uint64_t *bytes, uint64_t *count)
{
    *bytes = *count = 0;
    if (l->epoch == 0 || stack >= ts->n)
        return;
    const struct mt_tally *t = &ts->t[stack];
    if (t->stamp == l->epoch) {
        *bytes = t->saved_bytes;
        *count = t->saved_count;
    } else {
        *bytes = t->live_bytes;
        *count = t->live_count;
    }
}

/* Before a stack's live figures change: if the level peaked since they last changed,
 * what they are now is what they were at that peak, so keep it. */
static void tally_touch(struct mt_tally *t, const struct mt_level *l)
{
    if (t->stamp != l->epoch) {
        t->saved_bytes = t->live_bytes;
        t->saved_count = t->live_count;
        t->stamp = l->epoch;
    }
}

static struct mt_devlevel *devlevel(struct mt_replay *rp, int32_t device)
{
    for (size_t k = 0; k < rp->ndev; k++)
        if (rp->dev[k].device == device)
            return &rp->dev[k];
    struct mt_devlevel *d = realloc(rp->dev, (rp->ndev + 1) * sizeof(*d));
    if (!d) {
        rp->nomem = 1;
        return NULL;
    }
    rp->dev = d;
    d = &rp->dev[rp->ndev++];
    memset(d, 0, sizeof(*d));
    d->device = device;
    return d;
}

const struct mt_devlevel *mt_replay_device(const struct mt_replay *rp, int32_t device)
{
    for (size_t k = 0; k < rp->ndev; k++)
        if (rp->dev[k].device == device)
            return &rp->dev[k];
    return NULL;
}

static void rise(struct mt_replay *rp, struct mt_level *l, uint64_t by)
{
    l->cur += by;
    if (l->cur > l->peak && rp->in_window) {
        l->peak = l->cur;
        l->peak_index = rp->index;
        l->peak_time = rp->ev->time_ns;
        l->epoch++;
    }
}

static void fall(struct mt_level *l, uint64_t by)
{
    l->cur = l->cur >= by ? l->cur - by : 0;
}

/* Whether a new allocation counts under the filter. */
static int counts(struct mt_replay *rp, const struct memtrace_event *ev)
{
    const struct mt_filter *f = &rp->filter;
    if (f->has_device && ev->device != f->device)
        return 0;
    if (f->has_stream && ev->stream != f->stream)
        return 0;
    if (ev->size < f->min_size)
        return 0;
    if (f->category) {
        if (ev->category == 0)
            return 0;
        if (rp->category_id == 0 &&
            strcmp(memtrace_reader_string(rp->r, ev->category), f->category) == 0)
            rp->category_id = ev->category;
        if (ev->category != rp->category_id)
            return 0;
    }
    return 1;
}

/* The entry e (live, counted) leaves its level and its stack's tally. */
static void leave(struct mt_replay *rp, const struct mt_live *e, int is_seg)
{
    struct mt_level *l = is_seg ? &rp->reserved : &rp->allocated;
    fall(l, e->size);
    if (!is_seg && !e->pending)
        fall(&rp->in_use, e->size);
    struct mt_devlevel *d = rp->lean ? NULL : devlevel(rp, e->device);
    if (d)
        fall(is_seg ? &d->reserved : &d->allocated, e->size);
    struct mt_tally *t = tally(rp, is_seg ? &rp->seg_stacks : &rp->block_stacks, e->stack);
    if (t) {
        tally_touch(t, l);
        t->live_bytes -= e->size;
        t->live_count--;
    }
}

/* A new live entry for ev, replacing one at the same address: the recorder missed its
 * free, and counting both would leave bytes that are never freed. An initial entry
 * (rule 0: live before the first event) is no allocation: it adds nothing to the
 * stacks' allocated totals. */
static struct mt_live *enter_ev(struct mt_replay *rp, const struct memtrace_event *ev, int is_seg,
                                int initial)
{
    struct mt_addrtab *tab = is_seg ? &rp->segs : &rp->blocks;
    int existed;
    struct mt_live *e = mt_addrtab_get(tab, ev->addr, &existed);
    if (!e) {
        rp->nomem = 1;
        return NULL;
    }
    if (existed) {
        rp->eff.replaced = 1;
        rp->eff.gone = *e;
        struct mt_count *c = is_seg ? &rp->replaced_segs : &rp->replaced_allocs;
        c->count++;
        c->bytes += e->size;
        if (e->counted)
            leave(rp, e, is_seg);
    }
    e->size = ev->size;
    e->requested = ev->requested_size ? ev->requested_size : ev->size;
    e->stream = ev->stream;
    e->time = ev->time_ns;
    e->index = rp->index;
    e->stack = ev->stack <= memtrace_reader_stack_count(rp->r) ? ev->stack : 0;
    e->category = ev->category;
    e->source = ev->source;
    e->mapped = ev->action == MEMTRACE_SEGMENT_MAP;
    e->device = ev->device;
    e->pool = ev->pool;
    e->pending = 0;
    e->initial = (uint8_t)initial;
    e->counted = (uint8_t)counts(rp, ev);
    rp->eff.bytes = ev->size;
    if (!e->counted)
        return e;
    struct mt_level *l = is_seg ? &rp->reserved : &rp->allocated;
    struct mt_tally *t = tally(rp, is_seg ? &rp->seg_stacks : &rp->block_stacks, e->stack);
    if (t) {
        tally_touch(t, l);
        t->live_bytes += ev->size;
        t->live_count++;
        if (rp->in_window && !initial) {
            t->alloc_bytes += ev->size;
            t->alloc_count++;
        }
    }
    struct mt_devlevel *d = rp->lean ? NULL : devlevel(rp, ev->device);
    if (d) {
        struct mt_level *dl = is_seg ? &d->reserved : &d->allocated;
        dl->cur += ev->size;
        if (dl->cur > dl->peak && rp->in_window) {
            dl->peak = dl->cur;
            dl->peak_index = rp->index;
            dl->peak_time = ev->time_ns;
        }
    }
    rise(rp, l, ev->size);
    if (!is_seg)
        rise(rp, &rp->in_use, ev->size);
    return e;
}

static void enter(struct mt_replay *rp, int is_seg)
{
    enter_ev(rp, rp->ev, is_seg, 0);
}

/* Rule 0: the state read before the first event is live from the start, applied
 * just before event 0 (whose index and time a peak it makes takes). */
static void seed(struct mt_replay *rp)
{
    size_t n = memtrace_reader_segment_count(rp->r);
    for (size_t i = 0; i < n && !rp->nomem; i++) {
        const struct memtrace_segment *g = memtrace_reader_segment(rp->r, i);
        struct memtrace_event ev = {.time_ns = rp->ev->time_ns,
                                    .addr = g->addr,
                                    .size = g->total_size,
                                    .stream = g->stream,
                                    .device = g->device,
                                    /* a snapshot's default pools: by segment_type */
                                    .pool = g->pool       ? g->pool
                                            : g->is_large ? 2
                                                          : 1,
                                    .stack = g->stack,
                                    .source = g->source,
                                    .action = MEMTRACE_SEGMENT_ALLOC};
        struct mt_live *e = enter_ev(rp, &ev, 1, 1);
        if (e && e->counted && rp->on_initial)
            rp->on_initial(rp->on_initial_ctx, e, 1);
        for (size_t k = 0; k < g->nblocks && !rp->nomem; k++) {
            const struct memtrace_block *b = &g->blocks[k];
            if (b->state != MEMTRACE_BLOCK_ACTIVE_ALLOCATED &&
                b->state != MEMTRACE_BLOCK_ACTIVE_PENDING_FREE)
                continue;
            ev.addr = b->addr;
            ev.size = b->size;
            ev.requested_size = b->requested_size;
            ev.stack = b->stack;
            ev.source = 0;
            ev.action = MEMTRACE_ALLOC;
            e = enter_ev(rp, &ev, 0, 1);
            if (e && b->state == MEMTRACE_BLOCK_ACTIVE_PENDING_FREE) {
                e->pending = 1;
                if (e->counted)
                    fall(&rp->in_use, e->size);
            }
            if (e && e->counted && rp->on_initial)
                rp->on_initial(rp->on_initial_ctx, e, 0);
        }
    }
    rp->eff.bytes = 0;
}

static void apply_block(struct mt_replay *rp)
{
    const struct memtrace_event *ev = rp->ev;
    switch (ev->action) {
    case MEMTRACE_ALLOC:
        rp->eff.kind = MT_EFF_ALLOC;
        rp->allocs.count++;
        rp->allocs.bytes += ev->size;
        enter(rp, 0);
        rp->last_alloc_index = rp->index;
        return;
    case MEMTRACE_FREE_REQUESTED: {
        rp->free_requests.count++;
        rp->free_requests.bytes += ev->size;
        struct mt_live *e = mt_addrtab_find(&rp->blocks, ev->addr);
        if (e) {
            /* Copied before the byte store to pending: read back whole after it, the
             * entry stalled on the store (a quarter of mt_replay_next's time). */
            rp->eff.gone = *e;
            rp->eff.gone.pending = 1;
            if (!e->pending && e->counted) {
                fall(&rp->in_use, e->size);
                rp->eff.bytes = e->size;
            }
            e->pending = 1;
            rp->eff.kind = MT_EFF_PENDING;
        }
        return;
    }
    case MEMTRACE_FREE_COMPLETED: {
        struct mt_live *e = mt_addrtab_find(&rp->blocks, ev->addr);
        if (!e) {
            rp->eff.kind = MT_EFF_UNMATCHED;
            rp->eff.bytes = ev->size;
            rp->unmatched_frees.count++;
            rp->unmatched_frees.bytes += ev->size;
            return;
        }
        rp->eff.kind = MT_EFF_FREE;
        rp->eff.gone = *e;
        rp->eff.bytes = e->size;
        rp->frees.count++;
        rp->frees.bytes += e->size;
        if (e->counted) {
            leave(rp, e, 0);
            if (e->index == rp->last_alloc_index && !e->initial) {
                rp->eff.temporary = 1;
                struct mt_tally *t = tally(rp, &rp->block_stacks, e->stack);
                if (t && rp->in_window) {
                    t->temp_count++;
                    t->temp_bytes += e->size;
                }
            }
        }
        mt_addrtab_remove(&rp->blocks, e);
        return;
    }
    default:
        return;
    }
}

/* Removes the piece e, or trims it to what lies past `left` bytes. */
static void seg_drop(struct mt_replay *rp, struct mt_live *e, uint64_t left, uint64_t *freed)
{
    struct mt_live piece = *e;
    if (piece.counted)
        leave(rp, &piece, 1);
    mt_addrtab_remove(&rp->segs, e);
    if (left == 0 || piece.size <= left) {
        *freed += piece.size;
        return;
    }
    /* Part of the piece stays mapped: it lives on at addr + left. */
    *freed += left;
    struct mt_live *rest = mt_addrtab_get(&rp->segs, piece.head.key + left, NULL);
    if (!rest) {
        rp->nomem = 1;
        return;
    }
    struct mt_addrtab_head head = rest->head;
    *rest = piece;
    rest->head = head;
    rest->size = piece.size - left;
    if (!rest->counted)
        return;
    struct mt_tally *t = tally(rp, &rp->seg_stacks, rest->stack);
    if (t) {
        tally_touch(t, &rp->reserved);
        t->live_bytes += rest->size;
        t->live_count++;
    }
    rp->reserved.cur += rest->size;
    struct mt_devlevel *d = rp->lean ? NULL : devlevel(rp, rest->device);
    if (d)
        d->reserved.cur += rest->size;
}

/* segment_free releases the whole piece at addr. segment_unmap releases size bytes
 * from addr: expandable segments map in pieces and may unmap several pieces, or part
 * of one, at once, so it walks live pieces from addr and trims a partly unmapped one. */
static void apply_seg(struct mt_replay *rp)
{
    const struct memtrace_event *ev = rp->ev;
    switch (ev->action) {
    case MEMTRACE_SEGMENT_ALLOC:
    case MEMTRACE_SEGMENT_MAP:
        rp->eff.kind = MT_EFF_SEG_ADD;
        rp->seg_allocs.count++;
        rp->seg_allocs.bytes += ev->size;
        enter(rp, 1);
        return;
    case MEMTRACE_SEGMENT_FREE:
    case MEMTRACE_SEGMENT_UNMAP: {
        int unmap = ev->action == MEMTRACE_SEGMENT_UNMAP;
        uint64_t at = ev->addr, left = unmap ? ev->size : 0, freed = 0;
        struct mt_live *e;
        int matched = 0;
        while ((e = mt_addrtab_find(&rp->segs, at)) != NULL) {
            uint64_t sz = e->size;
            if (!matched)
                rp->eff.gone = *e;
            matched = 1;
            seg_drop(rp, e, left, &freed);
            if (!unmap || left == 0 || sz >= left || sz == 0)
                break;
            left -= sz;
            at += sz;
        }
        if (!matched) {
            rp->eff.kind = MT_EFF_UNMATCHED;
            rp->eff.bytes = ev->size;
            rp->unmatched_seg_frees.count++;
            rp->unmatched_seg_frees.bytes += ev->size;
            return;
        }
        rp->eff.kind = MT_EFF_SEG_REMOVE;
        rp->eff.bytes = freed;
        rp->seg_frees.count++;
        rp->seg_frees.bytes += freed;
        return;
    }
    default:
        return;
    }
}

/* Annotation windows: the tid and nesting of the annotation named for --to, so that
 * its pop (which carries no name) is found. */
static int point_reached(struct mt_replay *rp, const struct mt_point *p, int is_end)
{
    const struct memtrace_event *ev = rp->ev;
    switch (p->kind) {
    case MT_POINT_TIME:
        return ev->time_ns - rp->t_first >= p->value;
    case MT_POINT_EVENT:
        return rp->index >= p->value;
    case MT_POINT_ANNOTATION:
        return ev->action == MEMTRACE_ANNOTATE && ev->category &&
               (!is_end || ev->aux == MEMTRACE_ANNOTATE_MARK) &&
               strcmp(memtrace_reader_string(rp->r, ev->category), p->name) == 0;
    default:
        return 0;
    }
}

static int window_closes(struct mt_replay *rp)
{
    const struct mt_point *to = &rp->filter.to;
    const struct memtrace_event *ev = rp->ev;
    if (to->kind == MT_POINT_NONE)
        return 0;
    if (to->kind == MT_POINT_TIME)
        return ev->time_ns - rp->t_first > to->value;
    if (to->kind == MT_POINT_EVENT)
        return rp->index > to->value;
    return 0;
}

/* For an annotation --to: a push of the name opens a count of its thread's nesting;
 * the pop that brings it back to zero ends the window (after that event). */
static int annotation_ends(struct mt_replay *rp)
{
    const struct memtrace_event *ev = rp->ev;
    if (rp->filter.to.kind != MT_POINT_ANNOTATION || ev->action != MEMTRACE_ANNOTATE)
        return 0;
    if (ev->aux == MEMTRACE_ANNOTATE_MARK)
        return point_reached(rp, &rp->filter.to, 1);
    if (!rp->to_open) {
        if (ev->aux == MEMTRACE_ANNOTATE_PUSH && point_reached(rp, &rp->filter.to, 0)) {
            rp->to_open = 1;
            rp->to_tid = ev->tid;
            rp->to_depth = 1;
        }
        return 0;
    }
    if (ev->tid != rp->to_tid)
        return 0;
    if (ev->aux == MEMTRACE_ANNOTATE_PUSH)
        rp->to_depth++;
    else if (ev->aux == MEMTRACE_ANNOTATE_POP && --rp->to_depth == 0)
        return 1;
    return 0;
}

int mt_replay_next(struct mt_replay *rp)
{
    if (rp->window_done)
        return 0;
    int rc = memtrace_reader_next_ref(rp->r, &rp->ev);
    if (rc <= 0)
        return rc;
    const struct memtrace_event *ev = rp->ev;
    rp->index = rp->events++;
    if (rp->index == 0)
        rp->t_first = ev->time_ns;
    if (ev->time_ns < rp->t_min)
        rp->t_min = ev->time_ns;
    if (ev->time_ns > rp->t_max)
        rp->t_max = ev->time_ns;
    if (window_closes(rp)) {
        /* This event lies past the window: it is read but not applied. */
        rp->events--;
        rp->window_done = 1;
        return 0;
    }
    if (!rp->in_window && point_reached(rp, &rp->filter.from, 0))
        rp->in_window = 1;
    if (rp->index == 0)
        seed(rp);
    if (ev->action < MEMTRACE_ACTION_COUNT)
        rp->actions[ev->action]++;
    else
        rp->unknown_actions++;
    /* Not a memset: gone is 80 bytes that only FREE, PENDING, SEG_REMOVE and a
     * replacement fill and read, and clearing it was 5% of a replay. */
    rp->eff.kind = MT_EFF_NONE;
    rp->eff.replaced = 0;
    rp->eff.temporary = 0;
    rp->eff.bytes = 0;
    switch (ev->action) {
    case MEMTRACE_ALLOC:
    case MEMTRACE_FREE_REQUESTED:
    case MEMTRACE_FREE_COMPLETED:
        apply_block(rp);
        break;
    case MEMTRACE_SEGMENT_ALLOC:
    case MEMTRACE_SEGMENT_FREE:
    case MEMTRACE_SEGMENT_MAP:
    case MEMTRACE_SEGMENT_UNMAP:
        apply_seg(rp);
        break;
    case MEMTRACE_ANNOTATE:
        rp->annotations++;
        break;
    case MEMTRACE_OOM:
        if (rp->ooms.count++ == 0 || ev->size > rp->oom_largest) {
            rp->oom_largest = ev->size;
            rp->oom_free = ev->aux;
        }
        rp->ooms.bytes += ev->size;
        break;
    case MEMTRACE_COUNTER: {
        struct mt_devlevel *d = devlevel(rp, ev->device);
        if (d) {
            d->used = ev->addr;
            d->total = ev->size;
            d->rss = ev->requested_size;
        }
        break;
    }
    default:
        break;
    }
    if (rp->nomem)
        return MEMTRACE_ENOMEM;
    if (annotation_ends(rp))
        rp->window_done = 1;
    return 1;
}

int mt_replay_to(struct mt_replay *rp, uint64_t index)
{
    int rc;
    while ((rc = mt_replay_next(rp)) == 1)
        if (rp->index >= index)
            return 1;
    return rc;
}

int mt_replay_run(struct mt_replay *rp)
{
    int rc;
    while ((rc = mt_replay_next(rp)) == 1)
        ;
    return rc;
}
