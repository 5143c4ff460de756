/* before.c: what a trace shows was live before it began (see before.h).
 *
 * PyTorch keeps the last N trace entries (max_entries) but lists every segment and
 * block in the snapshot, and so does memtrace's dump of its ring; so a trace usually
 * begins with memory in use: frees of blocks it never saw allocated, segments it
 * never saw made. A .memtrace file says so with a state chunk before its first event
 * (docs/REPLAY.md, rule 0); this module finds that state, as MemoryViz finds its
 * "initially allocated" elements:
 *
 * - walking the trace, a free_requested or free_completed of a block no alloc made
 *   (and not found before) was live before the trace, with the free's size and
 *   frames (PyTorch gives a free the frames of the allocation); a segment_free or
 *   segment_unmap of a segment no event made likewise;
 * - at the end, a segment of the snapshot that no live segment of the trace overlaps,
 *   and an active block of the snapshot that the trace did not allocate, were live
 *   before it too (and never freed).
 *
 * The state lists those segments with the blocks found inside them; a block found
 * inside none (its segment was made in the trace, which cannot be, or is unknown) is
 * counted and left out. Memory grows with live blocks and segments, as the replay's. */
#include "config.h"

#include "before.h"

#include <stdlib.h>
#include <string.h>

#include "addrtab.h"
#include "memtrace.h"

/* A block live before the trace. */
struct pblock {
    struct mt_addrtab_head head;
    uint64_t size, requested;
    uint32_t stack;
    uint8_t pending;
};

/* A segment: live in the trace (size), or live before it (size, stream, pool). */
struct pseg {
    struct mt_addrtab_head head;
    uint64_t size, stream;
    int32_t pool;
    uint32_t stack;
    int is_large;
};

struct dev {
    int32_t device;
    struct mt_addrtab live;   /* blocks the trace allocated, live now (head only) */
    struct mt_addrtab pre;    /* struct pblock */
    struct mt_addrtab segs;   /* segments the trace made, live now (struct pseg) */
    struct mt_addrtab preseg; /* struct pseg */
    void **live_sorted;       /* segs by address, made once the trace has ended */
    size_t nlive_sorted;
};

struct mt_before {
    struct dev *dev;
    size_t ndev;
};

struct mt_before *mt_before_new(void)
{
    return calloc(1, sizeof(struct mt_before));
}

void mt_before_free(struct mt_before *b)
{
    if (!b)
        return;
    for (size_t k = 0; k < b->ndev; k++) {
        mt_addrtab_free(&b->dev[k].live);
        mt_addrtab_free(&b->dev[k].pre);
        mt_addrtab_free(&b->dev[k].segs);
        mt_addrtab_free(&b->dev[k].preseg);
        free(b->dev[k].live_sorted);
    }
    free(b->dev);
    free(b);
}

static struct dev *dev_of(struct mt_before *b, int32_t device)
{
    for (size_t k = 0; k < b->ndev; k++)
        if (b->dev[k].device == device)
            return &b->dev[k];
    struct dev *d = realloc(b->dev, (b->ndev + 1) * sizeof(*d));
    if (!d)
        return NULL;
    b->dev = d;
    d = &b->dev[b->ndev++];
    memset(d, 0, sizeof(*d));
    d->device = device;
    mt_addrtab_init(&d->live, sizeof(struct mt_addrtab_head));
    mt_addrtab_init(&d->pre, sizeof(struct pblock));
    mt_addrtab_init(&d->segs, sizeof(struct pseg));
    mt_addrtab_init(&d->preseg, sizeof(struct pseg));
    return d;
}

/* A block live before the trace, found by an event or by the final state. */
static int add_block(struct dev *d, uint64_t addr, uint64_t size, uint64_t requested,
                     uint32_t stack, int pending)
{
    int existed;
    struct pblock *p = mt_addrtab_get(&d->pre, addr, &existed);
    if (!p)
        return MEMTRACE_ENOMEM;
    if (!existed) {
        p->size = size;
        p->requested = requested ? requested : size;
        p->stack = stack;
        p->pending = (uint8_t)pending;
    }
    return 0;
}

int mt_before_event(struct mt_before *b, const struct memtrace_event *ev)
{
    struct dev *d = dev_of(b, ev->device);
    if (!d)
        return MEMTRACE_ENOMEM;
    int existed;
    void *e;
    switch (ev->action) {
    case MEMTRACE_ALLOC:
        return mt_addrtab_get(&d->live, ev->addr, NULL) ? 0 : MEMTRACE_ENOMEM;
    case MEMTRACE_FREE_REQUESTED:
        if (mt_addrtab_find(&d->live, ev->addr) || mt_addrtab_find(&d->pre, ev->addr))
            return 0;
        /* live before, requested now: it stays live (pending) until its free_completed */
        if (add_block(d, ev->addr, ev->size, ev->requested_size, ev->stack, 0) != 0)
            return MEMTRACE_ENOMEM;
        return mt_addrtab_get(&d->live, ev->addr, NULL) ? 0 : MEMTRACE_ENOMEM;
    case MEMTRACE_FREE_COMPLETED:
        if ((e = mt_addrtab_find(&d->live, ev->addr)) != NULL) {
            mt_addrtab_remove(&d->live, e);
            return 0;
        }
        /* a block found before keeps what it was found with: freed once already, this
         * is an unmatched free, as the replay says */
        return add_block(d, ev->addr, ev->size, ev->requested_size, ev->stack, 0);
    case MEMTRACE_SEGMENT_ALLOC:
    case MEMTRACE_SEGMENT_MAP: {
        struct pseg *s = mt_addrtab_get(&d->segs, ev->addr, NULL);
        if (!s)
            return MEMTRACE_ENOMEM;
        s->size = ev->size;
        return 0;
    }
    case MEMTRACE_SEGMENT_FREE:
    case MEMTRACE_SEGMENT_UNMAP:
        if ((e = mt_addrtab_find(&d->segs, ev->addr)) != NULL) {
            mt_addrtab_remove(&d->segs, e);
            return 0;
        }
        {
            struct pseg *s = mt_addrtab_get(&d->preseg, ev->addr, &existed);
            if (!s)
                return MEMTRACE_ENOMEM;
            if (!existed) {
                s->size = ev->size;
                s->stream = ev->stream;
                s->pool = ev->pool;
                s->is_large = 1;
            }
        }
        return 0;
    default:
        return 0;
    }
}

/* Whether a segment the trace made and left live overlaps [addr, addr + size): the
 * live one that starts last below its end must end past addr (the allocator's
 * segments do not overlap each other; for a file where they do, the answer may be
 * wrong, never slow). live: the live segments sorted by address. */
static int overlaps_live(void *const *live, size_t n, uint64_t addr, uint64_t size)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (((const struct pseg *)live[mid])->head.key < addr + size)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 0;
    const struct pseg *s = live[lo - 1];
    return s->head.key + s->size > addr;
}

int mt_before_state(struct mt_before *b, const struct memtrace_segment *final, size_t nfinal,
                    struct mt_before_state *out)
{
    memset(out, 0, sizeof(*out));
    /* the snapshot's segments and active blocks that the trace did not make */
    int nomem = 0;
    for (size_t i = 0; i < nfinal; i++) {
        const struct memtrace_segment *g = &final[i];
        struct dev *d = dev_of(b, g->device);
        if (!d)
            return MEMTRACE_ENOMEM;
        if (d->live_sorted == NULL && d->segs.n &&
            mt_addrtab_sorted(&d->segs, &d->live_sorted, &d->nlive_sorted) != 0)
            return MEMTRACE_ENOMEM;
        if (!overlaps_live(d->live_sorted, d->nlive_sorted, g->addr, g->total_size)) {
            struct pseg *s = mt_addrtab_get(&d->preseg, g->addr, NULL);
            if (!s)
                return MEMTRACE_ENOMEM;
            s->size = g->total_size;
            s->stream = g->stream;
            s->pool = g->pool;
            s->stack = g->stack;
            s->is_large = g->is_large;
        }
        for (size_t k = 0; k < g->nblocks; k++) {
            const struct memtrace_block *x = &g->blocks[k];
            if (x->state != MEMTRACE_BLOCK_ACTIVE_ALLOCATED &&
                x->state != MEMTRACE_BLOCK_ACTIVE_PENDING_FREE)
                continue;
            if (mt_addrtab_find(&d->live, x->addr) || mt_addrtab_find(&d->pre, x->addr))
                continue;
            if (add_block(d, x->addr, x->size, x->requested_size, x->stack,
                          x->state == MEMTRACE_BLOCK_ACTIVE_PENDING_FREE) != 0)
                return MEMTRACE_ENOMEM;
        }
    }
    size_t nseg = 0, nblk = 0;
    for (size_t k = 0; k < b->ndev; k++) {
        nseg += b->dev[k].preseg.n;
        nblk += b->dev[k].pre.n;
    }
    if (nseg == 0) {
        out->dropped = nblk;
        return 0;
    }
    out->segs = calloc(nseg, sizeof(*out->segs));
    out->blocks = calloc(nblk ? nblk : 1, sizeof(*out->blocks));
    if (!out->segs || !out->blocks) {
        mt_before_state_free(out);
        return MEMTRACE_ENOMEM;
    }
    for (size_t k = 0; k < b->ndev && !nomem; k++) {
        struct dev *d = &b->dev[k];
        size_t ns = 0, nb = 0, j = 0;
        void **sv = NULL, **bv = NULL;
        if (mt_addrtab_sorted(&d->preseg, &sv, &ns) != 0 ||
            mt_addrtab_sorted(&d->pre, &bv, &nb) != 0)
            nomem = 1;
        for (size_t i = 0; i < ns && !nomem; i++) {
            const struct pseg *s = sv[i];
            struct memtrace_segment *g = &out->segs[out->nsegs++];
            g->addr = s->head.key;
            g->total_size = s->size;
            g->stream = s->stream;
            g->device = d->device;
            g->pool = s->pool;
            g->is_large = s->is_large;
            g->stack = s->stack;
            struct memtrace_block *first = out->blocks + out->nblocks;
            for (; j < nb && ((const struct pblock *)bv[j])->head.key < g->addr; j++)
                out->dropped++; /* below this segment and above the one before */
            for (; j < nb && ((const struct pblock *)bv[j])->head.key < g->addr + g->total_size;
                 j++) {
                const struct pblock *p = bv[j];
                struct memtrace_block *x = &out->blocks[out->nblocks++];
                x->addr = p->head.key;
                x->size = p->size;
                x->requested_size = p->requested;
                x->stack = p->stack;
                x->state = p->pending ? MEMTRACE_BLOCK_ACTIVE_PENDING_FREE
                                      : MEMTRACE_BLOCK_ACTIVE_ALLOCATED;
                g->allocated_size += p->size;
                g->active_size += p->size;
                g->requested_size += p->requested;
            }
            g->blocks = first;
            g->nblocks = (size_t)(out->blocks + out->nblocks - first);
            out->live_blocks += g->nblocks;
        }
        out->dropped += nb - j;
        free(sv);
        free(bv);
    }
    if (nomem) {
        mt_before_state_free(out);
        return MEMTRACE_ENOMEM;
    }
    return 0;
}

void mt_before_state_free(struct mt_before_state *s)
{
    free(s->segs);
    free(s->blocks);
    memset(s, 0, sizeof(*s));
}
