/* merge.c: `memtrace merge -o OUT FILE...`: one multi-device file from the files of
 * several ranks or processes (snapshot/import_merge.c does the work). */
#include "config.h"

#include <stdio.h>

#include "cli.h"
#include "import.h"

static const char *output;
static int force;

static const struct cli_opt merge_opts[] = {
    CLI_OPTION_STRING('o', "output", &output, "OUT", "the merged .memtrace file (required)"),
    CLI_OPTION_BOOL(0, "force", &force, "replace OUT if it exists (never through a link)"),
    CLI_OPTION_END,
};

static const struct cli_help merge_help = {
    "merge",
    "memtrace merge -o OUT [--force] FILE...",
    "Merges .memtrace files (one per rank or process) into one multi-device file.\n"
    "Events are interleaved by time, on the wall clock when every file's metadata\n"
    "carries one. Device numbers are kept when every file has a distinct rank and\n"
    "the files use different devices; otherwise they are renumbered file after file\n"
    "(in rank order when every file has a rank, else in the order given). The\n"
    "metadata lists the sources (path, rank, host, pid, device offset). OUT is\n"
    "written whole or not at all, and an existing OUT is kept unless --force.",
    merge_opts,
    0,
};

int cli_cmd_merge(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    output = NULL;
    int rc = cli_options_parse(argc, argv, &merge_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (!output)
        return cli_usage_error("merge", "'merge' needs -o OUT");
    if (npos < 1)
        return cli_usage_error("merge", "'merge' needs at least one FILE");
    if (cli_output_allowed(output, force) != 0)
        return CLI_EXIT_FAIL;
    struct mt_merge_stats st;
    struct memtrace_errinfo err;
    if (mt_merge((const char *const *)pos, (size_t)npos, output, force ? MT_WRITER_OVERWRITE : 0,
                 &st, &err) != 0) {
        cli_error("%s", err.text);
        return CLI_EXIT_FAIL;
    }
    if (st.truncated == 1)
        cli_error("warning: %s is truncated (no end record): merged its events before the cut "
                  "(merged_from in the metadata says so too)",
                  st.truncated_path);
    else if (st.truncated > 1)
        cli_error("warning: %zu inputs are truncated (no end record), the first %s: merged "
                  "their events before each cut (merged_from in the metadata names them)",
                  st.truncated, st.truncated_path);
    printf("%d files, %llu events -> %s (devices %s, times %s)\n", npos,
           (unsigned long long)st.events, output, st.renumbered ? "renumbered" : "kept",
           st.aligned ? "on the wall clock" : "as recorded");
    return CLI_EXIT_OK;
}
