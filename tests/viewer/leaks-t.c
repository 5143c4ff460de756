/* leaks-t.c: `memtrace leaks` on a recording with known contents (rank-util.h): what
 * is alive at the end of the file or of a window, under each filter, against a
 * reference replay computed here; and what a truncated file says. */
#include "config.h"

#include "rank-util.h"

static const char *path;

/* Runs `leaks --json ARGS` and compares it with the reference of filter f, whose
 * window ends after event end. */
static void check(const char *const *args, struct rk_filter f, uint64_t end, uint64_t want_bytes,
                  const char *what)
{
    const char *argv[32] = {"leaks", "--json", "--top", "0", path};
    int n = 5;
    for (int k = 0; args[k]; k++)
        argv[n++] = args[k];
    argv[n] = NULL;
    struct rk_ref r = rk_reference(f);
    uint64_t bytes = 0, count = 0;
    int nst = 0;
    for (int s = 0; s <= RK_NST; s++) {
        bytes += r.since[s].bytes;
        count += r.since[s].count;
        nst += r.since[s].count > 0;
    }
    is_int((long long)want_bytes, (long long)bytes, "%s: reference %llu bytes", what,
           (unsigned long long)want_bytes);
    struct cli_out o = cli_run(argv);
    is_int(0, o.status, "%s: exit 0", what);
    json_t *j = cli_json(&o);
    is_int((long long)bytes, cli_int(j, "bytes"), "%s: bytes", what);
    is_int((long long)count, cli_int(j, "count"), "%s: %llu blocks", what,
           (unsigned long long)count);
    is_int(nst, cli_int(j, "distinct_stacks"), "%s: %d stacks", what, nst);
    is_int((long long)end, cli_int(j, "end_event"), "%s: ends after event %llu", what,
           (unsigned long long)end);
    is_int((long long)(RK_T0 + end * 1000), cli_int(j, "end_time_ns"), "%s: end time", what);
    ok(rk_stacks_match(cli_get(j, "stacks"), r.since, what), "%s: stacks, bytes and counts", what);
    json_decref(j);
    cli_free(&o);
}

static void check_filters(void)
{
    struct rk_filter f = rk_all();
    /* By hand: 0x3000 (300), 0x6000 (4096), 0x8000 (100), 0xa000 (256), 0xb000 (50). */
    check((const char *const[]){NULL}, f, RK_NEV - 1, 4802, "leaks");
    f.to = 19;
    check((const char *const[]){"--to", "step2", NULL}, f, 19, 4496, "--to step2 (its end)");
    f.to = 14;
    check((const char *const[]){"--to", "14.9us", NULL}, f, 14, 9496, "--to 14.9us");
    f = rk_all();
    f.from = 9;
    check((const char *const[]){"--from", "step2", NULL}, f, RK_NEV - 1, 4502,
          "--from step2 (its start)");
    f.from = 17;
    check((const char *const[]){"--from", "17us", NULL}, f, RK_NEV - 1, 306, "--from 17us");
    f = rk_all();
    f.category = S_WT;
    check((const char *const[]){"--category", "weights", NULL}, f, RK_NEV - 1, 4396,
          "--category weights");
    f = rk_all();
    f.device = 0;
    check((const char *const[]){"--device", "0", NULL}, f, RK_NEV - 1, 4352, "--device 0");
    f = rk_all();
    f.min_size = 200;
    check((const char *const[]){"--min-size", "200", NULL}, f, RK_NEV - 1, 4652, "--min-size 200");
    /* Stream 7 only: what was alive after event 6 (2000 on stack 6, 5000 on stack 4). */
    struct cli_out o = cli_run(
        (const char *const[]){"leaks", path, "--json", "--stream", "7", "--to", "#6", NULL});
    json_t *j = cli_json(&o);
    is_int(7000, cli_int(j, "bytes"), "--stream 7 --to #6: 7000 bytes");
    is_int(4, json_integer_value(json_object_get(json_array_get(cli_get(j, "stacks"), 0), "stack")),
           "the larger on stack 4");
    json_decref(j);
    cli_free(&o);
}

static void check_text(void)
{
    struct cli_out o = cli_run((const char *const[]){"leaks", path, "--bytes", NULL});
    is_int(0, o.status, "text: exit 0");
    char line[512];
    cli_line(o.out, "alive at", line, sizeof(line));
    is_string("alive at the end of the file (event 24): 4802 B (4802 bytes) in 5 blocks from 4 "
              "stacks",
              line, "text: the headline");
    cli_line(o.out, " 1. ", line, sizeof(line));
    is_string(" 1. 4096 B (4096 bytes, 85.3%) in 1 allocation, stack 10", line,
              "text: the largest stack");
    cli_line(o.out, " 2. ", line, sizeof(line));
    is_string(" 2. 350 B (350 bytes, 7.3%) in 2 allocations, stack 8", line,
              "text: two blocks of one stack");
    ok(strstr(o.out, "      #0  /usr/lib/libtorch.so+0x1234\n      #1  optimizer_step\n") != NULL,
       "text: a frame without a symbol as module+offset");
    cli_free(&o);

    o = cli_run((const char *const[]){"leaks", path, "--to", "step2", NULL});
    cli_line(o.out, "alive at", line, sizeof(line));
    ok(strncmp(line, "alive at the end of the window (event 19): ", 43) == 0, "text: %s", line);
    cli_free(&o);

    const char *cut = cli_path("cut.memtrace");
    rk_write(cut, 0);
    o = cli_run((const char *const[]){"leaks", cut, NULL});
    is_int(0, o.status, "truncated: exit 0");
    cli_line(o.out, cut, line, sizeof(line));
    ok(strstr(line, "is truncated: these blocks were alive where the recording was cut (event "
                    "24), not necessarily leaked") != NULL,
       "truncated: said first: %s", line);
    cli_line(o.out, "alive at", line, sizeof(line));
    ok(strncmp(line, "alive at the cut (event 24): ", 29) == 0, "truncated: %s", line);
    ok(strstr(o.err, "memtrace: warning: ") != NULL && cli_lines(o.err) == 1,
       "one warning on stderr");
    cli_free(&o);
    o = cli_run((const char *const[]){"leaks", cut, "--json", NULL});
    json_t *j = cli_json(&o);
    ok(json_is_true(cli_get(j, "truncated")), "truncated: true in JSON");
    is_int(4802, cli_int(j, "bytes"), "with what was alive at the cut");
    json_decref(j);
    cli_free(&o);
}

static void check_errors(void)
{
    struct cli_out o = cli_run((const char *const[]){"leaks", NULL});
    is_int(2, o.status, "no file: exit 2");
    cli_free(&o);
    o = cli_run((const char *const[]){"leaks", path, "--device", "x", NULL});
    is_int(2, o.status, "a bad device: exit 2");
    is_int(1, cli_lines(o.err), "one line");
    cli_free(&o);
    o = cli_run((const char *const[]){"leaks", cli_path("missing.memtrace"), NULL});
    is_int(1, o.status, "a missing file: exit 1");
    cli_free(&o);
    o = cli_run((const char *const[]){"leaks", "--help", NULL});
    is_int(0, o.status, "--help: exit 0");
    ok(strstr(o.out, "truncated") && strstr(o.out, "--from WHEN"), "--help tells of both");
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
    check_filters();
    check_text();
    check_errors();
    done_testing();
    return exit_status();
}
