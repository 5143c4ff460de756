/* torch.c: PyTorch's CUDAPluggableAllocator entry points over memtrace's caching
 * allocator on the cuda backend: one allocator per device, created on first use.
 * PyTorch passes its cudaStream_t, which the allocator takes as the stream handle. */
#include <pthread.h>
#include <stdint.h>

#include "cache_impl.h"

#define TORCH_MAX_DEVICES 64

static pthread_mutex_t torch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct memtrace_allocator *torch_alloc[TORCH_MAX_DEVICES];

static struct memtrace_allocator *torch_get(int device, int create)
{
    struct memtrace_allocator *a;
    if (device < 0 || device >= TORCH_MAX_DEVICES)
        return NULL;
    a = __atomic_load_n(&torch_alloc[device], __ATOMIC_ACQUIRE);
    if (a || !create)
        return a;
    pthread_mutex_lock(&torch_lock);
    a = torch_alloc[device];
    if (!a) {
        struct memtrace_device *d;
        int rc = memtrace_device_open(&d, "cuda", device);
        if (rc) {
            mtx_log("cannot open cuda device %d: %s", device, memtrace_strerror(rc));
        } else if ((rc = memtrace_alloc_create(&a, d)) != 0) {
            mtx_log("cannot create the allocator for cuda device %d: %s", device,
                   memtrace_strerror(rc));
            memtrace_device_close(d);
            a = NULL;
        } else {
            __atomic_store_n(&torch_alloc[device], a, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&torch_lock);
    return a;
}

MEMTRACE_API void *memtrace_torch_malloc(ssize_t size, int device, void *stream)
{
    struct memtrace_allocator *a = torch_get(device, 1);
    uint64_t addr;
    if (!a || size < 0)
        return NULL;
    if (memtrace_alloc_malloc_on(a, (size_t)size, (uint64_t)(uintptr_t)stream, &addr))
        return NULL;
    return (void *)(uintptr_t)addr;
}

MEMTRACE_API void memtrace_torch_free(void *ptr, ssize_t size, int device, void *stream)
{
    struct memtrace_allocator *a = torch_get(device, 0);
    (void)size;
    (void)stream;
    if (!ptr)
        return;
    if (!a || memtrace_alloc_free(a, (uint64_t)(uintptr_t)ptr))
        mtx_log("memtrace_torch_free: %p is not a block of device %d", ptr, device);
}

MEMTRACE_API void memtrace_torch_empty_cache(void)
{
    for (int i = 0; i < TORCH_MAX_DEVICES; i++) {
        struct memtrace_allocator *a = torch_get(i, 0);
        if (a)
            memtrace_alloc_empty_cache(a);
    }
}

MEMTRACE_API struct memtrace_allocator *memtrace_torch_allocator(int device)
{
    return torch_get(device, 0);
}
