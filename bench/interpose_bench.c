/* interpose_bench: time added per cuMemAlloc_v2 + cuMemFree_v2 pair by the preload
 * library, on the fake driver. Run with no arguments: it runs itself three times,
 * without the preload, with it and no stacks, with it and 32-frame stacks, and
 * prints one line each: the wall time per pair (the target is judged on it) and the
 * CPU time of the calling thread alone. The difference is mostly the streaming
 * writer thread, which encodes on another core (a GPU host has several; this 2-core
 * VM shares them with everything else). Each is the best of 5 runs, taken
 * separately. The program does not link memtrace.
 *
 * A second baseline runs with one idle thread: glibc takes a mutex without atomic
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
    for (int r = 0; r < 5; r++) {
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

int main(int argc, char **argv)
{
    long n = 200000;
    if (argc > 2 && strcmp(argv[1], "--child") == 0)
        return child(atol(argv[2]), argc > 3 && strcmp(argv[3], "idle") == 0);
    if (argc > 1)
        n = atol(argv[1]);
    const char *preload = getenv("MEMTRACE_BENCH_PRELOAD");
    if (preload == NULL)
        preload = BUILDDIR "/.libs/libmemtrace_preload.so";
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return 1;
    self[len] = '\0';
    struct timing base = run(self, NULL, "none", n, 0);
    struct timing idle = run(self, NULL, "none", n, 1);
    struct timing none = run(self, preload, "none", n, 0);
    struct timing deep = run(self, preload, "32", n, 0);
    if (base.wall < 0 || idle.wall < 0 || none.wall < 0 || deep.wall < 0) {
        fprintf(stderr, "interpose_bench: a run failed (is LD_LIBRARY_PATH set to the fake "
                        "driver's directory?)\n");
        return 1;
    }
    printf("cuMemAlloc_v2+cuMemFree_v2 pair, %ld pairs, best of 5\n", n);
    printf("                        wall ns/pair (added)    calling thread CPU ns/pair (added)\n");
    printf("  no preload            %8.1f                %8.1f\n", base.wall, base.cpu);
    printf("  no preload, +1 thread %8.1f (+%7.1f)      %8.1f (+%7.1f)\n", idle.wall,
           idle.wall - base.wall, idle.cpu, idle.cpu - base.cpu);
    printf("  preload, no stacks    %8.1f (+%7.1f)      %8.1f (+%7.1f)\n", none.wall,
           none.wall - base.wall, none.cpu, none.cpu - base.cpu);
    printf("  preload, 32 frames    %8.1f (+%7.1f)      %8.1f (+%7.1f)\n", deep.wall,
           deep.wall - base.wall, deep.cpu, deep.cpu - base.cpu);
    return 0;
}
