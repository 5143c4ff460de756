/* internal.h: what the interposer's sources share beyond the contract in interpose.h. */
#ifndef MEMTRACE_INTERPOSE_INTERNAL_H
#define MEMTRACE_INTERPOSE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "interpose.h"

#define MT_EXPORT __attribute__((visibility("default")))

/* Reads the MEMTRACE_* environment into c. Returns 0, or -1 after writing one line
 * naming the bad variable, its value and what is accepted. */
int mt_ip_config_read(struct mt_ip_config *c);
/* MT_ZE_ROUTE_* for a MEMTRACE_ZE_ROUTE value, or -1. */
int mt_ip_ze_route_parse(const char *s);

/* Level Zero (interpose/ze_trace.c, ze_sysman.c): the dlsym hook passes every
 * lookup of a "zel" name and what it found (the loader looking up the tracing
 * layer's entry points); the sampler records one counter per device the program
 * used, returning how many it recorded. */
void mt_ze_dlsym_seen(const char *name, void *found);
int mt_ze_sample(uint64_t rss);

/* Expands %p (pid), %r (rank), %h (host) and %% in pattern into out. Returns 0, or
 * -1 for an unknown %-sequence or a result that does not fit. */
int mt_ip_expand_output(const char *pattern, int pid, char *out, size_t size);

/* The rank from RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID
 * (the first set), or NULL. */
const char *mt_ip_rank(void);

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

/* The configuration read at start (valid once recording started). */
const struct mt_ip_config *mt_ip_config(void);

/* Driver helpers for the sampler and the runtime wrappers (interpose/cuda.c). */
int mt_cu_current_device(void);
void mt_cu_note_context(void);
int mt_cu_mem_info(uint64_t *free_bytes, uint64_t *total_bytes);
/* If *pfn is the real address of a wrapped driver function, replaces it with the
 * wrapper. */
void mt_cu_swap(void **pfn);
/* The wrapper for a dlsym lookup of name that found real (may be NULL), or NULL
 * when name is not a wrapped driver symbol. handle is the lookup's handle. */
void *mt_cu_hook(void *handle, const char *name, void *real);
/* Resets what a forked child must not inherit. */
void mt_cu_atfork_child(void);
/* p, or the real driver function when p is one of the wrappers. */
void *mt_cu_unwrap(void *p);
/* The calling thread's current context, and setting it back (driver helpers that
 * do nothing without a driver). */
void *mt_cu_ctx_get(void);
void mt_cu_ctx_set(void *ctx);
/* cuStreamSynchronize(s): 0 or the driver's error. */
int mt_cu_stream_sync(void *s);

/* 1 if caller (a return address) lies in libmemtrace.so's text (interpose/preload.c). */
int mt_ip_from_library(const void *caller);

/* The helper thread (interpose/sampler.c): counters every sample_ms and snapshots
 * on the dump signal. 0 or -1. */
int mt_sampler_start(unsigned sample_ms, int dump_signal, const char *dump_base);
void mt_sampler_stop(void);
void mt_sampler_atfork_child(void);
/* Last RSS the sampler read, bytes (0 before the first sample). */
uint64_t mt_sampler_rss(void);

#endif
