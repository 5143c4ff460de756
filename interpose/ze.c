/* ze.c: Level Zero wrappers, the exported-symbol route.
 *
 * Programs linked with the loader (libze_loader.so.1) call its exported functions, so
 * the preload library exports the same names and calls the loader's through
 * RTLD_NEXT. No Level Zero header is needed: handles are pointers and the few
 * structures read here are mirrored below. ze_trace.c records the same events
 * through the loader's tracing layer for calls that bypass these symbols; the table
 * of live allocations and the used devices here serve both routes and the sampler.
 *
 * What is recorded (source = the API name, which tells device, host and shared apart;
 * device = the index of the device in zeDriverGet/zeDeviceGet order, 0 for memory that
 * belongs to no device, since host memory is visible to every device of a context):
 *   zeMemAllocDevice/Host/Shared      segment_alloc
 *   zeMemFree, zeMemFreeExt           segment_free (before the call, with the device
 *                                     and kind the driver reports for the pointer)
 *   zePhysicalMemCreate / Destroy     annotate marks "physical_create" /
 *                                     "physical_release" with the size, addr = the
 *                                     handle (the bytes count where mapped)
 *   zeVirtualMemMap / Unmap           segment_map / segment_unmap (aux = the handle)
 *   zeVirtualMemReserve / Free        annotate marks "va_reserve" / "va_free"
 * Frees are recorded before the driver call, as in cuda.c: once it returns, another
 * thread may get the same address, and its allocation must come after the free. */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "interpose.h"
#include "mtx/env.h"
#include "mtx/util.h"
#include "ze.h"

#define ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES 0x17u
#define ZE_MEMORY_TYPE_UNKNOWN                         0u

struct ze_alloc_props {
    uint32_t stype;
    const void *next;
    uint32_t type;
    uint64_t id;
    uint64_t page_size;
};

/* clang-format off */
#define ZE_SYMBOLS(X) \
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
    X(zePhysicalMemDestroy) \
    X(zeDriverGet) \
    X(zeDeviceGet) \
    X(zeMemGetAllocProperties)
/* clang-format on */

#define X_ENUM(name) Z_##name,
enum { ZE_SYMBOLS(X_ENUM) Z_COUNT };
#define X_NAME(name) #name,
static const char *const z_name[Z_COUNT] = {ZE_SYMBOLS(X_NAME)};
static void *_Atomic z_real[Z_COUNT];

static void *real(int i)
{
    void *p = atomic_load_explicit(&z_real[i], memory_order_acquire);
    if (MTX_LIKELY(p != NULL))
        return p;
    p = mt_real_dlsym(RTLD_NEXT, z_name[i]);
    if (p != NULL)
        atomic_store_explicit(&z_real[i], p, memory_order_release);
    return p;
}

#define REAL(name) ((__typeof__(&name))real(Z_##name))

/* ---- device indices ------------------------------------------------------------- */

#define MAX_DEVICES 64

static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
static ze_handle dev_handle[MAX_DEVICES];
static int dev_count;

/* Fills dev_handle in the order a program enumerating drivers and devices sees. */
static void enumerate_locked(void)
{
    ze_result_t (*drivers)(uint32_t *, ze_handle *) =
        (ze_result_t(*)(uint32_t *, ze_handle *))real(Z_zeDriverGet);
    ze_result_t (*devices)(ze_handle, uint32_t *, ze_handle *) =
        (ze_result_t(*)(ze_handle, uint32_t *, ze_handle *))real(Z_zeDeviceGet);
    ze_handle drv[8];
    uint32_t ndrv = 8;
    if (drivers == NULL || devices == NULL || drivers(&ndrv, drv) != ZE_RESULT_SUCCESS)
        return;
    dev_count = 0;
    for (uint32_t d = 0; d < ndrv && d < 8; d++) {
        uint32_t n = (uint32_t)(MAX_DEVICES - dev_count);
        if (n == 0 || devices(drv[d], &n, dev_handle + dev_count) != ZE_RESULT_SUCCESS)
            continue;
        dev_count += (int)n;
    }
}

int mt_ze_device_index(ze_handle dev)
{
    if (dev == NULL)
        return 0;
    pthread_mutex_lock(&dev_lock);
    int idx = -1;
    for (int pass = 0; pass < 2 && idx < 0; pass++) {
        if (pass == 1)
            enumerate_locked();
        for (int i = 0; i < dev_count; i++)
            if (dev_handle[i] == dev)
                idx = i;
    }
    pthread_mutex_unlock(&dev_lock);
    return idx < 0 ? 0 : idx; /* a sub-device: counted with the first device */
}

/* Devices of physical memory handles, for the maps made of them. A full table only
 * costs the device of later maps (then 0). */
#define PHYS_SLOTS 256
static _Atomic(uintptr_t) phys_handle[PHYS_SLOTS];
static _Atomic int phys_dev[PHYS_SLOTS];

void mt_ze_phys_note(ze_handle h, int dev)
{
    for (size_t i = 0; i < PHYS_SLOTS; i++) {
        uintptr_t want = 0;
        if (atomic_compare_exchange_strong(&phys_handle[i], &want, (uintptr_t)h)) {
            atomic_store(&phys_dev[i], dev);
            return;
        }
    }
}

int mt_ze_phys_device(ze_handle h, int forget)
{
    for (size_t i = 0; i < PHYS_SLOTS; i++)
        if (atomic_load(&phys_handle[i]) == (uintptr_t)h) {
            int dev = atomic_load(&phys_dev[i]);
            if (forget)
                atomic_store(&phys_handle[i], 0);
            return dev;
        }
    return 0;
}

/* ---- live allocations and used devices ------------------------------------------ */

/* Addresses recorded as allocated, with their device: the tracing route has no
 * driver query at hand to tell an allocation from a bad pointer, so either route
 * records frees of what either route recorded. Open addressing, tombstones. */
struct live {
    uint64_t addr;
    int32_t dev;
    uint8_t used; /* 0 empty, 1 live, 2 deleted */
};
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct live *live;
static size_t live_cap, live_n, live_slots;
static ze_handle _Atomic used_dev[MT_ZE_MAX_DEVICES];

static size_t live_slot(uint64_t addr, size_t cap)
{
    return (size_t)mtx_hash_u64(addr) & (cap - 1);
}

static int live_grow_locked(void)
{
    size_t ncap = live_n * 4 < live_cap ? live_cap : (live_cap ? live_cap * 2 : 1024);
    struct live *n = mtx_map(ncap * sizeof *n);
    if (n == NULL)
        return -1;
    for (size_t i = 0; i < live_cap; i++) {
        if (live[i].used != 1)
            continue;
        size_t j = live_slot(live[i].addr, ncap);
        while (n[j].used)
            j = (j + 1) & (ncap - 1);
        n[j] = live[i];
    }
    if (live != NULL)
        mtx_unmap(live, live_cap * sizeof *live);
    live = n;
    live_cap = ncap;
    live_slots = live_n;
    return 0;
}

static void live_add(uint64_t addr, int dev)
{
    pthread_mutex_lock(&live_lock);
    if ((live_slots + 1) * 4 > live_cap * 3 && live_grow_locked() != 0)
        goto out;
    size_t i = live_slot(addr, live_cap), tomb = SIZE_MAX;
    for (; live[i].used; i = (i + 1) & (live_cap - 1)) {
        if (live[i].used == 2 && tomb == SIZE_MAX)
            tomb = i;
        if (live[i].used == 1 && live[i].addr == addr)
            break;
    }
    if (live[i].used != 1) {
        if (tomb != SIZE_MAX)
            i = tomb;
        else
            live_slots++;
        live_n++;
    }
    live[i] = (struct live){.addr = addr, .dev = dev, .used = 1};
out:
    pthread_mutex_unlock(&live_lock);
}

static int live_remove(uint64_t addr)
{
    int found = 0;
    pthread_mutex_lock(&live_lock);
    for (size_t i = live_cap ? live_slot(addr, live_cap) : 0; live_cap && live[i].used;
         i = (i + 1) & (live_cap - 1))
        if (live[i].used == 1 && live[i].addr == addr) {
            live[i].used = 2;
            live_n--;
            found = 1;
            break;
        }
    pthread_mutex_unlock(&live_lock);
    return found;
}

int mt_ze_devices_used(ze_handle *handles, int max)
{
    int n = 0;
    for (int i = 0; i < max && i < MT_ZE_MAX_DEVICES; i++) {
        handles[i] = atomic_load_explicit(&used_dev[i], memory_order_acquire);
        if (handles[i] != NULL)
            n = i + 1;
    }
    return n;
}

static uint64_t u64(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

void mt_ze_alloc(const char *src, uint32_t *id, int idx, ze_handle dev, const void *addr,
                 size_t size)
{
    if (dev != NULL && idx >= 0 && idx < MT_ZE_MAX_DEVICES &&
        atomic_load_explicit(&used_dev[idx], memory_order_relaxed) != dev)
        atomic_store_explicit(&used_dev[idx], dev, memory_order_release);
    live_add(u64(addr), idx);
    mt_ip_record_ex(MEMTRACE_SEGMENT_ALLOC, MT_IP_SEGMENT, idx, 0, u64(addr), size, 0, src, id,
                    NULL, NULL);
}

void mt_ze_oom(const char *src, uint32_t *id, int idx, ze_handle dev, size_t size, ze_result_t r)
{
    if (r != ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY && r != ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
        return;
    mt_ip_record(MEMTRACE_OOM, idx, 0, 0, size, mt_ze_free_bytes(dev), src, id);
}

int mt_ze_free_known(const char *src, uint32_t *id, const void *addr)
{
    if (addr == NULL || !live_remove(u64(addr)))
        return 0;
    mt_ip_record_ex(MEMTRACE_SEGMENT_FREE, MT_IP_SEGMENT, 0, 0, u64(addr), 0, 0, src, id, NULL,
                    NULL);
    return 1;
}

void mt_ze_forget(const void *addr)
{
    live_remove(u64(addr));
}

/* ---- wrappers ------------------------------------------------------------------- */

/* The symbol route records unless the tracing route was chosen: then the call goes
 * on unguarded, so that the tracing layer's callbacks beneath it record it. In auto,
 * the guard held here makes those callbacks stand down: one event per call. */
static int enter(void)
{
    if (!mt_ip_enter())
        return 0;
    if (mt_ze_route() != MT_ZE_ROUTE_TRACING)
        return 1;
    static atomic_int warned;
    if (!mt_ze_tracing_registered() && !atomic_exchange(&warned, 1))
        mtx_log("MEMTRACE_ZE_ROUTE=tracing, but the loader's tracing layer is not loaded "
                "(ZE_ENABLE_TRACING_LAYER=1 before zeInit loads it): nothing is recorded");
    mt_ip_leave();
    return 0;
}

#define SRC(name)                                                                                  \
    static uint32_t src_id;                                                                        \
    static const char *const src = #name

MT_EXPORT ze_result_t zeMemAllocDevice(ze_handle ctx, const void *desc, size_t size, size_t align,
                                       ze_handle dev, void **out);
MT_EXPORT ze_result_t zeMemAllocHost(ze_handle ctx, const void *desc, size_t size, size_t align,
                                     void **out);
MT_EXPORT ze_result_t zeMemAllocShared(ze_handle ctx, const void *ddesc, const void *hdesc,
                                       size_t size, size_t align, ze_handle dev, void **out);
MT_EXPORT ze_result_t zeMemFree(ze_handle ctx, void *ptr);
MT_EXPORT ze_result_t zeMemFreeExt(ze_handle ctx, const void *desc, void *ptr);
MT_EXPORT ze_result_t zeVirtualMemReserve(ze_handle ctx, const void *start, size_t size,
                                          void **out);
MT_EXPORT ze_result_t zeVirtualMemFree(ze_handle ctx, const void *ptr, size_t size);
MT_EXPORT ze_result_t zeVirtualMemMap(ze_handle ctx, const void *ptr, size_t size, ze_handle phys,
                                      size_t offset, uint32_t access);
MT_EXPORT ze_result_t zeVirtualMemUnmap(ze_handle ctx, const void *ptr, size_t size);
MT_EXPORT ze_result_t zePhysicalMemCreate(ze_handle ctx, ze_handle dev,
                                          struct ze_physical_desc *desc, ze_handle *out);
MT_EXPORT ze_result_t zePhysicalMemDestroy(ze_handle ctx, ze_handle phys);
ze_result_t zeDriverGet(uint32_t *count, ze_handle *drivers);
ze_result_t zeDeviceGet(ze_handle drv, uint32_t *count, ze_handle *devices);
ze_result_t zeMemGetAllocProperties(ze_handle ctx, const void *ptr, struct ze_alloc_props *p,
                                    ze_handle *dev);

MT_EXPORT ze_result_t zeMemAllocDevice(ze_handle ctx, const void *desc, size_t size, size_t align,
                                       ze_handle dev, void **out)
{
    SRC(zeMemAllocDevice);
    __typeof__(&zeMemAllocDevice) f = REAL(zeMemAllocDevice);
    if (f == NULL)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    if (!enter())
        return f(ctx, desc, size, align, dev, out);
    ze_result_t r = f(ctx, desc, size, align, dev, out);
    if (r == ZE_RESULT_SUCCESS)
        mt_ze_alloc(src, &src_id, mt_ze_device_index(dev), dev, *out, size);
    else
        mt_ze_oom(src, &src_id, mt_ze_device_index(dev), dev, size, r);
    mt_ip_leave();
    return r;
}

MT_EXPORT ze_result_t zeMemAllocHost(ze_handle ctx, const void *desc, size_t size, size_t align,
                                     void **out)
{
    SRC(zeMemAllocHost);
    __typeof__(&zeMemAllocHost) f = REAL(zeMemAllocHost);
    if (f == NULL)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    if (!enter())
        return f(ctx, desc, size, align, out);
    ze_result_t r = f(ctx, desc, size, align, out);
    if (r == ZE_RESULT_SUCCESS)
        mt_ze_alloc(src, &src_id, 0, NULL, *out, size);
    else
        mt_ze_oom(src, &src_id, 0, NULL, size, r);
    mt_ip_leave();
    return r;
}

MT_EXPORT ze_result_t zeMemAllocShared(ze_handle ctx, const void *ddesc, const void *hdesc,
                                       size_t size, size_t align, ze_handle dev, void **out)
{
    SRC(zeMemAllocShared);
    __typeof__(&zeMemAllocShared) f = REAL(zeMemAllocShared);
    if (f == NULL)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    if (!enter())
        return f(ctx, ddesc, hdesc, size, align, dev, out);
    ze_result_t r = f(ctx, ddesc, hdesc, size, align, dev, out);
    if (r == ZE_RESULT_SUCCESS)
        mt_ze_alloc(src, &src_id, mt_ze_device_index(dev), dev, *out, size);
    else
        mt_ze_oom(src, &src_id, mt_ze_device_index(dev), dev, size, r);
    mt_ip_leave();
    return r;
}

/* Records the free of ptr if the driver knows it as an allocation. */
static void record_free(const char *src, uint32_t *id, ze_handle ctx, void *ptr)
{
    __typeof__(&zeMemGetAllocProperties) props = REAL(zeMemGetAllocProperties);
    struct ze_alloc_props p = {.stype = ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES};
    ze_handle dev = NULL;
    if (ptr == NULL || props == NULL || props(ctx, ptr, &p, &dev) != ZE_RESULT_SUCCESS ||
        p.type == ZE_MEMORY_TYPE_UNKNOWN)
        return;
    mt_ze_forget(ptr);
    mt_ip_record_ex(MEMTRACE_SEGMENT_FREE, MT_IP_SEGMENT, mt_ze_device_index(dev), 0, u64(ptr), 0,
                    0, src, id, NULL, NULL);
}

MT_EXPORT ze_result_t zeMemFree(ze_handle ctx, void *ptr)
{
    SRC(zeMemFree);
    __typeof__(&zeMemFree) f = REAL(zeMemFree);
    if (f == NULL)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    if (!enter())
        return f(ctx, ptr);
    record_free(src, &src_id, ctx, ptr);
    ze_result_t r = f(ctx, ptr);
    mt_ip_leave();
    return r;
}

MT_EXPORT ze_result_t zeMemFreeExt(ze_handle ctx, const void *desc, void *ptr)
{
    SRC(zeMemFreeExt);
    __typeof__(&zeMemFreeExt) f = REAL(zeMemFreeExt);
    if (f == NULL)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    if (!enter())
        return f(ctx, desc, ptr);
    record_free(src, &src_id, ctx, ptr);
    ze_result_t r = f(ctx, desc, ptr);
    mt_ip_leave();
    return r;
}

MT_EXPORT ze_result_t zeVirtualMemReserve(ze_handle ctx, const void *start, size_t size, void **out)
{
    SRC(zeVirtualMemReserve);
    static uint32_t cat_id;
    __typeof__(&zeVirtualMemReserve) f = REAL(zeVirtualMemReserve);
    if (f == NULL)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    if (!enter())
        return f(ctx, start, size, out);
    ze_result_t r = f(ctx, start, size, out);
    if (r == ZE_RESULT_SUCCESS)
        mt_ip_record_ex(MEMTRACE_ANNOTATE, MT_IP_SEGMENT, 0, 0, u64(*out), size,
                        MEMTRACE_ANNOTATE_MARK, src, &src_id, "va_reserve", &cat_id);
    mt_ip_leave();
    return r;
}

MT_EXPORT ze_result_t zeVirtualMemFree(ze_handle ctx, const void *ptr, size_t size)
{
    SRC(zeVirtualMemFree);
    static uint32_t cat_id;
    __typeof__(&zeVirtualMemFree) f = REAL(zeVirtualMemFree);
    if (f == NULL)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    if (!enter())
        return f(ctx, ptr, size);
    ze_result_t r = f(ctx, ptr, size);
    if (r == ZE_RESULT_SUCCESS)
        mt_ip_record_ex(MEMTRACE_ANNOTATE, MT_IP_SEGMENT, 0, 0, u64(ptr), size,
                        MEMTRACE_ANNOTATE_MARK, src, &src_id, "va_free", &cat_id);
    mt_ip_leave();
    return r;
}

MT_EXPORT ze_result_t zeVirtualMemMap(ze_handle ctx, const void *ptr, size_t size, ze_handle phys,
                                      size_t offset, uint32_t access)
{
    SRC(zeVirtualMemMap);
    __typeof__(&zeVirtualMemMap) f = REAL(zeVirtualMemMap);
    if (f == NULL)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    if (!enter())
        return f(ctx, ptr, size, phys, offset, access);
    ze_result_t r = f(ctx, ptr, size, phys, offset, access);
    if (r == ZE_RESULT_SUCCESS)
        mt_ip_record_ex(MEMTRACE_SEGMENT_MAP, MT_IP_MAPPED, mt_ze_phys_device(phys, 0), 0, u64(ptr),
                        size, u64(phys), src, &src_id, NULL, NULL);
    mt_ip_leave();
    return r;
}

MT_EXPORT ze_result_t zeVirtualMemUnmap(ze_handle ctx, const void *ptr, size_t size)
{
    SRC(zeVirtualMemUnmap);
    __typeof__(&zeVirtualMemUnmap) f = REAL(zeVirtualMemUnmap);
    if (f == NULL)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    if (!enter())
        return f(ctx, ptr, size);
    mt_ip_record_ex(MEMTRACE_SEGMENT_UNMAP, MT_IP_MAPPED, 0, 0, u64(ptr), size, 0, src, &src_id,
                    NULL, NULL);
    ze_result_t r = f(ctx, ptr, size);
    mt_ip_leave();
    return r;
}

MT_EXPORT ze_result_t zePhysicalMemCreate(ze_handle ctx, ze_handle dev,
                                          struct ze_physical_desc *desc, ze_handle *out)
{
    SRC(zePhysicalMemCreate);
    static uint32_t cat_id;
    __typeof__(&zePhysicalMemCreate) f = REAL(zePhysicalMemCreate);
    if (f == NULL)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    if (!enter())
        return f(ctx, dev, desc, out);
    ze_result_t r = f(ctx, dev, desc, out);
    if (r == ZE_RESULT_SUCCESS) {
        int idx = mt_ze_device_index(dev);
        mt_ze_phys_note(*out, idx);
        if (idx >= 0 && idx < MT_ZE_MAX_DEVICES && dev != NULL)
            atomic_store_explicit(&used_dev[idx], dev, memory_order_release);
        mt_ip_record_ex(MEMTRACE_SEGMENT_ALLOC, MT_IP_PHYSICAL, idx, 0, u64(*out), desc->size, 0,
                        src, &src_id, "physical_create", &cat_id);
    }
    mt_ip_leave();
    return r;
}

MT_EXPORT ze_result_t zePhysicalMemDestroy(ze_handle ctx, ze_handle phys)
{
    SRC(zePhysicalMemDestroy);
    static uint32_t cat_id;
    __typeof__(&zePhysicalMemDestroy) f = REAL(zePhysicalMemDestroy);
    if (f == NULL)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    if (!enter())
        return f(ctx, phys);
    mt_ip_record_ex(MEMTRACE_SEGMENT_FREE, MT_IP_PHYSICAL, mt_ze_phys_device(phys, 1), 0, u64(phys),
                    0, 0, src, &src_id, "physical_release", &cat_id);
    ze_result_t r = f(ctx, phys);
    mt_ip_leave();
    return r;
}

/* ---- the backend table ------------------------------------------------------------ */

static int route;

int mt_ze_route_parse(const char *s)
{
    static const char *const names[] = {"auto", "symbols", "tracing"};
    for (size_t i = 0; i < MTX_ARRAY_SIZE(names); i++)
        if (strcmp(s, names[i]) == 0)
            return (int)i;
    return -1;
}

int mt_ze_route(void)
{
    return route;
}

static int config(void)
{
    const char *s = getenv(MTX_ENV_ZE_ROUTE);
    route = MT_ZE_ROUTE_AUTO;
    if (s != NULL && *s != '\0') {
        route = mt_ze_route_parse(s);
        if (route < 0) {
            route = MT_ZE_ROUTE_AUTO;
            return mt_ip_config_bad(MTX_ENV_ZE_ROUTE, s, "auto, symbols or tracing");
        }
    }
    return 0;
}

MT_IP_EARLY static void *dlsym_hook(void *handle, const char *name, void *found, const void *caller)
{
    (void)handle, (void)caller;
    if (name[0] == 'z' && name[1] == 'e' && name[2] == 'l')
        mt_ze_dlsym_seen(name, found);
    return NULL;
}

const struct mt_ip_backend mt_ip_ze_backend = {
    .name = "level zero",
    .config = config,
    .dlsym = dlsym_hook,
    .sample = mt_ze_sample,
};
