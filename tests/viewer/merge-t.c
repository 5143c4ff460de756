/* merge-t.c: `memtrace merge` of per-rank files: devices renumbered when two ranks
 * both use device 0 and kept when the ranks use their own devices, events interleaved
 * on the wall clock, stacks and names carried over, states joined, sources listed. */
#include "config.h"

#include <inttypes.h>

#include "cli-util.h"
#include "memtrace_snapshot.h"

/* A rank's file: allocs every 10 us of its own monotonic clock, which starts at
 * mono0 and corresponds to wall-clock wall0. */
static void write_rank(const char *path, int rank, int32_t dev, uint64_t wall0, uint64_t mono0,
                       const char *fn, int n)
{
    char meta[256];
    snprintf(meta, sizeof(meta),
             "{\"rank\": %d, \"pid\": %d, \"start_time_ns\": %" PRIu64
             ", \"start_monotonic_ns\": %" PRIu64 "}",
             rank, 100 + rank, wall0, mono0);
    const char *strs[1] = {fn};
    struct mt_frame_rec fr = {0x1000 + (uint64_t)rank, 0, 0, 1, 0, 0};
    uint32_t parent = 0, frame = 1;
    struct memtrace_event ev[16];
    memset(ev, 0, sizeof(ev));
    for (int k = 0; k < n; k++) {
        ev[k].action = MEMTRACE_ALLOC;
        ev[k].time_ns = mono0 + 10000 * (uint64_t)(k + 1);
        ev[k].device = dev;
        ev[k].addr = 0x10000 * (uint64_t)(k + 1);
        ev[k].size = 256 * (uint64_t)(rank + 1);
        ev[k].stack = 1;
    }
    struct memtrace_block b = {0x10000, 256, 256, 1, MEMTRACE_BLOCK_ACTIVE_ALLOCATED};
    struct memtrace_segment seg;
    memset(&seg, 0, sizeof(seg));
    seg.addr = 0x10000;
    seg.total_size = 1 << 20;
    seg.device = dev;
    seg.stack = 1;
    seg.nblocks = 1;
    seg.blocks = &b;
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_meta(w, meta), "mt_writer_meta");
    cli_check(mt_writer_strings(w, 1, 1, strs), "mt_writer_strings");
    cli_check(mt_writer_frames(w, 1, 1, &fr), "mt_writer_frames");
    cli_check(mt_writer_stacks(w, 1, 1, &parent, &frame), "mt_writer_stacks");
    cli_check(mt_writer_events(w, ev, (size_t)n), "mt_writer_events");
    cli_check(mt_writer_state(w, mono0 + 100000, &seg, 1), "mt_writer_state");
    cli_check(mt_writer_end(w, "{}"), "mt_writer_end");
}

struct merged {
    int n;
    int32_t dev[32];
    uint64_t t[32];
    uint64_t size[32];
    char fn[32][32];
    size_t nseg;
    int32_t segdev[4];
    char segfn[4][32];
    json_t *meta;
};

static void read_merged(const char *path, struct merged *m)
{
    memset(m, 0, sizeof(*m));
    struct memtrace_reader *r;
    if (memtrace_reader_open(&r, path, NULL) != 0)
        bail_out("the merged file does not read");
    struct memtrace_event ev;
    uint32_t f;
    while (m->n < 32 && memtrace_reader_next(r, &ev) == 1) {
        m->dev[m->n] = ev.device;
        m->t[m->n] = ev.time_ns;
        m->size[m->n] = ev.size;
        if (memtrace_reader_stack(r, ev.stack, &f, 1) == 1)
            snprintf(m->fn[m->n], 32, "%s", memtrace_reader_frame(r, f)->symbol);
        m->n++;
    }
    m->nseg = memtrace_reader_segment_count(r);
    for (size_t i = 0; i < m->nseg && i < 4; i++) {
        const struct memtrace_segment *s = memtrace_reader_segment(r, i);
        m->segdev[i] = s->device;
        if (memtrace_reader_stack(r, s->blocks[0].stack, &f, 1) == 1)
            snprintf(m->segfn[i], 32, "%s", memtrace_reader_frame(r, f)->symbol);
    }
    m->meta = json_loads(memtrace_reader_meta(r), 0, NULL);
    memtrace_reader_close(r);
}

int main(void)
{
    plan(23);
    cli_scratch();
    const char *r0 = cli_path("rank0.memtrace"), *r1 = cli_path("rank1.memtrace");
    const char *out = cli_path("merged.memtrace");
    /* rank 1's clock is 5 us ahead on the wall: its events fall between rank 0's */
    write_rank(r0, 0, 0, 1000000000, 500, "fwd0", 3);
    write_rank(r1, 1, 0, 1000005000, 90000, "fwd1", 3);
    const char *args[] = {"merge", "-o", out, r1, r0, NULL};
    struct cli_out r = cli_run(args);
    is_int(0, r.status, "merge exits 0");
    ok(strstr(r.out, "renumbered") != NULL, "both ranks use device 0: renumbered");
    cli_free(&r);
    struct merged m;
    read_merged(out, &m);
    is_int(6, m.n, "6 events");
    int sorted = 1;
    for (int k = 1; k < m.n; k++)
        sorted &= m.t[k - 1] <= m.t[k];
    ok(sorted, "events in time order");
    /* wall times: rank 0 at 1000010000, 20000, 30000; rank 1 at 1000015000, 25000, 35000 */
    is_int(1000010000, (long long)m.t[0], "first event at rank 0's wall time");
    is_int(1000015000, (long long)m.t[1], "second at rank 1's wall time");
    ok(m.dev[0] == 0 && m.dev[1] == 1 && m.dev[2] == 0 && m.dev[3] == 1,
       "rank 0 keeps device 0, rank 1's device 0 becomes 1 (rank order, not argument order)");
    ok(strcmp(m.fn[0], "fwd0") == 0 && strcmp(m.fn[1], "fwd1") == 0,
       "each event keeps its own stack's frames");
    ok(m.size[0] == 256 && m.size[1] == 512, "sizes carried");
    is_int(2, (long long)m.nseg, "both final states joined");
    ok(m.segdev[0] == 0 && m.segdev[1] == 1 && strcmp(m.segfn[1], "fwd1") == 0,
       "state devices renumbered and block stacks remapped");
    is_int(2, (long long)json_array_size(json_object_get(m.meta, "merged_from")),
           "the metadata lists the two sources");
    is_int(1, cli_int(json_array_get(json_object_get(m.meta, "merged_from"), 1), "rank"),
           "with their ranks");
    json_decref(m.meta);

    /* each rank on its own device: kept */
    write_rank(r1, 1, 1, 1000005000, 90000, "fwd1", 2);
    r = cli_run(args);
    is_int(1, r.status, "a merge onto an existing OUT exits 1");
    ok(strstr(r.err, "exists") != NULL && strstr(r.err, "--force") != NULL && cli_lines(r.err) == 1,
       "with one line naming --force: %s", r.err);
    cli_free(&r);
    const char *again[] = {"merge", "-o", out, "--force", r1, r0, NULL};
    r = cli_run(again);
    is_int(0, r.status, "merge of disjoint devices exits 0");
    ok(strstr(r.out, "kept") != NULL, "devices kept");
    cli_free(&r);
    read_merged(out, &m);
    ok(m.n == 5 && m.dev[1] == 1 && m.dev[0] == 0, "device numbers as recorded");
    json_decref(m.meta);

    /* an input cut short (its end record lost): merged up to the cut, and said so */
    char cut[512];
    snprintf(cut, sizeof cut, "%s", cli_path("cut.memtrace"));
    FILE *in = fopen(r0, "rb"), *o = fopen(cut, "wb");
    if (!in || !o || fseek(in, 0, SEEK_END) != 0)
        bail_out("cannot copy rank 0's file");
    long len = ftell(in);
    rewind(in);
    for (long k = 0; k + 1 < len; k++)
        putc(getc(in), o);
    fclose(in);
    if (fclose(o) != 0)
        bail_out("cannot copy rank 0's file");
    const char *with_cut[] = {"merge", "-o", out, "--force", r1, cut, NULL};
    r = cli_run(with_cut);
    is_int(0, r.status, "a truncated input: merge exits 0");
    ok(cli_lines(r.err) == 1 && strstr(r.err, "warning: ") && strstr(r.err, cut) &&
           strstr(r.err, "is truncated (no end record)"),
       "with one warning naming it: %s", r.err);
    cli_free(&r);
    read_merged(out, &m);
    is_int(5, m.n, "its events before the cut merged");
    json_t *from = json_object_get(m.meta, "merged_from");
    int marked = 0;
    for (size_t k = 0; k < json_array_size(from); k++) {
        json_t *e = json_array_get(from, k);
        const char *path = json_string_value(json_object_get(e, "path"));
        marked += path && strcmp(path, cut) == 0 && json_is_true(json_object_get(e, "truncated"));
        marked -= path && strcmp(path, r1) == 0 && json_object_get(e, "truncated") != NULL;
    }
    is_int(1, marked, "merged_from marks the truncated input, and only it");
    json_decref(m.meta);

    const char *bad[] = {"merge", "-o", out, cli_path("missing.memtrace"), NULL};
    r = cli_run(bad);
    ok(r.status == 1 && cli_lines(r.err) == 1, "a missing input: exit 1, one line");
    cli_free(&r);
    return exit_status();
}
