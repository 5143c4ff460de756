/* ze_prog.h: what the Level Zero test programs share: a CHECK that stops on the
 * first failed call, the "E action source address size device" line the tests read
 * (harness.h's h_parse_wants), and, for programs that call the loader's exported
 * functions, the two-device context the fake driver gives with FAKE_ZE_DEVICES=2. */
#ifndef MEMTRACE_TESTS_ZE_PROG_H
#define MEMTRACE_TESTS_ZE_PROG_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <level_zero/ze_api.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        ze_result_t rc_ = (call);                                                                  \
        if (rc_ != ZE_RESULT_SUCCESS) {                                                            \
            fprintf(stderr, "%s failed: %#x\n", #call, (unsigned)rc_);                             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static inline void expect(const char *action, const char *source, const void *addr, size_t size,
                          int device)
{
    printf("E %s %s %llx %zu %d\n", action, source, (unsigned long long)(uintptr_t)addr, size,
           device);
}

/* The fake's two devices must both be there; exits 1 otherwise. */
static inline void need_two_devices(uint32_t n)
{
    if (n != 2) {
        fprintf(stderr, "need two devices (FAKE_ZE_DEVICES=2)\n");
        exit(1);
    }
}

#ifndef ZE_PROG_NO_EXPORTS
/* zeInit, the first driver, its two devices and a context on it. */
static inline void two_device_context(ze_driver_handle_t *drv, ze_device_handle_t dev[2],
                                      ze_context_handle_t *ctx)
{
    CHECK(zeInit(0));
    uint32_t n = 1;
    CHECK(zeDriverGet(&n, drv));
    n = 2;
    CHECK(zeDeviceGet(*drv, &n, dev));
    need_two_devices(n);
    ze_context_desc_t cd = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
    CHECK(zeContextCreate(*drv, &cd, ctx));
}
#endif

#endif
