/* cudart.c: runtime wrappers, for programs linked with the shared libcudart.
 *
 * One event per user call, with the runtime's name as its source; the driver call
 * the runtime makes underneath runs inside the same re-entry guard and so is not
 * recorded a second time. A statically linked runtime is not interposable here; the
 * driver wrappers see its allocations through cuGetProcAddress. With
 * MEMTRACE_CACHING=1, cudaMalloc[Async] and cudaFree[Async] are served by the caching
 * allocator (interpose/caching.c) as the driver's cuMemAlloc_v2 is. */
#include "config.h"

#include <dlfcn.h>
#include <stdatomic.h>

#include "caching.h"
#include "cu.h"
#include "interpose.h"
#include "mtx/util.h"

typedef int cudaError_t;
typedef void *cudaStream_t;

#define cudaSuccess             0
#define cudaErrorSymbolNotFound 500
#define CUDA_STREAM_PER_THREAD  2ull

#define RT_SYMBOLS(X)                                                                              \
    X(cudaMalloc)                                                                                  \
    X(cudaFree)                                                                                    \
    X(cudaMallocAsync)                                                                             \
    X(cudaMallocAsync_ptsz)                                                                        \
    X(cudaFreeAsync)                                                                               \
    X(cudaFreeAsync_ptsz)                                                                          \
    X(cudaMallocHost)                                                                              \
    X(cudaFreeHost)                                                                                \
    X(cudaMallocManaged)                                                                           \
    X(cudaMallocPitch)                                                                             \
    X(cudaHostAlloc)                                                                               \
    X(cudaGetDriverEntryPoint)                                                                     \
    X(cudaGetDriverEntryPoint_ptsz)                                                                \
    X(cudaGetDriverEntryPointByVersion)                                                            \
    X(cudaGetDriverEntryPointByVersion_ptsz)

#define X_ENUM(name) R_##name,
enum { RT_SYMBOLS(X_ENUM) R_COUNT };
#define X_NAME(name) #name,
static const char *const rt_name[R_COUNT] = {RT_SYMBOLS(X_NAME)};
static void *_Atomic rt_real[R_COUNT];
static _Atomic int rt_missing[R_COUNT];

static void *rt_resolve(int i)
{
    void *p = atomic_load_explicit(&rt_real[i], memory_order_acquire);
    if (MTX_LIKELY(p != NULL) || atomic_load_explicit(&rt_missing[i], memory_order_relaxed))
        return p;
    p = mt_real_dlsym(RTLD_NEXT, rt_name[i]);
    if (p == NULL)
        atomic_store(&rt_missing[i], 1);
    else
        atomic_store_explicit(&rt_real[i], p, memory_order_release);
    return p;
}

#define REAL(name) ((__typeof__(&name##_w))rt_resolve(R_##name))
#define SRC(name)                                                                                  \
    static uint32_t src_id;                                                                        \
    static const char *const src = #name

static void rec_alloc(const char *src, uint32_t *id, int device, uint64_t stream, const void *p,
                      uint64_t size)
{
    mt_ip_record_ex(MEMTRACE_SEGMENT_ALLOC, MT_IP_SEGMENT, device, stream, (uintptr_t)p, size, 0,
                    src, id, NULL, NULL);
}

static void rec_free(const char *src, uint32_t *id, uint64_t stream, const void *p)
{
    mt_ip_record_ex(MEMTRACE_SEGMENT_FREE, MT_IP_SEGMENT, 0, stream, (uintptr_t)p, 0, 0, src, id,
                    NULL, NULL);
}

static int dev(void)
{
    mt_cu_note_context();
    return mt_cu_current_device();
}

/* MEMTRACE_CACHING=1: a block of the caching allocator (cudaErrorMemoryAllocation is
 * 2 as the driver's out of memory), or MT_CACHING_PASS for the runtime. */
static cudaError_t cache_alloc(void **p, size_t size, uint64_t stream)
{
    uint64_t addr = 0;
    if (p == NULL || !mt_ip_config()->caching)
        return MT_CACHING_PASS;
    int rc = mt_caching_alloc(&addr, size, stream);
    if (rc == 0)
        *p = (void *)(uintptr_t)addr;
    return rc;
}

static cudaError_t cudaMalloc_w(void **p, size_t size)
{
    SRC(cudaMalloc);
    __typeof__(&cudaMalloc_w) f = REAL(cudaMalloc);
    if (f == NULL)
        return cudaErrorSymbolNotFound;
    if (!mt_ip_enter())
        return f(p, size);
    cudaError_t r = cache_alloc(p, size, 0);
    if (r == MT_CACHING_PASS) {
        r = f(p, size);
        if (r == cudaSuccess)
            rec_alloc(src, &src_id, dev(), 0, *p, size);
    }
    mt_ip_leave();
    return r;
}

static cudaError_t cudaFree_w(void *p)
{
    SRC(cudaFree);
    __typeof__(&cudaFree_w) f = REAL(cudaFree);
    if (f == NULL)
        return cudaErrorSymbolNotFound;
    if (p != NULL && mt_caching_free((uintptr_t)p, 0, NULL))
        return cudaSuccess;
    if (p == NULL || !mt_ip_enter())
        return f(p);
    rec_free(src, &src_id, 0, p);
    cudaError_t r = f(p);
    mt_ip_leave();
    return r;
}

#define MALLOC_ASYNC(name, stream_of)                                                              \
    static cudaError_t name##_w(void **p, size_t size, cudaStream_t s)                             \
    {                                                                                              \
        SRC(name);                                                                                 \
        __typeof__(&name##_w) f = REAL(name);                                                      \
        if (f == NULL)                                                                             \
            return cudaErrorSymbolNotFound;                                                        \
        if (!mt_ip_enter())                                                                        \
            return f(p, size, s);                                                                  \
        cudaError_t r = cache_alloc(p, size, stream_of(s));                                        \
        if (r == MT_CACHING_PASS) {                                                                \
            r = f(p, size, s);                                                                     \
            if (r == cudaSuccess)                                                                  \
                rec_alloc(src, &src_id, dev(), stream_of(s), *p, size);                            \
        }                                                                                          \
        mt_ip_leave();                                                                             \
        return r;                                                                                  \
    }

#define FREE_ASYNC(name, stream_of)                                                                \
    static cudaError_t name##_w(void *p, cudaStream_t s)                                           \
    {                                                                                              \
        SRC(name);                                                                                 \
        __typeof__(&name##_w) f = REAL(name);                                                      \
        if (f == NULL)                                                                             \
            return cudaErrorSymbolNotFound;                                                        \
        if (p != NULL && mt_caching_free((uintptr_t)p, 1, (void *)(uintptr_t)stream_of(s)))        \
            return cudaSuccess;                                                                    \
        if (p == NULL || !mt_ip_enter())                                                           \
            return f(p, s);                                                                        \
        rec_free(src, &src_id, stream_of(s), p);                                                   \
        cudaError_t r = f(p, s);                                                                   \
        mt_ip_leave();                                                                             \
        return r;                                                                                  \
    }

#define LEGACY(s) ((uint64_t)(uintptr_t)(s))
#define PTSZ(s)   ((s) == NULL ? CUDA_STREAM_PER_THREAD : (uint64_t)(uintptr_t)(s))
MALLOC_ASYNC(cudaMallocAsync, LEGACY)
MALLOC_ASYNC(cudaMallocAsync_ptsz, PTSZ)
FREE_ASYNC(cudaFreeAsync, LEGACY)
FREE_ASYNC(cudaFreeAsync_ptsz, PTSZ)

static cudaError_t cudaMallocHost_w(void **p, size_t size)
{
    SRC(cudaMallocHost);
    __typeof__(&cudaMallocHost_w) f = REAL(cudaMallocHost);
    if (f == NULL)
        return cudaErrorSymbolNotFound;
    if (!mt_ip_enter())
        return f(p, size);
    cudaError_t r = f(p, size);
    if (r == cudaSuccess)
        rec_alloc(src, &src_id, -1, 0, *p, size);
    mt_ip_leave();
    return r;
}

static cudaError_t cudaFreeHost_w(void *p)
{
    SRC(cudaFreeHost);
    __typeof__(&cudaFreeHost_w) f = REAL(cudaFreeHost);
    if (f == NULL)
        return cudaErrorSymbolNotFound;
    if (p == NULL || !mt_ip_enter())
        return f(p);
    rec_free(src, &src_id, 0, p);
    cudaError_t r = f(p);
    mt_ip_leave();
    return r;
}

static cudaError_t cudaMallocManaged_w(void **p, size_t size, unsigned flags)
{
    SRC(cudaMallocManaged);
    __typeof__(&cudaMallocManaged_w) f = REAL(cudaMallocManaged);
    if (f == NULL)
        return cudaErrorSymbolNotFound;
    if (!mt_ip_enter())
        return f(p, size, flags);
    cudaError_t r = f(p, size, flags);
    if (r == cudaSuccess)
        rec_alloc(src, &src_id, dev(), 0, *p, size);
    mt_ip_leave();
    return r;
}

static cudaError_t cudaMallocPitch_w(void **p, size_t *pitch, size_t width, size_t height)
{
    SRC(cudaMallocPitch);
    __typeof__(&cudaMallocPitch_w) f = REAL(cudaMallocPitch);
    if (f == NULL)
        return cudaErrorSymbolNotFound;
    if (!mt_ip_enter())
        return f(p, pitch, width, height);
    cudaError_t r = f(p, pitch, width, height);
    if (r == cudaSuccess)
        rec_alloc(src, &src_id, dev(), 0, *p, (uint64_t)*pitch * height);
    mt_ip_leave();
    return r;
}

static cudaError_t cudaHostAlloc_w(void **p, size_t size, unsigned flags)
{
    SRC(cudaHostAlloc);
    __typeof__(&cudaHostAlloc_w) f = REAL(cudaHostAlloc);
    if (f == NULL)
        return cudaErrorSymbolNotFound;
    if (!mt_ip_enter())
        return f(p, size, flags);
    cudaError_t r = f(p, size, flags);
    if (r == cudaSuccess)
        rec_alloc(src, &src_id, -1, 0, *p, size);
    mt_ip_leave();
    return r;
}

#define ENTRY_POINT(name)                                                                          \
    static cudaError_t name##_w(const char *symbol, void **fn, unsigned long long flags,           \
                                int *status)                                                       \
    {                                                                                              \
        __typeof__(&name##_w) f = REAL(name);                                                      \
        if (f == NULL)                                                                             \
            return cudaErrorSymbolNotFound;                                                        \
        cudaError_t r = f(symbol, fn, flags, status);                                              \
        if (r == cudaSuccess)                                                                      \
            mt_cu_swap(fn);                                                                        \
        return r;                                                                                  \
    }
#define ENTRY_POINT_BY_VERSION(name)                                                               \
    static cudaError_t name##_w(const char *symbol, void **fn, unsigned version,                   \
                                unsigned long long flags, int *status)                             \
    {                                                                                              \
        __typeof__(&name##_w) f = REAL(name);                                                      \
        if (f == NULL)                                                                             \
            return cudaErrorSymbolNotFound;                                                        \
        cudaError_t r = f(symbol, fn, version, flags, status);                                     \
        if (r == cudaSuccess)                                                                      \
            mt_cu_swap(fn);                                                                        \
        return r;                                                                                  \
    }
ENTRY_POINT(cudaGetDriverEntryPoint)
ENTRY_POINT(cudaGetDriverEntryPoint_ptsz)
ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion)
ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion_ptsz)

#define X_ALIAS(name) MT_EXPORT __typeof__(name##_w) name __attribute__((alias(#name "_w")));
RT_SYMBOLS(X_ALIAS)
