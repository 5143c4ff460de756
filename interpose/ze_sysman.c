/* ze_sysman.c: Level Zero device memory figures for the sampler thread.
 *
 * For each device the program allocated on, the sum over its device-local memory
 * modules of zesMemoryGetState's size and size - free, through the loader the
 * program already loaded (never loading one). The 1.8 loader has no zesInit: sysman
 * takes the core device handles, and drivers answer only when ZES_ENABLE_SYSMAN=1
 * was set before zeInit; without it there are no figures and one line says why.
 * The sampler thread calls this outside every wrapper and lock; an allocation that
 * failed asks for its device's free bytes (mt_ze_free_bytes) from the program's
 * thread, so the lookup of the functions happens once, under pthread_once. */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "interpose.h"
#include "mtx/util.h"
#include "ze.h"

#define ZES_STRUCTURE_TYPE_MEM_PROPERTIES 0xbu
#define ZES_STRUCTURE_TYPE_MEM_STATE      0x1eu
#define ZES_MEM_LOC_DEVICE                1u
#define MAX_MODULES                       16

struct zes_mem_props {
    uint32_t stype;
    void *next;
    uint32_t type;
    uint8_t on_subdevice;
    uint32_t subdevice_id;
    uint32_t location;
    uint64_t physical_size;
    int32_t bus_width;
    int32_t channels;
};

struct zes_mem_state {
    uint32_t stype;
    const void *next;
    uint32_t health;
    uint64_t free;
    uint64_t size;
};

static int resolved; /* 0 not yet, 1 found, -1 no loader in the process */
static ze_result_t (*enum_modules)(ze_handle dev, uint32_t *count, ze_handle *modules);
static ze_result_t (*get_props)(ze_handle module, struct zes_mem_props *p);
static ze_result_t (*get_state)(ze_handle module, struct zes_mem_state *s);
static atomic_int warned;
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;

static void resolve_now(void)
{
    resolved = -1;
    void *h = dlopen("libze_loader.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h == NULL)
        return;
    enum_modules = (ze_result_t(*)(ze_handle, uint32_t *, ze_handle *))mt_real_dlsym(
        h, "zesDeviceEnumMemoryModules");
    get_props = (ze_result_t(*)(ze_handle, struct zes_mem_props *))mt_real_dlsym(
        h, "zesMemoryGetProperties");
    get_state =
        (ze_result_t(*)(ze_handle, struct zes_mem_state *))mt_real_dlsym(h, "zesMemoryGetState");
    /* The loader stays loaded while the program holds device memory; the handle's
     * reference keeps it so for these pointers. */
    if (enum_modules != NULL && get_props != NULL && get_state != NULL)
        resolved = 1;
    else
        dlclose(h);
}

static int resolve(void)
{
    pthread_once(&resolve_once, resolve_now);
    return resolved;
}

/* quiet: the caller has its own answer for no figures (no line). */
static int device_memory(ze_handle dev, uint64_t *used, uint64_t *total, int quiet)
{
    ze_handle mods[MAX_MODULES];
    uint32_t n = MAX_MODULES;
    ze_result_t r = enum_modules(dev, &n, mods);
    if (r != ZE_RESULT_SUCCESS) {
        if (!quiet && !atomic_exchange(&warned, 1)) {
            mtx_log("Level Zero sysman answered 0x%x: no device memory counters (set "
                    "ZES_ENABLE_SYSMAN=1 before the program's zeInit)",
                    (unsigned)r);
        }
        return -1;
    }
    *used = *total = 0;
    int found = 0;
    for (uint32_t i = 0; i < n && i < MAX_MODULES; i++) {
        struct zes_mem_props p = {.stype = ZES_STRUCTURE_TYPE_MEM_PROPERTIES};
        struct zes_mem_state s = {.stype = ZES_STRUCTURE_TYPE_MEM_STATE};
        if (get_props(mods[i], &p) != ZE_RESULT_SUCCESS || p.location != ZES_MEM_LOC_DEVICE ||
            get_state(mods[i], &s) != ZE_RESULT_SUCCESS || s.free > s.size)
            continue;
        *used += s.size - s.free;
        *total += s.size;
        found = 1;
    }
    return found ? 0 : -1;
}

int mt_ze_sample(uint64_t rss)
{
    static uint32_t src_id;
    ze_handle devs[MT_ZE_MAX_DEVICES];
    int n = mt_ze_devices_used(devs, MT_ZE_MAX_DEVICES), recorded = 0;
    if (n == 0 || resolve() < 0)
        return 0;
    for (int i = 0; i < n; i++) {
        uint64_t used, total;
        if (devs[i] == NULL || device_memory(devs[i], &used, &total, 0) != 0)
            continue;
        struct memtrace_event ev = {
            .action = MEMTRACE_COUNTER,
            .device = i,
            .addr = used,
            .size = total,
            .requested_size = rss,
        };
        if (src_id == 0)
            src_id = memtrace_intern("sampler");
        ev.source = src_id;
        if (memtrace_record_event(&ev) == 0)
            recorded++;
    }
    return recorded;
}

uint64_t mt_ze_free_bytes(ze_handle dev)
{
    uint64_t used, total;
    if (dev == NULL || resolve() < 0 || device_memory(dev, &used, &total, 1) != 0)
        return 0;
    return total - used;
}
