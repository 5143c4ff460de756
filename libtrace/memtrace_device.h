/* memtrace_device.h: memtrace's small device runtime.
 *
 * One interface over three backends: "host" (a simulated device in host memory with
 * a fixed capacity, streams served by worker threads; the default), "cuda" (the
 * driver API, loaded with dlopen("libcuda.so.1") on first use) and "level_zero"
 * (through the Level Zero loader, when built with it). Device addresses are
 * uint64_t; on the host backend they are host pointers, so kernels can use them
 * directly (memtrace_device_ptr()).
 *
 * Every int function returns 0 or a negative MEMTRACE_E* code: MEMTRACE_EOOM when
 * the device has no room, MEMTRACE_ENODEV when the backend or device is absent,
 * MEMTRACE_ENOTSUP when the backend lacks the operation. Thread-safe. */
#ifndef MEMTRACE_DEVICE_H
#define MEMTRACE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "memtrace.h"

#ifdef __cplusplus
extern "C" {
#endif

struct memtrace_device;
struct memtrace_stream;
struct memtrace_devevent;

typedef void (*memtrace_kernel_fn)(void *arg);

/* Opens device index of backend ("host", "cuda", "level_zero"; NULL means the
 * MEMTRACE_DEVICE environment variable, else "host"). The host device's capacity is
 * MEMTRACE_HOST_CAPACITY (bytes, with an optional K/M/G suffix; default 8G) unless
 * set with memtrace_device_open_host(). Opening the same backend and index twice
 * returns the same device (reference counted). */
MEMTRACE_API int memtrace_device_open(struct memtrace_device **out, const char *backend, int index);
/* Opens a new host device with capacity bytes (not shared). */
MEMTRACE_API int memtrace_device_open_host(struct memtrace_device **out, uint64_t capacity);
MEMTRACE_API void memtrace_device_close(struct memtrace_device *d);

MEMTRACE_API const char *memtrace_device_backend(const struct memtrace_device *d);
MEMTRACE_API const char *memtrace_device_name(const struct memtrace_device *d);
MEMTRACE_API int memtrace_device_index(const struct memtrace_device *d);

/* Free and total bytes as the device reports them. */
MEMTRACE_API int memtrace_device_mem_info(struct memtrace_device *d, uint64_t *free_bytes,
                                          uint64_t *total_bytes);

/* Raw device memory, not cached and not recorded. */
MEMTRACE_API int memtrace_device_malloc(struct memtrace_device *d, size_t size, uint64_t *addr);
MEMTRACE_API int memtrace_device_free(struct memtrace_device *d, uint64_t addr);

/* Virtual memory (expandable segments): reserve an address range, then map and
 * unmap physical memory of granularity-multiple sizes inside it. */
MEMTRACE_API size_t memtrace_device_granularity(struct memtrace_device *d);
MEMTRACE_API int memtrace_device_reserve(struct memtrace_device *d, size_t size, uint64_t *addr);
MEMTRACE_API int memtrace_device_release(struct memtrace_device *d, uint64_t addr, size_t size);
MEMTRACE_API int memtrace_device_map(struct memtrace_device *d, uint64_t addr, size_t size);
MEMTRACE_API int memtrace_device_unmap(struct memtrace_device *d, uint64_t addr, size_t size);

/* A host-visible pointer to device address addr (host backend: addr itself);
 * NULL on backends without one. */
MEMTRACE_API void *memtrace_device_ptr(struct memtrace_device *d, uint64_t addr);

/* Streams run work in order. memtrace_stream_id() is the handle recorded in events
 * (0 for the default stream, passed as NULL everywhere a stream is taken). */
MEMTRACE_API int memtrace_stream_create(struct memtrace_device *d, struct memtrace_stream **out);
MEMTRACE_API int memtrace_stream_destroy(struct memtrace_stream *s);
MEMTRACE_API uint64_t memtrace_stream_id(const struct memtrace_stream *s);
/* Runs fn(arg) on the stream after everything enqueued before it. */
MEMTRACE_API int memtrace_stream_launch(struct memtrace_device *d, struct memtrace_stream *s,
                                        memtrace_kernel_fn fn, void *arg);
MEMTRACE_API int memtrace_stream_sync(struct memtrace_device *d, struct memtrace_stream *s);

/* Events order work across streams. */
MEMTRACE_API int memtrace_devevent_create(struct memtrace_device *d,
                                          struct memtrace_devevent **out);
MEMTRACE_API int memtrace_devevent_destroy(struct memtrace_devevent *e);
MEMTRACE_API int memtrace_devevent_record(struct memtrace_devevent *e, struct memtrace_stream *s);
/* 1 if every work item before the record has completed, 0 if not yet, <0 error. */
MEMTRACE_API int memtrace_devevent_query(struct memtrace_devevent *e);
MEMTRACE_API int memtrace_devevent_sync(struct memtrace_devevent *e);
/* Work enqueued on s after this call waits for e. */
MEMTRACE_API int memtrace_stream_wait(struct memtrace_stream *s, struct memtrace_devevent *e);

/* Waits for every stream of the device. */
MEMTRACE_API int memtrace_device_sync(struct memtrace_device *d);

#ifdef __cplusplus
}
#endif
#endif
