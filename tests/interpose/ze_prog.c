/* ze_prog: a Level Zero program for ze-t, linked with the loader and run with the fake
 * driver. Allocates 3 device, 2 host and 2 shared buffers, frees them, and maps
 * physical memory into a reservation. Prints one line per call the interposer should
 * record, "E action source address size device" (a free carries the size and device
 * the recorder knows for the address), in call order, then "C name n" for
 * how often each memory function reached the driver.
 * With "oom" (FAKE_ZE_MEMORY=1G): allocations the driver refuses for want of device
 * or host memory, "R <i> <result>" for each call and an "E oom" line for each refusal. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ze_prog.h"

static void result(int i, ze_result_t r)
{
    printf("R %d %#x\n", i, (unsigned)r);
}

/* 256 MiB on device 0, then 1 GiB there (768 MiB left), 2 GiB shared on device 1 and
 * 1 TiB of host memory: refused, each recorded as an oom in its place. */
static int oom(void)
{
    ze_driver_handle_t drv;
    ze_device_handle_t dev[2];
    ze_context_handle_t ctx;
    two_device_context(&drv, dev, &ctx);
    ze_device_mem_alloc_desc_t dd = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
    ze_host_mem_alloc_desc_t hd = {.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};
    const size_t mib = 1u << 20, gib = 1u << 30;
    void *d = NULL, *x = NULL;
    ze_result_t r = zeMemAllocDevice(ctx, &dd, 256 * mib, 0, dev[0], &d);
    result(0, r);
    if (r == ZE_RESULT_SUCCESS)
        expect("segment_alloc", "zeMemAllocDevice", d, 256 * mib, 0);
    r = zeMemAllocDevice(ctx, &dd, gib, 0, dev[0], &x);
    result(1, r);
    if (r != ZE_RESULT_SUCCESS)
        expect("oom", "zeMemAllocDevice", NULL, gib, 0);
    r = zeMemAllocShared(ctx, &dd, &hd, 2 * (size_t)gib, 0, dev[1], &x);
    result(2, r);
    if (r != ZE_RESULT_SUCCESS)
        expect("oom", "zeMemAllocShared", NULL, 2 * (size_t)gib, 1);
    r = zeMemAllocHost(ctx, &hd, (size_t)1 << 40, 0, &x);
    result(3, r);
    if (r != ZE_RESULT_SUCCESS)
        expect("oom", "zeMemAllocHost", NULL, (size_t)1 << 40, 0);
    if (d != NULL) {
        expect("segment_free", "zeMemFree", d, 256 * mib, 0);
        CHECK(zeMemFree(ctx, d));
    }
    CHECK(zeContextDestroy(ctx));
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1 && strcmp(argv[1], "oom") == 0)
        return oom();
    ze_driver_handle_t drv;
    ze_device_handle_t dev[2];
    ze_context_handle_t ctx;
    two_device_context(&drv, dev, &ctx);
    ze_device_mem_alloc_desc_t dd = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
    ze_host_mem_alloc_desc_t hd = {.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};

    static const size_t dsize[3] = {1000, 1 << 20, 64}, hsize[2] = {100, 8192},
                        ssize[2] = {4096, 10};
    static const int ddev[3] = {0, 0, 1}, sdev[2] = {1, -1};
    void *d[3], *h[2], *s[2];
    for (int i = 0; i < 3; i++) {
        CHECK(zeMemAllocDevice(ctx, &dd, dsize[i], 0, dev[ddev[i]], &d[i]));
        expect("segment_alloc", "zeMemAllocDevice", d[i], dsize[i], ddev[i]);
    }
    for (int i = 0; i < 2; i++) {
        CHECK(zeMemAllocHost(ctx, &hd, hsize[i], 0, &h[i]));
        expect("segment_alloc", "zeMemAllocHost", h[i], hsize[i], 0);
    }
    for (int i = 0; i < 2; i++) {
        CHECK(
            zeMemAllocShared(ctx, &dd, &hd, ssize[i], 0, sdev[i] < 0 ? NULL : dev[sdev[i]], &s[i]));
        expect("segment_alloc", "zeMemAllocShared", s[i], ssize[i], sdev[i] < 0 ? 0 : sdev[i]);
    }

    ze_memory_free_ext_desc_t fd = {.stype = ZE_STRUCTURE_TYPE_MEMORY_FREE_EXT_DESC};
    expect("segment_free", "zeMemFreeExt", d[1], dsize[1], 0);
    CHECK(zeMemFreeExt(ctx, &fd, d[1]));
    for (int i = 0; i < 3; i += 2) {
        expect("segment_free", "zeMemFree", d[i], dsize[i], ddev[i]);
        CHECK(zeMemFree(ctx, d[i]));
    }
    for (int i = 0; i < 2; i++) {
        expect("segment_free", "zeMemFree", h[i], hsize[i], 0);
        CHECK(zeMemFree(ctx, h[i]));
    }
    for (int i = 0; i < 2; i++) {
        expect("segment_free", "zeMemFree", s[i], ssize[i], sdev[i] < 0 ? 0 : sdev[i]);
        CHECK(zeMemFree(ctx, s[i]));
    }
    /* Not an allocation: the driver refuses it and nothing is recorded. */
    int local;
    if (zeMemFree(ctx, &local) == ZE_RESULT_SUCCESS)
        return 1;

    size_t mib2 = 2u << 20;
    void *va;
    ze_physical_mem_desc_t pd = {.stype = ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, .size = mib2};
    ze_physical_mem_handle_t ph;
    CHECK(zeVirtualMemReserve(ctx, NULL, 2 * mib2, &va));
    expect("annotate", "zeVirtualMemReserve", va, 2 * mib2, 0);
    CHECK(zePhysicalMemCreate(ctx, dev[1], &pd, &ph));
    expect("annotate", "zePhysicalMemCreate", ph, mib2, 1);
    CHECK(zeVirtualMemMap(ctx, va, mib2, ph, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE));
    expect("segment_map", "zeVirtualMemMap", va, mib2, 1);
    expect("segment_unmap", "zeVirtualMemUnmap", va, mib2, 1);
    CHECK(zeVirtualMemUnmap(ctx, va, mib2));
    expect("annotate", "zePhysicalMemDestroy", ph, mib2, 1);
    CHECK(zePhysicalMemDestroy(ctx, ph));
    CHECK(zeVirtualMemFree(ctx, va, 2 * mib2));
    expect("annotate", "zeVirtualMemFree", va, 2 * mib2, 0);
    CHECK(zeContextDestroy(ctx));

    const char *path = getenv("ZE_ENABLE_ALT_DRIVERS");
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    long long (*calls)(const char *) =
        lib ? (long long (*)(const char *))dlsym(lib, "fake_ze_calls") : NULL;
    static const char *const names[] = {
        "zeMemAllocDevice",  "zeMemAllocHost",      "zeMemAllocShared",    "zeMemFree",
        "zeMemFreeExt",      "zeVirtualMemReserve", "zeVirtualMemFree",    "zeVirtualMemMap",
        "zeVirtualMemUnmap", "zePhysicalMemCreate", "zePhysicalMemDestroy"};
    for (size_t i = 0; calls && i < sizeof names / sizeof names[0]; i++)
        printf("C %s %lld\n", names[i], calls(names[i]));
    return 0;
}
