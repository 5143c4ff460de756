/* import-t.c: `memtrace import` of PyTorch snapshots: the real one in ../shared (every
 * count, and a round trip through the pickle export compared by Python), a JSON
 * snapshot with known contents, a streamed pickle of two devices against the same
 * snapshot read whole, integers wider than int64, and hostile, truncated and corrupt
 * inputs (one line, exit 1, nothing run). */
#include "config.h"

#include <inttypes.h>

#include "cli-util.h"
#include "memtrace_snapshot.h"
#include "pickle.h"

struct counts {
    uint64_t action[MEMTRACE_ACTION_COUNT];
    uint64_t events;
    size_t segments, blocks;
};

static int read_counts(const char *path, struct counts *c)
{
    memset(c, 0, sizeof(*c));
    struct memtrace_reader *r;
    if (memtrace_reader_open(&r, path, NULL) != 0)
        return -1;
    struct memtrace_event ev;
    while (memtrace_reader_next(r, &ev) == 1) {
        c->events++;
        if (ev.action < MEMTRACE_ACTION_COUNT)
            c->action[ev.action]++;
    }
    c->segments = memtrace_reader_segment_count(r);
    for (size_t i = 0; i < c->segments; i++)
        c->blocks += memtrace_reader_segment(r, i)->nblocks;
    memtrace_reader_close(r);
    return 0;
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n)
        bail_out("cannot write a test input");
    fclose(f);
}

static struct cli_out import(const char *in, const char *out)
{
    const char *args[] = {"import", in, "-o", out, NULL};
    return cli_run(args);
}

static int exists(const char *p)
{
    return access(p, F_OK) == 0;
}

static void real_snapshot(void)
{
    const char *src = getenv("top_srcdir");
    char orig[1024];
    snprintf(orig, sizeof(orig), "%s/../shared/data/pytorch-snapshots/eor-training.pickle",
             src && *src ? src : ".");
    if (!exists(orig)) {
        skip(14,
             "the real snapshot ../shared/data/pytorch-snapshots/eor-training.pickle is absent");
        return;
    }
    const char *out = cli_path("eor.memtrace");
    struct cli_out r = import(orig, out);
    is_int(0, r.status, "real snapshot: import exits 0");
    cli_free(&r);
    struct counts c;
    ok(read_counts(out, &c) == 0, "real snapshot: the output reads");
    is_int(1935, (long long)c.action[MEMTRACE_ALLOC], "real snapshot: alloc");
    is_int(1926, (long long)c.action[MEMTRACE_FREE_REQUESTED], "real snapshot: free_requested");
    is_int(1926, (long long)c.action[MEMTRACE_FREE_COMPLETED], "real snapshot: free_completed");
    is_int(7, (long long)c.action[MEMTRACE_SEGMENT_ALLOC], "real snapshot: segment_alloc");
    is_int(9, (long long)c.action[MEMTRACE_SNAPSHOT], "real snapshot: snapshot");
    is_int(10, (long long)c.segments, "real snapshot: 10 segments");
    /* its stacks as PyTorch took them: 6 frames of unwinder and allocator, then the
     * dispatcher and the interpreter around the kernels and the Python lines */
    const char *pk[] = {"peak", "--top", "1", "--depth", "4", out, NULL};
    r = cli_run(pk);
    ok(strstr(r.out, "      #6  at::TensorBase at::detail::_empty_strided_generic") &&
           strstr(r.out, "      #31 generate_counterfactuals at ") &&
           strstr(r.out, "counterfactuals.py:102\n") && !strstr(r.out, "unwind"),
       "real snapshot: peak shows the kernel and the Python lines, not the unwinder");
    ok(strstr(r.out, "(34 frames hidden: 6 capture, 10 dispatch, 14 interpreter, 3 start, 1 "
                     "unknown; --all-frames shows them)") != NULL,
       "real snapshot: and how many frames of each kind it hid");
    cli_free(&r);
    /* The slices of the 31 blocks live before its first event and of the 40 live at
     * its end come from the replay's address table, whose order changes with each
     * process's random key: five exports must still be the same file. */
    const char *pf1[] = {"export", "--format", "perfetto", out, NULL};
    r = cli_run(pf1);
    int same = r.status == 0 && r.out && strlen(r.out) > 0;
    for (int k = 0; k < 4 && same; k++) {
        struct cli_out again = cli_run(pf1);
        same = again.status == 0 && again.out && strcmp(again.out, r.out) == 0;
        cli_free(&again);
    }
    ok(same, "real snapshot: five Perfetto exports are the same file");
    cli_free(&r);
    /* its trace began after 3 segments and 31 blocks (8,781,824 bytes) were in use */
    const char *sm[] = {"summary", "--json", out, NULL};
    r = cli_run(sm);
    json_t *j = cli_json(&r);
    ok(cli_int(j, "reserved.current_bytes") == 134217728 &&
           cli_int(j, "allocated.current_bytes") == 39976976 + 8781824 &&
           cli_int(j, "allocated.current_count") == 40,
       "real snapshot: at the end, the 10 segments and 40 blocks the snapshot lists");
    json_decref(j);
    cli_free(&r);
    const char *sa[] = {"stats", "--json", out, NULL};
    r = cli_run(sa);
    j = cli_json(&r);
    ok(json_integer_value(json_object_get(j, "segment.small_pool.current")) == 4 &&
           json_integer_value(json_object_get(j, "segment.large_pool.current")) == 6 &&
           json_integer_value(json_object_get(j, "allocation.all.current")) == 40,
       "real snapshot: stats: 4 small and 6 large segments (segment_type), 40 allocations");
    json_decref(j);
    cli_free(&r);
    const char *back = cli_path("eor.pickle");
    const char *args[] = {"export", "--format", "pytorch-pickle", "-o", back, out, NULL};
    r = cli_run(args);
    is_int(0, r.status, "real snapshot: export to pytorch-pickle exits 0");
    cli_free(&r);
    if (system("command -v python3 >/dev/null 2>&1") != 0) {
        skip(1, "python3 is not installed");
        return;
    }
    char cmd[3072];
    snprintf(cmd, sizeof(cmd), "python3 '%s/tests/viewer/pytorch-check.py' compare '%s' '%s' 1>&2",
             src && *src ? src : ".", orig, back);
    int st = system(cmd);
    is_int(0, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
           "real snapshot: Python finds every segment, block and trace entry again");
}

static const char known_json[] =
    "{\"segments\": [{\"device\": 1, \"address\": 4096, \"total_size\": 2097152,"
    " \"allocated_size\": 512, \"active_size\": 512, \"requested_size\": 500, \"stream\": 7,"
    " \"segment_type\": \"small\", \"segment_pool_id\": [0, 0], \"is_expandable\": false,"
    " \"frames\": [], \"blocks\": [{\"size\": 512, \"requested_size\": 500,"
    " \"state\": \"active_allocated\", \"frames\": [{\"filename\": \"a.py\", \"line\": 3,"
    " \"name\": \"f\"}, {\"filename\": \"b.py\", \"line\": 9, \"name\": \"main\"}]},"
    " {\"size\": 2096640, \"requested_size\": 0, \"state\": \"inactive\", \"frames\": []}]}],"
    " \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 8192, \"size\": 64, \"stream\": 0,"
    " \"time_us\": 100, \"frames\": [{\"filename\": \"a.py\", \"line\": 3, \"name\": \"f\"},"
    " {\"filename\": \"b.py\", \"line\": 9, \"name\": \"main\"}]},"
    " {\"action\": \"oom\", \"size\": 1048576, \"stream\": 0, \"device_free\": 77,"
    " \"time_us\": 300, \"frames\": []}],"
    " [{\"action\": \"segment_alloc\", \"addr\": 4096, \"size\": 2097152, \"stream\": 7,"
    " \"time_us\": 200, \"frames\": []}, {\"action\": \"teleport\", \"time_us\": 250}]],"
    " \"allocator_settings\": {\"expandable_segments\": false},"
    " \"external_annotations\": [{\"name\": \"fwd\", \"stage\": \"START\", \"device\": 0,"
    " \"time_us\": 150}, {\"name\": \"fwd\", \"stage\": \"END\", \"device\": 0,"
    " \"time_us\": 350}], \"custom\": 5}";

/* Memory live before the trace began (docs/REPLAY.md, rule 0): segment A (2 MiB at
 * 1 MiB) holds a block allocated and one pending free at the end that the trace never
 * allocated, and a block the trace frees (at 0x1f0000); segment B (20 MiB) the trace
 * makes; segment C (2 MiB at 7 MiB) the trace frees; and the trace requests the free
 * of a block (at 9 MiB) in no segment known. */
static const char before_json[] =
    "{\"segments\": [{\"device\": 0, \"address\": 1048576, \"total_size\": 2097152,"
    " \"stream\": 0, \"segment_type\": \"small\", \"blocks\": ["
    "{\"size\": 512, \"requested_size\": 500, \"state\": \"active_allocated\","
    " \"frames\": [{\"filename\": \"m.py\", \"line\": 1, \"name\": \"f1\"}]},"
    " {\"size\": 1024, \"requested_size\": 1024, \"state\": \"active_pending_free\","
    " \"frames\": [{\"filename\": \"m.py\", \"line\": 2, \"name\": \"f2\"}]},"
    " {\"size\": 2095616, \"state\": \"inactive\"}]},"
    " {\"device\": 0, \"address\": 4194304, \"total_size\": 20971520, \"stream\": 0,"
    " \"segment_type\": \"large\", \"blocks\": [{\"size\": 4096, \"requested_size\": 4096,"
    " \"state\": \"active_allocated\", \"frames\": [{\"filename\": \"m.py\", \"line\": 3,"
    " \"name\": \"f3\"}]}, {\"size\": 20967424, \"state\": \"inactive\"}]}],"
    " \"device_traces\": [["
    "{\"action\": \"segment_alloc\", \"addr\": 4194304, \"size\": 20971520, \"stream\": 0,"
    " \"time_us\": 10},"
    " {\"action\": \"free_completed\", \"addr\": 2031616, \"size\": 256, \"stream\": 0,"
    " \"time_us\": 20, \"frames\": [{\"filename\": \"m.py\", \"line\": 4, \"name\": \"f4\"}]},"
    " {\"action\": \"alloc\", \"addr\": 4194304, \"size\": 4096, \"stream\": 0,"
    " \"time_us\": 30, \"frames\": [{\"filename\": \"m.py\", \"line\": 3, \"name\": \"f3\"}]},"
    " {\"action\": \"segment_free\", \"addr\": 7340032, \"size\": 2097152, \"stream\": 0,"
    " \"time_us\": 40},"
    " {\"action\": \"free_requested\", \"addr\": 9437184, \"size\": 128, \"stream\": 0,"
    " \"time_us\": 50}]]}";

static void before_trace(void)
{
    const char *in = cli_path("before.json");
    const char *out = cli_path("before.memtrace");
    write_bytes(in, before_json, sizeof(before_json) - 1);
    struct cli_out r = import(in, out);
    is_int(0, r.status, "before the trace: import exits 0");
    ok(strstr(r.out, "2 segments and 3 blocks were live before the trace's first entry") != NULL,
       "before the trace: 2 segments and 3 blocks found live before it");
    ok(strstr(r.err, "note: 1 blocks live before the trace lie in no segment known then") != NULL,
       "before the trace: the block in no known segment is reported left out");
    cli_free(&r);

    struct memtrace_reader *rd;
    if (memtrace_reader_open(&rd, out, NULL) != 0)
        bail_out("the imported file does not read");
    struct memtrace_event ev;
    is_int(1, memtrace_reader_next(rd, &ev), "before the trace: the first event reads");
    /* the state held at the first event is the one before it */
    size_t ns = memtrace_reader_segment_count(rd);
    const struct memtrace_segment *a = memtrace_reader_segment(rd, 0);
    const struct memtrace_segment *c = memtrace_reader_segment(rd, 1);
    ok(ns == 2 && a && c && a->addr == 1048576 && a->total_size == 2097152 && !a->is_large &&
           c->addr == 7340032 && c->total_size == 2097152 && c->nblocks == 0,
       "before the trace: segments A (from the snapshot) and C (freed in the trace)");
    ok(a && a->nblocks == 3 && a->blocks[0].addr == 1048576 && a->blocks[0].size == 512 &&
           a->blocks[0].state == MEMTRACE_BLOCK_ACTIVE_ALLOCATED && a->blocks[1].addr == 1049088 &&
           a->blocks[1].size == 1024 && a->blocks[1].state == MEMTRACE_BLOCK_ACTIVE_PENDING_FREE &&
           a->blocks[2].addr == 2031616 && a->blocks[2].size == 256 &&
           a->blocks[2].state == MEMTRACE_BLOCK_ACTIVE_ALLOCATED,
       "before the trace: A's blocks: two from the snapshot, one the trace frees");
    memtrace_reader_close(rd);

    const char *args[] = {"summary", "--json", out, NULL};
    r = cli_run(args);
    json_t *j = cli_json(&r);
    /* start: allocated 512 + 1024 + 256, reserved 2 x 2 MiB; event 0 makes B (20 MiB),
     * 1 frees the 256, 2 allocates 4096, 3 frees C */
    is_int(5632, cli_int(j, "allocated.current_bytes"), "before the trace: allocated at the end");
    is_int(5632, cli_int(j, "allocated.peak_bytes"), "before the trace: allocated peak");
    is_int(2, cli_int(j, "allocated.peak_event"), "before the trace: at event 2");
    is_int(23068672, cli_int(j, "reserved.current_bytes"), "before the trace: reserved at the end");
    is_int(25165824, cli_int(j, "reserved.peak_bytes"), "before the trace: reserved peak");
    ok(cli_int(j, "allocs.count") == 1 && cli_int(j, "unmatched_frees.count") == 0 &&
           cli_int(j, "frees.bytes") == 256 && cli_int(j, "segment_frees.bytes") == 2097152 &&
           cli_int(j, "unmatched_segment_frees.count") == 0,
       "before the trace: one allocation; the frees match what was live before");
    json_decref(j);
    cli_free(&r);

    /* stats: what was live before counts now, not as allocated; pools by the
     * allocator's rule (blocks of at most 1 MiB small) and by segment_type */
    const char *sa[] = {"stats", "--json", out, NULL};
    r = cli_run(sa);
    j = cli_json(&r);
#define KEY(k) json_integer_value(json_object_get(j, k))
    ok(KEY("allocation.all.current") == 2 && KEY("allocation.small_pool.current") == 2 &&
           KEY("active.small_pool.current") == 3 && KEY("allocation.all.allocated") == 1 &&
           KEY("segment.small_pool.current") == 1 && KEY("segment.large_pool.current") == 1 &&
           KEY("reserved_bytes.small_pool.current") == 2097152,
       "before the trace: stats count what was live before, by pool");
#undef KEY
    json_decref(j);
    cli_free(&r);

    /* perfetto: the blocks live before begin their slices at the first event */
    const char *pf[] = {"export", "--format", "perfetto", out, NULL};
    r = cli_run(pf);
    j = cli_json(&r);
    json_t *evs = json_object_get(j, "traceEvents");
    int nb = 0, ne = 0, at0 = 0;
    for (size_t k = 0; k < json_array_size(evs); k++) {
        json_t *e = json_array_get(evs, k);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        if (ph && strcmp(ph, "b") == 0) {
            nb++;
            at0 += json_real_value(json_object_get(e, "ts")) == 0.0;
        }
        ne += ph && strcmp(ph, "e") == 0;
    }
    ok(nb == 4 && ne == 4 && at0 == 3,
       "before the trace: perfetto begins the 3 blocks live before at the start, 4 slices closed");
    json_decref(j);
    cli_free(&r);

    /* a merge keeps the state before the first event */
    const char *merged = cli_path("before-merged.memtrace");
    const char *mg[] = {"merge", "-o", merged, out, NULL};
    r = cli_run(mg);
    cli_free(&r);
    const char *ms[] = {"summary", "--json", merged, NULL};
    r = cli_run(ms);
    j = cli_json(&r);
    ok(cli_int(j, "allocated.current_bytes") == 5632 &&
           cli_int(j, "reserved.current_bytes") == 23068672 &&
           cli_int(j, "reserved.peak_bytes") == 25165824,
       "before the trace: merged, the same levels");
    json_decref(j);
    cli_free(&r);
}

static void known(void)
{
    const char *in = cli_path("known.json");
    const char *out = cli_path("known.memtrace");
    write_bytes(in, known_json, sizeof(known_json) - 1);
    struct cli_out r = import(in, out);
    is_int(0, r.status, "JSON: import exits 0");
    ok(strstr(r.err, "1 trace entries") != NULL, "JSON: the unknown action is reported skipped");
    cli_free(&r);
    struct memtrace_reader *rd;
    if (memtrace_reader_open(&rd, out, NULL) != 0)
        bail_out("the imported file does not read");
    /* merged by time: alloc 100, fwd 150, segment_alloc 200, oom 300, fwd 350 */
    static const int want_action[5] = {MEMTRACE_ALLOC, MEMTRACE_ANNOTATE, MEMTRACE_SEGMENT_ALLOC,
                                       MEMTRACE_OOM, MEMTRACE_ANNOTATE};
    static const int want_dev[5] = {0, 0, 1, 0, 0};
    struct memtrace_event ev[6];
    int n = 0;
    while (n < 6 && memtrace_reader_next(rd, &ev[n]) == 1)
        n++;
    is_int(5, n, "JSON: 5 events");
    int order = 1;
    for (int k = 0; k < 5 && k < n; k++)
        order &= ev[k].action == want_action[k] && ev[k].device == want_dev[k];
    ok(order, "JSON: device traces and annotations interleaved by time, devices by position");
    is_int(100000, (long long)ev[0].time_ns, "JSON: time_us becomes ns");
    is_int(8192, (long long)ev[0].addr, "JSON: alloc addr");
    is_int(77, (long long)ev[3].aux, "JSON: oom device_free kept");
    is_int(MEMTRACE_ANNOTATE_PUSH, (long long)ev[1].aux, "JSON: START is a push");
    is_string("fwd", memtrace_reader_string(rd, ev[4].category), "JSON: annotation name");
    uint32_t fr[4];
    int depth = memtrace_reader_stack(rd, ev[0].stack, fr, 4);
    is_int(2, depth, "JSON: the alloc's stack has 2 frames");
    const struct memtrace_frame *f0 = memtrace_reader_frame(rd, fr[0]);
    ok(f0 && strcmp(f0->symbol, "f") == 0 && strcmp(f0->file, "a.py") == 0 && f0->line == 3,
       "JSON: innermost frame f at a.py:3");
    is_int(1, (long long)memtrace_reader_segment_count(rd), "JSON: one segment");
    const struct memtrace_segment *s = memtrace_reader_segment(rd, 0);
    ok(s && s->device == 1 && s->stream == 7 && !s->is_large && s->nblocks == 2 &&
           s->blocks[1].addr == 4096 + 512 && s->blocks[0].stack == ev[0].stack,
       "JSON: segment fields, block addresses from sizes, block stacks");
    json_t *meta = json_loads(memtrace_reader_meta(rd), 0, NULL);
    ok(json_is_false(cli_get(meta, "allocator_settings.expandable_segments")) &&
           cli_int(meta, "pytorch_snapshot.custom") == 5 &&
           json_array_size(cli_get(meta, "pytorch_snapshot.external_annotations")) == 2,
       "JSON: allocator_settings, annotations and other keys kept in the metadata");
    json_decref(meta);
    memtrace_reader_close(rd);
}

/* Two device traces whose times interleave (the second out of order), shared frame
 * dicts, an unknown action, annotations and settings after the traces: as a pickle
 * (streamed), as JSON and as a pickle whose device_traces is a tuple (both read
 * whole), and as a pickle with a bad entry. */
static const char two_devices_py[] =
    "import json, pickle, sys\n"
    "fr = [{'name': 'f%d' % i, 'filename': 'x.py', 'line': i} for i in range(5)]\n"
    "d0, d1 = [], []\n"
    "acts = ['alloc', 'free_requested', 'free_completed', 'teleport']\n"
    "for k in range(3000):\n"
    "    e = {'action': acts[k % 4], 'addr': 4096 * (k + 1), 'size': 512 + k, 'stream': 0,\n"
    "         'time_us': 1000 + 3 * k, 'frames': [fr[k % 5], fr[(k + 1) % 5], fr[2]]}\n"
    "    d0.append(e)\n"
    "    d1.append(dict(e, addr=e['addr'] + (1 << 40), time_us=1001 + 3 * k + k % 7))\n"
    "snap = {'segments': [], 'device_traces': [d0, d1],\n"
    "        'external_annotations': [{'name': 'step', 'stage': 'START', 'device': 0,\n"
    "                                  'time_us': 1500},\n"
    "                                 {'name': 'step', 'stage': 'END', 'device': 0,\n"
    "                                  'time_us': 5000}],\n"
    "        'allocator_settings': {'x': 1}}\n"
    "d = sys.argv[1]\n"
    "pickle.dump(snap, open(d + '/two.pickle', 'wb'), protocol=4)\n"
    "json.dump(snap, open(d + '/two.json', 'w'))\n"
    "snap['device_traces'] = tuple(snap['device_traces'])\n"
    "pickle.dump(snap, open(d + '/tuple.pickle', 'wb'), protocol=4)\n"
    "snap['device_traces'] = [d0, d1[:2] + [dict(d1[2], addr=-5)] + d1[3:]]\n"
    "pickle.dump(snap, open(d + '/bad.pickle', 'wb'), protocol=4)\n";

/* The pytorch-json export of in, imported (NULL if either fails). */
static char *imported_json(const char *in, const char *name)
{
    char mt[64], js[64];
    snprintf(mt, sizeof(mt), "%s.memtrace", name);
    snprintf(js, sizeof(js), "%s.json", name);
    const char *out = cli_path(mt), *exp = cli_path(js);
    struct cli_out r = import(in, out);
    int rc = r.status;
    cli_free(&r);
    struct counts c;
    if (rc != 0 || read_counts(out, &c) != 0 || c.events != 4502)
        return NULL;
    const char *args[] = {"export", "--format", "pytorch-json", "-o", exp, out, NULL};
    r = cli_run(args);
    rc = r.status;
    cli_free(&r);
    return rc == 0 ? cli_slurp(exp) : NULL;
}

static void two_devices(void)
{
    if (system("command -v python3 >/dev/null 2>&1") != 0) {
        skip(5, "python3 is not installed");
        return;
    }
    const char *py = cli_path("two.py");
    write_bytes(py, two_devices_py, sizeof(two_devices_py) - 1);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "python3 '%s' '%s'", py, cli_scratch());
    if (system(cmd) != 0)
        bail_out("python3 could not write the two-device snapshots");
    char *streamed = imported_json(cli_path("two.pickle"), "two-pickle");
    char *json = imported_json(cli_path("two.json"), "two-json");
    char *whole = imported_json(cli_path("tuple.pickle"), "two-tuple");
    ok(streamed && json && whole, "two devices: pickle, JSON and tuple pickle import 4502 events");
    ok(streamed && json && strcmp(streamed, json) == 0,
       "two devices: the streamed pickle exports the same snapshot as the JSON read whole");
    ok(streamed && whole && strcmp(streamed, whole) == 0,
       "two devices: and as the pickle read whole");
    int dev[4] = {-1, -1, -1, -1};
    struct memtrace_reader *rd;
    if (memtrace_reader_open(&rd, cli_path("two-pickle.memtrace"), NULL) == 0) {
        struct memtrace_event ev;
        for (int k = 0; k < 4 && memtrace_reader_next(rd, &ev) == 1; k++)
            dev[k] = ev.device;
        memtrace_reader_close(rd);
    }
    ok(dev[0] == 0 && dev[1] == 1 && dev[2] == 0 && dev[3] == 1,
       "two devices: entries merged by time across the lists (devices %d %d %d %d)", dev[0], dev[1],
       dev[2], dev[3]);
    free(streamed);
    free(json);
    free(whole);
    struct cli_out r = import(cli_path("bad.pickle"), cli_path("bad.memtrace"));
    ok(r.status == 1 && cli_lines(r.err) == 1 &&
           strstr(r.err, "device_traces[1][2]: 'addr' is negative"),
       "two devices: a bad entry while streaming: exit 1, one line naming it: %s", r.err);
    cli_free(&r);
}

/* A snapshot pickle with one alloc at addr, by the writer under test's sibling. */
static void write_pickle(const char *path, uint64_t addr, int wide)
{
    FILE *f = fopen(path, "wb");
    struct mt_pkw w;
    mt_pkw_begin(&w, f);
    mt_pkw_dict(&w);
    mt_pkw_str(&w, "device_traces");
    mt_pkw_list(&w);
    mt_pkw_list(&w);
    mt_pkw_dict(&w);
    mt_pkw_str(&w, "action");
    mt_pkw_str(&w, "alloc");
    mt_pkw_str(&w, "addr");
    if (wide) { /* LONG1 of 9 bytes: 2^64 + 1 */
        static const unsigned char big[] = {0x8a, 9, 1, 0, 0, 0, 0, 0, 0, 0, 1};
        fwrite(big, 1, sizeof(big), f);
    } else
        mt_pkw_uint(&w, addr);
    mt_pkw_str(&w, "size");
    mt_pkw_int(&w, 512);
    mt_pkw_close(&w);
    mt_pkw_close(&w);
    mt_pkw_close(&w);
    mt_pkw_close(&w);
    mt_pkw_end(&w);
    fclose(f);
}

static void wide_integers(void)
{
    const char *in = cli_path("wide.pickle"), *out = cli_path("wide.memtrace");
    uint64_t addr = (1ull << 63) + 5;
    write_pickle(in, addr, 0);
    struct cli_out r = import(in, out);
    is_int(0, r.status, "an address in [2^63, 2^64) imports");
    cli_free(&r);
    struct memtrace_reader *rd;
    struct memtrace_event ev;
    memset(&ev, 0, sizeof(ev));
    if (memtrace_reader_open(&rd, out, NULL) == 0) {
        memtrace_reader_next(rd, &ev);
        memtrace_reader_close(rd);
    }
    ok(ev.addr == addr, "and keeps every bit: 0x%" PRIx64, ev.addr);
    write_pickle(in, 0, 1);
    r = import(in, cli_path("wider.memtrace"));
    is_int(1, r.status, "an address wider than 64 bits exits 1");
    ok(strstr(r.err, "wider than 64 bits") && cli_lines(r.err) == 1, "with one line: %s", r.err);
    cli_free(&r);
}

static void hostile(void)
{
    const char *marker = cli_path("marker");
    const char *out = cli_path("evil.memtrace");
    char cmd[600];
    int n = snprintf(cmd, sizeof(cmd), "touch %s", marker);
    /* protocol 2: GLOBAL os.system, the command, TUPLE1, REDUCE */
    unsigned char p[700];
    size_t k = 0;
    memcpy(p + k,
           "\x80\x02"
           "cos\nsystem\n",
           13);
    k += 13;
    p[k++] = 'X';
    for (int b = 0; b < 4; b++)
        p[k++] = (unsigned char)(n >> (8 * b));
    memcpy(p + k, cmd, (size_t)n);
    k += (size_t)n;
    memcpy(p + k, "\x85R.", 3);
    k += 3;
    const char *in = cli_path("evil.pickle");
    write_bytes(in, p, k);
    struct cli_out r = import(in, out);
    is_int(1, r.status, "GLOBAL/REDUCE pickle: exit 1");
    ok(strstr(r.err, "GLOBAL at offset 2") && strstr(r.err, "refused") && cli_lines(r.err) == 1,
       "GLOBAL/REDUCE pickle: one line naming the opcode and offset: %s", r.err);
    ok(!exists(marker), "GLOBAL/REDUCE pickle: the command did not run");
    ok(!exists(out), "GLOBAL/REDUCE pickle: no output file");
    cli_free(&r);
    /* protocol 4: STACK_GLOBAL after two strings */
    static const unsigned char sg[] = "\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x04true\x85R.";
    write_bytes(in, sg, sizeof(sg) - 1);
    r = import(in, out);
    ok(r.status == 1 && strstr(r.err, "STACK_GLOBAL at offset 14") && cli_lines(r.err) == 1,
       "STACK_GLOBAL pickle: refused with one line: %s", r.err);
    cli_free(&r);
}

static void broken(void)
{
    const char *in = cli_path("cut.pickle"), *out = cli_path("cut.memtrace");
    write_pickle(in, 4096, 0);
    FILE *f = fopen(in, "rb");
    unsigned char buf[256];
    size_t len = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    write_bytes(in, buf, len / 2);
    struct cli_out r = import(in, out);
    ok(r.status == 1 && cli_lines(r.err) == 1 && strstr(r.err, "truncated"),
       "truncated pickle: exit 1, one line: %s", r.err);
    cli_free(&r);
    buf[len - 1] = 0xff; /* an opcode no pickle of data has, in place of STOP */
    write_bytes(in, buf, len);
    r = import(in, out);
    ok(r.status == 1 && cli_lines(r.err) == 1 && strstr(r.err, "opcode 0xff"),
       "corrupt pickle: exit 1, one line: %s", r.err);
    cli_free(&r);
    const char *js = cli_path("cut.json");
    write_bytes(js, known_json, 40);
    r = import(js, out);
    ok(r.status == 1 && cli_lines(r.err) == 1 && strstr(r.err, "bad JSON"),
       "truncated JSON: exit 1, one line: %s", r.err);
    cli_free(&r);
    write_bytes(js, "hello", 5);
    r = import(js, out);
    ok(r.status == 1 && cli_lines(r.err) == 1 && strstr(r.err, "not a PyTorch"),
       "neither pickle nor JSON: exit 1, one line");
    cli_free(&r);
    /* A string from the snapshot inside the error: its newline and escape sequence
     * are text, not a second line and a colour (found by tests/fuzz/pickle-fuzz). */
    static const char state[] = "{\"segments\": [{\"address\": 0, \"total_size\": 512, \"blocks\":"
                                " [{\"size\": 512, \"state\": \"active_a\\nx\\u001b[31m\"}]}]}";
    write_bytes(js, state, sizeof(state) - 1);
    r = import(js, out);
    ok(r.status == 1 && cli_lines(r.err) == 1 &&
           strstr(r.err, "unknown state 'active_a\\x0ax\\x1b[31m'") && !exists(out),
       "a control character in an unknown block state: one line, escaped: %s", r.err);
    cli_free(&r);
}

/* The reader's own limits, through its API. */
static void limits(void)
{
    json_t *j = NULL;
    struct mt_pickle_error e;
    /* EMPTY_LIST, BINPUT 0, BINGET 0, APPEND: a list inside itself */
    static const unsigned char cyc[] = {0x80, 2, ']', 'q', 0, 'h', 0, 'a', '.'};
    is_int(MEMTRACE_EFORMAT, mt_pickle_load(cyc, sizeof(cyc), &j, &e),
           "a list appended to itself is refused");
    /* a list inside a list that is then changed: [[x]] then x's list gets itself */
    static const unsigned char cyc2[] = {0x80, 2, ']', 'q', 0, ']', 'q', 1,
                                         'h',  0, 'a', 'h', 1, 'a', '.'};
    is_int(MEMTRACE_EFORMAT, mt_pickle_load(cyc2, sizeof(cyc2), &j, &e),
           "a cycle through two lists is refused");
    /* 100 lists, each appended to the one below: 100 deep */
    unsigned char deep[2 * 100 + 4];
    size_t k = 0;
    deep[k++] = 0x80;
    deep[k++] = 2;
    for (int d = 0; d < 100; d++)
        deep[k++] = ']';
    for (int d = 0; d < 99; d++)
        deep[k++] = 'a';
    deep[k++] = '.';
    int rc = mt_pickle_load(deep, k, &j, &e);
    ok(rc == MEMTRACE_EFORMAT && strstr(e.text, "deeper than 64"), "nesting past 64 is refused: %s",
       e.text);
    /* runs of fetches read once and shared: a shared list changed afterwards is a copy,
     * and a memo slot put again makes the same run read the new value */
    static const unsigned char runs[] = {0x80, 2,   ']', '(', 0x8c, 1,   'a',  'q', 0,   ']',
                                         '(',  'h', 0,   'h', 0,    'e', ']',  '(', 'h', 0,
                                         'h',  0,   'e', 'K', 5,    'a', 0x8c, 1,   'b', 'q',
                                         0,    ']', '(', 'h', 0,    'h', 0,    'e', 'e', '.'};
    rc = mt_pickle_load(runs, sizeof(runs), &j, &e);
    char *text = rc == 0 ? json_dumps(j, JSON_COMPACT) : NULL;
    ok(text && strcmp(text, "[\"a\",[\"a\",\"a\"],[\"a\",\"a\",5],\"b\",[\"b\",\"b\"]]") == 0,
       "runs of fetches: shared lists copied before a change, stale after a memo put: %s",
       text ? text : e.text);
    free(text);
    json_decref(j);
    static const unsigned char okp[] = {0x80, 2, '}', '(', 0x8c, 1, 'k', 'K', 7, 'u', '.'};
    rc = mt_pickle_load(okp, sizeof(okp), &j, &e);
    ok(rc == 0 && cli_int(j, "k") == 7, "a plain dict reads");
    json_decref(j);
}

int main(void)
{
    plan(68);
    cli_scratch();
    real_snapshot();
    before_trace();
    known();
    two_devices();
    wide_integers();
    hostile();
    broken();
    limits();
    return exit_status();
}
