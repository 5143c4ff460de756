/* interpose.h: the backend interface of libmemtrace_preload.so.
 *
 * An API family (the CUDA driver and runtime in cuda.c and cudart.c, Level Zero in
 * ze*.c) is a backend: it wraps its family's allocation calls and reports them with
 * the core's helpers below, and it gives the core one struct mt_ip_backend through
 * which the core reaches it (the list is interpose/backends.c). A backend includes
 * this header and its family's own header, never internal.h; the core (preload.c,
 * sampler.c, config.c) knows backends only through the table.
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

#include <stddef.h>
#include <stdint.h>

#include "memtrace.h"

/* The interposed names, exported by the backends: exactly interpose/exports.txt. */
#define MT_EXPORT __attribute__((visibility("default")))
/* For a backend's dlsym hook: a sanitizer runtime resolves its interceptors through
 * the exported dlsym before its shadow memory exists (ThreadSanitizer: before its
 * thread state, so even the function-entry hook crashes), so the hook must not be
 * instrumented at all (what it calls for its own family's names runs later). Clang
 * keeps ThreadSanitizer's entry and exit hooks under no_sanitize("thread"). */
#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(disable_sanitizer_instrumentation)
#define MT_IP_EARLY __attribute__((disable_sanitizer_instrumentation))
#endif
#endif
#ifndef MT_IP_EARLY
#define MT_IP_EARLY __attribute__((no_sanitize_address, no_sanitize_thread))
#endif

/* One API family, as the core sees it. Every member but name may be NULL. */
struct mt_ip_backend {
    const char *name;
    /* Reads the family's own MEMTRACE_* variables when recording starts: 0, or -1
     * after mt_ip_config_bad() (recording stays off for the process). */
    int (*config)(void);
    /* A dlsym lookup of name in handle found found (NULL if nothing), asked from
     * the return address caller: what to hand out instead (a wrapper, or the real
     * function for libmemtrace.so's own lookups), or NULL to leave the answer as it
     * is. Runs before anything else in the process may be initialised: declared
     * MT_IP_EARLY, no libc beyond the dynamic linker's own calls, and fast for names
     * of other families. */
    void *(*dlsym)(void *handle, const char *name, void *found, const void *caller);
    /* In a forked child: forgets what the parent's devices left. */
    void (*atfork_child)(void);
    /* From the helper thread: records a counter event per device of the family that
     * the program used (requested_size = rss), returning how many it recorded. */
    int (*sample)(uint64_t rss);
};

/* The dynamic linker's own dlsym, never the exported hook. */
void *mt_real_dlsym(void *handle, const char *name);

/* 1 if caller (a return address) lies in libmemtrace.so's text: its lookups get the
 * real driver functions, since its allocator records its own segments. */
int mt_ip_from_library(const void *caller);

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

/* mt_ip_record with a category name (interned once through *category_id) and a
 * requested size; the segment kind decides what the live-segment state shows. */
enum mt_ip_kind {
    MT_IP_SEGMENT = 0, /* memory: shown in the state */
    MT_IP_PHYSICAL,    /* a physical handle (addr is the handle): tracked for sizes */
    MT_IP_MAPPED,      /* a mapped range of reserved address space: shown, expandable */
};
void mt_ip_record_ex(int action, int kind, int device, uint64_t stream, uint64_t addr,
                     uint64_t size, uint64_t aux, const char *source, uint32_t *source_id,
                     const char *category, uint32_t *category_id);

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
};

/* The configuration read at start (valid once recording started). */
const struct mt_ip_config *mt_ip_config(void);

/* Writes the one line that says var=value is not valid and what is accepted, and
 * that recording is off for the process. Returns -1. */
int mt_ip_config_bad(const char *var, const char *value, const char *accepted);

/* Last RSS the helper thread read, bytes (0 before the first sample). */
uint64_t mt_sampler_rss(void);

#endif
