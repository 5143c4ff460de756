/* peak.c: `memtrace peak FILE`: what was alive at the peak, grouped by stack.
 *
 * Without --at it is one pass: the model's tallies keep each stack's figures as they
 * were at the latest peak (mt_tally_at_peak). With --at the replay stops at that point
 * (the filter's end of window) and the tallies hold what is alive there. */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "cli.h"
#include "cli_rank.h"

static int json, reserved;
static long long ntop = 10, depth = 16;
static struct mt_point at;
static struct cli_filter_opts fo;

static const struct cli_opt peak_opts[] = {
    CLI_OPTION_POINT(0, "at", &at, "WHEN",
                     "what was alive at WHEN instead of at the peak: a time after the first "
                     "event (1.5s), an event index (#123) or an annotation's name (its end)"),
    CLI_OPTION_BOOL('r', "reserved", &reserved,
                    "segments (reserved memory) instead of blocks (allocated memory)"),
    CLI_OPTION_INT('n', "top", &ntop, "N", 0, 1000000000,
                   "show the N largest stacks (default 10, 0: all)"),
    CLI_OPTION_INT('d', "depth", &depth, "N", 0, 4096,
                   "show at most N frames of each stack (default 16, 0: all)"),
    CLI_FRAMES_OPTION,
    CLI_OPTION_BOOL('j', "json", &json, "print one JSON object (bytes and ns) instead of text"),
    CLI_OPTION_BOOL(0, "bytes", &cli_exact_bytes, "print sizes in bytes instead of KiB, MiB, GiB"),
    CLI_FILTER_OPTIONS(&fo),
    CLI_OPTION_END,
};

static const struct cli_help peak_help = {
    "peak",
    "memtrace peak FILE... [--at WHEN] [--reserved] [--top N] [--depth N] [--all-frames] [--json] "
    "[--bytes]\n"
    "       [--device N] [--stream S] [--min-size SIZE] [--category NAME] [--from WHEN]\n"
    "       [--to WHEN]",
    "Shows what was alive at the peak of allocated memory (of reserved memory with\n"
    "--reserved), grouped by the stack that allocated it: the largest stacks with their\n"
    "bytes, number of allocations and share of the total, frames innermost first.\n"
    "With --at, what was alive at that point instead (after the event it names, the\n"
    "last event at or before the time, or the end of the annotation). The filters choose\n"
    "which allocations count; --from and --to bound the window in which the peak is\n"
    "taken, but what is alive at the peak includes allocations made before --from.\n"
    "With several files (one per rank or process), each file's report in turn, then one\n"
    "line per file with the rank of its metadata and its peak, and the totals.",
    peak_opts,
    0,
};

struct point {
    int found;       /* an event was replayed */
    uint64_t index;  /* the last event replayed */
    uint64_t time;   /* its time */
    uint64_t offset; /* after the first event */
};

static json_t *peak_json(const char *path, const struct mt_replay *rp, const struct mt_level *l,
                         const struct point *p, const struct cli_rank *rk,
                         const struct cli_rank_view *v)
{
    json_t *j = json_object();
    json_object_set_new(j, "file", cli_json_str(path));
    json_object_set_new(j, "truncated", json_boolean(mt_replay_truncated(rp)));
    json_object_set_new(j, "of", json_string(reserved ? "reserved" : "allocated"));
    json_object_set_new(j, "at", json_string(at.kind == MT_POINT_NONE ? "peak" : "point"));
    json_object_set_new(j, "event", p->found ? cli_json_u64(p->index) : json_null());
    json_object_set_new(j, "time_ns", p->found ? cli_json_u64(p->time) : json_null());
    json_object_set_new(j, "offset_ns", p->found ? cli_json_u64(p->offset) : json_null());
    json_object_set_new(j, "bytes", cli_json_u64(at.kind == MT_POINT_NONE ? l->peak : l->cur));
    json_object_set_new(j, "count", cli_json_u64(rk->count));
    json_object_set_new(j, "distinct_stacks", cli_json_u64(rk->n));
    json_object_set_new(j, "stacks", cli_rank_json(rk, v));
    return j;
}

static void print_text(const char *path, const struct mt_replay *rp, const struct mt_level *l,
                       const struct point *p, const struct cli_rank *rk,
                       const struct cli_rank_view *v)
{
    char a[64], b[64], c[64];
    const char *what = reserved ? "reserved" : "allocated";
    const char *units = reserved ? "segments" : "blocks";
    if (mt_replay_truncated(rp))
        printf("file %s is truncated: figures are those of the events before the cut\n", path);
    if (!p->found) {
        printf("Nothing was %s%s.\n", what, at.kind == MT_POINT_NONE ? "" : " at that point");
        return;
    }
    uint64_t bytes = at.kind == MT_POINT_NONE ? l->peak : l->cur;
    printf("%s %s: %s (%" PRIu64 " bytes) in %s %s at event %" PRIu64 " (+%s)\n",
           at.kind == MT_POINT_NONE ? "peak of" : "alive at the point,", what,
           cli_fmt_bytes(a, sizeof(a), bytes), bytes, cli_fmt_count(b, sizeof(b), rk->count), units,
           p->index, cli_fmt_duration(c, sizeof(c), p->offset));
    if (rk->n == 0)
        return;
    printf("\nTop %zu of %zu stacks:\n", cli_rank_shown(rk, v->ntop), rk->n);
    cli_rank_print(stdout, rk, v);
}

static struct mt_filter filter;

/* One file: its own output, and the figure of the table of several. */
static int peak_file(const char *path, struct cli_file_part *part)
{
    int rc;
    struct mt_replay *rp = cli_replay_open_cli(path, &filter);
    if (!rp)
        return CLI_EXIT_FAIL;
    struct point p = {0};
    int status;
    if (at.kind == MT_POINT_NONE) {
        status = cli_replay_run_cli(rp, "peak");
    } else {
        while ((rc = mt_replay_next(rp)) == 1) {
            p.found = 1;
            p.index = rp->index;
            p.time = rp->ev->time_ns;
        }
        status = cli_replay_done_cli(rp, rc);
        if (status == CLI_EXIT_OK && at.kind == MT_POINT_ANNOTATION && !rp->window_done) {
            cli_error("%s: no annotation named '%s' ends in the file", path, at.name);
            status = CLI_EXIT_FAIL;
        }
    }
    const struct mt_level *l = reserved ? &rp->reserved : &rp->allocated;
    const struct mt_tallies *ts = reserved ? &rp->seg_stacks : &rp->block_stacks;
    if (at.kind == MT_POINT_NONE && l->peak > 0) {
        p.found = 1;
        p.index = l->peak_index;
        p.time = l->peak_time;
    }
    p.offset = p.found ? p.time - rp->t_first : 0;

    struct cli_rank rk = {0};
    if (status == CLI_EXIT_OK && cli_rank_init(&rk, rp) != 0) {
        cli_error("out of memory while grouping the stacks of %s", path);
        status = CLI_EXIT_FAIL;
    }
    if (status == CLI_EXIT_OK) {
        if (at.kind == MT_POINT_NONE)
            cli_rank_at_peak(&rk, ts, l);
        else
            cli_rank_live(&rk, ts);
        cli_rank_finish(&rk, CLI_RANK_BYTES);
        struct cli_rank_view v = {rp->r, (size_t)ntop, depth == 0 ? -1 : (int)depth, CLI_RANK_BYTES,
                                  0};
        part->bytes = at.kind == MT_POINT_NONE ? l->peak : l->cur;
        part->count = rk.count;
        cli_file_part_fill(part, rp);
        if (json)
            part->json = peak_json(path, rp, l, &p, &rk, &v);
        else
            print_text(path, rp, l, &p, &rk, &v);
    }
    cli_rank_free(&rk);
    mt_replay_close(rp);
    return status;
}

int cli_cmd_peak(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    int rc = cli_options_parse(argc, argv, &peak_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (npos == 0)
        return cli_usage_error("peak", "'peak' needs a FILE argument");
    if (cli_filter_from_opts("peak", &fo, 1, &filter) != 0)
        return CLI_EXIT_USAGE;
    if (at.kind != MT_POINT_NONE) {
        if (filter.to.kind != MT_POINT_NONE)
            return cli_usage_error("peak", "--at and --to both end the replay: give one");
        filter.to = at;
    }
    if (npos > 1)
        return cli_run_files(pos, npos, json, reserved ? "reserved" : "allocated", peak_file);
    struct cli_file_part part = {.path = pos[0]};
    int status = peak_file(pos[0], &part);
    if (status == CLI_EXIT_OK && json)
        status = cli_json_print(json_incref(part.json));
    json_decref(part.json);
    json_decref(part.rank);
    return status;
}
