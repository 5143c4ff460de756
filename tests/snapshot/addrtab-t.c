/* addrtab-t: snapshot/addrtab.c, the replay's address table. Besides finding and
 * removing, its worst case: addresses made to share one slot under the fast hash
 * (the test knows the table's key, which a file's author does not) must make it
 * switch to its strong hash instead of walking a run as long as the table. */
#include "config.h"

#include "addrtab.h"

#include "tap.h"

#include <unistd.h>

struct entry {
    struct mt_addrtab_head head;
    uint64_t value;
};

/* The longest run of used slots: what a lookup may have to walk. */
static size_t longest_run(const struct mt_addrtab *t)
{
    size_t best = 0, run = 0;
    for (size_t pass = 0; pass < 2; pass++) /* twice round: runs wrap */
        for (size_t i = 0; i < t->cap; i++) {
            run = mt_addrtab_at(t, i) ? run + 1 : 0;
            if (run > best)
                best = run;
        }
    return best < t->cap ? best : t->cap;
}

/* 50,000 addresses at a 512-byte stride, every other one removed, in a table with
 * keys of its own. Returns how many lookups went wrong; *strong: whether the table
 * switched to its strong hash. */
static size_t ordinary_table(size_t *left, int *strong)
{
    struct mt_addrtab t;
    mt_addrtab_init(&t, sizeof(struct entry));
    size_t n = 50000, wrong = 0;
    for (size_t i = 0; i < n; i++) {
        int existed = 1;
        struct entry *e = mt_addrtab_get(&t, 0x7f0000000000ull + i * 512, &existed);
        if (e == NULL || existed)
            wrong++;
        else
            e->value = i;
    }
    for (size_t i = 0; i < n; i += 2) {
        struct entry *e = mt_addrtab_find(&t, 0x7f0000000000ull + i * 512);
        if (e == NULL || e->value != i)
            wrong++;
        else
            mt_addrtab_remove(&t, e);
    }
    for (size_t i = 0; i < n; i++) {
        const struct entry *e = mt_addrtab_find(&t, 0x7f0000000000ull + i * 512);
        if (i % 2 ? e == NULL || e->value != i : e != NULL)
            wrong++;
    }
    *left = t.n;
    *strong = t.strong;
    mt_addrtab_free(&t);
    return wrong;
}

/* The fast hash is keyed at random: for about one key in fifty such a stride makes a
 * run long enough to switch to the strong hash (correct, a little slower). So 20
 * tables, and most must keep the fast one. */
static void ordinary(void)
{
    size_t wrong = 0, bad_left = 0, switched = 0;
    for (int k = 0; k < 20; k++) {
        size_t left;
        int strong;
        wrong += ordinary_table(&left, &strong);
        bad_left += left != 25000;
        switched += strong != 0;
    }
    is_int(0, wrong, "50,000 addresses in, every other one out: each found or gone as it should");
    is_int(0, bad_left, "25,000 left in each of 20 tables");
    ok(switched <= 5, "ordinary addresses keep the fast hash (%zu of 20 tables switched)",
       switched);
}

static void colliding(void)
{
    struct mt_addrtab t;
    mt_addrtab_init(&t, sizeof(struct entry));
    uint64_t inv = t.k1; /* k1 is odd: Newton's iteration for its inverse mod 2^64 */
    for (int i = 0; i < 6; i++)
        inv *= 2 - t.k1 * inv;
    /* (addr ^ k0) * k1 == i: the top bits, the fast hash's slot, are 0 for all. */
    size_t n = 200000, wrong = 0;
    alarm(120);
    for (size_t i = 0; i < n; i++) {
        uint64_t addr = ((uint64_t)i * inv) ^ t.k0;
        int existed = 1;
        struct entry *e = mt_addrtab_get(&t, addr, &existed);
        if (e == NULL || existed)
            wrong++;
        else
            e->value = i;
    }
    alarm(0);
    is_int(0, wrong, "200,000 addresses that share one fast slot all go in (in bounded time)");
    ok(t.strong, "the table switched to its strong hash");
    size_t run = longest_run(&t);
    ok(run <= 4 * MT_ADDRTAB_PROBES, "the longest run of used slots is %zu (of %zu)", run, t.cap);
    for (size_t i = 0; i < n; i++) {
        uint64_t addr = ((uint64_t)i * inv) ^ t.k0;
        struct entry *e = mt_addrtab_find(&t, addr);
        if (e == NULL || e->value != i)
            wrong++;
        else
            mt_addrtab_remove(&t, e);
    }
    is_int(0, wrong, "each is found and removed");
    is_int(0, (long long)t.n, "the table is empty again");
    mt_addrtab_free(&t);
}

int main(void)
{
    ordinary();
    colliding();
    done_testing();
    return exit_status();
}
