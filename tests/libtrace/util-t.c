/* util-t: the malloc-free helpers used on hot paths. */
#include "config.h"

#include "tap.h"
#include "mtx/util.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Threads take turns under a lock, so each read happens after the previous one:
 * every value must be at least the last one read by any thread. */
static pthread_mutex_t turn = PTHREAD_MUTEX_INITIALIZER;
static uint64_t last_read;
static long backwards, reads;

static void *reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100000; i++) {
        pthread_mutex_lock(&turn);
        uint64_t t = mtx_now_ns();
        if (t < last_read)
            backwards++;
        last_read = t;
        reads++;
        pthread_mutex_unlock(&turn);
    }
    return NULL;
}

/* How far mtx_now_ns is from CLOCK_MONOTONIC: the best of a few bracketed reads. */
static int64_t offset_ns(void)
{
    int64_t best = INT64_MAX;
    for (int i = 0; i < 50; i++) {
        uint64_t a = mono(), t = mtx_now_ns(), b = mono();
        int64_t off = (int64_t)t - (int64_t)(a + (b - a) / 2);
        if ((off < 0 ? -off : off) < (best < 0 ? -best : best))
            best = off;
    }
    return best;
}

static int64_t abs64(int64_t x)
{
    return x < 0 ? -x : x;
}

/* Runs the clock with a first slope off by skew_ppm and segments of 2^shift ticks for
 * ms milliseconds; returns the offset from CLOCK_MONOTONIC at the end. */
static int64_t skewed_run(unsigned shift, int skew_ppm, unsigned ms)
{
    mtx_clock_test_restart(shift, skew_ppm);
    uint64_t end = mono() + ms * 1000000ULL, prev = 0;
    long back = 0;
    while (mono() < end) {
        uint64_t t = mtx_now_ns();
        back += t < prev;
        prev = t;
    }
    backwards += back;
    return offset_ns();
}

static void test_clock(void)
{
    if (!mtx_clock_is_tsc()) {
        skip(7, "mtx_now_ns uses clock_gettime here (no constant, nonstop TSC clocksource)");
        return;
    }
    ok(abs64(offset_ns()) < 20000, "TSC clock starts within 20 us of CLOCK_MONOTONIC");
    /* 64k-tick segments (tens of microseconds): threads cross thousands of them. */
    is_int(0, mtx_clock_test_restart(16, 0), "restart with short segments");
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, reader, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    is_int(400000, reads, "400000 reads from 4 threads");
    is_int(0, backwards, "never behind a read another thread made before");
    /* A first slope 0.5% off would put the clock 500 us away after 100 ms; segments of
     * about 0.4 ms re-aim it at CLOCK_MONOTONIC. */
    backwards = 0;
    int64_t fast = skewed_run(20, 5000, 100), slow = skewed_run(20, -5000, 100);
    diag("offset after 100 ms: %lld ns (started 0.5%% fast), %lld ns (0.5%% slow)", (long long)fast,
         (long long)slow);
    ok(abs64(fast) < 10000, "a fast first slope is corrected to within 10 us");
    ok(abs64(slow) < 10000, "a slow first slope is corrected to within 10 us");
    is_int(0, backwards, "and the clock never went back while correcting");
    mtx_clock_test_restart(26, 0);
}

int main(void)
{
    plan(19);
    char buf[64];
    mtx_format(buf, sizeof buf, "%s=%d %u %x %%", "a", -42, 7u, 255u);
    is_string("a=-42 7 ff %", buf, "ints, strings, hex and percent");
    mtx_format(buf, sizeof buf, "%llu %lld %zu", 18446744073709551615ULL, -9223372036854775807LL - 1,
              (size_t)12);
    is_string("18446744073709551615 -9223372036854775808 12", buf, "64-bit extremes");
    mtx_format(buf, sizeof buf, "%p", (void *)0x1f);
    is_string("0x1f", buf, "pointers");
    size_t n = mtx_format(buf, 5, "%s", "abcdefgh");
    is_string("abcd", buf, "truncates and terminates");
    is_int(4, (long long)n, "returns the length written");

    struct mtx_arena a = {0};
    char *p = mtx_arena_alloc(&a, 10, 1);
    uint64_t *q = mtx_arena_alloc(&a, sizeof *q, 8);
    ok(p != NULL && q != NULL && ((uintptr_t)q & 7) == 0, "arena aligns");
    ok((char *)q >= p + 10, "arena allocations do not overlap");
    void *big = mtx_arena_alloc(&a, 3u << 20, 16);
    ok(big != NULL, "arena serves blocks larger than its chunk");
    memset(big, 1, 3u << 20);

    ok(mtx_hash_bytes("abc", 3) == mtx_hash_bytes("abc", 3), "hash is deterministic");
    ok(mtx_hash_bytes("abc", 3) != mtx_hash_bytes("abd", 3), "hash separates close keys");
    uint64_t t0 = mtx_now_ns(), t1 = mtx_now_ns();
    ok(t1 >= t0, "monotonic clock does not go back");
    ok(mtx_gettid() == mtx_gettid() && mtx_gettid() != 0, "thread id cached and non-zero");
    test_clock();
    return exit_status();
}
