/* getproc-t: a program that reaches the driver only through dlopen + dlsym +
 * cuGetProcAddress_v2, as CUDA runtimes do, is recorded under the preload, and each
 * query reaches the variant (ABI version, per-thread stream) it asked for. */
#include "harness.h"

int main(void)
{
    h_setup();
    plan(13);
    char pat[400], path[400];
    snprintf(pat, sizeof pat, "%s/getproc.memtrace", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", pat, 1);
    setenv("MEMTRACE_SAMPLE_MS", "0", 1);
    snprintf(path, sizeof path, "%s", pat);
    char *argv[] = {PROG_DIR "/getproc_prog", NULL};
    char *out;
    int st = h_run(argv, 1, &out, NULL);
    is_int(0, st, "program exits 0 under the preload");

    struct h_file f;
    h_read(&f, path);
    is_int(0, f.rc, "file reads");
    is_int(6, (long long)f.n, "6 events: 3 allocations, 3 frees; the 32-bit ABI unrecorded");
    int bad = 0;
    const char *p = out;
    for (size_t i = 0; i < f.n; i++) {
        char action[32], source[64];
        unsigned long long addr, size;
        int dev;
        p = strstr(p, "E ");
        if (p == NULL ||
            sscanf(p, "E %31s %63s %llx %llu %d", action, source, &addr, &size, &dev) != 5) {
            bad++;
            break;
        }
        p++;
        const struct memtrace_event *e = &f.ev[i];
        if (strcmp(memtrace_action_name(e->action), action) != 0 ||
            strcmp(memtrace_reader_string(f.r, e->source), source) != 0 || e->addr != addr ||
            e->size != size || e->device != dev) {
            diag("event %zu: %s %s 0x%llx, wanted %s %s 0x%llx", i, memtrace_action_name(e->action),
                 memtrace_reader_string(f.r, e->source), (unsigned long long)e->addr, action,
                 source, addr);
            bad++;
        }
    }
    is_int(0, bad, "each event has the variant's name, the address and the size");
    ok(f.n == 6 && f.ev[1].stream == 2, "the per-thread variant records the per-thread stream");
    ok(f.n == 6 && f.ev[2].stream == 0, "the legacy variant records stream 0");
    h_close(&f);
    is_int(1, h_line_value(out, 'C', "cuMemAlloc_v2"), "cuMemAlloc_v2 reached once");
    is_int(1, h_line_value(out, 'C', "cuMemAlloc"),
           "the 32-bit cuMemAlloc reached once, unwrapped");
    is_int(1, h_line_value(out, 'C', "cuMemFree_v2"), "cuMemFree_v2 reached once");
    is_int(1, h_line_value(out, 'C', "cuMemAllocAsync_ptsz"), "cuMemAllocAsync_ptsz reached once");
    is_int(1, h_line_value(out, 'C', "cuMemAllocAsync"), "cuMemAllocAsync reached once");
    is_int(1, h_line_value(out, 'C', "cuMemFreeAsync_ptsz"), "cuMemFreeAsync_ptsz reached once");
    is_int(1, h_line_value(out, 'C', "cuMemFreeAsync"), "cuMemFreeAsync reached once");
    free(out);
    h_cleanup();
    return exit_status();
}
