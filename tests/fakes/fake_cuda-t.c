/* fake_cuda-t: the fake libcuda.so.1, loaded with dlopen as the runtime and the
 * interposer load it: exact addresses, sizes and memory figures, the cuGetProcAddress
 * resolution table, out-of-memory, the old 32-bit ABI and "no device" mode, and the
 * real CUDA runtime's view of it where a toolkit is installed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/tap.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUstream, *CUevent, *CUmemoryPool, *CUgraph, *CUgraphNode;

typedef struct {
    int type, id;
} CUmemLocation;
typedef struct {
    int type, requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    unsigned char allocFlags[8];
} CUmemAllocationProp;
typedef struct {
    CUmemLocation location;
    int flags;
} CUmemAccessDesc;
typedef struct {
    int allocType, handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;
typedef struct {
    CUmemPoolProps poolProps;
    const CUmemAccessDesc *accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    CUdeviceptr dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS;

#define GiB (1ULL << 30)
#define MiB (1ULL << 20)
/* The arenas' bases, from the fake after cuInit: fixed, but chosen by the kernel
 * under ThreadSanitizer. */
static unsigned long long DEV0, DEV1, HOST0, VA0, V1;

static void *lib;

static void *sym(const char *name)
{
    void *p = dlsym(lib, name);
    if (!p)
        bail_out(name);
    return p;
}

#define F(type, name) __typeof__(type) name = (__typeof__(type))sym(#name)

static long long (*calls)(const char *);

static int hits;
static void host_fn(void *arg)
{
    hits += *(int *)arg;
}

struct proc_case {
    const char *base;
    int version;
    unsigned long long flags;
    const char *want; /* NULL: CUDA_ERROR_NOT_FOUND */
    int status;
};

static const struct proc_case proc_cases[] = {
    {"cuMemAlloc", 12000, 0, "cuMemAlloc_v2", 0},
    {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2", 0},
    {"cuMemAlloc", 3010, 0, "cuMemAlloc", 0},
    {"cuMemFree", 12000, 0, "cuMemFree_v2", 0},
    {"cuMemAllocHost", 12000, 0, "cuMemAllocHost_v2", 0},
    {"cuMemHostRegister", 12000, 0, "cuMemHostRegister_v2", 0},
    {"cuMemHostRegister", 6000, 0, "cuMemHostRegister", 0},
    {"cuMemGetInfo", 12000, 0, "cuMemGetInfo_v2", 0},
    {"cuStreamDestroy", 12000, 0, "cuStreamDestroy_v2", 0},
    {"cuEventDestroy", 12000, 0, "cuEventDestroy_v2", 0},
    {"cuDeviceTotalMem", 12000, 0, "cuDeviceTotalMem_v2", 0},
    {"cuDevicePrimaryCtxRelease", 12000, 0, "cuDevicePrimaryCtxRelease_v2", 0},
    {"cuDevicePrimaryCtxRelease", 10000, 0, "cuDevicePrimaryCtxRelease", 0},
    {"cuMemAllocAsync", 12000, 0, "cuMemAllocAsync", 0},
    {"cuMemAllocAsync", 12000, 1, "cuMemAllocAsync", 0},
    {"cuMemAllocAsync", 12000, 2, "cuMemAllocAsync_ptsz", 0},
    {"cuMemAllocFromPoolAsync", 12000, 2, "cuMemAllocFromPoolAsync_ptsz", 0},
    {"cuMemFreeAsync", 12000, 2, "cuMemFreeAsync_ptsz", 0},
    {"cuMemFreeAsync", 12000, 0, "cuMemFreeAsync", 0},
    {"cuMemAlloc", 12000, 2, "cuMemAlloc_v2", 0},
    {"cuMemcpyHtoD", 12000, 2, "cuMemcpyHtoD_v2_ptds", 0},
    {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2", 0},
    {"cuGetProcAddress", 11030, 0, "cuGetProcAddress", 0},
    {"cuMemCreate", 12000, 0, "cuMemCreate", 0},
    {"cuGraphAddMemAllocNode", 12000, 0, "cuGraphAddMemAllocNode", 0},
    {"cuMemAllocAsync", 11000, 0, NULL, 2},
    {"cuMemAlloc_v2", 12000, 0, NULL, 1},
    {"cuNoSuchFunction", 12000, 0, NULL, 1},
};

#define NPROC ((int)(sizeof proc_cases / sizeof proc_cases[0]))

static void check_proc_table(void)
{
    F(CUresult(*)(const char *, void **, int, unsigned long long, int *), cuGetProcAddress_v2);
    F(CUresult(*)(const char *, void **, int, unsigned long long), cuGetProcAddress);
    for (int i = 0; i < NPROC; i++) {
        const struct proc_case *c = &proc_cases[i];
        void *fn = (void *)1, *fn_old = (void *)1;
        int status = -1;
        CUresult rc = cuGetProcAddress_v2(c->base, &fn, c->version, c->flags, &status);
        CUresult rc_old = cuGetProcAddress(c->base, &fn_old, c->version, c->flags);
        void *want = c->want ? dlsym(lib, c->want) : NULL;
        ok(rc == (c->want ? 0 : 500) && rc_old == rc && fn == want && fn_old == want &&
               status == c->status,
           "cuGetProcAddress(%s, %d, flags %llu) -> %s (status %d)", c->base, c->version, c->flags,
           c->want ? c->want : "CUDA_ERROR_NOT_FOUND", c->status);
    }
}

static void check_cudart(const char *prog, const char *what)
{
#ifdef FAKE_CUDART_PROGS
    char path[4096], env_lib[4200];
    snprintf(path, sizeof path, "%s/%s", FAKE_LIBDIR, prog);
    snprintf(env_lib, sizeof env_lib, "LD_LIBRARY_PATH=%s", FAKE_LIBDIR);
    char *argv[] = {path, NULL};
    char *envp[] = {env_lib, "FAKE_CUDA_NO_DEVICE=1", "ASAN_OPTIONS=detect_leaks=0", NULL};
    int fds[2];
    char out[256] = {0};
    posix_spawn_file_actions_t fa;
    pid_t pid;
    if (pipe(fds) != 0)
        bail_out("pipe");
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    int rc = posix_spawn(&pid, path, &fa, NULL, argv, envp);
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (rc == 0 && n < sizeof out - 1 && (r = read(fds[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)r;
    close(fds[0]);
    int status = -1;
    if (rc == 0)
        waitpid(pid, &status, 0);
    posix_spawn_file_actions_destroy(&fa);
    is_string("cudaMalloc=100 cudaGetDeviceCount=100 count=-1\n", out,
              "%s libcudart reports cudaErrorNoDevice through the fake driver", what);
    is_int(0, status, "%s libcudart program exits cleanly", what);
#else
    (void)prog;
    skip(2, "no CUDA toolkit with libcudart (configure --with-cuda=DIR)");
    (void)what;
#endif
}

int main(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/libcuda.so.1", FAKE_LIBDIR);
    /* Set before the first cuInit, which reads them. */
    setenv("FAKE_CUDA_MEMORY", "1G", 1);
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        bail_out(dlerror());
    calls = (long long (*)(const char *))sym("fake_cuda_calls");

    F(CUresult(*)(unsigned), cuInit);
    F(CUresult(*)(int *), cuDriverGetVersion);
    F(CUresult(*)(int *), cuDeviceGetCount);
    F(CUresult(*)(int *, int), cuDeviceGet);
    F(CUresult(*)(char *, int, int), cuDeviceGetName);
    F(CUresult(*)(size_t *, int), cuDeviceTotalMem_v2);
    F(CUresult(*)(int *, int, int), cuDeviceGetAttribute);
    F(CUresult(*)(CUcontext *, int), cuDevicePrimaryCtxRetain);
    F(CUresult(*)(int), cuDevicePrimaryCtxRelease_v2);
    F(CUresult(*)(CUcontext *), cuCtxGetCurrent);
    F(CUresult(*)(CUcontext), cuCtxSetCurrent);
    F(CUresult(*)(int *), cuCtxGetDevice);
    F(CUresult(*)(void), cuCtxSynchronize);
    F(CUresult(*)(CUdeviceptr *, size_t), cuMemAlloc_v2);
    F(CUresult(*)(CUdeviceptr *, size_t *, size_t, size_t, unsigned), cuMemAllocPitch_v2);
    F(CUresult(*)(CUdeviceptr *, size_t, unsigned), cuMemAllocManaged);
    F(CUresult(*)(CUdeviceptr), cuMemFree_v2);
    F(CUresult(*)(unsigned *, unsigned), cuMemAlloc);
    F(CUresult(*)(unsigned), cuMemFree);
    F(CUresult(*)(void **, size_t), cuMemAllocHost_v2);
    F(CUresult(*)(void **, size_t, unsigned), cuMemHostAlloc);
    F(CUresult(*)(void *), cuMemFreeHost);
    F(CUresult(*)(void *, size_t, unsigned), cuMemHostRegister_v2);
    F(CUresult(*)(void *), cuMemHostUnregister);
    F(CUresult(*)(size_t *, size_t *), cuMemGetInfo_v2);
    F(CUresult(*)(CUdeviceptr, const void *, size_t), cuMemcpyHtoD_v2);
    F(CUresult(*)(void *, CUdeviceptr, size_t), cuMemcpyDtoH_v2);
    F(CUresult(*)(CUstream *, unsigned), cuStreamCreate);
    F(CUresult(*)(CUstream), cuStreamDestroy_v2);
    F(CUresult(*)(CUstream), cuStreamSynchronize);
    F(CUresult(*)(CUdeviceptr *, size_t, CUstream), cuMemAllocAsync);
    F(CUresult(*)(CUdeviceptr *, size_t, CUstream), cuMemAllocAsync_ptsz);
    F(CUresult(*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream), cuMemAllocFromPoolAsync);
    F(CUresult(*)(CUdeviceptr, CUstream), cuMemFreeAsync);
    F(CUresult(*)(CUdeviceptr, CUstream), cuMemFreeAsync_ptsz);
    F(CUresult(*)(CUmemoryPool *, int), cuDeviceGetDefaultMemPool);
    F(CUresult(*)(CUstream, void (*)(void *), void *), cuLaunchHostFunc);
    F(CUresult(*)(CUevent *, unsigned), cuEventCreate);
    F(CUresult(*)(CUevent, CUstream), cuEventRecord);
    F(CUresult(*)(CUevent), cuEventQuery);
    F(CUresult(*)(CUevent), cuEventSynchronize);
    F(CUresult(*)(CUevent), cuEventDestroy_v2);
    F(CUresult(*)(CUstream, CUevent, unsigned), cuStreamWaitEvent);
    F(CUresult(*)(size_t *, const CUmemAllocationProp *, int), cuMemGetAllocationGranularity);
    F(CUresult(*)(unsigned long long *, size_t, const CUmemAllocationProp *, unsigned long long),
      cuMemCreate);
    F(CUresult(*)(unsigned long long), cuMemRelease);
    F(CUresult(*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long),
      cuMemAddressReserve);
    F(CUresult(*)(CUdeviceptr, size_t), cuMemAddressFree);
    F(CUresult(*)(CUdeviceptr, size_t, size_t, unsigned long long, unsigned long long), cuMemMap);
    F(CUresult(*)(CUdeviceptr, size_t), cuMemUnmap);
    F(CUresult(*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t), cuMemSetAccess);
    F(CUresult(*)(CUgraph *, unsigned), cuGraphCreate);
    F(CUresult(*)(CUgraph), cuGraphDestroy);
    F(CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                  CUDA_MEM_ALLOC_NODE_PARAMS *),
      cuGraphAddMemAllocNode);
    F(CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUdeviceptr),
      cuGraphAddMemFreeNode);
    F(CUresult(*)(CUresult, const char **), cuGetErrorString);
    F(CUresult(*)(CUresult, const char **), cuGetErrorName);
    F(CUresult(*)(void *, int, CUdeviceptr), cuPointerGetAttribute);

    CUdeviceptr d[8] = {0};
    size_t fr = 0, tot = 0;
    int v = 0;

    /* Before cuInit: only version, errors and symbol lookup work. */
    is_int(0, cuDriverGetVersion(&v), "cuDriverGetVersion works before cuInit");
    is_int(13000, v, "driver version 13000");
    is_int(3, cuMemAlloc_v2(&d[0], 16), "cuMemAlloc_v2 before cuInit: NOT_INITIALIZED");
    setenv("FAKE_CUDA_NO_DEVICE", "1", 1);
    is_int(100, cuInit(0), "FAKE_CUDA_NO_DEVICE=1: cuInit returns CUDA_ERROR_NO_DEVICE");
    is_int(3, cuDeviceGetCount(&v), "still NOT_INITIALIZED after the failed cuInit");
    unsetenv("FAKE_CUDA_NO_DEVICE");
    is_int(1, cuInit(1), "cuInit(1): INVALID_VALUE");
    is_int(0, cuInit(0), "cuInit(0)");
    is_int(0, cuInit(0), "cuInit(0) again");
    unsigned long long (*base)(const char *) =
        (unsigned long long (*)(const char *))sym("fake_cuda_base");
    DEV0 = base("device0");
    DEV1 = base("device1");
    HOST0 = base("host");
    VA0 = base("va");
    V1 = base("v1");

    int n = 0, dev = -1;
    char name[64];
    is_int(0, cuDeviceGetCount(&n), "cuDeviceGetCount");
    is_int(2, n, "FAKE_CUDA_DEVICES=2 gives two devices");
    is_int(101, cuDeviceGet(&dev, 2), "device 2 does not exist");
    is_int(0, cuDeviceGet(&dev, 1), "cuDeviceGet(1)");
    cuDeviceGetName(name, sizeof name, 1);
    is_string("memtrace fake GPU 1", name, "device name");
    cuDeviceTotalMem_v2(&tot, 0);
    is_int((long long)GiB, (long long)tot, "cuDeviceTotalMem_v2 is FAKE_CUDA_MEMORY");
    cuDeviceGetAttribute(&v, 75, 0);
    is_int(9, v, "compute capability major");

    /* Allocation needs a context, as on the real driver. */
    is_int(201, cuMemAlloc_v2(&d[0], 16), "cuMemAlloc_v2 without a context: INVALID_CONTEXT");
    CUcontext ctx0 = NULL, ctx1 = NULL, cur = NULL;
    cuDevicePrimaryCtxRetain(&ctx0, 0);
    cuDevicePrimaryCtxRetain(&ctx1, 1);
    ok(ctx0 && ctx1 && ctx0 != ctx1, "two primary contexts");
    is_int(0, cuCtxSetCurrent(ctx0), "cuCtxSetCurrent");
    cuCtxGetCurrent(&cur);
    ok(cur == ctx0, "cuCtxGetCurrent returns it");
    cuCtxGetDevice(&dev);
    is_int(0, dev, "cuCtxGetDevice");
    is_int(0, cuCtxSynchronize(), "cuCtxSynchronize");

    /* Device memory: first fit over 512-byte blocks from the arena's fixed base. */
    is_int(1, cuMemAlloc_v2(&d[0], 0), "zero bytes: INVALID_VALUE");
    is_int(0, cuMemAlloc_v2(&d[0], 1000), "cuMemAlloc_v2(1000)");
    is_int(0, cuMemAlloc_v2(&d[1], 1), "cuMemAlloc_v2(1)");
    is_int((long long)DEV0, (long long)d[0], "first allocation at the arena base");
    is_int((long long)DEV0 + 1024, (long long)d[1], "second one 1024 bytes on");
    cuMemGetInfo_v2(&fr, &tot);
    is_int((long long)(GiB - 1001), (long long)fr, "cuMemGetInfo_v2 free is exact");
    is_int((long long)GiB, (long long)tot, "cuMemGetInfo_v2 total");
    is_int(0, cuMemFree_v2(d[0]), "cuMemFree_v2");
    is_int(1, cuMemFree_v2(d[0]), "double free: INVALID_VALUE");
    is_int(1, cuMemFree_v2(d[1] + 512), "interior pointer: INVALID_VALUE");
    is_int(0, cuMemAlloc_v2(&d[2], 600), "cuMemAlloc_v2(600)");
    is_int((long long)DEV0, (long long)d[2], "reuses the freed block (first fit)");
    is_int(0, cuMemAlloc_v2(&d[3], 600), "cuMemAlloc_v2(600) again");
    is_int((long long)DEV0 + 1536, (long long)d[3], "too big for the hole: after the last");
    size_t pitch = 0;
    is_int(0, cuMemAllocPitch_v2(&d[4], &pitch, 100, 3, 4), "cuMemAllocPitch_v2");
    is_int(512, (long long)pitch, "pitch rounded to 512");
    is_int((long long)DEV0 + 2560, (long long)d[4], "pitched allocation address");
    is_int(0, cuMemAllocManaged(&d[5], 4096, 1), "cuMemAllocManaged");
    is_int((long long)DEV0 + 4096, (long long)d[5], "managed allocation address");
    cuMemGetInfo_v2(&fr, &tot);
    is_int((long long)(GiB - 1 - 600 - 600 - 1536 - 4096), (long long)fr,
           "free bytes after five allocations");
    int mtype = 0, ord = -1, managed = 0;
    cuPointerGetAttribute(&mtype, 2, d[4]);
    cuPointerGetAttribute(&managed, 8, d[5]);
    cuPointerGetAttribute(&ord, 9, d[5]);
    ok(mtype == 2 && managed == 1 && ord == 0, "cuPointerGetAttribute type/managed/ordinal");

    char msg[] = "written through the fake device", back[sizeof msg] = {0};
    cuMemcpyHtoD_v2(d[3], msg, sizeof msg);
    cuMemcpyDtoH_v2(back, d[3], sizeof msg);
    is_string(msg, back, "device memory is real memory");
    is_string(msg, (const char *)(uintptr_t)d[3], "and readable at its address");

    /* Out of memory at the capacity, exactly. */
    is_int(2, cuMemAlloc_v2(&d[6], fr + 1), "one byte over: CUDA_ERROR_OUT_OF_MEMORY");
    is_int(0, cuMemAlloc_v2(&d[6], fr), "exactly the free bytes");
    cuMemGetInfo_v2(&fr, &tot);
    is_int(0, (long long)fr, "device full");
    is_int(2, cuMemAlloc_v2(&d[7], 1), "full: CUDA_ERROR_OUT_OF_MEMORY");
    cuMemFree_v2(d[6]);
    for (int i = 1; i <= 5; i++)
        cuMemFree_v2(d[i]);
    cuMemGetInfo_v2(&fr, &tot);
    is_int((long long)GiB, (long long)fr, "everything freed");
    is_int(0, cuMemAlloc_v2(&d[0], 100), "after freeing everything");
    is_int((long long)DEV0, (long long)d[0], "the arena starts over at its base");
    cuMemFree_v2(d[0]);

    /* The other device has its own arena and capacity. */
    cuCtxSetCurrent(ctx1);
    is_int(0, cuMemAlloc_v2(&d[0], 64), "allocation on device 1");
    is_int((long long)DEV1, (long long)d[0], "device 1 arena base");
    cuPointerGetAttribute(&ord, 9, d[0]);
    is_int(1, ord, "its ordinal");
    cuMemFree_v2(d[0]);
    cuCtxSetCurrent(ctx0);

    /* Old 32-bit ABI: pointers below 4 GiB, not interchangeable with the _v2 ones. */
    unsigned d32 = 0;
    is_int(0, cuMemAlloc(&d32, 256), "cuMemAlloc (old ABI)");
    is_int((long long)V1, d32, "old ABI pointer at its arena's base");
    ok(V1 != 0 && V1 + 256 <= (1ULL << 32), "which fits 32 bits");
    is_int(1, cuMemFree_v2(d32), "cuMemFree_v2 refuses an old-ABI pointer");
    is_int(0, cuMemFree(d32), "cuMemFree (old ABI)");

    /* Pinned host memory and registration. */
    void *h = NULL, *h2 = NULL;
    is_int(0, cuMemAllocHost_v2(&h, 100), "cuMemAllocHost_v2");
    is_int((long long)HOST0, (long long)(uintptr_t)h, "host arena base");
    is_int(0, cuMemHostAlloc(&h2, 100, 1), "cuMemHostAlloc");
    is_int((long long)HOST0 + 512, (long long)(uintptr_t)h2, "next host block");
    cuMemGetInfo_v2(&fr, &tot);
    is_int((long long)GiB, (long long)fr, "pinned host memory does not use device memory");
    is_int(1, cuMemFree_v2((CUdeviceptr)(uintptr_t)h), "cuMemFree_v2 refuses host memory");
    is_int(0, cuMemFreeHost(h), "cuMemFreeHost");
    is_int(0, cuMemFreeHost(h2), "cuMemFreeHost again");
    char *buf = malloc(8192);
    is_int(0, cuMemHostRegister_v2(buf, 8192, 0), "cuMemHostRegister_v2");
    is_int(712, cuMemHostRegister_v2(buf, 8192, 0), "twice: ALREADY_REGISTERED");
    is_int(0, cuMemHostUnregister(buf), "cuMemHostUnregister");
    is_int(713, cuMemHostUnregister(buf), "twice: NOT_REGISTERED");
    free(buf);

    /* Streams, stream-ordered allocation, events, host functions. */
    CUstream s = NULL;
    CUevent e = NULL;
    CUmemoryPool pool = NULL;
    is_int(0, cuStreamCreate(&s, 0), "cuStreamCreate");
    is_int(0, cuMemAllocAsync(&d[0], 2048, s), "cuMemAllocAsync");
    is_int(0, cuMemAllocAsync_ptsz(&d[1], 10, NULL), "cuMemAllocAsync_ptsz");
    cuDeviceGetDefaultMemPool(&pool, 1);
    is_int(0, cuMemAllocFromPoolAsync(&d[2], 512, pool, s), "cuMemAllocFromPoolAsync");
    is_int((long long)DEV0, (long long)d[0], "async allocation address");
    is_int((long long)DEV0 + 2048, (long long)d[1], "next async allocation");
    is_int((long long)DEV1, (long long)d[2], "the pool's device decides");
    cuMemGetInfo_v2(&fr, &tot);
    is_int((long long)(GiB - 2058), (long long)fr, "async allocations use device memory");
    int two = 2;
    hits = 0;
    is_int(0, cuLaunchHostFunc(s, host_fn, &two), "cuLaunchHostFunc");
    is_int(2, hits, "host function ran in stream order, before the call returned");
    is_int(0, cuEventCreate(&e, 0), "cuEventCreate");
    is_int(0, cuEventRecord(e, s), "cuEventRecord");
    is_int(0, cuStreamWaitEvent(NULL, e, 0), "cuStreamWaitEvent");
    is_int(0, cuEventQuery(e), "cuEventQuery: complete");
    is_int(0, cuEventSynchronize(e), "cuEventSynchronize");
    is_int(0, cuMemFreeAsync(d[0], s), "cuMemFreeAsync");
    is_int(0, cuMemFreeAsync_ptsz(d[1], NULL), "cuMemFreeAsync_ptsz");
    is_int(0, cuMemFreeAsync(d[2], s), "cuMemFreeAsync on the pool's device");
    is_int(0, cuStreamSynchronize(s), "cuStreamSynchronize");
    is_int(0, cuEventDestroy_v2(e), "cuEventDestroy_v2");
    is_int(0, cuStreamDestroy_v2(s), "cuStreamDestroy_v2");
    cuMemGetInfo_v2(&fr, &tot);
    is_int((long long)GiB, (long long)fr, "async frees returned the memory");

    /* Virtual memory management on real pages. */
    CUmemAllocationProp prop = {.type = 1, .location = {1, 0}};
    CUmemAccessDesc acc = {{1, 0}, 3};
    size_t gran = 0;
    unsigned long long ph = 0;
    CUdeviceptr va = 0, va2 = 0;
    cuMemGetAllocationGranularity(&gran, &prop, 0);
    is_int(2 * MiB, (long long)gran, "granularity 2 MiB");
    is_int(1, cuMemCreate(&ph, MiB, &prop, 0), "cuMemCreate of a partial granule fails");
    is_int(0, cuMemCreate(&ph, 4 * MiB, &prop, 0), "cuMemCreate 4 MiB");
    cuMemGetInfo_v2(&fr, &tot);
    is_int((long long)(GiB - 4 * MiB), (long long)fr, "physical memory counts");
    is_int(0, cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0), "cuMemAddressReserve 8 MiB");
    is_int((long long)VA0, (long long)va, "reservation at the VA arena base");
    is_int(0, cuMemAddressReserve(&va2, 2 * MiB, 0, va + 16 * MiB, 0), "reserve with hint");
    is_int((long long)(VA0 + 16 * MiB), (long long)va2, "the hint is honoured");
    is_int(1, cuMemMap(va + 6 * MiB, 4 * MiB, 0, ph, 0), "map past the reservation fails");
    is_int(0, cuMemMap(va, 4 * MiB, 0, ph, 0), "cuMemMap");
    is_int(0, cuMemSetAccess(va, 4 * MiB, &acc, 1), "cuMemSetAccess read-write");
    memset((void *)(uintptr_t)va, 0x5a, 4 * MiB);
    is_int(0x5a, ((unsigned char *)(uintptr_t)va)[4 * MiB - 1], "mapped memory is writable");
    is_int(0, cuMemMap(va + 4 * MiB, 2 * MiB, 2 * MiB, ph, 0), "map the handle's 2nd half");
    cuMemSetAccess(va + 4 * MiB, 2 * MiB, &acc, 1);
    is_int(0x5a, ((unsigned char *)(uintptr_t)va)[4 * MiB], "aliases the same pages");
    is_int(0, cuMemRelease(ph), "cuMemRelease while mapped");
    cuMemGetInfo_v2(&fr, &tot);
    is_int((long long)(GiB - 4 * MiB), (long long)fr, "mapped pages stay allocated");
    is_int(1, cuMemUnmap(va, 2 * MiB), "unmap of part of a mapping fails");
    is_int(1, cuMemAddressFree(va, 8 * MiB), "cuMemAddressFree while mapped fails");
    is_int(0, cuMemUnmap(va, 6 * MiB), "cuMemUnmap of both mappings");
    cuMemGetInfo_v2(&fr, &tot);
    is_int((long long)GiB, (long long)fr, "released once unmapped");
    is_int(0, cuMemAddressFree(va, 8 * MiB), "cuMemAddressFree");
    is_int(0, cuMemAddressFree(va2, 2 * MiB), "cuMemAddressFree of the hinted range");

    /* Graph memory nodes. */
    CUgraph g = NULL;
    CUgraphNode an = NULL, fn = NULL;
    CUDA_MEM_ALLOC_NODE_PARAMS np = {.poolProps = {.allocType = 1, .location = {1, 0}},
                                     .bytesize = 3000};
    cuGraphCreate(&g, 0);
    is_int(0, cuGraphAddMemAllocNode(&an, g, NULL, 0, &np), "cuGraphAddMemAllocNode");
    is_int((long long)DEV0, (long long)np.dptr, "allocated when the node is made");
    is_int(0, cuGraphAddMemFreeNode(&fn, g, &an, 1, np.dptr), "cuGraphAddMemFreeNode");
    cuMemGetInfo_v2(&fr, &tot);
    is_int((long long)(GiB - 3000), (long long)fr, "held until the graph goes");
    cuGraphDestroy(g);
    cuMemGetInfo_v2(&fr, &tot);
    is_int((long long)GiB, (long long)fr, "freed with the graph");

    /* Errors. */
    const char *str = NULL;
    cuGetErrorName(2, &str);
    is_string("CUDA_ERROR_OUT_OF_MEMORY", str, "cuGetErrorName");
    cuGetErrorString(100, &str);
    is_string("no CUDA-capable device is detected", str, "cuGetErrorString");
    is_int(1, cuGetErrorName(123456, &str), "unknown error code");

    check_proc_table();

    /* Counters: exact calls, each exported function on its own. */
    is_int(12, calls("cuMemAlloc_v2"), "cuMemAlloc_v2 called 12 times");
    is_int(1, calls("cuMemAlloc"), "cuMemAlloc (old ABI) called once");
    is_int(1, calls("cuMemAllocAsync_ptsz"), "cuMemAllocAsync_ptsz once");
    is_int(2 * NPROC, calls("cuGetProcAddress_v2") + calls("cuGetProcAddress"),
           "cuGetProcAddress{,_v2} once per case each");
    is_int(-1, calls("cuNoSuchFunction"), "unknown name: -1");

    cuDevicePrimaryCtxRelease_v2(1);
    is_int(0, cuDevicePrimaryCtxRelease_v2(0), "cuDevicePrimaryCtxRelease_v2");
    is_int(201, cuDevicePrimaryCtxRelease_v2(0), "released twice: INVALID_CONTEXT");

    check_cudart("cudart_static_prog", "static");
    check_cudart("cudart_shared_prog", "shared");

    dlclose(lib);
    done_testing();
    return exit_status();
}
