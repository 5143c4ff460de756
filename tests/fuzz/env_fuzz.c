/* env_fuzz: the preload library's environment parser (interpose/config.c): the
 * MEMTRACE_* variables and the rank variables the output pattern reads. The input
 * is values separated by newlines, given in turn to the variables below (an empty
 * value leaves the variable unset). A configuration either reads, with an output
 * path that fits and the limits the parser promises, or is refused with -1.
 * Seeds: tests/fuzz/corpus/env/; dictionary: tests/fuzz/env.dict. */
#include "config.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "interpose/internal.h"
#include "memtrace.h"
#include "mtx/env.h"

static const char *const vars[] = {
    MTX_ENV_OUTPUT,         MTX_ENV_STACKS,      MTX_ENV_FLUSH_MS,
    MTX_ENV_MAX_ENTRIES,    MTX_ENV_DUMP_SIGNAL, MTX_ENV_CACHING,
    MTX_ENV_ALLOC_CONF,     MTX_ENV_SAMPLE_MS,   "RANK",
    "OMPI_COMM_WORLD_RANK", "PMI_RANK",          "SLURM_PROCID",
    "LOCAL_RANK",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const size_t nvars = sizeof(vars) / sizeof(vars[0]);
    char *text = malloc(size + 1);
    FUZZ_CHECK(text != NULL, "out of memory");
    memcpy(text, data, size);
    text[size] = 0;
    /* putenv on a buffer of our own per variable: glibc's setenv keeps every value it
     * was ever given, which millions of runs turn into gigabytes. */
    static char env[sizeof(vars) / sizeof(vars[0])][4200];
    char *p = text;
    for (size_t i = 0; i < nvars; i++) {
        char *nl = p ? strchr(p, '\n') : NULL;
        if (nl)
            *nl = 0;
        size_t kn = strlen(vars[i]), vn = p ? strlen(p) : 0;
        if (vn > 0 && kn + 1 + vn < sizeof(env[i])) {
            memcpy(env[i], vars[i], kn);
            env[i][kn] = '=';
            memcpy(env[i] + kn + 1, p, vn + 1);
            putenv(env[i]);
        } else {
            unsetenv(vars[i]);
        }
        p = nl ? nl + 1 : NULL;
    }
    struct mt_ip_config c;
    int rc = mt_ip_config_read(&c);
    FUZZ_CHECK(rc == 0 || rc == -1, "the parser returns 0 or -1");
    if (rc == 0) {
        FUZZ_CHECK(memchr(c.output, 0, sizeof(c.output)) != NULL && c.output[0] != 0,
                   "the output path is a string");
        FUZZ_CHECK(c.stack_depth >= 0 && c.stack_depth <= MEMTRACE_MAX_FRAMES,
                   "the stack depth is within its bounds");
        FUZZ_CHECK(c.flush_ms >= 1 && c.flush_ms <= 3600000, "flush_ms is within its bounds");
        FUZZ_CHECK(c.sample_ms <= 3600000, "sample_ms is within its bounds");
        FUZZ_CHECK(c.dump_signal == 0 || c.dump_signal == SIGUSR1 || c.dump_signal == SIGUSR2 ||
                       (c.dump_signal >= SIGRTMIN && c.dump_signal <= SIGRTMAX),
                   "the dump signal is one the program leaves alone");
        FUZZ_CHECK(c.caching == 0 || c.caching == 1, "caching is 0 or 1");
    }
    free(text);
    return 0;
}
