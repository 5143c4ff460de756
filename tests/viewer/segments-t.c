/* segments-t.c: `memtrace segments` on a small file whose map is known.
 *
 * The file has a segment with three blocks (one of them pending free), a fragmented
 * segment on a second device, an expandable segment in two mapped pieces with a
 * block across them, a block in no segment, and annotations. The test keeps its own
 * list of what is live after each event and draws the expected lines from it. */
#include "config.h"

#include <inttypes.h>

#include "cli-util.h"

#define T0 5000000000ull
#define A  0x10000000ull
#define B  0x20000000ull
#define C  0x30000000ull
#define D  0x40000000ull
#define X  0x50000000ull
#define K  1024ull
#define M  (1024ull * 1024ull)

static const char *strs[] = {"cudaMalloc", "cuMemMap", "phase1", "phase2"};
enum { S_MALLOC = 1, S_MAP = 2, S_PHASE1 = 3, S_PHASE2 = 4 };

static struct memtrace_event evs[32];
static size_t nev;

static void ev(int action, uint64_t addr, uint64_t size, int32_t device, int32_t pool,
               uint64_t stream, uint32_t category, uint32_t source, uint64_t aux)
{
    struct memtrace_event *e = &evs[nev];
    memset(e, 0, sizeof(*e));
    e->time_ns = T0 + 1000 * nev;
    e->action = (uint8_t)action;
    e->addr = addr;
    e->size = size;
    e->requested_size = size;
    e->device = device;
    e->pool = pool;
    e->stream = stream;
    e->category = category;
    e->source = source;
    e->aux = aux;
    e->tid = 9;
    e->stack = 0;
    nev++;
}

static void build(void)
{
    ev(MEMTRACE_SEGMENT_ALLOC, A, M, 0, 2, 0, 0, S_MALLOC, 0);                 /* 0 */
    ev(MEMTRACE_ALLOC, A, 256 * K, 0, 2, 0, 0, 0, 0);                          /* 1 */
    ev(MEMTRACE_ALLOC, A + 256 * K, 128 * K, 0, 2, 0, 0, 0, 0);                /* 2 */
    ev(MEMTRACE_ALLOC, A + 512 * K, 256 * K, 0, 2, 0, 0, 0, 0);                /* 3 */
    ev(MEMTRACE_ANNOTATE, 0, 0, 0, 0, 0, S_PHASE1, 0, 0);                      /* 4 */
    ev(MEMTRACE_FREE_REQUESTED, A + 256 * K, 128 * K, 0, 2, 0, 0, 0, 0);       /* 5 */
    ev(MEMTRACE_SEGMENT_ALLOC, B, 2 * M, 1, 1, 7, 0, S_MALLOC, 0);             /* 6 */
    ev(MEMTRACE_ALLOC, B + M, 4 * K, 1, 1, 7, 0, 0, 0);                        /* 7 */
    ev(MEMTRACE_SEGMENT_MAP, C, 2 * M, 0, 2, 0, 0, S_MAP, 0);                  /* 8 */
    ev(MEMTRACE_SEGMENT_MAP, C + 2 * M, 2 * M, 0, 2, 0, 0, S_MAP, 0);          /* 9: peak 7 MiB */
    ev(MEMTRACE_ALLOC, C + 1536 * K, M, 0, 2, 0, 0, 0, 0);                     /* 10 */
    ev(MEMTRACE_ALLOC, X, 4 * K, 0, 1, 0, 0, 0, 0);                            /* 11 */
    ev(MEMTRACE_ANNOTATE, 0, 0, 0, 0, 0, S_PHASE2, 0, MEMTRACE_ANNOTATE_MARK); /* 12 */
    ev(MEMTRACE_FREE_COMPLETED, A + 256 * K, 128 * K, 0, 2, 0, 0, 0, 0);       /* 13 */
    ev(MEMTRACE_FREE_COMPLETED, B + M, 4 * K, 1, 1, 7, 0, 0, 0);               /* 14 */
    ev(MEMTRACE_SEGMENT_FREE, B, 2 * M, 1, 1, 7, 0, S_MALLOC, 0);              /* 15 */
    ev(MEMTRACE_SEGMENT_ALLOC, D, M, 0, 2, 0, 0, S_MALLOC, 0);                 /* 16 */
}

static void write_file(const char *path)
{
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_meta(w, "{\"host\": \"h\", \"pid\": 1}"), "mt_writer_meta");
    cli_check(mt_writer_strings(w, 1, 4, strs), "mt_writer_strings");
    cli_check(mt_writer_events(w, evs, nev), "mt_writer_events");
    cli_check(mt_writer_end(w, "{\"dropped\": 0}"), "mt_writer_end");
}

/* The reference: what is live after event `upto`, by plain lists. */
struct ent {
    uint64_t addr, size, stream;
    int32_t device, pool;
    uint32_t source;
    int pending, mapped;
};

static void live_at(size_t upto, struct ent *segs, size_t *ns, struct ent *blks, size_t *nb)
{
    *ns = *nb = 0;
    for (size_t i = 0; i <= upto && i < nev; i++) {
        const struct memtrace_event *e = &evs[i];
        switch (e->action) {
        case MEMTRACE_SEGMENT_ALLOC:
        case MEMTRACE_SEGMENT_MAP:
            segs[(*ns)++] =
                (struct ent){e->addr, e->size,   e->stream, e->device,
                             e->pool, e->source, 0,         e->action == MEMTRACE_SEGMENT_MAP};
            break;
        case MEMTRACE_ALLOC:
            blks[(*nb)++] = (struct ent){e->addr, e->size, e->stream, e->device, e->pool, 0, 0, 0};
            break;
        case MEMTRACE_FREE_REQUESTED:
            for (size_t k = 0; k < *nb; k++)
                if (blks[k].addr == e->addr)
                    blks[k].pending = 1;
            break;
        case MEMTRACE_FREE_COMPLETED:
        case MEMTRACE_SEGMENT_FREE: {
            struct ent *v = e->action == MEMTRACE_FREE_COMPLETED ? blks : segs;
            size_t *n = e->action == MEMTRACE_FREE_COMPLETED ? nb : ns;
            for (size_t k = 0; k < *n; k++)
                if (v[k].addr == e->addr) {
                    memmove(&v[k], &v[k + 1], (*n - k - 1) * sizeof(*v));
                    (*n)--;
                    break;
                }
            break;
        }
        }
    }
}

struct refseg {
    struct ent s;
    int pieces;
    size_t nblocks;
    uint64_t allocated, pending, free, gap;
    char bar[64];
};

/* Segments merged, byte by byte: each byte of a segment is free, allocated or
 * pending; the bar's cells are [k*size/w, (k+1)*size/w). */
static size_t reference(size_t upto, size_t w, struct refseg *out, uint64_t *outside)
{
    struct ent segs[16], blks[16];
    size_t ns, nb, n = 0;
    live_at(upto, segs, &ns, blks, &nb);
    /* Sort by address (few entries: insertion sort). */
    for (size_t i = 1; i < ns; i++)
        for (size_t j = i; j > 0 && segs[j - 1].addr > segs[j].addr; j--) {
            struct ent t = segs[j];
            segs[j] = segs[j - 1];
            segs[j - 1] = t;
        }
    for (size_t i = 0; i < ns; i++) {
        if (n && out[n - 1].s.mapped && segs[i].mapped &&
            out[n - 1].s.addr + out[n - 1].s.size == segs[i].addr) {
            out[n - 1].s.size += segs[i].size;
            out[n - 1].pieces++;
            continue;
        }
        memset(&out[n], 0, sizeof(out[n]));
        out[n].s = segs[i];
        out[n].pieces = 1;
        n++;
    }
    *outside = 0;
    for (size_t k = 0; k < nb; k++) {
        int in = 0;
        for (size_t i = 0; i < n; i++)
            if (blks[k].addr >= out[i].s.addr && blks[k].addr < out[i].s.addr + out[i].s.size)
                in = 1, out[i].nblocks++;
        *outside += !in;
    }
    for (size_t i = 0; i < n; i++) {
        struct refseg *r = &out[i];
        uint64_t run = 0;
        uint64_t cell[64][3] = {{0}};
        for (uint64_t off = 0; off < r->s.size; off += 1024) { /* 1 KiB granules */
            int st = 0;
            for (size_t k = 0; k < nb; k++)
                if (r->s.addr + off >= blks[k].addr &&
                    r->s.addr + off < blks[k].addr + blks[k].size)
                    st = blks[k].pending ? 2 : 1;
            if (st == 0) {
                r->free += 1024;
                run += 1024;
                if (run > r->gap)
                    r->gap = run;
            } else {
                run = 0;
                *(st == 1 ? &r->allocated : &r->pending) += 1024;
            }
            for (size_t c = 0; c < w; c++)
                if (off >= c * r->s.size / w && off < (c + 1) * r->s.size / w)
                    cell[c][st] += 1024;
        }
        for (size_t c = 0; c < w; c++)
            r->bar[c] = cell[c][1] >= cell[c][2] && cell[c][1] >= cell[c][0] ? '#'
                        : cell[c][2] >= cell[c][0]                           ? '+'
                                                                             : '.';
        r->bar[w] = '\0';
    }
    return n;
}

static void expect_line(char *buf, size_t size, const struct refseg *r)
{
    char sz[4][32], st[32];
    const char *pool = r->s.pool == 1 ? "small" : r->s.pool == 2 ? "large" : "-";
    snprintf(sz[0], 32, "%" PRIu64 " B", r->allocated);
    snprintf(sz[1], 32, "%" PRIu64 " B", r->pending);
    snprintf(sz[2], 32, "%" PRIu64 " B", r->free);
    snprintf(sz[3], 32, "%" PRIu64 " B", r->gap);
    char total[32];
    snprintf(total, 32, "%" PRIu64 " B", r->s.size);
    snprintf(st, sizeof(st), "0x%" PRIx64, r->s.stream);
    int n = snprintf(
        buf, size, "0x%016" PRIx64 " %12s %4d %-10s %-5s %-18s %6zu %12s %12s %12s %12s  [%s]",
        r->s.addr, total, (int)r->s.device, st, pool, r->s.source ? strs[r->s.source - 1] : "-",
        r->nblocks, sz[0], sz[1], sz[2], sz[3], r->bar);
    if (r->pieces > 1)
        snprintf(buf + n, size - (size_t)n, " %d pieces", r->pieces);
}

/* Runs segments with extra args and checks every segment line against the reference
 * after event upto. */
static void check_text(const char *path, const char *at, size_t upto, const char *what)
{
    struct refseg ref[16];
    uint64_t outside;
    size_t n = reference(upto, 16, ref, &outside);
    const char *args[] = {"segments",         path, "--bytes", "--width", "16",
                          at ? "--at" : NULL, at,   NULL};
    struct cli_out o = cli_run(args);
    is_int(0, o.status, "%s: exits 0", what);
    is_string("", o.err, "%s: nothing on stderr", what);
    char head[128], got[512], want[512];
    snprintf(head, sizeof(head), "segments of %s after event %zu ", path, upto);
    ok(strncmp(o.out, head, strlen(head)) == 0, "%s: after event %zu", what, upto);
    for (size_t i = 0; i < n; i++) {
        char prefix[32];
        snprintf(prefix, sizeof(prefix), "0x%016" PRIx64 " ", ref[i].s.addr);
        expect_line(want, sizeof(want), &ref[i]);
        is_string(want, cli_line(o.out, prefix, got, sizeof(got)), "%s: segment 0x%" PRIx64, what,
                  ref[i].s.addr);
    }
    is_int((long long)n, cli_lines(o.out) - 4 - (outside > 0), "%s: %zu segment lines", what, n);
    cli_free(&o);
}

int main(void)
{
    cli_scratch();
    build();
    const char *path = cli_path("map.memtrace");
    write_file(path);

    /* Hand-checked figures of the reference itself, so that both cannot be wrong
     * the same way. */
    struct refseg ref[16];
    uint64_t outside;
    size_t n = reference(9, 16, ref, &outside);
    is_int(3, (long long)n, "at the peak: three segments (the two mapped pieces as one)");
    is_string("####++..####....", ref[0].bar, "segment A's bar");
    is_int(384 * K, (long long)ref[0].free, "segment A: 384 KiB free");
    is_int(256 * K, (long long)ref[0].gap, "segment A: largest gap 256 KiB");
    is_int(2 * M - 4 * K, (long long)ref[1].free, "segment B: all but 4 KiB free");
    is_int(M, (long long)ref[1].gap, "segment B: largest gap 1 MiB, before its block");
    is_int(2, ref[2].pieces, "segment C: two pieces");

    check_text(path, NULL, 9, "the peak of reserved");
    check_text(path, "#11", 11, "event #11");
    check_text(path, "phase1", 4, "annotation phase1");
    check_text(path, "phase2", 12, "annotation phase2 (a marker)");
    check_text(path, "13500ns", 13, "time 13.5us");
    check_text(path, "13us", 13, "time 13us (an event exactly at it)");

    /* The block across C's two pieces, and the block in no segment. */
    n = reference(11, 16, ref, &outside);
    is_int(1, (long long)outside, "one block in no segment at #11");
    struct cli_out o = cli_run(
        (const char *const[]){"segments", path, "--at", "#11", "--json", "--width", "8", NULL});
    is_int(0, o.status, "--json exits 0");
    json_t *j = cli_json(&o);
    is_int(11, cli_int(j, "event"), "json: event 11");
    is_int(11000, cli_int(j, "offset_ns"), "json: offset");
    is_int(7 * M, cli_int(j, "totals.reserved_bytes"), "json: reserved 7 MiB");
    is_int(256 * K + 256 * K + 4 * K + M, cli_int(j, "totals.allocated_bytes"),
           "json: allocated (pending excluded)");
    is_int(128 * K, cli_int(j, "totals.pending_free_bytes"), "json: pending");
    is_int(7 * M - (640 * K + 4 * K + M), cli_int(j, "totals.free_bytes"), "json: free");
    is_int(M + 512 * K, cli_int(j, "totals.largest_free_bytes"),
           "json: largest gap (C before its block)");
    is_int(1, cli_int(j, "totals.outside_blocks"), "json: one block outside");
    is_int(4 * K, cli_int(j, "totals.outside_bytes"), "json: its bytes");
    json_t *segs = cli_get(j, "segments");
    is_int(3, (long long)json_array_size(segs), "json: three segments");
    json_t *c = json_array_get(segs, 2);
    is_int((long long)C, cli_int(c, "address"), "json: C");
    is_int(4 * M, cli_int(c, "size"), "json: C spans both pieces");
    is_int(2, cli_int(c, "pieces"), "json: C has two pieces");
    is_string("cuMemMap", json_string_value(cli_get(c, "source")), "json: C's source");
    is_string("...##...", json_string_value(cli_get(c, "bar")), "json: C's bar at width 8");
    json_t *blk = json_array_get(cli_get(c, "blocks"), 0);
    is_int((long long)(C + 1536 * K), cli_int(blk, "address"), "json: C's block");
    json_t *a = json_array_get(segs, 0);
    is_string("pending_free",
              json_string_value(cli_get(json_array_get(cli_get(a, "blocks"), 1), "state")),
              "json: A's second block is pending free");
    is_int(1, cli_int(json_array_get(segs, 1), "pool"), "json: B is in the small pool");
    is_int((long long)X, cli_int(json_array_get(cli_get(j, "outside"), 0), "address"),
           "json: the block outside");
    json_decref(j);
    cli_free(&o);

    /* --device 1: only the segment of device 1. */
    o = cli_run(
        (const char *const[]){"segments", path, "--at", "#11", "--json", "--device", "1", NULL});
    j = cli_json(&o);
    is_int(1, cli_int(j, "totals.segments"), "--device 1: one segment");
    is_int((long long)B, cli_int(json_array_get(cli_get(j, "segments"), 0), "address"),
           "--device 1: B");
    is_int(1, cli_int(json_array_get(cli_get(j, "segments"), 0), "device"), "on device 1");
    json_decref(j);
    cli_free(&o);

    /* Mistakes: one line and status 2. */
    o = cli_run((const char *const[]){"segments", path, "--at", "nosuch", NULL});
    is_int(2, o.status, "an unknown annotation: status 2");
    is_int(1, cli_lines(o.err), "one line on stderr");
    cli_free(&o);
    o = cli_run((const char *const[]){"segments", cli_path("absent"), NULL});
    is_int(1, o.status, "a missing file: status 1");
    cli_free(&o);

    /* A truncated file is read twice (the point, then the map): one warning, not two,
     * also when both passes read to the cut (a file with no segment: shown at its end). */
    char cut[512];
    snprintf(cut, sizeof cut, "%s", cli_path("cut.memtrace"));
    struct memtrace_event ev = {.action = MEMTRACE_ALLOC, .time_ns = 10, .addr = 4096, .size = 64};
    struct mt_writer *w;
    if (mt_writer_open(&w, cut, MT_WRITER_OVERWRITE) != 0 || mt_writer_events(w, &ev, 1) != 0 ||
        mt_writer_end(w, "{}") != 0)
        bail_out("cannot write the file to cut");
    struct stat sb;
    if (stat(cut, &sb) != 0 || truncate(cut, sb.st_size - 1) != 0)
        bail_out("cannot cut the file");
    static const char *const ats[] = {NULL, "#999"};
    for (int k = 0; k < 2; k++) {
        o = cli_run((const char *const[]){"segments", cut, ats[k] ? "--at" : NULL, ats[k], NULL});
        is_int(0, o.status, "a truncated file, %s: status 0", ats[k] ? "--at #999" : "its end");
        ok(cli_lines(o.err) == 1 && strstr(o.err, "is truncated") != NULL,
           "one warning on stderr: %s", o.err);
        cli_free(&o);
    }
    done_testing();
    return exit_status();
}
