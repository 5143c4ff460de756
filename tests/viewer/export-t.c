/* export-t.c: `memtrace export` of a file with known contents to every format, each
 * read back by an independent reader: Python's json and pickle modules for the
 * PyTorch snapshots and the Perfetto trace (tests/viewer/pytorch-check.py), jansson
 * for speedscope, a parser of its own here for folded stacks, line counts for CSV. */
#include "config.h"

#include <inttypes.h>

#include "cli-util.h"
#include "memtrace_snapshot.h"

#define MONO0 1000ull
#define WALL0 1000000000000000000ull

static const char *const meta = "{\"start_time_ns\": 1000000000000000000, "
                                "\"start_monotonic_ns\": 1000, "
                                "\"allocator_settings\": {\"max_split_size_mb\": 64}}";

static struct memtrace_event mk(int action, uint64_t t, int32_t dev, uint64_t addr, uint64_t size,
                                uint32_t stack)
{
    struct memtrace_event e;
    memset(&e, 0, sizeof(e));
    e.action = (uint8_t)action;
    e.time_ns = t;
    e.device = dev;
    e.addr = addr;
    e.size = size;
    e.stack = stack;
    return e;
}

/* The file pytorch-check.py knows: 13 events on devices 0, 1 and host memory. */
static void write_known(const char *path)
{
    static const char *const strs[] = {"alloc_fn", "model.py", "libtorch.so", "train_step",
                                       "phase1"};
    struct mt_frame_rec frames[3] = {
        {0x2000, 0, 0, 1, 2, 10},   /* alloc_fn at model.py:10 */
        {0x3000, 0, 0, 4, 2, 20},   /* train_step at model.py:20 */
        {0x1040, 0x40, 3, 0, 0, 0}, /* libtorch.so+0x40 */
    };
    uint32_t parent[3] = {0, 1, 0}, frame[3] = {2, 1, 3};
    struct memtrace_event ev[13];
    ev[0] = mk(MEMTRACE_SEGMENT_ALLOC, 2000, 0, 0x100000, 2097152, 3);
    ev[1] = mk(MEMTRACE_ALLOC, 3000, 0, 0x100000, 1024, 2);
    ev[1].requested_size = 1000;
    ev[2] = mk(MEMTRACE_ALLOC, 4000, 0, 0x100400, 512, 1);
    ev[3] = mk(MEMTRACE_SEGMENT_ALLOC, 5000, 1, 0x900000, 2097152, 3);
    ev[4] = mk(MEMTRACE_ALLOC, 6000, 1, 0x900000, 4096, 2);
    ev[5] = mk(MEMTRACE_FREE_REQUESTED, 7000, 0, 0x100000, 1024, 0);
    ev[6] = mk(MEMTRACE_FREE_COMPLETED, 8000, 0, 0x100000, 1024, 0);
    ev[7] = mk(MEMTRACE_COUNTER, 9000, 0, 3000000, 8000000000ull, 0);
    ev[8] = mk(MEMTRACE_ANNOTATE, 10000, 0, 0, 0, 0);
    ev[8].category = 5;
    ev[8].aux = MEMTRACE_ANNOTATE_PUSH;
    ev[8].tid = 7;
    ev[9] = mk(MEMTRACE_ALLOC, 11000, -1, 0x5000, 64, 0);
    ev[10] = ev[8];
    ev[10].time_ns = 12000;
    ev[10].aux = MEMTRACE_ANNOTATE_POP;
    ev[11] = mk(MEMTRACE_OOM, 13000, 1, 0, 1ull << 30, 2);
    ev[11].aux = 12345;
    ev[12] = mk(MEMTRACE_SNAPSHOT, 14000, 0, 0, 0, 0);
    struct memtrace_block b0[1] = {{0x100400, 512, 512, 1, MEMTRACE_BLOCK_ACTIVE_ALLOCATED}};
    struct memtrace_block b1[1] = {{0x900000, 4096, 4096, 2, MEMTRACE_BLOCK_ACTIVE_PENDING_FREE}};
    struct memtrace_segment segs[2];
    memset(segs, 0, sizeof(segs));
    segs[0].addr = 0x100000;
    segs[0].total_size = 2097152;
    segs[0].allocated_size = segs[0].active_size = segs[0].requested_size = 512;
    segs[0].stack = 3;
    segs[0].nblocks = 1;
    segs[0].blocks = b0;
    segs[1].addr = 0x900000;
    segs[1].total_size = 2097152;
    segs[1].device = 1;
    segs[1].pool = -3;
    segs[1].is_large = 1;
    segs[1].is_expandable = 1;
    segs[1].nblocks = 1;
    segs[1].blocks = b1;
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_meta(w, meta), "mt_writer_meta");
    cli_check(mt_writer_strings(w, 1, 5, strs), "mt_writer_strings");
    cli_check(mt_writer_frames(w, 1, 3, frames), "mt_writer_frames");
    cli_check(mt_writer_stacks(w, 1, 3, parent, frame), "mt_writer_stacks");
    cli_check(mt_writer_events(w, ev, 13), "mt_writer_events");
    cli_check(mt_writer_state(w, 14000, segs, 2), "mt_writer_state");
    cli_check(mt_writer_end(w, "{\"events\": 13}"), "mt_writer_end");
}

/* A file without a STATE chunk: the segments come from the replay's live tables. */
static void no_state(const char *path, const char *json_path)
{
    struct memtrace_event ev[4];
    ev[0] = mk(MEMTRACE_SEGMENT_ALLOC, 100, 0, 0x200000, 1 << 20, 0);
    ev[0].pool = 1;
    ev[1] = mk(MEMTRACE_ALLOC, 200, 0, 0x200000, 256, 0);
    ev[2] = mk(MEMTRACE_ALLOC, 300, 0, 0x200100, 512, 0);
    ev[3] = mk(MEMTRACE_FREE_REQUESTED, 400, 0, 0x200100, 512, 0);
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_events(w, ev, 4), "mt_writer_events");
    cli_check(mt_writer_end(w, "{}"), "mt_writer_end");
    const char *args[] = {"export", "--format", "pytorch-json", "-o", json_path, path, NULL};
    struct cli_out r = cli_run(args);
    is_int(0, r.status, "no state: export exits 0");
    cli_free(&r);
    json_t *j = json_load_file(json_path, 0, NULL);
    json_t *segs = json_object_get(j, "segments");
    is_int(1, (long long)json_array_size(segs), "no state: the live segment is listed");
    json_t *s0 = json_array_get(segs, 0);
    json_t *b = json_object_get(s0, "blocks");
    ok(json_array_size(b) == 3 && cli_int(json_array_get(b, 0), "size") == 256 &&
           cli_int(json_array_get(b, 1), "size") == 512 &&
           cli_int(json_array_get(b, 2), "size") == (1 << 20) - 768,
       "no state: its live blocks and the free rest, in address order");
    ok(strcmp(json_string_value(cli_get(json_array_get(b, 1), "state")), "active_pending_free") ==
               0 &&
           strcmp(json_string_value(cli_get(s0, "segment_type")), "small") == 0 &&
           cli_int(s0, "allocated_size") == 256 && cli_int(s0, "active_size") == 768,
       "no state: pending block, small pool, allocated and active sizes");
    json_decref(j);
}

static int have_python(void)
{
    return system("command -v python3 >/dev/null 2>&1") == 0;
}

static int python_check(const char *mode, const char *a, const char *b)
{
    const char *src = getenv("top_srcdir");
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "python3 '%s/tests/viewer/pytorch-check.py' %s '%s' '%s' 1>&2",
             src && *src ? src : ".", mode, a, b ? b : "");
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static struct cli_out export_to(const char *fmt, const char *in, const char *out)
{
    const char *args[] = {"export", "--format", fmt, "-o", out, in, NULL};
    struct cli_out r = cli_run(args);
    if (r.status != 0)
        diag("export %s: %s", fmt, r.err);
    return r;
}

/* Folded lines as "stack bytes", read with a parser of our own: the cost is the
 * integer after the last space, frames are split at ';'. */
static void check_folded(const char *text)
{
    long long total = 0, stack2 = -1, stack1 = -1, none = -1;
    int lines = 0, max_frames = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof(line), "%.*s", (int)len, p);
        char *sp = strrchr(line, ' ');
        if (sp) {
            *sp = '\0';
            long long v = atoll(sp + 1);
            total += v;
            int nf = 1;
            for (char *c = line; *c; c++)
                nf += *c == ';';
            max_frames = nf > max_frames ? nf : max_frames;
            if (strcmp(line, "train_step;alloc_fn") == 0)
                stack2 = v;
            else if (strcmp(line, "train_step") == 0)
                stack1 = v;
            else if (strcmp(line, "[no stack]") == 0)
                none = v;
        }
        lines++;
        p = nl ? nl + 1 : p + len;
    }
    is_int(3, lines, "folded: one line per stack that allocated");
    is_int(5120, stack2, "folded: train_step;alloc_fn allocated 1024 + 4096 bytes");
    is_int(512, stack1, "folded: train_step allocated 512 bytes");
    is_int(64, none, "folded: the host allocation without a stack");
    is_int(5696, total, "folded: total bytes allocated");
    is_int(2, max_frames, "folded: frames outermost first, joined by ';'");
}

static void check_speedscope(const char *path)
{
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);
    ok(j != NULL, "speedscope: parses as JSON");
    json_t *profiles = json_object_get(j, "profiles");
    is_int(2, (long long)json_array_size(profiles), "speedscope: two profiles");
    is_int(4, (long long)json_array_size(cli_get(j, "shared.frames")),
           "speedscope: 3 frames and [no stack]");
    long long want_end[2] = {5696, 5632};
    for (size_t k = 0; k < 2; k++) {
        json_t *p = json_array_get(profiles, k);
        long long sum = 0;
        size_t i;
        json_t *w;
        json_array_foreach(json_object_get(p, "weights"), i, w) sum += json_integer_value(w);
        is_int(want_end[k], sum, "speedscope: profile %zu weights sum", k);
        is_int(want_end[k], cli_int(p, "endValue"), "speedscope: profile %zu endValue", k);
        is_int((long long)json_array_size(json_object_get(p, "samples")),
               (long long)json_array_size(json_object_get(p, "weights")),
               "speedscope: a weight per sample");
    }
    /* the sample of train_step;alloc_fn lists frame indices outermost first: 1, 0 */
    json_t *s0 = json_array_get(json_object_get(json_array_get(profiles, 0), "samples"), 1);
    is_int(1, json_integer_value(json_array_get(s0, 0)), "speedscope: outermost frame first");
    json_decref(j);
}

/* Perfetto slices begun and ended, and begun at ts 3.000 (the known file's event 3,
 * 3 us after its first event). */
static void count_slices(const char *text, int *b, int *e, int *b_at3)
{
    *b = *e = *b_at3 = 0;
    json_t *j = json_loads(text, 0, NULL);
    json_t *evs = json_object_get(j, "traceEvents");
    for (size_t k = 0; k < json_array_size(evs); k++) {
        json_t *x = json_array_get(evs, k);
        const char *ph = json_string_value(json_object_get(x, "ph"));
        if (ph && strcmp(ph, "b") == 0) {
            (*b)++;
            *b_at3 += json_real_value(json_object_get(x, "ts")) == 3.0;
        }
        *e += ph && strcmp(ph, "e") == 0;
    }
    json_decref(j);
}

/* The filters and window of the analysis commands, on the exports that take them. */
static void windows(const char *file)
{
    const char *csv_win[] = {"export", "--format", "csv", "--from", "#2", "--to", "#6", file, NULL};
    struct cli_out r = cli_run(csv_win);
    ok(r.status == 0 && cli_lines(r.out) == 6 && strncmp(strchr(r.out, '\n') + 1, "2,", 2) == 0 &&
           strstr(r.out, "\n6,") && !strstr(r.out, "\n7,"),
       "csv --from #2 --to #6: the header and events 2 to 6");
    cli_free(&r);
    const char *csv_dev[] = {"export", "--format", "csv", "--device", "1", file, NULL};
    r = cli_run(csv_dev);
    /* device 1: its segment_alloc (3), alloc (4) and oom (11) */
    ok(r.status == 0 && cli_lines(r.out) == 4 && strstr(r.out, "\n3,") && strstr(r.out, "\n4,") &&
           strstr(r.out, "\n11,"),
       "csv --device 1: the 3 events of device 1");
    cli_free(&r);

    const char *pf_from[] = {"export", "--format", "perfetto", "--from", "#3", file, NULL};
    r = cli_run(pf_from);
    int b, e, at3;
    count_slices(r.out, &b, &e, &at3);
    /* live at event 3: the two blocks of device 0, begun there; then the allocs of 4
     * and 9; ended: the free of 6 and the 3 blocks live at the end */
    ok(r.status == 0 && b == 4 && e == 4 && at3 == 2,
       "perfetto --from #3: the blocks live at the window's start begin there (%d %d %d)", b, e,
       at3);
    cli_free(&r);
    const char *pf_dev[] = {"export", "--format", "perfetto", "--device", "0", file, NULL};
    r = cli_run(pf_dev);
    count_slices(r.out, &b, &e, &at3);
    ok(r.status == 0 && b == 2 && e == 2, "perfetto --device 0: the 2 blocks of device 0");
    cli_free(&r);

    const char *pt[] = {"export", "--format", "pytorch-pickle", "--from", "#3", file, NULL};
    r = cli_run(pt);
    ok(r.status == 2 && strstr(r.err, "a PyTorch snapshot is exported whole") && !r.out[0],
       "pytorch-pickle with a window: a usage error, nothing written");
    cli_free(&r);
}

int main(void)
{
    plan(41);
    cli_scratch();
    char *file = strdup(cli_path("known.memtrace"));
    write_known(file);

    const char *formats[2] = {"pytorch-json", "pytorch-pickle"};
    for (int k = 0; k < 2; k++) {
        const char *out = cli_path(k ? "known.pickle" : "known.json");
        struct cli_out r = export_to(formats[k], file, out);
        is_int(0, r.status, "export %s exits 0", formats[k]);
        ok(strstr(r.err, "2 events have no place") != NULL,
           "%s: the counter and the host allocation are reported left out", formats[k]);
        cli_free(&r);
        if (have_python())
            is_int(0, python_check("snapshot", out, NULL),
                   "%s: Python reads PyTorch's schema with the known figures", formats[k]);
        else
            skip(1, "python3 is not installed");
    }

    const char *pf = cli_path("known.perfetto.json");
    struct cli_out r = export_to("perfetto", file, pf);
    is_int(0, r.status, "export perfetto exits 0");
    cli_free(&r);
    if (have_python())
        is_int(0, python_check("perfetto", pf, NULL), "perfetto: Python reads the counters");
    else
        skip(1, "python3 is not installed");

    const char *ss = cli_path("known.speedscope.json");
    r = export_to("speedscope", file, ss);
    is_int(0, r.status, "export speedscope exits 0");
    cli_free(&r);
    check_speedscope(ss);

    const char *fo = cli_path("known.folded");
    r = export_to("folded", file, fo);
    is_int(0, r.status, "export folded exits 0");
    cli_free(&r);
    char *text = cli_slurp(fo);
    check_folded(text);
    free(text);

    const char *csv = cli_path("known.csv");
    r = export_to("csv", file, csv);
    is_int(0, r.status, "export csv exits 0");
    cli_free(&r);
    text = cli_slurp(csv);
    is_int(14, cli_lines(text), "csv: a header and 13 event lines");
    ok(strncmp(text, "index,time_ns,action,", 21) == 0, "csv: the header comes first");
    free(text);

    const char *bad[] = {"export", "--format", "svg", file, NULL};
    r = cli_run(bad);
    is_int(2, r.status, "an unknown format is a usage error");
    cli_free(&r);
    const char *missing[] = {"export", "--format", "csv", cli_path("nope.memtrace"), NULL};
    r = cli_run(missing);
    is_int(1, r.status, "a missing file exits 1");
    is_int(1, cli_lines(r.err), "with one line on stderr");
    cli_free(&r);
    no_state(cli_path("nostate.memtrace"), cli_path("nostate.json"));
    windows(file);
    free(file);
    return exit_status();
}
