/* segtab.c: see segtab.h. */
#include "config.h"

#include "segtab.h"

#include "mtx/util.h"

#include <string.h>

#define SEGTAB_MIN_CAP 1024

size_t mt_segtab_home(const struct mt_segtab *t, uint64_t key, int kind)
{
    return (size_t)mtx_hash_u64(key ^ ((uint64_t)kind << 61)) & (t->cap - 1);
}

/* At most half full: probes stay short without tombstones to skip. */
static int grow(struct mt_segtab *t)
{
    size_t ncap = t->cap ? t->cap * 2 : SEGTAB_MIN_CAP;
    struct mt_seg *n = mtx_map(ncap * sizeof *n);
    if (n == NULL)
        return -1;
    struct mt_segtab old = *t;
    t->slot = n;
    t->cap = ncap;
    for (size_t i = 0; i < old.cap; i++) {
        if (!old.slot[i].used)
            continue;
        size_t j = mt_segtab_home(t, old.slot[i].key, old.slot[i].kind);
        while (t->slot[j].used)
            j = (j + 1) & (t->cap - 1);
        t->slot[j] = old.slot[i];
    }
    mtx_unmap(old.slot, old.cap * sizeof *old.slot);
    return 0;
}

int mt_segtab_insert(struct mt_segtab *t, const struct mt_seg *s)
{
    if ((t->live + 1) * 2 > t->cap && grow(t) != 0)
        return -1;
    size_t i = mt_segtab_home(t, s->key, s->kind);
    while (t->slot[i].used && !(t->slot[i].key == s->key && t->slot[i].kind == s->kind))
        i = (i + 1) & (t->cap - 1);
    if (!t->slot[i].used)
        t->live++;
    t->slot[i] = *s;
    t->slot[i].used = 1;
    return 0;
}

int mt_segtab_remove(struct mt_segtab *t, uint64_t key, int kind, struct mt_seg *out)
{
    if (t->cap == 0)
        return 0;
    size_t mask = t->cap - 1;
    size_t i = mt_segtab_home(t, key, kind);
    while (t->slot[i].used && !(t->slot[i].key == key && t->slot[i].kind == kind))
        i = (i + 1) & mask;
    if (!t->slot[i].used)
        return 0;
    *out = t->slot[i];
    t->live--;
    /* Close the hole: an entry further along the run moves into it unless its home
     * lies cyclically after the hole, where a lookup would no longer pass it. */
    for (size_t j = (i + 1) & mask; t->slot[j].used; j = (j + 1) & mask) {
        size_t h = mt_segtab_home(t, t->slot[j].key, t->slot[j].kind);
        int stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (stays)
            continue;
        t->slot[i] = t->slot[j];
        i = j;
    }
    t->slot[i].used = 0;
    return 1;
}

void mt_segtab_clear(struct mt_segtab *t)
{
    if (t->slot != NULL)
        memset(t->slot, 0, t->cap * sizeof *t->slot);
    t->live = 0;
}

void mt_segtab_free(struct mt_segtab *t)
{
    mtx_unmap(t->slot, t->cap * sizeof *t->slot);
    *t = (struct mt_segtab){0};
}
