/* ze-t: a Level Zero program linked with the real loader, run with the fake driver
 * under the preload: each wrapped call is recorded once with its exact action,
 * source, address, size and device, and reaches the driver once. */
#include "harness.h"

#include "config.h"

#if !MEMTRACE_HAVE_LEVEL_ZERO
int main(void)
{
    skip_all("built without the Level Zero loader (install libze-dev libze1)");
}
#else
int main(void)
{
    if (access(PRELOAD_SO, R_OK) != 0)
        skip_all("the preload library is not built yet");
    if (access(FAKE_DIR "/libze_fake.so", R_OK) != 0)
        skip_all("the fake Level Zero driver is not built");
    h_setup();
    char out_pat[400];
    snprintf(out_pat, sizeof out_pat, "%s/ze-%%p.memtrace", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", out_pat, 1);
    setenv("MEMTRACE_SAMPLE_MS", "0", 1);
    setenv("ZE_ENABLE_ALT_DRIVERS", FAKE_DIR "/libze_fake.so", 1);
    setenv("FAKE_ZE_DEVICES", "2", 1);

    char *argv[] = {PROG_DIR "/ze_prog", NULL};
    char *out;
    char err_path[400];
    snprintf(err_path, sizeof err_path, "%s/stderr", h_tmpdir);
    int st = h_run(argv, 1, &out, err_path);
    is_int(0, st, "ze_prog exits 0 under the preload");
    if (st != 0) {
        char *e = h_slurp_file(err_path);
        diag("stderr: %s", e);
        free(e);
    }

    struct h_want w[64];
    size_t nw = h_parse_wants(out, w, 64);
    is_int(20, (long long)nw, "the program reports 20 recorded calls");

    const char *path = h_find_file("ze-");
    struct h_file f;
    h_read(&f, path);
    is_int(0, f.rc, "file reads without error");
    is_int(0, f.truncated, "file is complete");
    is_int((long long)nw, (long long)f.n, "one event per wrapped call, nothing else");
    int mismatches = h_mismatches(&f, w, nw);
    is_int(0, mismatches, "action, source, address, size and device of every event");
    is_int(3, (long long)h_count_src(&f, -1, "zeMemAllocDevice"), "3 zeMemAllocDevice events");
    is_int(2, (long long)h_count_src(&f, -1, "zeMemAllocHost"), "2 zeMemAllocHost events");
    is_int(2, (long long)h_count_src(&f, -1, "zeMemAllocShared"), "2 zeMemAllocShared events");
    is_int(6, (long long)h_count_src(&f, -1, "zeMemFree"), "6 zeMemFree events");
    is_int(1, (long long)h_count_src(&f, -1, "zeMemFreeExt"), "1 zeMemFreeExt event");
    is_int(7, (long long)h_count(&f, MEMTRACE_SEGMENT_FREE),
           "7 segment_free of memory (the physical handle is a mark)");
    is_int(0, h_segments(&f), "no live segment at exit");
    h_close(&f);

    static const struct {
        const char *sym;
        long long n;
    } want_calls[] = {
        {"zeMemAllocDevice", 3},    {"zeMemAllocHost", 2},       {"zeMemAllocShared", 2},
        {"zeMemFree", 7},           {"zeMemFreeExt", 1},         {"zeVirtualMemReserve", 1},
        {"zeVirtualMemFree", 1},    {"zeVirtualMemMap", 1},      {"zeVirtualMemUnmap", 1},
        {"zePhysicalMemCreate", 1}, {"zePhysicalMemDestroy", 1},
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
    h_cleanup();
    done_testing();
    return exit_status();
}
#endif
