/* leaks.c: `memtrace leaks FILE`: what is still alive at the end, grouped by stack.
 *
 * One pass to the end of the file (or of the --to window), then a walk of the model's
 * live blocks: a block counts when the filter counts it and it was made inside the
 * window, so --from asks what a phase allocated and never freed. */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "cli.h"
#include "cli_rank.h"

static int json;
static long long ntop = 10, depth = 16;
static struct cli_filter_opts fo;

static const struct cli_opt leaks_opts[] = {
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

static const struct cli_help leaks_help = {
    "leaks",
    "memtrace leaks FILE... [--top N] [--depth N] [--all-frames] [--json] [--bytes] [--device N] "
    "[--stream S]\n"
    "       [--min-size SIZE] [--category NAME] [--from WHEN] [--to WHEN]",
    "Shows the blocks still allocated at the end of FILE (at the end of the --to window),\n"
    "grouped by the stack that allocated them, largest first, with bytes, number of\n"
    "blocks and share of the total, frames innermost first. With --from, only blocks\n"
    "allocated at or after WHEN. When the file is truncated, what is shown was alive\n"
    "where the recording was cut, which is not necessarily a leak. With several files\n"
    "(one per rank or process), each file's report in turn, then one line per file with\n"
    "the rank of its metadata and what it left alive, and the totals.",
    leaks_opts,
    0,
};

struct end {
    int found;      /* an event was replayed */
    uint64_t index; /* the last event replayed */
    uint64_t time;
    uint64_t since; /* the first event inside the window, UINT64_MAX if none */
};

static json_t *leaks_json(const char *path, const struct mt_replay *rp, const struct end *e,
                          const struct cli_rank *rk, const struct cli_rank_view *v)
{
    json_t *j = json_object();
    json_object_set_new(j, "file", cli_json_str(path));
    json_object_set_new(j, "truncated", json_boolean(mt_replay_truncated(rp)));
    json_object_set_new(j, "end_event", e->found ? cli_json_u64(e->index) : json_null());
    json_object_set_new(j, "end_time_ns", e->found ? cli_json_u64(e->time) : json_null());
    json_object_set_new(j, "since_event",
                        e->since != UINT64_MAX ? cli_json_u64(e->since) : json_null());
    json_object_set_new(j, "bytes", cli_json_u64(rk->bytes));
    json_object_set_new(j, "count", cli_json_u64(rk->count));
    json_object_set_new(j, "distinct_stacks", cli_json_u64(rk->n));
    json_object_set_new(j, "stacks", cli_rank_json(rk, v));
    return j;
}

static void print_text(const char *path, const struct mt_replay *rp, const struct end *e,
                       const struct cli_rank *rk, const struct cli_rank_view *v)
{
    char a[64], b[64];
    if (mt_replay_truncated(rp))
        printf("%s is truncated: these blocks were alive where the recording was cut (event "
               "%" PRIu64 "), not necessarily leaked\n",
               path, e->found ? e->index : 0);
    const char *where = rp->window_done ? "at the end of the window" : "at the end of the file";
    if (mt_replay_truncated(rp))
        where = "at the cut";
    if (!e->found) {
        printf("No events: nothing was allocated.\n");
        return;
    }
    printf("alive %s (event %" PRIu64 "): %s (%" PRIu64 " bytes) in %s blocks from %zu stacks",
           where, e->index, cli_fmt_bytes(a, sizeof(a), rk->bytes), rk->bytes,
           cli_fmt_count(b, sizeof(b), rk->count), rk->n);
    if (e->since != UINT64_MAX && e->since > 0)
        printf(", allocated since event %" PRIu64, e->since);
    printf("\n");
    if (rk->n == 0)
        return;
    printf("\nTop %zu of %zu stacks:\n", cli_rank_shown(rk, v->ntop), rk->n);
    cli_rank_print(stdout, rk, v);
}

static struct mt_filter filter;

/* One file: its own output, and the figure of the table of several. */
static int leaks_file(const char *path, struct cli_file_part *part)
{
    int rc;
    struct mt_replay *rp = cli_replay_open_cli(path, &filter);
    if (!rp)
        return CLI_EXIT_FAIL;
    rp->lean = 1; /* what is live at the end is grouped from the live blocks */

    struct end e = {.since = UINT64_MAX};
    struct cli_progress prog;
    cli_progress_init(&prog, rp->r, "leaks", 0);
    while ((rc = mt_replay_next(rp)) == 1) {
        e.found = 1;
        e.index = rp->index;
        e.time = rp->ev->time_ns;
        if (rp->in_window && e.since == UINT64_MAX)
            e.since = rp->index;
        cli_progress_update(&prog, rp->events);
    }
    cli_progress_done(&prog);
    int status = cli_replay_done_cli(rp, rc);

    struct cli_rank rk = {0};
    if (status == CLI_EXIT_OK && cli_rank_init(&rk, rp) != 0) {
        cli_error("out of memory while grouping the stacks of %s", path);
        status = CLI_EXIT_FAIL;
    }
    if (status == CLI_EXIT_OK) {
        cli_rank_live_since(&rk, &rp->blocks, e.since);
        cli_rank_finish(&rk, CLI_RANK_BYTES);
        struct cli_rank_view v = {rp->r, (size_t)ntop, depth == 0 ? -1 : (int)depth, CLI_RANK_BYTES,
                                  0};
        part->bytes = rk.bytes;
        part->count = rk.count;
        cli_file_part_fill(part, rp);
        if (json)
            part->json = leaks_json(path, rp, &e, &rk, &v);
        else
            print_text(path, rp, &e, &rk, &v);
    }
    cli_rank_free(&rk);
    mt_replay_close(rp);
    return status;
}

int cli_cmd_leaks(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    int rc = cli_options_parse(argc, argv, &leaks_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (npos == 0)
        return cli_usage_error("leaks", "'leaks' needs a FILE argument");
    if (cli_filter_from_opts("leaks", &fo, 1, &filter) != 0)
        return CLI_EXIT_USAGE;
    if (npos > 1)
        return cli_run_files(pos, npos, json, "alive", leaks_file);
    struct cli_file_part part = {.path = pos[0]};
    int status = leaks_file(pos[0], &part);
    if (status == CLI_EXIT_OK && json)
        status = cli_json_print(json_incref(part.json));
    json_decref(part.json);
    json_decref(part.rank);
    return status;
}
