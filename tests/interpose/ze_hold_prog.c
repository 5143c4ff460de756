/* ze_hold_prog: holds a known amount of Level Zero device memory for a while, for
 * ze_sysman-t. Allocates 1 MiB + 1000 bytes on device 0 (two device allocations),
 * 8192 bytes of shared memory placed on device 1 and 300 bytes of host memory
 * (which counts on no device), sleeps argv[1] ms, frees everything and sleeps
 * argv[1] ms again. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ze_prog.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv)
{
    long ms = argc > 1 ? atol(argv[1]) : 100;
    ze_driver_handle_t drv;
    ze_device_handle_t dev[2];
    ze_context_handle_t ctx;
    two_device_context(&drv, dev, &ctx);
    ze_device_mem_alloc_desc_t dd = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
    ze_host_mem_alloc_desc_t hd = {.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};
    void *a, *b, *s, *h;
    CHECK(zeMemAllocDevice(ctx, &dd, 1 << 20, 0, dev[0], &a));
    CHECK(zeMemAllocDevice(ctx, &dd, 1000, 0, dev[0], &b));
    CHECK(zeMemAllocShared(ctx, &dd, &hd, 8192, 0, dev[1], &s));
    CHECK(zeMemAllocHost(ctx, &hd, 300, 0, &h));
    sleep_ms(ms);
    CHECK(zeMemFree(ctx, a));
    CHECK(zeMemFree(ctx, b));
    CHECK(zeMemFree(ctx, s));
    CHECK(zeMemFree(ctx, h));
    sleep_ms(ms);
    CHECK(zeContextDestroy(ctx));
    return 0;
}
