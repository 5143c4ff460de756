/* caching-t: interpose/caching.c. With MEMTRACE_CACHING=1 a plain driver program's
 * cuMemAlloc_v2 / cuMemAllocAsync are served by memtrace's caching allocator: the
 * driver is called for segments only (PyTorch's policy: 1 MiB requests share 2 MiB
 * segments, 4 MiB requests 20 MiB ones), the file holds the allocator's block and
 * segment events and no interposer duplicates, foreign pointers reach the driver,
 * out of memory returns 2 with an oom event, MEMTRACE_ALLOC_CONF applies, and
 * `memtrace run --caching` does the same. */
#include "harness.h"

#define MIB (1024ull * 1024)

struct got {
    uint64_t addr[1100], size[1100];
    size_t n;
};

static void parse_addrs(const char *out, struct got *g)
{
    g->n = 0;
    for (const char *p = out; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        unsigned long long a, s;
        if (g->n < 1100 && sscanf(p, "A %llx %llu", &a, &s) == 2) {
            g->addr[g->n] = a;
            g->size[g->n++] = s;
        }
    }
}

/* Every address the program got is the next alloc event's and lies in a segment
 * the allocator recorded. */
static void check_addresses(const struct h_file *f, const struct got *g, const char *what)
{
    size_t k = 0, bad_order = 0, outside = 0;
    for (size_t i = 0; i < f->n && k < g->n; i++) {
        if (f->ev[i].action != MEMTRACE_ALLOC)
            continue;
        bad_order += f->ev[i].addr != g->addr[k] || f->ev[i].requested_size != g->size[k];
        int in = 0;
        for (size_t j = 0; j < f->n && !in; j++)
            in = f->ev[j].action == MEMTRACE_SEGMENT_ALLOC && f->ev[j].addr <= g->addr[k] &&
                 g->addr[k] + g->size[k] <= f->ev[j].addr + f->ev[j].size;
        outside += !in;
        k++;
    }
    ok(k == g->n && bad_order == 0, "%s: each of the %zu addresses is its alloc event's", what,
       g->n);
    is_int(0, (long long)outside, "%s: every address lies inside a recorded segment", what);
}

static int run_prog(const char *mode, const char *name, char **out, struct h_file *f)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s.memtrace", h_tmpdir, name);
    setenv("MEMTRACE_OUTPUT", path, 1);
    char *argv[] = {PROG_DIR "/caching_prog", (char *)mode, NULL};
    int st = h_run(argv, 1, out, NULL);
    h_read(f, path);
    return st;
}

static void test_loop(void)
{
    char *out;
    struct h_file f;
    static struct got g;
    int st = run_prog("loop", "loop", &out, &f);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "loop: the program runs to its end");
    parse_addrs(out, &g);
    is_int(1010, (long long)g.n, "loop: 1000 + 10 allocations made");
    /* 200 live 1 MiB blocks fill 100 small-pool segments, reused by later rounds;
     * 10 blocks of 4 MiB on the stream fill two 20 MiB large-pool segments. */
    is_int(102, h_line_value(out, 'C', "cuMemAlloc_v2"), "loop: the driver allocated 102 segments");
    is_int(0, h_line_value(out, 'C', "cuMemAllocAsync"), "loop: no cuMemAllocAsync reached it");
    is_int(0, h_line_value(out, 'C', "cuMemFreeAsync"), "loop: no cuMemFreeAsync reached it");
    is_int(10, h_line_value(out, 'C', "cuStreamSynchronize"),
           "loop: each cuMemFreeAsync waited for its stream");
    is_int(2, h_line_value(out, 'C', "cuMemFree_v2"),
           "loop: cuMemFree_v2 reached the driver only for the two foreign pointers");
    is_int(0, h_line_value(out, 'R', "cuMemFree_v2(pitched)"), "loop: pitched memory freed");
    is_int(1, h_line_value(out, 'R', "cuMemFree_v2(old)"),
           "loop: the driver's own answer for an old-ABI pointer comes back");
    is_int(0, h_line_value(out, 'R', "cuMemFree(old)"), "loop: and cuMemFree frees it");
    is_int(1, h_line_value(out, 'R', "context-kept"), "loop: the program's context stays current");

    is_int(0, f.rc, "loop: file read without error");
    is_int(1010, (long long)h_count(&f, MEMTRACE_ALLOC), "loop: 1010 alloc events");
    is_int(1010, (long long)h_count(&f, MEMTRACE_FREE_REQUESTED), "loop: 1010 free_requested");
    is_int(1010, (long long)h_count(&f, MEMTRACE_FREE_COMPLETED), "loop: 1010 free_completed");
    is_int(102, (long long)h_count_src(&f, MEMTRACE_SEGMENT_ALLOC, "caching_allocator"),
           "loop: 102 segment_alloc events from the allocator");
    is_int(103, (long long)h_count(&f, MEMTRACE_SEGMENT_ALLOC),
           "loop: plus the pitched allocation, nothing else");
    is_int(0,
           (long long)(h_count_src(&f, -1, "cuMemAlloc_v2") +
                       h_count_src(&f, -1, "cuMemAllocAsync") +
                       h_count_src(&f, -1, "cuMemFreeAsync")),
           "loop: no event sourced from the wrapped allocation calls");
    is_int(2, (long long)h_count_src(&f, MEMTRACE_SEGMENT_FREE, "cuMemFree_v2"),
           "loop: the two foreign frees recorded as the interposer does");
    size_t async = 0, streamed = 0;
    for (size_t i = 0; i < f.n; i++)
        if (f.ev[i].action == MEMTRACE_ALLOC && f.ev[i].size == 4 * MIB) {
            async++;
            streamed += f.ev[i].stream != 0 && f.ev[i].device == 0;
        }
    ok(async == 10 && streamed == 10, "loop: the 10 async blocks carry their stream");
    check_addresses(&f, &g, "loop");
    h_close(&f);
    free(out);
}

static void test_oom(void)
{
    char *out;
    struct h_file f;
    static struct got g;
    setenv("FAKE_CUDA_MEMORY", "8M", 1);
    int st = run_prog("oom", "oom", &out, &f);
    unsetenv("FAKE_CUDA_MEMORY");
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "oom: the program runs to its end");
    is_int(2, h_line_value(out, 'R', "big"),
           "oom: 64 MiB on 8 MiB returns CUDA_ERROR_OUT_OF_MEMORY");
    is_int(0, h_line_value(out, 'R', "small"), "oom: 1 MiB afterwards succeeds");
    /* The first try, the retry after freeing the cache, and the small segment. */
    is_int(3, h_line_value(out, 'C', "cuMemAlloc_v2"), "oom: the driver was asked three times");
    is_int(1, (long long)h_count_src(&f, MEMTRACE_OOM, "caching_allocator"), "oom: one oom event");
    size_t i = 0;
    while (i < f.n && f.ev[i].action != MEMTRACE_OOM)
        i++;
    ok(i < f.n && f.ev[i].size == 64 * MIB && f.ev[i].aux == 8 * MIB,
       "oom: it names 64 MiB and the device's 8 MiB free");
    parse_addrs(out, &g);
    is_int(1, (long long)h_count(&f, MEMTRACE_ALLOC), "oom: one alloc event");
    check_addresses(&f, &g, "oom");
    h_close(&f);
    free(out);
}

static void test_conf(void)
{
    char *out;
    struct h_file f;
    setenv("MEMTRACE_ALLOC_CONF", "expandable_segments:True", 1);
    run_prog("loop", "expandable", &out, &f);
    is_int(0, h_line_value(out, 'C', "cuMemAlloc_v2"),
           "MEMTRACE_ALLOC_CONF=expandable_segments:True: no cuMemAlloc_v2 at all");
    ok(h_line_value(out, 'C', "cuMemCreate") > 0, "it maps physical memory instead");
    is_int(1010, (long long)h_count(&f, MEMTRACE_ALLOC), "still 1010 alloc events");
    h_close(&f);
    free(out);

    char err_path[400];
    snprintf(err_path, sizeof err_path, "%s/conf.err", h_tmpdir);
    setenv("MEMTRACE_ALLOC_CONF", "no_such_key:1", 1);
    setenv("MEMTRACE_OUTPUT", "/nonexistent-dir/x.memtrace", 1);
    char *argv[] = {PROG_DIR "/caching_prog", "loop", NULL};
    int st = h_run(argv, 1, &out, err_path);
    unsetenv("MEMTRACE_ALLOC_CONF");
    char *err = h_slurp_file(err_path);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(err, "MEMTRACE_ALLOC_CONF=no_such_key:1") &&
           strstr(err, "recording is off") && strchr(err, '\n') == err + strlen(err) - 1,
       "a bad MEMTRACE_ALLOC_CONF: one line naming it, the program runs on");
    is_int(1000, h_line_value(out, 'C', "cuMemAlloc_v2"),
           "and its allocations went to the driver (1000 calls)");
    free(err);
    free(out);
}

static void test_run(void)
{
    if (access(BUILDDIR "/memtrace", X_OK) != 0) {
        skip(4, "memtrace CLI not built");
        return;
    }
    char pat[400], path[400], err_path[400];
    snprintf(pat, sizeof pat, "%s/run-%%p.memtrace", h_tmpdir);
    snprintf(err_path, sizeof err_path, "%s/run.err", h_tmpdir);
    /* memtrace run prepends the preload itself; only a sanitizer runtime stays. */
    char keep[600];
    snprintf(keep, sizeof keep, "%s", getenv("LD_PRELOAD_FOR_TEST"));
    char *sp = strchr(keep, ' ');
    if (sp != NULL) {
        *sp = '\0';
        setenv("LD_PRELOAD", keep, 1);
    }
    unsetenv("MEMTRACE_CACHING");
    char *argv[] = {BUILDDIR "/memtrace",     "run",  "--caching", "-o", pat, "--",
                    PROG_DIR "/caching_prog", "loop", NULL};
    char *out;
    int st = h_run(argv, 0, &out, err_path);
    unsetenv("LD_PRELOAD");
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "memtrace run --caching: exit 0");
    is_int(102, h_line_value(out, 'C', "cuMemAlloc_v2"), "memtrace run --caching: 102 segments");
    char *err = h_slurp_file(err_path);
    const char *at = strstr(err, h_tmpdir);
    ok(at != NULL && strstr(err, " events, peak allocated ") != NULL &&
           strstr(err, ", peak reserved ") != NULL,
       "memtrace run --caching: summary printed with the blocks' peak");
    struct h_file f = {0};
    if (at != NULL && sscanf(at, "%399[^:]", path) == 1)
        h_read(&f, path);
    is_int(102, (long long)h_count_src(&f, MEMTRACE_SEGMENT_ALLOC, "caching_allocator"),
           "memtrace run --caching: the allocator's 102 segments in the file");
    h_close(&f);
    free(err);
    free(out);
}

int main(void)
{
    h_setup();
    plan(40);
    setenv("MEMTRACE_SAMPLE_MS", "0", 1);
    setenv("MEMTRACE_STACKS", "4", 1);
    setenv("MEMTRACE_CACHING", "1", 1);
    test_loop();
    test_oom();
    test_conf();
    test_run();
    h_cleanup();
    return exit_status();
}
