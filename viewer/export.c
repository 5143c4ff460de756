/* export.c: `memtrace export --format FMT [-o OUT] FILE`: a .memtrace file in another
 * tool's format (snapshot/export*.c does the work). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "export.h"

static const char *format;
static const char *output;
static int force;
static struct cli_filter_opts fo;

static const struct cli_opt export_opts[] = {
    CLI_OPTION_STRING('f', "format", &format, "FMT",
                      "pytorch-pickle, pytorch-json, perfetto, speedscope, folded or csv"),
    CLI_OPTION_STRING('o', "output", &output, "OUT", "write to OUT instead of standard output"),
    CLI_OPTION_BOOL(0, "force", &force, "replace OUT if it exists (never through a link)"),
    CLI_FRAMES_OPTION,
    CLI_FILTER_OPTIONS(&fo),
    CLI_OPTION_END,
};

static const struct cli_help export_help = {
    "export",
    "memtrace export --format FMT [-o OUT [--force]] [--all-frames] [--device N]\n"
    "       [--stream S] [--min-size SIZE] [--category NAME] [--from WHEN] [--to WHEN] FILE",
    "Writes a .memtrace file in another tool's format, reading it as a stream:\n"
    "  pytorch-pickle  PyTorch's memory snapshot, pickled (protocol 4): opens in\n"
    "                  MemoryViz (pytorch.org/memory_viz) and torch/cuda/_memory_viz.py\n"
    "  pytorch-json    the same snapshot as JSON\n"
    "  perfetto        Chrome trace event JSON for ui.perfetto.dev: a memory counter\n"
    "                  track per device (allocated, reserved, used) and block slices,\n"
    "                  each named by its stack's innermost Python frame (else its\n"
    "                  innermost frame that peak would show)\n"
    "  speedscope      speedscope's JSON: bytes allocated, and bytes live at the peak,\n"
    "                  by stack\n"
    "  folded          folded stacks for flamegraph.pl: frames outermost first joined\n"
    "                  by ';', a space, the bytes allocated\n"
    "  csv             one line per event, with a header line\n"
    "Folded stacks and speedscope leave out the frames that peak hides (stack capture,\n"
    "the allocator, operator dispatch, the Python interpreter, thread start) unless\n"
    "--all-frames; the PyTorch snapshots and CSV carry every frame.\n"
    "The filters and --from/--to choose allocations and a window as for peak (a\n"
    "Perfetto trace of the window begins with the blocks live at its start; CSV keeps\n"
    "the window's events of the allocations that count); a PyTorch snapshot is\n"
    "exported whole.\n"
    "PyTorch snapshots hold device memory only: host-memory and counter events are\n"
    "left out (the count is reported); docs/PYTORCH.md has the mapping.",
    export_opts,
    0,
};

int cli_cmd_export(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    format = output = NULL;
    int rc = cli_options_parse(argc, argv, &export_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (!format)
        return cli_usage_error("export", "'export' needs --format FMT");
    int fmt = mt_export_format_from_name(format);
    if (fmt < 0)
        return cli_usage_error("export",
                               "unknown format '%s' (pytorch-pickle, pytorch-json, perfetto, "
                               "speedscope, folded, csv)",
                               format);
    if (npos != 1)
        return cli_usage_error("export",
                               npos ? "'export' takes one FILE" : "'export' needs a FILE");
    struct mt_filter f;
    if ((rc = cli_filter_from_opts("export", &fo, 1, &f)) != 0)
        return rc;
    int filtered = fo.device || fo.stream || fo.category || fo.min_size ||
                   fo.from.kind != MT_POINT_NONE || fo.to.kind != MT_POINT_NONE;
    if (filtered && (fmt == MT_EXPORT_PYTORCH_PICKLE || fmt == MT_EXPORT_PYTORCH_JSON))
        return cli_usage_error("export",
                               "a PyTorch snapshot is exported whole: the filters and "
                               "--from/--to apply to perfetto, speedscope, folded and csv");
    FILE *out = stdout;
    struct cli_output co;
    int to_file = output && strcmp(output, "-") != 0;
    if (to_file) {
        if (cli_output_open(&co, output, force, pos, 1) != 0)
            return CLI_EXIT_FAIL;
        out = co.f;
    }
    struct mt_export_stats st;
    struct memtrace_errinfo err;
    rc = mt_export(pos[0], fmt, cli_all_frames ? MT_EXPORT_ALL_FRAMES : 0, filtered ? &f : NULL,
                   out, &st, &err);
    if (rc == 0 && cli_window_missed(pos[0], f.from, st.window_missed, st.window_closed))
        rc = MEMTRACE_EINVAL; /* said; what was written is an empty window */
    else if (rc != 0)
        cli_error("%s", err.text);
    /* a failed export leaves no output, and what -o named as it was */
    if (to_file && cli_output_close(&co, rc == 0) != 0)
        rc = rc ? rc : MEMTRACE_EIO;
    if (rc != 0)
        return CLI_EXIT_FAIL;
    if (st.truncated)
        cli_error("warning: %s is truncated; exported the %llu events before the cut", pos[0],
                  (unsigned long long)st.events);
    if (st.left_out && (fmt == MT_EXPORT_PYTORCH_PICKLE || fmt == MT_EXPORT_PYTORCH_JSON))
        cli_error("note: %llu events have no place in a PyTorch snapshot (host memory, counters) "
                  "and were left out",
                  (unsigned long long)st.left_out);
    return CLI_EXIT_OK;
}
