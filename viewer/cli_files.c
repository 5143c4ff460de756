/* cli_files.c: commands given several files (one per rank or process): each file's
 * own output in turn, then one line per file with the rank its metadata gives and the
 * command's figure, and the totals; with --json, one object holding each file's. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_file_part_fill(struct cli_file_part *part, const struct mt_replay *rp)
{
    part->events = rp->events;
    part->truncated = mt_replay_truncated(rp);
    const char *text = memtrace_reader_meta(rp->r);
    json_t *meta = text ? json_loads(text, 0, NULL) : NULL;
    json_t *rank = json_object_get(meta, "rank");
    json_decref(part->rank);
    part->rank = rank && !json_is_null(rank) ? json_incref(rank) : NULL;
    json_decref(meta);
}

static void rank_text(char *buf, size_t size, const json_t *rank)
{
    if (rank && json_is_integer(rank))
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(rank));
    else
        snprintf(buf, size, rank ? "?" : "-");
}

int cli_run_files(char **paths, int n, int json, const char *what, cli_file_fn fn)
{
    struct cli_file_part *parts = calloc((size_t)n, sizeof(*parts));
    if (!parts)
        return CLI_EXIT_FAIL;
    int status = CLI_EXIT_OK;
    for (int k = 0; k < n && status == CLI_EXIT_OK; k++) {
        parts[k].path = paths[k];
        if (!json) {
            printf("%s==> ", k ? "\n" : "");
            cli_fputs_safe(paths[k], stdout);
            printf(" <==\n");
        }
        status = fn(paths[k], &parts[k]);
    }
    struct cli_file_part total = {.path = "total"};
    for (int k = 0; k < n; k++) {
        total.events += parts[k].events;
        total.bytes += parts[k].bytes;
        total.count += parts[k].count;
    }
    if (status == CLI_EXIT_OK && json) {
        json_t *j = json_object(), *files = json_array();
        for (int k = 0; k < n; k++) {
            json_t *o = parts[k].json ? json_incref(parts[k].json) : json_object();
            json_object_set_new(o, "rank",
                                parts[k].rank ? json_incref(parts[k].rank) : json_null());
            json_array_append_new(files, o);
        }
        json_object_set_new(j, "files", files);
        json_object_set_new(j, "total",
                            json_pack("{s:o,s:o,s:o}", "events", cli_json_u64(total.events), "bytes",
                                      cli_json_u64(total.bytes), "count", cli_json_u64(total.count)));
        status = cli_json_print(j);
    } else if (status == CLI_EXIT_OK) {
        printf("\n%6s %12s %16s %12s  %s\n", "rank", "events", what, "count", "file");
        for (int k = 0; k <= n; k++) {
            const struct cli_file_part *p = k < n ? &parts[k] : &total;
            char rank[32] = "", a[32], b[32], c[32];
            if (k < n)
                rank_text(rank, sizeof(rank), p->rank);
            printf("%6s %12s %16s %12s  ", rank, cli_fmt_count(a, sizeof(a), p->events),
                   cli_fmt_bytes(b, sizeof(b), p->bytes), cli_fmt_count(c, sizeof(c), p->count));
            cli_fputs_safe(p->path, stdout);
            puts(p->truncated ? " (truncated)" : "");
        }
    }
    for (int k = 0; k < n; k++) {
        json_decref(parts[k].rank);
        json_decref(parts[k].json);
    }
    free(parts);
    return status;
}
