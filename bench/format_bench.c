/* format_bench: encode and decode throughput of the .memtrace EVENTS encoding, and
 * bytes per event on disk, for 1M events of the synthetic training loop
 * (tests/snapshot/training.h), written in 64k-event chunks as the recorder does.
 *   bench/format_bench [events] [file] */
#include "config.h"

#include "memtrace_snapshot.h"
#include "writer.h"

#include "tests/snapshot/training.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    size_t total = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    char path[256];
    if (argc > 2)
        snprintf(path, sizeof(path), "%s", argv[2]);
    else
        snprintf(path, sizeof(path), "/tmp/format_bench-%d.memtrace", (int)getpid());
    const size_t chunk = 65536;
    size_t nchunks = (total + chunk - 1) / chunk;
    struct memtrace_event *ev = malloc(nchunks * chunk * sizeof(*ev));
    static struct mt_training t;
    if (ev == NULL || total == 0)
        return 1;
    mt_training_init(&t, 1);
    mt_training_next(&t, ev, total);

    struct mt_writer *w;
    if (mt_writer_open(&w, path) != 0) {
        fprintf(stderr, "format_bench: cannot create %s\n", path);
        return 1;
    }
    uint64_t before = mt_writer_bytes(w);
    double t0 = seconds();
    for (size_t done = 0; done < total; done += chunk)
        if (mt_writer_events(w, ev + done, total - done < chunk ? total - done : chunk) != 0) {
            fprintf(stderr, "format_bench: write failed\n");
            return 1;
        }
    double enc = seconds() - t0;
    uint64_t bytes = mt_writer_bytes(w) - before;
    mt_writer_end(w, "{}");

    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    t0 = seconds();
    if (memtrace_reader_open(&r, path, &err) != 0) {
        fprintf(stderr, "format_bench: %s\n", err.text);
        return 1;
    }
    struct memtrace_event e;
    size_t n = 0;
    uint64_t check = 0;
    while (memtrace_reader_next(r, &e) == 1) {
        check += e.addr ^ e.time_ns;
        n++;
    }
    double dec = seconds() - t0;
    memtrace_reader_close(r);
    if (argc <= 2)
        unlink(path);

    printf("events            %zu%s\n", n, n == total ? "" : " (MISMATCH)");
    printf("bytes/event       %.3f\n", (double)bytes / (double)total);
    printf("encode events/s   %.1fM (%.1f ms)\n", (double)total / enc / 1e6, enc * 1e3);
    printf("decode events/s   %.1fM (%.1f ms)\n", (double)n / dec / 1e6, dec * 1e3);
    printf("checksum          %llx\n", (unsigned long long)check);
    free(ev);
    return n == total ? 0 : 1;
}
