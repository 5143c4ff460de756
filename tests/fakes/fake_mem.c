/* fake_mem.c: see fake_mem.h. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fake_mem.h"

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define FAKE_VG_HANDED_OUT(a, s, n)                                                                \
    ((a)->readable ? (void)VALGRIND_MAKE_MEM_DEFINED((uintptr_t)(s), (n)) : (void)0)
#define FAKE_VG_TAKEN_BACK(a, s, n)                                                                \
    ((a)->readable ? (void)VALGRIND_MAKE_MEM_NOACCESS((uintptr_t)(s), (n)) : (void)0)
#endif
#endif
#ifndef FAKE_VG_HANDED_OUT
#define FAKE_VG_HANDED_OUT(a, s, n) ((void)0)
#define FAKE_VG_TAKEN_BACK(a, s, n) ((void)0)
#endif

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

uint64_t fake_align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

#if defined(__SANITIZE_THREAD__)
#define FAKE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FAKE_TSAN 1
#endif
#endif
#ifndef FAKE_TSAN
#define FAKE_TSAN 0
#endif

/* ThreadSanitizer kills a process that maps outside its application ranges, which
 * hold none of the fixed bases, and takes MAP_FIXED_NOREPLACE for a plain hint (so
 * the kernel would map at address 0). There the kernel chooses, below 4 GiB for a
 * base below 4 GiB (MAP_32BIT), and spans are capped to what those ranges hold;
 * fake_cuda_base() and fake_ze_base() tell tests where the arenas went. */
static const int fake_tsan = FAKE_TSAN;

int fake_arena_map(struct fake_arena *a, uint64_t base, uint64_t size, int prot)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    void *p = MAP_FAILED;
    const char *vg = getenv("MEMTRACE_VALGRIND");
    if (vg && *vg && size > FAKE_VALGRIND_MAX_SPAN)
        size = FAKE_VALGRIND_MAX_SPAN;
    if (fake_tsan) {
        if (size > FAKE_TSAN_MAX_SPAN)
            size = FAKE_TSAN_MAX_SPAN;
        if (base + size <= (1ULL << 32))
            flags |= MAP_32BIT;
    } else {
        p = mmap((void *)(uintptr_t)base, size, prot, flags | MAP_FIXED_NOREPLACE, -1, 0);
    }
    if (p == MAP_FAILED)
        p = mmap(NULL, size, prot, flags, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    a->base = a->bump = (uint64_t)(uintptr_t)p;
    a->size = size;
    a->readable = (prot & PROT_READ) != 0;
    FAKE_VG_TAKEN_BACK(a, a->base, size);
    return 0;
}

static int arena_insert_free(struct fake_arena *a, size_t at, uint64_t start, uint64_t len)
{
    if (a->nfree == a->capfree) {
        size_t cap = a->capfree ? a->capfree * 2 : 64;
        struct fake_range *f = realloc(a->free, cap * sizeof *f);
        if (!f)
            return -1;
        a->free = f;
        a->capfree = cap;
    }
    memmove(&a->free[at + 1], &a->free[at], (a->nfree - at) * sizeof *a->free);
    a->free[at] = (struct fake_range){start, len};
    a->nfree++;
    return 0;
}

static void arena_remove_free(struct fake_arena *a, size_t at)
{
    memmove(&a->free[at], &a->free[at + 1], (a->nfree - at - 1) * sizeof *a->free);
    a->nfree--;
}

/* Takes [start, start+len) out of free range i, keeping what is left on both sides. */
static int arena_carve(struct fake_arena *a, size_t i, uint64_t start, uint64_t len)
{
    struct fake_range r = a->free[i];
    uint64_t end = start + len, rend = r.start + r.len;
    if (start > r.start && end < rend) {
        a->free[i].len = start - r.start;
        return arena_insert_free(a, i + 1, end, rend - end);
    }
    if (start > r.start)
        a->free[i].len = start - r.start;
    else if (end < rend)
        a->free[i] = (struct fake_range){end, rend - end};
    else
        arena_remove_free(a, i);
    return 0;
}

static void range_free(struct fake_arena *a, uint64_t start, uint64_t len);

static uint64_t range_alloc(struct fake_arena *a, uint64_t len, uint64_t align)
{
    for (size_t i = 0; i < a->nfree; i++) {
        uint64_t s = fake_align_up(a->free[i].start, align);
        if (s + len <= a->free[i].start + a->free[i].len)
            return arena_carve(a, i, s, len) == 0 ? s : 0;
    }
    uint64_t s = fake_align_up(a->bump, align);
    if (s + len > a->base + a->size || s + len < s)
        return 0;
    uint64_t gap = a->bump;
    a->bump = s + len;
    if (s > gap)
        range_free(a, gap, s - gap);
    return s;
}

static uint64_t range_alloc_at(struct fake_arena *a, uint64_t start, uint64_t len)
{
    if (start < a->base || start + len > a->base + a->size)
        return 0;
    if (start >= a->bump) {
        uint64_t gap = a->bump;
        a->bump = start + len;
        if (start > gap)
            range_free(a, gap, start - gap);
        return start;
    }
    for (size_t i = 0; i < a->nfree; i++)
        if (a->free[i].start <= start && start + len <= a->free[i].start + a->free[i].len)
            return arena_carve(a, i, start, len) == 0 ? start : 0;
    return 0;
}

static void range_free(struct fake_arena *a, uint64_t start, uint64_t len)
{
    size_t i = 0;
    while (i < a->nfree && a->free[i].start < start)
        i++;
    int merged = 0;
    if (i > 0 && a->free[i - 1].start + a->free[i - 1].len == start) {
        a->free[i - 1].len += len;
        i--;
        merged = 1;
    }
    if (merged) {
        if (i + 1 < a->nfree && a->free[i].start + a->free[i].len == a->free[i + 1].start) {
            a->free[i].len += a->free[i + 1].len;
            arena_remove_free(a, i + 1);
        }
    } else if (i < a->nfree && start + len == a->free[i].start) {
        a->free[i].start = start;
        a->free[i].len += len;
    } else if (arena_insert_free(a, i, start, len) != 0) {
        return; /* out of host memory: the range is lost, never handed out twice */
    }
    if (a->nfree && a->free[a->nfree - 1].start + a->free[a->nfree - 1].len == a->bump) {
        a->bump = a->free[a->nfree - 1].start;
        a->nfree--;
    }
}

uint64_t fake_arena_alloc(struct fake_arena *a, uint64_t len, uint64_t align)
{
    uint64_t s = range_alloc(a, len, align);
    if (s)
        FAKE_VG_HANDED_OUT(a, s, len);
    return s;
}

uint64_t fake_arena_alloc_at(struct fake_arena *a, uint64_t start, uint64_t len)
{
    uint64_t s = range_alloc_at(a, start, len);
    if (s)
        FAKE_VG_HANDED_OUT(a, s, len);
    return s;
}

void fake_arena_free(struct fake_arena *a, uint64_t start, uint64_t len)
{
    range_free(a, start, len);
    FAKE_VG_TAKEN_BACK(a, start, len);
}

static size_t obj_slot(const struct fake_table *t, uint64_t addr)
{
    return (size_t)((addr * 0x9E3779B97F4A7C15ULL) >> 17) & (t->cap - 1);
}

struct fake_obj *fake_obj_find(struct fake_table *t, uint64_t addr)
{
    if (!t->cap || !addr)
        return NULL;
    for (size_t i = obj_slot(t, addr);; i = (i + 1) & (t->cap - 1)) {
        if (t->slots[i].addr == addr)
            return &t->slots[i];
        if (t->slots[i].addr == 0)
            return NULL;
    }
}

static int obj_grow(struct fake_table *t)
{
    struct fake_table old = *t;
    size_t cap = old.cap ? old.cap * 2 : 1024;
    struct fake_obj *n = calloc(cap, sizeof *n);
    if (!n)
        return -1;
    *t = (struct fake_table){n, cap, 0};
    for (size_t i = 0; i < old.cap; i++)
        if (old.slots[i].addr)
            fake_obj_put(t, &old.slots[i]);
    free(old.slots);
    return 0;
}

int fake_obj_put(struct fake_table *t, const struct fake_obj *o)
{
    if ((t->len + 1) * 2 > t->cap && obj_grow(t) != 0)
        return -1;
    size_t i = obj_slot(t, o->addr);
    while (t->slots[i].addr)
        i = (i + 1) & (t->cap - 1);
    t->slots[i] = *o;
    t->len++;
    return 0;
}

/* Linear probing deletion by shifting back the entries that probed past the hole. */
void fake_obj_del(struct fake_table *t, struct fake_obj *o)
{
    size_t mask = t->cap - 1, hole = (size_t)(o - t->slots);
    t->slots[hole].addr = 0;
    t->len--;
    for (size_t i = (hole + 1) & mask; t->slots[i].addr; i = (i + 1) & mask) {
        size_t home = obj_slot(t, t->slots[i].addr);
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            t->slots[hole] = t->slots[i];
            t->slots[i].addr = 0;
            hole = i;
        }
    }
}

void fake_arena_fini(struct fake_arena *a)
{
    free(a->free);
    a->free = NULL;
    a->nfree = a->capfree = 0;
}

void fake_table_fini(struct fake_table *t)
{
    free(t->slots);
    *t = (struct fake_table){0};
}
