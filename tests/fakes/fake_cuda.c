/* fake_cuda.c: a CUDA driver (libcuda.so.1) that runs on host memory, for tests.
 *
 * It speaks the real driver ABI (CUresult is int, CUdeviceptr is unsigned long long,
 * handles are pointers) so the real libcudart, memtrace's interposer and its device
 * backend can all load it in place of the driver on a machine with no GPU.
 *
 * Memory. Each device owns an arena (fake_mem.h): a large MAP_NORESERVE mapping at a
 * fixed address (0x200000000000 + device * 1 TiB), so one program gets the same
 * addresses on every run.
 * Addresses are 512-byte aligned; the device's used bytes are the exact requested
 * sizes, and cuMemGetInfo_v2 reports capacity - used. Pinned host memory comes from
 * its own arena (0x300000000000), virtual address reservations from a PROT_NONE arena
 * (0x400000000000), and cuMemCreate makes a memfd that cuMemMap maps MAP_SHARED into
 * a reservation, so the virtual memory API works on real pages. The old 32-bit ABI
 * (unversioned cuMemAlloc & co.) allocates below 4 GiB from a small arena.
 *
 * Streams are synchronous: work is done when the call returns, so cuLaunchHostFunc
 * runs the function before returning, events are complete once recorded, and
 * cuMemFreeAsync frees at once. Graph memory nodes allocate when the node is created
 * and free (for free nodes) when the graph is destroyed.
 *
 * Environment: FAKE_CUDA_MEMORY (bytes per device, K/M/G suffix allowed, default
 * 16 GiB), FAKE_CUDA_DEVICES (1..8, default 1), FAKE_CUDA_NO_DEVICE=1 (cuInit fails
 * with CUDA_ERROR_NO_DEVICE), FAKE_CUDA_DRIVER_VERSION (default 13000).
 *
 * fake_cuda_calls("cuMemAlloc_v2") returns how often an exported function was
 * called, so tests can check that a wrapper reached the driver exactly once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_mem.h"
#include "mtx/cuda_driver.h"

#define EXPORT __attribute__((visibility("default")))

typedef unsigned int CUdeviceptr_v1; /* the old 32-bit ABI */

#define FC_MAX_DEVICES   8
#define FC_ALIGN         512ULL
#define FC_GRANULARITY   (2ULL << 20)
#define FC_DEVICE_BASE   0x200000000000ULL
#define FC_DEVICE_STRIDE (1ULL << 40)
#define FC_HOST_BASE     0x300000000000ULL
#define FC_HOST_SIZE     (256ULL << 30)
#define FC_VA_BASE       0x400000000000ULL
#define FC_VA_SIZE       (4ULL << 40)
#define FC_V1_BASE       0x60000000ULL
#define FC_V1_SIZE       (256ULL << 20)

/* ---- call counters ---------------------------------------------------------- */

/* clang-format off */
#define FC_SYMBOLS(X) \
    X(cuInit) \
    X(cuDriverGetVersion) \
    X(cuDeviceGetCount) \
    X(cuDeviceGet) \
    X(cuDeviceGetName) \
    X(cuDeviceTotalMem_v2) \
    X(cuDeviceTotalMem) \
    X(cuDeviceGetAttribute) \
    X(cuDevicePrimaryCtxRetain) \
    X(cuDevicePrimaryCtxRelease_v2) \
    X(cuDevicePrimaryCtxRelease) \
    X(cuCtxGetCurrent) \
    X(cuCtxSetCurrent) \
    X(cuCtxGetDevice) \
    X(cuCtxSynchronize) \
    X(cuMemAlloc_v2) \
    X(cuMemAlloc) \
    X(cuMemAllocPitch_v2) \
    X(cuMemAllocPitch) \
    X(cuMemAllocManaged) \
    X(cuMemFree_v2) \
    X(cuMemFree) \
    X(cuMemAllocHost_v2) \
    X(cuMemAllocHost) \
    X(cuMemHostAlloc) \
    X(cuMemFreeHost) \
    X(cuMemHostRegister_v2) \
    X(cuMemHostRegister) \
    X(cuMemHostUnregister) \
    X(cuMemAllocAsync) \
    X(cuMemAllocAsync_ptsz) \
    X(cuMemAllocFromPoolAsync) \
    X(cuMemAllocFromPoolAsync_ptsz) \
    X(cuMemFreeAsync) \
    X(cuMemFreeAsync_ptsz) \
    X(cuDeviceGetDefaultMemPool) \
    X(cuDeviceGetMemPool) \
    X(cuMemGetInfo_v2) \
    X(cuMemGetInfo) \
    X(cuThreadExchangeStreamCaptureMode) \
    X(cuPointerGetAttribute) \
    X(cuMemGetAllocationGranularity) \
    X(cuMemCreate) \
    X(cuMemRelease) \
    X(cuMemAddressReserve) \
    X(cuMemAddressFree) \
    X(cuMemMap) \
    X(cuMemUnmap) \
    X(cuMemSetAccess) \
    X(cuStreamCreate) \
    X(cuStreamDestroy_v2) \
    X(cuStreamDestroy) \
    X(cuStreamSynchronize) \
    X(cuStreamSynchronize_ptsz) \
    X(cuLaunchHostFunc) \
    X(cuLaunchHostFunc_ptsz) \
    X(cuEventCreate) \
    X(cuEventRecord) \
    X(cuEventRecord_ptsz) \
    X(cuEventQuery) \
    X(cuEventSynchronize) \
    X(cuEventDestroy_v2) \
    X(cuEventDestroy) \
    X(cuStreamWaitEvent) \
    X(cuStreamWaitEvent_ptsz) \
    X(cuGraphCreate) \
    X(cuGraphDestroy) \
    X(cuGraphAddMemAllocNode) \
    X(cuGraphAddMemFreeNode) \
    X(cuMemcpyHtoD_v2) \
    X(cuMemcpyHtoD_v2_ptds) \
    X(cuMemcpyHtoD) \
    X(cuMemcpyDtoH_v2) \
    X(cuMemcpyDtoH_v2_ptds) \
    X(cuMemcpyDtoH) \
    X(cuGetErrorString) \
    X(cuGetErrorName) \
    X(cuGetProcAddress) \
    X(cuGetProcAddress_v2)
/* clang-format on */

#define FC_ENUM(name) FC_##name,
#define FC_NAME(name) #name,
enum { FC_SYMBOLS(FC_ENUM) FC_NSYMBOLS };
static const char *const fc_names[FC_NSYMBOLS] = {FC_SYMBOLS(FC_NAME)};
static _Atomic unsigned long long fc_calls[FC_NSYMBOLS];

#define HIT(name) atomic_fetch_add_explicit(&fc_calls[FC_##name], 1, memory_order_relaxed)

/* Calls of the exported function `name` so far; -1 if the fake has no such function. */
EXPORT long long fake_cuda_calls(const char *name);
EXPORT long long fake_cuda_calls(const char *name)
{
    for (int i = 0; i < FC_NSYMBOLS; i++)
        if (strcmp(fc_names[i], name) == 0)
            return (long long)atomic_load(&fc_calls[i]);
    return -1;
}

EXPORT void fake_cuda_reset_calls(void);
EXPORT void fake_cuda_reset_calls(void)
{
    for (int i = 0; i < FC_NSYMBOLS; i++)
        atomic_store(&fc_calls[i], 0);
}

/* ---- live objects, keyed by address ------------------------------------------- */

enum fc_kind {
    FK_DEVICE = 1,
    FK_MANAGED,
    FK_ASYNC,
    FK_GRAPH,
    FK_V1,
    FK_HOST,
    FK_REGISTERED,
    FK_RESERVE,
    FK_MAPPING,
};

/* Allocations and registrations; reservations and mappings live apart because a
 * mapping may start where its reservation does. */
static struct fake_table fc_allocs, fc_reserves, fc_maps;

/* ---- driver state -------------------------------------------------------------- */

#define FC_MAGIC_CTX    0x43545831u
#define FC_MAGIC_STREAM 0x5354524du
#define FC_MAGIC_EVENT  0x45564e54u
#define FC_MAGIC_POOL   0x504f4f4cu
#define FC_MAGIC_PHYS   0x50485953u
#define FC_MAGIC_GRAPH  0x47524150u

struct CUctx_st {
    unsigned magic;
    int dev;
    int refs;
};

struct CUmemPoolHandle_st {
    unsigned magic;
    int dev;
};

struct fc_device {
    struct fake_arena arena;
    uint64_t capacity, used;
    struct CUctx_st primary;
    struct CUmemPoolHandle_st pool;
};

struct CUstream_st {
    unsigned magic;
    int dev;
};

struct CUevent_st {
    unsigned magic;
    int recorded;
};

struct fc_phys {
    unsigned magic;
    int dev;
    int fd;
    int released;
    uint64_t size;
    unsigned maps;
};

struct CUgraphNode_st {
    struct CUgraphNode_st *next;
    CUdeviceptr free_at_destroy;
};

struct CUgraph_st {
    unsigned magic;
    struct CUgraphNode_st *nodes;
};

static pthread_mutex_t fc_lock = PTHREAD_MUTEX_INITIALIZER;
/* Set once under fc_lock by cuInit, read without it: every call checks it, and
 * reading it under fc_lock cost two atomics per call once a process has a second
 * thread (the preload's writer), a cost of this fake's own that interpose_bench
 * charged to the preload's cuCtxGetDevice. */
static atomic_int fc_initialized;
static int fc_ndevices;
static struct fc_device fc_devices[FC_MAX_DEVICES];
static struct fake_arena fc_host, fc_va, fc_v1;
static __thread struct CUctx_st *fc_current;
/* FAKE_CUDA_FAIL_AT: the device allocations (counted from 1, under fc_lock) that
 * fail with CUDA_ERROR_OUT_OF_MEMORY whatever the room. */
#define FC_MAX_FAILS 64
static unsigned long long fc_fail_at[FC_MAX_FAILS];
static int fc_nfail;
static unsigned long long fc_device_allocs;

static uint64_t env_bytes(const char *name, uint64_t def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        break;
    case 'g':
    case 'G':
        v <<= 30;
        break;
    default:
        break;
    }
    return v;
}

static int driver_version(void)
{
    const char *s = getenv("FAKE_CUDA_DRIVER_VERSION");
    return s && *s ? atoi(s) : 13000;
}

static void read_fail_at(void)
{
    const char *s = getenv("FAKE_CUDA_FAIL_AT");
    fc_nfail = 0;
    fc_device_allocs = 0;
    while (s && *s && fc_nfail < FC_MAX_FAILS) {
        char *end;
        unsigned long long n = strtoull(s, &end, 10);
        if (end == s)
            break;
        fc_fail_at[fc_nfail++] = n;
        s = *end == ',' ? end + 1 : end;
    }
}

static int injected_failure_locked(void)
{
    fc_device_allocs++;
    for (int i = 0; i < fc_nfail; i++)
        if (fc_fail_at[i] == fc_device_allocs)
            return 1;
    return 0;
}

static CUresult setup_locked(void)
{
    uint64_t capacity = env_bytes("FAKE_CUDA_MEMORY", 16ULL << 30);
    int n = (int)env_bytes("FAKE_CUDA_DEVICES", 1);
    if (n < 1 || n > FC_MAX_DEVICES || capacity > (FC_DEVICE_STRIDE >> 2))
        return CUDA_ERROR_INVALID_VALUE;
    /* Address space beyond the capacity: rounding to 512 bytes and free-list holes. */
    uint64_t span = fake_align_up(capacity * 2 + (64ULL << 20), FC_GRANULARITY);
    for (int d = 0; d < n; d++) {
        struct fc_device *dv = &fc_devices[d];
        if (fake_arena_map(&dv->arena, FC_DEVICE_BASE + (uint64_t)d * FC_DEVICE_STRIDE, span,
                           PROT_READ | PROT_WRITE) != 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        dv->capacity = capacity;
        dv->primary = (struct CUctx_st){FC_MAGIC_CTX, d, 0};
        dv->pool = (struct CUmemPoolHandle_st){FC_MAGIC_POOL, d};
    }
    if (fake_arena_map(&fc_host, FC_HOST_BASE, FC_HOST_SIZE, PROT_READ | PROT_WRITE) != 0 ||
        fake_arena_map(&fc_va, FC_VA_BASE, FC_VA_SIZE, PROT_NONE) != 0 ||
        fake_arena_map(&fc_v1, FC_V1_BASE, FC_V1_SIZE, PROT_READ | PROT_WRITE) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* The old ABI keeps pointers in 32 bits: without that range it has no memory. */
    if (fc_v1.base + fc_v1.size > (1ULL << 32)) {
        munmap((void *)(uintptr_t)fc_v1.base, fc_v1.size);
        fc_v1.size = 0;
    }
    fc_ndevices = n;
    read_fail_at();
    return CUDA_SUCCESS;
}

/* Where an arena starts: "device0".."device7", "host", "va" or "v1"; 0 before cuInit
 * or for another name. Fixed, except under ThreadSanitizer (fake_mem.c). */
EXPORT unsigned long long fake_cuda_base(const char *arena);
EXPORT unsigned long long fake_cuda_base(const char *arena)
{
    if (strncmp(arena, "device", 6) == 0 && arena[6] >= '0' && arena[6] < '0' + FC_MAX_DEVICES &&
        arena[7] == '\0')
        return fc_devices[arena[6] - '0'].arena.base;
    if (strcmp(arena, "host") == 0)
        return fc_host.base;
    if (strcmp(arena, "va") == 0)
        return fc_va.base;
    if (strcmp(arena, "v1") == 0)
        return fc_v1.base;
    return 0;
}

/* Bookkeeping goes with the library (dlclose, exit) so leak checkers see none; the
 * mappings stay, in case something still holds a pointer into them. */
__attribute__((destructor)) static void fc_fini(void)
{
    fake_table_fini(&fc_allocs);
    fake_table_fini(&fc_reserves);
    fake_table_fini(&fc_maps);
    for (int d = 0; d < FC_MAX_DEVICES; d++)
        fake_arena_fini(&fc_devices[d].arena);
    fake_arena_fini(&fc_host);
    fake_arena_fini(&fc_va);
    fake_arena_fini(&fc_v1);
}

EXPORT CUresult cuInit(unsigned int flags)
{
    HIT(cuInit);
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    const char *nd = getenv("FAKE_CUDA_NO_DEVICE");
    if (nd && *nd && strcmp(nd, "0") != 0)
        return CUDA_ERROR_NO_DEVICE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&fc_lock);
    if (!atomic_load_explicit(&fc_initialized, memory_order_relaxed)) {
        rc = setup_locked();
        atomic_store_explicit(&fc_initialized, rc == CUDA_SUCCESS, memory_order_release);
    }
    pthread_mutex_unlock(&fc_lock);
    return rc;
}

static int ready(void)
{
    return atomic_load_explicit(&fc_initialized, memory_order_acquire);
}

static int valid_dev(CUdevice d)
{
    return d >= 0 && d < fc_ndevices;
}

/* Device of the calling thread's context, or -1 if it has none. */
static int current_dev(void)
{
    return fc_current ? fc_current->dev : -1;
}

static int stream_dev(CUstream s, int *dev)
{
    if (s == NULL || s == (CUstream)(uintptr_t)1 || s == (CUstream)(uintptr_t)2) {
        *dev = current_dev();
        return *dev < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
    }
    if (s->magic != FC_MAGIC_STREAM)
        return CUDA_ERROR_INVALID_HANDLE;
    *dev = s->dev;
    return CUDA_SUCCESS;
}

#define REQUIRE_INIT()                                                                             \
    do {                                                                                           \
        if (!ready())                                                                              \
            return CUDA_ERROR_NOT_INITIALIZED;                                                     \
    } while (0)

EXPORT CUresult cuDriverGetVersion(int *v)
{
    HIT(cuDriverGetVersion);
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    *v = driver_version();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
    HIT(cuDeviceGetCount);
    REQUIRE_INIT();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = fc_ndevices;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    HIT(cuDeviceGet);
    REQUIRE_INIT();
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    HIT(cuDeviceGetName);
    REQUIRE_INIT();
    if (!valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "memtrace fake GPU %d", dev);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    HIT(cuDeviceTotalMem_v2);
    REQUIRE_INIT();
    if (!valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = fc_devices[dev].capacity;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    HIT(cuDeviceTotalMem);
    REQUIRE_INIT();
    if (!valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t c = fc_devices[dev].capacity;
    *bytes = c > UINT32_MAX ? UINT32_MAX : (unsigned int)c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *value, int attrib, CUdevice dev)
{
    HIT(cuDeviceGetAttribute);
    REQUIRE_INIT();
    if (!valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!value || attrib <= 0 || attrib >= 200)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
    case 1:
        *value = 1024;
        break; /* MAX_THREADS_PER_BLOCK */
    case 8:
        *value = 49152;
        break; /* MAX_SHARED_MEMORY_PER_BLOCK */
    case 9:
        *value = 65536;
        break; /* TOTAL_CONSTANT_MEMORY */
    case 10:
        *value = 32;
        break; /* WARP_SIZE */
    case 13:
        *value = 1000000;
        break; /* CLOCK_RATE */
    case 16:
        *value = 8;
        break; /* MULTIPROCESSOR_COUNT */
    case 33:
        *value = dev + 1;
        break; /* PCI_BUS_ID */
    case 75:
        *value = 9;
        break; /* COMPUTE_CAPABILITY_MAJOR */
    case 19:
    case 41:
    case 83:
    case 89: /* CAN_MAP_HOST_MEMORY, UNIFIED_ADDRESSING, */
    case 102:
    case 115:
        *value = 1;
        break; /* MANAGED, CONCURRENT_MANAGED, VMM, POOLS */
    default:
        *value = 0;
        break;
    }
    return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice dev)
{
    if (!ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fc_lock);
    CUresult rc = fc_devices[dev].primary.refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS)
        fc_devices[dev].primary.refs--;
    pthread_mutex_unlock(&fc_lock);
    return rc;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    HIT(cuDevicePrimaryCtxRetain);
    REQUIRE_INIT();
    if (!valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    fc_devices[dev].primary.refs++;
    *ctx = &fc_devices[dev].primary;
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    HIT(cuDevicePrimaryCtxRelease_v2);
    return primary_release(dev);
}

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    HIT(cuDevicePrimaryCtxRelease);
    return primary_release(dev);
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    HIT(cuCtxGetCurrent);
    REQUIRE_INIT();
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    *ctx = fc_current;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    HIT(cuCtxSetCurrent);
    REQUIRE_INIT();
    if (ctx && ctx->magic != FC_MAGIC_CTX)
        return CUDA_ERROR_INVALID_CONTEXT;
    fc_current = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
    HIT(cuCtxGetDevice);
    REQUIRE_INIT();
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (!fc_current)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = fc_current->dev;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void)
{
    HIT(cuCtxSynchronize);
    REQUIRE_INIT();
    return fc_current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* ---- allocation ------------------------------------------------------------------ */

/* Allocates size bytes of kind on device dev (device-resident kinds count against its
 * capacity). Returns the address in *out. */
static CUresult alloc_locked(int kind, int dev, uint64_t size, CUdeviceptr *out)
{
    struct fake_arena *a;
    int counts = kind != FK_HOST;
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (kind == FK_HOST)
        a = &fc_host;
    else if (kind == FK_V1)
        a = &fc_v1;
    else
        a = &fc_devices[dev].arena;
    if (counts &&
        (injected_failure_locked() || size > fc_devices[dev].capacity - fc_devices[dev].used))
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t span = fake_align_up(size, FC_ALIGN);
    uint64_t addr = a->size ? fake_arena_alloc(a, span, FC_ALIGN) : 0;
    if (!addr)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct fake_obj o = {addr, size, span, kind, dev, NULL};
    if (fake_obj_put(&fc_allocs, &o) != 0) {
        fake_arena_free(a, addr, span);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (counts)
        fc_devices[dev].used += size;
    *out = addr;
    return CUDA_SUCCESS;
}

static void release_pages(uint64_t addr, uint64_t span)
{
    uint64_t lo = fake_align_up(addr, 4096), hi = (addr + span) & ~4095ULL;
    if (hi > lo && hi - lo >= (64 << 10))
        madvise((void *)(uintptr_t)lo, hi - lo, MADV_DONTNEED);
}

static void free_obj_locked(struct fake_obj *o)
{
    struct fake_arena *a = o->kind == FK_HOST ? &fc_host
                           : o->kind == FK_V1 ? &fc_v1
                                              : &fc_devices[o->dev].arena;
    if (o->kind != FK_HOST)
        fc_devices[o->dev].used -= o->size;
    release_pages(o->addr, o->span);
    fake_arena_free(a, o->addr, o->span);
    fake_obj_del(&fc_allocs, o);
}

static int is_device_kind(int kind)
{
    return kind == FK_DEVICE || kind == FK_MANAGED || kind == FK_ASYNC || kind == FK_GRAPH;
}

/* Frees a device allocation made by any of the device allocation calls. */
static CUresult free_device(uint64_t addr, int v1)
{
    pthread_mutex_lock(&fc_lock);
    struct fake_obj *o = fake_obj_find(&fc_allocs, addr);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (o && (v1 ? o->kind == FK_V1 : is_device_kind(o->kind))) {
        free_obj_locked(o);
        rc = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&fc_lock);
    return rc;
}

static CUresult alloc_current(int kind, uint64_t size, CUdeviceptr *out)
{
    if (!ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    int dev = current_dev();
    if (dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&fc_lock);
    CUresult rc = alloc_locked(kind, dev, size, out);
    pthread_mutex_unlock(&fc_lock);
    return rc;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
    HIT(cuMemAlloc_v2);
    return alloc_current(FK_DEVICE, size, dptr);
}

EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int size)
{
    HIT(cuMemAlloc);
    CUdeviceptr a = 0;
    CUresult rc = alloc_current(FK_V1, size, dptr ? &a : NULL);
    if (rc == CUDA_SUCCESS)
        *dptr = (CUdeviceptr_v1)a;
    return rc;
}

static CUresult alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                            unsigned int elem, int kind)
{
    if (!pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (size_t)fake_align_up(width, FC_ALIGN);
    CUresult rc = alloc_current(kind, (uint64_t)p * height, dptr);
    if (rc == CUDA_SUCCESS)
        *pitch = p;
    return rc;
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                   unsigned int elem)
{
    HIT(cuMemAllocPitch_v2);
    return alloc_pitch(dptr, pitch, width, height, elem, FK_DEVICE);
}

EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width,
                                unsigned int height, unsigned int elem)
{
    HIT(cuMemAllocPitch);
    CUdeviceptr a = 0;
    size_t p = 0;
    if (!dptr || !pitch)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = alloc_pitch(&a, &p, width, height, elem, FK_V1);
    if (rc == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)a;
        *pitch = (unsigned int)p;
    }
    return rc;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
    HIT(cuMemAllocManaged);
    if (flags != 1 && flags != 2) /* CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_HOST */
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_current(FK_MANAGED, size, dptr);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    HIT(cuMemFree_v2);
    REQUIRE_INIT();
    if (dptr == 0)
        return CUDA_SUCCESS;
    return free_device(dptr, 0);
}

EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    HIT(cuMemFree);
    REQUIRE_INIT();
    if (dptr == 0)
        return CUDA_SUCCESS;
    return free_device(dptr, 1);
}

static CUresult host_alloc(void **pp, size_t size)
{
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr a = 0;
    CUresult rc = alloc_current(FK_HOST, size, &a);
    if (rc == CUDA_SUCCESS)
        *pp = (void *)(uintptr_t)a;
    return rc;
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t size)
{
    HIT(cuMemAllocHost_v2);
    return host_alloc(pp, size);
}

EXPORT CUresult cuMemAllocHost(void **pp, unsigned int size)
{
    HIT(cuMemAllocHost);
    return host_alloc(pp, size);
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
    HIT(cuMemHostAlloc);
    if (flags & ~0xfu) /* PORTABLE, DEVICEMAP, WRITECOMBINED and their combinations */
        return CUDA_ERROR_INVALID_VALUE;
    return host_alloc(pp, size);
}

EXPORT CUresult cuMemFreeHost(void *p)
{
    HIT(cuMemFreeHost);
    REQUIRE_INIT();
    pthread_mutex_lock(&fc_lock);
    struct fake_obj *o = fake_obj_find(&fc_allocs, (uint64_t)(uintptr_t)p);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (o && o->kind == FK_HOST) {
        free_obj_locked(o);
        rc = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&fc_lock);
    return rc;
}

static CUresult host_register(void *p, size_t size, unsigned int flags)
{
    if (!ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!p || size == 0 || (flags & ~0xfu))
        return CUDA_ERROR_INVALID_VALUE;
    int dev = current_dev();
    if (dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&fc_lock);
    CUresult rc = CUDA_SUCCESS;
    struct fake_obj o = {(uint64_t)(uintptr_t)p, size, size, FK_REGISTERED, dev, NULL};
    if (fake_obj_find(&fc_allocs, o.addr))
        rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    else if (fake_obj_put(&fc_allocs, &o) != 0)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&fc_lock);
    return rc;
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
    HIT(cuMemHostRegister_v2);
    return host_register(p, size, flags);
}

EXPORT CUresult cuMemHostRegister(void *p, size_t size, unsigned int flags)
{
    HIT(cuMemHostRegister);
    return host_register(p, size, flags);
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
    HIT(cuMemHostUnregister);
    REQUIRE_INIT();
    pthread_mutex_lock(&fc_lock);
    struct fake_obj *o = fake_obj_find(&fc_allocs, (uint64_t)(uintptr_t)p);
    CUresult rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    if (o && o->kind == FK_REGISTERED) {
        fake_obj_del(&fc_allocs, o);
        rc = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&fc_lock);
    return rc;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s)
{
    REQUIRE_INIT();
    int dev;
    CUresult rc = stream_dev(s, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pool) {
        if (pool->magic != FC_MAGIC_POOL)
            return CUDA_ERROR_INVALID_VALUE;
        dev = pool->dev;
    }
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    rc = alloc_locked(FK_ASYNC, dev, size, dptr);
    pthread_mutex_unlock(&fc_lock);
    return rc;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s)
{
    HIT(cuMemAllocAsync);
    return alloc_async(dptr, size, NULL, s);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s)
{
    HIT(cuMemAllocAsync_ptsz);
    return alloc_async(dptr, size, NULL, s);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
                                        CUstream s)
{
    HIT(cuMemAllocFromPoolAsync);
    return pool ? alloc_async(dptr, size, pool, s) : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
                                             CUstream s)
{
    HIT(cuMemAllocFromPoolAsync_ptsz);
    return pool ? alloc_async(dptr, size, pool, s) : CUDA_ERROR_INVALID_VALUE;
}

static CUresult free_async(CUdeviceptr dptr, CUstream s)
{
    REQUIRE_INIT();
    int dev;
    CUresult rc = stream_dev(s, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    return free_device(dptr, 0);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    HIT(cuMemFreeAsync);
    return free_async(dptr, s);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    HIT(cuMemFreeAsync_ptsz);
    return free_async(dptr, s);
}

static CUresult get_pool(CUmemoryPool *pool, CUdevice dev)
{
    if (!ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    *pool = &fc_devices[dev].pool;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    HIT(cuDeviceGetDefaultMemPool);
    return get_pool(pool, dev);
}

EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    HIT(cuDeviceGetMemPool);
    return get_pool(pool, dev);
}

/* Stream capture interaction mode per thread: 0 global (the default), 1 thread
 * local, 2 relaxed. A real driver lets a thread in global mode invalidate another
 * thread's capture by an unsafe call; the fake counts cuMemGetInfo_v2 calls made
 * outside relaxed mode so tests can see a sampler keeps out of captures. */
static __thread int fc_capture_mode;
static atomic_llong fc_info_unrelaxed;

EXPORT CUresult cuThreadExchangeStreamCaptureMode(int *mode)
{
    HIT(cuThreadExchangeStreamCaptureMode);
    if (!mode || *mode < 0 || *mode > 2)
        return CUDA_ERROR_INVALID_VALUE;
    int old = fc_capture_mode;
    fc_capture_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

EXPORT long long fake_cuda_info_calls_unrelaxed(void);
EXPORT long long fake_cuda_info_calls_unrelaxed(void)
{
    return atomic_load(&fc_info_unrelaxed);
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    HIT(cuMemGetInfo_v2);
    if (fc_capture_mode != 2)
        atomic_fetch_add(&fc_info_unrelaxed, 1);
    REQUIRE_INIT();
    int dev = current_dev();
    if (dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    *free_bytes = fc_devices[dev].capacity - fc_devices[dev].used;
    *total = fc_devices[dev].capacity;
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
    HIT(cuMemGetInfo);
    REQUIRE_INIT();
    int dev = current_dev();
    if (dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    uint64_t f = fc_devices[dev].capacity - fc_devices[dev].used, t = fc_devices[dev].capacity;
    pthread_mutex_unlock(&fc_lock);
    *free_bytes = f > UINT32_MAX ? UINT32_MAX : (unsigned int)f;
    *total = t > UINT32_MAX ? UINT32_MAX : (unsigned int)t;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr)
{
    HIT(cuPointerGetAttribute);
    REQUIRE_INIT();
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    /* Only exact allocation starts are looked up: enough for the tests, and cheap. */
    struct fake_obj *o = fake_obj_find(&fc_allocs, ptr);
    struct fake_obj copy = o ? *o : (struct fake_obj){0};
    pthread_mutex_unlock(&fc_lock);
    if (!o || copy.kind == FK_RESERVE)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attribute) {
    case 1: /* CONTEXT */
        *(CUcontext *)data = &fc_devices[copy.dev].primary;
        break;
    case 2: /* MEMORY_TYPE: HOST 1, DEVICE 2 */
        *(unsigned int *)data = copy.kind == FK_HOST || copy.kind == FK_REGISTERED ? 1 : 2;
        break;
    case 3: /* DEVICE_POINTER */
        *(CUdeviceptr *)data = ptr;
        break;
    case 8: /* IS_MANAGED */
        *(int *)data = copy.kind == FK_MANAGED;
        break;
    case 9: /* DEVICE_ORDINAL */
        *(int *)data = copy.dev;
        break;
    case 11: /* RANGE_START_ADDR */
        *(CUdeviceptr *)data = ptr;
        break;
    case 12: /* RANGE_SIZE */
        *(size_t *)data = copy.size;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* ---- virtual memory management ------------------------------------------------- */

EXPORT CUresult cuMemGetAllocationGranularity(size_t *gran, const CUmemAllocationProp *prop,
                                              int option)
{
    HIT(cuMemGetAllocationGranularity);
    REQUIRE_INIT();
    if (!gran || !prop || (option != 0 && option != 1))
        return CUDA_ERROR_INVALID_VALUE;
    *gran = FC_GRANULARITY;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    HIT(cuMemCreate);
    REQUIRE_INIT();
    /* type PINNED (1) at location DEVICE (1) is all the fake backs. */
    if (!handle || !prop || flags || prop->type != 1 || prop->location.type != 1 || size == 0 ||
        size % FC_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    int dev = prop->location.id;
    if (!valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    struct fc_phys *ph = calloc(1, sizeof *ph);
    if (!ph)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fc_lock);
    CUresult rc = CUDA_SUCCESS;
    if (size > fc_devices[dev].capacity - fc_devices[dev].used) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    ph->fd = memfd_create("fake_cuda", MFD_CLOEXEC);
    if (ph->fd < 0 || ftruncate(ph->fd, (off_t)size) != 0) {
        if (ph->fd >= 0)
            close(ph->fd);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    ph->magic = FC_MAGIC_PHYS;
    ph->dev = dev;
    ph->size = size;
    fc_devices[dev].used += size;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)ph;
out:
    pthread_mutex_unlock(&fc_lock);
    if (rc != CUDA_SUCCESS)
        free(ph);
    return rc;
}

static void phys_put_locked(struct fc_phys *ph)
{
    if (!ph->released || ph->maps)
        return;
    fc_devices[ph->dev].used -= ph->size;
    close(ph->fd);
    ph->magic = 0;
    free(ph);
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    HIT(cuMemRelease);
    REQUIRE_INIT();
    struct fc_phys *ph = (struct fc_phys *)(uintptr_t)handle;
    if (!ph || ph->magic != FC_MAGIC_PHYS || ph->released)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    ph->released = 1;
    phys_put_locked(ph); /* the pages live on while they are mapped */
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

static int mapped_locked(uint64_t ptr, uint64_t size)
{
    for (size_t i = 0; i < fc_maps.cap; i++) {
        struct fake_obj *o = &fc_maps.slots[i];
        if (o->addr && o->addr < ptr + size && ptr < o->addr + o->size)
            return 1;
    }
    return 0;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags)
{
    HIT(cuMemAddressReserve);
    REQUIRE_INIT();
    if (!ptr || size == 0 || size % FC_GRANULARITY || (alignment & (alignment - 1)) ||
        addr % FC_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t align = alignment > FC_GRANULARITY ? alignment : FC_GRANULARITY;
    pthread_mutex_lock(&fc_lock);
    uint64_t at = addr ? fake_arena_alloc_at(&fc_va, addr, size) : 0;
    if (!at) /* like the driver, a hint that cannot be honoured is not an error */
        at = fake_arena_alloc(&fc_va, size, align);
    CUresult rc = CUDA_SUCCESS;
    struct fake_obj o = {at, size, size, FK_RESERVE, 0, NULL};
    if (!at) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (fake_obj_put(&fc_reserves, &o) != 0) {
        fake_arena_free(&fc_va, at, size);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        *ptr = at;
    }
    pthread_mutex_unlock(&fc_lock);
    return rc;
}

static int remap_none(uint64_t addr, uint64_t size)
{
    void *p = mmap((void *)(uintptr_t)addr, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return p == MAP_FAILED ? -1 : 0;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    HIT(cuMemAddressFree);
    REQUIRE_INIT();
    pthread_mutex_lock(&fc_lock);
    struct fake_obj *o = fake_obj_find(&fc_reserves, ptr);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (o && o->size == size && !mapped_locked(ptr, size)) {
        remap_none(ptr, size);
        fake_arena_free(&fc_va, ptr, size);
        fake_obj_del(&fc_reserves, o);
        rc = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&fc_lock);
    return rc;
}

/* The reservation holding [ptr, ptr+size), or NULL. */
static struct fake_obj *find_reservation_locked(uint64_t ptr, uint64_t size)
{
    for (size_t i = 0; i < fc_reserves.cap; i++) {
        struct fake_obj *o = &fc_reserves.slots[i];
        if (o->addr && o->addr <= ptr && ptr + size <= o->addr + o->size)
            return o;
    }
    return NULL;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    HIT(cuMemMap);
    REQUIRE_INIT();
    struct fc_phys *ph = (struct fc_phys *)(uintptr_t)handle;
    if (!ph || ph->magic != FC_MAGIC_PHYS || flags || size == 0 || size % FC_GRANULARITY ||
        ptr % FC_GRANULARITY || offset % FC_GRANULARITY || offset + size > ph->size)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    struct fake_obj o = {ptr, size, size, FK_MAPPING, ph->dev, ph};
    if (!find_reservation_locked(ptr, size) || mapped_locked(ptr, size))
        goto out;
    /* Access stays off until cuMemSetAccess, as on the device. */
    if (mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, ph->fd,
             (off_t)offset) == MAP_FAILED) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    if (fake_obj_put(&fc_maps, &o) != 0) {
        remap_none(ptr, size);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    ph->maps++;
    rc = CUDA_SUCCESS;
out:
    pthread_mutex_unlock(&fc_lock);
    return rc;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    HIT(cuMemUnmap);
    REQUIRE_INIT();
    pthread_mutex_lock(&fc_lock);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    /* The range must be made of whole mappings, checked before anything changes. */
    uint64_t at = ptr, end = ptr + size;
    while (at < end) {
        struct fake_obj *o = fake_obj_find(&fc_maps, at);
        if (!o || o->kind != FK_MAPPING)
            goto out;
        at += o->size;
    }
    if (at != end || size == 0)
        goto out;
    for (at = ptr; at < end;) {
        struct fake_obj *o = fake_obj_find(&fc_maps, at);
        struct fc_phys *ph = o->aux;
        at += o->size;
        fake_obj_del(&fc_maps, o);
        ph->maps--;
        phys_put_locked(ph);
    }
    remap_none(ptr, size);
    rc = CUDA_SUCCESS;
out:
    pthread_mutex_unlock(&fc_lock);
    return rc;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                               size_t count)
{
    HIT(cuMemSetAccess);
    REQUIRE_INIT();
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    int prot = PROT_NONE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != 1 || !valid_dev(desc[i].location.id))
            return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags == 1)
            prot |= PROT_READ;
        else if (desc[i].flags == 3)
            prot |= PROT_READ | PROT_WRITE;
        else if (desc[i].flags != 0)
            return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&fc_lock);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    uint64_t at = ptr, end = ptr + size;
    while (at < end) {
        struct fake_obj *o = fake_obj_find(&fc_maps, at);
        if (!o || o->kind != FK_MAPPING)
            goto out;
        at += o->size;
    }
    if (at == end && mprotect((void *)(uintptr_t)ptr, size, prot) == 0)
        rc = CUDA_SUCCESS;
out:
    pthread_mutex_unlock(&fc_lock);
    return rc;
}

/* ---- streams, events, host functions ------------------------------------------- */

EXPORT CUresult cuStreamCreate(CUstream *ps, unsigned int flags)
{
    HIT(cuStreamCreate);
    REQUIRE_INIT();
    if (!ps || flags > 1)
        return CUDA_ERROR_INVALID_VALUE;
    if (!fc_current)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUstream_st *s = malloc(sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *s = (struct CUstream_st){FC_MAGIC_STREAM, fc_current->dev};
    *ps = s;
    return CUDA_SUCCESS;
}

static CUresult stream_destroy(CUstream s)
{
    if (!ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!s || s->magic != FC_MAGIC_STREAM)
        return CUDA_ERROR_INVALID_HANDLE;
    s->magic = 0;
    free(s);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s)
{
    HIT(cuStreamDestroy_v2);
    return stream_destroy(s);
}

EXPORT CUresult cuStreamDestroy(CUstream s)
{
    HIT(cuStreamDestroy);
    return stream_destroy(s);
}

static CUresult stream_check(CUstream s)
{
    if (!ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    int dev;
    return stream_dev(s, &dev);
}

EXPORT CUresult cuStreamSynchronize(CUstream s)
{
    HIT(cuStreamSynchronize);
    return stream_check(s);
}

EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    HIT(cuStreamSynchronize_ptsz);
    return stream_check(s);
}

/* Streams are synchronous, so stream order is call order: run the function now. */
static CUresult launch_host(CUstream s, CUhostFn fn, void *data)
{
    CUresult rc = stream_check(s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    fn(data);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data)
{
    HIT(cuLaunchHostFunc);
    return launch_host(s, fn, data);
}

EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *data)
{
    HIT(cuLaunchHostFunc_ptsz);
    return launch_host(s, fn, data);
}

EXPORT CUresult cuEventCreate(CUevent *pe, unsigned int flags)
{
    HIT(cuEventCreate);
    REQUIRE_INIT();
    if (!pe || (flags & ~0xfu))
        return CUDA_ERROR_INVALID_VALUE;
    if (!fc_current)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUevent_st *e = malloc(sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *e = (struct CUevent_st){FC_MAGIC_EVENT, 0};
    *pe = e;
    return CUDA_SUCCESS;
}

static CUresult event_check(CUevent e)
{
    if (!ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    return e && e->magic == FC_MAGIC_EVENT ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult event_record(CUevent e, CUstream s)
{
    CUresult rc = event_check(e);
    if (rc == CUDA_SUCCESS)
        rc = stream_check(s);
    if (rc == CUDA_SUCCESS)
        e->recorded = 1;
    return rc;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream s)
{
    HIT(cuEventRecord);
    return event_record(e, s);
}

EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream s)
{
    HIT(cuEventRecord_ptsz);
    return event_record(e, s);
}

/* Work recorded before an event is always done by the time anyone asks. */
EXPORT CUresult cuEventQuery(CUevent e)
{
    HIT(cuEventQuery);
    return event_check(e);
}

EXPORT CUresult cuEventSynchronize(CUevent e)
{
    HIT(cuEventSynchronize);
    return event_check(e);
}

static CUresult event_destroy(CUevent e)
{
    CUresult rc = event_check(e);
    if (rc == CUDA_SUCCESS) {
        e->magic = 0;
        free(e);
    }
    return rc;
}

EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
    HIT(cuEventDestroy_v2);
    return event_destroy(e);
}

EXPORT CUresult cuEventDestroy(CUevent e)
{
    HIT(cuEventDestroy);
    return event_destroy(e);
}

static CUresult wait_event(CUstream s, CUevent e, unsigned int flags)
{
    CUresult rc = stream_check(s);
    if (rc == CUDA_SUCCESS)
        rc = event_check(e);
    if (rc == CUDA_SUCCESS && flags > 1)
        rc = CUDA_ERROR_INVALID_VALUE;
    return rc;
}

EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    HIT(cuStreamWaitEvent);
    return wait_event(s, e, flags);
}

EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags)
{
    HIT(cuStreamWaitEvent_ptsz);
    return wait_event(s, e, flags);
}

/* ---- graphs: just enough for memory nodes --------------------------------------- */

EXPORT CUresult cuGraphCreate(CUgraph *pg, unsigned int flags)
{
    HIT(cuGraphCreate);
    REQUIRE_INIT();
    if (!pg || flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->magic = FC_MAGIC_GRAPH;
    *pg = g;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroy(CUgraph g)
{
    HIT(cuGraphDestroy);
    REQUIRE_INIT();
    if (!g || g->magic != FC_MAGIC_GRAPH)
        return CUDA_ERROR_INVALID_VALUE;
    for (struct CUgraphNode_st *n = g->nodes, *next; n; n = next) {
        next = n->next;
        if (n->free_at_destroy)
            free_device(n->free_at_destroy, 0);
        free(n);
    }
    g->magic = 0;
    free(g);
    return CUDA_SUCCESS;
}

static CUresult add_node(CUgraph g, CUgraphNode *pn, CUdeviceptr free_at_destroy)
{
    struct CUgraphNode_st *n = calloc(1, sizeof *n);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    n->free_at_destroy = free_at_destroy;
    n->next = g->nodes;
    g->nodes = n;
    *pn = n;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
                                       size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *params)
{
    HIT(cuGraphAddMemAllocNode);
    REQUIRE_INIT();
    if (!pn || !g || g->magic != FC_MAGIC_GRAPH || !params || (ndeps && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    int dev = params->poolProps.location.id;
    if (params->poolProps.location.type != 1 || !valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    CUdeviceptr a = 0;
    pthread_mutex_lock(&fc_lock);
    CUresult rc = alloc_locked(FK_GRAPH, dev, params->bytesize, &a);
    pthread_mutex_unlock(&fc_lock);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = add_node(g, pn, 0);
    if (rc != CUDA_SUCCESS) {
        free_device(a, 0);
        return rc;
    }
    params->dptr = a;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
                                      size_t ndeps, CUdeviceptr dptr)
{
    HIT(cuGraphAddMemFreeNode);
    REQUIRE_INIT();
    if (!pn || !g || g->magic != FC_MAGIC_GRAPH || (ndeps && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    struct fake_obj *o = fake_obj_find(&fc_allocs, dptr);
    int okay = o && o->kind == FK_GRAPH;
    pthread_mutex_unlock(&fc_lock);
    if (!okay)
        return CUDA_ERROR_INVALID_VALUE;
    return add_node(g, pn, dptr);
}

/* ---- copies -------------------------------------------------------------------- */

static CUresult copy(void *dst, const void *src, size_t n)
{
    if (!ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if ((!dst || !src) && n)
        return CUDA_ERROR_INVALID_VALUE;
    if (n)
        memcpy(dst, src, n);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    HIT(cuMemcpyHtoD_v2);
    return copy((void *)(uintptr_t)dst, src, n);
}

EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
    HIT(cuMemcpyHtoD_v2_ptds);
    return copy((void *)(uintptr_t)dst, src, n);
}

EXPORT CUresult cuMemcpyHtoD(CUdeviceptr_v1 dst, const void *src, unsigned int n)
{
    HIT(cuMemcpyHtoD);
    return copy((void *)(uintptr_t)dst, src, n);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    HIT(cuMemcpyDtoH_v2);
    return copy(dst, (const void *)(uintptr_t)src, n);
}

EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
    HIT(cuMemcpyDtoH_v2_ptds);
    return copy(dst, (const void *)(uintptr_t)src, n);
}

EXPORT CUresult cuMemcpyDtoH(void *dst, CUdeviceptr_v1 src, unsigned int n)
{
    HIT(cuMemcpyDtoH);
    return copy(dst, (const void *)(uintptr_t)src, n);
}

/* ---- errors ---------------------------------------------------------------------- */

static const struct {
    CUresult code;
    const char *name, *text;
} fc_errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static CUresult error_lookup(CUresult code, const char **out, int want_name)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof fc_errors / sizeof fc_errors[0]; i++)
        if (fc_errors[i].code == code) {
            *out = want_name ? fc_errors[i].name : fc_errors[i].text;
            return CUDA_SUCCESS;
        }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult code, const char **s)
{
    HIT(cuGetErrorString);
    return error_lookup(code, s, 0);
}

EXPORT CUresult cuGetErrorName(CUresult code, const char **s)
{
    HIT(cuGetErrorName);
    return error_lookup(code, s, 1);
}

/* ---- cuGetProcAddress --------------------------------------------------------------- */

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    int *status);

/* Rows for one base name run from the per-thread-stream variant to the oldest ABI; the
 * first row that the caller's flags and version allow wins, as in the driver. */
static const struct {
    const char *base;
    int since;
    int ptsz;
    void *fn;
} fc_procs[] = {
#define P(base, since, fn)                                                                         \
    {                                                                                              \
#base, since, 0, (void *)fn                                                                \
    }
#define PT(base, since, fn)                                                                        \
    {                                                                                              \
#base, since, 1, (void *)fn                                                                \
    }
    P(cuInit, 2000, cuInit),
    P(cuDriverGetVersion, 2020, cuDriverGetVersion),
    P(cuDeviceGetCount, 2000, cuDeviceGetCount),
    P(cuDeviceGet, 2000, cuDeviceGet),
    P(cuDeviceGetName, 2000, cuDeviceGetName),
    P(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2),
    P(cuDeviceTotalMem, 2000, cuDeviceTotalMem),
    P(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute),
    P(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
    P(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2),
    P(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease),
    P(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
    P(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
    P(cuCtxGetDevice, 2000, cuCtxGetDevice),
    P(cuCtxSynchronize, 2000, cuCtxSynchronize),
    P(cuMemAlloc, 3020, cuMemAlloc_v2),
    P(cuMemAlloc, 2000, cuMemAlloc),
    P(cuMemAllocPitch, 3020, cuMemAllocPitch_v2),
    P(cuMemAllocPitch, 2000, cuMemAllocPitch),
    P(cuMemAllocManaged, 6000, cuMemAllocManaged),
    P(cuMemFree, 3020, cuMemFree_v2),
    P(cuMemFree, 2000, cuMemFree),
    P(cuMemAllocHost, 3020, cuMemAllocHost_v2),
    P(cuMemAllocHost, 2000, cuMemAllocHost),
    P(cuMemHostAlloc, 2020, cuMemHostAlloc),
    P(cuMemFreeHost, 2000, cuMemFreeHost),
    P(cuMemHostRegister, 6050, cuMemHostRegister_v2),
    P(cuMemHostRegister, 4000, cuMemHostRegister),
    P(cuMemHostUnregister, 4000, cuMemHostUnregister),
    PT(cuMemAllocAsync, 11020, cuMemAllocAsync_ptsz),
    P(cuMemAllocAsync, 11020, cuMemAllocAsync),
    PT(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync_ptsz),
    P(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync),
    PT(cuMemFreeAsync, 11020, cuMemFreeAsync_ptsz),
    P(cuMemFreeAsync, 11020, cuMemFreeAsync),
    P(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool),
    P(cuDeviceGetMemPool, 11020, cuDeviceGetMemPool),
    P(cuMemCreate, 10020, cuMemCreate),
    P(cuMemRelease, 10020, cuMemRelease),
    P(cuMemMap, 10020, cuMemMap),
    P(cuMemUnmap, 10020, cuMemUnmap),
    P(cuMemSetAccess, 10020, cuMemSetAccess),
    P(cuMemAddressReserve, 10020, cuMemAddressReserve),
    P(cuMemAddressFree, 10020, cuMemAddressFree),
    P(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity),
    P(cuMemGetInfo, 3020, cuMemGetInfo_v2),
    P(cuMemGetInfo, 2000, cuMemGetInfo),
    P(cuThreadExchangeStreamCaptureMode, 10010, cuThreadExchangeStreamCaptureMode),
    P(cuPointerGetAttribute, 4000, cuPointerGetAttribute),
    P(cuStreamCreate, 2000, cuStreamCreate),
    P(cuStreamDestroy, 4000, cuStreamDestroy_v2),
    P(cuStreamDestroy, 2000, cuStreamDestroy),
    PT(cuStreamSynchronize, 7000, cuStreamSynchronize_ptsz),
    P(cuStreamSynchronize, 2000, cuStreamSynchronize),
    PT(cuLaunchHostFunc, 10000, cuLaunchHostFunc_ptsz),
    P(cuLaunchHostFunc, 10000, cuLaunchHostFunc),
    P(cuEventCreate, 2000, cuEventCreate),
    PT(cuEventRecord, 7000, cuEventRecord_ptsz),
    P(cuEventRecord, 2000, cuEventRecord),
    P(cuEventQuery, 2000, cuEventQuery),
    P(cuEventSynchronize, 2000, cuEventSynchronize),
    P(cuEventDestroy, 4000, cuEventDestroy_v2),
    P(cuEventDestroy, 2000, cuEventDestroy),
    PT(cuStreamWaitEvent, 7000, cuStreamWaitEvent_ptsz),
    P(cuStreamWaitEvent, 3020, cuStreamWaitEvent),
    P(cuGraphCreate, 10000, cuGraphCreate),
    P(cuGraphDestroy, 10000, cuGraphDestroy),
    P(cuGraphAddMemAllocNode, 11040, cuGraphAddMemAllocNode),
    P(cuGraphAddMemFreeNode, 11040, cuGraphAddMemFreeNode),
    P(cuGetErrorString, 6000, cuGetErrorString),
    P(cuGetErrorName, 6000, cuGetErrorName),
    PT(cuMemcpyHtoD, 7000, cuMemcpyHtoD_v2_ptds),
    P(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2),
    P(cuMemcpyHtoD, 2000, cuMemcpyHtoD),
    PT(cuMemcpyDtoH, 7000, cuMemcpyDtoH_v2_ptds),
    P(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2),
    P(cuMemcpyDtoH, 2000, cuMemcpyDtoH),
    P(cuGetProcAddress, 12000, cuGetProcAddress_v2),
    P(cuGetProcAddress, 11030, cuGetProcAddress),
#undef P
#undef PT
};

static CUresult proc_lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                            int *status)
{
    int st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult rc = CUDA_ERROR_NOT_FOUND;
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags > 2)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    for (size_t i = 0; i < sizeof fc_procs / sizeof fc_procs[0]; i++) {
        if (strcmp(fc_procs[i].base, symbol) != 0)
            continue;
        st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        if (fc_procs[i].ptsz && !(flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
            continue;
        if (version >= fc_procs[i].since) {
            *pfn = fc_procs[i].fn;
            st = CU_GET_PROC_ADDRESS_SUCCESS;
            rc = CUDA_SUCCESS;
            break;
        }
    }
    if (status)
        *status = st;
    return rc;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    HIT(cuGetProcAddress);
    return proc_lookup(symbol, pfn, version, flags, NULL);
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    int *status)
{
    HIT(cuGetProcAddress_v2);
    return proc_lookup(symbol, pfn, version, flags, status);
}

/* Each driver function of mtx/cuda_driver.h has the type the header gives it. */
#define FC_SAME(name) _Static_assert(MT_CU_SAME_TYPE(name, name), #name);
FC_SAME(cuInit)
FC_SAME(cuDeviceGetCount)
FC_SAME(cuDeviceGet)
FC_SAME(cuDeviceGetName)
FC_SAME(cuDeviceTotalMem_v2)
FC_SAME(cuDevicePrimaryCtxRetain)
FC_SAME(cuDevicePrimaryCtxRelease)
FC_SAME(cuCtxGetDevice)
FC_SAME(cuCtxGetCurrent)
FC_SAME(cuCtxSetCurrent)
FC_SAME(cuCtxSynchronize)
FC_SAME(cuThreadExchangeStreamCaptureMode)
FC_SAME(cuMemAlloc_v2)
FC_SAME(cuMemAllocPitch_v2)
FC_SAME(cuMemAllocManaged)
FC_SAME(cuMemFree_v2)
FC_SAME(cuMemAllocHost_v2)
FC_SAME(cuMemHostAlloc)
FC_SAME(cuMemFreeHost)
FC_SAME(cuMemHostRegister_v2)
FC_SAME(cuMemHostUnregister)
FC_SAME(cuMemAllocAsync)
FC_SAME(cuMemAllocAsync_ptsz)
FC_SAME(cuMemAllocFromPoolAsync)
FC_SAME(cuMemAllocFromPoolAsync_ptsz)
FC_SAME(cuMemFreeAsync)
FC_SAME(cuMemFreeAsync_ptsz)
FC_SAME(cuMemGetInfo_v2)
FC_SAME(cuMemCreate)
FC_SAME(cuMemRelease)
FC_SAME(cuMemMap)
FC_SAME(cuMemUnmap)
FC_SAME(cuMemAddressReserve)
FC_SAME(cuMemAddressFree)
FC_SAME(cuMemSetAccess)
FC_SAME(cuMemGetAllocationGranularity)
FC_SAME(cuStreamCreate)
FC_SAME(cuStreamDestroy_v2)
FC_SAME(cuStreamSynchronize)
FC_SAME(cuStreamWaitEvent)
FC_SAME(cuLaunchHostFunc)
FC_SAME(cuEventCreate)
FC_SAME(cuEventRecord)
FC_SAME(cuEventQuery)
FC_SAME(cuEventSynchronize)
FC_SAME(cuEventDestroy_v2)
FC_SAME(cuGraphAddMemAllocNode)
FC_SAME(cuGraphAddMemFreeNode)
FC_SAME(cuGetProcAddress)
FC_SAME(cuGetProcAddress_v2)
