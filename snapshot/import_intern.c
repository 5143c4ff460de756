/* import_intern.c: one output file's string, frame and stack tables, interned.
 *
 * Each table is an array by id plus an open-addressing index of (hash, id); equal
 * hashes are told apart by comparing the entries themselves. Entries past the
 * written mark are the ones mt_intern_flush() writes next, so a caller may intern
 * while it goes and flush before each batch of events. */
#include "config.h"

#include "import.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
}

static uint64_t hash_str(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t k = 0; k < n; k++)
        h = (h ^ (unsigned char)s[k]) * 0x100000001b3ull;
    return mix(h, 1);
}

/* A string key: bytes and length (no NUL inside). */
struct skey {
    const char *s;
    size_t n;
};

/* Finds the slot of hash h whose entry eq() accepts, or the empty slot for it. */
typedef int (*eq_fn)(const struct mt_intern *in, uint32_t id, const void *key);

static size_t slot_of(const struct mt_intern *in, const struct mt_itab *t, uint64_t h, eq_fn eq,
                      const void *key)
{
    size_t mask = t->cap - 1, i = (size_t)h & mask;
    while (t->id[i] && !(t->hash[i] == h && eq(in, t->id[i], key)))
        i = (i + 1) & mask;
    return i;
}

static int grow(struct mt_itab *t)
{
    size_t cap = t->cap ? t->cap * 2 : 1024;
    uint64_t *hash = calloc(cap, sizeof(*hash));
    uint32_t *id = calloc(cap, sizeof(*id));
    if (!hash || !id) {
        free(hash);
        free(id);
        return -1;
    }
    for (size_t k = 0; k < t->cap; k++)
        if (t->id[k]) {
            size_t i = (size_t)t->hash[k] & (cap - 1);
            while (id[i])
                i = (i + 1) & (cap - 1);
            hash[i] = t->hash[k];
            id[i] = t->id[k];
        }
    free(t->hash);
    free(t->id);
    t->hash = hash;
    t->id = id;
    t->cap = cap;
    return 0;
}

static int reserve(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 256;
    void *p = realloc(*arr, c * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = c;
    return 0;
}

/* The id of key (hash h) in table t, adding it with add() when absent. */
static uint32_t lookup(struct mt_intern *in, struct mt_itab *t, uint64_t h, eq_fn eq,
                       const void *key, uint32_t (*add)(struct mt_intern *, const void *))
{
    if (in->nomem)
        return 0;
    if ((t->n + 1) * 4 > t->cap * 3 && grow(t) != 0) {
        in->nomem = 1;
        return 0;
    }
    size_t i = slot_of(in, t, h, eq, key);
    if (t->id[i])
        return t->id[i];
    uint32_t id = add(in, key);
    if (!id)
        return 0;
    t->hash[i] = h;
    t->id[i] = id;
    t->n++;
    return id;
}

static int eq_str(const struct mt_intern *in, uint32_t id, const void *key)
{
    const struct skey *k = key;
    const char *s = in->str[id - 1];
    return strncmp(s, k->s, k->n) == 0 && s[k->n] == '\0';
}

static uint32_t add_str(struct mt_intern *in, const void *key)
{
    const struct skey *k = key;
    char *s = strndup(k->s, k->n);
    if (!s || reserve((void **)&in->str, &in->capstr, in->nstr, sizeof(*in->str))) {
        free(s);
        in->nomem = 1;
        return 0;
    }
    in->str[in->nstr++] = s;
    return (uint32_t)in->nstr;
}

static int eq_frame(const struct mt_intern *in, uint32_t id, const void *key)
{
    const struct mt_frame_rec *a = &in->frame[id - 1], *b = key;
    return a->ip == b->ip && a->offset == b->offset && a->module == b->module &&
           a->symbol == b->symbol && a->file == b->file && a->line == b->line;
}

static uint32_t add_frame(struct mt_intern *in, const void *key)
{
    if (reserve((void **)&in->frame, &in->capframe, in->nframe, sizeof(*in->frame))) {
        in->nomem = 1;
        return 0;
    }
    in->frame[in->nframe++] = *(const struct mt_frame_rec *)key;
    return (uint32_t)in->nframe;
}

static int eq_stack(const struct mt_intern *in, uint32_t id, const void *key)
{
    const uint32_t *k = key;
    return in->parent[id - 1] == k[0] && in->pframe[id - 1] == k[1];
}

static uint32_t add_stack(struct mt_intern *in, const void *key)
{
    const uint32_t *k = key;
    size_t cap = in->capstack;
    if (reserve((void **)&in->parent, &cap, in->nstack, sizeof(uint32_t)) ||
        reserve((void **)&in->pframe, &in->capstack, in->nstack, sizeof(uint32_t))) {
        in->nomem = 1;
        return 0;
    }
    in->parent[in->nstack] = k[0];
    in->pframe[in->nstack++] = k[1];
    return (uint32_t)in->nstack;
}

void mt_intern_init(struct mt_intern *in)
{
    memset(in, 0, sizeof(*in));
}

void mt_intern_free(struct mt_intern *in)
{
    for (size_t k = 0; k < in->nstr; k++)
        free(in->str[k]);
    free(in->str);
    free(in->frame);
    free(in->parent);
    free(in->pframe);
    struct mt_itab *t[3] = {&in->tstr, &in->tframe, &in->tstack};
    for (int k = 0; k < 3; k++) {
        free(t[k]->hash);
        free(t[k]->id);
    }
    memset(in, 0, sizeof(*in));
}

uint32_t mt_intern_string(struct mt_intern *in, const char *s)
{
    return s ? mt_intern_stringn(in, s, strlen(s)) : 0;
}

uint32_t mt_intern_stringn(struct mt_intern *in, const char *s, size_t n)
{
    if (!s || !n)
        return 0;
    struct skey k = {s, n};
    return lookup(in, &in->tstr, hash_str(s, n), eq_str, &k, add_str);
}

uint32_t mt_intern_frame(struct mt_intern *in, const struct mt_frame_rec *f)
{
    uint64_t h =
        mix(mix(mix(mix(mix(mix(2, f->ip), f->offset), f->module), f->symbol), f->file), f->line);
    return lookup(in, &in->tframe, h, eq_frame, f, add_frame);
}

uint32_t mt_intern_stack(struct mt_intern *in, uint32_t parent, uint32_t frame)
{
    uint32_t key[2] = {parent, frame};
    return lookup(in, &in->tstack, mix(mix(3, parent), frame), eq_stack, key, add_stack);
}

int mt_intern_flush(struct mt_intern *in, struct mt_writer *w)
{
    if (in->nomem)
        return MEMTRACE_ENOMEM;
    int rc = 0;
    if (in->nstr > in->wstr) {
        rc = mt_writer_strings(w, (uint32_t)in->wstr + 1, in->nstr - in->wstr,
                               (const char *const *)in->str + in->wstr);
        if (rc)
            return rc;
        in->wstr = in->nstr;
    }
    if (in->nframe > in->wframe) {
        rc = mt_writer_frames(w, (uint32_t)in->wframe + 1, in->nframe - in->wframe,
                              in->frame + in->wframe);
        if (rc)
            return rc;
        in->wframe = in->nframe;
    }
    if (in->nstack > in->wstack) {
        rc = mt_writer_stacks(w, (uint32_t)in->wstack + 1, in->nstack - in->wstack,
                              in->parent + in->wstack, in->pframe + in->wstack);
        if (rc)
            return rc;
        in->wstack = in->nstack;
    }
    return 0;
}
