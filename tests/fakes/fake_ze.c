/* fake_ze.c: a Level Zero driver on host memory, for tests.
 *
 * The real loader (libze_loader.so.1) loads it with ZE_ENABLE_ALT_DRIVERS=<path>. The
 * loader asks a driver for its dispatch tables through the exported
 * ze/zet/zes Get*ProcAddrTable functions and refuses a driver that lacks any of them;
 * this one exports them all, fills the ze tables it implements and leaves the others
 * as the loader gave them (zeroed), which the loader accepts.
 *
 * Memory comes from arenas at fixed addresses (fake_mem.h), apart from the fake CUDA
 * driver's so both can live in one process, and below where position-independent
 * executables and their heaps go (0x55..-0x56..): device d at 0x480000000000 + d * 1 TiB,
 * host at 0x4c0000000000, shared at 0x4d0000000000, virtual reservations (64 KiB pages)
 * at 0x4e0000000000. Device and shared allocations with a device count against that
 * device's capacity; zePhysicalMemCreate makes a memfd that zeVirtualMemMap maps.
 *
 * Sysman (zes) memory: with ZES_ENABLE_SYSMAN=1 at zeInit, as a real driver wants,
 * each device (its core handle) has one device-local memory module whose state is
 * the device's capacity and capacity - used; without it zes calls answer
 * ZE_RESULT_ERROR_UNINITIALIZED.
 *
 * Command lists record copies, fills, barriers and event signals; executing them on a
 * queue (or appending to an immediate list) runs them at once, so queues are always
 * idle and events are signalled when the call that signals them returns.
 *
 * Environment: FAKE_ZE_MEMORY (bytes per device, K/M/G suffix, default 16 GiB),
 * FAKE_ZE_DEVICES (1..4, default 1). fake_ze_calls("zeMemAllocDevice") counts calls.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>

#include "fake_mem.h"

#define EXPORT __attribute__((visibility("default")))

#define FZ_MAX_DEVICES   4
#define FZ_ALIGN         512ULL
#define FZ_PAGE          (64ULL << 10)
#define FZ_DEVICE_BASE   0x480000000000ULL
#define FZ_DEVICE_STRIDE (1ULL << 40)
#define FZ_HOST_BASE     0x4c0000000000ULL
#define FZ_SHARED_BASE   0x4d0000000000ULL
#define FZ_ARENA_SIZE    (256ULL << 30)
#define FZ_VA_BASE       0x4e0000000000ULL
#define FZ_VA_SIZE       (4ULL << 40)

/* clang-format off */
#define FZ_SYMBOLS(X) \
    X(zeInit) \
    X(zeMemAllocDevice) \
    X(zeMemAllocHost) \
    X(zeMemAllocShared) \
    X(zeMemFree) \
    X(zeMemFreeExt) \
    X(zeVirtualMemReserve) \
    X(zeVirtualMemFree) \
    X(zeVirtualMemMap) \
    X(zeVirtualMemUnmap) \
    X(zePhysicalMemCreate) \
    X(zePhysicalMemDestroy)
/* clang-format on */

#define FZ_ENUM(name) FZ_##name,
#define FZ_NAME(name) #name,
enum { FZ_SYMBOLS(FZ_ENUM) FZ_NSYMBOLS };
static const char *const fz_names[FZ_NSYMBOLS] = {FZ_SYMBOLS(FZ_NAME)};
static _Atomic unsigned long long fz_calls[FZ_NSYMBOLS];
#define HIT(name) atomic_fetch_add_explicit(&fz_calls[FZ_##name], 1, memory_order_relaxed)

/* Calls of the driver function `name` so far; -1 for a name not counted. */
EXPORT long long fake_ze_calls(const char *name);
EXPORT long long fake_ze_calls(const char *name)
{
    for (int i = 0; i < FZ_NSYMBOLS; i++)
        if (strcmp(fz_names[i], name) == 0)
            return (long long)atomic_load(&fz_calls[i]);
    return -1;
}

enum { FZK_DEVICE = 1, FZK_HOST, FZK_SHARED, FZK_RESERVE, FZK_MAPPING };

#define FZ_MAGIC_CTX   0x5a435458u
#define FZ_MAGIC_PHYS  0x5a504859u
#define FZ_MAGIC_QUEUE 0x5a515545u
#define FZ_MAGIC_LIST  0x5a4c5354u
#define FZ_MAGIC_POOL  0x5a504f4fu
#define FZ_MAGIC_EVENT 0x5a45564eu

struct _ze_driver_handle_t {
    int unused;
};

struct _ze_device_handle_t {
    int index;
    struct fake_arena arena;
    uint64_t capacity, used;
};

struct _ze_context_handle_t {
    unsigned magic;
};

struct _ze_physical_mem_handle_t {
    unsigned magic;
    int dev;
    int fd;
    int destroyed;
    uint64_t size;
    unsigned maps;
};

struct _ze_event_handle_t {
    unsigned magic;
    int signalled;
};

struct _ze_event_pool_handle_t {
    unsigned magic;
    uint32_t count;
};

enum { OP_COPY, OP_FILL, OP_SIGNAL, OP_RESET };

struct fz_op {
    int kind;
    void *dst;
    const void *src;
    size_t size;
    unsigned char pattern[128];
    size_t pattern_size;
    ze_event_handle_t event;
};

struct _ze_command_list_handle_t {
    unsigned magic;
    int immediate;
    int closed;
    struct fz_op *ops;
    size_t nops, capops;
};

struct _ze_command_queue_handle_t {
    unsigned magic;
};

static pthread_mutex_t fz_lock = PTHREAD_MUTEX_INITIALIZER;
static int fz_initialized;
static uint32_t fz_ndevices;
static struct _ze_driver_handle_t fz_driver;
static struct _ze_device_handle_t fz_devices[FZ_MAX_DEVICES];
static struct fake_arena fz_host, fz_shared, fz_va;
static struct fake_table fz_allocs, fz_reserves, fz_maps;
static uint64_t fz_next_id = 1;
static int fz_sysman;

__attribute__((destructor)) static void fz_fini(void)
{
    fake_table_fini(&fz_allocs);
    fake_table_fini(&fz_reserves);
    fake_table_fini(&fz_maps);
    for (int d = 0; d < FZ_MAX_DEVICES; d++)
        fake_arena_fini(&fz_devices[d].arena);
    fake_arena_fini(&fz_host);
    fake_arena_fini(&fz_shared);
    fake_arena_fini(&fz_va);
}

static uint64_t env_bytes(const char *name, uint64_t def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'k' || *end == 'K')
        v <<= 10;
    else if (*end == 'm' || *end == 'M')
        v <<= 20;
    else if (*end == 'g' || *end == 'G')
        v <<= 30;
    return v;
}

static ze_result_t setup_locked(void)
{
    uint64_t capacity = env_bytes("FAKE_ZE_MEMORY", 16ULL << 30);
    uint64_t n = env_bytes("FAKE_ZE_DEVICES", 1);
    if (n < 1 || n > FZ_MAX_DEVICES || capacity > (FZ_DEVICE_STRIDE >> 2))
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    uint64_t span = fake_align_up(capacity * 2 + (64ULL << 20), FZ_PAGE);
    for (uint32_t d = 0; d < n; d++) {
        struct _ze_device_handle_t *dv = &fz_devices[d];
        dv->index = (int)d;
        dv->capacity = capacity;
        if (fake_arena_map(&dv->arena, FZ_DEVICE_BASE + d * FZ_DEVICE_STRIDE, span,
                           PROT_READ | PROT_WRITE) != 0)
            return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (fake_arena_map(&fz_host, FZ_HOST_BASE, FZ_ARENA_SIZE, PROT_READ | PROT_WRITE) != 0 ||
        fake_arena_map(&fz_shared, FZ_SHARED_BASE, FZ_ARENA_SIZE, PROT_READ | PROT_WRITE) != 0 ||
        fake_arena_map(&fz_va, FZ_VA_BASE, FZ_VA_SIZE, PROT_NONE) != 0)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    fz_ndevices = (uint32_t)n;
    /* As a real driver: sysman answers only when enabled before zeInit. */
    const char *sysman = getenv("ZES_ENABLE_SYSMAN");
    fz_sysman = sysman != NULL && strcmp(sysman, "1") == 0;
    return ZE_RESULT_SUCCESS;
}

/* Where an arena starts: "device0".."device3", "host", "shared" or "va"; 0 before
 * zeInit or for another name. Fixed, except under ThreadSanitizer (fake_mem.c). */
EXPORT unsigned long long fake_ze_base(const char *arena);
EXPORT unsigned long long fake_ze_base(const char *arena)
{
    if (strncmp(arena, "device", 6) == 0 && arena[6] >= '0' && arena[6] < '0' + FZ_MAX_DEVICES &&
        arena[7] == '\0')
        return fz_devices[arena[6] - '0'].arena.base;
    if (strcmp(arena, "host") == 0)
        return fz_host.base;
    if (strcmp(arena, "shared") == 0)
        return fz_shared.base;
    if (strcmp(arena, "va") == 0)
        return fz_va.base;
    return 0;
}

static ze_result_t fz_Init(ze_init_flags_t flags)
{
    HIT(zeInit);
    pthread_mutex_lock(&fz_lock);
    ze_result_t rc = ZE_RESULT_SUCCESS;
    if (!fz_initialized) {
        rc = setup_locked();
        fz_initialized = rc == ZE_RESULT_SUCCESS;
    }
    pthread_mutex_unlock(&fz_lock);
    return rc;
}

static int ready(void)
{
    pthread_mutex_lock(&fz_lock);
    int r = fz_initialized;
    pthread_mutex_unlock(&fz_lock);
    return r;
}

static int valid_device(ze_device_handle_t d)
{
    return d && d >= fz_devices && d < fz_devices + fz_ndevices;
}

static int valid_context(ze_context_handle_t c)
{
    return c && c->magic == FZ_MAGIC_CTX;
}

/* Hands out handles in the caller's count/array convention. */
static ze_result_t list_handles(uint32_t *count, void **out, void *base, size_t stride,
                                uint32_t have)
{
    if (!count)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (*count == 0 || !out) {
        *count = have;
        return ZE_RESULT_SUCCESS;
    }
    if (*count > have)
        *count = have;
    for (uint32_t i = 0; i < *count; i++)
        out[i] = (char *)base + i * stride;
    return ZE_RESULT_SUCCESS;
}

/* ---- driver and devices ----------------------------------------------------------- */

static ze_result_t fz_DriverGet(uint32_t *count, ze_driver_handle_t *drivers)
{
    if (!ready())
        return ZE_RESULT_ERROR_UNINITIALIZED;
    return list_handles(count, (void **)drivers, &fz_driver, 0, 1);
}

static ze_result_t fz_DriverGetApiVersion(ze_driver_handle_t drv, ze_api_version_t *v)
{
    if (drv != &fz_driver)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!v)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    *v = ZE_API_VERSION_CURRENT;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_DriverGetProperties(ze_driver_handle_t drv, ze_driver_properties_t *p)
{
    if (drv != &fz_driver)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!p)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    memset(p->uuid.id, 0, sizeof p->uuid.id);
    memcpy(p->uuid.id, "memtrace-fake-ze", 16);
    p->driverVersion = 1;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_DriverGetExtensionProperties(ze_driver_handle_t drv, uint32_t *count,
                                                   ze_driver_extension_properties_t *props)
{
    if (drv != &fz_driver)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!count)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    *count = 0;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_DeviceGet(ze_driver_handle_t drv, uint32_t *count,
                                ze_device_handle_t *devices)
{
    if (drv != &fz_driver)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    return list_handles(count, (void **)devices, fz_devices, sizeof fz_devices[0], fz_ndevices);
}

static ze_result_t fz_DeviceGetSubDevices(ze_device_handle_t dev, uint32_t *count,
                                          ze_device_handle_t *subs)
{
    if (!valid_device(dev))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!count)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    *count = 0;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_DeviceGetProperties(ze_device_handle_t dev, ze_device_properties_t *p)
{
    if (!valid_device(dev))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!p)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    p->type = ZE_DEVICE_TYPE_GPU;
    p->vendorId = 0;
    p->deviceId = 0xfa4e;
    p->flags = 0;
    p->subdeviceId = 0;
    p->coreClockRate = 1000;
    p->maxMemAllocSize = dev->capacity;
    p->maxHardwareContexts = 64;
    p->maxCommandQueuePriority = 0;
    p->numThreadsPerEU = 8;
    p->physicalEUSimdWidth = 8;
    p->numEUsPerSubslice = 8;
    p->numSubslicesPerSlice = 4;
    p->numSlices = 1;
    p->timerResolution = 1;
    p->timestampValidBits = 64;
    p->kernelTimestampValidBits = 64;
    memset(p->uuid.id, 0, sizeof p->uuid.id);
    p->uuid.id[0] = (uint8_t)(dev->index + 1);
    snprintf(p->name, sizeof p->name, "memtrace fake Level Zero GPU %d", dev->index);
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_DeviceGetMemoryProperties(ze_device_handle_t dev, uint32_t *count,
                                                ze_device_memory_properties_t *p)
{
    if (!valid_device(dev))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!count)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (*count == 0 || !p) {
        *count = 1;
        return ZE_RESULT_SUCCESS;
    }
    *count = 1;
    p->flags = 0;
    p->maxClockRate = 1000;
    p->maxBusWidth = 64;
    p->totalSize = dev->capacity;
    snprintf(p->name, sizeof p->name, "fake device memory");
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_DeviceGetCommandQueueGroupProperties(ze_device_handle_t dev, uint32_t *count,
                                                           ze_command_queue_group_properties_t *p)
{
    if (!valid_device(dev))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!count)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (*count == 0 || !p) {
        *count = 1;
        return ZE_RESULT_SUCCESS;
    }
    *count = 1;
    p->flags =
        ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE | ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
    p->maxMemoryFillPatternSize = sizeof(((struct fz_op *)0)->pattern);
    p->numQueues = 1;
    return ZE_RESULT_SUCCESS;
}

/* ---- contexts ---------------------------------------------------------------------- */

static ze_result_t fz_ContextCreate(ze_driver_handle_t drv, const ze_context_desc_t *desc,
                                    ze_context_handle_t *out)
{
    if (drv != &fz_driver)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!desc || !out)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    ze_context_handle_t c = malloc(sizeof *c);
    if (!c)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    c->magic = FZ_MAGIC_CTX;
    *out = c;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_ContextDestroy(ze_context_handle_t c)
{
    if (!valid_context(c))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    c->magic = 0;
    free(c);
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_ContextGetStatus(ze_context_handle_t c)
{
    return valid_context(c) ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
}

/* ---- memory ------------------------------------------------------------------------ */

static ze_result_t mem_alloc(ze_context_handle_t c, int kind, size_t size, size_t alignment,
                             ze_device_handle_t dev, void **out)
{
    if (!valid_context(c))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (kind != FZK_HOST && dev && !valid_device(dev))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (kind == FZK_DEVICE && !dev)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!out)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (size == 0)
        return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    if (alignment & (alignment - 1))
        return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
    if (kind == FZK_HOST)
        dev = NULL;
    struct fake_arena *a = kind == FZK_DEVICE ? &dev->arena
                           : kind == FZK_HOST ? &fz_host
                                              : &fz_shared;
    uint64_t align = alignment > FZ_ALIGN ? alignment : FZ_ALIGN;
    uint64_t span = fake_align_up(size, FZ_ALIGN);
    ze_result_t rc = ZE_RESULT_SUCCESS;
    pthread_mutex_lock(&fz_lock);
    if (dev && size > dev->capacity - dev->used) {
        rc = ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
        goto out;
    }
    uint64_t addr = fake_arena_alloc(a, span, align);
    if (!addr) {
        rc = dev ? ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        goto out;
    }
    struct fake_obj o = {
        addr, size, span, kind, dev ? dev->index : -1, (void *)(uintptr_t)fz_next_id};
    if (fake_obj_put(&fz_allocs, &o) != 0) {
        fake_arena_free(a, addr, span);
        rc = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        goto out;
    }
    fz_next_id++;
    if (dev)
        dev->used += size;
    *out = (void *)(uintptr_t)addr;
out:
    pthread_mutex_unlock(&fz_lock);
    return rc;
}

static ze_result_t fz_MemAllocDevice(ze_context_handle_t c, const ze_device_mem_alloc_desc_t *d,
                                     size_t size, size_t alignment, ze_device_handle_t dev,
                                     void **out)
{
    HIT(zeMemAllocDevice);
    if (!d)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    return mem_alloc(c, FZK_DEVICE, size, alignment, dev, out);
}

static ze_result_t fz_MemAllocHost(ze_context_handle_t c, const ze_host_mem_alloc_desc_t *d,
                                   size_t size, size_t alignment, void **out)
{
    HIT(zeMemAllocHost);
    if (!d)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    return mem_alloc(c, FZK_HOST, size, alignment, NULL, out);
}

static ze_result_t fz_MemAllocShared(ze_context_handle_t c, const ze_device_mem_alloc_desc_t *d,
                                     const ze_host_mem_alloc_desc_t *h, size_t size,
                                     size_t alignment, ze_device_handle_t dev, void **out)
{
    HIT(zeMemAllocShared);
    if (!d || !h)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    return mem_alloc(c, FZK_SHARED, size, alignment, dev, out);
}

static ze_result_t mem_free(ze_context_handle_t c, void *ptr)
{
    if (!valid_context(c))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!ptr)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    pthread_mutex_lock(&fz_lock);
    struct fake_obj *o = fake_obj_find(&fz_allocs, (uint64_t)(uintptr_t)ptr);
    ze_result_t rc = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (o) {
        struct _ze_device_handle_t *dev = o->dev >= 0 ? &fz_devices[o->dev] : NULL;
        struct fake_arena *a = o->kind == FZK_DEVICE ? &dev->arena
                               : o->kind == FZK_HOST ? &fz_host
                                                     : &fz_shared;
        if (dev)
            dev->used -= o->size;
        fake_arena_free(a, o->addr, o->span);
        fake_obj_del(&fz_allocs, o);
        rc = ZE_RESULT_SUCCESS;
    }
    pthread_mutex_unlock(&fz_lock);
    return rc;
}

static ze_result_t fz_MemFree(ze_context_handle_t c, void *ptr)
{
    HIT(zeMemFree);
    return mem_free(c, ptr);
}

/* Nothing is ever in flight, so either free policy frees at once. */
static ze_result_t fz_MemFreeExt(ze_context_handle_t c, const ze_memory_free_ext_desc_t *d,
                                 void *ptr)
{
    HIT(zeMemFreeExt);
    if (!d)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    return mem_free(c, ptr);
}

/* The allocation holding ptr: exact starts are hashed, interior pointers scanned. */
static struct fake_obj *find_holding_locked(uint64_t ptr)
{
    struct fake_obj *o = fake_obj_find(&fz_allocs, ptr);
    for (size_t i = 0; !o && i < fz_allocs.cap; i++) {
        struct fake_obj *s = &fz_allocs.slots[i];
        if (s->addr && s->addr <= ptr && ptr < s->addr + s->size)
            o = s;
    }
    return o;
}

static ze_result_t fz_MemGetAllocProperties(ze_context_handle_t c, const void *ptr,
                                            ze_memory_allocation_properties_t *p,
                                            ze_device_handle_t *pdev)
{
    if (!valid_context(c))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!ptr || !p)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    pthread_mutex_lock(&fz_lock);
    struct fake_obj *o = find_holding_locked((uint64_t)(uintptr_t)ptr);
    struct fake_obj copy = o ? *o : (struct fake_obj){0};
    pthread_mutex_unlock(&fz_lock);
    p->type = !o                        ? ZE_MEMORY_TYPE_UNKNOWN
              : copy.kind == FZK_HOST   ? ZE_MEMORY_TYPE_HOST
              : copy.kind == FZK_DEVICE ? ZE_MEMORY_TYPE_DEVICE
                                        : ZE_MEMORY_TYPE_SHARED;
    p->id = (uint64_t)(uintptr_t)copy.aux;
    p->pageSize = o ? 4096 : 0;
    if (pdev)
        *pdev = o && copy.dev >= 0 ? &fz_devices[copy.dev] : NULL;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_MemGetAddressRange(ze_context_handle_t c, const void *ptr, void **base,
                                         size_t *size)
{
    if (!valid_context(c))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    pthread_mutex_lock(&fz_lock);
    struct fake_obj *o = find_holding_locked((uint64_t)(uintptr_t)ptr);
    struct fake_obj copy = o ? *o : (struct fake_obj){0};
    pthread_mutex_unlock(&fz_lock);
    if (!o)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (base)
        *base = (void *)(uintptr_t)copy.addr;
    if (size)
        *size = copy.size;
    return ZE_RESULT_SUCCESS;
}

/* ---- virtual and physical memory ----------------------------------------------------- */

static ze_result_t fz_VirtualMemQueryPageSize(ze_context_handle_t c, ze_device_handle_t dev,
                                              size_t size, size_t *page)
{
    if (!valid_context(c) || !valid_device(dev))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!page)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    *page = size >= (2ULL << 20) ? (2ULL << 20) : FZ_PAGE;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_VirtualMemReserve(ze_context_handle_t c, const void *start, size_t size,
                                        void **out)
{
    HIT(zeVirtualMemReserve);
    if (!valid_context(c))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!out)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (size == 0 || size % FZ_PAGE || (uintptr_t)start % FZ_PAGE)
        return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    pthread_mutex_lock(&fz_lock);
    uint64_t at = start ? fake_arena_alloc_at(&fz_va, (uint64_t)(uintptr_t)start, size) : 0;
    if (!at) /* the start is a hint */
        at = fake_arena_alloc(&fz_va, size, FZ_PAGE);
    ze_result_t rc = ZE_RESULT_SUCCESS;
    struct fake_obj o = {at, size, size, FZK_RESERVE, -1, NULL};
    if (!at) {
        rc = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    } else if (fake_obj_put(&fz_reserves, &o) != 0) {
        fake_arena_free(&fz_va, at, size);
        rc = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    } else {
        *out = (void *)(uintptr_t)at;
    }
    pthread_mutex_unlock(&fz_lock);
    return rc;
}

static int mapped_locked(uint64_t ptr, uint64_t size)
{
    for (size_t i = 0; i < fz_maps.cap; i++) {
        struct fake_obj *o = &fz_maps.slots[i];
        if (o->addr && o->addr < ptr + size && ptr < o->addr + o->size)
            return 1;
    }
    return 0;
}

static int reserved_locked(uint64_t ptr, uint64_t size)
{
    for (size_t i = 0; i < fz_reserves.cap; i++) {
        struct fake_obj *o = &fz_reserves.slots[i];
        if (o->addr && o->addr <= ptr && ptr + size <= o->addr + o->size)
            return 1;
    }
    return 0;
}

static void remap_none(uint64_t addr, uint64_t size)
{
    mmap((void *)(uintptr_t)addr, size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

static ze_result_t fz_VirtualMemFree(ze_context_handle_t c, const void *ptr, size_t size)
{
    HIT(zeVirtualMemFree);
    if (!valid_context(c))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    uint64_t at = (uint64_t)(uintptr_t)ptr;
    pthread_mutex_lock(&fz_lock);
    struct fake_obj *o = fake_obj_find(&fz_reserves, at);
    ze_result_t rc = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (o && o->size == size && !mapped_locked(at, size)) {
        remap_none(at, size);
        fake_arena_free(&fz_va, at, size);
        fake_obj_del(&fz_reserves, o);
        rc = ZE_RESULT_SUCCESS;
    }
    pthread_mutex_unlock(&fz_lock);
    return rc;
}

static ze_result_t fz_PhysicalMemCreate(ze_context_handle_t c, ze_device_handle_t dev,
                                        ze_physical_mem_desc_t *desc, ze_physical_mem_handle_t *out)
{
    HIT(zePhysicalMemCreate);
    if (!valid_context(c) || !valid_device(dev))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!desc || !out)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (desc->size == 0 || desc->size % FZ_PAGE)
        return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    ze_physical_mem_handle_t ph = calloc(1, sizeof *ph);
    if (!ph)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    ze_result_t rc = ZE_RESULT_SUCCESS;
    pthread_mutex_lock(&fz_lock);
    if (desc->size > dev->capacity - dev->used) {
        rc = ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
        goto out;
    }
    ph->fd = memfd_create("fake_ze", MFD_CLOEXEC);
    if (ph->fd < 0 || ftruncate(ph->fd, (off_t)desc->size) != 0) {
        if (ph->fd >= 0)
            close(ph->fd);
        rc = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        goto out;
    }
    ph->magic = FZ_MAGIC_PHYS;
    ph->dev = dev->index;
    ph->size = desc->size;
    dev->used += desc->size;
    *out = ph;
out:
    pthread_mutex_unlock(&fz_lock);
    if (rc != ZE_RESULT_SUCCESS)
        free(ph);
    return rc;
}

static void phys_put_locked(ze_physical_mem_handle_t ph)
{
    if (!ph->destroyed || ph->maps)
        return;
    fz_devices[ph->dev].used -= ph->size;
    close(ph->fd);
    ph->magic = 0;
    free(ph);
}

static ze_result_t fz_PhysicalMemDestroy(ze_context_handle_t c, ze_physical_mem_handle_t ph)
{
    HIT(zePhysicalMemDestroy);
    if (!valid_context(c) || !ph || ph->magic != FZ_MAGIC_PHYS || ph->destroyed)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    pthread_mutex_lock(&fz_lock);
    ph->destroyed = 1;
    phys_put_locked(ph); /* pages stay while mapped */
    pthread_mutex_unlock(&fz_lock);
    return ZE_RESULT_SUCCESS;
}

static int access_prot(ze_memory_access_attribute_t access, int *prot)
{
    switch (access) {
    case ZE_MEMORY_ACCESS_ATTRIBUTE_NONE:
        *prot = PROT_NONE;
        return 0;
    case ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE:
        *prot = PROT_READ | PROT_WRITE;
        return 0;
    case ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY:
        *prot = PROT_READ;
        return 0;
    default:
        return -1;
    }
}

static ze_result_t fz_VirtualMemMap(ze_context_handle_t c, const void *ptr, size_t size,
                                    ze_physical_mem_handle_t ph, size_t offset,
                                    ze_memory_access_attribute_t access)
{
    HIT(zeVirtualMemMap);
    int prot;
    uint64_t at = (uint64_t)(uintptr_t)ptr;
    if (!valid_context(c) || !ph || ph->magic != FZ_MAGIC_PHYS)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (access_prot(access, &prot) != 0)
        return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    if (size == 0 || size % FZ_PAGE || at % FZ_PAGE || offset % FZ_PAGE || offset + size > ph->size)
        return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    pthread_mutex_lock(&fz_lock);
    ze_result_t rc = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    struct fake_obj o = {at, size, size, FZK_MAPPING, ph->dev, ph};
    if (!reserved_locked(at, size) || mapped_locked(at, size))
        goto out;
    if (mmap((void *)(uintptr_t)at, size, prot, MAP_SHARED | MAP_FIXED, ph->fd, (off_t)offset) ==
        MAP_FAILED) {
        rc = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        goto out;
    }
    if (fake_obj_put(&fz_maps, &o) != 0) {
        remap_none(at, size);
        rc = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        goto out;
    }
    ph->maps++;
    rc = ZE_RESULT_SUCCESS;
out:
    pthread_mutex_unlock(&fz_lock);
    return rc;
}

static ze_result_t fz_VirtualMemUnmap(ze_context_handle_t c, const void *ptr, size_t size)
{
    HIT(zeVirtualMemUnmap);
    if (!valid_context(c))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    uint64_t start = (uint64_t)(uintptr_t)ptr, end = start + size, at;
    pthread_mutex_lock(&fz_lock);
    ze_result_t rc = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    for (at = start; at < end;) {
        struct fake_obj *o = fake_obj_find(&fz_maps, at);
        if (!o)
            goto out;
        at += o->size;
    }
    if (at != end || size == 0)
        goto out;
    for (at = start; at < end;) {
        struct fake_obj *o = fake_obj_find(&fz_maps, at);
        ze_physical_mem_handle_t ph = o->aux;
        at += o->size;
        fake_obj_del(&fz_maps, o);
        ph->maps--;
        phys_put_locked(ph);
    }
    remap_none(start, size);
    rc = ZE_RESULT_SUCCESS;
out:
    pthread_mutex_unlock(&fz_lock);
    return rc;
}

static ze_result_t fz_VirtualMemSetAccessAttribute(ze_context_handle_t c, const void *ptr,
                                                   size_t size, ze_memory_access_attribute_t access)
{
    int prot;
    if (!valid_context(c))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (access_prot(access, &prot) != 0)
        return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    pthread_mutex_lock(&fz_lock);
    int okay = reserved_locked((uint64_t)(uintptr_t)ptr, size);
    pthread_mutex_unlock(&fz_lock);
    if (!okay || mprotect((void *)(uintptr_t)ptr, size, prot) != 0)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    return ZE_RESULT_SUCCESS;
}

/* ---- events ---------------------------------------------------------------------------- */

static ze_result_t fz_EventPoolCreate(ze_context_handle_t c, const ze_event_pool_desc_t *desc,
                                      uint32_t ndev, ze_device_handle_t *devs,
                                      ze_event_pool_handle_t *out)
{
    if (!valid_context(c))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!desc || !out || (ndev && !devs))
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (desc->count == 0)
        return ZE_RESULT_ERROR_INVALID_SIZE;
    ze_event_pool_handle_t p = malloc(sizeof *p);
    if (!p)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    p->magic = FZ_MAGIC_POOL;
    p->count = desc->count;
    *out = p;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_EventPoolDestroy(ze_event_pool_handle_t p)
{
    if (!p || p->magic != FZ_MAGIC_POOL)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    p->magic = 0;
    free(p);
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_EventCreate(ze_event_pool_handle_t p, const ze_event_desc_t *desc,
                                  ze_event_handle_t *out)
{
    if (!p || p->magic != FZ_MAGIC_POOL)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!desc || !out)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (desc->index >= p->count)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    ze_event_handle_t e = malloc(sizeof *e);
    if (!e)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    e->magic = FZ_MAGIC_EVENT;
    e->signalled = 0;
    *out = e;
    return ZE_RESULT_SUCCESS;
}

static int valid_event(ze_event_handle_t e)
{
    return e && e->magic == FZ_MAGIC_EVENT;
}

static ze_result_t fz_EventDestroy(ze_event_handle_t e)
{
    if (!valid_event(e))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    e->magic = 0;
    free(e);
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_EventHostSignal(ze_event_handle_t e)
{
    if (!valid_event(e))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    atomic_store((_Atomic int *)&e->signalled, 1);
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_EventHostReset(ze_event_handle_t e)
{
    if (!valid_event(e))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    atomic_store((_Atomic int *)&e->signalled, 0);
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_EventQueryStatus(ze_event_handle_t e)
{
    if (!valid_event(e))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    return atomic_load((_Atomic int *)&e->signalled) ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}

/* Only another host thread could signal an event the device has not: wait for that up
 * to the timeout, polling. */
static ze_result_t fz_EventHostSynchronize(ze_event_handle_t e, uint64_t timeout_ns)
{
    if (!valid_event(e))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    for (uint64_t waited = 0;; waited += 100000) {
        if (atomic_load((_Atomic int *)&e->signalled))
            return ZE_RESULT_SUCCESS;
        if (waited >= timeout_ns)
            return ZE_RESULT_NOT_READY;
        usleep(100);
    }
}

/* ---- command lists and queues ---------------------------------------------------------- */

static void run_op(const struct fz_op *op)
{
    switch (op->kind) {
    case OP_COPY:
        memmove(op->dst, op->src, op->size);
        break;
    case OP_FILL:
        for (size_t i = 0; i < op->size; i += op->pattern_size) {
            size_t n = op->size - i < op->pattern_size ? op->size - i : op->pattern_size;
            memcpy((char *)op->dst + i, op->pattern, n);
        }
        break;
    case OP_SIGNAL:
        atomic_store((_Atomic int *)&op->event->signalled, 1);
        break;
    case OP_RESET:
        atomic_store((_Atomic int *)&op->event->signalled, 0);
        break;
    }
}

static ze_result_t list_push(ze_command_list_handle_t l, const struct fz_op *op)
{
    if (l->immediate) {
        run_op(op);
        return ZE_RESULT_SUCCESS;
    }
    if (l->closed)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (l->nops == l->capops) {
        size_t cap = l->capops ? l->capops * 2 : 16;
        struct fz_op *ops = realloc(l->ops, cap * sizeof *ops);
        if (!ops)
            return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        l->ops = ops;
        l->capops = cap;
    }
    l->ops[l->nops++] = *op;
    return ZE_RESULT_SUCCESS;
}

static int valid_list(ze_command_list_handle_t l)
{
    return l && l->magic == FZ_MAGIC_LIST;
}

/* Waits need nothing (all earlier work is done); a signal event is signalled after. */
static ze_result_t push_with_signal(ze_command_list_handle_t l, const struct fz_op *op,
                                    ze_event_handle_t signal, uint32_t nwait,
                                    ze_event_handle_t *waits)
{
    if (!valid_list(l))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if ((nwait && !waits) || (signal && !valid_event(signal)))
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    ze_result_t rc = op ? list_push(l, op) : ZE_RESULT_SUCCESS;
    if (rc == ZE_RESULT_SUCCESS && signal) {
        struct fz_op s = {.kind = OP_SIGNAL, .event = signal};
        rc = list_push(l, &s);
    }
    return rc;
}

static ze_result_t list_create(ze_context_handle_t c, ze_device_handle_t dev, int immediate,
                               ze_command_list_handle_t *out)
{
    if (!valid_context(c) || !valid_device(dev))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!out)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    ze_command_list_handle_t l = calloc(1, sizeof *l);
    if (!l)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    l->magic = FZ_MAGIC_LIST;
    l->immediate = immediate;
    *out = l;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_CommandListCreate(ze_context_handle_t c, ze_device_handle_t dev,
                                        const ze_command_list_desc_t *desc,
                                        ze_command_list_handle_t *out)
{
    if (!desc)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    return list_create(c, dev, 0, out);
}

static ze_result_t fz_CommandListCreateImmediate(ze_context_handle_t c, ze_device_handle_t dev,
                                                 const ze_command_queue_desc_t *desc,
                                                 ze_command_list_handle_t *out)
{
    if (!desc)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    return list_create(c, dev, 1, out);
}

static ze_result_t fz_CommandListClose(ze_command_list_handle_t l)
{
    if (!valid_list(l))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    l->closed = 1;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_CommandListReset(ze_command_list_handle_t l)
{
    if (!valid_list(l))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    l->closed = 0;
    l->nops = 0;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_CommandListDestroy(ze_command_list_handle_t l)
{
    if (!valid_list(l))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    l->magic = 0;
    free(l->ops);
    free(l);
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_CommandListAppendBarrier(ze_command_list_handle_t l, ze_event_handle_t signal,
                                               uint32_t nwait, ze_event_handle_t *waits)
{
    return push_with_signal(l, NULL, signal, nwait, waits);
}

static ze_result_t fz_CommandListAppendSignalEvent(ze_command_list_handle_t l, ze_event_handle_t e)
{
    if (!valid_event(e))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    return push_with_signal(l, NULL, e, 0, NULL);
}

static ze_result_t fz_CommandListAppendEventReset(ze_command_list_handle_t l, ze_event_handle_t e)
{
    if (!valid_list(l) || !valid_event(e))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    struct fz_op op = {.kind = OP_RESET, .event = e};
    return list_push(l, &op);
}

static ze_result_t fz_CommandListAppendWaitOnEvents(ze_command_list_handle_t l, uint32_t n,
                                                    ze_event_handle_t *events)
{
    return push_with_signal(l, NULL, NULL, n, events);
}

static ze_result_t fz_CommandListAppendMemoryCopy(ze_command_list_handle_t l, void *dst,
                                                  const void *src, size_t size,
                                                  ze_event_handle_t signal, uint32_t nwait,
                                                  ze_event_handle_t *waits)
{
    if ((!dst || !src) && size)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    struct fz_op op = {.kind = OP_COPY, .dst = dst, .src = src, .size = size};
    return push_with_signal(l, &op, signal, nwait, waits);
}

static ze_result_t fz_CommandListAppendMemoryFill(ze_command_list_handle_t l, void *ptr,
                                                  const void *pattern, size_t pattern_size,
                                                  size_t size, ze_event_handle_t signal,
                                                  uint32_t nwait, ze_event_handle_t *waits)
{
    struct fz_op op = {.kind = OP_FILL, .dst = ptr, .size = size, .pattern_size = pattern_size};
    if (!ptr || !pattern)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (pattern_size == 0 || pattern_size > sizeof op.pattern ||
        (pattern_size & (pattern_size - 1)))
        return ZE_RESULT_ERROR_INVALID_SIZE;
    memcpy(op.pattern, pattern, pattern_size);
    return push_with_signal(l, &op, signal, nwait, waits);
}

static ze_result_t fz_CommandQueueCreate(ze_context_handle_t c, ze_device_handle_t dev,
                                         const ze_command_queue_desc_t *desc,
                                         ze_command_queue_handle_t *out)
{
    if (!valid_context(c) || !valid_device(dev))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!desc || !out)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    ze_command_queue_handle_t q = malloc(sizeof *q);
    if (!q)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    q->magic = FZ_MAGIC_QUEUE;
    *out = q;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_CommandQueueDestroy(ze_command_queue_handle_t q)
{
    if (!q || q->magic != FZ_MAGIC_QUEUE)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    q->magic = 0;
    free(q);
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_CommandQueueExecuteCommandLists(ze_command_queue_handle_t q, uint32_t n,
                                                      ze_command_list_handle_t *lists,
                                                      ze_fence_handle_t fence)
{
    if (!q || q->magic != FZ_MAGIC_QUEUE)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (n == 0 || !lists)
        return ZE_RESULT_ERROR_INVALID_SIZE;
    for (uint32_t i = 0; i < n; i++)
        if (!valid_list(lists[i]) || !lists[i]->closed || lists[i]->immediate)
            return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    for (uint32_t i = 0; i < n; i++)
        for (size_t k = 0; k < lists[i]->nops; k++)
            run_op(&lists[i]->ops[k]);
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fz_CommandQueueSynchronize(ze_command_queue_handle_t q, uint64_t timeout)
{
    if (!q || q->magic != FZ_MAGIC_QUEUE)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    return ZE_RESULT_SUCCESS;
}

/* ---- sysman: one device-local memory module per device ------------------------------ */

/* Sysman takes the core device handles (ZES_ENABLE_SYSMAN=1); the module's state is
 * the device's own accounting, so it moves with every allocation and free. */
struct _zes_mem_handle_t {
    int dev;
};
static struct _zes_mem_handle_t fz_memmods[FZ_MAX_DEVICES];

static ze_result_t sysman_ready(void)
{
    pthread_mutex_lock(&fz_lock);
    ze_result_t rc =
        fz_initialized && fz_sysman ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_UNINITIALIZED;
    pthread_mutex_unlock(&fz_lock);
    return rc;
}

static ze_result_t fzs_DeviceEnumMemoryModules(zes_device_handle_t d, uint32_t *count,
                                               zes_mem_handle_t *out)
{
    ze_device_handle_t dev = (ze_device_handle_t)d;
    ze_result_t rc = sysman_ready();
    if (rc != ZE_RESULT_SUCCESS)
        return rc;
    if (!valid_device(dev))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (count == NULL)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (*count > 0 && out != NULL) {
        fz_memmods[dev->index].dev = dev->index;
        out[0] = &fz_memmods[dev->index];
    }
    *count = 1;
    return ZE_RESULT_SUCCESS;
}

static int valid_memmod(zes_mem_handle_t m)
{
    return m != NULL && m >= fz_memmods && m < fz_memmods + fz_ndevices;
}

static ze_result_t fzs_MemoryGetProperties(zes_mem_handle_t m, zes_mem_properties_t *p)
{
    ze_result_t rc = sysman_ready();
    if (rc != ZE_RESULT_SUCCESS)
        return rc;
    if (!valid_memmod(m))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (p == NULL)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    p->type = ZES_MEM_TYPE_HBM;
    p->onSubdevice = 0;
    p->subdeviceId = 0;
    p->location = ZES_MEM_LOC_DEVICE;
    p->physicalSize = fz_devices[m->dev].capacity;
    p->busWidth = -1;
    p->numChannels = -1;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t fzs_MemoryGetState(zes_mem_handle_t m, zes_mem_state_t *s)
{
    ze_result_t rc = sysman_ready();
    if (rc != ZE_RESULT_SUCCESS)
        return rc;
    if (!valid_memmod(m))
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (s == NULL)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    pthread_mutex_lock(&fz_lock);
    s->health = ZES_MEM_HEALTH_OK;
    s->size = fz_devices[m->dev].capacity;
    s->free = fz_devices[m->dev].capacity - fz_devices[m->dev].used;
    pthread_mutex_unlock(&fz_lock);
    return ZE_RESULT_SUCCESS;
}

/* ---- dispatch tables ------------------------------------------------------------------- */

static ze_result_t check_version(ze_api_version_t v, const void *table)
{
    if (!table)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (ZE_MAJOR_VERSION(v) != ZE_MAJOR_VERSION(ZE_API_VERSION_CURRENT))
        return ZE_RESULT_ERROR_UNSUPPORTED_VERSION;
    return ZE_RESULT_SUCCESS;
}

#define FILLED(fn, type, body)                                                                     \
    ZE_DLLEXPORT ze_result_t ZE_APICALL fn(ze_api_version_t v, type *t)                            \
    {                                                                                              \
        ze_result_t rc = check_version(v, t);                                                      \
        if (rc == ZE_RESULT_SUCCESS) {                                                             \
            body;                                                                                  \
        }                                                                                          \
        return rc;                                                                                 \
    }
#define EMPTY(fn, type) FILLED(fn, type, (void)0)

FILLED(zeGetGlobalProcAddrTable, ze_global_dditable_t, t->pfnInit = fz_Init)
FILLED(zeGetDriverProcAddrTable, ze_driver_dditable_t, {
    t->pfnGet = fz_DriverGet;
    t->pfnGetApiVersion = fz_DriverGetApiVersion;
    t->pfnGetProperties = fz_DriverGetProperties;
    t->pfnGetExtensionProperties = fz_DriverGetExtensionProperties;
})
FILLED(zeGetDeviceProcAddrTable, ze_device_dditable_t, {
    t->pfnGet = fz_DeviceGet;
    t->pfnGetSubDevices = fz_DeviceGetSubDevices;
    t->pfnGetProperties = fz_DeviceGetProperties;
    t->pfnGetMemoryProperties = fz_DeviceGetMemoryProperties;
    t->pfnGetCommandQueueGroupProperties = fz_DeviceGetCommandQueueGroupProperties;
})
FILLED(zeGetContextProcAddrTable, ze_context_dditable_t, {
    t->pfnCreate = fz_ContextCreate;
    t->pfnDestroy = fz_ContextDestroy;
    t->pfnGetStatus = fz_ContextGetStatus;
})
FILLED(zeGetCommandQueueProcAddrTable, ze_command_queue_dditable_t, {
    t->pfnCreate = fz_CommandQueueCreate;
    t->pfnDestroy = fz_CommandQueueDestroy;
    t->pfnExecuteCommandLists = fz_CommandQueueExecuteCommandLists;
    t->pfnSynchronize = fz_CommandQueueSynchronize;
})
FILLED(zeGetCommandListProcAddrTable, ze_command_list_dditable_t, {
    t->pfnCreate = fz_CommandListCreate;
    t->pfnCreateImmediate = fz_CommandListCreateImmediate;
    t->pfnDestroy = fz_CommandListDestroy;
    t->pfnClose = fz_CommandListClose;
    t->pfnReset = fz_CommandListReset;
    t->pfnAppendBarrier = fz_CommandListAppendBarrier;
    t->pfnAppendMemoryCopy = fz_CommandListAppendMemoryCopy;
    t->pfnAppendMemoryFill = fz_CommandListAppendMemoryFill;
    t->pfnAppendSignalEvent = fz_CommandListAppendSignalEvent;
    t->pfnAppendWaitOnEvents = fz_CommandListAppendWaitOnEvents;
    t->pfnAppendEventReset = fz_CommandListAppendEventReset;
})
FILLED(zeGetEventPoolProcAddrTable, ze_event_pool_dditable_t, {
    t->pfnCreate = fz_EventPoolCreate;
    t->pfnDestroy = fz_EventPoolDestroy;
})
FILLED(zeGetEventProcAddrTable, ze_event_dditable_t, {
    t->pfnCreate = fz_EventCreate;
    t->pfnDestroy = fz_EventDestroy;
    t->pfnHostSignal = fz_EventHostSignal;
    t->pfnHostSynchronize = fz_EventHostSynchronize;
    t->pfnQueryStatus = fz_EventQueryStatus;
    t->pfnHostReset = fz_EventHostReset;
})
FILLED(zeGetPhysicalMemProcAddrTable, ze_physical_mem_dditable_t, {
    t->pfnCreate = fz_PhysicalMemCreate;
    t->pfnDestroy = fz_PhysicalMemDestroy;
})
FILLED(zeGetMemProcAddrTable, ze_mem_dditable_t, {
    t->pfnAllocShared = fz_MemAllocShared;
    t->pfnAllocDevice = fz_MemAllocDevice;
    t->pfnAllocHost = fz_MemAllocHost;
    t->pfnFree = fz_MemFree;
    t->pfnGetAllocProperties = fz_MemGetAllocProperties;
    t->pfnGetAddressRange = fz_MemGetAddressRange;
    t->pfnFreeExt = fz_MemFreeExt;
})
FILLED(zeGetVirtualMemProcAddrTable, ze_virtual_mem_dditable_t, {
    t->pfnReserve = fz_VirtualMemReserve;
    t->pfnFree = fz_VirtualMemFree;
    t->pfnQueryPageSize = fz_VirtualMemQueryPageSize;
    t->pfnMap = fz_VirtualMemMap;
    t->pfnUnmap = fz_VirtualMemUnmap;
    t->pfnSetAccessAttribute = fz_VirtualMemSetAccessAttribute;
})
EMPTY(zeGetDeviceExpProcAddrTable, ze_device_exp_dditable_t)
EMPTY(zeGetImageProcAddrTable, ze_image_dditable_t)
EMPTY(zeGetImageExpProcAddrTable, ze_image_exp_dditable_t)
EMPTY(zeGetFenceProcAddrTable, ze_fence_dditable_t)
EMPTY(zeGetEventExpProcAddrTable, ze_event_exp_dditable_t)
EMPTY(zeGetModuleProcAddrTable, ze_module_dditable_t)
EMPTY(zeGetModuleBuildLogProcAddrTable, ze_module_build_log_dditable_t)
EMPTY(zeGetKernelProcAddrTable, ze_kernel_dditable_t)
EMPTY(zeGetKernelExpProcAddrTable, ze_kernel_exp_dditable_t)
EMPTY(zeGetSamplerProcAddrTable, ze_sampler_dditable_t)
EMPTY(zeGetFabricVertexExpProcAddrTable, ze_fabric_vertex_exp_dditable_t)
EMPTY(zeGetFabricEdgeExpProcAddrTable, ze_fabric_edge_exp_dditable_t)

EMPTY(zetGetDeviceProcAddrTable, zet_device_dditable_t)
EMPTY(zetGetContextProcAddrTable, zet_context_dditable_t)
EMPTY(zetGetCommandListProcAddrTable, zet_command_list_dditable_t)
EMPTY(zetGetModuleProcAddrTable, zet_module_dditable_t)
EMPTY(zetGetKernelProcAddrTable, zet_kernel_dditable_t)
EMPTY(zetGetMetricGroupProcAddrTable, zet_metric_group_dditable_t)
EMPTY(zetGetMetricGroupExpProcAddrTable, zet_metric_group_exp_dditable_t)
EMPTY(zetGetMetricProcAddrTable, zet_metric_dditable_t)
EMPTY(zetGetMetricStreamerProcAddrTable, zet_metric_streamer_dditable_t)
EMPTY(zetGetMetricQueryPoolProcAddrTable, zet_metric_query_pool_dditable_t)
EMPTY(zetGetMetricQueryProcAddrTable, zet_metric_query_dditable_t)
EMPTY(zetGetTracerExpProcAddrTable, zet_tracer_exp_dditable_t)
EMPTY(zetGetDebugProcAddrTable, zet_debug_dditable_t)

EMPTY(zesGetDriverProcAddrTable, zes_driver_dditable_t)
FILLED(zesGetDeviceProcAddrTable, zes_device_dditable_t,
       t->pfnEnumMemoryModules = fzs_DeviceEnumMemoryModules)
EMPTY(zesGetSchedulerProcAddrTable, zes_scheduler_dditable_t)
EMPTY(zesGetPerformanceFactorProcAddrTable, zes_performance_factor_dditable_t)
EMPTY(zesGetPowerProcAddrTable, zes_power_dditable_t)
EMPTY(zesGetFrequencyProcAddrTable, zes_frequency_dditable_t)
EMPTY(zesGetEngineProcAddrTable, zes_engine_dditable_t)
EMPTY(zesGetStandbyProcAddrTable, zes_standby_dditable_t)
EMPTY(zesGetFirmwareProcAddrTable, zes_firmware_dditable_t)
FILLED(zesGetMemoryProcAddrTable, zes_memory_dditable_t, {
    t->pfnGetProperties = fzs_MemoryGetProperties;
    t->pfnGetState = fzs_MemoryGetState;
})
EMPTY(zesGetFabricPortProcAddrTable, zes_fabric_port_dditable_t)
EMPTY(zesGetTemperatureProcAddrTable, zes_temperature_dditable_t)
EMPTY(zesGetPsuProcAddrTable, zes_psu_dditable_t)
EMPTY(zesGetFanProcAddrTable, zes_fan_dditable_t)
EMPTY(zesGetLedProcAddrTable, zes_led_dditable_t)
EMPTY(zesGetRasProcAddrTable, zes_ras_dditable_t)
EMPTY(zesGetDiagnosticsProcAddrTable, zes_diagnostics_dditable_t)
