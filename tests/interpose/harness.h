/* harness.h: running a program under the preload library and reading what it
 * recorded, for the interposer's tests (header-only, one copy per test). */
#ifndef MEMTRACE_TESTS_INTERPOSE_HARNESS_H
#define MEMTRACE_TESTS_INTERPOSE_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memtrace.h"
#include "memtrace_snapshot.h"
#include "tap.h"

/* Each test uses a part of this header. */
#pragma GCC diagnostic ignored "-Wunused-function"

#ifndef BUILDDIR
#error "BUILDDIR must name the build tree"
#endif

#define PRELOAD_SO BUILDDIR "/.libs/libmemtrace_preload.so"
#define FAKE_DIR   BUILDDIR "/tests/fakes"
#define PROG_DIR   BUILDDIR "/tests/interpose"

static char h_tmpdir[256];

/* A sanitizer runtime must come first in LD_PRELOAD; find the one this test uses. */
static int h_find_asan(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    if (info->dlpi_name != NULL && (strstr(info->dlpi_name, "libasan.so") != NULL ||
                                    strstr(info->dlpi_name, "libtsan.so") != NULL)) {
        snprintf(data, 512, "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

static void h_setup(void)
{
    char asan[512] = "";
    char preload[1100];
    if (access(PRELOAD_SO, R_OK) != 0)
        bail_out("the preload library is not built: " PRELOAD_SO);
    if (access(FAKE_DIR "/libcuda.so.1", R_OK) != 0)
        skip_all("the fake libcuda.so.1 is not built");
    snprintf(h_tmpdir, sizeof h_tmpdir, "/tmp/mt-interpose-XXXXXX");
    if (mkdtemp(h_tmpdir) == NULL)
        bail_out("mkdtemp failed");
    dl_iterate_phdr(h_find_asan, asan);
    snprintf(preload, sizeof preload, "%s%s%s", asan, asan[0] ? " " : "", PRELOAD_SO);
    setenv("LD_PRELOAD_FOR_TEST", preload, 1);
    setenv("LD_LIBRARY_PATH", FAKE_DIR, 1);
    /* The recorder keeps its tables for the life of the process by design. */
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    unsetenv("MEMTRACE_STACKS");
    unsetenv("MEMTRACE_DUMP_SIGNAL");
    unsetenv("MEMTRACE_FLUSH_MS");
    unsetenv("MEMTRACE_SAMPLE_MS");
    unsetenv("MEMTRACE_MAX_ENTRIES");
    unsetenv("MEMTRACE_CACHING");
}

static void h_cleanup(void)
{
    DIR *d = opendir(h_tmpdir);
    struct dirent *e;
    char p[600];
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", h_tmpdir, e->d_name);
        unlink(p);
    }
    if (d != NULL)
        closedir(d);
    rmdir(h_tmpdir);
}

/* ThreadSanitizer builds: a test whose program TSan cannot watch skips, saying why. */
static void h_skip_under_tsan(const char *why)
{
    char line[300];
    if (!MEMTRACE_TSAN)
        return;
    snprintf(line, sizeof line, "ThreadSanitizer build: %s", why);
    h_cleanup();
    skip_all(line);
}

/* Starts argv with the preload (if preload) and returns the pid; the child's stdout
 * goes to *out_fd (a pipe) when out_fd is not NULL, stderr to err_path if set. */
static pid_t h_spawn(char *const argv[], int preload, int *out_fd, const char *err_path)
{
    int p[2] = {-1, -1};
    if (out_fd != NULL && pipe(p) != 0)
        bail_out("pipe failed");
    pid_t pid = fork();
    if (pid < 0)
        bail_out("fork failed");
    if (pid == 0) {
        if (preload)
            setenv("LD_PRELOAD", getenv("LD_PRELOAD_FOR_TEST"), 1);
        if (out_fd != NULL) {
            dup2(p[1], 1);
            close(p[0]);
            close(p[1]);
        }
        if (err_path != NULL) {
            int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0) {
                dup2(fd, 2);
                close(fd);
            }
        }
        execv(argv[0], argv);
        _exit(127);
    }
    if (out_fd != NULL) {
        close(p[1]);
        *out_fd = p[0];
    }
    return pid;
}

/* Reads fd to its end into a malloc'd string. */
static char *h_slurp_fd(int fd)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(fd, buf + n, cap - n - 1)) > 0) {
        n += (size_t)r;
        if (cap - n < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    close(fd);
    return buf;
}

static char *h_slurp_file(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return strdup("");
    return h_slurp_fd(fd);
}

/* Runs argv to the end; returns its wait status and its stdout in *out. */
static int h_run(char *const argv[], int preload, char **out, const char *err_path)
{
    int fd, st;
    pid_t pid = h_spawn(argv, preload, &fd, err_path);
    char *s = h_slurp_fd(fd);
    waitpid(pid, &st, 0);
    if (out != NULL)
        *out = s;
    else
        free(s);
    return st;
}

/* The events of a file, read with the public reader. */
struct h_file {
    struct memtrace_event *ev;
    size_t n;
    int truncated;
    int rc; /* reader open or read error, 0 if none */
    struct memtrace_reader *r;
};

static void h_read(struct h_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    struct memtrace_errinfo err;
    f->rc = memtrace_reader_open(&f->r, path, &err);
    if (f->rc != 0) {
        diag("cannot open %s: %s", path, err.text);
        return;
    }
    size_t cap = 1024;
    f->ev = malloc(cap * sizeof *f->ev);
    int rc;
    struct memtrace_event e;
    while ((rc = memtrace_reader_next(f->r, &e)) == 1) {
        if (f->n == cap)
            f->ev = realloc(f->ev, (cap *= 2) * sizeof *f->ev);
        f->ev[f->n++] = e;
    }
    if (rc < 0) {
        f->rc = rc;
        diag("read error in %s: %s", path, memtrace_reader_error(f->r)->text);
    }
    f->truncated = memtrace_reader_truncated(f->r);
}

/* Live segments in the file's final state; -1 when the file could not be read (the
 * program wrote none), so a test reports that instead of crashing. */
static long long h_segments(const struct h_file *f)
{
    return f->r != NULL ? (long long)memtrace_reader_segment_count(f->r) : -1;
}

static void h_close(struct h_file *f)
{
    if (f->r != NULL)
        memtrace_reader_close(f->r);
    free(f->ev);
    memset(f, 0, sizeof *f);
}

static size_t h_count(const struct h_file *f, int action)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n; i++)
        n += f->ev[i].action == action;
    return n;
}

/* Events of one source (an API name, or "caching_allocator"); action < 0: any. */
static size_t h_count_src(const struct h_file *f, int action, const char *src)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n; i++) {
        const char *s = memtrace_reader_string(f->r, f->ev[i].source);
        n += (action < 0 || f->ev[i].action == action) && s != NULL && strcmp(s, src) == 0;
    }
    return n;
}

/* The programs under test print lines "TAG NAME VALUE" (the fake driver's call
 * counters are "C symbol calls"): the value of the first such line, -1 if none. */
static long long h_line_value(const char *out, char tag, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "%c %s ", tag, name);
    for (const char *p = out; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, key, strlen(key)) == 0)
            return atoll(p + strlen(key));
    return -1;
}

/* The events a program says it expects: "E action source addr(hex) size device". */
struct h_want {
    char action[32], source[64];
    unsigned long long addr, size;
    int device;
};

static size_t h_parse_wants(const char *out, struct h_want *w, size_t max)
{
    size_t n = 0;
    for (const char *p = out; p && *p && n < max; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (sscanf(p, "E %31s %63s %llx %llu %d", w[n].action, w[n].source, &w[n].addr, &w[n].size,
                   &w[n].device) == 5)
            n++;
    return n;
}

/* Events f[0..) that differ from the wanted w[0..nw) in action, source, address,
 * size or device, compared pairwise as far as both go; each one is described. */
static int h_mismatches(const struct h_file *f, const struct h_want *w, size_t nw)
{
    int bad = 0;
    for (size_t i = 0; i < nw && i < f->n; i++) {
        const struct memtrace_event *e = &f->ev[i];
        const char *src = memtrace_reader_string(f->r, e->source);
        if (strcmp(memtrace_action_name(e->action), w[i].action) != 0 ||
            strcmp(src, w[i].source) != 0 || e->addr != w[i].addr || e->size != w[i].size ||
            e->device != w[i].device) {
            diag("event %zu: got %s %s 0x%llx %llu %d, wanted %s %s 0x%llx %llu %d", i,
                 memtrace_action_name(e->action), src, (unsigned long long)e->addr,
                 (unsigned long long)e->size, e->device, w[i].action, w[i].source, w[i].addr,
                 w[i].size, w[i].device);
            bad++;
        }
    }
    return bad;
}

/* The path of a file in the temporary directory whose name starts with prefix (the
 * last one readdir gives), "" if there is none; static storage. */
static const char *h_find_file(const char *prefix)
{
    static char path[600];
    DIR *d = opendir(h_tmpdir);
    struct dirent *e;
    path[0] = '\0';
    while (d != NULL && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            snprintf(path, sizeof path, "%s/%s", h_tmpdir, e->d_name);
    if (d != NULL)
        closedir(d);
    return path;
}

/* Number of files in the temporary directory whose name starts with prefix. */
static int h_count_files(const char *prefix)
{
    DIR *d = opendir(h_tmpdir);
    struct dirent *e;
    int n = 0;
    while (d != NULL && (e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d != NULL)
        closedir(d);
    return n;
}

/* A program run under the preload through one Level Zero route (MEMTRACE_ZE_ROUTE),
 * with the loader's tracing layer on or off: its output, stderr, exit status, how
 * many files it wrote and the one it wrote, read (f.r NULL if none). */
struct h_route_run {
    char *out, *err;
    int status;
    int files;
    struct h_file f;
};

/* Runs PROG_DIR/prog [arg] that way; each run writes under a prefix of its own. */
static void h_route_run(struct h_route_run *r, const char *prog, const char *arg, const char *route,
                        int layer)
{
    static int seq;
    char prefix[32], pat[400], err_path[400];
    snprintf(prefix, sizeof prefix, "route%d-", ++seq);
    snprintf(pat, sizeof pat, "%s/%s%%p.memtrace", h_tmpdir, prefix);
    snprintf(err_path, sizeof err_path, "%s/stderr%d", h_tmpdir, seq);
    setenv("MEMTRACE_OUTPUT", pat, 1);
    setenv("MEMTRACE_ZE_ROUTE", route, 1);
    if (layer)
        setenv("ZE_ENABLE_TRACING_LAYER", "1", 1);
    else
        unsetenv("ZE_ENABLE_TRACING_LAYER");
    char path[300];
    snprintf(path, sizeof path, "%s/%s", PROG_DIR, prog);
    char *argv[] = {path, (char *)arg, NULL};
    memset(r, 0, sizeof *r);
    r->status = h_run(argv, 1, &r->out, err_path);
    r->err = h_slurp_file(err_path);
    unlink(err_path);
    if (r->status != 0)
        diag("%s %s (%s) exited %d, stderr: %s", prog, arg ? arg : "", route, r->status, r->err);
    r->files = h_count_files(prefix);
    const char *file = h_find_file(prefix);
    if (file[0] != '\0')
        h_read(&r->f, file);
}

static void h_route_run_free(struct h_route_run *r)
{
    free(r->out);
    free(r->err);
    h_close(&r->f);
}

#endif
