/* run.c: `memtrace run`: runs a command under libmemtrace_preload.so and summarises
 * the files it wrote. The preload library is looked up next to this binary in a
 * build tree (.libs/), then in the installed package library directory. */
#include "config.h"

#include <errno.h>
#include <glob.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "mtx/env.h"
#include "mtx/pattern.h"

#ifndef MT_PKGLIBDIR
#define MT_PKGLIBDIR "/usr/local/lib/memtrace"
#endif
#define PRELOAD_NAME "libmemtrace_preload.so"

static const char *output, *stacks;
static long long flush_ms;
static int caching;

static const struct cli_opt run_opts[] = {
    CLI_OPTION_STRING('o', "output", &output, "PATTERN",
                      "output path; %p is the pid, %r the rank, %h the host, %% a percent sign "
                      "(default " MTX_DEFAULT_OUTPUT ", one file per process)"),
    CLI_OPTION_STRING(0, "stacks", &stacks, "KIND[:N]|N|none",
                      "which frames: all (native, with Python frames in place of the "
                      "interpreter's), native or python (Python frames only); N frames per "
                      "stack, 0 to 128, or none (default all:32)"),
    CLI_OPTION_INT(0, "flush-ms", &flush_ms, "N", 1, 3600000,
                   "longest time between flushes to the file, in ms (default 1000)"),
    CLI_OPTION_BOOL(0, "caching", &caching,
                    "serve the command's cuMemAlloc_v2/cudaMalloc (and their async forms) from "
                    "memtrace's caching allocator, recording its blocks and segments "
                    "(MEMTRACE_CACHING=1)"),
    CLI_OPTION_END,
};

static const struct cli_help run_help = {
    "run",
    "memtrace run [-o PATTERN] [--stacks KIND[:N]|N|none] [--flush-ms N] [--caching] [--] COMMAND "
    "[ARGS...]",
    "Runs COMMAND with memtrace's preload library, which records every CUDA device\n"
    "allocation and free (driver and runtime API) and every Level Zero one, with its\n"
    "stack, into a .memtrace file per process, streamed while it runs. Processes that\n"
    "never touch a device write no file. ZES_ENABLE_SYSMAN=1 is set unless already set,\n"
    "so Level Zero device memory is sampled too. With --caching, device allocations come from "
    "memtrace's caching allocator\n"
    "(PyTorch's policy, configured by MEMTRACE_ALLOC_CONF), which records blocks and\n"
    "the segments it asks the driver for. Other settings come from the environment\n"
    "(MEMTRACE_SAMPLE_MS, MEMTRACE_DUMP_SIGNAL, MEMTRACE_MAX_ENTRIES; see\n"
    "docs/interpose.md). An existing output file is never replaced unless\n"
    "MEMTRACE_OVERWRITE=1. SIGINT and SIGTERM are passed to COMMAND. At the end, prints\n"
    "per file this run wrote: its path, events and peak reserved device memory, or\n"
    "that nothing was recorded. Exits with COMMAND's status, or 128 plus the signal\n"
    "that killed it.",
    run_opts,
    1,
};

static volatile sig_atomic_t child_pid;

static void forward(int sig)
{
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

static int readable(const char *path)
{
    return access(path, R_OK) == 0;
}

static int find_preload(char *out, size_t size)
{
    const char *env = getenv(MTX_ENV_PRELOAD);
    if (env != NULL && *env != '\0') {
        snprintf(out, size, "%s", env);
        return readable(out) ? 0 : -1;
    }
    char exe[3800];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL) {
            *slash = '\0';
            /* Uninstalled: the binary is in the build tree or in its .libs/. */
            static const char *const rel[] = {"/.libs/" PRELOAD_NAME, "/" PRELOAD_NAME};
            for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
                snprintf(out, size, "%s%s", exe, rel[i]);
                if (strstr(exe, "/.libs") != NULL || i == 0)
                    if (readable(out))
                        return 0;
            }
        }
    }
    snprintf(out, size, "%s/%s", MT_PKGLIBDIR, PRELOAD_NAME);
    return readable(out) ? 0 : -1;
}

/* One line per file, with the figures `memtrace summary` would give. */
static void summarise(const char *path)
{
    struct cli_peaks p;
    if (cli_summary_peaks(path, &p) != CLI_EXIT_OK)
        return;
    char b1[32], b2[32], b3[32];
    if (p.peak_allocated > 0)
        fprintf(stderr, "memtrace: %s: %s events, peak allocated %s, peak reserved %s%s\n", path,
                cli_fmt_count(b1, sizeof b1, p.events),
                cli_fmt_bytes(b3, sizeof b3, p.peak_allocated),
                cli_fmt_bytes(b2, sizeof b2, p.peak_reserved), p.truncated ? " (truncated)" : "");
    else
        fprintf(stderr, "memtrace: %s: %s events, peak reserved %s%s\n", path,
                cli_fmt_count(b1, sizeof b1, p.events),
                cli_fmt_bytes(b2, sizeof b2, p.peak_reserved), p.truncated ? " (truncated)" : "");
}

/* The files that matched the output pattern before the run, as they were: a file
 * the run wrote is one not among them, or changed since. (A time of modification
 * against the run's start told an old file written within the second before it,
 * by the previous run of a script, for this run's.) */
struct seen {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

static size_t seen_before(const char *glob_pattern, struct seen **out)
{
    glob_t gl;
    size_t n = 0;
    *out = NULL;
    if (glob(glob_pattern, 0, NULL, &gl) != 0)
        return 0;
    struct seen *s = calloc(gl.gl_pathc ? gl.gl_pathc : 1, sizeof(*s));
    for (size_t i = 0; s && i < gl.gl_pathc; i++) {
        struct stat sb;
        if (stat(gl.gl_pathv[i], &sb) == 0)
            s[n++] = (struct seen){sb.st_dev, sb.st_ino, sb.st_size, sb.st_mtim};
    }
    globfree(&gl);
    *out = s;
    return n;
}

static int unchanged(const struct stat *sb, const struct seen *s, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (s[k].dev == sb->st_dev && s[k].ino == sb->st_ino && s[k].size == sb->st_size &&
            s[k].mtime.tv_sec == sb->st_mtim.tv_sec && s[k].mtime.tv_nsec == sb->st_mtim.tv_nsec)
            return 1;
    return 0;
}

int cli_cmd_run(int argc, char **argv)
{
    char **pos = calloc((size_t)argc + 1, sizeof(*pos));
    int npos;
    if (!pos)
        return CLI_EXIT_FAIL;
    int rc = cli_options_parse(argc, argv, &run_help, pos, &npos);
    char **cmd = npos ? &argv[argc - npos] : NULL;
    free(pos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    long long n;
    const char *depth = stacks;
    if (stacks != NULL) {
        static const char *const kinds[] = {"all", "native", "python"};
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
            size_t len = strlen(kinds[i]);
            if (strncmp(stacks, kinds[i], len) == 0 && (stacks[len] == '\0' || stacks[len] == ':'))
                depth = stacks[len] ? stacks + len + 1 : NULL;
        }
    }
    if (depth && strcmp(depth, "none") != 0 && (depth[0] < '0' || depth[0] > '9'))
        return cli_usage_error("run",
                               "--stacks takes all, native or python (each with an optional "
                               ":N), a depth N or none, not '%s'",
                               stacks);
    if (depth && strcmp(depth, "none") != 0 && cli_parse_int("run", "stacks", depth, 0, 128, &n))
        return CLI_EXIT_USAGE;
    char flush[32] = "";
    if (flush_ms)
        snprintf(flush, sizeof flush, "%lld", flush_ms);
    if (cmd == NULL)
        return cli_usage_error("run", "no command to run");

    char preload[4096];
    if (find_preload(preload, sizeof preload) != 0) {
        cli_error("cannot find %s (looked next to this program and in %s); set " MTX_ENV_PRELOAD
                  " to its path",
                  PRELOAD_NAME, MT_PKGLIBDIR);
        return CLI_EXIT_FAIL;
    }
    /* Prepended, except that a sanitizer runtime must stay first. */
    const char *old = getenv("LD_PRELOAD");
    if (old == NULL)
        old = "";
    size_t keep = 0;
    if (strncmp(old, "/", 1) == 0 && strstr(old, "san.so") != NULL) {
        keep = strcspn(old, " :");
        if (memmem(old, keep, "san.so", 6) == NULL)
            keep = 0;
    }
    size_t len = strlen(preload) + strlen(old) + 3;
    char *ld = malloc(len);
    if (ld == NULL)
        return CLI_EXIT_FAIL;
    if (keep > 0)
        snprintf(ld, len, "%.*s %s%s", (int)keep, old, preload, old + keep);
    else
        snprintf(ld, len, "%s%s%s", preload, *old ? " " : "", old);
    setenv("LD_PRELOAD", ld, 1);
    free(ld);
    if (output != NULL)
        setenv(MTX_ENV_OUTPUT, output, 1);
    if (stacks != NULL)
        setenv(MTX_ENV_STACKS, stacks, 1);
    if (flush[0])
        setenv(MTX_ENV_FLUSH_MS, flush, 1);
    if (caching)
        setenv(MTX_ENV_CACHING, "1", 1);
    /* Level Zero drivers answer sysman queries (the sampler's device memory figures)
     * only if this is set before the program's zeInit. */
    setenv("ZES_ENABLE_SYSMAN", "1", 0);
    const char *pattern = getenv(MTX_ENV_OUTPUT);
    if (pattern == NULL || *pattern == '\0')
        pattern = MTX_DEFAULT_OUTPUT;

    char g[8192];
    mtx_output_glob(g, sizeof g, pattern);
    struct seen *before;
    size_t nbefore = seen_before(g, &before);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        free(before);
        cli_error("cannot fork: %s", strerror(errno));
        return CLI_EXIT_FAIL;
    }
    if (pid == 0) {
        execvp(cmd[0], cmd);
        cli_error("cannot run %s: %s", cmd[0], strerror(errno));
        _exit(127);
    }
    child_pid = pid;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    child_pid = 0;
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;

    glob_t gl;
    size_t written = 0;
    if (glob(g, 0, NULL, &gl) == 0) {
        for (size_t i = 0; i < gl.gl_pathc; i++) {
            struct stat sb;
            if (stat(gl.gl_pathv[i], &sb) == 0 && !unchanged(&sb, before, nbefore)) {
                summarise(gl.gl_pathv[i]);
                written++;
            }
        }
        globfree(&gl);
    }
    free(before);
    /* (127: COMMAND could not be run, which was said) */
    if (written == 0 && status != 127)
        cli_error("nothing recorded: no file from this run matches %s (no device allocation "
                  "seen, or recording was off)",
                  pattern);
    return status;
}
