/* webdir.c: where the web viewer's files are, for `memtrace html` and `view`. Built
 * into its own convenience library so that it alone gets the source and installed
 * locations from make. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "web.h"

#ifndef MT_WEBDIR
#define MT_WEBDIR "/usr/local/share/memtrace/web"
#endif
#ifndef MT_SRC_WEBDIR
#define MT_SRC_WEBDIR ""
#endif
#ifndef MT_BUILDDIR
#define MT_BUILDDIR ""
#endif

const char *const cli_web_files[] = {
    "index.html", "viewer.css",  "format.js",  "pickle.js", "replay.js",
    "worker.js",  "timeline.js", "compare.js", "app.js",    NULL,
};

int cli_web_known(const char *name)
{
    for (size_t i = 0; cli_web_files[i]; i++)
        if (strcmp(cli_web_files[i], name) == 0)
            return 1;
    return 0;
}

static int has_index(const char *dir)
{
    char path[PATH_MAX];
    struct stat st;
    if ((size_t)snprintf(path, sizeof path, "%s/index.html", dir) >= sizeof path)
        return 0;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Whether this binary is the build tree's (or libtool's .libs/ copy of it): then the
 * viewer is the one in the source tree beside it, never an older installed one. */
static int in_build_tree(void)
{
    char exe[PATH_MAX], build[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0 || !*MT_BUILDDIR || !realpath(MT_BUILDDIR, build))
        return 0;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    size_t len = strlen(exe);
    if (len >= 6 && strcmp(exe + len - 6, "/.libs") == 0)
        exe[len - 6] = '\0';
    return strcmp(exe, build) == 0;
}

int cli_web_dir(char *out, size_t size)
{
    const char *env = getenv("MEMTRACE_WEB_DIR");
    const char *dir = env && *env ? env : in_build_tree() ? MT_SRC_WEBDIR : MT_WEBDIR;
    if (snprintf(out, size, "%s", dir) >= (int)size || !has_index(out)) {
        cli_error("the web viewer is not in %s (no index.html there)%s", dir,
                  env && *env ? "; check MEMTRACE_WEB_DIR" : "; reinstall memtrace");
        return -1;
    }
    return 0;
}

int cli_web_path(char *out, size_t size, const char *dir, const char *name)
{
    int n = snprintf(out, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size) {
        cli_error("%s/%s: path too long", dir, name);
        return -1;
    }
    return 0;
}

int cli_read_all(const char *path, char **data, size_t *len)
{
    int ret = -1;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_error("cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    for (;;) {
        if (cap - n < 65536) {
            char *b = realloc(buf, cap = cap ? cap * 2 : 131072);
            if (!b) {
                cli_error("%s: out of memory", path);
                goto out;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        cli_error("cannot read %s: %s", path, strerror(errno));
        goto out;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    buf = NULL;
    ret = 0;
out:
    free(buf);
    fclose(f);
    return ret;
}

int cli_web_check_kind(const char *path, FILE *f)
{
    unsigned char head[16];
    size_t n = fread(head, 1, sizeof head, f);
    if (ferror(f)) {
        cli_error("cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    rewind(f);
    if (n >= 8 && memcmp(head, "MEMTRACE", 8) == 0)
        return 0;
    if (n >= 2 && head[0] == 0x80)
        return 0;
    size_t i = 0;
    while (i < n && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t'))
        i++;
    if (i < n && head[i] == '{')
        return 0;
    cli_error("%s: not a .memtrace file nor a PyTorch snapshot (pickle or JSON)", path);
    return -1;
}

int cli_web_check_files(char **paths, int n)
{
    for (int i = 0; i < n; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (!f) {
            cli_error("cannot open %s: %s", paths[i], strerror(errno));
            return -1;
        }
        int rc = cli_web_check_kind(paths[i], f);
        fclose(f);
        if (rc != 0)
            return -1;
    }
    return 0;
}

const char *cli_web_type(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot)
        return "application/octet-stream";
    if (strcmp(dot, ".html") == 0)
        return "text/html; charset=utf-8";
    if (strcmp(dot, ".js") == 0)
        return "text/javascript; charset=utf-8";
    if (strcmp(dot, ".css") == 0)
        return "text/css; charset=utf-8";
    if (strcmp(dot, ".json") == 0)
        return "application/json";
    return "application/octet-stream";
}
