/* util-t: the malloc-free helpers used on hot paths. */
#include "config.h"

#include "tap.h"
#include "util.h"

#include <stdint.h>
#include <string.h>

int main(void)
{
    plan(12);
    char buf[64];
    mt_format(buf, sizeof buf, "%s=%d %u %x %%", "a", -42, 7u, 255u);
    is_string("a=-42 7 ff %", buf, "ints, strings, hex and percent");
    mt_format(buf, sizeof buf, "%llu %lld %zu", 18446744073709551615ULL, -9223372036854775807LL - 1,
              (size_t)12);
    is_string("18446744073709551615 -9223372036854775808 12", buf, "64-bit extremes");
    mt_format(buf, sizeof buf, "%p", (void *)0x1f);
    is_string("0x1f", buf, "pointers");
    size_t n = mt_format(buf, 5, "%s", "abcdefgh");
    is_string("abcd", buf, "truncates and terminates");
    is_int(4, (long long)n, "returns the length written");

    struct mt_arena a = {0};
    char *p = mt_arena_alloc(&a, 10, 1);
    uint64_t *q = mt_arena_alloc(&a, sizeof *q, 8);
    ok(p != NULL && q != NULL && ((uintptr_t)q & 7) == 0, "arena aligns");
    ok((char *)q >= p + 10, "arena allocations do not overlap");
    void *big = mt_arena_alloc(&a, 3u << 20, 16);
    ok(big != NULL, "arena serves blocks larger than its chunk");
    memset(big, 1, 3u << 20);

    ok(mt_hash_bytes("abc", 3) == mt_hash_bytes("abc", 3), "hash is deterministic");
    ok(mt_hash_bytes("abc", 3) != mt_hash_bytes("abd", 3), "hash separates close keys");
    uint64_t t0 = mt_now_ns(), t1 = mt_now_ns();
    ok(t1 >= t0, "monotonic clock does not go back");
    ok(mt_gettid() == mt_gettid() && mt_gettid() != 0, "thread id cached and non-zero");
    return exit_status();
}
