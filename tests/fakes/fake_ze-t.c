/* fake_ze-t: the fake Level Zero driver, through the real loader: zeInit, devices and
 * their properties, device/host/shared allocations at exact addresses with exact
 * properties, out-of-memory, command lists and events, virtual memory. */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <stdint.h>

#include "tests/tap.h"

#if !MEMTRACE_HAVE_LEVEL_ZERO
int main(void)
{
    skip_all("built without the Level Zero loader (install libze-dev libze1)");
}
#else
#include <level_zero/ze_api.h>

#define GiB (1ULL << 30)
#define MiB (1ULL << 20)
/* The arenas' bases, from the driver: fixed, but chosen by the kernel under
 * ThreadSanitizer. */
static unsigned long long DEV0, DEV1, HOST0, SHARED0, VA0;

static void read_bases(const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    unsigned long long (*base)(const char *) =
        lib ? (unsigned long long (*)(const char *))dlsym(lib, "fake_ze_base") : NULL;
    if (base == NULL)
        bail_out("the fake driver has no fake_ze_base");
    DEV0 = base("device0");
    DEV1 = base("device1");
    HOST0 = base("host");
    SHARED0 = base("shared");
    VA0 = base("va");
    dlclose(lib);
}

static uint64_t addr(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

int main(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/libze_fake.so", FAKE_LIBDIR);
    /* The loader reads these in zeInit, the driver in its own zeInit. */
    setenv("ZE_ENABLE_ALT_DRIVERS", path, 1);
    setenv("FAKE_ZE_MEMORY", "1G", 1);
    setenv("FAKE_ZE_DEVICES", "2", 1);

    ze_result_t rc = zeInit(0);
    if (rc != ZE_RESULT_SUCCESS) {
        diag("zeInit returned %#x", (unsigned)rc);
        bail_out("the loader did not accept the fake driver");
    }
    ok(1, "zeInit through the real loader with the fake driver");
    read_bases(path);

    uint32_t n = 0;
    ze_driver_handle_t drv = NULL;
    zeDriverGet(&n, NULL);
    is_int(1, n, "one driver");
    zeDriverGet(&n, &drv);
    ze_api_version_t ver = 0;
    zeDriverGetApiVersion(drv, &ver);
    is_int(ZE_API_VERSION_CURRENT, ver, "API version");

    ze_device_handle_t dev[2] = {NULL, NULL};
    n = 0;
    zeDeviceGet(drv, &n, NULL);
    is_int(2, n, "FAKE_ZE_DEVICES=2 gives two devices");
    zeDeviceGet(drv, &n, dev);
    ze_device_properties_t dp = {.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES};
    is_int(0, zeDeviceGetProperties(dev[1], &dp), "zeDeviceGetProperties");
    is_string("memtrace fake Level Zero GPU 1", dp.name, "device name");
    is_int(ZE_DEVICE_TYPE_GPU, dp.type, "a GPU");
    is_int((long long)GiB, (long long)dp.maxMemAllocSize, "maxMemAllocSize is the capacity");
    ze_device_memory_properties_t mp = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES};
    n = 0;
    zeDeviceGetMemoryProperties(dev[0], &n, NULL);
    is_int(1, n, "one memory");
    zeDeviceGetMemoryProperties(dev[0], &n, &mp);
    is_int((long long)GiB, (long long)mp.totalSize, "memory totalSize is FAKE_ZE_MEMORY");

    ze_context_desc_t cd = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
    ze_context_handle_t ctx = NULL;
    is_int(0, zeContextCreate(drv, &cd, &ctx), "zeContextCreate");

    ze_device_mem_alloc_desc_t dd = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
    ze_host_mem_alloc_desc_t hd = {.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};
    void *d0 = NULL, *d1 = NULL, *d2 = NULL, *h0 = NULL, *s0 = NULL, *s1 = NULL, *x = NULL;
    is_int(0, zeMemAllocDevice(ctx, &dd, 1000, 0, dev[0], &d0), "zeMemAllocDevice 1000");
    is_int(0, zeMemAllocDevice(ctx, &dd, 1, 0, dev[0], &d1), "zeMemAllocDevice 1");
    is_int(0, zeMemAllocDevice(ctx, &dd, 64, 0, dev[1], &d2), "zeMemAllocDevice on device 1");
    is_int(0, zeMemAllocHost(ctx, &hd, 100, 0, &h0), "zeMemAllocHost");
    is_int(0, zeMemAllocShared(ctx, &dd, &hd, 4096, 0, dev[0], &s0), "zeMemAllocShared");
    is_int(0, zeMemAllocShared(ctx, &dd, &hd, 10, 0, NULL, &s1), "zeMemAllocShared, no device");
    is_int((long long)DEV0, (long long)addr(d0), "device allocation at the arena base");
    is_int((long long)DEV0 + 1024, (long long)addr(d1), "next one 1024 bytes on");
    is_int((long long)DEV1, (long long)addr(d2), "device 1 has its own arena");
    is_int((long long)HOST0, (long long)addr(h0), "host arena base");
    is_int((long long)SHARED0, (long long)addr(s0), "shared arena base");
    is_int((long long)SHARED0 + 4096, (long long)addr(s1), "next shared block");
    is_int(ZE_RESULT_ERROR_UNSUPPORTED_SIZE, zeMemAllocDevice(ctx, &dd, 0, 0, dev[0], &x),
           "zero bytes: UNSUPPORTED_SIZE");
    is_int(ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT, zeMemAllocDevice(ctx, &dd, 8, 3, dev[0], &x),
           "alignment 3: UNSUPPORTED_ALIGNMENT");
    is_int(0, zeMemAllocDevice(ctx, &dd, 8, 65536, dev[0], &x), "alignment 64 KiB");
    is_int((long long)DEV0 + 65536, (long long)addr(x), "aligned address");
    zeMemFree(ctx, x);

    ze_memory_allocation_properties_t ap = {.stype =
                                                ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES};
    ze_device_handle_t owner = NULL;
    zeMemGetAllocProperties(ctx, d2, &ap, &owner);
    ok(ap.type == ZE_MEMORY_TYPE_DEVICE && owner == dev[1], "device memory of device 1");
    zeMemGetAllocProperties(ctx, (char *)h0 + 50, &ap, &owner);
    ok(ap.type == ZE_MEMORY_TYPE_HOST && owner == NULL, "interior pointer of host memory");
    zeMemGetAllocProperties(ctx, s0, &ap, &owner);
    ok(ap.type == ZE_MEMORY_TYPE_SHARED && owner == dev[0], "shared memory of device 0");
    int local = 0;
    zeMemGetAllocProperties(ctx, &local, &ap, &owner);
    is_int(ZE_MEMORY_TYPE_UNKNOWN, ap.type, "a stack address is unknown");
    void *base = NULL;
    size_t size = 0;
    zeMemGetAddressRange(ctx, (char *)d0 + 999, &base, &size);
    ok(base == d0 && size == 1000, "zeMemGetAddressRange");

    /* Capacity: device and shared-with-device memory count, host memory does not. */
    uint64_t used = 1000 + 1 + 4096;
    is_int(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY,
           zeMemAllocDevice(ctx, &dd, GiB - used + 1, 0, dev[0], &x), "one byte over: OOM");
    is_int(0, zeMemAllocDevice(ctx, &dd, GiB - used, 0, dev[0], &x), "exactly what is left");
    is_int(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY, zeMemAllocShared(ctx, &dd, &hd, 1, 0, dev[0], &s1),
           "shared memory on a full device: OOM");
    is_int(0, zeMemAllocHost(ctx, &hd, 1, 0, &s1), "host memory still available");
    zeMemFree(ctx, s1);
    is_int(0, zeMemFree(ctx, x), "zeMemFree");
    is_int(ZE_RESULT_ERROR_INVALID_ARGUMENT, zeMemFree(ctx, x), "double free: INVALID_ARGUMENT");

    /* Command lists: immediate and queued, with events. */
    ze_command_queue_desc_t qd = {.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC};
    ze_command_list_desc_t ld = {.stype = ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC};
    ze_command_list_handle_t imm = NULL, list = NULL;
    ze_command_queue_handle_t q = NULL;
    ze_event_pool_desc_t pd = {.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
                               .flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE,
                               .count = 2};
    ze_event_pool_handle_t pool = NULL;
    ze_event_desc_t ed = {.stype = ZE_STRUCTURE_TYPE_EVENT_DESC, .index = 0};
    ze_event_handle_t ev = NULL;
    is_int(0, zeEventPoolCreate(ctx, &pd, 1, dev, &pool), "zeEventPoolCreate");
    is_int(0, zeEventCreate(pool, &ed, &ev), "zeEventCreate");
    is_int(ZE_RESULT_NOT_READY, zeEventQueryStatus(ev), "new event not signalled");
    is_int(0, zeCommandListCreateImmediate(ctx, dev[0], &qd, &imm), "immediate list");
    char msg[] = "through the fake device", back[sizeof msg] = {0};
    zeCommandListAppendMemoryCopy(imm, d0, msg, sizeof msg, NULL, 0, NULL);
    zeCommandListAppendMemoryCopy(imm, back, d0, sizeof msg, ev, 0, NULL);
    is_string(msg, back, "immediate copies ran");
    is_int(0, zeEventHostSynchronize(ev, UINT64_MAX), "signal event signalled");
    zeEventHostReset(ev);
    is_int(0, zeCommandQueueCreate(ctx, dev[0], &qd, &q), "zeCommandQueueCreate");
    is_int(0, zeCommandListCreate(ctx, dev[0], &ld, &list), "zeCommandListCreate");
    uint32_t pattern = 0xabcdef01;
    zeCommandListAppendMemoryFill(list, s0, &pattern, sizeof pattern, 4096, NULL, 0, NULL);
    zeCommandListAppendBarrier(list, NULL, 0, NULL);
    zeCommandListAppendSignalEvent(list, ev);
    zeCommandListClose(list);
    is_int(0, ((uint32_t *)s0)[1023], "nothing runs before execution");
    is_int(ZE_RESULT_NOT_READY, zeEventQueryStatus(ev), "event not signalled yet");
    is_int(0, zeCommandQueueExecuteCommandLists(q, 1, &list, NULL), "execute");
    is_int(0, zeCommandQueueSynchronize(q, UINT64_MAX), "zeCommandQueueSynchronize");
    is_int(0xabcdef01, ((uint32_t *)s0)[1023], "fill ran on shared memory");
    is_int(0, zeEventQueryStatus(ev), "event signalled by the list");
    zeCommandListDestroy(list);
    zeCommandListDestroy(imm);
    zeCommandQueueDestroy(q);
    zeEventDestroy(ev);
    zeEventPoolDestroy(pool);

    /* Virtual memory on real pages. */
    size_t page = 0;
    void *va = NULL;
    ze_physical_mem_desc_t phd = {.stype = ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, .size = 2 * MiB};
    ze_physical_mem_handle_t ph = NULL;
    zeVirtualMemQueryPageSize(ctx, dev[0], 2 * MiB, &page);
    is_int(2 * MiB, (long long)page, "page size for 2 MiB");
    is_int(0, zeVirtualMemReserve(ctx, NULL, 4 * MiB, &va), "zeVirtualMemReserve 4 MiB");
    is_int((long long)VA0, (long long)addr(va), "reservation at the VA arena base");
    is_int(0, zePhysicalMemCreate(ctx, dev[1], &phd, &ph), "zePhysicalMemCreate 2 MiB");
    is_int(0,
           zeVirtualMemMap(ctx, (char *)va + 2 * MiB, 2 * MiB, ph, 0,
                           ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE),
           "zeVirtualMemMap");
    memset((char *)va + 2 * MiB, 7, 2 * MiB);
    is_int(7, ((unsigned char *)va)[4 * MiB - 1], "mapped memory is writable");
    is_int(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY,
           zeMemAllocDevice(ctx, &dd, GiB - 64 - 2 * MiB + 1, 0, dev[1], &x),
           "physical memory counts against device 1");
    is_int(ZE_RESULT_ERROR_INVALID_ARGUMENT, zeVirtualMemFree(ctx, va, 4 * MiB),
           "cannot free a mapped reservation");
    is_int(0, zeVirtualMemUnmap(ctx, (char *)va + 2 * MiB, 2 * MiB), "zeVirtualMemUnmap");
    is_int(0, zePhysicalMemDestroy(ctx, ph), "zePhysicalMemDestroy");
    is_int(0, zeVirtualMemFree(ctx, va, 4 * MiB), "zeVirtualMemFree");
    is_int(0, zeMemAllocDevice(ctx, &dd, GiB - 64, 0, dev[1], &x), "device 1 memory back");
    zeMemFree(ctx, x);

    ze_memory_free_ext_desc_t fd = {.stype = ZE_STRUCTURE_TYPE_MEMORY_FREE_EXT_DESC,
                                    .freePolicy =
                                        ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE};
    is_int(0, zeMemFreeExt(ctx, &fd, d0), "zeMemFreeExt");
    is_int(0, zeMemFree(ctx, d1), "zeMemFree d1");
    is_int(0, zeMemFree(ctx, d2), "zeMemFree d2");
    is_int(0, zeMemFree(ctx, h0), "zeMemFree host");
    is_int(0, zeMemFree(ctx, s0), "zeMemFree shared");
    is_int(0, zeMemAllocDevice(ctx, &dd, 10, 0, dev[0], &x), "after freeing everything");
    is_int((long long)DEV0, (long long)addr(x), "the arena starts over at its base");
    zeMemFree(ctx, x);

    /* The driver's own counters, found in the copy the loader opened. */
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    long long (*calls)(const char *) =
        lib ? (long long (*)(const char *))dlsym(lib, "fake_ze_calls") : NULL;
    ok(calls != NULL, "the loader loaded the fake from ZE_ENABLE_ALT_DRIVERS");
    if (calls) {
        is_int(11, calls("zeMemAllocDevice"), "zeMemAllocDevice reached the driver 11 times");
        is_int(1, calls("zeMemFreeExt"), "zeMemFreeExt once");
        is_int(1, calls("zeVirtualMemMap"), "zeVirtualMemMap once");
    } else {
        skip(3, "no fake_ze_calls");
    }
    if (lib)
        dlclose(lib);

    zeContextDestroy(ctx);
    done_testing();
    return exit_status();
}
#endif
