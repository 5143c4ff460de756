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

/* Reads the MEMTRACE_* environment into c. Returns 0, or -1 after writing one line
 * naming the bad variable, its value and what is accepted. */
int mt_ip_config_read(struct mt_ip_config *c);

/* Expands %p (pid), %r (rank), %h (host) and %% in pattern into out. Returns 0, or
 * -1 for an unknown %-sequence or a result that does not fit. */
int mt_ip_expand_output(const char *pattern, int pid, char *out, size_t size);

/* The rank from RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID
 * (the first set), or NULL. */
const char *mt_ip_rank(void);

/* The helper thread (interpose/sampler.c): counters every sample_ms and snapshots
 * on the dump signal. 0 or -1. */
int mt_sampler_start(unsigned sample_ms, int dump_signal, const char *dump_base);
void mt_sampler_stop(void);
void mt_sampler_atfork_child(void);

#endif
