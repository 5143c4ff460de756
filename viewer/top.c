/* top.c: `memtrace top FILE`: stacks ranked by what they allocated in total.
 *
 * One pass: the model's tallies count, per stack, the bytes and allocations made in
 * the window and the temporaries (a block freed with no other allocation between its
 * allocation and its free, the model's eff.temporary). */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "cli.h"
#include "cli_rank.h"

static int json;
static long long ntop = 10, depth = 16;
static const char *by_name = "bytes";
static struct cli_filter_opts fo;

static const struct cli_opt top_opts[] = {
    CLI_OPTION_STRING(0, "by", &by_name, "WHAT",
                      "rank by 'bytes' allocated (default), 'count' of allocations, or "
                      "'temporary' allocations"),
    CLI_OPTION_INT('n', "top", &ntop, "N", 0, 1000000000,
                   "show the N first stacks (default 10, 0: all)"),
    CLI_OPTION_INT('d', "depth", &depth, "N", 0, 4096,
                   "show at most N frames of each stack (default 16, 0: all)"),
    CLI_FRAMES_OPTION,
    CLI_OPTION_BOOL('j', "json", &json,
                    "print one JSON object (bytes and ns) with every figure of each stack"),
    CLI_OPTION_BOOL(0, "bytes", &cli_exact_bytes, "print sizes in bytes instead of KiB, MiB, GiB"),
    CLI_FILTER_OPTIONS(&fo),
    CLI_OPTION_END,
};

static const struct cli_help top_help = {
    "top",
    "memtrace top FILE [--by bytes|count|temporary] [--top N] [--depth N] [--all-frames] [--json] "
    "[--bytes]\n"
    "       [--device N] [--stream S] [--min-size SIZE] [--category NAME] [--from WHEN]\n"
    "       [--to WHEN]",
    "Ranks the stacks that allocated blocks in FILE (inside the --from/--to window) by\n"
    "the bytes they allocated in total, by their number of allocations, or by their\n"
    "temporary allocations: blocks freed with no other allocation between their\n"
    "allocation and their free. Each stack shows all three figures, frames innermost\n"
    "first.",
    top_opts,
    0,
};

static const char *const by_names[] = {
    [CLI_RANK_BYTES] = "bytes",
    [CLI_RANK_COUNT] = "count",
    [CLI_RANK_TEMPORARY] = "temporary",
};

static int print_json(const char *path, const struct mt_replay *rp, const struct cli_rank *rk,
                      const struct cli_rank_view *v)
{
    json_t *j = json_object();
    json_object_set_new(j, "file", cli_json_str(path));
    json_object_set_new(j, "truncated", json_boolean(mt_replay_truncated(rp)));
    json_object_set_new(j, "by", json_string(by_names[v->by]));
    json_object_set_new(j, "bytes", cli_json_u64(rk->bytes));
    json_object_set_new(j, "count", cli_json_u64(rk->count));
    json_object_set_new(j, "temporary_count", cli_json_u64(rk->temp_count));
    json_object_set_new(j, "temporary_bytes", cli_json_u64(rk->temp_bytes));
    json_object_set_new(j, "distinct_stacks", cli_json_u64(rk->n));
    json_object_set_new(j, "stacks", cli_rank_json(rk, v));
    return cli_json_print(j);
}

static void print_text(const char *path, const struct mt_replay *rp, const struct cli_rank *rk,
                       const struct cli_rank_view *v)
{
    char a[64], b[64], c[64], d[64];
    if (mt_replay_truncated(rp))
        printf("file %s is truncated: figures are those of the events before the cut\n", path);
    printf("allocated %s (%" PRIu64 " bytes) in %s allocations, %s temporary (%s)\n",
           cli_fmt_bytes(a, sizeof(a), rk->bytes), rk->bytes,
           cli_fmt_count(b, sizeof(b), rk->count), cli_fmt_count(c, sizeof(c), rk->temp_count),
           cli_fmt_bytes(d, sizeof(d), rk->temp_bytes));
    if (rk->n == 0) {
        printf("No stack has %s to rank.\n",
               v->by == CLI_RANK_TEMPORARY ? "temporary allocations" : "allocations");
        return;
    }
    printf("\nTop %zu of %zu stacks by %s:\n", cli_rank_shown(rk, v->ntop), rk->n,
           v->by == CLI_RANK_BYTES   ? "bytes allocated"
           : v->by == CLI_RANK_COUNT ? "number of allocations"
                                     : "temporary allocations");
    cli_rank_print(stdout, rk, v);
}

int cli_cmd_top(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    int rc = cli_options_parse(argc, argv, &top_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (npos != 1)
        return npos == 0 ? cli_usage_error("top", "'top' needs a FILE argument")
                         : cli_usage_error("top", "'top' takes one file, got '%s' and '%s'", pos[0],
                                           pos[1]);
    int by = -1;
    for (int k = 0; k < (int)(sizeof(by_names) / sizeof(by_names[0])); k++)
        if (strcmp(by_name, by_names[k]) == 0)
            by = k;
    if (by < 0)
        return cli_usage_error("top",
                               "invalid value '%s' for --by of 'top': expected bytes, count or "
                               "temporary",
                               by_name);
    struct mt_filter f;
    if (cli_filter_from_opts("top", &fo, 1, &f) != 0)
        return CLI_EXIT_USAGE;
    const char *path = pos[0];
    struct mt_replay *rp = cli_replay_open_cli(path, &f);
    if (!rp)
        return CLI_EXIT_FAIL;
    int status = cli_replay_run_cli(rp, "top");
    struct cli_rank rk = {0};
    if (status == CLI_EXIT_OK && cli_rank_init(&rk, rp) != 0) {
        cli_error("out of memory while grouping the stacks of %s", path);
        status = CLI_EXIT_FAIL;
    }
    if (status == CLI_EXIT_OK) {
        cli_rank_allocated(&rk, &rp->block_stacks);
        cli_rank_finish(&rk, by);
        struct cli_rank_view v = {rp->r, (size_t)ntop, depth == 0 ? -1 : (int)depth, by, 1};
        if (json)
            status = print_json(path, rp, &rk, &v);
        else
            print_text(path, rp, &rk, &v);
    }
    cli_rank_free(&rk);
    mt_replay_close(rp);
    return status;
}
