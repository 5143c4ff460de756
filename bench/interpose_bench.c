/* interpose_bench: time added per cuMemAlloc_v2 + cuMemFree_v2 pair by the preload
 * library, on the fake driver. Run with no arguments: it runs itself in four
 * configurations, without the preload, without it but with one idle thread, with it
 * and no stacks, and with it and 32-frame stacks, and prints the wall time per pair
 * (the target is judged on it) and the CPU time of the calling thread alone. The
 * program does not link memtrace.
 *
 * This VM's speed drifts by tens of percent within minutes, so the configurations
 * run in rounds: each round runs all four once (each the best of 3 after a warm-up),
 * and what a configuration adds is taken within each round, against that round's
 * baseline. The table gives the medians over the rounds, and the spread of the
 * per-round additions.
 *
 * The second baseline has one idle thread: glibc takes a mutex without atomic
 * instructions while a process has one thread, so the fake driver's own locks cost
 * more as soon as the preload's writer thread exists. A CUDA program always has
 * several threads; the second baseline shows how much of the added time that is. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "examples/args.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
CUresult cuInit(unsigned flags);
CUresult cuDeviceGet(int *dev, int ordinal);
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev);
CUresult cuCtxSetCurrent(void *ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n);
CUresult cuMemFree_v2(CUdeviceptr p);

static double clock_of(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

struct timing {
    double wall, cpu;
};

/* Deeper than 32 frames so that stacks are full. */
static struct timing __attribute__((noinline)) pairs(int depth, long n)
{
    if (depth > 0) {
        struct timing r = pairs(depth - 1, n);
        __asm__ volatile("" ::: "memory");
        return r;
    }
    CUdeviceptr p;
    double t0 = clock_of(CLOCK_MONOTONIC), c0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < n; i++) {
        if (cuMemAlloc_v2(&p, 4096) != 0 || cuMemFree_v2(p) != 0)
            exit(3);
    }
    double c1 = clock_of(CLOCK_THREAD_CPUTIME_ID), t1 = clock_of(CLOCK_MONOTONIC);
    return (struct timing){(t1 - t0) / (double)n, (c1 - c0) / (double)n};
}

static void *idle_thread(void *arg)
{
    (void)arg;
    pause();
    return NULL;
}

static int child(long n, int idle)
{
    pthread_t idler;
    if (idle && pthread_create(&idler, NULL, idle_thread, NULL) != 0)
        return 3;
    int dev;
    void *ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx))
        return 3;
    pairs(40, n / 10); /* warm up: first call starts the recorder */
    struct timing best = {1e30, 1e30};
    for (int r = 0; r < 3; r++) {
        struct timing t = pairs(40, n);
        if (t.wall < best.wall)
            best.wall = t.wall;
        if (t.cpu < best.cpu)
            best.cpu = t.cpu;
    }
    printf("%.1f %.1f\n", best.wall, best.cpu);
    return 0;
}

static struct timing run(const char *self, const char *preload, const char *stacks, long n,
                         int idle)
{
    struct timing fail = {-1, -1};
    char arg[32], out[400];
    int p[2];
    snprintf(arg, sizeof arg, "%ld", n);
    snprintf(out, sizeof out, "/tmp/interpose_bench-%d.memtrace", (int)getpid());
    if (pipe(p) != 0)
        return fail;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        if (preload != NULL) {
            setenv("LD_PRELOAD", preload, 1);
            setenv("MEMTRACE_STACKS", stacks, 1);
            setenv("MEMTRACE_OUTPUT", out, 1);
            setenv("MEMTRACE_SAMPLE_MS", "0", 1);
        } else {
            unsetenv("LD_PRELOAD");
        }
        execl(self, self, "--child", arg, idle ? "idle" : "", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char buf[64] = "";
    ssize_t k = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    unlink(out);
    struct timing t;
    if (k <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
        sscanf(buf, "%lf %lf", &t.wall, &t.cpu) != 2)
        return fail;
    return t;
}

#define ROUNDS 7

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v)
{
    double s[ROUNDS];
    memcpy(s, v, sizeof s);
    qsort(s, ROUNDS, sizeof s[0], cmp_double);
    return s[ROUNDS / 2];
}

static double lowest(const double *v)
{
    double m = v[0];
    for (int i = 1; i < ROUNDS; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static double highest(const double *v)
{
    double m = v[0];
    for (int i = 1; i < ROUNDS; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

int main(int argc, char **argv)
{
    long n = 200000;
    if (argc > 2 && strcmp(argv[1], "--child") == 0)
        return child(atol(argv[2]), argc > 3 && strcmp(argv[3], "idle") == 0);
    int rc =
        args_check(argc, argv, 1,
                   "usage: interpose_bench [PAIRS]\n"
                   "Times cuMemAlloc_v2+cuMemFree_v2 pairs (PAIRS, default 200000) on the fake\n"
                   "driver without the preload, with one idle thread, with the preload and no\n"
                   "stacks, and with 32-frame stacks. Run with LD_LIBRARY_PATH=tests/fakes.\n");
    if (rc >= 0)
        return rc;
    long long pairs = n;
    if (argc > 1 && args_count(argv, "PAIRS", argv[1], 1, 1000000000LL, &pairs) != 0)
        return 2;
    n = (long)pairs;
    const char *preload = getenv("MEMTRACE_BENCH_PRELOAD");
    if (preload == NULL)
        preload = BUILDDIR "/.libs/libmemtrace_preload.so";
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return 1;
    self[len] = '\0';
    enum { BASE, IDLE, NONE, DEEP, NCONF };
    double wall[NCONF][ROUNDS], cpu[NCONF][ROUNDS];
    double add_base[NCONF][ROUNDS], add_idle[NCONF][ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        struct timing t[NCONF] = {
            run(self, NULL, "none", n, 0),
            run(self, NULL, "none", n, 1),
            run(self, preload, "none", n, 0),
            run(self, preload, "32", n, 0),
        };
        for (int c = 0; c < NCONF; c++) {
            if (t[c].wall < 0) {
                fprintf(stderr, "interpose_bench: a run failed (is LD_LIBRARY_PATH set to the "
                                "fake driver's directory?)\n");
                return 1;
            }
            wall[c][r] = t[c].wall;
            cpu[c][r] = t[c].cpu;
            add_base[c][r] = t[c].wall - t[BASE].wall;
            add_idle[c][r] = t[c].wall - t[IDLE].wall;
        }
    }
    printf("cuMemAlloc_v2+cuMemFree_v2 pair, %ld pairs, %d rounds of the four runs, each "
           "the best of 3; medians over the rounds, additions taken within each round\n",
           n, ROUNDS);
    printf("                        wall ns/pair   thread CPU ns/pair   added over no preload "
           "(min..max)     added over +1 thread (min..max)\n");
    static const char *const names[NCONF] = {"no preload", "no preload, +1 thread",
                                             "preload, no stacks", "preload, 32 frames"};
    for (int c = 0; c < NCONF; c++) {
        printf("  %-21s %8.1f       %8.1f", names[c], median(wall[c]), median(cpu[c]));
        if (c != BASE)
            printf("           %+7.1f (%+.0f..%+.0f)", median(add_base[c]), lowest(add_base[c]),
                   highest(add_base[c]));
        if (c == NONE || c == DEEP)
            printf("     %+7.1f (%+.0f..%+.0f)", median(add_idle[c]), lowest(add_idle[c]),
                   highest(add_idle[c]));
        printf("\n");
    }
    return 0;
}
