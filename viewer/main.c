/* main.c: the memtrace command's dispatcher. Each subcommand is one entry in
 * commands[] below and one file under viewer/. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct mt_cmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct mt_cmd commands[] = {
    {"info", cli_cmd_info, "describe a .memtrace file: metadata, devices, event counts"},
    {"summary", cli_cmd_summary, "peaks, totals and the largest stacks alive at the peak"},
    {"peak", cli_cmd_peak, "what was alive at the peak (or at a point), grouped by stack"},
    {"leaks", cli_cmd_leaks, "what is still alive at the end (or of a window), by stack"},
    {"top", cli_cmd_top, "stacks ranked by bytes, count or temporary allocations"},
    {"segments", cli_cmd_segments, "the segment map at a point: blocks, free gaps, fragmentation"},
    {"timeline", cli_cmd_timeline, "allocated, reserved and device memory over time: chart, csv"},
    {"stats", cli_cmd_stats, "allocator statistics as PyTorch's memory_stats() names them"},
    {"diff", cli_cmd_diff, "compare two files, or two points of one, stack by stack"},
    {"flamegraph", cli_cmd_flamegraph, "folded stacks or an SVG flame graph of a cost"},
    {"export", cli_cmd_export,
     "write a file as a PyTorch snapshot, Perfetto, speedscope, folded, CSV"},
    {"import", cli_cmd_import, "convert a PyTorch memory snapshot (pickle or JSON) to .memtrace"},
    {"merge", cli_cmd_merge, "merge files of several ranks or processes into one"},
    {"run", cli_cmd_run, "run a command under the preload library, recording device memory"},
};

static const struct mt_cmd *find_cmd(const char *name)
{
    for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
        if (strcmp(commands[k].name, name) == 0)
            return &commands[k];
    return NULL;
}

static void usage(FILE *f)
{
    fputs("usage: memtrace COMMAND [OPTIONS] [FILE...]\n"
          "       memtrace help COMMAND | memtrace COMMAND --help\n"
          "       memtrace --version\n\n"
          "memtrace records accelerator memory allocations with their stacks into\n"
          ".memtrace files and analyses them.\n\ncommands:\n",
          f);
    for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
        fprintf(f, "  %-10s %s\n", commands[k].name, commands[k].summary);
    fputs("\nRun 'memtrace COMMAND --help' for a command's options.\n", f);
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("memtrace %s (libmemtrace %s)\n", PACKAGE_VERSION, memtrace_version());
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "help") == 0) {
        if (argc < 3) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        const struct mt_cmd *c = find_cmd(argv[2]);
        if (!c) {
            cli_error("unknown command '%s'; see 'memtrace --help'", argv[2]);
            return CLI_EXIT_USAGE;
        }
        char *help_argv[] = {argv[2], "--help", NULL};
        return c->fn(2, help_argv);
    }
    if (name[0] == '-') {
        cli_error("unknown option '%s'; see 'memtrace --help'", name);
        return CLI_EXIT_USAGE;
    }
    const struct mt_cmd *c = find_cmd(name);
    if (!c) {
        cli_error("unknown command '%s'; see 'memtrace --help'", name);
        return CLI_EXIT_USAGE;
    }
    return c->fn(argc - 1, argv + 1);
}

/* Output to a full disk or a closed pipe fails in stdio's buffer, silently: every
 * command's output is checked here, once, after the command returned. */
int main(int argc, char **argv)
{
    int rc = dispatch(argc, argv);
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (rc == CLI_EXIT_OK) {
            cli_error("cannot write the output: %s",
                     errno ? strerror(errno) : "error writing to standard output");
            rc = CLI_EXIT_FAIL;
        }
    }
    return rc;
}
