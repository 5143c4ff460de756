/* caching_prog.c: a program that links the (fake) CUDA driver and knows nothing of
 * memtrace, for MEMTRACE_CACHING=1. It prints every address the driver API gave it,
 *     A <addr> <size>
 * the result of calls that may fail, R <what> <result>, and at the end the driver's
 * real call counters, C <symbol> <calls>.
 * Modes:
 *   loop   5 rounds of 200 x 1 MiB with cuMemAlloc_v2, each written, then freed;
 *          10 x 4 MiB with cuMemAllocAsync on a stream, freed with cuMemFreeAsync;
 *          a pitched allocation and an old-ABI cuMemAlloc freed with cuMemFree_v2
 *          (which the fake refuses for the old ABI), then with cuMemFree
 *   oom    64 MiB (more than FAKE_CUDA_MEMORY), then 1 MiB */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;

CUresult cuInit(unsigned flags);
CUresult cuDeviceGet(int *dev, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, int dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext *ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n);
CUresult cuMemAlloc(unsigned *p, unsigned n);
CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned e);
CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuMemFree(unsigned p);
CUresult cuStreamCreate(CUstream *s, unsigned flags);
CUresult cuStreamDestroy_v2(CUstream s);
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s);
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s);
long long fake_cuda_calls(const char *name);

#define MIB (1024ull * 1024)

static int fail(const char *what, CUresult r)
{
    printf("R %s %d\n", what, r);
    return 1;
}

static int loop(void)
{
    static CUdeviceptr p[200];
    CUresult r;
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 200; i++) {
            if ((r = cuMemAlloc_v2(&p[i], MIB)) != 0)
                return fail("cuMemAlloc_v2", r);
            printf("A %llx %llu\n", p[i], MIB);
            /* The fake's device memory is host memory: the block must be usable. */
            memset((void *)(uintptr_t)p[i], round, MIB);
        }
        for (int i = 0; i < 200; i++)
            if ((r = cuMemFree_v2(p[i])) != 0)
                return fail("cuMemFree_v2", r);
    }
    CUstream s;
    if ((r = cuStreamCreate(&s, 1)) != 0)
        return fail("cuStreamCreate", r);
    for (int i = 0; i < 10; i++) {
        if ((r = cuMemAllocAsync(&p[i], 4 * MIB, s)) != 0)
            return fail("cuMemAllocAsync", r);
        printf("A %llx %llu\n", p[i], 4 * MIB);
        memset((void *)(uintptr_t)p[i], 0xab, 4 * MIB);
    }
    for (int i = 0; i < 10; i++)
        if ((r = cuMemFreeAsync(p[i], s)) != 0)
            return fail("cuMemFreeAsync", r);
    cuStreamDestroy_v2(s);

    /* Not the allocator's: pitched memory, and the old ABI's address freed through
     * the new entry point, both of which the driver must free. */
    CUdeviceptr pitched;
    size_t pitch;
    printf("R cuMemAllocPitch_v2 %d\n", cuMemAllocPitch_v2(&pitched, &pitch, 1000, 10, 4));
    printf("R cuMemFree_v2(pitched) %d\n", cuMemFree_v2(pitched));
    unsigned old;
    printf("R cuMemAlloc %d\n", cuMemAlloc(&old, 4096));
    printf("R cuMemFree_v2(old) %d\n", cuMemFree_v2(old));
    printf("R cuMemFree(old) %d\n", cuMemFree(old));
    return 0;
}

static int oom(void)
{
    CUdeviceptr p = 0;
    printf("R big %d\n", cuMemAlloc_v2(&p, 64 * MIB));
    printf("R small %d\n", cuMemAlloc_v2(&p, MIB));
    printf("A %llx %llu\n", p, MIB);
    printf("R free %d\n", cuMemFree_v2(p));
    return 0;
}

int main(int argc, char **argv)
{
    CUcontext ctx, now = NULL;
    int dev, rc;
    if (argc < 2 || cuInit(0) != 0 || cuDeviceGet(&dev, 0) != 0 ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != 0 || cuCtxSetCurrent(ctx) != 0)
        return 2;
    rc = strcmp(argv[1], "oom") == 0 ? oom() : loop();
    cuCtxGetCurrent(&now);
    printf("R context-kept %d\n", now == ctx);
    static const char *const names[] = {"cuMemAlloc_v2",  "cuMemFree_v2",        "cuMemAllocAsync",
                                        "cuMemFreeAsync", "cuMemAllocPitch_v2",  "cuMemAlloc",
                                        "cuMemFree",      "cuStreamSynchronize", "cuMemCreate"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        printf("C %s %lld\n", names[i], fake_cuda_calls(names[i]));
    return rc;
}
