/* cu.h: what the CUDA family of the preload library shares (cuda.c, the driver
 * wrappers and the family's backend table; cudart.c, the runtime wrappers;
 * caching.c, MEMTRACE_CACHING=1). The driver helpers do nothing without a driver. */
#ifndef MEMTRACE_INTERPOSE_CU_H
#define MEMTRACE_INTERPOSE_CU_H

/* The calling thread's current device (0 without a context). */
int mt_cu_current_device(void);
/* Remembers the first context a wrapped allocation ran in: the helper thread reads
 * device memory figures in it. */
void mt_cu_note_context(void);
/* If *pfn is the real address of a wrapped driver function, replaces it with the
 * wrapper. */
void mt_cu_swap(void **pfn);
/* The calling thread's current context, and setting it back. */
void *mt_cu_ctx_get(void);
void mt_cu_ctx_set(void *ctx);
/* cuStreamSynchronize(s): 0 or the driver's error. */
int mt_cu_stream_sync(void *s);

#endif
