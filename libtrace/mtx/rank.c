#include "config.h"

#include "mtx/rank.h"

#include <stdlib.h>

long mtx_rank(void)
{
    static const char *const vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
                                       "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v == NULL || *v == '\0')
            continue;
        long r = 0;
        const char *p = v;
        for (; *p >= '0' && *p <= '9' && p - v < 9; p++)
            r = r * 10 + (*p - '0');
        if (*p == '\0')
            return r;
    }
    return -1;
}
