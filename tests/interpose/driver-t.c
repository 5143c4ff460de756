/* driver-t: a program linked with the (fake) driver, run under the preload: every
 * wrapped driver call is recorded once with its exact address, size, device and
 * source, reaches the real function once, and its stack names the caller. */
#include "harness.h"

static void test_driver(void)
{
    char out_pat[400];
    snprintf(out_pat, sizeof out_pat, "%s/driver-%%p.memtrace", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", out_pat, 1);
    setenv("MEMTRACE_SAMPLE_MS", "0", 1);
    char *argv[] = {PROG_DIR "/cuda_prog", "driver", NULL};
    char *out;
    int st = h_run(argv, 1, &out, NULL);
    is_int(0, st, "driver program exits 0 under the preload");

    struct h_want w[64];
    size_t nw = h_parse_wants(out, w, 64);
    is_int(29, (long long)nw, "the program reports 29 wrapped calls");

    struct h_file f;
    h_read(&f, h_find_file("driver-"));
    is_int(0, f.rc, "file reads without error");
    is_int(0, f.truncated, "file is complete");
    is_int((long long)nw, (long long)f.n, "one event per wrapped call, nothing else");
    int mismatches = h_mismatches(&f, w, nw);
    is_int(0, mismatches, "action, source, address, size and device of every event");

    unsigned long long stream = 0;
    const char *sp = strstr(out, "\nS ");
    if (sp)
        stream = strtoull(sp + 3, NULL, 10);
    ok(f.n > 9 && f.ev[6].stream == stream && stream != 0, "cuMemAllocAsync carries its stream");
    ok(f.n > 9 && f.ev[7].stream == 2, "cuMemAllocAsync_ptsz on NULL is the per-thread stream");
    ok(f.n > 9 && f.ev[9].stream == 2, "cuMemAllocFromPoolAsync_ptsz on NULL is per-thread");
    is_int(0, h_segments(&f), "no live segment at exit");
    h_close(&f);

    static const struct {
        const char *sym;
        long long n;
    } want_calls[] = {
        {"cuMemAlloc_v2", 1},
        {"cuMemAllocPitch_v2", 1},
        {"cuMemAllocManaged", 1},
        {"cuMemFree_v2", 3},
        {"cuMemAllocHost_v2", 1},
        {"cuMemHostAlloc", 1},
        {"cuMemFreeHost", 2},
        {"cuMemHostRegister_v2", 1},
        {"cuMemHostUnregister", 1},
        {"cuMemAllocAsync", 1},
        {"cuMemAllocAsync_ptsz", 1},
        {"cuMemAllocFromPoolAsync", 1},
        {"cuMemAllocFromPoolAsync_ptsz", 1},
        {"cuMemFreeAsync", 2},
        {"cuMemFreeAsync_ptsz", 2},
        {"cuMemCreate", 1},
        {"cuMemRelease", 1},
        {"cuMemMap", 1},
        {"cuMemUnmap", 1},
        {"cuMemAddressReserve", 1},
        {"cuMemAddressFree", 1},
        {"cuMemGetInfo_v2", 1},
        {"cuGraphAddMemAllocNode", 1},
        {"cuGraphAddMemFreeNode", 1},
        {"cuMemAlloc", 1},
        {"cuMemFree", 1},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof want_calls / sizeof want_calls[0]; i++) {
        long long got = h_line_value(out, 'C', want_calls[i].sym);
        if (got != want_calls[i].n) {
            diag("%s reached the driver %lld times, wanted %lld", want_calls[i].sym, got,
                 want_calls[i].n);
            bad++;
        }
    }
    is_int(0, bad, "each real driver function was reached exactly as often as called");
    free(out);
}

static void test_stacks(const char *stacks, int want_named)
{
    char out_pat[400];
    snprintf(out_pat, sizeof out_pat, "%s/stacks%s-%%p.memtrace", h_tmpdir, stacks);
    setenv("MEMTRACE_OUTPUT", out_pat, 1);
    setenv("MEMTRACE_STACKS", stacks, 1);
    char *argv[] = {PROG_DIR "/cuda_prog", "stacks", NULL};
    char *out;
    int st = h_run(argv, 1, &out, NULL);
    unsetenv("MEMTRACE_STACKS");
    is_int(0, st, "stacks program exits 0 (MEMTRACE_STACKS=%s)", stacks);
    struct h_want w[4];
    size_t nw = h_parse_wants(out, w, 4);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "stacks%s-", stacks);
    struct h_file f;
    h_read(&f, h_find_file(prefix));
    int found = 0, depth = -1;
    for (size_t i = 0; i < f.n; i++) {
        if (f.ev[i].action != MEMTRACE_SEGMENT_ALLOC || nw != 1 || f.ev[i].addr != w[0].addr)
            continue;
        uint32_t frames[64];
        depth = memtrace_reader_stack(f.r, f.ev[i].stack, frames, 64);
        for (int j = 0; j < depth && j < 64; j++) {
            const struct memtrace_frame *fr = memtrace_reader_frame(f.r, frames[j]);
            if (fr != NULL && strcmp(fr->symbol, "memtrace_test_named_allocator") == 0)
                found = 1;
        }
    }
    if (want_named) {
        ok(found, "the allocation's stack names the program's function");
        ok(depth > 1 && depth <= 16, "stack depth within MEMTRACE_STACKS (%d)", depth);
    } else {
        is_int(0, depth, "MEMTRACE_STACKS=%s records no stack", stacks);
    }
    is_int(1, h_segments(&f), "the leaked block is live at exit");
    const struct memtrace_segment *seg = f.r != NULL ? memtrace_reader_segment(f.r, 0) : NULL;
    ok(seg != NULL && nw == 1 && seg->addr == w[0].addr && seg->total_size == 12345,
       "live segment has the block's address and size");
    h_close(&f);
    free(out);
}

static void test_quiet(void)
{
    char out_pat[400];
    snprintf(out_pat, sizeof out_pat, "%s/quiet-%%p.memtrace", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", out_pat, 1);
    char *argv[] = {PROG_DIR "/cuda_prog", "quiet", "7", NULL};
    char *out;
    int st = h_run(argv, 1, &out, NULL);
    is_int(0, st, "a program with no device call runs under the preload");
    is_string("quiet 7\n", out, "and prints its output");
    is_int(0, h_count_files("quiet-"), "and no file is written");
    free(out);
}

int main(void)
{
    h_setup();
    plan(23);
    test_driver();
    test_stacks("16", 1);
    test_stacks("none", 0);
    test_quiet();
    h_cleanup();
    return exit_status();
}
