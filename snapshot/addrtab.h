/* addrtab.h: a table of entries keyed by a 64-bit address (internal).
 *
 * Open addressing with linear probing. A removal shifts the entries after it back
 * instead of leaving a tombstone, so a replay that allocates and frees for ever never
 * fills the table with dead slots; it grows only with the number of live entries.
 * Keys come from files written by others, so the slot of a key is a keyed hash: with
 * a key drawn per table, nobody can choose addresses that all land in one run of
 * slots. The hash starts as one keyed multiply (the top bits of (addr ^ k0) * k1);
 * should an insert or a removal ever walk more than MT_ADDRTAB_PROBES slots, the
 * table switches for good to a strong keyed mix and rehashes, so no set of addresses
 * can make it quadratic. Entries are of one size per table and begin with struct
 * mt_addrtab_head. */
#ifndef MEMTRACE_ADDRTAB_H
#define MEMTRACE_ADDRTAB_H

#include <stddef.h>
#include <stdint.h>

/* The first member of every entry. */
struct mt_addrtab_head {
    uint64_t key;
    uint32_t used; /* 1 in a live slot */
    uint32_t spare;
};

struct mt_addrtab {
    unsigned char *slots; /* cap entries of elem bytes; NULL until the first insert */
    size_t cap;           /* 0 or a power of two */
    size_t n;             /* live entries */
    size_t elem;
    uint64_t k0, k1; /* hash key */
    unsigned shift;  /* 64 - log2(cap), for the multiply's top bits */
    int strong;      /* 1 once a long probe switched to the strong mix */
};

/* A walk longer than this makes the table switch to its strong hash. At half load a
 * good hash walks about 1.5 slots, and more than 64 about never. */
#define MT_ADDRTAB_PROBES 64

/* An empty table of entries of elem bytes (>= sizeof(struct mt_addrtab_head)), with a
 * hash key of its own. */
void mt_addrtab_init(struct mt_addrtab *t, size_t elem);

/* The entry for key, or NULL. */
void *mt_addrtab_find(const struct mt_addrtab *t, uint64_t key);

/* The entry for key: the live one (*existed = 1), else a new one, zeroed but for its
 * head (*existed = 0). NULL when no memory is left to grow. existed may be NULL. */
void *mt_addrtab_get(struct mt_addrtab *t, uint64_t key, int *existed);

/* Removes the entry e (a pointer the table returned, still valid). Entries after it
 * may move: pointers into the table are invalid afterwards. */
void mt_addrtab_remove(struct mt_addrtab *t, void *e);

/* Entry at slot i (0 <= i < cap) if live, else NULL: for walking the table. */
static inline void *mt_addrtab_at(const struct mt_addrtab *t, size_t i)
{
    struct mt_addrtab_head *h = (struct mt_addrtab_head *)(void *)(t->slots + i * t->elem);
    return h->used ? h : NULL;
}

/* The live entries, sorted by key, into a new array *out (free it) of *n; NULL and 0
 * when the table is empty. 0, or -1 when out of memory. */
int mt_addrtab_sorted(const struct mt_addrtab *t, void ***out, size_t *n);

/* Gives the slots back; the table is empty and usable again. */
void mt_addrtab_free(struct mt_addrtab *t);

#endif
