/* stack.c: native stack capture and the process-wide stack trie.
 *
 * Interning runs inside interposed allocation calls, so everything here lives in
 * mmap'd memory and takes no libc malloc. A seen stack is found without the lock:
 * a hash of the whole ip array indexes a table of immutable entries (hash, depth,
 * id, ips) published with release stores. A miss takes the mutex and walks the
 * trie from the outermost frame, interning frames by ip and nodes by (parent,
 * frame) in open-addressing tables that only the lock holder touches.
 *
 * Node and frame records live in segmented arrays (segment k holds SEG_BASE << k
 * records) so they never move: a reader that acquire-loads the count may read any
 * record below it while the writer appends. */
#include "config.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <link.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "memtrace.h"
#include "stack.h"
#include "stack_py.h"
#include "mtx/util.h"

#define SEG_SHIFT 10
#define SEG_BASE  (1u << SEG_SHIFT)
#define SEG_COUNT 22 /* SEG_BASE * (2^22 - 1) records: beyond any uint32_t id */

struct node_rec {
    uint32_t parent;
    uint32_t frame;
};

struct seg_array {
    void *seg[SEG_COUNT];
    _Atomic uint32_t count; /* records 0..count-1 are published */
};

/* Open-addressing map from a 64-bit key to a 32-bit id; the lock holder only. */
struct id_slot {
    uint64_t key;
    uint32_t id; /* 0: empty */
};
struct id_map {
    struct id_slot *slots;
    size_t mask;
    size_t used;
};

/* A seen stack: immutable once published. */
struct cache_entry {
    uint64_t hash;
    uint32_t id;
    uint32_t n;
    uintptr_t ips[];
};
struct cache_table {
    size_t mask;
    size_t used;
    _Atomic(struct cache_entry *) slot[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct seg_array nodes;  /* struct node_rec, index id - 1 */
static struct seg_array frames; /* uintptr_t, index id - 1 */
static struct id_map node_map;  /* (parent << 32 | frame) -> node id */
static struct id_map frame_map; /* ip -> frame id */
static _Atomic(struct cache_table *) cache;
static struct mtx_arena arena; /* cache entries; the lock holder only */
static size_t cached_bytes;
/* Entries copy whole stacks: beyond this, misses walk the trie under the lock. */
#define CACHE_MAX_BYTES ((size_t)64 << 20)
static atomic_int unwind_ready;

static inline unsigned seg_of(uint32_t idx, uint32_t *off)
{
    uint32_t q = (idx >> SEG_SHIFT) + 1;
    unsigned k = 31u - (unsigned)__builtin_clz(q);
    *off = idx - ((SEG_BASE << k) - SEG_BASE);
    return k;
}

/* Returns the address of record idx, mapping its segment if needed (lock held). */
static void *seg_slot(struct seg_array *a, uint32_t idx, size_t rec)
{
    uint32_t off;
    unsigned k = seg_of(idx, &off);
    if (k >= SEG_COUNT)
        return NULL;
    if (a->seg[k] == NULL) {
        a->seg[k] = mtx_map((size_t)(SEG_BASE << k) * rec);
        if (a->seg[k] == NULL)
            return NULL;
    }
    return (char *)a->seg[k] + (size_t)off * rec;
}

/* Reader side: idx must be below an acquire-loaded count. */
static inline void *seg_get(const struct seg_array *a, uint32_t idx, size_t rec)
{
    uint32_t off;
    unsigned k = seg_of(idx, &off);
    return (char *)a->seg[k] + (size_t)off * rec;
}

static bool id_map_grow(struct id_map *m)
{
    size_t cap = m->slots ? (m->mask + 1) * 2 : 4096;
    struct id_slot *s = mtx_map(cap * sizeof *s);
    if (s == NULL)
        return false;
    for (size_t i = 0; m->slots && i <= m->mask; i++) {
        if (m->slots[i].id == 0)
            continue;
        size_t j = mtx_hash_u64(m->slots[i].key) & (cap - 1);
        while (s[j].id != 0)
            j = (j + 1) & (cap - 1);
        s[j] = m->slots[i];
    }
    if (m->slots)
        mtx_unmap(m->slots, (m->mask + 1) * sizeof *s);
    m->slots = s;
    m->mask = cap - 1;
    return true;
}

/* Returns the slot holding key, or the empty slot where it belongs. */
static struct id_slot *id_map_find(struct id_map *m, uint64_t key)
{
    size_t j = mtx_hash_u64(key) & m->mask;
    while (m->slots[j].id != 0 && m->slots[j].key != key)
        j = (j + 1) & m->mask;
    return &m->slots[j];
}

static uint32_t frame_intern(uintptr_t ip)
{
    if ((frame_map.used + 1) * 2 > frame_map.mask + 1 && !id_map_grow(&frame_map))
        return 0;
    struct id_slot *s = id_map_find(&frame_map, ip);
    if (s->id != 0)
        return s->id;
    uint32_t idx = atomic_load_explicit(&frames.count, memory_order_relaxed);
    uintptr_t *rec = seg_slot(&frames, idx, sizeof *rec);
    if (rec == NULL)
        return 0;
    *rec = ip;
    atomic_store_explicit(&frames.count, idx + 1, memory_order_release);
    s->key = ip;
    s->id = idx + 1;
    frame_map.used++;
    return idx + 1;
}

static uint32_t node_intern(uint32_t parent, uint32_t frame)
{
    if ((node_map.used + 1) * 2 > node_map.mask + 1 && !id_map_grow(&node_map))
        return 0;
    uint64_t key = (uint64_t)parent << 32 | frame;
    struct id_slot *s = id_map_find(&node_map, key);
    if (s->id != 0)
        return s->id;
    uint32_t idx = atomic_load_explicit(&nodes.count, memory_order_relaxed);
    struct node_rec *rec = seg_slot(&nodes, idx, sizeof *rec);
    if (rec == NULL)
        return 0;
    rec->parent = parent;
    rec->frame = frame;
    atomic_store_explicit(&nodes.count, idx + 1, memory_order_release);
    s->key = key;
    s->id = idx + 1;
    node_map.used++;
    return idx + 1;
}

/* Word-at-a-time: a byte-wise hash of 32 frames would cost more than the lookup. */
static inline uint64_t hash_ips(const uintptr_t *ips, int n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= ips[i];
        h *= 0xff51afd7ed558ccdULL;
        h = (h << 29) | (h >> 35);
    }
    return mtx_hash_u64(h);
}

static uint32_t cache_lookup(uint64_t h, const uintptr_t *ips, int n)
{
    struct cache_table *t = atomic_load_explicit(&cache, memory_order_acquire);
    if (t == NULL)
        return 0;
    for (size_t j = h & t->mask;; j = (j + 1) & t->mask) {
        struct cache_entry *e = atomic_load_explicit(&t->slot[j], memory_order_acquire);
        if (e == NULL)
            return 0;
        if (e->hash == h && e->n == (uint32_t)n &&
            memcmp(e->ips, ips, (size_t)n * sizeof *ips) == 0)
            return e->id;
    }
}

static void cache_put(struct cache_table *t, struct cache_entry *e)
{
    size_t j = e->hash & t->mask;
    while (atomic_load_explicit(&t->slot[j], memory_order_relaxed) != NULL)
        j = (j + 1) & t->mask;
    atomic_store_explicit(&t->slot[j], e, memory_order_release);
    t->used++;
}

/* Lock held. Old tables stay mapped: a lock-free reader may still be probing one. */
static void cache_insert(uint64_t h, const uintptr_t *ips, int n, uint32_t id)
{
    size_t size = sizeof(struct cache_entry) + (size_t)n * sizeof *ips;
    if (cached_bytes + size > CACHE_MAX_BYTES)
        return;
    struct cache_table *t = atomic_load_explicit(&cache, memory_order_relaxed);
    if (t == NULL || (t->used + 1) * 2 > t->mask + 1) {
        size_t cap = t ? (t->mask + 1) * 2 : 4096;
        struct cache_table *nt = mtx_map(sizeof *nt + cap * sizeof nt->slot[0]);
        if (nt == NULL)
            return;
        nt->mask = cap - 1;
        for (size_t i = 0; t && i <= t->mask; i++) {
            struct cache_entry *old = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
            if (old != NULL)
                cache_put(nt, old);
        }
        atomic_store_explicit(&cache, nt, memory_order_release);
        t = nt;
    }
    struct cache_entry *e = mtx_arena_alloc(&arena, size, _Alignof(struct cache_entry));
    if (e == NULL)
        return;
    cached_bytes += size;
    e->hash = h;
    e->id = id;
    e->n = (uint32_t)n;
    memcpy(e->ips, ips, (size_t)n * sizeof *ips);
    cache_put(t, e);
}

uint32_t mt_stack_intern(const uintptr_t *ips, int n)
{
    if (n <= 0)
        return 0;
    uint64_t h = hash_ips(ips, n);
    uint32_t id = cache_lookup(h, ips, n);
    if (MTX_LIKELY(id != 0))
        return id;

    pthread_mutex_lock(&lock);
    id = cache_lookup(h, ips, n);
    if (id == 0) {
        uint32_t parent = 0;
        for (int i = n - 1; i >= 0; i--) {
            uint32_t frame = frame_intern(ips[i]);
            parent = frame ? node_intern(parent, frame) : 0;
            if (parent == 0)
                break;
        }
        id = parent;
        if (id != 0)
            cache_insert(h, ips, n, id);
    }
    pthread_mutex_unlock(&lock);
    return id;
}

uint32_t mt_stack_node_count(void)
{
    return atomic_load_explicit(&nodes.count, memory_order_acquire);
}

uint32_t mt_frame_count(void)
{
    return atomic_load_explicit(&frames.count, memory_order_acquire);
}

void mt_stack_node(uint32_t id, uint32_t *parent, uint32_t *frame)
{
    uint32_t p = 0, f = 0;
    if (id != 0 && id <= atomic_load_explicit(&nodes.count, memory_order_acquire)) {
        const struct node_rec *rec = seg_get(&nodes, id - 1, sizeof *rec);
        p = rec->parent;
        f = rec->frame;
    }
    if (parent != NULL)
        *parent = p;
    if (frame != NULL)
        *frame = f;
}

uintptr_t mt_frame_ip(uint32_t id)
{
    if (id == 0 || id > atomic_load_explicit(&frames.count, memory_order_acquire))
        return 0;
    return *(const uintptr_t *)seg_get(&frames, id - 1, sizeof(uintptr_t));
}

void mt_stack_atfork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    mt_py_atfork_child();
}

/* Per-thread caches keep unwinding lock-free; the first caller sets the policy,
 * a racing one merely unwinds once under the default. */
static void unwind_init(void)
{
    int expect = 0;
    if (atomic_compare_exchange_strong(&unwind_ready, &expect, 1))
        unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
}

/* Frames unw_backtrace may report before our caller's: its own and ours. */
#define CAPTURE_SLACK 4
/* Frames of memtrace's own shared libraries that a capture may trim. */
#define OWN_SLACK 8

/* Unwinding costs per frame, and a capture keeps only max frames below the ones it
 * drops (libunwind's, ours, memtrace's own): it unwinds max + skip + above_seen,
 * the most frames it has ever had to drop, so in steady state it walks no frame it
 * throws away. A capture that meets more than that keeps fewer frames, once. */
static atomic_int above_seen = CAPTURE_SLACK;

/* The executable ranges of memtrace's own shared objects (libmemtrace.so and
 * libmemtrace_preload.so): their frames at the top of a stack (the recorder, the
 * allocator's entry points, the interposer's wrappers) say nothing about where the
 * program allocated, so captures start below them. When the recorder is linked into
 * a program statically nothing is trimmed: the program's own frames look the same. */
static struct {
    uintptr_t lo, hi;
} own_ranges[8];
static int own_nranges;
static pthread_once_t own_once = PTHREAD_ONCE_INIT;

static int own_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    base = base ? base + 1 : info->dlpi_name;
    if (base == NULL || strncmp(base, "libmemtrace", 11) != 0)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) ||
            own_nranges == (int)MTX_ARRAY_SIZE(own_ranges))
            continue;
        own_ranges[own_nranges].lo = info->dlpi_addr + ph->p_vaddr;
        own_ranges[own_nranges].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        own_nranges++;
    }
    return 0;
}

static void own_init(void)
{
    dl_iterate_phdr(own_module, NULL);
}

static bool is_own(uintptr_t ip)
{
    for (int i = 0; i < own_nranges; i++)
        if (ip >= own_ranges[i].lo && ip < own_ranges[i].hi)
            return true;
    return false;
}

/* The capture of mt_stack_capture and mt_stack_capture_as: ret is the return address
 * of the public function, where the caller's frames begin. */
static inline __attribute__((always_inline)) int capture_native(uintptr_t *ips, int max, int skip,
                                                                void *ret)
{
    void *buf[MEMTRACE_MAX_FRAMES + CAPTURE_SLACK + OWN_SLACK];
    if (ips == NULL || max <= 0)
        return 0;
    if (skip < 0)
        skip = 0;
    if (MTX_UNLIKELY(atomic_load_explicit(&unwind_ready, memory_order_relaxed) == 0))
        unwind_init();
    pthread_once(&own_once, own_init);

    int above = atomic_load_explicit(&above_seen, memory_order_relaxed);
    int want = max + skip + above;
    if (want > (int)MTX_ARRAY_SIZE(buf))
        want = (int)MTX_ARRAY_SIZE(buf);
    int got = unw_backtrace(buf, want);

    /* Whether unw_backtrace lists itself varies between libunwind releases; find
     * our return address instead of trusting a fixed count. */
    int first = -1;
    for (int i = 0; i < got && i < CAPTURE_SLACK; i++) {
        if (buf[i] == ret) {
            first = i;
            break;
        }
    }
    if (first < 0)
        return 0;
    first += skip;
    int own = first;
    while (own < got && is_own((uintptr_t)buf[own]))
        own++;
    if (own < got) /* a stack entirely inside memtrace keeps its frames */
        first = own;
    int dropped = own - skip; /* libunwind's frames, ours and memtrace's own */
    if (dropped > above && dropped <= CAPTURE_SLACK + OWN_SLACK)
        atomic_store_explicit(&above_seen, dropped, memory_order_relaxed);
    int n = got - first;
    if (n <= 0)
        return 0;
    if (n > max)
        n = max;
    for (int i = 0; i < n; i++)
        ips[i] = (uintptr_t)buf[first + i];
    return n;
}

__attribute__((noinline)) int mt_stack_capture(uintptr_t *ips, int max, int skip)
{
    return capture_native(ips, max, skip,
                          __builtin_extract_return_addr(__builtin_return_address(0)));
}

__attribute__((noinline)) int mt_stack_capture_as(uintptr_t *ips, int max, int skip, int kind)
{
    void *ret = __builtin_extract_return_addr(__builtin_return_address(0));
    struct mt_py_stack py;
    if (kind == MEMTRACE_STACKS_NATIVE || ips == NULL || max <= 0 || mt_py_capture(&py) == 0)
        return capture_native(ips, max, skip, ret);
    if (kind == MEMTRACE_STACKS_PYTHON) {
        int n = py.n < max ? py.n : max;
        memcpy(ips, py.tok, (size_t)n * sizeof *ips);
        return n;
    }
    uintptr_t native[MEMTRACE_MAX_FRAMES];
    int n = capture_native(native, max, skip, ret);
    return mt_py_splice(native, n, &py, ips, MEMTRACE_MAX_FRAMES);
}
