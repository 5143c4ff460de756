/* fork-t: a child that allocates after fork() writes its own file with its own
 * events only; the parent's file holds the parent's events only. */
#include "harness.h"

static void check_file(int pid, const char *who, int n, unsigned long long first)
{
    char path[400];
    snprintf(path, sizeof path, "%s/fork-%d.memtrace", h_tmpdir, pid);
    struct h_file f;
    h_read(&f, path);
    is_int(0, f.rc, "%s's file reads", who);
    is_int(0, f.truncated, "%s's file is complete", who);
    is_int(n, (long long)h_count(&f, MEMTRACE_SEGMENT_ALLOC), "%s's file has its %d allocations",
           who, n);
    int bad = 0, k = 0;
    for (size_t i = 0; i < f.n; i++)
        if (f.ev[i].action == MEMTRACE_SEGMENT_ALLOC && f.ev[i].size != first + (unsigned)k++)
            bad++;
    is_int(0, bad, "%s's allocations have its sizes", who);
    is_int(n, h_segments(&f), "%s's state has %d live segments", who, n);
    h_close(&f);
}

int main(void)
{
    h_setup();
    h_skip_under_tsan("TSan does not support a child that starts threads after a fork of a "
                      "threaded process (the recorder's writer)");
    plan(12);
    char pat[400];
    snprintf(pat, sizeof pat, "%s/fork-%%p.memtrace", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", pat, 1);
    char *argv[] = {PROG_DIR "/cuda_prog", "fork", NULL};
    char *out;
    int st = h_run(argv, 1, &out, NULL);
    is_int(0, st, "program exits 0");
    int child = 0, parent = 0, cst = -1;
    const char *c = strstr(out, "child ");
    const char *p = strstr(out, "parent ");
    if (c)
        child = atoi(c + 6);
    if (p)
        sscanf(p, "parent %d child-status %d", &parent, &cst);
    ok(child > 0 && parent > 0 && cst == 0, "parent %d and child %d both ran", parent, child);
    check_file(parent, "parent", 4, 1000);
    check_file(child, "child", 5, 2000);
    free(out);
    h_cleanup();
    return exit_status();
}
