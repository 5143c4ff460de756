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
#include "util.h"

#define DEFAULT_OUTPUT "memtrace-%p.memtrace"

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

static int bad(const char *var, const char *value, const char *accepted)
{
    mt_log("%s=%s is not valid (%s); recording is off for this process", var, value, accepted);
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

const char *mt_ip_rank(void)
{
    static const char *const vars[] = {"RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                       "SLURM_PROCID"};
    for (size_t i = 0; i < MT_ARRAY_SIZE(vars); i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && *v != '\0')
            return v;
    }
    return NULL;
}

int mt_ip_expand_output(const char *pattern, int pid, char *out, size_t size)
{
    size_t n = 0;
    char tmp[256];
    for (const char *p = pattern; *p; p++) {
        const char *add = tmp;
        if (*p != '%') {
            tmp[0] = *p;
            tmp[1] = '\0';
        } else {
            switch (*++p) {
            case 'p':
                mt_format(tmp, sizeof tmp, "%d", pid);
                break;
            case 'r':
                add = mt_ip_rank();
                if (add == NULL)
                    add = "0";
                break;
            case 'h':
                if (gethostname(tmp, sizeof tmp - 1) != 0)
                    strcpy(tmp, "localhost");
                tmp[sizeof tmp - 1] = '\0';
                break;
            case '%':
                strcpy(tmp, "%");
                break;
            default:
                return -1;
            }
        }
        size_t len = strlen(add);
        if (n + len + 1 > size)
            return -1;
        memcpy(out + n, add, len);
        n += len;
    }
    if (n == 0)
        return -1;
    out[n] = '\0';
    return 0;
}

int mt_ip_config_read(struct mt_ip_config *c)
{
    unsigned long long v;
    const char *s;

    memset(c, 0, sizeof *c);
    c->stack_depth = 32;
    c->flush_ms = 1000;
    c->sample_ms = 10;

    s = getenv("MEMTRACE_OUTPUT");
    if (s == NULL || *s == '\0')
        s = DEFAULT_OUTPUT;
    if (mt_ip_expand_output(s, (int)getpid(), c->output, sizeof c->output) != 0)
        return bad("MEMTRACE_OUTPUT", s,
                   "a path where %p is the pid, %r the rank, %h the host and %% a percent sign");

    s = getenv("MEMTRACE_STACKS");
    if (s != NULL && *s != '\0') {
        if (strcmp(s, "none") == 0)
            c->stack_depth = 0;
        else if (parse_uint(s, MEMTRACE_MAX_FRAMES, &v) == 0)
            c->stack_depth = (int)v;
        else
            return bad("MEMTRACE_STACKS", s, "frames per stack, 0 to 128, or none");
    }

    s = getenv("MEMTRACE_FLUSH_MS");
    if (s != NULL && *s != '\0') {
        if (parse_uint(s, 3600000, &v) != 0 || v == 0)
            return bad("MEMTRACE_FLUSH_MS", s, "milliseconds between flushes, 1 to 3600000");
        c->flush_ms = (unsigned)v;
    }

    s = getenv("MEMTRACE_MAX_ENTRIES");
    if (s != NULL && *s != '\0') {
        if (parse_uint(s, SIZE_MAX / 2, &v) != 0)
            return bad("MEMTRACE_MAX_ENTRIES", s,
                       "events kept in memory, a whole number; 0 for the default");
        c->max_entries = (size_t)v;
    }

    s = getenv("MEMTRACE_DUMP_SIGNAL");
    if (s != NULL && *s != '\0') {
        int sig = parse_signal(s);
        if (sig < 0)
            return bad("MEMTRACE_DUMP_SIGNAL", s,
                       "USR1, USR2, SIGUSR2, 12, or a real-time signal's number; not a "
                       "fault or system signal");
        c->dump_signal = sig;
    }

    s = getenv("MEMTRACE_CACHING");
    if (s != NULL && *s != '\0') {
        if (strcmp(s, "0") == 0) {
            c->caching = 0;
        } else if (strcmp(s, "1") == 0) {
            c->caching = 1;
        } else {
            return bad("MEMTRACE_CACHING", s, "0 or 1");
        }
    }
    s = getenv("MEMTRACE_ALLOC_CONF");
    if (c->caching && s != NULL && *s != '\0') {
        /* Checked now: an allocator that cannot be created would leave every
         * allocation to the driver, one warning each. */
        struct memtrace_alloc_config_error err;
        if (memtrace_alloc_config_set_err(s, &err) != 0)
            return bad("MEMTRACE_ALLOC_CONF", s, err.text);
    }

    s = getenv("MEMTRACE_SAMPLE_MS");
    if (s != NULL && *s != '\0') {
        if (parse_uint(s, 3600000, &v) != 0)
            return bad("MEMTRACE_SAMPLE_MS", s,
                       "milliseconds between memory samples, 0 (off) to 3600000");
        c->sample_ms = (unsigned)v;
    }

    s = getenv("MEMTRACE_ZE_ROUTE");
    if (s != NULL && *s != '\0') {
        c->ze_route = mt_ip_ze_route_parse(s);
        if (c->ze_route < 0)
            return bad("MEMTRACE_ZE_ROUTE", s, "auto, symbols or tracing");
    }
    return 0;
}

int mt_ip_ze_route_parse(const char *s)
{
    static const char *const names[] = {"auto", "symbols", "tracing"};
    for (size_t i = 0; i < MT_ARRAY_SIZE(names); i++)
        if (strcmp(s, names[i]) == 0)
            return (int)i;
    return -1;
}
