/* format_bench: encode and decode throughput of the .memtrace EVENTS encoding, and
 * bytes per event on disk, for 1M events of the synthetic training loop
 * (tests/snapshot/training.h), written in 64k-event chunks as the recorder does.
 *   bench/format_bench [events] [file] */
#include "config.h"

#include "examples/args.h"
#include "memtrace_snapshot.h"
#include "writer.h"

#include "tests/snapshot/training.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wall time, and CPU time of this thread: on a shared machine the second is the
 * steadier figure. */
struct stamp {
    double wall, cpu;
};

static struct stamp now(void)
{
    return (struct stamp){clock_s(CLOCK_MONOTONIC), clock_s(CLOCK_THREAD_CPUTIME_ID)};
}

static struct stamp since(struct stamp a)
{
    struct stamp b = now();
    return (struct stamp){b.wall - a.wall, b.cpu - a.cpu};
}

int main(int argc, char **argv)
{
    int rc = args_check(argc, argv, 2,
                        "usage: format_bench [EVENTS [FILE]]\n"
                        "Encodes EVENTS events of a training-loop pattern (default 1000000) into\n"
                        "FILE (default a temporary file, removed after), decodes them, and prints\n"
                        "bytes per event and both rates.\n");
    if (rc >= 0)
        return rc;
    long long events = 1000000;
    if (argc > 1 && args_count(argv, "EVENTS", argv[1], 1, 1000000000LL, &events) != 0)
        return 2;
    size_t total = (size_t)events;
    char path[256];
    if (argc > 2)
        snprintf(path, sizeof(path), "%s", argv[2]);
    else
        snprintf(path, sizeof(path), "/tmp/format_bench-%d.memtrace", (int)getpid());
    const size_t chunk = 65536;
    size_t nchunks = (total + chunk - 1) / chunk;
    struct memtrace_event *ev = malloc(nchunks * chunk * sizeof(*ev));
    static struct mt_training t;
    if (ev == NULL) {
        fprintf(stderr, "format_bench: no memory for %zu events\n", total);
        return 1;
    }
    mt_training_init(&t, 1);
    mt_training_next(&t, ev, total);

    struct mt_writer *w;
    if (mt_writer_open(&w, path, MT_WRITER_OVERWRITE) != 0) {
        fprintf(stderr, "format_bench: cannot create %s\n", path);
        return 1;
    }
    uint64_t before = mt_writer_bytes(w);
    struct stamp t0 = now();
    for (size_t done = 0; done < total; done += chunk)
        if (mt_writer_events(w, ev + done, total - done < chunk ? total - done : chunk) != 0) {
            fprintf(stderr, "format_bench: write failed\n");
            return 1;
        }
    struct stamp enc = since(t0);
    uint64_t bytes = mt_writer_bytes(w) - before;
    mt_writer_end(w, "{}");

    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    t0 = now();
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
    struct stamp dec = since(t0);
    memtrace_reader_close(r);
    if (argc <= 2)
        unlink(path);

    printf("events            %zu%s\n", n, n == total ? "" : " (MISMATCH)");
    printf("bytes/event       %.3f\n", (double)bytes / (double)total);
    printf("encode events/s   %.1fM wall (%.1f ms), %.1fM per CPU second\n",
           (double)total / enc.wall / 1e6, enc.wall * 1e3, (double)total / enc.cpu / 1e6);
    printf("decode events/s   %.1fM wall (%.1f ms), %.1fM per CPU second\n",
           (double)n / dec.wall / 1e6, dec.wall * 1e3, (double)n / dec.cpu / 1e6);
    printf("checksum          %llx\n", (unsigned long long)check);
    free(ev);
    return n == total ? 0 : 1;
}
