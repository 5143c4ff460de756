/* env.h: the names of the MEMTRACE_* variables that more than one program reads or
 * sets (the preload library reads them, `memtrace run` sets them), and the default
 * output pattern. One spelling each, so that the two cannot drift apart. */
#ifndef MEMTRACE_MTX_ENV_H
#define MEMTRACE_MTX_ENV_H

#define MTX_ENV_OUTPUT      "MEMTRACE_OUTPUT"
#define MTX_ENV_STACKS      "MEMTRACE_STACKS"
#define MTX_ENV_FLUSH_MS    "MEMTRACE_FLUSH_MS"
#define MTX_ENV_MAX_ENTRIES "MEMTRACE_MAX_ENTRIES"
#define MTX_ENV_DUMP_SIGNAL "MEMTRACE_DUMP_SIGNAL"
#define MTX_ENV_CACHING     "MEMTRACE_CACHING"
#define MTX_ENV_ALLOC_CONF  "MEMTRACE_ALLOC_CONF"
#define MTX_ENV_SAMPLE_MS   "MEMTRACE_SAMPLE_MS"
#define MTX_ENV_ZE_ROUTE    "MEMTRACE_ZE_ROUTE"
#define MTX_ENV_PRELOAD     "MEMTRACE_PRELOAD"

/* Where the preload library writes when MEMTRACE_OUTPUT is unset: one file per
 * process. */
#define MTX_DEFAULT_OUTPUT "memtrace-%p.memtrace"

#endif
