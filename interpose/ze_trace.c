/* ze_trace.c: the Level Zero route through the loader's tracing layer.
 *
 * With ZE_ENABLE_TRACING_LAYER=1 the loader dlopens libze_tracing_layer.so.1 at
 * zeInit and puts it between the API and the driver, so its callbacks see every
 * call, also from programs whose loader is linked statically or opened privately
 * and so never reach the preload's exported symbols. The layer exports no
 * zelTracerCreate of its own: the loader finds the tracer API through dlsym(layer,
 * "zelGetTracerApiProcAddrTable"), and that lookup, seen by the preload's dlsym hook,
 * is where a tracer is registered here, on the layer itself, before the first API
 * call goes through it (measured with the 1.8 loader: the lookup comes after the
 * layer has wrapped the dispatch tables, inside zeInit).
 *
 * Callbacks record what ze.c's wrappers record, with the same sources: allocations
 * and maps in epilogues (on success), frees and unmaps in prologues (before the
 * driver can hand the address out again). Device indices come from the program's own
 * zeDriverGet/zeDeviceGet calls, seen in epilogues. */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "interpose.h"
#include "mtx/env.h"
#include "mtx/util.h"
#include "ze.h"

#define ZE_API_VERSION_1_4             0x00010004u
#define ZEL_STRUCTURE_TYPE_TRACER_DESC 1u
enum { PROLOGUE = 0, EPILOGUE = 1 };

/* Parameter blocks: a pointer to each argument of the traced call. */
struct p_alloc_device {
    ze_handle *ctx;
    const void **desc;
    size_t *size, *align;
    ze_handle *dev;
    void ***out;
};
struct p_alloc_host {
    ze_handle *ctx;
    const void **desc;
    size_t *size, *align;
    void ***out;
};
struct p_alloc_shared {
    ze_handle *ctx;
    const void **ddesc, **hdesc;
    size_t *size, *align;
    ze_handle *dev;
    void ***out;
};
struct p_free {
    ze_handle *ctx;
    void **ptr;
};
struct p_free_ext {
    ze_handle *ctx;
    const void **desc;
    void **ptr;
};
struct p_va_reserve {
    ze_handle *ctx;
    const void **start;
    size_t *size;
    void ***out;
};
struct p_va_range { /* zeVirtualMemFree, zeVirtualMemUnmap */
    ze_handle *ctx;
    const void **ptr;
    size_t *size;
};
struct p_va_map {
    ze_handle *ctx;
    const void **ptr;
    size_t *size;
    ze_handle *phys;
    size_t *offset;
    uint32_t *access;
};
struct p_phys_create {
    ze_handle *ctx;
    ze_handle *dev;
    struct ze_physical_desc **desc;
    ze_handle **out;
};
struct p_phys_destroy {
    ze_handle *ctx;
    ze_handle *phys;
};
struct p_driver_get {
    uint32_t **count;
    ze_handle **drivers;
};
struct p_device_get {
    ze_handle *drv;
    uint32_t **count;
    ze_handle **devices;
};

struct tracer_api {
    ze_result_t (*create)(const void *desc, void **tracer);
    ze_result_t (*destroy)(void *tracer);
    ze_result_t (*set_prologues)(void *tracer, void *cbs);
    ze_result_t (*set_epilogues)(void *tracer, void *cbs);
    ze_result_t (*set_enabled)(void *tracer, uint8_t enable);
};

struct tracer_desc {
    uint32_t stype;
    const void *next;
    void *user;
};

static uint64_t u64(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

/* ---- device order, as the program enumerates ------------------------------------ */

#define MAX_DRIVERS 8
static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static ze_handle drivers[MAX_DRIVERS];
static uint32_t ndrivers;
static ze_handle devices[MAX_DRIVERS][MT_ZE_MAX_DEVICES];
static uint32_t ndevices[MAX_DRIVERS];

static void on_driver_get(void *params, ze_result_t r, void *user, void **inst)
{
    struct p_driver_get *p = params;
    (void)user, (void)inst;
    if (r != ZE_RESULT_SUCCESS || *p->drivers == NULL)
        return;
    pthread_mutex_lock(&order_lock);
    uint32_t n = **p->count < MAX_DRIVERS ? **p->count : MAX_DRIVERS;
    for (uint32_t i = 0; i < n; i++)
        if (i >= ndrivers || drivers[i] != (*p->drivers)[i]) {
            drivers[i] = (*p->drivers)[i];
            ndevices[i] = 0;
        }
    if (n > ndrivers)
        ndrivers = n;
    pthread_mutex_unlock(&order_lock);
}

static void on_device_get(void *params, ze_result_t r, void *user, void **inst)
{
    struct p_device_get *p = params;
    (void)user, (void)inst;
    if (r != ZE_RESULT_SUCCESS || *p->devices == NULL)
        return;
    pthread_mutex_lock(&order_lock);
    uint32_t d = 0;
    while (d < ndrivers && drivers[d] != *p->drv)
        d++;
    if (d == ndrivers && d < MAX_DRIVERS) /* a driver handle from elsewhere */
        drivers[ndrivers++] = *p->drv;
    if (d < MAX_DRIVERS) {
        uint32_t n = **p->count < MT_ZE_MAX_DEVICES ? **p->count : MT_ZE_MAX_DEVICES;
        memcpy(devices[d], *p->devices, n * sizeof(ze_handle));
        if (n > ndevices[d])
            ndevices[d] = n;
    }
    pthread_mutex_unlock(&order_lock);
}

static int device_index(ze_handle dev)
{
    if (dev == NULL)
        return 0;
    int idx = -1, base = 0;
    pthread_mutex_lock(&order_lock);
    for (uint32_t d = 0; d < ndrivers && idx < 0; base += (int)ndevices[d], d++)
        for (uint32_t i = 0; i < ndevices[d]; i++)
            if (devices[d][i] == dev)
                idx = base + (int)i;
    pthread_mutex_unlock(&order_lock);
    return idx >= 0 ? idx : mt_ze_device_index(dev);
}

/* ---- callbacks ------------------------------------------------------------------ */

static int enter(void)
{
    if (!mt_ip_enter())
        return 0; /* inside an exported-symbol wrapper (it records), or off */
    if (mt_ze_route() != MT_ZE_ROUTE_SYMBOLS)
        return 1;
    mt_ip_leave();
    return 0;
}

#define CALLBACK(fn, type)                                                                         \
    static void fn##_body(struct type *p, ze_result_t r);                                          \
    static void fn(void *params, ze_result_t r, void *user, void **inst)                           \
    {                                                                                              \
        (void)user, (void)inst;                                                                    \
        if (!enter())                                                                              \
            return;                                                                                \
        fn##_body(params, r);                                                                      \
        mt_ip_leave();                                                                             \
    }                                                                                              \
    static void fn##_body(struct type *p, ze_result_t r)

#define SRC(name)                                                                                  \
    static uint32_t src_id;                                                                        \
    static const char *const src = #name

CALLBACK(on_alloc_device, p_alloc_device)
{
    SRC(zeMemAllocDevice);
    if (r == ZE_RESULT_SUCCESS)
        mt_ze_alloc(src, &src_id, device_index(*p->dev), *p->dev, **p->out, *p->size);
    else
        mt_ze_oom(src, &src_id, device_index(*p->dev), *p->dev, *p->size, r);
}

CALLBACK(on_alloc_host, p_alloc_host)
{
    SRC(zeMemAllocHost);
    if (r == ZE_RESULT_SUCCESS)
        mt_ze_alloc(src, &src_id, 0, NULL, **p->out, *p->size);
    else
        mt_ze_oom(src, &src_id, 0, NULL, *p->size, r);
}

CALLBACK(on_alloc_shared, p_alloc_shared)
{
    SRC(zeMemAllocShared);
    if (r == ZE_RESULT_SUCCESS)
        mt_ze_alloc(src, &src_id, device_index(*p->dev), *p->dev, **p->out, *p->size);
    else
        mt_ze_oom(src, &src_id, device_index(*p->dev), *p->dev, *p->size, r);
}

CALLBACK(on_free, p_free)
{
    SRC(zeMemFree);
    (void)r;
    mt_ze_free_known(src, &src_id, *p->ptr);
}

CALLBACK(on_free_ext, p_free_ext)
{
    SRC(zeMemFreeExt);
    (void)r;
    mt_ze_free_known(src, &src_id, *p->ptr);
}

CALLBACK(on_va_reserve, p_va_reserve)
{
    SRC(zeVirtualMemReserve);
    static uint32_t cat_id;
    if (r == ZE_RESULT_SUCCESS)
        mt_ip_record_ex(MEMTRACE_ANNOTATE, MT_IP_SEGMENT, 0, 0, u64(**p->out), *p->size,
                        MEMTRACE_ANNOTATE_MARK, src, &src_id, "va_reserve", &cat_id);
}

CALLBACK(on_va_free, p_va_range)
{
    SRC(zeVirtualMemFree);
    static uint32_t cat_id;
    if (r == ZE_RESULT_SUCCESS)
        mt_ip_record_ex(MEMTRACE_ANNOTATE, MT_IP_SEGMENT, 0, 0, u64(*p->ptr), *p->size,
                        MEMTRACE_ANNOTATE_MARK, src, &src_id, "va_free", &cat_id);
}

CALLBACK(on_va_map, p_va_map)
{
    SRC(zeVirtualMemMap);
    if (r == ZE_RESULT_SUCCESS)
        mt_ip_record_ex(MEMTRACE_SEGMENT_MAP, MT_IP_MAPPED, mt_ze_phys_device(*p->phys, 0), 0,
                        u64(*p->ptr), *p->size, u64(*p->phys), src, &src_id, NULL, NULL);
}

CALLBACK(on_va_unmap, p_va_range)
{
    SRC(zeVirtualMemUnmap);
    (void)r;
    mt_ip_record_ex(MEMTRACE_SEGMENT_UNMAP, MT_IP_MAPPED, 0, 0, u64(*p->ptr), *p->size, 0, src,
                    &src_id, NULL, NULL);
}

CALLBACK(on_phys_create, p_phys_create)
{
    SRC(zePhysicalMemCreate);
    static uint32_t cat_id;
    if (r != ZE_RESULT_SUCCESS)
        return;
    int idx = device_index(*p->dev);
    mt_ze_phys_note(**p->out, idx);
    mt_ip_record_ex(MEMTRACE_SEGMENT_ALLOC, MT_IP_PHYSICAL, idx, 0, u64(**p->out), (*p->desc)->size,
                    0, src, &src_id, "physical_create", &cat_id);
}

CALLBACK(on_phys_destroy, p_phys_destroy)
{
    SRC(zePhysicalMemDestroy);
    static uint32_t cat_id;
    (void)r;
    mt_ip_record_ex(MEMTRACE_SEGMENT_FREE, MT_IP_PHYSICAL, mt_ze_phys_device(*p->phys, 1), 0,
                    u64(*p->phys), 0, 0, src, &src_id, "physical_release", &cat_id);
}

/* ---- registration --------------------------------------------------------------- */

static const struct {
    const char *reg;
    int when;
    void (*cb)(void *, ze_result_t, void *, void **);
} callbacks[] = {
    {"zelTracerDriverGetRegisterCallback", EPILOGUE, on_driver_get},
    {"zelTracerDeviceGetRegisterCallback", EPILOGUE, on_device_get},
    {"zelTracerMemAllocDeviceRegisterCallback", EPILOGUE, on_alloc_device},
    {"zelTracerMemAllocHostRegisterCallback", EPILOGUE, on_alloc_host},
    {"zelTracerMemAllocSharedRegisterCallback", EPILOGUE, on_alloc_shared},
    {"zelTracerMemFreeRegisterCallback", PROLOGUE, on_free},
    {"zelTracerMemFreeExtRegisterCallback", PROLOGUE, on_free_ext},
    {"zelTracerVirtualMemReserveRegisterCallback", EPILOGUE, on_va_reserve},
    {"zelTracerVirtualMemFreeRegisterCallback", EPILOGUE, on_va_free},
    {"zelTracerVirtualMemMapRegisterCallback", EPILOGUE, on_va_map},
    {"zelTracerVirtualMemUnmapRegisterCallback", PROLOGUE, on_va_unmap},
    {"zelTracerPhysicalMemCreateRegisterCallback", EPILOGUE, on_phys_create},
    {"zelTracerPhysicalMemDestroyRegisterCallback", PROLOGUE, on_phys_destroy},
};

static atomic_int registered;

int mt_ze_tracing_registered(void)
{
    return atomic_load(&registered);
}

static int register_on(void *layer)
{
    ze_result_t (*get_api)(uint32_t, struct tracer_api *) = (ze_result_t(*)(
        uint32_t, struct tracer_api *))mt_real_dlsym(layer, "zelGetTracerApiProcAddrTable");
    struct tracer_api api = {0};
    struct tracer_desc desc = {.stype = ZEL_STRUCTURE_TYPE_TRACER_DESC};
    void *tracer = NULL;
    if (get_api == NULL || get_api(ZE_API_VERSION_1_4, &api) != ZE_RESULT_SUCCESS ||
        api.create == NULL || api.set_enabled == NULL || api.create(&desc, &tracer) != 0)
        return -1;
    for (size_t i = 0; i < MTX_ARRAY_SIZE(callbacks); i++) {
        ze_result_t (*reg)(void *, int, void (*)(void *, ze_result_t, void *, void **)) =
            (ze_result_t(*)(void *, int, void (*)(void *, ze_result_t, void *, void **)))
                mt_real_dlsym(layer, callbacks[i].reg);
        if (reg == NULL || reg(tracer, callbacks[i].when, callbacks[i].cb) != ZE_RESULT_SUCCESS) {
            if (api.destroy != NULL)
                api.destroy(tracer);
            return -1;
        }
    }
    return api.set_enabled(tracer, 1) == ZE_RESULT_SUCCESS ? 0 : -1;
}

void mt_ze_dlsym_seen(const char *name, void *found)
{
    Dl_info info;
    if (found == NULL || strcmp(name, "zelGetTracerApiProcAddrTable") != 0 ||
        dladdr(found, &info) == 0 || info.dli_fname == NULL)
        return;
    const char *base = strrchr(info.dli_fname, '/');
    base = base != NULL ? base + 1 : info.dli_fname;
    if (strncmp(base, "libze_tracing_layer", 19) != 0)
        return; /* the loader's own forwarding copy */
    const char *route = getenv(MTX_ENV_ZE_ROUTE);
    if (route != NULL && *route != '\0' && mt_ze_route_parse(route) == MT_ZE_ROUTE_SYMBOLS)
        return;
    if (atomic_exchange(&registered, 1))
        return;
    /* Our callbacks live in the layer's tracer list: keep the layer loaded. */
    void *layer = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    if (layer == NULL || register_on(layer) != 0) {
        mtx_log("the Level Zero tracing layer %s did not take a tracer; calls that bypass "
                "the loader's exported symbols are not recorded",
                info.dli_fname);
        atomic_store(&registered, 0);
    }
}
