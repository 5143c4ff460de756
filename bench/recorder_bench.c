/* recorder_bench: cost of memtrace_record_event and bytes per event on disk.
 *
 * Times 1M events per case (best of 3 runs): no stacks, and 16- and 32-frame
 * stacks captured from a 40-deep recursion so every frame is real. Both the wall
 * time and the recording thread's CPU time are shown: on a shared machine the CPU
 * time is the steadier figure, the wall time what a program would feel. The history
 * is filled once before timing, as in a long run. Then streams 1M
 * events of a training-loop pattern (the same tensors allocated and freed every
 * iteration at reused addresses, microseconds apart with jitter) to a file and
 * reports its size per event; with no stacks there are no stack tables. */
#include "config.h"

#include "examples/args.h"
#include "memtrace.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EVENTS 1000000
#define RUNS   3

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

struct timing {
    double wall, cpu;
};

static void start(int depth, const char *stream)
{
    struct memtrace_options o;
    memtrace_options_init(&o);
    o.context = depth > 0 ? MEMTRACE_CONTEXT_ALL : MEMTRACE_CONTEXT_NONE;
    o.stack_depth = depth;
    o.max_entries = stream ? 0 : EVENTS;
    o.stream_path = stream;
    int rc = memtrace_record_history(&o);
    if (rc != 0) {
        fprintf(stderr, "recorder_bench: cannot start recording%s%s: %s\n", stream ? " to " : "",
                stream ? stream : "", memtrace_strerror(rc));
        exit(1);
    }
}

/* Records n events of a small allocate/free pattern; returns elapsed ns. */
static __attribute__((noinline)) struct timing record_loop(int n)
{
    uint64_t t0 = now_ns(), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < n; i++) {
        struct memtrace_event ev = {
            .action = (i & 1) ? MEMTRACE_FREE_COMPLETED : MEMTRACE_ALLOC,
            .addr = 0x7f0000000000ULL + (uint64_t)(i % 64) * 4096,
            .size = 4096,
        };
        memtrace_record_event(&ev);
    }
    return (struct timing){(double)(now_ns() - t0),
                           (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0)};
}

static __attribute__((noinline)) struct timing deep(int levels, int n)
{
    if (levels > 0) {
        struct timing r = deep(levels - 1, n);
        __asm__ volatile("" ::: "memory");
        return r;
    }
    return record_loop(n);
}

static void report_case(const char *name, int depth)
{
    struct timing best = {1e30, 1e30};
    start(depth, NULL);
    deep(40, EVENTS); /* fill the history */
    for (int r = 0; r < RUNS; r++) {
        struct timing t = deep(40, EVENTS);
        if (t.wall < best.wall)
            best.wall = t.wall;
        if (t.cpu < best.cpu)
            best.cpu = t.cpu;
    }
    memtrace_record_history(NULL);
    printf("| %s | %.1f | %.1f |\n", name, best.cpu / EVENTS, best.wall / EVENTS);
}

/* A training-loop pattern: per iteration 24 tensors of fixed sizes allocated in
 * order (forward), freed in reverse (backward), with optimizer allocations; times
 * advance 1-50 us with jitter. */
static void stream_pattern(const char *path, int depth)
{
    static const uint64_t sizes[24] = {
        786432,  262144,  131072,  65536, 2048, 1024, 512,   4096,   8192,   16384,  32768, 512,
        1048576, 2097152, 4194304, 512,   1024, 2048, 65536, 131072, 262144, 524288, 1536,  3072};
    start(depth, path);
    uint64_t t = now_ns();
    uint32_t rng = 12345;
    uint32_t src = memtrace_intern("caching_allocator");
    int n = 0;
    while (n < EVENTS) {
        uint64_t addr[24];
        uint64_t base = 0x7f2a00000000ULL;
        for (int k = 0; k < 24 && n < EVENTS; k++, n++) {
            rng = rng * 1103515245u + 12345u;
            t += 1000 + (rng >> 8) % 49000;
            addr[k] = base;
            base += (sizes[k] + 511) / 512 * 512;
            struct memtrace_event ev = {.action = MEMTRACE_ALLOC,
                                        .time_ns = t,
                                        .addr = addr[k],
                                        .size = (sizes[k] + 511) / 512 * 512,
                                        .requested_size = sizes[k],
                                        .stream = 0,
                                        .device = 0,
                                        .pool = sizes[k] <= 1048576 ? 1 : 2,
                                        .source = src};
            memtrace_record_event(&ev);
        }
        for (int k = 23; k >= 0 && n < EVENTS; k--, n++) {
            rng = rng * 1103515245u + 12345u;
            t += 1000 + (rng >> 8) % 49000;
            struct memtrace_event ev = {.action = MEMTRACE_FREE_COMPLETED,
                                        .time_ns = t,
                                        .addr = addr[k],
                                        .size = (sizes[k] + 511) / 512 * 512,
                                        .requested_size = sizes[k],
                                        .device = 0,
                                        .pool = sizes[k] <= 1048576 ? 1 : 2,
                                        .source = src};
            memtrace_record_event(&ev);
        }
    }
    memtrace_record_history(NULL);
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

int main(int argc, char **argv)
{
    int rc = args_check(argc, argv, 1,
                        "usage: recorder_bench [DIR]\n"
                        "Times memtrace_record_event without stacks and with 16- and 32-frame\n"
                        "stacks, then streams a training-loop pattern to a file in DIR (default\n"
                        "/tmp, removed after) and prints its bytes per event.\n");
    if (rc >= 0)
        return rc;
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK) != 0) {
        fprintf(stderr, "recorder_bench: %s is not a writable directory\n", dir);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/recorder_bench-%d.memtrace", dir, (int)getpid());

    printf("memtrace recorder benchmark: %d events per case, best of %d runs\n\n", EVENTS, RUNS);
    printf("| case | CPU ns per event | wall ns per event |\n|---|---|---|\n");
    report_case("no stacks", 0);
    report_case("16-frame stacks", 16);
    report_case("32-frame stacks", 32);

    stream_pattern(path, 0);
    long long bytes = file_size(path);
    printf("\non disk, training-loop pattern, no stacks: %lld bytes for %d events = %.2f "
           "bytes/event\n",
           bytes, EVENTS, (double)bytes / EVENTS);
    stream_pattern(path, 32);
    bytes = file_size(path);
    printf("on disk, same pattern with 32-frame stacks (tables included): %lld bytes = %.2f "
           "bytes/event\n",
           bytes, (double)bytes / EVENTS);
    unlink(path);
    return 0;
}
