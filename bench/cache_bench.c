/* cache_bench: latency of one alloc+free pair on the host backend, raw device calls
 * against the caching allocator without recording, recording without stacks, and
 * recording with 32-frame stacks. Each case runs once untimed (warming the cache and
 * filling the history ring, as in a long run), then timed 3 times; the table shows the best
 * thread CPU time, steady on a shared machine, and wall time. An optional second
 * argument (raw, none, rec, stk, ratio or clock) runs one case alone, for perf and
 * callgrind. The last lines time the clock every recorded event reads.
 *
 * The ratio of recording (no stacks) to not recording is also measured on its own,
 * interleaved: rounds alternate the two, so a change in the machine's speed during
 * the run touches both alike, and the medians' ratio is reported with the spread of
 * the rounds' ratios. The history ring there is one chunk, so restarting the
 * recorder each round costs one prefault, not sixteen. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "examples/args.h"
#include "memtrace.h"
#include "memtrace_alloc.h"
#include "mtx/util.h"

static struct memtrace_device *dev;
static struct memtrace_allocator *alloc;

typedef void (*loop_fn)(long n);

static void raw_loop(long n)
{
    for (long i = 0; i < n; i++) {
        uint64_t p;
        if (memtrace_device_malloc(dev, 4096, &p) || memtrace_device_free(dev, p))
            abort();
    }
}

static void cache_loop(long n)
{
    for (long i = 0; i < n; i++) {
        uint64_t p;
        if (memtrace_alloc_malloc(alloc, 4096, NULL, &p) || memtrace_alloc_free(alloc, p))
            abort();
    }
}

struct timing {
    double cpu, wall;
};

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Best of 3 timed runs after the untimed one: on a shared machine single runs of the
 * same case differ by a third. */
static struct timing timed(loop_fn fn, long n)
{
    struct timing best = {1e30, 1e30};
    fn(n);
    for (int r = 0; r < 3; r++) {
        uint64_t c0 = cpu_ns(), t0 = mtx_now_ns();
        fn(n);
        uint64_t t1 = mtx_now_ns(), c1 = cpu_ns();
        double cpu = (double)(c1 - c0) / (double)n, wall = (double)(t1 - t0) / (double)n;
        best.cpu = cpu < best.cpu ? cpu : best.cpu;
        best.wall = wall < best.wall ? wall : best.wall;
    }
    return best;
}

static struct timing __attribute__((noinline)) deep(int depth, loop_fn fn, long n)
{
    if (depth > 1) {
        struct timing r = deep(depth - 1, fn, n);
        __asm__ volatile("" ::: "memory");
        return r;
    }
    return timed(fn, n);
}

static double cpu_once(loop_fn fn, long n)
{
    uint64_t c0 = cpu_ns();
    fn(n);
    return (double)(cpu_ns() - c0) / (double)n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define RATIO_ROUNDS 9

static void ratio(long n)
{
    double off[RATIO_ROUNDS], on[RATIO_ROUNDS], r[RATIO_ROUNDS];
    struct memtrace_options o;
    memtrace_options_init(&o);
    o.context = MEMTRACE_CONTEXT_NONE;
    o.max_entries = 1 << 16;
    cache_loop(n);
    for (int i = 0; i < RATIO_ROUNDS; i++) {
        off[i] = cpu_once(cache_loop, n);
        memtrace_record_history(&o);
        cache_loop(n / 10); /* fill the ring */
        on[i] = cpu_once(cache_loop, n);
        memtrace_record_history(NULL);
        r[i] = on[i] / off[i];
    }
    qsort(off, RATIO_ROUNDS, sizeof off[0], cmp_double);
    qsort(on, RATIO_ROUNDS, sizeof on[0], cmp_double);
    qsort(r, RATIO_ROUNDS, sizeof r[0], cmp_double);
    int m = RATIO_ROUNDS / 2;
    printf("\ninterleaved, %d rounds of %ld pairs, CPU ns per pair (median): not recording "
           "%.1f, recording without stacks %.1f: ratio %.2f (rounds %.2f to %.2f)\n",
           RATIO_ROUNDS, n, off[m], on[m], on[m] / off[m], r[0], r[RATIO_ROUNDS - 1]);
}

static void row(const char *name, struct timing t)
{
    printf("| %s | %.1f | %.1f |\n", name, t.cpu, t.wall);
}

static int wanted(const char *only, const char *name)
{
    return only == NULL || strcmp(only, name) == 0;
}

int main(int argc, char **argv)
{
    static const char *cases[] = {"raw", "none", "rec", "stk", "ratio", "clock"};
    int rc = args_check(argc, argv, 2,
                        "usage: cache_bench [PAIRS [CASE]]\n"
                        "Times alloc+free pairs on the host device (PAIRS, default 2000000): the\n"
                        "raw device calls, the caching allocator not recording, recording without\n"
                        "stacks and with 32-frame stacks, their interleaved ratio, and the clock.\n"
                        "CASE runs one of them alone: raw, none, rec, stk, ratio or clock.\n");
    if (rc >= 0)
        return rc;
    long long pairs = 2000000;
    /* At least 20: the deep case runs PAIRS/20. */
    if (argc > 1 && args_count(argv, "PAIRS", argv[1], 20, 1000000000000LL, &pairs) != 0)
        return 2;
    long n = (long)pairs;
    const char *only = argc > 2 ? argv[2] : NULL;
    int known = only == NULL;
    for (size_t i = 0; i < MTX_ARRAY_SIZE(cases) && !known; i++)
        known = strcmp(only, cases[i]) == 0;
    if (!known) {
        fprintf(stderr, "cache_bench: unknown case '%s' (raw, none, rec, stk, ratio or clock)\n",
                only);
        return 2;
    }
    struct memtrace_options o;
    if (memtrace_device_open_host(&dev, 1ull << 30) || memtrace_alloc_create(&alloc, dev)) {
        fprintf(stderr, "cache_bench: no host device\n");
        return 1;
    }
    printf("| case | CPU ns per alloc+free pair | wall ns per pair |\n| --- | ---: | ---: |\n");
    if (wanted(only, "raw"))
        row("raw memtrace_device_malloc/free (4 KiB)", timed(raw_loop, n / 10));
    if (wanted(only, "none"))
        row("caching allocator, not recording", timed(cache_loop, n));
    memtrace_options_init(&o);
    o.context = MEMTRACE_CONTEXT_NONE;
    o.max_entries = 1 << 20;
    if (wanted(only, "rec")) {
        memtrace_record_history(&o);
        row("caching allocator, recording, no stacks", timed(cache_loop, n / 4));
    }
    if (wanted(only, "stk")) {
        o.context = MEMTRACE_CONTEXT_ALL;
        o.stack_depth = 32;
        memtrace_record_history(&o);
        row("caching allocator, recording, 32-frame stacks", deep(32, cache_loop, n / 20));
    }
    memtrace_record_history(NULL);
    if (wanted(only, "ratio"))
        ratio(n / 4);
    if (wanted(only, "clock")) {
        long k = n * 5;
        uint64_t sum = 0, c0 = cpu_ns();
        for (long i = 0; i < k; i++)
            sum += mtx_now_ns();
        uint64_t c1 = cpu_ns();
        struct timespec ts;
        for (long i = 0; i < k; i++) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            sum += (uint64_t)ts.tv_nsec;
        }
        uint64_t c2 = cpu_ns();
        printf("\nclock read, CPU ns: mtx_now_ns %.1f (%s), clock_gettime(CLOCK_MONOTONIC) %.1f%s\n",
               (double)(c1 - c0) / (double)k, mtx_clock_is_tsc() ? "TSC clock" : "clock_gettime",
               (double)(c2 - c1) / (double)k, sum == 1 ? " " : "");
    }
    memtrace_alloc_destroy(alloc);
    memtrace_device_close(dev);
    return 0;
}
