/* info-t.c: `memtrace info` on files with known contents: counts per action, devices,
 * metadata, tables, final state, end record, and truncated files. */
#include "config.h"

#include <inttypes.h>
#include <sys/stat.h>

#include "cli-util.h"

#define WALL0 1700000000123456789ull
#define MONO0 5000000000ull

/* How many events of each action the file holds. */
static const int want_count[MEMTRACE_ACTION_COUNT] = {
    [MEMTRACE_ALLOC] = 7,         [MEMTRACE_FREE_REQUESTED] = 3, [MEMTRACE_FREE_COMPLETED] = 5,
    [MEMTRACE_SEGMENT_ALLOC] = 2, [MEMTRACE_SEGMENT_FREE] = 1,   [MEMTRACE_SEGMENT_MAP] = 4,
    [MEMTRACE_SEGMENT_UNMAP] = 2, [MEMTRACE_SNAPSHOT] = 1,       [MEMTRACE_OOM] = 1,
    [MEMTRACE_ANNOTATE] = 6,      [MEMTRACE_COUNTER] = 3,
};

static const char *const meta =
    "{\"format_version\": 1, \"host\": \"node7\", \"pid\": 4242, "
    "\"argv\": [\"python\", \"train.py\", \"--lr\", \"0.1\"], \"rank\": 3, "
    "\"start_time_ns\": 1700000000123456789, \"start_monotonic_ns\": 5000000000, "
    "\"devices\": [{\"index\": 0, \"name\": \"Fake GPU 0\", \"total_memory\": 85899345920, "
    "\"backend\": \"cuda\"}, {\"index\": 1, \"name\": \"host sim\", \"total_memory\": 1073741824, "
    "\"backend\": \"host\"}], \"allocator_settings\": {\"max_split_size_mb\": 64}, "
    "\"recorded_by\": \"test\", \"memtrace_version\": \"0.1.0\"}";

/* Writes the file; with cut_after > 0, the events go in two chunks and *first_chunk_end
 * is the file size after the first. Returns the number of events. */
static int write_info_file(const char *path, int end, uint64_t *first_chunk_end)
{
    static const char *const strs[] = {"alloc_fn", "/usr/lib/libtorch.so", "model.py"};
    struct mt_frame_rec frames[4] = {
        {0x1000, 0x100, 2, 1, 3, 12},
        {0x2000, 0x200, 2, 0, 0, 0},
        {0x3000, 0x300, 2, 1, 0, 0},
        {0x4000, 0x400, 0, 0, 0, 0},
    };
    uint32_t parent[5] = {0, 1, 2, 1, 0}, frame[5] = {1, 2, 3, 4, 4};
    struct memtrace_event ev[64];
    int n = 0;
    uint64_t t = MONO0 + 1000;
    for (int a = 0; a < MEMTRACE_ACTION_COUNT; a++)
        for (int k = 0; k < want_count[a]; k++) {
            memset(&ev[n], 0, sizeof(ev[n]));
            ev[n].action = (uint8_t)a;
            ev[n].time_ns = t;
            ev[n].addr = 0x10000 * (uint64_t)(k + 1);
            ev[n].size = 4096;
            ev[n].stack = (uint32_t)(k % 5) + 1;
            t += 250;
            n++;
        }
    struct memtrace_block blocks[2] = {{0x10000, 512, 512, 1, MEMTRACE_BLOCK_ACTIVE_ALLOCATED},
                                       {0x10200, 1536, 0, 0, MEMTRACE_BLOCK_INACTIVE}};
    struct memtrace_segment segs[2];
    memset(segs, 0, sizeof(segs));
    segs[0].addr = 0x10000;
    segs[0].total_size = 2048;
    segs[0].allocated_size = 512;
    segs[0].nblocks = 2;
    segs[0].blocks = blocks;
    segs[1].addr = 0x900000;
    segs[1].total_size = 2 << 20;
    segs[1].is_large = 1;

    struct mt_writer *w;
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_meta(w, meta), "mt_writer_meta");
    cli_check(mt_writer_strings(w, 1, 3, strs), "mt_writer_strings");
    cli_check(mt_writer_frames(w, 1, 4, frames), "mt_writer_frames");
    cli_check(mt_writer_stacks(w, 1, 5, parent, frame), "mt_writer_stacks");
    cli_check(mt_writer_events(w, ev, 20), "mt_writer_events");
    if (first_chunk_end)
        *first_chunk_end = mt_writer_bytes(w);
    cli_check(mt_writer_events(w, ev + 20, (size_t)n - 20), "mt_writer_events");
    cli_check(mt_writer_state(w, t, segs, 2), "mt_writer_state");
    if (end)
        cli_check(mt_writer_end(w, "{\"events\": 35, \"dropped\": 12, \"overflowed\": true}"),
                  "mt_writer_end");
    else
        mt_writer_abort(w);
    return n;
}

static void check_json(const char *path, int n)
{
    struct cli_out o = cli_run((const char *const[]){"info", path, "--json", NULL});
    is_int(0, o.status, "info --json exits 0");
    is_string("", o.err, "nothing on stderr");
    json_t *j = cli_json(&o);
    is_int(n, cli_int(j, "events"), "events");
    int same = 1;
    for (int a = 0; a < MEMTRACE_ACTION_COUNT; a++) {
        char key[64];
        snprintf(key, sizeof(key), "actions.%s", memtrace_action_name(a));
        if (cli_int(j, key) != want_count[a]) {
            diag("%s: want %d, got %lld", key, want_count[a], cli_int(j, key));
            same = 0;
        }
    }
    ok(same, "counts of every action");
    is_int(5, cli_int(j, "stacks"), "distinct stacks");
    is_int(4, cli_int(j, "frames"), "frames");
    is_int(2, cli_int(j, "segments"), "segments in the final state");
    is_int((long long)(MONO0 + 1000), cli_int(j, "first_time_ns"), "first event time");
    is_int((long long)(n - 1) * 250, cli_int(j, "duration_ns"), "time span");
    ok(json_is_true(cli_get(j, "complete")) && json_is_false(cli_get(j, "truncated")),
       "complete, not truncated");
    is_int(12, cli_int(j, "dropped"), "dropped from the end record");
    ok(json_is_true(cli_get(j, "overflowed")), "overflowed from the end record");
    struct stat st;
    stat(path, &st);
    is_int((long long)st.st_size, cli_int(j, "file_size"), "file size");
    ok(cli_int(j, "format_version") >= 1, "format version %lld", cli_int(j, "format_version"));
    is_string("2023-11-14T22:13:20.123Z", json_string_value(cli_get(j, "start_time")),
              "start time in ISO-8601 UTC");
    json_t *devs = cli_get(j, "devices");
    is_int(2, (long long)json_array_size(devs), "two devices");
    json_t *d1 = json_array_get(devs, 1);
    is_string("host sim", json_string_value(json_object_get(d1, "name")), "device 1 name");
    is_int(1073741824, json_integer_value(json_object_get(d1, "total_memory")), "device 1 memory");
    is_string("host", json_string_value(json_object_get(d1, "backend")), "device 1 backend");
    is_string("node7", json_string_value(cli_get(j, "meta.host")), "host");
    is_int(4242, cli_int(j, "meta.pid"), "pid");
    is_int(64, cli_int(j, "meta.allocator_settings.max_split_size_mb"), "allocator settings");
    json_decref(j);
    cli_free(&o);
}

static void expect_line(const char *out, const char *prefix, const char *want)
{
    char line[512];
    is_string(want, cli_line(out, prefix, line, sizeof(line)), "text: %s", want);
}

static void check_text(const char *path)
{
    struct cli_out o = cli_run((const char *const[]){"info", path, NULL});
    is_int(0, o.status, "info exits 0");
    expect_line(o.out, "status", "status           complete");
    expect_line(o.out, "format version", "format version   1 (written by memtrace 0.1.0)");
    ok(strstr(o.out, "\nmemtrace_version") == NULL,
       "text: the writer's version is not repeated as a row of its own");
    expect_line(o.out, "host", "host             node7");
    expect_line(o.out, "pid", "pid              4242");
    expect_line(o.out, "argv", "argv             python train.py --lr 0.1");
    expect_line(o.out, "rank", "rank             3");
    expect_line(o.out, "start time", "start time       2023-11-14T22:13:20.123Z");
    expect_line(o.out, "devices", "devices          2");
    expect_line(o.out, "  0 ", "  0              Fake GPU 0, 80.0 GiB (85899345920 bytes), cuda");
    expect_line(o.out, "allocator", "allocator        {\"max_split_size_mb\": 64}");
    expect_line(o.out, "recorded_by", "recorded_by      test");
    expect_line(o.out, "events", "events           35");
    expect_line(o.out, "  alloc ", "  alloc          7");
    expect_line(o.out, "  free_requested", "  free_requested 3");
    expect_line(o.out, "  free_completed", "  free_completed 5");
    expect_line(o.out, "  segment_map", "  segment_map    4");
    expect_line(o.out, "  annotate", "  annotate       6");
    expect_line(o.out, "stacks", "stacks           5 distinct, 4 frames");
    expect_line(o.out, "segments", "segments         2 in the final state");
    expect_line(o.out, "time span", "time span        8.5 us (5000001000 .. 5000009500 ns)");
    expect_line(o.out, "dropped", "dropped          12 events (the history ring overflowed)");
    cli_free(&o);
}

static void check_truncated(const char *path)
{
    char want[512];
    uint64_t first_end = 0;
    int n = write_info_file(path, 0, &first_end);
    struct cli_out o = cli_run((const char *const[]){"info", "--json", path, NULL});
    is_int(0, o.status, "no end record: exit 0");
    json_t *j = cli_json(&o);
    ok(json_is_true(cli_get(j, "truncated")) && json_is_false(cli_get(j, "complete")),
       "no end record: truncated");
    is_int(n, cli_int(j, "events"), "every event is read");
    is_int(2, cli_int(j, "segments"), "the state before the cut is read");
    struct stat st;
    stat(path, &st);
    snprintf(want, sizeof(want),
             "memtrace: warning: %s is truncated (no end record): showing the %d events before "
             "byte %lld\n",
             path, n, (long long)st.st_size);
    is_string(want, o.err, "the warning names the events and the byte");
    json_decref(j);
    cli_free(&o);

    /* Cut inside the second chunk of events: the first 20 are shown. */
    write_info_file(path, 1, &first_end);
    if (truncate(path, (off_t)first_end + 10) != 0)
        bail_out("truncate failed");
    o = cli_run((const char *const[]){"info", path, NULL});
    is_int(0, o.status, "cut in a chunk: exit 0");
    snprintf(want, sizeof(want),
             "memtrace: warning: %s is truncated (no end record): showing the 20 events before "
             "byte %llu\n",
             path, (unsigned long long)first_end);
    is_string(want, o.err, "cut in a chunk: the warning");
    char line[512];
    is_string("status           truncated (no end record)", cli_line(o.out, "status", line, 512),
              "text status: truncated");
    is_string("events           20", cli_line(o.out, "events", line, 512), "text: 20 events");
    cli_free(&o);
}

/* JSON numbers no uint64_t can hold (1e300, 2^64) are out of range, not cast: the
 * start time is unknown and the end record's count taken as absent. */
static void check_huge_numbers(void)
{
    const char *path = cli_path("huge.memtrace");
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_meta(w, "{\"start_time_ns\": 1e300, \"start_monotonic_ns\": 5, "
                                "\"devices\": [{\"name\": \"d\", \"total_memory\": "
                                "18446744073709551616.0}]}"),
              "mt_writer_meta");
    cli_check(mt_writer_end(w, "{\"dropped\": 1e300}"), "mt_writer_end");
    struct cli_out o = cli_run((const char *const[]){"info", path, "--json", NULL});
    is_int(0, o.status, "huge numbers: info --json exits 0");
    json_t *j = cli_json(&o);
    ok(json_is_null(cli_get(j, "start_time")), "a start time of 1e300 ns is unknown");
    is_int(0, cli_int(j, "dropped"), "a dropped count of 1e300 reads as none");
    json_decref(j);
    cli_free(&o);
    o = cli_run((const char *const[]){"info", path, NULL});
    is_int(0, o.status, "and the text form exits 0");
    cli_free(&o);
}

int main(void)
{
    cli_scratch();
    const char *path = cli_path("info.memtrace");
    int n = write_info_file(path, 1, NULL);
    check_json(path, n);
    check_text(path);
    check_truncated(cli_path("cut.memtrace"));
    check_huge_numbers();
    done_testing();
    return exit_status();
}
