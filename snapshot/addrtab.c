/* addrtab.c: the address table of addrtab.h. */
#include "config.h"

#include "addrtab.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static uint64_t mix(uint64_t x)
{
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    return x;
}

void mt_addrtab_init(struct mt_addrtab *t, size_t elem)
{
    memset(t, 0, sizeof(*t));
    t->elem = elem;
    uint64_t k[2];
    if (getrandom(k, sizeof(k), GRND_NONBLOCK) != (ssize_t)sizeof(k)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        k[0] = mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uintptr_t)t);
        k[1] = mix(k[0] + 0x9e3779b97f4a7c15ULL);
    }
    t->k0 = k[0];
    t->k1 = k[1] | 1;
}

/* Keyed either way. The strong mix: the key enters before and between the two
 * non-linear rounds, so the slot of an address cannot be predicted without it. The
 * fast one costs a multiply where the mix costs five, and the probe bound covers
 * what it does not promise. */
static size_t home(const struct mt_addrtab *t, uint64_t key)
{
    if (t->strong)
        return (size_t)(mix(mix(key ^ t->k0) * t->k1) & (t->cap - 1));
    return (size_t)(((key ^ t->k0) * t->k1) >> t->shift);
}

static struct mt_addrtab_head *slot(const struct mt_addrtab *t, size_t i)
{
    return (struct mt_addrtab_head *)(void *)(t->slots + i * t->elem);
}

void *mt_addrtab_find(const struct mt_addrtab *t, uint64_t key)
{
    if (t->n == 0)
        return NULL;
    for (size_t s = home(t, key);; s = (s + 1) & (t->cap - 1)) {
        struct mt_addrtab_head *h = slot(t, s);
        if (!h->used)
            return NULL;
        if (h->key == key)
            return h;
    }
}

/* Moves every entry into cap slots, hashed as strong says. */
static int rehash(struct mt_addrtab *t, size_t cap, int strong)
{
    if (cap > SIZE_MAX / 2 / t->elem)
        return -1;
    unsigned char *old = t->slots;
    size_t oldcap = t->cap;
    t->slots = calloc(cap, t->elem);
    if (!t->slots) {
        t->slots = old;
        return -1;
    }
    t->cap = cap;
    t->strong = strong;
    t->shift = 64u - (unsigned)__builtin_ctzll((unsigned long long)cap);
    for (size_t k = 0; k < oldcap; k++) {
        struct mt_addrtab_head *h = (struct mt_addrtab_head *)(void *)(old + k * t->elem);
        if (!h->used)
            continue;
        size_t s = home(t, h->key);
        while (slot(t, s)->used)
            s = (s + 1) & (cap - 1);
        memcpy(slot(t, s), h, t->elem);
    }
    free(old);
    return 0;
}

static int grow(struct mt_addrtab *t)
{
    return rehash(t, t->cap ? t->cap * 2 : 1024, t->strong);
}

void *mt_addrtab_get(struct mt_addrtab *t, uint64_t key, int *existed)
{
    if ((t->n + 1) * 2 > t->cap && grow(t) < 0)
        return NULL;
    size_t s = home(t, key), walked = 0;
    struct mt_addrtab_head *h;
    while ((h = slot(t, s))->used) {
        if (h->key == key) {
            if (existed)
                *existed = 1;
            return h;
        }
        s = (s + 1) & (t->cap - 1);
        if (++walked == MT_ADDRTAB_PROBES + 1 && !t->strong && rehash(t, t->cap, 1) == 0)
            return mt_addrtab_get(t, key, existed);
    }
    if (existed)
        *existed = 0;
    memset(h, 0, t->elem);
    h->used = 1;
    h->key = key;
    t->n++;
    return h;
}

void mt_addrtab_remove(struct mt_addrtab *t, void *e)
{
    size_t mask = t->cap - 1;
    size_t hole = (size_t)((unsigned char *)e - t->slots) / t->elem;
    size_t s = hole, walked = 0;
    slot(t, hole)->used = 0;
    t->n--;
    for (;;) {
        s = (s + 1) & mask;
        struct mt_addrtab_head *h = slot(t, s);
        if (!h->used) {
            if (walked > MT_ADDRTAB_PROBES && !t->strong)
                rehash(t, t->cap, 1);
            return;
        }
        walked++;
        size_t want = home(t, h->key);
        /* Move s into the hole unless its home lies cyclically in (hole, s]. */
        if (((s - want) & mask) >= ((s - hole) & mask)) {
            memcpy(slot(t, hole), h, t->elem);
            h->used = 0;
            hole = s;
        }
    }
}

static int by_key(const void *a, const void *b)
{
    uint64_t x = (*(const struct mt_addrtab_head *const *)a)->key;
    uint64_t y = (*(const struct mt_addrtab_head *const *)b)->key;
    return x < y ? -1 : x > y;
}

int mt_addrtab_sorted(const struct mt_addrtab *t, void ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (t->n == 0)
        return 0;
    void **v = malloc(t->n * sizeof(*v));
    if (!v)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        void *e = mt_addrtab_at(t, i);
        if (e)
            v[(*n)++] = e;
    }
    qsort(v, *n, sizeof(*v), by_key);
    *out = v;
    return 0;
}

void mt_addrtab_free(struct mt_addrtab *t)
{
    free(t->slots);
    t->slots = NULL;
    t->cap = 0;
    t->n = 0;
}
