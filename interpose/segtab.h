/* segtab.h: the preload's table of live segments, keyed by address and kind.
 *
 * Open addressing with linear probing. A removal shifts the entries after it back
 * instead of leaving a tombstone, so a program that allocates and frees for ever
 * never fills the table with dead slots and never makes it rehash; it grows only
 * with the number of live segments. No libc malloc (mtx_map), and no lock: the
 * preload changes it only under the recorder's lock. */
#ifndef MEMTRACE_SEGTAB_H
#define MEMTRACE_SEGTAB_H

#include <stddef.h>
#include <stdint.h>

struct mt_seg {
    uint64_t key; /* address, or handle for physical memory */
    uint64_t size;
    uint64_t stream;
    int32_t device;
    uint32_t stack;
    uint32_t source;
    uint8_t kind; /* enum mt_ip_kind */
    uint8_t used; /* 1 in a live slot */
};

struct mt_segtab {
    struct mt_seg *slot; /* cap slots; NULL until the first insert */
    size_t cap;          /* 0 or a power of two */
    size_t live;
};

/* Enters *s, replacing an entry with the same key and kind (an address handed out
 * again without a free that was seen). 0, or -1 when no memory is left to grow. */
int mt_segtab_insert(struct mt_segtab *t, const struct mt_seg *s);
/* Removes the entry for key and kind and copies it to *out: 1, or 0 if absent. */
int mt_segtab_remove(struct mt_segtab *t, uint64_t key, int kind, struct mt_seg *out);
/* The slot where a lookup for key and kind starts; t->cap must not be 0. */
size_t mt_segtab_home(const struct mt_segtab *t, uint64_t key, int kind);
/* Forgets every entry, keeping the slots. */
void mt_segtab_clear(struct mt_segtab *t);
/* Forgets every entry and gives the slots back. */
void mt_segtab_free(struct mt_segtab *t);

#endif
