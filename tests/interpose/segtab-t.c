/* segtab-t: interpose/segtab.c, the preload's table of live segments, against a
 * plain array: random inserts, replacements and removals over a small set of
 * addresses, so runs of colliding entries form and are cut in every place. */
#include "rng.h"
#include "tap.h"

#include "interpose/segtab.h"

#include <stdint.h>

#define NKEYS 4096
#define NOPS  300000

struct ref {
    int live;
    uint64_t size;
};

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_rand(void)
{
    return test_rand(&rng);
}

static uint64_t key_of(unsigned k)
{
    return 0x7f0000000000ULL + (uint64_t)k * 0x200000ULL;
}

/* Every entry is reachable: no empty slot between its home and where it sits; a
 * removal that left a gap would hide the entries after it from lookups. */
static int reachable(const struct mt_segtab *t)
{
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slot[i].used)
            continue;
        size_t h = mt_segtab_home(t, t->slot[i].key, t->slot[i].kind);
        for (size_t j = h; j != i; j = (j + 1) & (t->cap - 1))
            if (!t->slot[j].used)
                return 0;
    }
    return 1;
}

static int same_contents(const struct mt_segtab *t, const struct ref *ref, int kinds)
{
    size_t live = 0, used = 0;
    for (unsigned k = 0; k < NKEYS; k++)
        for (int kind = 0; kind < kinds; kind++)
            live += ref[k * kinds + kind].live;
    for (size_t i = 0; i < t->cap; i++) {
        const struct mt_seg *s = &t->slot[i];
        if (!s->used)
            continue;
        used++;
        uint64_t off = s->key - key_of(0);
        unsigned k = (unsigned)(off / 0x200000ULL);
        if (off % 0x200000ULL || k >= NKEYS || s->kind >= kinds)
            return 0;
        const struct ref *r = &ref[k * kinds + s->kind];
        if (!r->live || r->size != s->size)
            return 0;
    }
    return used == live && t->live == live;
}

int main(void)
{
    plan(11);

    /* Random operations on keys of three kinds; the first half on few keys. */
    enum { KINDS = 3 };
    static struct ref ref[NKEYS * KINDS];
    struct mt_segtab t = {0};
    int agree = 1, contents = 1;
    long inserts = 0, removes = 0, misses = 0;
    for (long op = 0; op < NOPS && agree; op++) {
        unsigned k = (unsigned)(next_rand() % (op < NOPS / 2 ? 600 : NKEYS));
        int kind = (int)(next_rand() % KINDS);
        struct ref *r = &ref[k * KINDS + kind];
        if (next_rand() % 2) {
            struct mt_seg s = {.key = key_of(k), .size = next_rand() % 100000, .kind = kind};
            agree = mt_segtab_insert(&t, &s) == 0;
            r->live = 1;
            r->size = s.size;
            inserts++;
        } else {
            struct mt_seg out = {0};
            int got = mt_segtab_remove(&t, key_of(k), kind, &out);
            agree = got == r->live &&
                    (!got || (out.size == r->size && out.key == key_of(k) && out.kind == kind));
            if (got)
                removes++;
            else
                misses++;
            r->live = 0;
        }
        if (op % 997 == 0 && (!same_contents(&t, ref, KINDS) || !reachable(&t)))
            contents = 0;
    }
    ok(agree, "%ld inserts, %ld removes and %ld removes of absent keys agree with the reference",
       inserts, removes, misses);
    ok(contents && same_contents(&t, ref, KINDS),
       "the table holds exactly the reference's entries, checked every 997 operations");
    ok(reachable(&t), "every entry is reachable from its home slot");

    /* Every entry still found after all that shifting. */
    int all = 1;
    for (unsigned k = 0; k < NKEYS; k++)
        for (int kind = 0; kind < KINDS; kind++) {
            struct mt_seg out;
            int got = mt_segtab_remove(&t, key_of(k), kind, &out);
            if (got != ref[k * KINDS + kind].live)
                all = 0;
        }
    ok(all && t.live == 0, "removing every key finds exactly the live ones, leaving none");

    /* A replacement keeps one entry. */
    struct mt_seg a = {.key = 0x1000, .size = 10}, b = {.key = 0x1000, .size = 20};
    mt_segtab_insert(&t, &a);
    mt_segtab_insert(&t, &b);
    struct mt_seg out = {0};
    ok(t.live == 1 && mt_segtab_remove(&t, 0x1000, 0, &out) == 1 && out.size == 20 &&
           mt_segtab_remove(&t, 0x1000, 0, &out) == 0,
       "the same key entered twice is one entry with the newer size");
    mt_segtab_free(&t);

    /* Churn: a program that frees each segment before the next never grows the
     * table, however many distinct addresses it sees. */
    size_t cap0 = 0;
    int churn = 1;
    for (uint64_t i = 0; i < 1000000 && churn; i++) {
        struct mt_seg s = {.key = 0x200000000ULL + i * 512, .size = 512};
        churn = mt_segtab_insert(&t, &s) == 0 && mt_segtab_remove(&t, s.key, 0, &out) == 1;
        if (i == 0)
            cap0 = t.cap;
    }
    ok(churn && t.live == 0, "a million insert-remove pairs of new addresses");
    is_int((long long)cap0, (long long)t.cap, "the table never grew meanwhile (%zu slots)", t.cap);

    /* Growth keeps every entry. */
    int grown = 1;
    for (uint64_t i = 0; i < 5000; i++) {
        struct mt_seg s = {.key = 0x300000000ULL + i * 4096, .size = i};
        grown &= mt_segtab_insert(&t, &s) == 0;
    }
    ok(grown && t.live == 5000 && t.cap >= 10000, "5000 live entries: %zu slots", t.cap);
    int kept = 1;
    for (uint64_t i = 0; i < 5000; i++)
        kept &= mt_segtab_remove(&t, 0x300000000ULL + i * 4096, 0, &out) == 1 && out.size == i;
    ok(kept, "each is found with its own size after growing");

    /* Clear keeps the slots; free gives them back. */
    struct mt_seg c = {.key = 0x5000, .size = 1};
    mt_segtab_insert(&t, &c);
    size_t cap = t.cap;
    mt_segtab_clear(&t);
    ok(t.live == 0 && t.cap == cap && mt_segtab_remove(&t, 0x5000, 0, &out) == 0,
       "clear forgets the entries and keeps %zu slots", cap);
    mt_segtab_free(&t);
    ok(t.slot == NULL && t.cap == 0 && t.live == 0 && mt_segtab_remove(&t, 1, 0, &out) == 0,
       "free leaves an empty table that lookups accept");
    return exit_status();
}
