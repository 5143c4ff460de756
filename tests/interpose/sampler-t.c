/* sampler-t: while streaming, the preload's helper thread records the device's used
 * and total memory (cuMemGetInfo_v2) and the process RSS about every
 * MEMTRACE_SAMPLE_MS, from a thread in relaxed stream-capture mode so it can never
 * invalidate a CUDA graph the program is capturing. */
#include "harness.h"

int main(void)
{
    h_setup();
    plan(8);
    char path[400], err[400];
    snprintf(path, sizeof path, "%s/sampler.memtrace", h_tmpdir);
    snprintf(err, sizeof err, "%s/sampler.err", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", path, 1);
    setenv("MEMTRACE_SAMPLE_MS", "10", 1);
    setenv("FAKE_CUDA_MEMORY", "1073741824", 1);
    char *argv[] = {PROG_DIR "/cuda_prog", "hold", "200", NULL};
    char *out;
    int st = h_run(argv, 1, &out, err);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "program holding 3 MiB for 200 ms exits 0");

    struct h_file f;
    h_read(&f, path);
    /* Samples recorded before the program read the fake's counters: the sampler
     * records after its cuMemGetInfo_v2 returns, so each of these was counted. */
    long long counted_at = h_line_value(out, 'T', "counted");
    size_t samples = 0, holding = 0, after = 0, rss = 0, bad = 0, before_count = 0;
    int freed = 0;
    for (size_t i = 0; i < f.n; i++) {
        const struct memtrace_event *e = &f.ev[i];
        if (e->action == MEMTRACE_SEGMENT_FREE)
            freed = 1;
        if (e->action != MEMTRACE_COUNTER || e->device != 0)
            continue;
        samples++;
        before_count += (long long)e->time_ns < counted_at;
        if (e->size != 1073741824ULL)
            bad++;
        if (e->requested_size > 0)
            rss++;
        if (!freed && e->addr == 3u << 20)
            holding++;
        if (freed && e->addr == 0)
            after++;
    }
    ok(samples >= 10, "device 0 sampled at least 10 times in 300 ms (%zu)", samples);
    is_int(0, (long long)bad, "every sample gives the device's total, 1 GiB");
    ok(holding >= 5, "samples while held show exactly 3 MiB used (%zu)", holding);
    ok(after >= 2, "samples after the free show 0 used (%zu)", after);
    is_int((long long)samples, (long long)rss, "every sample carries the process RSS");
    ok(counted_at > 0 && before_count >= 10 &&
           h_line_value(out, 'C', "cuMemGetInfo_v2") >= (long long)before_count,
       "the samples came from the driver's cuMemGetInfo_v2 (%zu of %zu before it was counted)",
       before_count, samples);
    const char *u = strstr(out, "\nU ");
    is_int(0, u ? atoll(u + 3) : -1, "no cuMemGetInfo_v2 outside relaxed capture mode");
    h_close(&f);
    free(out);
    h_cleanup();
    return exit_status();
}
