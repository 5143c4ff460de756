/* cli-util.h: what the viewer's tests share: running the built memtrace binary with
 * its output captured, a scratch directory, and small wrappers over the writer. */
#ifndef MEMTRACE_TESTS_CLI_UTIL_H
#define MEMTRACE_TESTS_CLI_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "tap.h"
#include "writer.h"

struct cli_out {
    int status; /* exit status, or 128 + signal */
    char *out;
    char *err;
};

static char cli_dir[256];

static inline void cli_rmdir(void)
{
    DIR *d = opendir(cli_dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char p[600];
        snprintf(p, sizeof(p), "%s/%s", cli_dir, de->d_name);
        if (remove(p) != 0)
            rmdir(p);
    }
    closedir(d);
    rmdir(cli_dir);
}

/* Creates the scratch directory (removed at exit) and returns it. */
static inline const char *cli_scratch(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(cli_dir, sizeof(cli_dir), "%s/memtrace-viewer-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(cli_dir))
        bail_out("cannot create a scratch directory");
    atexit(cli_rmdir);
    return cli_dir;
}

static inline const char *cli_path(const char *name)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ & 3];
    snprintf(p, 512, "%s/%s", cli_dir, name);
    return p;
}

static inline const char *cli_binary(void)
{
    static char path[1024];
    const char *top = getenv("top_builddir");
    snprintf(path, sizeof(path), "%s/memtrace", top && *top ? top : ".");
    if (access(path, X_OK) != 0)
        bail_out("the memtrace binary is not built (set top_builddir)");
    return path;
}

static inline char *cli_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return strdup("");
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    size_t got;
    while ((got = fread(s + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0)
            s = realloc(s, cap *= 2);
    }
    s[n] = '\0';
    fclose(f);
    return s;
}

/* Runs memtrace with args (NULL-terminated, without argv[0]). */
static inline struct cli_out cli_run(const char *const *args)
{
    struct cli_out r = {-1, NULL, NULL};
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)cli_binary();
    for (int k = 0; args[k] && n < 63; k++)
        argv[n++] = (char *)args[k];
    argv[n] = NULL;
    char o[512], e[512];
    snprintf(o, sizeof(o), "%s/.stdout", cli_dir);
    snprintf(e, sizeof(e), "%s/.stderr", cli_dir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int fo = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0)
            _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        bail_out("cannot run memtrace");
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r.out = cli_slurp(o);
    r.err = cli_slurp(e);
    unlink(o);
    unlink(e);
    return r;
}

static inline void cli_free(struct cli_out *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

/* Parses r's stdout as JSON (NULL and a diagnostic if it does not parse). */
static inline json_t *cli_json(const struct cli_out *r)
{
    json_error_t jerr;
    json_t *j = json_loads(r->out, 0, &jerr);
    if (!j)
        diag("output is not JSON (%s, line %d): %.200s", jerr.text, jerr.line, r->out);
    return j;
}

/* Integer at a dotted path ("allocated.peak_bytes"), or -1 when absent. */
static inline long long cli_int(json_t *j, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    json_t *v = j;
    for (char *save, *tok = strtok_r(buf, ".", &save); tok; tok = strtok_r(NULL, ".", &save))
        v = json_object_get(v, tok);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

static inline json_t *cli_get(json_t *j, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    json_t *v = j;
    for (char *save, *tok = strtok_r(buf, ".", &save); tok; tok = strtok_r(NULL, ".", &save))
        v = json_object_get(v, tok);
    return v;
}

/* Number of lines in s. */
static inline int cli_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* The line of s that starts with prefix (copied into buf), or "" when none. */
static inline const char *cli_line(const char *s, const char *prefix, char *buf, size_t size)
{
    size_t len = strlen(prefix);
    const char *p = s;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        if (l >= len && memcmp(p, prefix, len) == 0) {
            snprintf(buf, size, "%.*s", (int)l, p);
            return buf;
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    buf[0] = '\0';
    return buf;
}

static inline void cli_check(int rc, const char *what)
{
    if (rc != 0) {
        char msg[256];
        snprintf(msg, sizeof(msg), "%s failed: %s", what, memtrace_strerror(rc));
        bail_out(msg);
    }
}

#endif
