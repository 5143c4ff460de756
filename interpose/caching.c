/* caching.c: with MEMTRACE_CACHING=1 the driver and runtime allocation wrappers hand
 * the program blocks of memtrace's caching allocator (the one per device that
 * PyTorch's pluggable allocator entry points share, libtrace/torch.c) instead of
 * driver allocations. The allocator records the blocks and its segments; its own
 * driver calls reach the driver unwrapped (the dlsym hook answers libmemtrace.so's
 * lookups with the real functions), so nothing is recorded twice.
 *
 * The allocator makes its device's primary context current on every call; the
 * program's own context is put back afterwards, since a program may have made
 * another one current. */
#include "config.h"

#include <stdatomic.h>

#include "caching.h"
#include "cu.h"
#include "interpose.h"
#include "memtrace_alloc.h"
#include "mtx/util.h"

#define MAX_DEVICES 64 /* as libtrace/torch.c */

static struct memtrace_allocator *_Atomic alloc_of[MAX_DEVICES];
static _Atomic int ndevices; /* 1 + the highest device with an allocator */
static MTX_TLS int t_inside;  /* this thread is in the allocator */

static struct memtrace_allocator *allocator(int dev)
{
    struct memtrace_allocator *a = atomic_load_explicit(&alloc_of[dev], memory_order_acquire);
    if (a == NULL && (a = memtrace_torch_allocator(dev)) != NULL) {
        atomic_store_explicit(&alloc_of[dev], a, memory_order_release);
        int n = atomic_load(&ndevices);
        while (n < dev + 1 && !atomic_compare_exchange_weak(&ndevices, &n, dev + 1))
            ;
    }
    return a;
}

int mt_caching_alloc(uint64_t *addr, size_t size, uint64_t stream)
{
    if (size == 0 || t_inside)
        return MT_CACHING_PASS;
    int dev = mt_cu_current_device();
    if (dev < 0 || dev >= MAX_DEVICES)
        return MT_CACHING_PASS;
    int rc = MT_CACHING_PASS;
    void *ctx = mt_cu_ctx_get();
    t_inside = 1;
    struct memtrace_allocator *a = allocator(dev);
    if (a != NULL) {
        int r = memtrace_alloc_malloc_on(a, size, stream, addr);
        rc = r == 0 ? 0 : r == MEMTRACE_EOOM ? MT_CACHING_OOM : MT_CACHING_PASS;
    } else {
        /* The first allocation on a device creates its allocator. */
        void *p = memtrace_torch_malloc((ssize_t)size, dev, (void *)(uintptr_t)stream);
        if (p != NULL) {
            *addr = (uint64_t)(uintptr_t)p;
            rc = 0;
        }
        if (allocator(dev) != NULL && p == NULL)
            rc = MT_CACHING_OOM;
    }
    t_inside = 0;
    if (ctx != NULL)
        mt_cu_ctx_set(ctx);
    return rc;
}

int mt_caching_free(uint64_t addr, int sync, void *s)
{
    int n = atomic_load_explicit(&ndevices, memory_order_acquire);
    if (n == 0 || t_inside)
        return 0;
    for (int dev = 0; dev < n; dev++) {
        struct memtrace_allocator *a = atomic_load_explicit(&alloc_of[dev], memory_order_acquire);
        uint64_t size, requested;
        if (a == NULL || memtrace_alloc_block_info(a, addr, &size, &requested) != 0)
            continue;
        void *ctx = mt_cu_ctx_get();
        if (sync)
            mt_cu_stream_sync(s);
        t_inside = 1;
        int rc = memtrace_alloc_free(a, addr);
        t_inside = 0;
        if (ctx != NULL)
            mt_cu_ctx_set(ctx);
        /* Another thread freed it in between: the driver says what it says. */
        return rc == 0;
    }
    return 0;
}
