/* cache.c: the caching allocator's policy (PyTorch's CUDA caching allocator, in C).
 *
 * Free blocks of each pool sit in a treap ordered by (stream, size, address), so the
 * best fit for a request is one lower-bound search; allocated blocks sit in a hash
 * table by address. Blocks of a segment are a list in address order, which is what
 * splitting and merging walk. Descriptors come from mmap'd chunks and are recycled,
 * so the hot path never calls libc malloc. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_impl.h"
#include "mtx/pattern.h"
#include "recorder.h"

#define DESC_CHUNK    (64 * 1024)
#define MAX_OBSERVERS 32

struct mt_desc_chunk {
    struct mt_desc_chunk *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct memtrace_allocator *registry;

static pthread_mutex_t obs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    memtrace_oom_observer_fn fn;
    void *ctx;
    int handle;
} observers[MAX_OBSERVERS];
static int next_observer = 1;
static unsigned oom_dump_counter;

/* ---- descriptors ---- */

static void *desc_alloc(struct memtrace_allocator *a, size_t size)
{
    if (a->arena.left < size) {
        struct mt_desc_chunk *c = mtx_map(DESC_CHUNK);
        if (!c)
            return NULL;
        c->next = a->chunks;
        a->chunks = c;
        a->arena.cur = (char *)c + 64;
        a->arena.left = DESC_CHUNK - 64;
    }
    void *p = a->arena.cur;
    size_t step = (size + 15) & ~(size_t)15;
    step = step < a->arena.left ? step : a->arena.left;
    a->arena.cur += step;
    a->arena.left -= step;
    return p;
}

static struct mt_block *block_new(struct memtrace_allocator *a)
{
    struct mt_block *b = a->free_blocks;
    if (b)
        a->free_blocks = b->hnext;
    else if (!(b = desc_alloc(a, sizeof(*b))))
        return NULL;
    memset(b, 0, sizeof(*b));
    return b;
}

static void block_put(struct memtrace_allocator *a, struct mt_block *b)
{
    if (b->streams)
        free(b->streams);
    b->streams = NULL;
    b->hnext = a->free_blocks;
    a->free_blocks = b;
}

static struct mt_segment *segment_new(struct memtrace_allocator *a)
{
    struct mt_segment *s = a->free_segments;
    if (s)
        a->free_segments = s->next;
    else if (!(s = desc_alloc(a, sizeof(*s))))
        return NULL;
    memset(s, 0, sizeof(*s));
    return s;
}

static void segment_link(struct memtrace_allocator *a, struct mt_segment *s)
{
    s->prev = NULL;
    s->next = a->segments;
    if (a->segments)
        a->segments->prev = s;
    a->segments = s;
}

static void segment_unlink_put(struct memtrace_allocator *a, struct mt_segment *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        a->segments = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->next = a->free_segments;
    a->free_segments = s;
}

/* ---- free tree: a treap keyed by (stream, size, addr), priority from the address ---- */

static inline uint64_t prio(const struct mt_block *b)
{
    return b->prio;
}

static inline int key_less(uint64_t s1, uint64_t z1, uint64_t a1, uint64_t s2, uint64_t z2,
                           uint64_t a2)
{
    if (s1 != s2)
        return s1 < s2;
    if (z1 != z2)
        return z1 < z2;
    return a1 < a2;
}

static inline int block_less(const struct mt_block *x, const struct mt_block *y)
{
    return key_less(x->stream, x->size, x->addr, y->stream, y->size, y->addr);
}

static struct mt_block *treap_insert(struct mt_block *t, struct mt_block *b)
{
    if (!t) {
        b->left = b->right = NULL;
        return b;
    }
    if (block_less(b, t)) {
        t->left = treap_insert(t->left, b);
        if (prio(t->left) > prio(t)) {
            struct mt_block *l = t->left;
            t->left = l->right;
            l->right = t;
            return l;
        }
    } else {
        t->right = treap_insert(t->right, b);
        if (prio(t->right) > prio(t)) {
            struct mt_block *r = t->right;
            t->right = r->left;
            r->left = t;
            return r;
        }
    }
    return t;
}

static struct mt_block *treap_merge(struct mt_block *l, struct mt_block *r)
{
    if (!l)
        return r;
    if (!r)
        return l;
    if (prio(l) > prio(r)) {
        l->right = treap_merge(l->right, r);
        return l;
    }
    r->left = treap_merge(l, r->left);
    return r;
}

static struct mt_block *treap_erase(struct mt_block *t, struct mt_block *b)
{
    struct mt_block **link = &t, *root = t;
    while (*link && *link != b)
        link = block_less(b, *link) ? &(*link)->left : &(*link)->right;
    if (*link)
        *link = treap_merge(b->left, b->right);
    return link == &t ? t : root;
}

/* inactive_split counts the cached blocks that are a piece of a segment; a cached
 * block's neighbours are never cached themselves (they would have been merged), so
 * its count is settled when it enters and leaves the tree. */
static void tree_insert(struct memtrace_allocator *a, struct mt_block *b)
{
    b->prio = mtx_hash_u64(b->addr);
    a->tree[b->pool] = treap_insert(a->tree[b->pool], b);
    b->in_tree = 1;
    if (b->prev || b->next) {
        mt_stat_update(a->stats.inactive_split, b->pool, 1);
        mt_stat_update(a->stats.inactive_split_bytes, b->pool, (int64_t)b->size);
    }
}

static void tree_remove(struct memtrace_allocator *a, struct mt_block *b)
{
    a->tree[b->pool] = treap_erase(a->tree[b->pool], b);
    b->in_tree = 0;
    b->left = b->right = NULL;
    if (b->prev || b->next) {
        mt_stat_update(a->stats.inactive_split, b->pool, -1);
        mt_stat_update(a->stats.inactive_split_bytes, b->pool, -(int64_t)b->size);
    }
}

static struct mt_block *tree_lower_bound(struct mt_block *t, uint64_t stream, uint64_t size)
{
    struct mt_block *best = NULL;
    while (t) {
        if (key_less(t->stream, t->size, t->addr, stream, size, 0)) {
            t = t->right;
        } else {
            best = t;
            t = t->left;
        }
    }
    return best;
}

/* ---- address hash of allocated blocks ---- */

static int hash_grow(struct memtrace_allocator *a)
{
    size_t n = a->nbuckets ? a->nbuckets * 2 : 1024;
    struct mt_block **nb = mtx_map(n * sizeof(*nb));
    if (!nb)
        return MEMTRACE_ENOMEM;
    for (size_t i = 0; i < a->nbuckets; i++) {
        struct mt_block *b = a->buckets[i], *next;
        for (; b; b = next) {
            size_t h = mtx_hash_u64(b->addr) & (n - 1);
            next = b->hnext;
            b->hnext = nb[h];
            nb[h] = b;
        }
    }
    if (a->buckets)
        mtx_unmap(a->buckets, a->nbuckets * sizeof(*nb));
    a->buckets = nb;
    a->nbuckets = n;
    return 0;
}

static int hash_insert(struct memtrace_allocator *a, struct mt_block *b)
{
    if (a->nhashed >= a->nbuckets && hash_grow(a))
        return MEMTRACE_ENOMEM;
    size_t h = mtx_hash_u64(b->addr) & (a->nbuckets - 1);
    b->hnext = a->buckets[h];
    a->buckets[h] = b;
    a->nhashed++;
    return 0;
}

static struct mt_block *hash_find(struct memtrace_allocator *a, uint64_t addr, int remove)
{
    if (!a->nbuckets)
        return NULL;
    struct mt_block **link = &a->buckets[mtx_hash_u64(addr) & (a->nbuckets - 1)];
    for (; *link; link = &(*link)->hnext) {
        struct mt_block *b = *link;
        if (b->addr == addr) {
            if (remove) {
                *link = b->hnext;
                b->hnext = NULL;
                a->nhashed--;
            }
            return b;
        }
    }
    return NULL;
}

/* ---- recording ---- */

/* 1 while recording, with the allocator's source string interned. */
static int recording(struct memtrace_allocator *a)
{
    if (!memtrace_is_recording())
        return 0;
    if (MTX_UNLIKELY(!a->source))
        a->source = memtrace_intern("caching_allocator");
    return 1;
}

static uint32_t record(struct memtrace_allocator *a, int action, uint64_t addr, uint64_t size,
                       uint64_t requested, uint64_t stream, int pool, uint64_t aux)
{
    if (!recording(a))
        return 0;
    struct mt_block_event f = {
        .addr = addr,
        .size = size,
        .requested = requested,
        .stream = stream,
        .aux = aux,
        .device = a->device,
        .pool = pool + 1,
        .source = a->source,
        .action = action,
    };
    return mt_record_block(&f, 0);
}

/* A block freed at once: free_requested and free_completed, one time, one lock. */
static void record_free_now(struct memtrace_allocator *a, const struct mt_block *b, int pool)
{
    if (!recording(a))
        return;
    struct mt_block_event f = {
        .addr = b->addr,
        .size = b->size,
        .requested = b->requested,
        .stream = b->stream,
        .device = a->device,
        .pool = pool + 1,
        .source = a->source,
    };
    mt_record_block(&f, 1);
}

/* ---- sizes ---- */

static uint64_t round_size(const struct mt_alloc_settings *s, uint64_t size)
{
    unsigned lg, idx, div;
    if (size <= MT_MIN_BLOCK)
        return MT_MIN_BLOCK;
    lg = 63u - (unsigned)__builtin_clzll(size);
    idx = lg > 20 ? lg - 20 : 0;
    if (idx >= MT_DIV_INTERVALS)
        idx = MT_DIV_INTERVALS - 1;
    div = s->divisions[idx];
    if (div > 1 && size > MT_MIN_BLOCK * div) {
        uint64_t floor = 1ull << lg, step = floor / div;
        if (floor == size)
            return size;
        return (size + step - 1) & ~(step - 1);
    }
    return (size + MT_MIN_BLOCK - 1) & ~(MT_MIN_BLOCK - 1);
}

static uint64_t segment_size(uint64_t size)
{
    if (size <= MT_SMALL_SIZE)
        return MT_SMALL_BUFFER;
    if (size < MT_MIN_LARGE_ALLOC)
        return MT_LARGE_BUFFER;
    return (size + MT_ROUND_LARGE - 1) & ~(MT_ROUND_LARGE - 1);
}

/* ---- segments ---- */

static int segment_alloc(struct memtrace_allocator *a, int pool, uint64_t stream, uint64_t size,
                         struct mt_block **out)
{
    struct mt_segment *s = segment_new(a);
    struct mt_block *b = block_new(a);
    uint64_t addr;
    int rc;
    if (!s || !b)
        goto out;
    rc = memtrace_device_malloc(a->dev, size, &addr);
    if (rc) {
        block_put(a, b);
        s->next = a->free_segments;
        a->free_segments = s;
        return rc;
    }
    a->stats.num_device_alloc++;
    s->addr = addr;
    s->size = s->vsize = size;
    s->stream = stream;
    s->pool = (uint8_t)pool;
    s->first = b;
    b->addr = addr;
    b->size = size;
    b->stream = stream;
    b->seg = s;
    b->pool = (uint8_t)pool;
    segment_link(a, s);
    mt_stat_update(a->stats.segment, pool, 1);
    mt_stat_update(a->stats.reserved_bytes, pool, (int64_t)size);
    s->stack = record(a, MEMTRACE_SEGMENT_ALLOC, addr, size, size, stream, pool, 0);
    *out = b;
    return 0;
out:
    if (b)
        block_put(a, b);
    if (s) {
        s->next = a->free_segments;
        a->free_segments = s;
    }
    return MEMTRACE_ENOMEM;
}

/* Grows the expandable segment of (stream, pool) so that its last block, free,
 * holds size bytes; returns that block out of the tree. */
static int expandable_grow(struct memtrace_allocator *a, int pool, uint64_t stream, uint64_t size,
                           struct mt_block **out)
{
    struct mt_segment *s;
    struct mt_block *tail = NULL, *b = NULL;
    uint64_t have = 0, need, at;
    int rc;
    for (s = a->segments; s; s = s->next)
        if (s->expandable && s->stream == stream && s->pool == pool)
            break;
    if (!s) {
        uint64_t vsize = (a->capacity + a->granularity - 1) / a->granularity * a->granularity;
        if (vsize < size)
            return MEMTRACE_EOOM;
        if (!(s = segment_new(a)))
            return MEMTRACE_ENOMEM;
        rc = memtrace_device_reserve(a->dev, vsize, &s->addr);
        if (rc) {
            s->next = a->free_segments;
            a->free_segments = s;
            return rc;
        }
        s->vsize = vsize;
        s->stream = stream;
        s->pool = (uint8_t)pool;
        s->expandable = 1;
        segment_link(a, s);
        mt_stat_update(a->stats.segment, pool, 1);
    }
    if (s->first) {
        for (tail = s->first; tail->next; tail = tail->next)
            ;
        if (tail->in_tree)
            have = tail->size;
    }
    need = (size - have + a->granularity - 1) / a->granularity * a->granularity;
    if (s->size + need > s->vsize)
        return MEMTRACE_EOOM;
    at = s->addr + s->size;
    if (!(tail && tail->in_tree) && !(b = block_new(a)))
        return MEMTRACE_ENOMEM;
    rc = memtrace_device_map(a->dev, at, need);
    if (rc) {
        if (!(tail && tail->in_tree))
            block_put(a, b);
        return rc;
    }
    a->stats.num_device_alloc++;
    s->size += need;
    mt_stat_update(a->stats.reserved_bytes, pool, (int64_t)need);
    record(a, MEMTRACE_SEGMENT_MAP, at, need, need, stream, pool, 0);
    if (tail && tail->in_tree) {
        tree_remove(a, tail);
        tail->size += need;
        b = tail;
    } else {
        b->addr = at;
        b->size = need;
        b->stream = stream;
        b->seg = s;
        b->pool = (uint8_t)pool;
        b->prev = tail;
        if (tail)
            tail->next = b;
        else
            s->first = b;
    }
    *out = b;
    return 0;
}

static void segment_free(struct memtrace_allocator *a, struct mt_segment *s)
{
    struct mt_block *b = s->first;
    tree_remove(a, b);
    record(a, MEMTRACE_SEGMENT_FREE, s->addr, s->size, s->size, s->stream, s->pool, 0);
    memtrace_device_free(a->dev, s->addr);
    a->stats.num_device_free++;
    mt_stat_update(a->stats.segment, s->pool, -1);
    mt_stat_update(a->stats.reserved_bytes, s->pool, -(int64_t)s->size);
    block_put(a, b);
    segment_unlink_put(a, s);
}

/* Unmaps the free granules at the end of an expandable segment; releases the range
 * when nothing stays mapped. Returns the bytes unmapped. */
static uint64_t expandable_shrink(struct memtrace_allocator *a, struct mt_segment *s)
{
    struct mt_block *tail;
    uint64_t from, len = 0;
    if (!s->first)
        goto out;
    for (tail = s->first; tail->next; tail = tail->next)
        ;
    if (!tail->in_tree)
        return 0;
    from = (tail->addr - s->addr + a->granularity - 1) / a->granularity * a->granularity;
    if (from >= s->size)
        return 0;
    len = s->size - from;
    tree_remove(a, tail);
    if (memtrace_device_unmap(a->dev, s->addr + from, len)) {
        tree_insert(a, tail);
        return 0;
    }
    a->stats.num_device_free++;
    record(a, MEMTRACE_SEGMENT_UNMAP, s->addr + from, len, len, s->stream, s->pool, 0);
    mt_stat_update(a->stats.reserved_bytes, s->pool, -(int64_t)len);
    s->size = from;
    if (tail->addr - s->addr == from) {
        if (tail->prev)
            tail->prev->next = NULL;
        else
            s->first = NULL;
        block_put(a, tail);
    } else {
        tail->size = s->addr + from - tail->addr;
        tree_insert(a, tail);
    }
    if (s->first)
        return len;
out:
    memtrace_device_release(a->dev, s->addr, s->vsize);
    mt_stat_update(a->stats.segment, s->pool, -1);
    segment_unlink_put(a, s);
    return len;
}

/* Returns every wholly free segment of the pools in pool_mask to the device. */
static uint64_t release_cached(struct memtrace_allocator *a, unsigned pool_mask)
{
    struct mt_segment *s, *next;
    uint64_t freed = 0;
    for (s = a->segments; s; s = next) {
        next = s->next;
        if (!(pool_mask & (1u << s->pool)))
            continue;
        if (s->expandable) {
            freed += expandable_shrink(a, s);
        } else if (s->first->in_tree && !s->first->next) {
            freed += s->size;
            segment_free(a, s);
        }
    }
    return freed;
}

/* ---- blocks ---- */

/* free_completed is recorded here unless the caller already did (see
 * memtrace_alloc_free). */
static void free_block(struct memtrace_allocator *a, struct mt_block *b, int recorded)
{
    struct mt_block *n;
    if (!recorded)
        record(a, MEMTRACE_FREE_COMPLETED, b->addr, b->size, b->requested, b->stream, b->pool, 0);
    mt_stat_update(a->stats.active, b->pool, -1);
    mt_stat_update(a->stats.active_bytes, b->pool, -(int64_t)b->size);
    b->allocated = 0;
    b->requested = 0;
    b->stack = 0;
    if (b->prev && b->prev->in_tree) {
        struct mt_block *p = b->prev;
        tree_remove(a, p);
        p->size += b->size;
        p->next = b->next;
        if (b->next)
            b->next->prev = p;
        block_put(a, b);
        b = p;
    }
    n = b->next;
    if (n && n->in_tree) {
        tree_remove(a, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next)
            n->next->prev = b;
        block_put(a, n);
    }
    b->last_used = a->gc_clock;
    tree_insert(a, b);
}

static void complete_pending(struct memtrace_allocator *a, int wait)
{
    size_t i = 0;
    while (i < a->npending) {
        struct mt_pending *p = &a->pending[i];
        int done = wait ? (memtrace_devevent_sync(p->ev), 1) : memtrace_devevent_query(p->ev);
        if (done == 0) {
            i++;
            continue;
        }
        struct mt_block *b = p->block;
        memtrace_devevent_destroy(p->ev);
        a->pending[i] = a->pending[--a->npending];
        if (--b->pending == 0)
            free_block(a, b, 0);
    }
}

static int should_split(const struct memtrace_allocator *a, const struct mt_block *b, uint64_t size)
{
    uint64_t rest = b->size - size;
    if (b->pool == MT_POOL_SMALL || b->seg->expandable)
        return rest >= MT_MIN_BLOCK;
    return size < a->settings.max_split_size && rest > MT_SMALL_SIZE;
}

static struct mt_block *get_free_block(struct memtrace_allocator *a, int pool, uint64_t stream,
                                       uint64_t size)
{
    uint64_t msz = a->settings.max_split_size;
    struct mt_block *b;
    a->gc_clock++;
    b = tree_lower_bound(a->tree[pool], stream, size);
    if (!b || b->stream != stream)
        return NULL;
    /* An oversize block never serves a small request, and serves an oversize one only
     * when little of it would go unused. */
    if (size < msz && b->size >= msz)
        return NULL;
    if (size >= msz && b->size >= size + MT_LARGE_BUFFER)
        return NULL;
    tree_remove(a, b);
    return b;
}

/* Frees cached whole segments unused for longest until reserved bytes fall to the
 * threshold, each pass taking the blocks at least as old as the average. */
static void garbage_collect(struct memtrace_allocator *a)
{
    uint64_t threshold = (uint64_t)(a->settings.gc_threshold * (double)a->capacity);
    int64_t reserved = a->stats.reserved_bytes[0].current;
    uint64_t target, freed = 0;
    if (reserved <= (int64_t)threshold)
        return;
    target = (uint64_t)reserved - threshold;
    while (freed < target) {
        uint64_t total_age = 0, n = 0;
        double avg;
        struct mt_segment *s, *next;
        for (s = a->segments; s; s = s->next) {
            if (!s->expandable && s->first->in_tree && !s->first->next) {
                total_age += a->gc_clock - s->first->last_used;
                n++;
            }
        }
        if (!n)
            break;
        avg = (double)total_age / (double)n;
        for (s = a->segments; s && freed < target; s = next) {
            next = s->next;
            if (!s->expandable && s->first->in_tree && !s->first->next &&
                (double)(a->gc_clock - s->first->last_used) >= avg) {
                freed += s->size;
                segment_free(a, s);
            }
        }
    }
}

static int new_memory(struct memtrace_allocator *a, int pool, uint64_t stream, uint64_t size,
                      struct mt_block **out)
{
    if (a->settings.expandable)
        return expandable_grow(a, pool, stream, size, out);
    return segment_alloc(a, pool, stream, segment_size(size), out);
}

struct oom_info {
    uint64_t size;
    uint64_t free_bytes, total_bytes;
    char snapshot[512];
};

static int alloc_locked(struct memtrace_allocator *a, uint64_t req, uint64_t stream, uint64_t *addr,
                        struct oom_info *oom)
{
    uint64_t size = round_size(&a->settings, req);
    int pool = size <= MT_SMALL_SIZE ? MT_POOL_SMALL : MT_POOL_LARGE;
    struct mt_block *b;
    int rc = 0;

    if (a->npending)
        complete_pending(a, 0);
    b = get_free_block(a, pool, stream, size);
    if (!b) {
        if (a->settings.gc_threshold > 0)
            garbage_collect(a);
        rc = new_memory(a, pool, stream, size, &b);
        if (rc == MEMTRACE_EOOM && release_cached(a, 1u << pool))
            rc = new_memory(a, pool, stream, size, &b);
        if (rc == MEMTRACE_EOOM) {
            complete_pending(a, 1);
            a->stats.num_sync_all_streams++;
            release_cached(a, (1u << MT_POOLS) - 1);
            a->stats.num_alloc_retries++;
            rc = new_memory(a, pool, stream, size, &b);
        }
        if (rc == MEMTRACE_EOOM) {
            uint64_t fb = 0, tb = 0;
            memtrace_device_mem_info(a->dev, &fb, &tb);
            a->stats.num_ooms++;
            record(a, MEMTRACE_OOM, 0, size, req, stream, pool, fb);
            oom->size = size;
            oom->free_bytes = fb;
            oom->total_bytes = tb;
            memcpy(oom->snapshot, a->settings.oom_snapshot, sizeof(oom->snapshot));
        }
        if (rc)
            return rc;
    }
    if (should_split(a, b, size)) {
        struct mt_block *r = block_new(a);
        if (r) {
            r->addr = b->addr + size;
            r->size = b->size - size;
            r->stream = b->stream;
            r->seg = b->seg;
            r->pool = b->pool;
            r->prev = b;
            r->next = b->next;
            if (b->next)
                b->next->prev = r;
            b->next = r;
            b->size = size;
            r->last_used = a->gc_clock;
            tree_insert(a, r);
        }
    }
    if (hash_insert(a, b)) {
        tree_insert(a, b);
        return MEMTRACE_ENOMEM;
    }
    b->allocated = 1;
    b->requested = req;
    mt_stat_update(a->stats.allocation, pool, 1);
    mt_stat_update(a->stats.allocated_bytes, pool, (int64_t)b->size);
    mt_stat_update(a->stats.requested_bytes, pool, (int64_t)req);
    mt_stat_update(a->stats.active, pool, 1);
    mt_stat_update(a->stats.active_bytes, pool, (int64_t)b->size);
    b->stack = record(a, MEMTRACE_ALLOC, b->addr, b->size, req, stream, pool, 0);
    *addr = b->addr;
    return 0;
}

static void expand_path(char *out, size_t size, const char *pattern, int device)
{
    char pid[24], dev[24], count[24] = "";
    mtx_format(pid, sizeof pid, "%d", (int)getpid());
    mtx_format(dev, sizeof dev, "%d", device);
    if (strstr(pattern, "%n") != NULL)
        mtx_format(count, sizeof count, "%u",
                   (unsigned)__atomic_fetch_add(&oom_dump_counter, 1, __ATOMIC_RELAXED));
    const struct mtx_pattern_var vars[] = {{'p', pid}, {'d', dev}, {'n', count}};
    mtx_pattern_expand(out, size, pattern, vars, MTX_ARRAY_SIZE(vars), 0);
}

static void report_oom(struct memtrace_allocator *a, struct oom_info *oom)
{
    int n = 0;
    struct {
        memtrace_oom_observer_fn fn;
        void *ctx;
    } local[MAX_OBSERVERS];
    pthread_mutex_lock(&obs_lock);
    for (int i = 0; i < MAX_OBSERVERS; i++)
        if (observers[i].fn) {
            local[n].fn = observers[i].fn;
            local[n++].ctx = observers[i].ctx;
        }
    pthread_mutex_unlock(&obs_lock);
    for (int i = 0; i < n; i++)
        local[i].fn(local[i].ctx, a, a->device, oom->size, oom->free_bytes, oom->total_bytes);
    if (oom->snapshot[0]) {
        char path[600];
        int rc;
        expand_path(path, sizeof(path), oom->snapshot, a->device);
        rc = memtrace_dump_snapshot(path);
        /* For EIO the dump keeps errno: "No space left on device" or "File too
         * large" (RLIMIT_FSIZE) say what to fix where "input/output error" does not. */
        if (rc)
            mtx_log("out of memory snapshot to %s failed: %s", path,
                    rc == MEMTRACE_EIO && errno != 0 ? strerror(errno) : memtrace_strerror(rc));
    }
}

/* ---- public API ---- */

MEMTRACE_API int memtrace_alloc_malloc_on(struct memtrace_allocator *a, size_t size,
                                          uint64_t stream_id, uint64_t *addr)
{
    struct oom_info oom;
    int rc;
    if (!a || !addr)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&a->lock);
    rc = alloc_locked(a, size, stream_id, addr, &oom);
    pthread_mutex_unlock(&a->lock);
    if (rc == MEMTRACE_EOOM)
        report_oom(a, &oom);
    return rc;
}

MEMTRACE_API int memtrace_alloc_malloc(struct memtrace_allocator *a, size_t size,
                                       struct memtrace_stream *s, uint64_t *addr)
{
    return memtrace_alloc_malloc_on(a, size, s ? memtrace_stream_id(s) : 0, addr);
}

MEMTRACE_API int memtrace_alloc_free(struct memtrace_allocator *a, uint64_t addr)
{
    struct mt_block *b;
    int pool;
    if (!a)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&a->lock);
    b = hash_find(a, addr, 1);
    if (!b) {
        pthread_mutex_unlock(&a->lock);
        return MEMTRACE_EINVAL;
    }
    pool = b->pool;
    mt_stat_update(a->stats.allocation, pool, -1);
    mt_stat_update(a->stats.allocated_bytes, pool, -(int64_t)b->size);
    mt_stat_update(a->stats.requested_bytes, pool, -(int64_t)b->requested);
    if (b->nstreams == 0) {
        /* Freed at once: both events in one batch, one clock read and one lock. */
        record_free_now(a, b, pool);
        free_block(a, b, 1);
        pthread_mutex_unlock(&a->lock);
        return 0;
    }
    record(a, MEMTRACE_FREE_REQUESTED, b->addr, b->size, b->requested, b->stream, pool, 0);
    for (uint32_t i = 0; i < b->nstreams; i++) {
        struct memtrace_devevent *ev = NULL;
        if (a->npending == a->cappending) {
            size_t cap = a->cappending ? a->cappending * 2 : 16;
            struct mt_pending *np = realloc(a->pending, cap * sizeof(*np));
            if (np) {
                a->pending = np;
                a->cappending = cap;
            }
        }
        if (a->npending < a->cappending && memtrace_devevent_create(a->dev, &ev) == 0) {
            if (memtrace_devevent_record(ev, b->streams[i]) == 0) {
                a->pending[a->npending].ev = ev;
                a->pending[a->npending++].block = b;
                b->pending++;
                continue;
            }
            memtrace_devevent_destroy(ev);
        }
        /* No event to wait on: waiting for the stream now keeps the block safe. */
        memtrace_stream_sync(a->dev, b->streams[i]);
    }
    b->nstreams = 0;
    if (!b->pending)
        free_block(a, b, 0);
    else if (a->npending)
        complete_pending(a, 0);
    pthread_mutex_unlock(&a->lock);
    return 0;
}

MEMTRACE_API int memtrace_alloc_record_stream(struct memtrace_allocator *a, uint64_t addr,
                                              struct memtrace_stream *s)
{
    struct mt_block *b;
    uint64_t id = s ? memtrace_stream_id(s) : 0;
    int rc = 0;
    if (!a)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&a->lock);
    b = hash_find(a, addr, 0);
    if (!b) {
        rc = MEMTRACE_EINVAL;
        goto out;
    }
    if (id == b->stream)
        goto out;
    for (uint32_t i = 0; i < b->nstreams; i++)
        if ((b->streams[i] ? memtrace_stream_id(b->streams[i]) : 0) == id)
            goto out;
    if (b->nstreams == b->capstreams) {
        uint32_t cap = b->capstreams ? b->capstreams * 2 : 4;
        struct memtrace_stream **ns = realloc(b->streams, cap * sizeof(*ns));
        if (!ns) {
            rc = MEMTRACE_ENOMEM;
            goto out;
        }
        b->streams = ns;
        b->capstreams = cap;
    }
    b->streams[b->nstreams++] = s;
out:
    pthread_mutex_unlock(&a->lock);
    return rc;
}

MEMTRACE_API int memtrace_alloc_block_info(struct memtrace_allocator *a, uint64_t addr,
                                           uint64_t *size, uint64_t *requested)
{
    struct mt_block *b;
    if (!a)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&a->lock);
    b = hash_find(a, addr, 0);
    if (b) {
        if (size)
            *size = b->size;
        if (requested)
            *requested = b->requested;
    }
    pthread_mutex_unlock(&a->lock);
    return b ? 0 : MEMTRACE_EINVAL;
}

MEMTRACE_API int memtrace_alloc_process_events(struct memtrace_allocator *a)
{
    if (!a)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&a->lock);
    complete_pending(a, 0);
    pthread_mutex_unlock(&a->lock);
    return 0;
}

MEMTRACE_API int memtrace_alloc_empty_cache(struct memtrace_allocator *a)
{
    if (!a)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&a->lock);
    complete_pending(a, 1);
    a->stats.num_sync_all_streams++;
    release_cached(a, (1u << MT_POOLS) - 1);
    pthread_mutex_unlock(&a->lock);
    return 0;
}

MEMTRACE_API struct memtrace_device *memtrace_alloc_device(const struct memtrace_allocator *a)
{
    return a ? a->dev : NULL;
}

/* ---- state provider ---- */

void mt_alloc_provide_state(void *ctx, memtrace_segment_sink sink, void *sink_ctx)
{
    struct memtrace_allocator *a = ctx;
    struct memtrace_block *blocks = NULL;
    size_t cap = 0;
    pthread_mutex_lock(&a->lock);
    for (struct mt_segment *s = a->segments; s; s = s->next) {
        struct memtrace_segment seg;
        size_t n = 0;
        if (!s->first)
            continue;
        for (struct mt_block *b = s->first; b; b = b->next)
            n++;
        if (n > cap) {
            struct memtrace_block *nb = realloc(blocks, n * 2 * sizeof(*nb));
            if (!nb)
                break;
            blocks = nb;
            cap = n * 2;
        }
        memset(&seg, 0, sizeof(seg));
        n = 0;
        for (struct mt_block *b = s->first; b; b = b->next, n++) {
            struct memtrace_block *o = &blocks[n];
            o->addr = b->addr;
            o->size = b->size;
            o->requested_size = b->requested;
            o->stack = b->stack;
            if (!b->allocated) {
                o->state = MEMTRACE_BLOCK_INACTIVE;
            } else {
                o->state = b->pending ? MEMTRACE_BLOCK_ACTIVE_PENDING_FREE
                                      : MEMTRACE_BLOCK_ACTIVE_ALLOCATED;
                seg.active_size += b->size;
                if (o->state == MEMTRACE_BLOCK_ACTIVE_ALLOCATED) {
                    seg.allocated_size += b->size;
                    seg.requested_size += b->requested;
                }
            }
        }
        seg.addr = s->addr;
        seg.total_size = s->size;
        seg.stream = s->stream;
        seg.device = a->device;
        seg.pool = s->pool + 1;
        seg.is_large = s->pool == MT_POOL_LARGE;
        seg.is_expandable = s->expandable;
        seg.stack = s->stack;
        seg.source = a->source;
        seg.nblocks = n;
        seg.blocks = blocks;
        sink(sink_ctx, &seg);
    }
    pthread_mutex_unlock(&a->lock);
    free(blocks);
}

/* ---- life cycle and settings ---- */

static void publish_settings(struct memtrace_allocator *a)
{
    /* Room for the longest oom_snapshot (511 bytes) with every byte escaped. */
    char json[4096];
    if (memtrace_alloc_settings_json(a, json, sizeof(json)) > 0)
        memtrace_meta_set("allocator_settings", json);
}

MEMTRACE_API int memtrace_alloc_create(struct memtrace_allocator **out, struct memtrace_device *dev)
{
    struct memtrace_allocator *a;
    struct mt_alloc_settings api;
    struct memtrace_alloc_config_error err;
    uint64_t fb = 0, tb = 0;
    const char *env;
    int rc;
    if (!out || !dev)
        return MEMTRACE_EINVAL;
    *out = NULL;
    a = calloc(1, sizeof(*a));
    if (!a)
        return MEMTRACE_ENOMEM;
    mt_alloc_settings_default(&a->settings);
    env = getenv("MEMTRACE_ALLOC_CONF");
    if (env && (rc = mt_alloc_config_parse(env, &a->settings, &err)) != 0) {
        mtx_log("%s", err.text);
        free(a);
        return rc;
    }
    mt_alloc_api_settings(&api);
    mt_alloc_settings_merge(&a->settings, &api);
    pthread_mutex_init(&a->lock, NULL);
    a->dev = dev;
    a->device = memtrace_device_index(dev);
    memtrace_device_mem_info(dev, &fb, &tb);
    a->capacity = tb;
    a->granularity = memtrace_device_granularity(dev);
    if (!a->granularity)
        a->granularity = MT_ROUND_LARGE;
    a->source = memtrace_intern("caching_allocator");
    a->stats.max_split_size = (int64_t)a->settings.max_split_size;
    a->provider = memtrace_state_provider_add(mt_alloc_provide_state, a);
    pthread_mutex_lock(&reg_lock);
    a->reg_next = registry;
    registry = a;
    pthread_mutex_unlock(&reg_lock);
    publish_settings(a);
    *out = a;
    return 0;
}

MEMTRACE_API void memtrace_alloc_destroy(struct memtrace_allocator *a)
{
    struct mt_desc_chunk *c, *next;
    if (!a)
        return;
    if (a->provider > 0)
        memtrace_state_provider_remove(a->provider);
    pthread_mutex_lock(&reg_lock);
    for (struct memtrace_allocator **p = &registry; *p; p = &(*p)->reg_next)
        if (*p == a) {
            *p = a->reg_next;
            break;
        }
    pthread_mutex_unlock(&reg_lock);
    pthread_mutex_lock(&a->lock);
    for (size_t i = 0; i < a->npending; i++) {
        memtrace_devevent_sync(a->pending[i].ev);
        memtrace_devevent_destroy(a->pending[i].ev);
    }
    while (a->segments) {
        struct mt_segment *s = a->segments;
        for (struct mt_block *b = s->first, *bn; b; b = bn) {
            bn = b->next;
            free(b->streams);
        }
        if (s->expandable) {
            if (s->size)
                memtrace_device_unmap(a->dev, s->addr, s->size);
            memtrace_device_release(a->dev, s->addr, s->vsize);
        } else {
            memtrace_device_free(a->dev, s->addr);
        }
        a->segments = s->next;
    }
    pthread_mutex_unlock(&a->lock);
    for (c = a->chunks; c; c = next) {
        next = c->next;
        mtx_unmap(c, DESC_CHUNK);
    }
    if (a->buckets)
        mtx_unmap(a->buckets, a->nbuckets * sizeof(*a->buckets));
    free(a->pending);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

void mt_alloc_apply_api_settings(const struct mt_alloc_settings *api)
{
    pthread_mutex_lock(&reg_lock);
    for (struct memtrace_allocator *a = registry; a; a = a->reg_next) {
        pthread_mutex_lock(&a->lock);
        mt_alloc_settings_merge(&a->settings, api);
        a->stats.max_split_size = (int64_t)a->settings.max_split_size;
        pthread_mutex_unlock(&a->lock);
        publish_settings(a);
    }
    pthread_mutex_unlock(&reg_lock);
}

MEMTRACE_API int memtrace_alloc_configure(struct memtrace_allocator *a, const char *conf,
                                          struct memtrace_alloc_config_error *err)
{
    int rc;
    if (!a || !conf)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&a->lock);
    rc = mt_alloc_config_parse(conf, &a->settings, err);
    a->stats.max_split_size = (int64_t)a->settings.max_split_size;
    pthread_mutex_unlock(&a->lock);
    if (rc == 0) {
        mt_alloc_set_error_text("");
        publish_settings(a);
    }
    return rc;
}

MEMTRACE_API int memtrace_alloc_settings_json(struct memtrace_allocator *a, char *buf, size_t size)
{
    struct mt_alloc_settings s;
    size_t n;
    if (!a || !buf)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&a->lock);
    s = a->settings;
    pthread_mutex_unlock(&a->lock);
    n = mt_alloc_settings_to_json(&s, buf, size);
    return n < size ? (int)n : MEMTRACE_EINVAL;
}

MEMTRACE_API int memtrace_alloc_oom_observer_add(memtrace_oom_observer_fn fn, void *ctx)
{
    int rc = MEMTRACE_ENOMEM;
    if (!fn)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&obs_lock);
    for (int i = 0; i < MAX_OBSERVERS; i++)
        if (!observers[i].fn) {
            observers[i].fn = fn;
            observers[i].ctx = ctx;
            observers[i].handle = rc = next_observer++;
            break;
        }
    pthread_mutex_unlock(&obs_lock);
    return rc;
}

MEMTRACE_API int memtrace_alloc_oom_observer_remove(int handle)
{
    int rc = MEMTRACE_EINVAL;
    pthread_mutex_lock(&obs_lock);
    for (int i = 0; i < MAX_OBSERVERS; i++)
        if (observers[i].fn && observers[i].handle == handle) {
            observers[i].fn = NULL;
            rc = 0;
        }
    pthread_mutex_unlock(&obs_lock);
    return rc;
}
