/* suites-t: the reader on the committed cases in tests/snapshot/{valid,invalid}/<case>/
 * (input.memtrace and expect; made by gen-cases). A valid case expects an event
 * count and a truncation flag; an invalid one an error code and message text. */
#include "config.h"

#include "memtrace_snapshot.h"

#include "tap.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MT_SRCDIR
#define MT_SRCDIR "."
#endif

struct expect {
    long events, truncated, code;
    char error[256];
};

static int read_expect(const char *path, struct expect *x)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    memset(x, 0, sizeof(*x));
    x->events = x->truncated = -1;
    char line[256];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "events ", 7) == 0)
            x->events = strtol(line + 7, NULL, 10);
        else if (strncmp(line, "truncated ", 10) == 0)
            x->truncated = strtol(line + 10, NULL, 10);
        else if (strncmp(line, "code ", 5) == 0)
            x->code = strtol(line + 5, NULL, 10);
        else if (strncmp(line, "error ", 6) == 0)
            snprintf(x->error, sizeof(x->error), "%s", line + 6);
    }
    fclose(f);
    return 0;
}

static int is_case(const struct dirent *d)
{
    return d->d_name[0] != '.';
}

static int run_suite(const char *top, const char *kind)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/tests/snapshot/%s", top, kind);
    struct dirent **names;
    int n = scandir(dir, &names, is_case, alphasort);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        char input[1024], expect_path[1024];
        snprintf(input, sizeof(input), "%s/%s/input.memtrace", dir, name);
        snprintf(expect_path, sizeof(expect_path), "%s/%s/expect", dir, name);
        struct expect x;
        if (read_expect(expect_path, &x) < 0) {
            ok(0, "%s/%s: has an expect file", kind, name);
            free(names[i]);
            continue;
        }
        struct memtrace_reader *r = NULL;
        struct memtrace_errinfo err;
        memset(&err, 0, sizeof(err));
        int rc = memtrace_reader_open(&r, input, &err);
        long count = 0;
        int truncated = -1;
        if (rc == 0) {
            struct memtrace_event e;
            while ((rc = memtrace_reader_next(r, &e)) == 1)
                count++;
            truncated = memtrace_reader_truncated(r);
            err = *memtrace_reader_error(r);
            memtrace_reader_close(r);
        }
        if (strcmp(kind, "valid") == 0) {
            ok(rc == 0 && count == x.events && truncated == x.truncated,
               "valid/%s: %ld events, truncated %ld (got rc %d, %ld, %d)", name, x.events,
               x.truncated, rc, count, truncated);
            if (rc != 0)
                diag("%s", err.text);
        } else {
            ok(rc == x.code && x.error[0] && strstr(err.text, x.error) != NULL &&
                   strncmp(err.text, input, strlen(input)) == 0,
               "invalid/%s: code %ld, \"%s\"", name, x.code, x.error);
            if (rc != x.code || strstr(err.text, x.error) == NULL)
                diag("got %d: %s", rc, err.text);
        }
        free(names[i]);
    }
    free(names);
    return n;
}

int main(void)
{
    const char *top = getenv("top_srcdir");
    if (top == NULL || top[0] == 0)
        top = MT_SRCDIR;
    int valid = run_suite(top, "valid");
    int invalid = run_suite(top, "invalid");
    ok(valid >= 8, "valid suite has its cases (%d)", valid);
    ok(invalid >= 14, "invalid suite has its cases (%d)", invalid);
    done_testing();
    return exit_status();
}
