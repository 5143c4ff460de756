/* threads-t: 8 threads allocating and freeing through the interposer at once:
 * every call recorded exactly once, no deadlock (an alarm bounds the run). */
#include "harness.h"

int main(void)
{
    h_setup();
    plan(7);
    alarm(60);
    char path[400];
    snprintf(path, sizeof path, "%s/threads.memtrace", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", path, 1);
    setenv("MEMTRACE_STACKS", "8", 1);
    char *argv[] = {PROG_DIR "/cuda_prog", "threads", NULL};
    char *out;
    int st = h_run(argv, 1, &out, NULL);
    is_int(0, st, "program exits 0");
    ok(strstr(out, "T 4000\n") != NULL, "program did 4000 allocations");
    ok(strstr(out, "\nC cuMemAlloc_v2 4000\n") != NULL, "driver saw 4000 allocations");

    struct h_file f;
    h_read(&f, path);
    is_int(4000, (long long)h_count(&f, MEMTRACE_SEGMENT_ALLOC), "4000 segment_alloc events");
    is_int(4000, (long long)h_count(&f, MEMTRACE_SEGMENT_FREE), "4000 segment_free events");
    /* Thread t allocates (t + 1) * 4096 + i * 512 bytes, i < 500. */
    unsigned long long want = 0, got_alloc = 0, got_free = 0;
    for (int t = 0; t < 8; t++)
        for (int i = 0; i < 500; i++)
            want += (unsigned long long)(t + 1) * 4096 + (unsigned long long)i * 512;
    for (size_t i = 0; i < f.n; i++) {
        if (f.ev[i].action == MEMTRACE_SEGMENT_ALLOC)
            got_alloc += f.ev[i].size;
        if (f.ev[i].action == MEMTRACE_SEGMENT_FREE)
            got_free += f.ev[i].size;
    }
    ok(got_alloc == want && got_free == want, "allocated and freed bytes are exact (%llu)", want);
    is_int(0, h_segments(&f), "nothing live at exit");
    h_close(&f);
    free(out);
    h_cleanup();
    return exit_status();
}
