/* stack_bench: what one recorded event pays for its stack.
 *
 * Prints ns per native capture at depth 16 and 32 (from a real stack that deep),
 * per intern of an already seen stack, and per capture + intern, plus the interning
 * rate of several threads on seen stacks. Usage: stack_bench [iterations]. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "examples/args.h"
#include "stack.h"
#include "mtx/util.h"

#if defined(__clang__)
#define FRAME __attribute__((noinline))
#else
#define FRAME __attribute__((noipa))
#endif
#define NO_TAIL() __asm__ volatile("" ::: "memory")

static long iters = 200000;
static volatile uint32_t sink;

struct result {
    double capture_ns, intern_ns, both_ns;
    int depth;
};

static void measure(int depth, struct result *r)
{
    uintptr_t ips[64];
    int n = 0;
    uint64_t t0 = mtx_now_ns();
    for (long i = 0; i < iters; i++)
        n = mt_stack_capture(ips, depth, 0);
    uint64_t t1 = mtx_now_ns();
    sink = mt_stack_intern(ips, n);
    for (long i = 0; i < iters; i++)
        sink = mt_stack_intern(ips, n);
    uint64_t t2 = mtx_now_ns();
    for (long i = 0; i < iters; i++) {
        n = mt_stack_capture(ips, depth, 0);
        sink = mt_stack_intern(ips, n);
    }
    uint64_t t3 = mtx_now_ns();
    r->depth = n;
    r->capture_ns = (double)(t1 - t0) / (double)iters;
    r->intern_ns = (double)(t2 - t1) / (double)iters;
    r->both_ns = (double)(t3 - t2) / (double)iters;
}

/* Recurses until the stack is depth frames above main's caller chain. */
FRAME static void descend(int left, int depth, struct result *r)
{
    if (left > 0)
        descend(left - 1, depth, r);
    else
        measure(depth, r);
    NO_TAIL();
}

#define NTHREADS 4

static void *intern_thread(void *arg)
{
    const uintptr_t *ips = arg;
    for (long i = 0; i < iters; i++)
        sink = mt_stack_intern(ips, 32);
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = args_check(argc, argv, 1,
                        "usage: stack_bench [ITERATIONS]\n"
                        "Times stack capture at depths 16 and 32, interning of a seen stack, and\n"
                        "interning from several threads, ITERATIONS times each.\n");
    if (rc >= 0)
        return rc;
    long long count = iters;
    if (argc > 1 && args_count(argv, "ITERATIONS", argv[1], 1, 1000000000LL, &count) != 0)
        return 2;
    iters = (long)count;
    static const int depths[] = {16, 32};
    for (size_t i = 0; i < MTX_ARRAY_SIZE(depths); i++) {
        struct result r;
        descend(depths[i], depths[i], &r);
        printf("depth %2d: capture %7.1f ns  intern(seen) %6.1f ns  capture+intern %7.1f ns\n",
               r.depth, r.capture_ns, r.intern_ns, r.both_ns);
    }

    uintptr_t stacks[NTHREADS][32];
    for (int t = 0; t < NTHREADS; t++)
        for (int i = 0; i < 32; i++)
            stacks[t][i] = 0x400000 + (uintptr_t)(t % 2) * 0x1000 + (uintptr_t)i * 16;
    for (int t = 0; t < NTHREADS; t++)
        mt_stack_intern(stacks[t], 32);
    pthread_t th[NTHREADS];
    uint64_t t0 = mtx_now_ns();
    for (int t = 0; t < NTHREADS; t++)
        pthread_create(&th[t], NULL, intern_thread, stacks[t]);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    uint64_t t1 = mtx_now_ns();
    printf("%d threads: intern(seen, 32 frames) %.1f ns per call per thread (wall)\n", NTHREADS,
           (double)(t1 - t0) / (double)iters);
    return 0;
}
