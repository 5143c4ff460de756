/* cuda_prog.c: a program that links the (fake) CUDA driver and knows nothing of
 * memtrace; the interposer tests run it under LD_PRELOAD. It prints what it did,
 * one line per expected event:
 *     E <action> <source> <addr> <size> <device>
 * and, after the work, the driver's call counters: C <symbol> <calls>.
 * Modes: driver, threads, fork, kill FD, stacks, hold MS, loop, crash, oom, oom_more,
 * quiet N. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemHandle;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUmemoryPool;
typedef void *CUgraph;
typedef void *CUgraphNode;

struct loc {
    int type;
    int id;
};
struct alloc_prop {
    int type;
    int handle_types;
    struct loc location;
    void *win32;
    unsigned char flags[8];
};
struct pool_props {
    int alloc_type;
    int handle_types;
    struct loc location;
    void *win32;
    size_t max_size;
    unsigned short usage;
    unsigned char reserved[54];
};
struct alloc_node_params {
    struct pool_props pool;
    const void *access;
    size_t naccess;
    size_t bytesize;
    CUdeviceptr dptr;
};

CUresult cuInit(unsigned flags);
CUresult cuDeviceGet(int *dev, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, int dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n);
CUresult cuMemAlloc(unsigned *p, unsigned n);
CUresult cuMemFree(unsigned p);
CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned e);
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags);
CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuMemAllocHost_v2(void **p, size_t n);
CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags);
CUresult cuMemFreeHost(void *p);
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags);
CUresult cuMemHostUnregister(void *p);
CUresult cuStreamCreate(CUstream *s, unsigned flags);
CUresult cuStreamDestroy_v2(CUstream s);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, int dev);
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s);
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s);
CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr,
                             unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr p, size_t n);
CUresult cuMemCreate(CUmemHandle *h, size_t n, const struct alloc_prop *prop,
                     unsigned long long flags);
CUresult cuMemRelease(CUmemHandle h);
CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, CUmemHandle h, unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr p, size_t n);
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total);
CUresult cuGraphCreate(CUgraph *g, unsigned flags);
CUresult cuGraphDestroy(CUgraph g);
CUresult cuGraphAddMemAllocNode(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd,
                                struct alloc_node_params *p);
CUresult cuGraphAddMemFreeNode(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd,
                               CUdeviceptr p);
long long fake_cuda_calls(const char *name);

#define CHECK(call)                                                                                \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != 0) {                                                                            \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, rc_);            \
            exit(3);                                                                               \
        }                                                                                          \
    } while (0)

static void ev(const char *action, const char *source, uint64_t addr, uint64_t size, int dev)
{
    printf("E %s %s 0x%llx %llu %d\n", action, source, (unsigned long long)addr,
           (unsigned long long)size, dev);
}

static CUcontext ctx;

static void setup(void)
{
    int dev;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
}

static void counts(void)
{
    static const char *const names[] = {
        "cuMemAlloc_v2",
        "cuMemAllocPitch_v2",
        "cuMemAllocManaged",
        "cuMemFree_v2",
        "cuMemAllocHost_v2",
        "cuMemHostAlloc",
        "cuMemFreeHost",
        "cuMemHostRegister_v2",
        "cuMemHostUnregister",
        "cuMemAllocAsync",
        "cuMemAllocAsync_ptsz",
        "cuMemAllocFromPoolAsync",
        "cuMemAllocFromPoolAsync_ptsz",
        "cuMemFreeAsync",
        "cuMemFreeAsync_ptsz",
        "cuMemCreate",
        "cuMemRelease",
        "cuMemMap",
        "cuMemUnmap",
        "cuMemAddressReserve",
        "cuMemAddressFree",
        "cuMemGetInfo_v2",
        "cuGraphAddMemAllocNode",
        "cuGraphAddMemFreeNode",
        "cuMemAlloc",
        "cuMemFree",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        printf("C %s %lld\n", names[i], fake_cuda_calls(names[i]));
}

static int driver(void)
{
    CUdeviceptr a, b, c, d, e, f, g, va;
    size_t pitch;
    void *h1, *h2;
    CUstream s;
    CUmemoryPool pool;
    const size_t two_mib = 2u << 20;

    CHECK(cuMemAlloc_v2(&a, 4096));
    ev("segment_alloc", "cuMemAlloc_v2", a, 4096, 0);
    CHECK(cuMemAllocPitch_v2(&b, &pitch, 1000, 10, 4));
    ev("segment_alloc", "cuMemAllocPitch_v2", b, pitch * 10, 0);
    CHECK(cuMemAllocManaged(&c, 8192, 1));
    ev("segment_alloc", "cuMemAllocManaged", c, 8192, 0);
    CHECK(cuMemAllocHost_v2(&h1, 1024));
    ev("segment_alloc", "cuMemAllocHost_v2", (uintptr_t)h1, 1024, -1);
    CHECK(cuMemHostAlloc(&h2, 2048, 0));
    ev("segment_alloc", "cuMemHostAlloc", (uintptr_t)h2, 2048, -1);
    void *reg = aligned_alloc(4096, 8192);
    CHECK(cuMemHostRegister_v2(reg, 8192, 0));
    ev("segment_alloc", "cuMemHostRegister_v2", (uintptr_t)reg, 8192, -1);

    CHECK(cuStreamCreate(&s, 0));
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cuMemAllocAsync(&d, 65536, s));
    ev("segment_alloc", "cuMemAllocAsync", d, 65536, 0);
    CHECK(cuMemAllocAsync_ptsz(&e, 512, NULL));
    ev("segment_alloc", "cuMemAllocAsync_ptsz", e, 512, 0);
    CHECK(cuMemAllocFromPoolAsync(&f, 1536, pool, s));
    ev("segment_alloc", "cuMemAllocFromPoolAsync", f, 1536, 0);
    CHECK(cuMemAllocFromPoolAsync_ptsz(&g, 2560, pool, NULL));
    ev("segment_alloc", "cuMemAllocFromPoolAsync_ptsz", g, 2560, 0);
    CHECK(cuMemFreeAsync(d, s));
    ev("segment_free", "cuMemFreeAsync", d, 65536, 0);
    CHECK(cuMemFreeAsync_ptsz(e, NULL));
    ev("segment_free", "cuMemFreeAsync_ptsz", e, 512, 0);
    CHECK(cuMemFreeAsync(f, s));
    ev("segment_free", "cuMemFreeAsync", f, 1536, 0);
    CHECK(cuMemFreeAsync_ptsz(g, NULL));
    ev("segment_free", "cuMemFreeAsync_ptsz", g, 2560, 0);
    printf("S %llu\n", (unsigned long long)(uintptr_t)s);

    struct alloc_prop prop = {.type = 1, .location = {.type = 1, .id = 0}};
    CUmemHandle ph;
    CHECK(cuMemAddressReserve(&va, 2 * two_mib, 0, 0, 0));
    ev("annotate", "cuMemAddressReserve", va, 2 * two_mib, 0);
    CHECK(cuMemCreate(&ph, two_mib, &prop, 0));
    ev("annotate", "cuMemCreate", ph, two_mib, 0);
    CHECK(cuMemMap(va, two_mib, 0, ph, 0));
    ev("segment_map", "cuMemMap", va, two_mib, 0);
    CHECK(cuMemUnmap(va, two_mib));
    ev("segment_unmap", "cuMemUnmap", va, two_mib, 0);
    CHECK(cuMemRelease(ph));
    ev("annotate", "cuMemRelease", ph, two_mib, 0);
    CHECK(cuMemAddressFree(va, 2 * two_mib));
    ev("annotate", "cuMemAddressFree", va, 2 * two_mib, 0);

    size_t fr, tot;
    CHECK(cuMemGetInfo_v2(&fr, &tot));
    ev("counter", "cuMemGetInfo_v2", tot - fr, tot, 0);

    CUgraph gr;
    CUgraphNode n1, n2;
    struct alloc_node_params np = {.pool = {.alloc_type = 1, .location = {1, 0}},
                                   .bytesize = 1 << 20};
    CHECK(cuGraphCreate(&gr, 0));
    CHECK(cuGraphAddMemAllocNode(&n1, gr, NULL, 0, &np));
    ev("segment_alloc", "cuGraphAddMemAllocNode", np.dptr, 1 << 20, 0);
    CHECK(cuGraphAddMemFreeNode(&n2, gr, &n1, 1, np.dptr));
    ev("segment_free", "cuGraphAddMemFreeNode", np.dptr, 1 << 20, 0);
    CHECK(cuGraphDestroy(gr));

    /* The old 32-bit ABI passes through unrecorded. */
    unsigned small;
    CHECK(cuMemAlloc(&small, 256));
    CHECK(cuMemFree(small));

    CHECK(cuMemFree_v2(a));
    ev("segment_free", "cuMemFree_v2", a, 4096, 0);
    CHECK(cuMemFree_v2(b));
    ev("segment_free", "cuMemFree_v2", b, pitch * 10, 0);
    CHECK(cuMemFree_v2(c));
    ev("segment_free", "cuMemFree_v2", c, 8192, 0);
    CHECK(cuMemFreeHost(h1));
    ev("segment_free", "cuMemFreeHost", (uintptr_t)h1, 1024, -1);
    CHECK(cuMemFreeHost(h2));
    ev("segment_free", "cuMemFreeHost", (uintptr_t)h2, 2048, -1);
    CHECK(cuMemHostUnregister(reg));
    ev("segment_free", "cuMemHostUnregister", (uintptr_t)reg, 8192, -1);
    CHECK(cuStreamDestroy_v2(s));
    free(reg);
    counts();
    return 0;
}

#define THREADS    8
#define PER_THREAD 500
static void *worker(void *arg)
{
    size_t base = (size_t)(uintptr_t)arg;
    CHECK(cuCtxSetCurrent(ctx));
    for (int i = 0; i < PER_THREAD; i++) {
        CUdeviceptr p;
        CHECK(cuMemAlloc_v2(&p, base + (size_t)i * 512));
        CHECK(cuMemFree_v2(p));
    }
    return NULL;
}

static int threads(void)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)((i + 1) * 4096));
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("T %d\n", THREADS * PER_THREAD);
    counts();
    return 0;
}

/* Parent allocates 3 blocks, the child 5 (after the fork, on its own). */
static int forks(void)
{
    CUdeviceptr p[8];
    for (int i = 0; i < 3; i++)
        CHECK(cuMemAlloc_v2(&p[i], 1000 + i));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 5; i++)
            CHECK(cuMemAlloc_v2(&p[i], 2000 + i));
        printf("child %d\n", (int)getpid());
        fflush(stdout);
        exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(cuMemAlloc_v2(&p[3], 1003));
    printf("parent %d child-status %d\n", (int)getpid(), st);
    return 0;
}

/* Allocates n blocks, waits past the flush interval, says how many, then waits to
 * be killed. */
static int killme(int fd, int n)
{
    for (int i = 0; i < n; i++) {
        CUdeviceptr p;
        CHECK(cuMemAlloc_v2(&p, 4096 + (size_t)i));
    }
    usleep(400 * 1000);
    dprintf(fd, "%d\n", n);
    for (;;)
        pause();
}

__attribute__((noinline)) int memtrace_test_named_allocator(CUdeviceptr *p);
__attribute__((noinline)) int memtrace_test_named_allocator(CUdeviceptr *p)
{
    int rc = cuMemAlloc_v2(p, 12345);
    __asm__ volatile("" ::: "memory");
    return rc;
}

static int stacks(void)
{
    CUdeviceptr p;
    CHECK(memtrace_test_named_allocator(&p));
    ev("segment_alloc", "cuMemAlloc_v2", p, 12345, 0);
    return 0;
}

long long fake_cuda_info_calls_unrelaxed(void);

/* Holds 3 MiB for ms milliseconds, frees it, waits ms/2 more: long enough for the
 * sampler to see both. Prints the pointer, the CLOCK_MONOTONIC time just before it
 * reads the fake's calls ("T counted ns": the sampler goes on after it), the calls,
 * and how many of its cuMemGetInfo_v2 calls came from a thread outside relaxed
 * capture mode. */
static int hold(int ms)
{
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 3u << 20));
    printf("P %llu\n", (unsigned long long)p);
    usleep((useconds_t)ms * 1000);
    CHECK(cuMemFree_v2(p));
    usleep((useconds_t)ms * 500);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    printf("T counted %lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    counts();
    printf("U %lld\n", fake_cuda_info_calls_unrelaxed());
    return 0;
}

/* Allocates and frees a block every millisecond until killed; prints the
 * CLOCK_MONOTONIC time of its first allocation ("S ns") once it is made. */
static int loop(void)
{
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 4096));
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    printf("S %lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    for (unsigned i = 0;; i++) {
        CHECK(cuMemFree_v2(p));
        CHECK(cuMemAlloc_v2(&p, 4096 + i % 64));
        usleep(1000);
    }
}

/* One allocation, then a real fault: the program must die of it as it would
 * without the preload. */
static int crash(void)
{
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 4096));
    /* A page nothing may touch: a real fault, which a sanitizer's null check
     * would not turn into an exit of its own. */
    volatile char *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return 4;
    *page = 1;
    return 0;
}

/* No device calls at all: the preload must cost nothing and write nothing. */
/* Allocations of 1, 2, 4 and 8 MiB and then 2 GiB: the results, "R <i> <result>",
 * whatever fails (FAKE_CUDA_FAIL_AT, or no room), then the frees. */
static int oom(void)
{
    static const size_t sizes[] = {1 << 20, 2 << 20, 4 << 20, 8 << 20, (size_t)2 << 30};
    CUdeviceptr p[5] = {0};
    for (int i = 0; i < 5; i++)
        printf("R %d %d\n", i, cuMemAlloc_v2(&p[i], sizes[i]));
    for (int i = 0; i < 5; i++)
        if (p[i] != 0)
            cuMemFree_v2(p[i]);
    return 0;
}

/* Host memory beyond the fake's host arena (1 TiB, cuMemAllocHost_v2 and
 * cuMemHostAlloc), then physical memory: 2 MiB granted, 2 GiB refused (FAKE_CUDA_MEMORY
 * is 1G); "R <i> <result>" for each, then the release. */
static int oom_more(void)
{
    const size_t tib = (size_t)1 << 40, two_mib = 2u << 20;
    void *h = NULL;
    printf("R 0 %d\n", cuMemAllocHost_v2(&h, tib));
    printf("R 1 %d\n", cuMemHostAlloc(&h, tib, 0));
    struct alloc_prop prop = {.type = 1, .location = {.type = 1, .id = 0}};
    CUmemHandle ok_h = 0, big_h = 0;
    printf("R 2 %d\n", cuMemCreate(&ok_h, two_mib, &prop, 0));
    printf("R 3 %d\n", cuMemCreate(&big_h, (size_t)1024 * two_mib, &prop, 0));
    if (ok_h != 0)
        cuMemRelease(ok_h);
    return 0;
}

static int quiet(int n)
{
    printf("quiet %d\n", n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "driver";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "quiet") == 0)
        return quiet(argc > 2 ? atoi(argv[2]) : 0);
    setup();
    if (strcmp(mode, "driver") == 0)
        return driver();
    if (strcmp(mode, "threads") == 0)
        return threads();
    if (strcmp(mode, "fork") == 0)
        return forks();
    if (strcmp(mode, "kill") == 0 && argc > 3)
        return killme(atoi(argv[2]), atoi(argv[3]));
    if (strcmp(mode, "stacks") == 0)
        return stacks();
    if (strcmp(mode, "loop") == 0)
        return loop();
    if (strcmp(mode, "crash") == 0)
        return crash();
    if (strcmp(mode, "oom") == 0)
        return oom();
    if (strcmp(mode, "oom_more") == 0)
        return oom_more();
    if (strcmp(mode, "hold") == 0 && argc > 2)
        return hold(atoi(argv[2]));
    fprintf(stderr, "cuda_prog: unknown mode %s\n", mode);
    return 2;
}
