/* ze.h: what the Level Zero sources of the preload library share (ze.c, the
 * exported-symbol route; ze_trace.c, the tracing-layer route; ze_sysman.c, the
 * sampler's device memory figures). No Level Zero header is needed: handles are
 * pointers and the few structures read are mirrored here. */
#ifndef MEMTRACE_INTERPOSE_ZE_H
#define MEMTRACE_INTERPOSE_ZE_H

#include <stddef.h>
#include <stdint.h>

typedef uint32_t ze_result_t;
typedef void *ze_handle;

#define ZE_RESULT_SUCCESS                    0u
#define ZE_RESULT_ERROR_UNINITIALIZED        0x78000001u
#define ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY   0x70000002u
#define ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY 0x70000003u
#define MT_ZE_MAX_DEVICES                    64

struct ze_physical_desc {
    uint32_t stype;
    const void *next;
    uint32_t flags;
    size_t size;
};

/* The index of a device handle in zeDriverGet/zeDeviceGet order, asking the loader's
 * exported functions (0 for NULL or a handle not found). */
int mt_ze_device_index(ze_handle dev);

/* Records an allocation of size bytes at addr on device idx (handle dev, NULL for
 * host memory) and remembers it for frees seen by either route. */
void mt_ze_alloc(const char *src, uint32_t *src_id, int idx, ze_handle dev, const void *addr,
                 size_t size);
/* Records an oom event: size bytes asked for on device idx (handle dev, NULL for
 * host memory) and refused with r, with the device's free bytes then where sysman
 * gives them (else 0). Nothing for results other than out of device or host memory. */
void mt_ze_oom(const char *src, uint32_t *src_id, int idx, ze_handle dev, size_t size,
               ze_result_t r);
/* Records the free of addr if an allocation there was recorded; 1 if it was. */
int mt_ze_free_known(const char *src, uint32_t *src_id, const void *addr);
/* Forgets addr (a free recorded another way). */
void mt_ze_forget(const void *addr);

/* Physical memory handles and their devices, for the maps made of them. */
void mt_ze_phys_note(ze_handle h, int dev);
int mt_ze_phys_device(ze_handle h, int forget);

/* MEMTRACE_ZE_ROUTE: auto (both; the exported symbols win where they see the call),
 * symbols (exported loader symbols only), tracing (the loader's tracing layer only). */
enum { MT_ZE_ROUTE_AUTO = 0, MT_ZE_ROUTE_SYMBOLS, MT_ZE_ROUTE_TRACING };
/* MT_ZE_ROUTE_* for a MEMTRACE_ZE_ROUTE value, or -1. */
int mt_ze_route_parse(const char *s);
/* The route read when recording started (ze.c). */
int mt_ze_route(void);

/* The dlsym hook's view of every lookup of a "zel" name and what it found (the
 * loader looking up the tracing layer's entry points, ze_trace.c). */
void mt_ze_dlsym_seen(const char *name, void *found);
/* Records one counter per device the program used (ze_sysman.c); how many. */
int mt_ze_sample(uint64_t rss);
/* Free bytes of device dev's local memory from sysman, 0 when it has no figures. */
uint64_t mt_ze_free_bytes(ze_handle dev);

/* 1 once a tracer is registered with the loader's tracing layer (ze_trace.c). */
int mt_ze_tracing_registered(void);

/* Devices holding memory the program allocated: handles[i] is device i's handle or
 * NULL; returns 1 + the highest index used (0 if none). */
int mt_ze_devices_used(ze_handle *handles, int max);

#endif
