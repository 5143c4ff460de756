/* oom-t: a driver that refuses allocations. The fake libcuda fails chosen
 * cuMemAlloc_v2 calls with CUDA_ERROR_OUT_OF_MEMORY (FAKE_CUDA_FAIL_AT), and a
 * request beyond the device fails for real: the program sees the same results with
 * the preload as without it, and the file has an oom event at each failure with the
 * bytes asked for and the device's free bytes then. Pinned host memory and physical
 * memory (cuMemCreate) refused for want of room give oom events too. */
#include "harness.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

/* The program's "R <i> <result>" lines, in order. */
static int results(const char *out, int *r, int max)
{
    int n = 0;
    for (const char *p = strstr(out, "R "); p != NULL && n < max; p = strstr(p + 1, "\nR ")) {
        int i, v;
        if (sscanf(p[0] == '\n' ? p + 1 : p, "R %d %d", &i, &v) == 2 && i == n)
            r[n++] = v;
    }
    return n;
}

int main(void)
{
    h_setup();
    plan(24);
    char path[400];
    snprintf(path, sizeof path, "%s/oom.memtrace", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", path, 1);
    setenv("MEMTRACE_SAMPLE_MS", "0", 1);
    setenv("FAKE_CUDA_MEMORY", "1G", 1);
    setenv("FAKE_CUDA_FAIL_AT", "3", 1);
    char *argv[] = {PROG_DIR "/cuda_prog", "oom", NULL};

    char *plain_out, *traced_out;
    int plain[8], traced[8];
    is_int(0, h_run(argv, 0, &plain_out, NULL), "without the preload: exits 0");
    is_int(0, h_run(argv, 1, &traced_out, NULL), "with the preload: exits 0");
    int np = results(plain_out, plain, 8), nt = results(traced_out, traced, 8);
    is_int(5, np, "without the preload: 5 results");
    ok(np == 5 && plain[0] == 0 && plain[1] == 0 && plain[2] == 2 && plain[3] == 0 && plain[4] == 2,
       "the third call fails as injected, the 2 GiB one for want of room (2: out of memory)");
    ok(np == nt && memcmp(plain, traced, sizeof(int) * (size_t)np) == 0,
       "with the preload the program gets the same results");

    struct h_file f;
    h_read(&f, path);
    is_int(0, f.rc, "the file reads");
    is_int(2, (long long)h_count(&f, MEMTRACE_OOM), "two oom events");
    is_int(3, (long long)h_count(&f, MEMTRACE_SEGMENT_ALLOC), "three allocations");
    /* In order: alloc 1 MiB, alloc 2 MiB, oom 4 MiB, alloc 8 MiB, oom 2 GiB, frees. */
    const struct memtrace_event *inj = f.n > 2 ? &f.ev[2] : NULL;
    const struct memtrace_event *real = f.n > 4 ? &f.ev[4] : NULL;
    ok(inj && inj->action == MEMTRACE_OOM && inj->size == 4 * MiB && inj->device == 0,
       "the injected failure: an oom event in its place, 4 MiB asked for on device 0");
    is_int((long long)(GiB - 3 * MiB), inj ? (long long)inj->aux : -1,
           "its free bytes: the device's then (1 GiB - 3 MiB)");
    ok(inj && strcmp(memtrace_reader_string(f.r, inj->source), "cuMemAlloc_v2") == 0,
       "its source: cuMemAlloc_v2");
    ok(real && real->action == MEMTRACE_OOM && real->size == 2 * GiB,
       "the failure for want of room: an oom event in its place, 2 GiB asked for");
    is_int((long long)(GiB - 11 * MiB), real ? (long long)real->aux : -1,
           "its free bytes: 1 GiB - 11 MiB");
    is_int(0, h_segments(&f), "nothing live at exit");
    h_close(&f);
    free(plain_out);
    free(traced_out);
    unsetenv("FAKE_CUDA_FAIL_AT");

    /* Host and physical memory. */
    snprintf(path, sizeof path, "%s/oom_more.memtrace", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", path, 1);
    char *more_argv[] = {PROG_DIR "/cuda_prog", "oom_more", NULL};
    is_int(0, h_run(more_argv, 0, &plain_out, NULL), "oom_more without the preload: exits 0");
    is_int(0, h_run(more_argv, 1, &traced_out, NULL), "oom_more with the preload: exits 0");
    np = results(plain_out, plain, 8);
    nt = results(traced_out, traced, 8);
    ok(np == 4 && plain[0] == 2 && plain[1] == 2 && plain[2] == 0 && plain[3] == 2,
       "1 TiB of pinned host memory refused twice, 2 MiB of physical memory granted, 2 GiB "
       "refused (2: out of memory)");
    ok(np == nt && memcmp(plain, traced, sizeof(int) * (size_t)np) == 0,
       "with the preload the program gets the same results");
    h_read(&f, path);
    is_int(0, f.rc, "the file reads");
    is_int(3, (long long)h_count(&f, MEMTRACE_OOM), "three oom events");
    /* In order: oom 1 TiB host (twice), the 2 MiB handle, oom 2 GiB, the release. */
    const struct memtrace_event *h1 = f.n > 0 ? &f.ev[0] : NULL, *h2 = f.n > 1 ? &f.ev[1] : NULL;
    ok(h1 && h1->action == MEMTRACE_OOM && h1->size == 1024 * GiB && h1->device == -1 &&
           strcmp(memtrace_reader_string(f.r, h1->source), "cuMemAllocHost_v2") == 0,
       "cuMemAllocHost_v2: an oom event, 1 TiB asked for, host memory (device -1)");
    ok(h2 && h2->action == MEMTRACE_OOM && h2->size == 1024 * GiB && h2->device == -1 &&
           strcmp(memtrace_reader_string(f.r, h2->source), "cuMemHostAlloc") == 0,
       "cuMemHostAlloc: likewise");
    const struct memtrace_event *pc = f.n > 3 ? &f.ev[3] : NULL;
    ok(pc && pc->action == MEMTRACE_OOM && pc->size == 2 * GiB && pc->device == 0 &&
           strcmp(memtrace_reader_string(f.r, pc->source), "cuMemCreate") == 0,
       "cuMemCreate: an oom event, 2 GiB asked for on device 0");
    is_int((long long)(GiB - 2 * MiB), pc ? (long long)pc->aux : -1,
           "its free bytes: 1 GiB - the 2 MiB handle");
    h_close(&f);
    free(plain_out);
    free(traced_out);
    h_cleanup();
    return exit_status();
}
