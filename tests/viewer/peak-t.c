/* peak-t.c: `memtrace peak` on a recording with known contents (rank-util.h): what
 * was alive at the peak and at chosen points, under each filter, against a reference
 * replay computed here. */
#include "config.h"

#include "rank-util.h"

static const char *path;

/* Runs `peak --json ARGS` and compares it with the reference: at the peak, or with
 * at_event set, alive after that event. */
static void check(const char *const *args, struct rk_filter f, int64_t at_event, const char *what)
{
    const char *argv[32] = {"peak", "--json", "--top", "0", path};
    int n = 5;
    for (int k = 0; args[k]; k++)
        argv[n++] = args[k];
    argv[n] = NULL;
    struct rk_ref r = rk_reference(f);
    struct cli_out o = cli_run(argv);
    is_int(0, o.status, "%s: exit 0", what);
    json_t *j = cli_json(&o);
    const struct rk_fig *figs = at_event >= 0 ? r.live : r.at_peak;
    uint64_t bytes = at_event >= 0 ? r.end_bytes : r.peak;
    uint64_t event = at_event >= 0 ? (uint64_t)at_event : r.peak_event;
    is_int((long long)bytes, cli_int(j, "bytes"), "%s: %llu bytes", what,
           (unsigned long long)bytes);
    is_int((long long)event, cli_int(j, "event"), "%s: at event %llu", what,
           (unsigned long long)event);
    is_int((long long)(event * 1000), cli_int(j, "offset_ns"), "%s: offset", what);
    is_int((long long)(RK_T0 + event * 1000), cli_int(j, "time_ns"), "%s: time", what);
    uint64_t count = 0;
    int nst = 0;
    for (int s = 0; s <= RK_NST; s++) {
        count += figs[s].count;
        nst += figs[s].count > 0;
    }
    is_int((long long)count, cli_int(j, "count"), "%s: %llu allocations", what,
           (unsigned long long)count);
    is_int(nst, cli_int(j, "distinct_stacks"), "%s: %d stacks", what, nst);
    ok(rk_stacks_match(cli_get(j, "stacks"), figs, what), "%s: stacks, bytes and counts", what);
    json_decref(j);
    cli_free(&o);
}

static void check_peak_json(void)
{
    /* By hand: the peak is event 17 (7000 bytes on stack 6 with 300 + 4096 + 100 live). */
    struct rk_ref r = rk_reference(rk_all());
    is_int(11496, (long long)r.peak, "reference: peak 11496 bytes");
    is_int(17, (long long)r.peak_event, "reference: at event 17");

    struct cli_out o = cli_run((const char *const[]){"peak", path, "--json", NULL});
    is_int(0, o.status, "peak --json exits 0");
    is_string("", o.err, "nothing on stderr");
    json_t *j = cli_json(&o);
    is_string("allocated", json_string_value(cli_get(j, "of")), "of allocated memory");
    is_string("peak", json_string_value(cli_get(j, "at")), "at the peak");
    ok(json_is_false(cli_get(j, "truncated")), "not truncated");
    json_t *s0 = json_array_get(cli_get(j, "stacks"), 0);
    is_int(6, json_integer_value(json_object_get(s0, "stack")), "largest: stack 6");
    ok(json_real_value(json_object_get(s0, "share")) == 7000.0 / 11496.0, "its share 7000/11496");
    is_int(4, json_integer_value(json_object_get(s0, "depth")), "depth 4");
    const char *names[8];
    int d = rk_frames_of(6, names);
    json_t *fr = json_object_get(s0, "frames");
    int same = (int)json_array_size(fr) == d;
    for (int k = 0; same && k < d; k++)
        same = strcmp(json_string_value(json_object_get(json_array_get(fr, (size_t)k), "symbol")),
                      names[k]) == 0;
    ok(same, "frames innermost first: alloc_tensor, backward, train_step, main");
    json_decref(j);
    cli_free(&o);

    o = cli_run((const char *const[]){"peak", path, "--json", "--top", "2", "--depth", "1", NULL});
    j = cli_json(&o);
    is_int(2, (long long)json_array_size(cli_get(j, "stacks")), "--top 2 shows 2 stacks");
    is_int(4, cli_int(j, "distinct_stacks"), "of 4");
    s0 = json_array_get(cli_get(j, "stacks"), 1);
    is_int(10, json_integer_value(json_object_get(s0, "stack")), "second: stack 10");
    is_int(1, (long long)json_array_size(json_object_get(s0, "frames")), "--depth 1: one frame");
    is_string("<script>x;y\nz&\"'</script>",
              json_string_value(
                  json_object_get(json_array_get(json_object_get(s0, "frames"), 0), "symbol")),
              "the frame's name as written");
    json_decref(j);
    cli_free(&o);
}

static void check_filters(void)
{
    struct rk_filter f;
    check((const char *const[]){NULL}, rk_all(), -1, "peak");

    f = rk_all();
    f.to = 6;
    check((const char *const[]){"--at", "#6", NULL}, f, 6, "--at #6");
    f.to = 8;
    check((const char *const[]){"--at", "step1", NULL}, f, 8, "--at step1 (its end)");
    f.to = 12;
    check((const char *const[]){"--at", "12.5us", NULL}, f, 12, "--at 12.5us");
    f.to = 16;
    check((const char *const[]){"--at", "ckpt", NULL}, f, 16, "--at ckpt (a marker)");

    f = rk_all();
    f.segments = 1;
    check((const char *const[]){"--reserved", NULL}, f, -1, "--reserved");
    struct rk_ref r = rk_reference(f);
    is_int(6 << 20, (long long)r.peak, "reference: 6 MiB reserved at the peak");

    f = rk_all();
    f.device = 1;
    check((const char *const[]){"--device", "1", NULL}, f, -1, "--device 1");
    r = rk_reference(f);
    is_int(5400, (long long)r.peak, "reference: device 1 peaks at 5400");
    f = rk_all();
    f.min_size = 1000;
    check((const char *const[]){"--min-size", "1000", NULL}, f, -1, "--min-size 1000");
    f = rk_all();
    f.category = S_WT;
    check((const char *const[]){"--category", "weights", NULL}, f, -1, "--category weights");
    r = rk_reference(f);
    is_int(4396, (long long)r.peak, "reference: weights peak at 4396");
    f = rk_all();
    f.to = 8;
    check((const char *const[]){"--to", "step1", NULL}, f, -1, "--to step1");
    f = rk_all();
    f.from = 18;
    check((const char *const[]){"--from", "#18", NULL}, f, -1, "--from #18");
    r = rk_reference(f);
    is_int(4802, (long long)r.peak, "reference: from event 18 the peak is 4802");
    is_int(24, (long long)r.peak_event, "reference: at event 24");
    f = rk_all();
    f.from = 10;
    f.to = 16;
    check((const char *const[]){"--from", "10us", "--to", "#16", NULL}, f, -1,
          "--from 10us --to #16");
    f = rk_all();
    f.from = 9;
    f.to = 12;
    check((const char *const[]){"--from", "step2", "--at", "12us", NULL}, f, 12,
          "--from step2 --at 12us");
}

static void check_text(void)
{
    struct cli_out o = cli_run((const char *const[]){"peak", path, "--bytes", NULL});
    is_int(0, o.status, "text: exit 0");
    char line[512];
    cli_line(o.out, "peak of allocated", line, sizeof(line));
    is_string("peak of allocated: 11496 B (11496 bytes) in 4 blocks at event 17 (+17.0 us)", line,
              "text: the peak line");
    cli_line(o.out, " 1. ", line, sizeof(line));
    is_string(" 1. 7000 B (7000 bytes, 60.9%) in 1 allocation, stack 6", line,
              "text: the largest stack");
    ok(strstr(o.out, "      #0  alloc_tensor\n      #1  backward\n") != NULL,
       "text: its frames innermost first");
    cli_line(o.out, " 4. ", line, sizeof(line));
    is_string(" 4. 100 B (100 bytes, 0.9%) in 1 allocation, stack 0", line,
              "text: an allocation without a stack");
    ok(strstr(o.out, "      (no stack)\n") != NULL, "text: shown as (no stack)");
    cli_free(&o);

    o = cli_run((const char *const[]){"peak", path, "--at", "#0", NULL});
    cli_line(o.out, "alive at", line, sizeof(line));
    is_string("alive at the point, allocated: 0 B (0 bytes) in 0 blocks at event 0 (+0 ns)", line,
              "text: nothing alive at event 0");
    cli_free(&o);

    const char *cut = cli_path("cut.memtrace");
    rk_write(cut, 0);
    o = cli_run((const char *const[]){"peak", cut, NULL});
    is_int(0, o.status, "truncated: exit 0");
    ok(strstr(o.out, "is truncated") != NULL, "truncated: said on stdout");
    ok(strstr(o.err, "memtrace: warning: ") != NULL, "and warned on stderr");
    cli_free(&o);
}

static void check_errors(void)
{
    struct cli_out o = cli_run((const char *const[]){"peak", NULL});
    is_int(2, o.status, "no file: exit 2");
    cli_free(&o);
    o = cli_run((const char *const[]){"peak", path, "--at", "#3", "--to", "#4", NULL});
    is_int(2, o.status, "--at with --to: exit 2");
    is_int(1, cli_lines(o.err), "one line");
    cli_free(&o);
    o = cli_run((const char *const[]){"peak", path, "--at", "12xs", NULL});
    is_int(2, o.status, "a bad point: exit 2");
    cli_free(&o);
    o = cli_run((const char *const[]){"peak", path, "--at", "nosuch", NULL});
    is_int(1, o.status, "an annotation that is not there: exit 1");
    ok(strncmp(o.err, "memtrace: ", 10) == 0 && strstr(o.err, "no annotation named 'nosuch'") &&
           cli_lines(o.err) == 1,
       "one line names it: %s", o.err);
    cli_free(&o);
    o = cli_run((const char *const[]){"peak", cli_path("missing.memtrace"), NULL});
    is_int(1, o.status, "a missing file: exit 1");
    cli_free(&o);
    o = cli_run((const char *const[]){"peak", "--help", NULL});
    is_int(0, o.status, "--help: exit 0");
    ok(strstr(o.out, "--reserved") && strstr(o.out, "--at WHEN") && strstr(o.out, "--min-size"),
       "--help lists the flags");
    cli_free(&o);
}

int main(void)
{
    cli_scratch();
    static char rank_path[512];
    /* A copy: cli_path() reuses its buffers. */
    snprintf(rank_path, sizeof(rank_path), "%s", cli_path("rank.memtrace"));
    path = rank_path;
    rk_write(path, 1);
    check_peak_json();
    check_filters();
    check_text();
    check_errors();
    done_testing();
    return exit_status();
}
