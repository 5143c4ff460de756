/* fake_mem.h: address arenas and address-keyed tables shared by the fake drivers.
 *
 * An arena hands out ranges of one big mapping, first fit over a sorted free list and
 * then from a bump pointer, so a program that makes the same calls gets the same
 * addresses on every run. A table maps start addresses to what lives there. */
#ifndef FAKE_MEM_H
#define FAKE_MEM_H

#include <stddef.h>
#include <stdint.h>

struct fake_range {
    uint64_t start, len;
};

struct fake_arena {
    uint64_t base, size, bump;
    int readable;
    struct fake_range *free;
    size_t nfree, capfree;
};

struct fake_obj {
    uint64_t addr; /* 0: empty slot */
    uint64_t size; /* requested bytes */
    uint64_t span; /* bytes taken from the arena */
    int kind;
    int dev;
    void *aux;
};

struct fake_table {
    struct fake_obj *slots;
    size_t cap, len;
};

uint64_t fake_align_up(uint64_t v, uint64_t a);

/* The largest arena under ThreadSanitizer (its application ranges are about 1.5 TiB). */
#define FAKE_TSAN_MAX_SPAN (128ULL << 30)

/* The largest arena when MEMTRACE_VALGRIND is set (make check-valgrind): memcheck keeps
 * state for every 64 KiB of a mapping, so the 4 TiB and 256 GiB arenas cost it
 * gigabytes per process. Under valgrind, what an arena has not handed out is also
 * marked inaccessible, so that the leak check at exit does not read tens of gigabytes
 * of untouched pages (minutes per test), and a test touching freed device memory is
 * reported. */
#define FAKE_VALGRIND_MAX_SPAN (64ULL << 30)

/* Maps size bytes with prot at base if that range is free, else anywhere (always
 * anywhere, and at most FAKE_TSAN_MAX_SPAN, under ThreadSanitizer); at most
 * FAKE_VALGRIND_MAX_SPAN under valgrind. */
int fake_arena_map(struct fake_arena *a, uint64_t base, uint64_t size, int prot);
/* 0 when there is no room. */
uint64_t fake_arena_alloc(struct fake_arena *a, uint64_t len, uint64_t align);
uint64_t fake_arena_alloc_at(struct fake_arena *a, uint64_t start, uint64_t len);
void fake_arena_free(struct fake_arena *a, uint64_t start, uint64_t len);
void fake_arena_fini(struct fake_arena *a);

struct fake_obj *fake_obj_find(struct fake_table *t, uint64_t addr);
int fake_obj_put(struct fake_table *t, const struct fake_obj *o);
void fake_obj_del(struct fake_table *t, struct fake_obj *o);
void fake_table_fini(struct fake_table *t);

#endif
