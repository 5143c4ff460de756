/* top-t.c: `memtrace top` on a recording with known contents (rank-util.h): stacks
 * ranked by bytes, by count and by temporaries, against a reference replay computed
 * here. */
#include "config.h"

#include "rank-util.h"

static const char *path;

/* The stacks in the order `top --by` gives: by = 0 bytes, 1 count, 2 temporary. */
static int order_by(const struct rk_ref *r, int by, uint32_t *out)
{
    if (by < 2)
        return rk_order(r->alloc, out, by);
    return rk_order(r->temp, out, 0);
}

static void check_by(const char *by_name, int by, struct rk_filter f, const char *const *args)
{
    const char *argv[32] = {"top", "--json", "--top", "0", "--by", by_name, path};
    int n = 7;
    for (int k = 0; args[k]; k++)
        argv[n++] = args[k];
    argv[n] = NULL;
    struct rk_ref r = rk_reference(f);
    uint32_t order[RK_NST + 1];
    int nst = order_by(&r, by, order);
    uint64_t bytes = 0, count = 0, tb = 0, tc = 0;
    for (int s = 0; s <= RK_NST; s++) {
        bytes += r.alloc[s].bytes;
        count += r.alloc[s].count;
        tb += r.temp[s].bytes;
        tc += r.temp[s].count;
    }
    struct cli_out o = cli_run(argv);
    is_int(0, o.status, "--by %s: exit 0", by_name);
    json_t *j = cli_json(&o);
    is_string(by_name, json_string_value(cli_get(j, "by")), "--by %s: said", by_name);
    is_int((long long)bytes, cli_int(j, "bytes"), "--by %s: %llu bytes in all", by_name,
           (unsigned long long)bytes);
    is_int((long long)count, cli_int(j, "count"), "--by %s: %llu allocations", by_name,
           (unsigned long long)count);
    is_int((long long)tc, cli_int(j, "temporary_count"), "--by %s: %llu temporary", by_name,
           (unsigned long long)tc);
    is_int((long long)tb, cli_int(j, "temporary_bytes"), "--by %s: of %llu bytes", by_name,
           (unsigned long long)tb);
    json_t *arr = cli_get(j, "stacks");
    int same = json_array_size(arr) == (size_t)nst;
    for (int k = 0; same && k < nst; k++) {
        json_t *s = json_array_get(arr, (size_t)k);
        uint32_t st = order[k];
        uint64_t total = by == 0 ? bytes : by == 1 ? count : tc;
        uint64_t part = by == 0   ? r.alloc[st].bytes
                        : by == 1 ? r.alloc[st].count
                                  : r.temp[st].count;
        same = json_integer_value(json_object_get(s, "stack")) == st &&
               (uint64_t)json_integer_value(json_object_get(s, "bytes")) == r.alloc[st].bytes &&
               (uint64_t)json_integer_value(json_object_get(s, "count")) == r.alloc[st].count &&
               (uint64_t)json_integer_value(json_object_get(s, "temporary_count")) ==
                   r.temp[st].count &&
               (uint64_t)json_integer_value(json_object_get(s, "temporary_bytes")) ==
                   r.temp[st].bytes &&
               json_real_value(json_object_get(s, "share")) == (double)part / (double)total;
        if (!same)
            diag("row %d: want stack %u", k, st);
    }
    ok(same, "--by %s: %d stacks in order with all their figures", by_name, nst);
    json_decref(j);
    cli_free(&o);
}

static void check_rankings(void)
{
    struct rk_filter f = rk_all();
    struct rk_ref r = rk_reference(f);
    /* By hand: stack 6 allocated 2000 + 7000, stack 4 1000 + 5000 + 256; the
     * temporaries are events 4-5 (stack 9), 11-12 (stack 3) and 17-18 (stack 6). */
    is_int(9000, (long long)r.alloc[6].bytes, "reference: stack 6 allocated 9000");
    is_int(3, (long long)r.alloc[4].count, "reference: stack 4 allocated 3 times");
    is_int(3, (long long)(r.temp[9].count + r.temp[3].count + r.temp[6].count),
           "reference: three temporaries");
    is_int(7000, (long long)r.temp[6].bytes, "reference: the largest of 7000");
    check_by("bytes", 0, f, (const char *const[]){NULL});
    check_by("count", 1, f, (const char *const[]){NULL});
    check_by("temporary", 2, f, (const char *const[]){NULL});
    f.from = 9;
    f.to = 19;
    check_by("temporary", 2, f, (const char *const[]){"--from", "step2", "--to", "step2", NULL});
    check_by("count", 1, f, (const char *const[]){"--from", "step2", "--to", "step2", NULL});
    f = rk_all();
    f.device = 0;
    check_by("temporary", 2, f, (const char *const[]){"--device", "0", NULL});
}

static void check_text(void)
{
    struct cli_out o = cli_run((const char *const[]){"top", path, "--bytes", NULL});
    is_int(0, o.status, "text: exit 0");
    char line[512];
    cli_line(o.out, "allocated ", line, sizeof(line));
    is_string("allocated 19994 B (19994 bytes) in 11 allocations, 3 temporary (7192 B)", line,
              "text: the totals");
    cli_line(o.out, " 1. ", line, sizeof(line));
    is_string(" 1. 9000 B (9000 bytes, 45.0%) in 2 allocations, 1 temporary, stack 6", line,
              "text: the first by bytes");
    cli_free(&o);
    o = cli_run((const char *const[]){"top", path, "--bytes", "--by", "count", NULL});
    cli_line(o.out, " 1. ", line, sizeof(line));
    is_string(" 1. 3 allocations (27.3%), 6256 B (6256 bytes), 0 temporary, stack 4", line,
              "text: the first by count");
    cli_free(&o);
    o = cli_run((const char *const[]){"top", path, "--bytes", "--by", "temporary", NULL});
    cli_line(o.out, " 3. ", line, sizeof(line));
    is_string(" 3. 1 temporary (33.3%) of 1 allocation, 64 B (64 bytes) in temporaries, stack 9",
              line, "text: the third by temporaries");
    ok(strstr(o.out, "Top 3 of 3 stacks by temporary allocations:") != NULL,
       "text: only stacks with temporaries");
    cli_free(&o);
}

static void check_errors(void)
{
    struct cli_out o = cli_run((const char *const[]){"top", path, "--by", "size", NULL});
    is_int(2, o.status, "--by size: exit 2");
    ok(strstr(o.err, "expected bytes, count or temporary") && cli_lines(o.err) == 1, "one line: %s",
       o.err);
    cli_free(&o);
    o = cli_run((const char *const[]){"top", NULL});
    is_int(2, o.status, "no file: exit 2");
    cli_free(&o);
    o = cli_run((const char *const[]){"top", "--help", NULL});
    is_int(0, o.status, "--help: exit 0");
    ok(strstr(o.out, "--by WHAT") != NULL, "--help lists --by");
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
    check_rankings();
    check_text();
    check_errors();
    done_testing();
    return exit_status();
}
