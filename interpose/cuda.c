/* cuda.c: driver API wrappers.
 *
 * Runtimes reach the driver through dlsym(libcuda, "cuGetProcAddress_v2") and then
 * one query per function, so exporting cuMemAlloc_v2 alone sees nothing of them.
 * The dlsym hook returns our resolvers; they ask the real resolver first and swap
 * the answer for our wrapper only when it is exactly the real address of a wrapped
 * function, which keeps the ABI version and the per-thread-stream (_ptsz) variant
 * the caller asked for. The same wrappers are exported under the driver's names for
 * programs that link libcuda.
 *
 * What is recorded (device = the calling thread's current device, -1 for host):
 *   cuMemAlloc_v2, cuMemAllocPitch_v2 (pitch * height), cuMemAllocManaged,
 *   cuMemAlloc[FromPool]Async[_ptsz]      segment_alloc / cuMemFree_v2,
 *   cuMemFreeAsync[_ptsz]                  segment_free
 *   cuMemAllocHost_v2, cuMemHostAlloc, cuMemHostRegister_v2
 *                                          segment_alloc, device -1 / cuMemFreeHost,
 *   cuMemHostUnregister                    segment_free, device -1
 *   cuMemCreate / cuMemRelease             annotate marks "physical_create" /
 *                                          "physical_release" with the size, addr =
 *                                          the handle (the bytes count where mapped)
 *   cuMemMap / cuMemUnmap                  segment_map / segment_unmap (aux = handle)
 *   cuMemAddressReserve / cuMemAddressFree annotate marks "va_reserve" / "va_free"
 *                                          (address space is not memory)
 *   cuGraphAddMemAllocNode / FreeNode      segment_alloc / segment_free, category
 *                                          "graph"
 *   cuMemGetInfo_v2                        counter (used, total)
 * Frees are recorded before the driver call: once it returns, the driver may hand
 * the same address to another thread, whose allocation must come after the free.
 *
 * With MEMTRACE_CACHING=1, cuMemAlloc_v2 and cuMemAllocAsync[_ptsz] return blocks of
 * memtrace's caching allocator (interpose/caching.c), which records them; their frees
 * give the blocks back, and any other address goes to the driver as above. */
#include "config.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>

#include "caching.h"
#include "cu.h"
#include "interpose.h"
#include "mtx/cuda_driver.h"
#include "mtx/util.h"

#define CU_SYMBOLS(X)                                                                              \
    X(cuMemAlloc_v2)                                                                               \
    X(cuMemAllocPitch_v2)                                                                          \
    X(cuMemAllocManaged)                                                                           \
    X(cuMemFree_v2)                                                                                \
    X(cuMemAllocHost_v2)                                                                           \
    X(cuMemHostAlloc)                                                                              \
    X(cuMemFreeHost)                                                                               \
    X(cuMemHostRegister_v2)                                                                        \
    X(cuMemHostUnregister)                                                                         \
    X(cuMemAllocAsync)                                                                             \
    X(cuMemAllocAsync_ptsz)                                                                        \
    X(cuMemAllocFromPoolAsync)                                                                     \
    X(cuMemAllocFromPoolAsync_ptsz)                                                                \
    X(cuMemFreeAsync)                                                                              \
    X(cuMemFreeAsync_ptsz)                                                                         \
    X(cuMemCreate)                                                                                 \
    X(cuMemRelease)                                                                                \
    X(cuMemMap)                                                                                    \
    X(cuMemUnmap)                                                                                  \
    X(cuMemAddressReserve)                                                                         \
    X(cuMemAddressFree)                                                                            \
    X(cuMemGetInfo_v2)                                                                             \
    X(cuGraphAddMemAllocNode)                                                                      \
    X(cuGraphAddMemFreeNode)                                                                       \
    X(cuGetProcAddress)                                                                            \
    X(cuGetProcAddress_v2)

/* Driver functions called but not wrapped. */
#define CU_HELPERS(X)                                                                              \
    X(cuCtxGetDevice)                                                                              \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxSetCurrent)                                                                             \
    X(cuStreamSynchronize)                                                                         \
    X(cuThreadExchangeStreamCaptureMode)

#define X_ENUM(name) S_##name,
enum { CU_SYMBOLS(X_ENUM) CU_HELPERS(X_ENUM) S_COUNT };
enum { S_WRAPPED = S_cuGetProcAddress_v2 + 1 };

#define X_NAME(name) #name,
static const char *const sym_name[S_COUNT] = {CU_SYMBOLS(X_NAME) CU_HELPERS(X_NAME)};

static void *_Atomic sym_real[S_COUNT];
static void *_Atomic sym_tried[S_COUNT]; /* the handle a failed lookup used */
static void *_Atomic cuda_handle;

static void *wrapper_of(int i);

static void *libcuda(void)
{
    void *h = atomic_load_explicit(&cuda_handle, memory_order_acquire);
    if (h == NULL) {
        /* Keeps libcuda loaded for as long as its addresses are in the wrappers. */
        h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
        if (h != NULL)
            atomic_store_explicit(&cuda_handle, h, memory_order_release);
    }
    return h;
}

static void *resolve(int i)
{
    void *h = libcuda();
    if (atomic_load_explicit(&sym_tried[i], memory_order_relaxed) == (h ? h : (void *)1))
        return NULL;
    void *p = h != NULL ? mt_real_dlsym(h, sym_name[i]) : NULL;
    if (p == NULL)
        p = mt_real_dlsym(RTLD_NEXT, sym_name[i]);
    if (p != NULL && i < S_WRAPPED && p == wrapper_of(i))
        p = NULL;
    if (p == NULL) {
        atomic_store_explicit(&sym_tried[i], h ? h : (void *)1, memory_order_relaxed);
        return NULL;
    }
    atomic_store_explicit(&sym_real[i], p, memory_order_release);
    return p;
}

static inline void *real(int i)
{
    void *p = atomic_load_explicit(&sym_real[i], memory_order_acquire);
    return MTX_LIKELY(p != NULL) ? p : resolve(i);
}

#define REAL(name) ((__typeof__(&name##_w))real(S_##name))

/* ---- helpers ------------------------------------------------------------------- */

static _Atomic(CUcontext) first_ctx;

int mt_cu_current_device(void)
{
    PFN_cuCtxGetDevice get = (PFN_cuCtxGetDevice)real(S_cuCtxGetDevice);
    int dev = 0;
    if (get == NULL || get(&dev) != CUDA_SUCCESS)
        return 0;
    return dev;
}

void mt_cu_note_context(void)
{
    if (atomic_load_explicit(&first_ctx, memory_order_relaxed) != NULL)
        return;
    PFN_cuCtxGetCurrent get = (PFN_cuCtxGetCurrent)real(S_cuCtxGetCurrent);
    CUcontext c = NULL;
    if (get != NULL && get(&c) == CUDA_SUCCESS && c != NULL)
        atomic_store(&first_ctx, c);
}

static int mem_info(uint64_t *free_bytes, uint64_t *total_bytes)
{
    static MTX_TLS CUcontext bound;
    CUcontext c = atomic_load(&first_ctx);
    if (c == NULL)
        return -1;
    if (bound != c) {
        PFN_cuCtxSetCurrent set = (PFN_cuCtxSetCurrent)real(S_cuCtxSetCurrent);
        if (set == NULL || set(c) != CUDA_SUCCESS)
            return -1;
        /* Relaxed: in the default (global) mode, a query from this thread while the
         * program captures a CUDA graph on another could invalidate the capture. */
        PFN_cuThreadExchangeStreamCaptureMode mode =
            (PFN_cuThreadExchangeStreamCaptureMode)real(S_cuThreadExchangeStreamCaptureMode);
        int relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
        if (mode != NULL)
            mode(&relaxed);
        bound = c;
    }
    PFN_cuMemGetInfo_v2 info = (PFN_cuMemGetInfo_v2)real(S_cuMemGetInfo_v2);
    size_t f = 0, t = 0;
    if (info == NULL || info(&f, &t) != CUDA_SUCCESS)
        return -1;
    *free_bytes = f;
    *total_bytes = t;
    return 0;
}

void *mt_cu_ctx_get(void)
{
    PFN_cuCtxGetCurrent get = (PFN_cuCtxGetCurrent)real(S_cuCtxGetCurrent);
    CUcontext c = NULL;
    if (get == NULL || get(&c) != CUDA_SUCCESS)
        return NULL;
    return c;
}

void mt_cu_ctx_set(void *ctx)
{
    PFN_cuCtxSetCurrent set = (PFN_cuCtxSetCurrent)real(S_cuCtxSetCurrent);
    if (set != NULL)
        set(ctx);
}

int mt_cu_stream_sync(void *s)
{
    PFN_cuStreamSynchronize sync = (PFN_cuStreamSynchronize)real(S_cuStreamSynchronize);
    return sync != NULL ? sync(s) : CUDA_ERROR_NOT_FOUND;
}

static inline uint64_t ptsz_stream(CUstream s)
{
    return (uint64_t)(uintptr_t)(s == NULL ? CU_STREAM_PER_THREAD : s);
}

static void record_alloc(const char *src, uint32_t *id, int device, uint64_t stream, uint64_t addr,
                         uint64_t size)
{
    mt_ip_record_ex(MEMTRACE_SEGMENT_ALLOC, MT_IP_SEGMENT, device, stream, addr, size, 0, src, id,
                    NULL, NULL);
}

static void record_free(const char *src, uint32_t *id, int device, uint64_t stream, uint64_t addr)
{
    mt_ip_record_ex(MEMTRACE_SEGMENT_FREE, MT_IP_SEGMENT, device, stream, addr, 0, 0, src, id, NULL,
                    NULL);
}

static int device_now(void)
{
    mt_cu_note_context();
    return mt_cu_current_device();
}

static uint64_t free_bytes_now(void)
{
    PFN_cuMemGetInfo_v2 info = (PFN_cuMemGetInfo_v2)real(S_cuMemGetInfo_v2);
    size_t f = 0, t = 0;
    return info != NULL && info(&f, &t) == CUDA_SUCCESS ? f : 0;
}

/* After a device allocation: its segment or, when the driver had no room, an oom
 * event with the bytes asked for and the device's free bytes then (aux), as the
 * caching allocator records its own. The program gets the driver's result as is. */
static void record_result(CUresult r, const char *src, uint32_t *id, uint64_t stream,
                          const CUdeviceptr *dptr, uint64_t size)
{
    if (r == CUDA_SUCCESS)
        record_alloc(src, id, device_now(), stream, *dptr, size);
    else if (r == CUDA_ERROR_OUT_OF_MEMORY)
        mt_ip_record(MEMTRACE_OOM, device_now(), stream, 0, size, free_bytes_now(), src, id);
}

/* MEMTRACE_CACHING=1: the caching allocator's block (recorded by the allocator), or
 * MT_CACHING_PASS for the driver. Inside mt_ip_enter(). */
static CUresult cache_alloc(CUdeviceptr *dptr, size_t bytesize, uint64_t stream)
{
    uint64_t addr = 0;
    if (dptr == NULL || !mt_ip_config()->caching)
        return MT_CACHING_PASS;
    int rc = mt_caching_alloc(&addr, bytesize, stream);
    if (rc == 0)
        *dptr = addr;
    return rc;
}

/* ---- wrappers ------------------------------------------------------------------ */

#define SRC(name)                                                                                  \
    static uint32_t src_id;                                                                        \
    static const char *const src = #name

static CUresult cuMemAlloc_v2_w(CUdeviceptr *dptr, size_t bytesize)
{
    SRC(cuMemAlloc_v2);
    __typeof__(&cuMemAlloc_v2_w) f = REAL(cuMemAlloc_v2);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(dptr, bytesize);
    CUresult r = cache_alloc(dptr, bytesize, 0);
    if (r == MT_CACHING_PASS) {
        r = f(dptr, bytesize);
        record_result(r, src, &src_id, 0, dptr, bytesize);
    }
    mt_ip_leave();
    return r;
}

static CUresult cuMemAllocPitch_v2_w(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                     unsigned elem)
{
    SRC(cuMemAllocPitch_v2);
    __typeof__(&cuMemAllocPitch_v2_w) f = REAL(cuMemAllocPitch_v2);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(dptr, pitch, width, height, elem);
    CUresult r = f(dptr, pitch, width, height, elem);
    record_result(r, src, &src_id, 0, dptr,
                  r == CUDA_SUCCESS ? (uint64_t)*pitch * height : (uint64_t)width * height);
    mt_ip_leave();
    return r;
}

static CUresult cuMemAllocManaged_w(CUdeviceptr *dptr, size_t bytesize, unsigned flags)
{
    SRC(cuMemAllocManaged);
    __typeof__(&cuMemAllocManaged_w) f = REAL(cuMemAllocManaged);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(dptr, bytesize, flags);
    CUresult r = f(dptr, bytesize, flags);
    record_result(r, src, &src_id, 0, dptr, bytesize);
    mt_ip_leave();
    return r;
}

static CUresult cuMemFree_v2_w(CUdeviceptr dptr)
{
    SRC(cuMemFree_v2);
    __typeof__(&cuMemFree_v2_w) f = REAL(cuMemFree_v2);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (dptr != 0 && mt_caching_free(dptr, 0, NULL))
        return CUDA_SUCCESS;
    if (dptr == 0 || !mt_ip_enter())
        return f(dptr);
    record_free(src, &src_id, 0, 0, dptr);
    CUresult r = f(dptr);
    mt_ip_leave();
    return r;
}

static CUresult cuMemAllocHost_v2_w(void **pp, size_t bytesize)
{
    SRC(cuMemAllocHost_v2);
    __typeof__(&cuMemAllocHost_v2_w) f = REAL(cuMemAllocHost_v2);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(pp, bytesize);
    CUresult r = f(pp, bytesize);
    if (r == CUDA_SUCCESS)
        record_alloc(src, &src_id, -1, 0, (uint64_t)(uintptr_t)*pp, bytesize);
    else if (r == CUDA_ERROR_OUT_OF_MEMORY)
        mt_ip_record(MEMTRACE_OOM, -1, 0, 0, bytesize, 0, src, &src_id);
    mt_ip_leave();
    return r;
}

static CUresult cuMemHostAlloc_w(void **pp, size_t bytesize, unsigned flags)
{
    SRC(cuMemHostAlloc);
    __typeof__(&cuMemHostAlloc_w) f = REAL(cuMemHostAlloc);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(pp, bytesize, flags);
    CUresult r = f(pp, bytesize, flags);
    if (r == CUDA_SUCCESS)
        record_alloc(src, &src_id, -1, 0, (uint64_t)(uintptr_t)*pp, bytesize);
    else if (r == CUDA_ERROR_OUT_OF_MEMORY)
        mt_ip_record(MEMTRACE_OOM, -1, 0, 0, bytesize, 0, src, &src_id);
    mt_ip_leave();
    return r;
}

/* Pinned host memory given back: recorded (device -1) before the call. */
#define HOST_FREE(name)                                                                            \
    static CUresult name##_w(void *p)                                                              \
    {                                                                                              \
        SRC(name);                                                                                 \
        __typeof__(&name##_w) f = REAL(name);                                                      \
        if (f == NULL)                                                                             \
            return CUDA_ERROR_NOT_FOUND;                                                           \
        if (p == NULL || !mt_ip_enter())                                                           \
            return f(p);                                                                           \
        record_free(src, &src_id, -1, 0, (uint64_t)(uintptr_t)p);                                  \
        CUresult r = f(p);                                                                         \
        mt_ip_leave();                                                                             \
        return r;                                                                                  \
    }

HOST_FREE(cuMemFreeHost)

static CUresult cuMemHostRegister_v2_w(void *p, size_t bytesize, unsigned flags)
{
    SRC(cuMemHostRegister_v2);
    __typeof__(&cuMemHostRegister_v2_w) f = REAL(cuMemHostRegister_v2);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(p, bytesize, flags);
    CUresult r = f(p, bytesize, flags);
    if (r == CUDA_SUCCESS)
        record_alloc(src, &src_id, -1, 0, (uint64_t)(uintptr_t)p, bytesize);
    mt_ip_leave();
    return r;
}

HOST_FREE(cuMemHostUnregister)

#define ALLOC_ASYNC(name, stream_of)                                                               \
    static CUresult name##_w(CUdeviceptr *dptr, size_t bytesize, CUstream s)                       \
    {                                                                                              \
        SRC(name);                                                                                 \
        __typeof__(&name##_w) f = REAL(name);                                                      \
        if (f == NULL)                                                                             \
            return CUDA_ERROR_NOT_FOUND;                                                           \
        if (!mt_ip_enter())                                                                        \
            return f(dptr, bytesize, s);                                                           \
        CUresult r = cache_alloc(dptr, bytesize, stream_of(s));                                    \
        if (r == MT_CACHING_PASS) {                                                                \
            r = f(dptr, bytesize, s);                                                              \
            record_result(r, src, &src_id, stream_of(s), dptr, bytesize);                          \
        }                                                                                          \
        mt_ip_leave();                                                                             \
        return r;                                                                                  \
    }

#define POOL_ASYNC(name, stream_of)                                                                \
    static CUresult name##_w(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream s)    \
    {                                                                                              \
        SRC(name);                                                                                 \
        __typeof__(&name##_w) f = REAL(name);                                                      \
        if (f == NULL)                                                                             \
            return CUDA_ERROR_NOT_FOUND;                                                           \
        if (!mt_ip_enter())                                                                        \
            return f(dptr, bytesize, pool, s);                                                     \
        CUresult r = f(dptr, bytesize, pool, s);                                                   \
        record_result(r, src, &src_id, stream_of(s), dptr, bytesize);                              \
        mt_ip_leave();                                                                             \
        return r;                                                                                  \
    }

#define FREE_ASYNC(name, stream_of)                                                                \
    static CUresult name##_w(CUdeviceptr dptr, CUstream s)                                         \
    {                                                                                              \
        SRC(name);                                                                                 \
        __typeof__(&name##_w) f = REAL(name);                                                      \
        if (f == NULL)                                                                             \
            return CUDA_ERROR_NOT_FOUND;                                                           \
        if (dptr != 0 && mt_caching_free(dptr, 1, (void *)(uintptr_t)stream_of(s)))                \
            return CUDA_SUCCESS;                                                                   \
        if (dptr == 0 || !mt_ip_enter())                                                           \
            return f(dptr, s);                                                                     \
        record_free(src, &src_id, 0, stream_of(s), dptr);                                          \
        CUresult r = f(dptr, s);                                                                   \
        mt_ip_leave();                                                                             \
        return r;                                                                                  \
    }

#define LEGACY_STREAM(s) ((uint64_t)(uintptr_t)(s))
ALLOC_ASYNC(cuMemAllocAsync, LEGACY_STREAM)
ALLOC_ASYNC(cuMemAllocAsync_ptsz, ptsz_stream)
POOL_ASYNC(cuMemAllocFromPoolAsync, LEGACY_STREAM)
POOL_ASYNC(cuMemAllocFromPoolAsync_ptsz, ptsz_stream)
FREE_ASYNC(cuMemFreeAsync, LEGACY_STREAM)
FREE_ASYNC(cuMemFreeAsync_ptsz, ptsz_stream)

static CUresult cuMemCreate_w(CUmemGenericAllocationHandle *handle, size_t size,
                              const CUmemAllocationProp *prop, unsigned long long flags)
{
    SRC(cuMemCreate);
    static uint32_t cat_id;
    __typeof__(&cuMemCreate_w) f = REAL(cuMemCreate);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(handle, size, prop, flags);
    CUresult r = f(handle, size, prop, flags);
    /* CU_MEM_LOCATION_TYPE_DEVICE is 1; other locations are host memory. */
    int dev = prop != NULL && prop->location.type == 1 ? prop->location.id : -1;
    if (r == CUDA_SUCCESS) {
        mt_ip_record_ex(MEMTRACE_SEGMENT_ALLOC, MT_IP_PHYSICAL, dev, 0, *handle, size, 0, src,
                        &src_id, "physical_create", &cat_id);
    } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        /* cuMemGetInfo answers for the current context's device only. */
        uint64_t free_bytes = dev >= 0 && dev == device_now() ? free_bytes_now() : 0;
        mt_ip_record(MEMTRACE_OOM, dev, 0, 0, size, free_bytes, src, &src_id);
    }
    mt_ip_leave();
    return r;
}

static CUresult cuMemRelease_w(CUmemGenericAllocationHandle handle)
{
    SRC(cuMemRelease);
    static uint32_t cat_id;
    __typeof__(&cuMemRelease_w) f = REAL(cuMemRelease);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(handle);
    mt_ip_record_ex(MEMTRACE_SEGMENT_FREE, MT_IP_PHYSICAL, 0, 0, handle, 0, 0, src, &src_id,
                    "physical_release", &cat_id);
    CUresult r = f(handle);
    mt_ip_leave();
    return r;
}

static CUresult cuMemMap_w(CUdeviceptr ptr, size_t size, size_t offset,
                           CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    SRC(cuMemMap);
    __typeof__(&cuMemMap_w) f = REAL(cuMemMap);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(ptr, size, offset, handle, flags);
    CUresult r = f(ptr, size, offset, handle, flags);
    if (r == CUDA_SUCCESS)
        mt_ip_record_ex(MEMTRACE_SEGMENT_MAP, MT_IP_MAPPED, device_now(), 0, ptr, size, handle, src,
                        &src_id, NULL, NULL);
    mt_ip_leave();
    return r;
}

static CUresult cuMemUnmap_w(CUdeviceptr ptr, size_t size)
{
    SRC(cuMemUnmap);
    __typeof__(&cuMemUnmap_w) f = REAL(cuMemUnmap);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(ptr, size);
    mt_ip_record_ex(MEMTRACE_SEGMENT_UNMAP, MT_IP_MAPPED, 0, 0, ptr, size, 0, src, &src_id, NULL,
                    NULL);
    CUresult r = f(ptr, size);
    mt_ip_leave();
    return r;
}

static CUresult cuMemAddressReserve_w(CUdeviceptr *ptr, size_t size, size_t alignment,
                                      CUdeviceptr addr, unsigned long long flags)
{
    SRC(cuMemAddressReserve);
    static uint32_t cat_id;
    __typeof__(&cuMemAddressReserve_w) f = REAL(cuMemAddressReserve);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(ptr, size, alignment, addr, flags);
    CUresult r = f(ptr, size, alignment, addr, flags);
    if (r == CUDA_SUCCESS)
        mt_ip_record_ex(MEMTRACE_ANNOTATE, MT_IP_SEGMENT, device_now(), 0, *ptr, size,
                        MEMTRACE_ANNOTATE_MARK, src, &src_id, "va_reserve", &cat_id);
    mt_ip_leave();
    return r;
}

static CUresult cuMemAddressFree_w(CUdeviceptr ptr, size_t size)
{
    SRC(cuMemAddressFree);
    static uint32_t cat_id;
    __typeof__(&cuMemAddressFree_w) f = REAL(cuMemAddressFree);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(ptr, size);
    CUresult r = f(ptr, size);
    if (r == CUDA_SUCCESS)
        mt_ip_record_ex(MEMTRACE_ANNOTATE, MT_IP_SEGMENT, device_now(), 0, ptr, size,
                        MEMTRACE_ANNOTATE_MARK, src, &src_id, "va_free", &cat_id);
    mt_ip_leave();
    return r;
}

static CUresult cuMemGetInfo_v2_w(size_t *free_bytes, size_t *total_bytes)
{
    SRC(cuMemGetInfo_v2);
    __typeof__(&cuMemGetInfo_v2_w) f = REAL(cuMemGetInfo_v2);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(free_bytes, total_bytes);
    CUresult r = f(free_bytes, total_bytes);
    if (r == CUDA_SUCCESS && free_bytes != NULL && total_bytes != NULL) {
        struct memtrace_event ev = {
            .action = MEMTRACE_COUNTER,
            .device = mt_cu_current_device(),
            .addr = *total_bytes - *free_bytes,
            .size = *total_bytes,
            .requested_size = mt_sampler_rss(),
            .source = src_id ? src_id : (src_id = memtrace_intern(src)),
        };
        memtrace_record_event(&ev);
    }
    mt_ip_leave();
    return r;
}

static CUresult cuGraphAddMemAllocNode_w(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                         size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *params)
{
    SRC(cuGraphAddMemAllocNode);
    static uint32_t cat_id;
    __typeof__(&cuGraphAddMemAllocNode_w) f = REAL(cuGraphAddMemAllocNode);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(node, graph, deps, ndeps, params);
    CUresult r = f(node, graph, deps, ndeps, params);
    if (r == CUDA_SUCCESS && params != NULL)
        mt_ip_record_ex(MEMTRACE_SEGMENT_ALLOC, MT_IP_SEGMENT, params->poolProps.location.id, 0,
                        params->dptr, params->bytesize, 0, src, &src_id, "graph", &cat_id);
    mt_ip_leave();
    return r;
}

static CUresult cuGraphAddMemFreeNode_w(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                        size_t ndeps, CUdeviceptr dptr)
{
    SRC(cuGraphAddMemFreeNode);
    static uint32_t cat_id;
    __typeof__(&cuGraphAddMemFreeNode_w) f = REAL(cuGraphAddMemFreeNode);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    if (!mt_ip_enter())
        return f(node, graph, deps, ndeps, dptr);
    mt_ip_record_ex(MEMTRACE_SEGMENT_FREE, MT_IP_SEGMENT, 0, 0, dptr, 0, 0, src, &src_id, "graph",
                    &cat_id);
    CUresult r = f(node, graph, deps, ndeps, dptr);
    mt_ip_leave();
    return r;
}

void mt_cu_swap(void **pfn)
{
    if (pfn == NULL || *pfn == NULL)
        return;
    for (int i = 0; i < S_WRAPPED; i++) {
        void *r = real(i);
        if (r != NULL && r == *pfn) {
            *pfn = wrapper_of(i);
            return;
        }
    }
}

static CUresult cuGetProcAddress_w(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    __typeof__(&cuGetProcAddress_w) f = REAL(cuGetProcAddress);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    CUresult r = f(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS && !mt_ip_from_library(__builtin_return_address(0)))
        mt_cu_swap(pfn);
    return r;
}

static CUresult cuGetProcAddress_v2_w(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                      int *status)
{
    __typeof__(&cuGetProcAddress_v2_w) f = REAL(cuGetProcAddress_v2);
    if (f == NULL)
        return CUDA_ERROR_NOT_FOUND;
    CUresult r = f(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && !mt_ip_from_library(__builtin_return_address(0)))
        mt_cu_swap(pfn);
    return r;
}

/* The exported names: the same functions under the driver's names. */
#define X_ALIAS(name) MT_EXPORT __typeof__(name##_w) name __attribute__((alias(#name "_w")));
CU_SYMBOLS(X_ALIAS)
/* Each wrapper has its driver function's exact type (mtx/cuda_driver.h). */
#define X_SAME(name) _Static_assert(MT_CU_SAME_TYPE(name##_w, name), #name "_w");
CU_SYMBOLS(X_SAME)

#define X_WRAP(name) (void *)name##_w,
static void *const sym_wrapper[S_WRAPPED] = {CU_SYMBOLS(X_WRAP)};

static void *wrapper_of(int i)
{
    return sym_wrapper[i];
}

static void *unwrap(void *p)
{
    for (int i = 0; p != NULL && i < S_WRAPPED; i++)
        if (p == sym_wrapper[i])
            return real(i);
    return p;
}

static void *hook(void *handle, const char *name, void *found)
{
    for (int i = 0; i < S_WRAPPED; i++) {
        if (strcmp(name, sym_name[i]) != 0)
            continue;
        if (found == NULL)
            return NULL;
        if (found == sym_wrapper[i])
            return found;
        /* The library a runtime opened is the driver the wrappers must call. */
        if (handle != RTLD_DEFAULT && handle != RTLD_NEXT && atomic_load(&cuda_handle) == NULL)
            atomic_store(&cuda_handle, handle);
        void *expected = NULL;
        atomic_compare_exchange_strong(&sym_real[i], &expected, found);
        return sym_wrapper[i];
    }
    return NULL;
}

/* ---- the backend table ------------------------------------------------------------ */

MT_IP_EARLY static void *dlsym_hook(void *handle, const char *name, void *found, const void *caller)
{
    if (name[0] != 'c' || name[1] != 'u')
        return NULL;
    if (mt_ip_from_library(caller)) {
        /* The library is about to use a device: this process records from now on, as
         * it would on its first wrapped call. */
        if (mt_ip_enter())
            mt_ip_leave();
        return unwrap(found);
    }
    return hook(handle, name, found);
}

static void atfork_child(void)
{
    atomic_store(&first_ctx, NULL);
}

/* One counter for the device of the first context a wrapped call ran in. */
static int sample(uint64_t rss)
{
    static uint32_t src_id;
    uint64_t free_b = 0, total_b = 0;
    if (mem_info(&free_b, &total_b) != 0)
        return 0;
    struct memtrace_event ev = {
        .action = MEMTRACE_COUNTER,
        .device = 0,
        .addr = total_b - free_b,
        .size = total_b,
        .requested_size = rss,
    };
    if (src_id == 0)
        src_id = memtrace_intern("sampler");
    ev.source = src_id;
    return memtrace_record_event(&ev) == 0;
}

/* The runtime's wrappers (cudart.c) and MEMTRACE_CACHING (caching.c) are exported
 * symbols and helpers of the driver's: the core asks nothing of them, so the family
 * has one table. */
const struct mt_ip_backend mt_ip_cuda_backend = {
    .name = "cuda",
    .dlsym = dlsym_hook,
    .atfork_child = atfork_child,
    .sample = sample,
};
