/* internal.h: the core of libmemtrace_preload.so (preload.c, sampler.c, config.c,
 * backends.c): what those files share with each other and with no backend. Backends
 * include interpose.h only; the core reaches them through mt_ip_backends. */
#ifndef MEMTRACE_INTERPOSE_INTERNAL_H
#define MEMTRACE_INTERPOSE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "interpose.h"

/* The API families built in, NULL-terminated (interpose/backends.c). */
extern const struct mt_ip_backend *const mt_ip_backends[];

/* Reads the MEMTRACE_* environment into c (the output pattern expanded by
 * mtx_output_path). Returns 0, or -1 after writing one line naming the bad
 * variable, its value and what is accepted. */
int mt_ip_config_read(struct mt_ip_config *c);

/* The helper thread (interpose/sampler.c): counters every sample_ms and snapshots
 * on the dump signal. 0 or -1. */
int mt_sampler_start(unsigned sample_ms, int dump_signal, const char *dump_base);
void mt_sampler_stop(void);
/* fork: prepare waits until the helper thread is at rest (not sampling, dumping,
 * starting or ending: all of them may hold the allocator's locks) and keeps it so
 * until parent. */
void mt_sampler_atfork_prepare(void);
void mt_sampler_atfork_parent(void);
void mt_sampler_atfork_child(void);

#endif
