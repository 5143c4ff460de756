/* caching.h: MEMTRACE_CACHING=1, the program's device allocations served by
 * memtrace's caching allocator (interpose/caching.c). */
#ifndef MEMTRACE_INTERPOSE_CACHING_H
#define MEMTRACE_INTERPOSE_CACHING_H

#include <stddef.h>
#include <stdint.h>

/* What mt_caching_alloc returns besides 0. */
enum { MT_CACHING_PASS = -1, MT_CACHING_OOM = 2 };

/* Allocates size bytes for the stream named by stream (0: the legacy default
 * stream) from the allocator of the calling thread's current device, and stores the
 * address in *addr. Returns 0; MT_CACHING_OOM (the driver's and the runtime's "out
 * of memory", 2) when the device has no room even after the allocator freed its
 * cache, the oom event recorded; or MT_CACHING_PASS when the allocator cannot serve
 * the call (size 0, no allocator for the device, called from inside the allocator):
 * the caller then calls the driver. Call inside mt_ip_enter()/mt_ip_leave(). */
int mt_caching_alloc(uint64_t *addr, size_t size, uint64_t stream);

/* If addr is a block of one of the allocators, frees it and returns 1; returns 0
 * for any other address, which belongs to the driver. With sync set, the stream s
 * is synchronized first: the block may next be handed out on its allocation
 * stream, which does not wait for work queued on s. */
int mt_caching_free(uint64_t addr, int sync, void *s);

#endif
