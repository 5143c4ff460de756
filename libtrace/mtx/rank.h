/* rank.h: the process's rank in a parallel job, as the launcher set it. The file's
 * metadata (libtrace/recorder.c) and the %r of its name (pattern.c) both ask here,
 * so they cannot disagree. */
#ifndef MEMTRACE_MTX_RANK_H
#define MEMTRACE_MTX_RANK_H

/* The first of RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID and LOCAL_RANK
 * (global ranks before the node-local one) that holds a whole number of 1 to 9
 * decimal digits; -1 when none does. */
long mtx_rank(void);

#endif
