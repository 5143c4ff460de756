/* ze_dl_prog: a stand-in for a program with a statically linked Level Zero loader,
 * for ze_trace-t. It never calls the loader's exported symbols through the dynamic
 * linker: it opens the loader privately (RTLD_LOCAL, so nothing resolves to it by
 * name; not RTLD_DEEPBIND, which sanitizer runtimes refuse), takes zeInit and the
 * enumeration functions by handle,
 * and makes every memory call through the dispatch tables zeGet*ProcAddrTable
 * hands out, as a static loader's own API entry points do. Prints the same
 * "E action source address size device" lines as ze_prog. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define ZE_PROG_NO_EXPORTS /* it must not name the loader's symbols */
#include "ze_prog.h"
#include <level_zero/ze_ddi.h>

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (p == NULL) {
        fprintf(stderr, "no %s in the loader\n", name);
        exit(1);
    }
    return p;
}

int main(void)
{
    void *lib = dlopen("libze_loader.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    ze_pfnInit_t init = (ze_pfnInit_t)sym(lib, "zeInit");
    ze_pfnDriverGet_t driver_get = (ze_pfnDriverGet_t)sym(lib, "zeDriverGet");
    ze_pfnDeviceGet_t device_get = (ze_pfnDeviceGet_t)sym(lib, "zeDeviceGet");
    ze_pfnContextCreate_t context_create = (ze_pfnContextCreate_t)sym(lib, "zeContextCreate");
    ze_pfnContextDestroy_t context_destroy = (ze_pfnContextDestroy_t)sym(lib, "zeContextDestroy");
    ze_pfnGetMemProcAddrTable_t mem_table =
        (ze_pfnGetMemProcAddrTable_t)sym(lib, "zeGetMemProcAddrTable");
    ze_pfnGetVirtualMemProcAddrTable_t vm_table =
        (ze_pfnGetVirtualMemProcAddrTable_t)sym(lib, "zeGetVirtualMemProcAddrTable");
    ze_pfnGetPhysicalMemProcAddrTable_t pm_table =
        (ze_pfnGetPhysicalMemProcAddrTable_t)sym(lib, "zeGetPhysicalMemProcAddrTable");

    CHECK(init(0));
    ze_mem_dditable_t mem;
    ze_virtual_mem_dditable_t vm;
    ze_physical_mem_dditable_t pm;
    CHECK(mem_table(ZE_API_VERSION_CURRENT, &mem));
    CHECK(vm_table(ZE_API_VERSION_CURRENT, &vm));
    CHECK(pm_table(ZE_API_VERSION_CURRENT, &pm));

    uint32_t n = 1;
    ze_driver_handle_t drv;
    CHECK(driver_get(&n, &drv));
    ze_device_handle_t dev[2];
    n = 2;
    CHECK(device_get(drv, &n, dev));
    need_two_devices(n);
    ze_context_desc_t cd = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
    ze_context_handle_t ctx;
    CHECK(context_create(drv, &cd, &ctx));
    ze_device_mem_alloc_desc_t dd = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
    ze_host_mem_alloc_desc_t hd = {.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};

    void *d0, *d1, *h, *s;
    CHECK(mem.pfnAllocDevice(ctx, &dd, 4096, 0, dev[0], &d0));
    expect("segment_alloc", "zeMemAllocDevice", d0, 4096, 0);
    CHECK(mem.pfnAllocDevice(ctx, &dd, 100, 0, dev[1], &d1));
    expect("segment_alloc", "zeMemAllocDevice", d1, 100, 1);
    CHECK(mem.pfnAllocHost(ctx, &hd, 256, 0, &h));
    expect("segment_alloc", "zeMemAllocHost", h, 256, 0);
    CHECK(mem.pfnAllocShared(ctx, &dd, &hd, 512, 0, dev[1], &s));
    expect("segment_alloc", "zeMemAllocShared", s, 512, 1);
    ze_memory_free_ext_desc_t fd = {.stype = ZE_STRUCTURE_TYPE_MEMORY_FREE_EXT_DESC};
    expect("segment_free", "zeMemFreeExt", d1, 100, 1);
    CHECK(mem.pfnFreeExt(ctx, &fd, d1));
    expect("segment_free", "zeMemFree", d0, 4096, 0);
    CHECK(mem.pfnFree(ctx, d0));
    expect("segment_free", "zeMemFree", h, 256, 0);
    CHECK(mem.pfnFree(ctx, h));
    expect("segment_free", "zeMemFree", s, 512, 1);
    CHECK(mem.pfnFree(ctx, s));
    /* Not an allocation: the driver refuses it and nothing is recorded. */
    int local;
    if (mem.pfnFree(ctx, &local) == ZE_RESULT_SUCCESS)
        return 1;

    size_t mib2 = 2u << 20;
    void *va;
    ze_physical_mem_desc_t pd = {.stype = ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, .size = mib2};
    ze_physical_mem_handle_t ph;
    CHECK(vm.pfnReserve(ctx, NULL, mib2, &va));
    expect("annotate", "zeVirtualMemReserve", va, mib2, 0);
    CHECK(pm.pfnCreate(ctx, dev[0], &pd, &ph));
    expect("annotate", "zePhysicalMemCreate", ph, mib2, 0);
    CHECK(vm.pfnMap(ctx, va, mib2, ph, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE));
    expect("segment_map", "zeVirtualMemMap", va, mib2, 0);
    expect("segment_unmap", "zeVirtualMemUnmap", va, mib2, 0);
    CHECK(vm.pfnUnmap(ctx, va, mib2));
    expect("annotate", "zePhysicalMemDestroy", ph, mib2, 0);
    CHECK(pm.pfnDestroy(ctx, ph));
    CHECK(vm.pfnFree(ctx, va, mib2));
    expect("annotate", "zeVirtualMemFree", va, mib2, 0);
    CHECK(context_destroy(ctx));
    return 0;
}
