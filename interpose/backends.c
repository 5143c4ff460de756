/* backends.c: the API families the preload library is built with, in the order the
 * core asks them. A new family (HIP, say) is one file defining its struct
 * mt_ip_backend and one line here. Level Zero is left out by --without-level-zero
 * (interpose/ze.mk does not build its files then). */
#include "config.h"

#include "internal.h"

extern const struct mt_ip_backend mt_ip_cuda_backend; /* cuda.c, cudart.c, caching.c */
#if MEMTRACE_HAVE_LEVEL_ZERO
extern const struct mt_ip_backend mt_ip_ze_backend; /* ze.c, ze_trace.c, ze_sysman.c */
#endif

const struct mt_ip_backend *const mt_ip_backends[] = {
    &mt_ip_cuda_backend,
#if MEMTRACE_HAVE_LEVEL_ZERO
    &mt_ip_ze_backend,
#endif
    NULL,
};
