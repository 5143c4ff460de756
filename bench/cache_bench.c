/* cache_bench: latency of one alloc+free pair on the host backend, raw device calls
 * against the caching allocator without recording, recording without stacks, and
 * recording with 32-frame stacks. */
#include <stdio.h>
#include <stdlib.h>

#include "memtrace.h"
#include "memtrace_alloc.h"
#include "util.h"

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

static double timed(loop_fn fn, long n)
{
    uint64_t t0, t1;
    fn(n / 10);
    t0 = mt_now_ns();
    fn(n);
    t1 = mt_now_ns();
    return (double)(t1 - t0) / (double)n;
}

static double __attribute__((noinline)) deep(int depth, loop_fn fn, long n)
{
    volatile double r;
    if (depth > 1)
        r = deep(depth - 1, fn, n);
    else
        r = timed(fn, n);
    return r;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    struct memtrace_options o;
    double raw, none, rec, stk;
    if (memtrace_device_open_host(&dev, 1ull << 30) || memtrace_alloc_create(&alloc, dev)) {
        fprintf(stderr, "cache_bench: no host device\n");
        return 1;
    }
    raw = timed(raw_loop, n / 10);
    none = timed(cache_loop, n);
    memtrace_options_init(&o);
    o.context = MEMTRACE_CONTEXT_NONE;
    o.max_entries = 1 << 20;
    memtrace_record_history(&o);
    rec = timed(cache_loop, n / 4);
    o.context = MEMTRACE_CONTEXT_ALL;
    o.stack_depth = 32;
    memtrace_record_history(&o);
    stk = deep(32, cache_loop, n / 20);
    memtrace_record_history(NULL);
    printf("| case | ns per alloc+free pair |\n| --- | ---: |\n");
    printf("| raw memtrace_device_malloc/free (4 KiB) | %.1f |\n", raw);
    printf("| caching allocator, not recording | %.1f |\n", none);
    printf("| caching allocator, recording, no stacks | %.1f |\n", rec);
    printf("| caching allocator, recording, 32-frame stacks | %.1f |\n", stk);
    memtrace_alloc_destroy(alloc);
    memtrace_device_close(dev);
    return 0;
}
