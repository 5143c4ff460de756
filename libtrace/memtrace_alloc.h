/* memtrace_alloc.h: memtrace's caching allocator.
 *
 * One allocator per device, over memtrace's device runtime (memtrace_device.h), with
 * PyTorch's CUDA caching policy: sizes rounded to 512 B (optionally to power-of-two
 * divisions), a small pool (requests <= 1 MiB, carved from 2 MiB segments) and a
 * large pool (20 MiB segments for requests <= 10 MiB, else the request rounded up to
 * 2 MiB), best fit among the cached blocks of the same stream and pool, splitting and
 * merging, max_split_size, cross-stream frees that wait on events, garbage
 * collection, expandable segments, and "free the cache and retry" before reporting
 * out of memory. Every action is recorded through the recorder (memtrace.h) with
 * source "caching_allocator", and the allocator reports its segments and blocks to
 * every snapshot as a state provider.
 *
 * Configuration uses PyTorch's syntax, "key:value,key:value", from the
 * MEMTRACE_ALLOC_CONF environment variable (read when an allocator is created) and
 * from memtrace_alloc_config_set(). Keys:
 *   max_split_size_mb:N             blocks larger than N MiB are never split (N > 1)
 *   roundup_power2_divisions:N      or [256:1,512:2,1024:4,>:8]: round sizes up to
 *                                   one of N divisions of their power-of-two interval
 *                                   (N a power of two, 1 = off; list keys in MiB)
 *   garbage_collection_threshold:F  0 < F < 1: past F * device capacity reserved,
 *                                   free the cached blocks unused for longest first
 *   expandable_segments:True|False  grow one reserved virtual range per stream/pool
 *   oom_snapshot:PATH               on out-of-memory, write a snapshot to PATH; "%p"
 *                                   in PATH becomes the pid, "%d" the device, "%n" a
 *                                   counter, "%%" a percent sign
 *   release_lock_on_cudamalloc:B    accepted for compatibility; no effect (the
 *                                   device calls are short on every backend)
 *   pinned_use_cuda_host_register:B accepted for compatibility; no effect (memtrace
 *                                   has no pinned host allocator)
 *
 * All functions are thread-safe (one lock per allocator) and return 0 or a negative
 * MEMTRACE_E* code unless stated otherwise. */
#ifndef MEMTRACE_ALLOC_H
#define MEMTRACE_ALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memtrace.h"
#include "memtrace_device.h"

#ifdef __cplusplus
extern "C" {
#endif

struct memtrace_allocator;

/* Creates an allocator over device dev (which must stay open while the allocator
 * lives), configured by MEMTRACE_ALLOC_CONF and then by every
 * memtrace_alloc_config_set() so far. Returns MEMTRACE_ECONFIG if
 * MEMTRACE_ALLOC_CONF is wrong (the error is logged to stderr), MEMTRACE_ENOMEM. */
MEMTRACE_API int memtrace_alloc_create(struct memtrace_allocator **out,
                                       struct memtrace_device *dev);
/* Returns every segment to the device, cached or not (blocks still allocated become
 * invalid), and frees the allocator. NULL is accepted. */
MEMTRACE_API void memtrace_alloc_destroy(struct memtrace_allocator *a);
MEMTRACE_API struct memtrace_device *memtrace_alloc_device(const struct memtrace_allocator *a);

/* Allocates size bytes (0 gives a 512 B block) for use on stream s (NULL: the
 * default stream) and stores the address in *addr. Returns MEMTRACE_EOOM when the
 * device has no room even after the cache was freed (an oom event is recorded and
 * the OOM observers are called first), MEMTRACE_EINVAL for a NULL argument. */
MEMTRACE_API int memtrace_alloc_malloc(struct memtrace_allocator *a, size_t size,
                                       struct memtrace_stream *s, uint64_t *addr);
/* As memtrace_alloc_malloc, for a stream memtrace has no object for, named by its
 * handle (for example a cudaStream_t from PyTorch); 0 is the default stream.
 * record_stream cannot name such a stream. */
MEMTRACE_API int memtrace_alloc_malloc_on(struct memtrace_allocator *a, size_t size,
                                          uint64_t stream_id, uint64_t *addr);
/* Frees the block at addr. If the block was used on other streams
 * (memtrace_alloc_record_stream), it stays active_pending_free until the events
 * recorded on those streams complete; the allocator checks them on later calls.
 * Returns MEMTRACE_EINVAL if addr is not an allocated block of a. */
MEMTRACE_API int memtrace_alloc_free(struct memtrace_allocator *a, uint64_t addr);
/* Marks the block at addr as used on stream s too (PyTorch's record_stream). */
MEMTRACE_API int memtrace_alloc_record_stream(struct memtrace_allocator *a, uint64_t addr,
                                              struct memtrace_stream *s);
/* Stores the size of the block at addr (rounded) and what was asked for. */
MEMTRACE_API int memtrace_alloc_block_info(struct memtrace_allocator *a, uint64_t addr,
                                           uint64_t *size, uint64_t *requested);
/* Completes every pending free whose events are done (without waiting). */
MEMTRACE_API int memtrace_alloc_process_events(struct memtrace_allocator *a);
/* Waits for pending frees' events, completes them, then returns every wholly free
 * segment to the device (torch.cuda.empty_cache). */
MEMTRACE_API int memtrace_alloc_empty_cache(struct memtrace_allocator *a);

/* Configuration. */
struct memtrace_alloc_config_error {
    int position;   /* byte offset in the string where the error is, -1 if none */
    char text[256]; /* "MEMTRACE_ALLOC_CONF: unknown key 'x' at 0 (known: ...)" */
};
/* Applies conf to every allocator alive now and to those created later (after
 * MEMTRACE_ALLOC_CONF). On a wrong key or value nothing changes and
 * MEMTRACE_ECONFIG is returned; memtrace_alloc_config_error_text() says why. */
MEMTRACE_API int memtrace_alloc_config_set(const char *conf);
/* As memtrace_alloc_config_set, filling err (may be NULL) on MEMTRACE_ECONFIG. */
MEMTRACE_API int memtrace_alloc_config_set_err(const char *conf,
                                               struct memtrace_alloc_config_error *err);
/* Applies conf to allocator a only. */
MEMTRACE_API int memtrace_alloc_configure(struct memtrace_allocator *a, const char *conf,
                                          struct memtrace_alloc_config_error *err);
/* The text of this thread's last configuration error ("" if none). */
MEMTRACE_API const char *memtrace_alloc_config_error_text(void);
/* Writes a's effective settings as JSON into buf (NUL-terminated); returns the
 * length, or MEMTRACE_EINVAL if it does not fit. */
MEMTRACE_API int memtrace_alloc_settings_json(struct memtrace_allocator *a, char *buf, size_t size);

/* Statistics, as PyTorch's memory_stats(). Index each array with enum
 * memtrace_stat_type. */
enum memtrace_stat_type {
    MEMTRACE_STAT_ALL = 0,
    MEMTRACE_STAT_SMALL_POOL = 1,
    MEMTRACE_STAT_LARGE_POOL = 2,
    MEMTRACE_STAT_TYPES = 3
};
struct memtrace_stat {
    int64_t current;
    int64_t peak;
    int64_t allocated; /* total increments */
    int64_t freed;     /* total decrements */
};
struct memtrace_alloc_stats {
    struct memtrace_stat allocation[MEMTRACE_STAT_TYPES];
    struct memtrace_stat segment[MEMTRACE_STAT_TYPES];
    struct memtrace_stat active[MEMTRACE_STAT_TYPES];
    struct memtrace_stat inactive_split[MEMTRACE_STAT_TYPES];
    struct memtrace_stat allocated_bytes[MEMTRACE_STAT_TYPES];
    struct memtrace_stat reserved_bytes[MEMTRACE_STAT_TYPES];
    struct memtrace_stat active_bytes[MEMTRACE_STAT_TYPES];
    struct memtrace_stat inactive_split_bytes[MEMTRACE_STAT_TYPES];
    struct memtrace_stat requested_bytes[MEMTRACE_STAT_TYPES];
    int64_t num_alloc_retries;
    int64_t num_ooms;
    int64_t num_sync_all_streams;
    int64_t num_device_alloc;
    int64_t num_device_free;
    int64_t max_split_size;
};
MEMTRACE_API int memtrace_alloc_get_stats(struct memtrace_allocator *a,
                                          struct memtrace_alloc_stats *out);
/* Sets every peak to its current value. */
MEMTRACE_API int memtrace_alloc_reset_peak(struct memtrace_allocator *a);
/* Sets every allocated/freed total and the num_* counters to 0. */
MEMTRACE_API int memtrace_alloc_reset_accumulated(struct memtrace_allocator *a);
/* Writes a text table like torch.cuda.memory_summary() into buf (NUL-terminated,
 * truncated if it does not fit); returns the length it needed. */
MEMTRACE_API int memtrace_alloc_summary(struct memtrace_allocator *a, char *buf, size_t size);

/* Out-of-memory observers, process-wide: called once per failed allocation, after the
 * oom event is recorded and outside the allocator's lock (so an observer may dump a
 * snapshot or free memory). */
typedef void (*memtrace_oom_observer_fn)(void *ctx, struct memtrace_allocator *a, int device,
                                         uint64_t size, uint64_t device_free,
                                         uint64_t device_total);
/* Returns a handle (> 0) or a negative MEMTRACE_E* code. */
MEMTRACE_API int memtrace_alloc_oom_observer_add(memtrace_oom_observer_fn fn, void *ctx);
MEMTRACE_API int memtrace_alloc_oom_observer_remove(int handle);

/* PyTorch's CUDAPluggableAllocator entry points (cuda backend; one allocator per
 * device, created on first use). memtrace_torch_malloc returns NULL when out of
 * memory. */
MEMTRACE_API void *memtrace_torch_malloc(ssize_t size, int device, void *stream);
MEMTRACE_API void memtrace_torch_free(void *ptr, ssize_t size, int device, void *stream);
MEMTRACE_API void memtrace_torch_empty_cache(void);
/* The allocator serving device, or NULL before its first allocation. */
MEMTRACE_API struct memtrace_allocator *memtrace_torch_allocator(int device);

#ifdef __cplusplus
}
#endif
#endif
