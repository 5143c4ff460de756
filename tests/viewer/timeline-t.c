/* timeline-t.c: `memtrace timeline` against levels computed here.
 *
 * A small file on two devices: segments, blocks (one alive for a single nanosecond),
 * counter events. The test computes each series' level after every event, then each
 * point's value as the highest level in its interval, by brute force, and compares
 * the CSV (parsed back), the JSON and the chart's peak lines. */
#include "config.h"

#include <inttypes.h>

#include "cli-util.h"

#define T0 7000000000ull
#define K  1024ull
#define M  (1024ull * 1024ull)
#define NS 4 /* allocated, reserved, device 0 used, device 1 used */

static struct memtrace_event evs[32];
static size_t nev;

static void ev(uint64_t off, int action, uint64_t addr, uint64_t size, int32_t device)
{
    struct memtrace_event *e = &evs[nev++];
    memset(e, 0, sizeof(*e));
    e->time_ns = T0 + off;
    e->action = (uint8_t)action;
    e->addr = addr;
    e->size = size;
    e->device = device;
    e->tid = 3;
    if (action == MEMTRACE_COUNTER)
        e->size = 16ull << 30; /* total */
}

static void counter(uint64_t off, int32_t device, uint64_t used)
{
    ev(off, MEMTRACE_COUNTER, used, 0, device);
}

static void build(void)
{
    ev(0, MEMTRACE_SEGMENT_ALLOC, 0xa000, 4 * M, 0);
    ev(100, MEMTRACE_ALLOC, 0xa000, M, 0);
    counter(200, 0, 3 * M);
    ev(5000, MEMTRACE_ALLOC, 0xb000, 2 * M, 0);
    ev(5001, MEMTRACE_FREE_COMPLETED, 0xb000, 2 * M, 0); /* a 1 ns spike */
    counter(6000, 1, 7 * M);
    ev(7000, MEMTRACE_SEGMENT_ALLOC, 0xc000, 2 * M, 1);
    ev(9000, MEMTRACE_ALLOC, 0xc000, 512 * K, 1);
    counter(12000, 0, M);
    ev(20000, MEMTRACE_FREE_COMPLETED, 0xa000, M, 0);
    ev(30000, MEMTRACE_SEGMENT_FREE, 0xa000, 4 * M, 0);
    counter(40000, 1, 0);
}

static void write_file(const char *path)
{
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_meta(w, "{\"host\": \"h\", \"pid\": 1}"), "mt_writer_meta");
    cli_check(mt_writer_events(w, evs, nev), "mt_writer_events");
    cli_check(mt_writer_end(w, "{\"dropped\": 0}"), "mt_writer_end");
}

/* The levels after each event, by the plain rules. */
static uint64_t lv[32][NS];

static void levels(void)
{
    uint64_t cur[NS] = {0};
    uint64_t live_addr[8], live_size[8];
    size_t nlive = 0;
    for (size_t i = 0; i < nev; i++) {
        const struct memtrace_event *e = &evs[i];
        switch (e->action) {
        case MEMTRACE_ALLOC:
            live_addr[nlive] = e->addr;
            live_size[nlive++] = e->size;
            cur[0] += e->size;
            break;
        case MEMTRACE_FREE_COMPLETED:
            for (size_t k = 0; k < nlive; k++)
                if (live_addr[k] == e->addr) {
                    cur[0] -= live_size[k];
                    live_addr[k] = live_addr[--nlive];
                    live_size[k] = live_size[nlive];
                    break;
                }
            break;
        case MEMTRACE_SEGMENT_ALLOC:
            cur[1] += e->size;
            break;
        case MEMTRACE_SEGMENT_FREE:
            cur[1] -= e->size;
            break;
        case MEMTRACE_COUNTER:
            cur[2 + e->device] = e->addr;
            break;
        }
        memcpy(lv[i], cur, sizeof(cur));
    }
}

/* Point values with the window starting at event `start`: bucket width W is the
 * smallest power of two with which n points reach the last event. */
static size_t points(size_t start, size_t n, uint64_t *w_out, uint64_t val[][NS])
{
    uint64_t t0 = evs[start].time_ns, span = evs[nev - 1].time_ns - t0, w = 1;
    while (span / w >= n)
        w *= 2;
    size_t np = (size_t)(span / w) + 1;
    for (size_t p = 0; p < np; p++) {
        for (int s = 0; s < NS; s++) {
            uint64_t v = 0;
            /* Carried in: after the last event before the interval. */
            for (size_t i = 0; i < nev; i++)
                if (i < start || evs[i].time_ns - t0 < p * w)
                    v = lv[i][s];
            for (size_t i = start; i < nev; i++) {
                uint64_t off = evs[i].time_ns - t0;
                if (off >= p * w && off < (p + 1) * w && lv[i][s] > v)
                    v = lv[i][s];
            }
            val[p][s] = v;
        }
    }
    *w_out = w;
    return np;
}

static void check_csv(const char *path, const char *npts, size_t n, const char *from, size_t start)
{
    uint64_t val[128][NS], w;
    size_t np = points(start, n, &w, val);
    const char *args[] = {"timeline", path, "--format", "csv", npts ? "--points" : NULL,
                          npts,       NULL, NULL,       NULL};
    if (from) {
        args[4] = "--from";
        args[5] = from;
        args[6] = npts ? "--points" : NULL;
        args[7] = npts;
    }
    struct cli_out o = cli_run(args);
    is_int(0, o.status, "csv %s %s: exits 0", npts ? npts : "default", from ? from : "");
    is_string("", o.err, "nothing on stderr");
    const char *p = o.out;
    is_int(0,
           strncmp(p,
                   "offset_ns,allocated_bytes,reserved_bytes,device0_used_bytes,device1_used_"
                   "bytes\n",
                   79),
           "the header names the columns");
    p = strchr(p, '\n');
    size_t rows = 0, bad = 0;
    while (p && p[1]) {
        p++;
        unsigned long long off, v[NS];
        if (sscanf(p, "%llu,%llu,%llu,%llu,%llu", &off, &v[0], &v[1], &v[2], &v[3]) != 5) {
            diag("unparsed row: %.60s", p);
            bad++;
            break;
        }
        if (rows < np) {
            if (off != rows * w)
                bad++, diag("row %zu: offset %llu, want %" PRIu64, rows, off, rows * w);
            for (int s = 0; s < NS; s++)
                if (v[s] != val[rows][s])
                    bad++,
                        diag("row %zu series %d: %llu, want %" PRIu64, rows, s, v[s], val[rows][s]);
        }
        rows++;
        p = strchr(p, '\n');
    }
    is_int((long long)np, (long long)rows, "%zu points of %" PRIu64 " ns", np, w);
    is_int(0, (long long)bad, "every point is the highest level in its interval");
    cli_free(&o);
}

int main(void)
{
    cli_scratch();
    build();
    levels();
    const char *path = cli_path("timeline.memtrace");
    write_file(path);

    /* The reference by hand at a few points. */
    uint64_t val[128][NS], w;
    size_t np = points(0, 10, &w, val);
    is_int(4096, (long long)w, "10 points over 40 us: 4096 ns each");
    is_int(10, (long long)np, "ten points");
    is_int(3 * M, (long long)val[1][0], "the 1 ns spike of 2 MiB shows in point 1");
    is_int(3 * M, (long long)val[2][2], "device 0 used 3 MiB until 12 us");
    is_int(7 * M, (long long)val[9][3], "device 1 used 7 MiB into the last point");

    check_csv(path, "10", 10, NULL, 0);
    check_csv(path, NULL, 100, NULL, 0);
    check_csv(path, "3", 3, NULL, 0);
    check_csv(path, "10", 10, "10us", 8); /* window from event 8 (12 us) */

    struct cli_out o =
        cli_run((const char *const[]){"timeline", path, "--json", "--points", "10", NULL});
    is_int(0, o.status, "json: exits 0");
    json_t *j = cli_json(&o);
    is_int(4096, cli_int(j, "bucket_ns"), "json: bucket width");
    is_int(10, cli_int(j, "points"), "json: points");
    is_int((long long)T0, cli_int(j, "start_time_ns"), "json: start");
    json_t *series = cli_get(j, "series");
    is_int(4, (long long)json_array_size(series), "json: four series");
    static const uint64_t peak[NS] = {3 * M, 6 * M, 3 * M, 7 * M};
    static const uint64_t peak_off[NS] = {5000, 7000, 200, 6000};
    int same = 1;
    for (int s = 0; s < NS; s++) {
        json_t *o1 = json_array_get(series, (size_t)s);
        if ((uint64_t)cli_int(o1, "peak_bytes") != peak[s] ||
            (uint64_t)cli_int(o1, "peak_offset_ns") != peak_off[s])
            same = 0, diag("series %d: peak %lld at %lld", s, cli_int(o1, "peak_bytes"),
                           cli_int(o1, "peak_offset_ns"));
        for (size_t p = 0; p < np; p++)
            if ((uint64_t)json_integer_value(json_array_get(json_object_get(o1, "values"), p)) !=
                val[p][s])
                same = 0, diag("series %d point %zu differs", s, p);
    }
    ok(same, "json: peaks and every value match");
    is_string("used", json_string_value(cli_get(json_array_get(series, 3), "name")),
              "json: the fourth series is a device's used memory");
    is_int(1, cli_int(json_array_get(series, 3), "device"), "json: of device 1");
    is_int(16ll << 30, cli_int(json_array_get(series, 3), "total_bytes"), "json: its total");
    json_decref(j);
    cli_free(&o);

    /* The chart: height rows, the axis, the time labels, the peaks, one line per
     * series. */
    o = cli_run((const char *const[]){"timeline", path, "--points", "10", "--height", "6",
                                      "--bytes", NULL});
    is_int(0, o.status, "chart: exits 0");
    is_int(1 + 6 + 1 + 1 + 1 + 4 + 1, cli_lines(o.out), "chart: its lines");
    char buf[256];
    is_string("  a allocated        peak 3145728 B at +5.0 us",
              cli_line(o.out, "  a allocated", buf, sizeof(buf)), "chart: allocated's peak");
    is_string("  1 device 1 used    peak 7340032 B at +6.0 us of 17179869184 B",
              cli_line(o.out, "  1 device", buf, sizeof(buf)), "chart: device 1's peak");
    /* The top row stands for 7 MiB (device 1's peak); 6 MiB reserved rounds up into it
     * and is drawn over device 1's '1'. */
    is_string("   7340032 B | rrrrrrr11", cli_line(o.out, "   7340032 B", buf, sizeof(buf)),
              "chart: the top row");
    cli_free(&o);

    o = cli_run((const char *const[]){"timeline", path, "--format", "svg", NULL});
    is_int(2, o.status, "an unknown format: status 2");
    is_int(1, cli_lines(o.err), "one line on stderr");
    cli_free(&o);
    done_testing();
    return exit_status();
}
