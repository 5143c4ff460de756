/* library-t: one recorder per process (interpose/preload.c's dlsym hook). A program
 * using memtrace's caching allocator through the shared libmemtrace on the cuda
 * backend, run under the preload: the allocator's driver lookups get the real
 * functions, so each segment is recorded once, by the allocator, with its blocks,
 * and the preload starts the file when the library first looks the driver up. */
#include "harness.h"

int main(void)
{
    h_setup();
    if (access(PROG_DIR "/library_prog", X_OK) != 0)
        skip_all("library_prog not built");
    plan(12);
    char path[400];
    snprintf(path, sizeof path, "%s/library.memtrace", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", path, 1);
    setenv("MEMTRACE_SAMPLE_MS", "0", 1);
    char *out;
    char *argv[] = {PROG_DIR "/library_prog", NULL};
    int st = h_run(argv, 1, &out, NULL);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the program runs to its end");
    /* 50 x 1 MiB share 25 small segments; 3 x 30 MiB get one segment each. */
    is_int(28, h_line_value(out, 'C', "cuMemAlloc_v2"), "the driver allocated 28 segments");
    is_int(28, h_line_value(out, 'S', "num_device_alloc"), "as the allocator counts");
    is_int(28, h_line_value(out, 'C', "cuMemFree_v2"), "empty_cache freed all 28");

    struct h_file f;
    h_read(&f, path);
    is_int(0, f.rc, "the preload wrote a file the reader reads");
    is_int(28, (long long)h_count(&f, MEMTRACE_SEGMENT_ALLOC), "exactly 28 segment_alloc events");
    is_int(28, (long long)h_count_src(&f, MEMTRACE_SEGMENT_ALLOC, "caching_allocator"),
           "all of them from the allocator");
    is_int(28, (long long)h_count_src(&f, MEMTRACE_SEGMENT_FREE, "caching_allocator"),
           "28 segment_free events, from the allocator");
    is_int(0,
           (long long)(h_count_src(&f, -1, "cuMemAlloc_v2") + h_count_src(&f, -1, "cuMemFree_v2")),
           "no event recorded by the driver wrappers");
    is_int(53, (long long)h_count(&f, MEMTRACE_ALLOC), "53 alloc events");
    is_int(53, (long long)h_count(&f, MEMTRACE_FREE_REQUESTED), "53 free_requested events");
    is_int(53, (long long)h_count(&f, MEMTRACE_FREE_COMPLETED), "53 free_completed events");
    h_close(&f);
    free(out);
    h_cleanup();
    return exit_status();
}
