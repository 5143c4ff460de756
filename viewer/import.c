/* import.c: `memtrace import SNAPSHOT -o OUT.memtrace`: a PyTorch memory snapshot
 * (pickle or JSON, told apart by content) into a .memtrace file. */
#include "config.h"

#include <stdio.h>

#include "cli.h"
#include "import.h"

static const char *output;
static int force;

static const struct cli_opt import_opts[] = {
    CLI_OPTION_STRING('o', "output", &output, "OUT", "the .memtrace file to write (required)"),
    CLI_OPTION_BOOL(0, "force", &force, "replace OUT if it exists (never through a link)"),
    CLI_OPTION_END,
};

static const struct cli_help import_help = {
    "import",
    "memtrace import SNAPSHOT -o OUT.memtrace [--force]",
    "Converts a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot()'s pickle,\n"
    "or the same dict as JSON) into a .memtrace file: device_traces become events\n"
    "(frames become stacks), segments and blocks the final state, and\n"
    "allocator_settings, external_annotations and any other keys the metadata;\n"
    "annotations with times also become annotate events. The pickle is read by a\n"
    "reader that knows plain data only: a pickle that would import or call anything\n"
    "is refused before anything is read. docs/PYTORCH.md has the mapping. OUT is\n"
    "written whole or not at all, and an existing OUT is kept unless --force.",
    import_opts,
    0,
};

int cli_cmd_import(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    output = NULL;
    int rc = cli_options_parse(argc, argv, &import_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (npos != 1)
        return cli_usage_error("import", npos ? "'import' takes one SNAPSHOT"
                                              : "'import' needs a SNAPSHOT file");
    if (!output)
        return cli_usage_error("import", "'import' needs -o OUT.memtrace");
    if (cli_output_allowed(output, force) != 0)
        return CLI_EXIT_FAIL;
    struct mt_import_stats st;
    struct memtrace_errinfo err;
    if (mt_import_pytorch(pos[0], output, force ? MT_WRITER_OVERWRITE : 0, &st, &err) != 0) {
        cli_error("%s", err.text);
        return CLI_EXIT_FAIL;
    }
    printf("%s: %llu events from %llu device trace%s, %llu segments, %llu blocks -> %s\n", pos[0],
           (unsigned long long)st.events, (unsigned long long)st.devices,
           st.devices == 1 ? "" : "s", (unsigned long long)st.segments,
           (unsigned long long)st.blocks, output);
    if (st.before_segments)
        printf("%s: %llu segments and %llu blocks were live before the trace's first entry: "
               "they are the state before its first event\n",
               pos[0], (unsigned long long)st.before_segments,
               (unsigned long long)st.before_blocks);
    if (st.before_dropped)
        cli_error("note: %llu blocks live before the trace lie in no segment known then and "
                  "were left out of that state",
                  (unsigned long long)st.before_dropped);
    if (st.skipped)
        cli_error("note: %llu trace entries with actions memtrace does not know were skipped",
                  (unsigned long long)st.skipped);
    return CLI_EXIT_OK;
}
