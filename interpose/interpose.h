/* interpose.h: what the interposer's parts share (internal to libmemtrace_preload).
 *
 * The preload library does nothing at load time beyond saving function pointers:
 * the recorder starts on the first device call a process makes (so children that
 * never touch a device pay nothing), with the configuration read from the
 * environment then. Wrappers follow one pattern:
 *
 *     if (!mt_ip_enter()) return real(args);      // re-entered, or disabled
 *     result = real(args);
 *     if (result == success) mt_ip_record(...);
 *     mt_ip_leave();
 */
#ifndef MEMTRACE_INTERPOSE_H
#define MEMTRACE_INTERPOSE_H

#include <stdint.h>

#include "memtrace.h"

/* The dynamic linker's own dlsym, never the exported hook. */
void *mt_real_dlsym(void *handle, const char *name);

/* Re-entry guard: returns 1 (and marks this thread busy) if the caller should record,
 * 0 if this thread is already inside a wrapper or recording is disabled. Starts the
 * recorder on first use in a process. Every 1 must be paired with mt_ip_leave(). */
int mt_ip_enter(void);
void mt_ip_leave(void);

/* Records one event from a wrapper: fills the time, thread and stack (honouring the
 * configured depth), interns source (the API name) once per call site through the
 * cache slot *source_id (a static initialised to 0), and tracks live segments for the
 * state written at dumps and at exit. */
void mt_ip_record(int action, int device, uint64_t stream, uint64_t addr, uint64_t size,
                  uint64_t aux, const char *source, uint32_t *source_id);

/* Configuration read from the environment (interpose/config.c), see docs. */
struct mt_ip_config {
    char output[4096]; /* path pattern, %p %r %h expanded */
    int stack_depth;   /* 0 = no stacks */
    int stack_kind;    /* enum memtrace_stacks */
    unsigned flush_ms;
    size_t max_entries;
    int dump_signal;    /* 0 = none */
    int caching;        /* route allocations through memtrace's caching allocator */
    unsigned sample_ms; /* device memory sampling period, 0 = off */
    int ze_route;       /* MT_ZE_ROUTE_*: which Level Zero route records */
};

/* MEMTRACE_ZE_ROUTE: auto (both; the exported symbols win where they see the call),
 * symbols (exported loader symbols only), tracing (the loader's tracing layer only). */
enum { MT_ZE_ROUTE_AUTO = 0, MT_ZE_ROUTE_SYMBOLS, MT_ZE_ROUTE_TRACING };

#endif
