/* config.c: the interposer's configuration, read from MEMTRACE_* variables when a
 * process makes its first device call. A bad value is the user's mistake: one line
 * on stderr naming the variable, and the caller disables recording for the process
 * rather than guess. No stdio and no malloc: this runs inside an interposed call. */
#include "config.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "memtrace_alloc.h"
#include "mtx/env.h"
#include "mtx/pattern.h"
#include "mtx/util.h"

static int parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
    unsigned long long v = 0;
    if (*s == '\0')
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        if (v > (max - (unsigned)(*s - '0')) / 10)
            return -1;
        v = v * 10 + (unsigned)(*s - '0');
    }
    *out = v;
    return 0;
}

/* MEMTRACE_STACKS: none | DEPTH | KIND | KIND:DEPTH, KIND all, native or python. */
static int parse_stacks(const char *s, struct mt_ip_config *c)
{
    static const struct {
        const char *name;
        int kind;
    } kinds[] = {{"all", MEMTRACE_STACKS_ALL},
                 {"native", MEMTRACE_STACKS_NATIVE},
                 {"python", MEMTRACE_STACKS_PYTHON}};
    unsigned long long v;
    if (strcmp(s, "none") == 0) {
        c->stack_depth = 0;
        return 0;
    }
    for (size_t i = 0; i < MTX_ARRAY_SIZE(kinds); i++) {
        size_t len = strlen(kinds[i].name);
        if (strncmp(s, kinds[i].name, len) != 0 || (s[len] != '\0' && s[len] != ':'))
            continue;
        c->stack_kind = kinds[i].kind;
        if (s[len] == '\0')
            return 0;
        s += len + 1;
        break;
    }
    if (parse_uint(s, MEMTRACE_MAX_FRAMES, &v) != 0)
        return -1;
    c->stack_depth = (int)v;
    return 0;
}

int mt_ip_config_bad(const char *var, const char *value, const char *accepted)
{
    mtx_log("%s=%s is not valid (%s); recording is off for this process", var, value, accepted);
    return -1;
}

/* The dump signal must be one the program and the system leave alone: USR1, USR2 or
 * a real-time signal (SIGRTMIN..SIGRTMAX; glibc keeps 32 and 33 below SIGRTMIN for
 * itself). A fault signal would loop, since the handler returns to the faulting
 * instruction, and the others (INT, TERM, CHLD, PIPE, job control, timers) would
 * lose the meaning the program or the terminal gives them. */
static int parse_signal(const char *s)
{
    unsigned long long n;
    if (parse_uint(s, 1000, &n) == 0)
        return n == SIGUSR1 || n == SIGUSR2 || ((int)n >= SIGRTMIN && (int)n <= SIGRTMAX) ? (int)n
                                                                                          : -1;
    if (strncmp(s, "SIG", 3) == 0)
        s += 3;
    if (strcmp(s, "USR1") == 0)
        return SIGUSR1;
    if (strcmp(s, "USR2") == 0)
        return SIGUSR2;
    return -1;
}

int mt_ip_config_read(struct mt_ip_config *c)
{
    unsigned long long v;
    const char *s;

    memset(c, 0, sizeof *c);
    c->stack_depth = 32;
    c->flush_ms = 1000;
    c->sample_ms = 10;

    s = getenv(MTX_ENV_OUTPUT);
    if (s == NULL || *s == '\0')
        s = MTX_DEFAULT_OUTPUT;
    if (mtx_output_path(c->output, sizeof c->output, s, (int)getpid()) != 0)
        return mt_ip_config_bad(
            MTX_ENV_OUTPUT, s,
            "a path where %p is the pid, %r the rank, %h the host and %% a percent sign");

    s = getenv(MTX_ENV_STACKS);
    if (s != NULL && *s != '\0' && parse_stacks(s, c) != 0)
        return mt_ip_config_bad(
            MTX_ENV_STACKS, s,
            "none, or all, native or python with an optional :DEPTH, or a depth 0 to 128");

    s = getenv(MTX_ENV_FLUSH_MS);
    if (s != NULL && *s != '\0') {
        if (parse_uint(s, 3600000, &v) != 0 || v == 0)
            return mt_ip_config_bad(MTX_ENV_FLUSH_MS, s,
                                    "milliseconds between flushes, 1 to 3600000");
        c->flush_ms = (unsigned)v;
    }

    s = getenv(MTX_ENV_MAX_ENTRIES);
    if (s != NULL && *s != '\0') {
        if (parse_uint(s, SIZE_MAX / 2, &v) != 0)
            return mt_ip_config_bad(MTX_ENV_MAX_ENTRIES, s,
                                    "events kept in memory, a whole number; 0 for the default");
        c->max_entries = (size_t)v;
    }

    s = getenv(MTX_ENV_DUMP_SIGNAL);
    if (s != NULL && *s != '\0') {
        int sig = parse_signal(s);
        if (sig < 0)
            return mt_ip_config_bad(MTX_ENV_DUMP_SIGNAL, s,
                                    "USR1, USR2, SIGUSR2, 12, or a real-time signal's number; "
                                    "not a fault or system signal");
        c->dump_signal = sig;
    }

    s = getenv(MTX_ENV_CACHING);
    if (s != NULL && *s != '\0') {
        if (strcmp(s, "0") == 0) {
            c->caching = 0;
        } else if (strcmp(s, "1") == 0) {
            c->caching = 1;
        } else {
            return mt_ip_config_bad(MTX_ENV_CACHING, s, "0 or 1");
        }
    }
    s = getenv(MTX_ENV_ALLOC_CONF);
    if (c->caching && s != NULL && *s != '\0') {
        /* Checked now: an allocator that cannot be created would leave every
         * allocation to the driver, one warning each. */
        struct memtrace_alloc_config_error err;
        if (memtrace_alloc_config_set_err(s, &err) != 0)
            return mt_ip_config_bad(MTX_ENV_ALLOC_CONF, s, err.text);
    }

    s = getenv(MTX_ENV_SAMPLE_MS);
    if (s != NULL && *s != '\0') {
        if (parse_uint(s, 3600000, &v) != 0)
            return mt_ip_config_bad(MTX_ENV_SAMPLE_MS, s,
                                    "milliseconds between memory samples, 0 (off) to 3600000");
        c->sample_ms = (unsigned)v;
    }

    return 0;
}
