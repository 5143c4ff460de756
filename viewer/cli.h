/* cli.h: the memtrace command-line tool's commands and the helpers they share.
 *
 * A command is int fn(int argc, char **argv) with argv[0] the command's name; it
 * returns the process exit status: CLI_EXIT_OK, CLI_EXIT_FAIL (a file could not be
 * read) or CLI_EXIT_USAGE (a wrong flag or argument, already reported on stderr).
 * Messages go to stderr as one line starting with "memtrace: ". */
#ifndef MEMTRACE_CLI_H
#define MEMTRACE_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "memtrace.h"
#include "memtrace_snapshot.h"
#include "replay.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

/* Commands (one file each under viewer/). */
int cli_cmd_info(int argc, char **argv);
int cli_cmd_summary(int argc, char **argv);
int cli_cmd_run(int argc, char **argv);
int cli_cmd_segments(int argc, char **argv);
int cli_cmd_timeline(int argc, char **argv);
int cli_cmd_stats(int argc, char **argv);
int cli_cmd_peak(int argc, char **argv);
int cli_cmd_leaks(int argc, char **argv);
int cli_cmd_top(int argc, char **argv);
int cli_cmd_flamegraph(int argc, char **argv);
int cli_cmd_export(int argc, char **argv);
int cli_cmd_import(int argc, char **argv);
int cli_cmd_merge(int argc, char **argv);
int cli_cmd_diff(int argc, char **argv);
int cli_cmd_html(int argc, char **argv);
int cli_cmd_view(int argc, char **argv);

/* The headline figures of a file by the replay `memtrace summary` uses, for other
 * commands' closing lines. Returns an CLI_EXIT_* status, having reported a problem. */
struct cli_peaks {
    uint64_t events;
    uint64_t peak_allocated, peak_reserved;
    int truncated;
};
int cli_summary_peaks(const char *path, struct cli_peaks *p);

/* One flag of a command. name is the long name without "--"; short_name is 0 when
 * there is none; arg names the value ("N", "FILE") or is NULL for a switch. With a
 * type (CLI_OPTION_* below), cli_options_parse() writes the flag's value straight into
 * *value: the table is the whole declaration of a command's flags, and --help is
 * printed from it. */
struct cli_opt {
    const char *name;
    char short_name;
    const char *arg;
    const char *help;
    int type;           /* enum cli_opt_type */
    void *value;        /* where the value goes, of the type's C type */
    long long min, max; /* CLI_T_INT's range */
};

enum cli_opt_type {
    CLI_T_NONE,  /* handled by the caller through cli_args_next() */
    CLI_T_BOOL,  /* int: set to 1 */
    CLI_T_INT,   /* long long, in [min, max] */
    CLI_T_STR,   /* const char * */
    CLI_T_BYTES, /* uint64_t: "4096", "64K", "1.5M", "2GiB" */
    CLI_T_POINT, /* struct mt_point: a time, an event index or an annotation name */
};

#define CLI_OPTION_BOOL(s, l, v, h)                                                                \
    {                                                                                              \
        l, s, NULL, h, CLI_T_BOOL, v, 0, 0                                                         \
    }
#define CLI_OPTION_INT(s, l, v, a, lo, hi, h)                                                      \
    {                                                                                              \
        l, s, a, h, CLI_T_INT, v, lo, hi                                                           \
    }
#define CLI_OPTION_STRING(s, l, v, a, h)                                                           \
    {                                                                                              \
        l, s, a, h, CLI_T_STR, v, 0, 0                                                             \
    }
#define CLI_OPTION_BYTES(s, l, v, a, h)                                                            \
    {                                                                                              \
        l, s, a, h, CLI_T_BYTES, v, 0, 0                                                           \
    }
#define CLI_OPTION_POINT(s, l, v, a, h)                                                            \
    {                                                                                              \
        l, s, a, h, CLI_T_POINT, v, 0, 0                                                           \
    }
#define CLI_OPTION_END                                                                             \
    {                                                                                              \
        NULL, 0, NULL, NULL, 0, NULL, 0, 0                                                         \
    }

/* The filters every analysis command takes, as flags: declare a struct
 * cli_filter_opts, put CLI_FILTER_OPTIONS(&it) in the table, then turn it into the
 * replay's filter with cli_filter_from_opts(). */
struct cli_filter_opts {
    const char *device, *stream, *category;
    uint64_t min_size;
    struct mt_point from, to;
};
#define CLI_FILTER_OPTIONS(fo)                                                                     \
    CLI_OPTION_STRING(0, "device", &(fo)->device, "N", "only allocations on device N"),            \
        CLI_OPTION_STRING(0, "stream", &(fo)->stream, "S", "only allocations on stream S"),        \
        CLI_OPTION_BYTES(0, "min-size", &(fo)->min_size, "SIZE",                                   \
                         "only allocations of at least SIZE (4096, 64K, 1.5M, 2G)"),               \
        CLI_OPTION_STRING(0, "category", &(fo)->category, "NAME",                                  \
                          "only allocations tagged with category NAME"),                           \
        CLI_OPTION_POINT(0, "from", &(fo)->from, "WHEN",                                           \
                         "start at WHEN: a time after the first event (1.5s, 20ms), an event "     \
                         "index (#123), or an annotation's name (its start)"),                     \
        CLI_OPTION_POINT(0, "to", &(fo)->to, "WHEN",                                               \
                         "stop after WHEN (as --from; an annotation's end)")
/* window: --from and --to bound a window (every command but diff, whose two points
 * they are), so a --from that comes after --to, both times or both event indexes, is
 * a usage error. */
int cli_filter_from_opts(const char *cmd, const struct cli_filter_opts *fo, int window,
                         struct mt_filter *f);

/* Sizes print exact (bytes) instead of human units: set by --bytes. */
extern int cli_exact_bytes;

/* Stacks show every frame, those of stack capture, operator dispatch, the interpreter
 * and thread start included: set by --all-frames (CLI_FRAMES_OPTION). */
extern int cli_all_frames;
#define CLI_FRAMES_OPTION                                                                          \
    CLI_OPTION_BOOL(0, "all-frames", &cli_all_frames,                                              \
                    "show every frame of a stack; by default frames of stack capture, the "        \
                    "allocator, operator dispatch, the Python interpreter and thread start are "   \
                    "hidden")

/* What `memtrace CMD --help` prints: usage line(s), a paragraph, the flags. */
struct cli_help {
    const char *cmd;
    const char *usage;
    const char *text;
    const struct cli_opt *opts; /* terminated by a zeroed entry */
    int stop_at_command;        /* the first plain argument and all after it are plain */
};

/* Parses argv against h->opts, writing typed flags into their variables; plain
 * arguments go to pos[0..*npos) (pos has room for argc entries). Returns 0, -1 when
 * --help was asked for and printed (exit 0), or CLI_EXIT_USAGE having reported the
 * error. Flags of type CLI_T_NONE are an error here: use cli_args_next() for those. */
int cli_options_parse(int argc, char **argv, const struct cli_help *h, char **pos, int *npos);

/* Flag parsing state over argv[1..argc). With stop_at_positional set, the first
 * argument that is not a flag ends flag parsing (for `run -- PROGRAM ARGS`). */
struct cli_args {
    int argc;
    char **argv;
    int i;
    int only_positional;
    int stop_at_positional;
    const struct cli_help *help;
};

#define CLI_OPT_END        (-1) /* no arguments left */
#define CLI_OPT_POSITIONAL (-2) /* *value is a plain argument */
#define CLI_OPT_HELP       (-3) /* -h or --help */
#define CLI_OPT_ERROR      (-4) /* already reported: exit with CLI_EXIT_USAGE */

void cli_args_init(struct cli_args *a, int argc, char **argv, const struct cli_help *help);

/* Returns the index in help->opts of the next flag (with *value set to its value,
 * or NULL for a switch), or one of CLI_OPT_*. Accepts --name=value, --name value,
 * -x value, -xvalue and "--" (the rest are plain arguments). */
int cli_args_next(struct cli_args *a, const char **value);

/* Index of the next unread argument (after CLI_OPT_POSITIONAL with stop_at_positional,
 * the one after the positional). */
static inline int cli_args_index(const struct cli_args *a)
{
    return a->i;
}

/* Prints the help of a command to f. */
void cli_help_print(FILE *f, const struct cli_help *h);

/* Prints "memtrace: <message>; see 'memtrace CMD --help'" and returns
 * CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "memtrace: <message>" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses value as a decimal integer in [min, max] for flag opt of cmd; reports a
 * usage error and returns CLI_EXIT_USAGE if it is not one, else 0. */
int cli_parse_int(const char *cmd, const char *opt, const char *value, long long min, long long max,
                  long long *out);

/* Human formats into buf (at least 32 bytes), returning buf: "512 B", "1.5 KiB",
 * "12.0 MiB", "3.2 GiB"; a duration "850 ns", "12.3 us", "4.5 ms", "1.234 s";
 * a count with thousands separators "1,234,567"; a UTC time "2024-05-01T12:00:00.123Z"
 * from nanoseconds since the epoch. */
const char *cli_fmt_bytes(char *buf, size_t size, uint64_t bytes);
const char *cli_fmt_duration(char *buf, size_t size, uint64_t ns);
/* A point as the user named it: "event #123", "+1.500 s", "'name'"; NULL for none. */
const char *cli_point_text(char *buf, size_t size, const struct mt_point *p);
/* When missed (the replay's window never opened: mt_replay_window_missed), says so in
 * one line naming path and the --from point, and returns 1; else 0. closed: the window's
 * --to was reached. */
int cli_window_missed(const char *path, struct mt_point from, int missed, int closed);
const char *cli_fmt_count(char *buf, size_t size, uint64_t n);
const char *cli_fmt_utc(char *buf, size_t size, uint64_t epoch_ns);

/* Strings from a file (names, paths, metadata) as the terminal should show them: every
 * byte that could act on a terminal or is not UTF-8 (C0 and C1 control characters,
 * DEL, stray bytes) as the text \xNN, a backslash as \\. cli_fputs_safe writes s so;
 * cli_escape returns a malloc'd copy (NULL without memory), and with json set keeps
 * backslashes and control characters (JSON escapes those itself) and escapes only
 * what is not UTF-8. */
void cli_fputs_safe(const char *s, FILE *f);
char *cli_escape(const char *s, int json);

/* A JSON string of s, which keeps bytes that are not UTF-8 as the text \xNN instead
 * of losing the string. */
json_t *cli_json_str(const char *s);

/* A command given several files (one per rank or process) runs fn on each: fn prints
 * the file's own output (text), or leaves its JSON object in part->json (--json),
 * fills part with cli_file_part_fill() and sets the figure the table shows (bytes,
 * count), and returns an CLI_EXIT_* status. cli_run_files() then prints one line per
 * file with the rank of its metadata, and the totals (text: under a heading per
 * file; JSON: {"files": [...], "total": {...}}). what names the figure's column. */
struct cli_file_part {
    const char *path;
    json_t *rank; /* from the metadata, or NULL */
    uint64_t events;
    int truncated;
    uint64_t bytes, count;
    json_t *json;
};
typedef int (*cli_file_fn)(const char *path, struct cli_file_part *part);
void cli_file_part_fill(struct cli_file_part *part, const struct mt_replay *rp);
int cli_run_files(char **paths, int n, int json, const char *what, cli_file_fn fn);

/* A command's output file (-o), written as the recorder writes its dumps: mode 0600,
 * never through a symbolic link, an existing file kept unless force, never one of the
 * command's inputs. A regular file (new, or replaced with force) is written beside
 * path (path.tmp-XXXXXX) and appears at path, whole, only when the command succeeds,
 * so a failure leaves what was there; anything else at path (a device, a pipe) is
 * written in place. */
struct cli_output {
    FILE *f;
    const char *path;
    char *tmp; /* NULL: written in place */
    int force;
};

/* Opens o->f for the output at path: 0, or -1 with one line reported. */
int cli_output_open(struct cli_output *o, const char *path, int force, char *const *inputs,
                    int ninputs);
/* Closes it: with ok, puts it at its path (0, or -1 with one line reported when a
 * write, the close or the rename failed); without, drops it (-1). */
int cli_output_close(struct cli_output *o, int ok);

/* Before a library call creates path with those rules (which still guard it): 0, or
 * -1 having said that path exists (and --force would replace it) or is a link. */
int cli_output_allowed(const char *path, int force);

/* Opens path for reading; on failure prints the reader's one-line error and returns
 * NULL. */
struct memtrace_reader *cli_open(const char *path);

/* Reports a reader error met in memtrace_reader_next() (rc < 0) and returns
 * CLI_EXIT_FAIL. */
int cli_read_failed(struct memtrace_reader *r, const char *path);

/* After memtrace_reader_next() returned 0: if the file is truncated, prints the
 * warning naming how many events were read and where the file stops. */
void cli_warn_if_truncated(struct memtrace_reader *r, const char *path, uint64_t events);

/* Opens a replay of path with filter f (NULL: none); on failure prints the reader's
 * one-line error and returns NULL. */
struct mt_replay *cli_replay_open_cli(const char *path, const struct mt_filter *f);

/* Replays rp to its end with progress on stderr labelled by cmd; reports a read error
 * or exhausted memory, and warns of a truncated file. Returns an CLI_EXIT_* status. */
int cli_replay_run_cli(struct mt_replay *rp, const char *cmd);

/* After a replay stopped (mt_replay_next() returned rc <= 0): reports rc < 0 and an
 * empty window, and warns of a truncated file. Returns an CLI_EXIT_* status. */
int cli_replay_done_cli(struct mt_replay *rp, int rc);
/* The same without the warning of a truncated file, for a second pass over a file
 * whose first pass gave it. */
int cli_replay_done_again(struct mt_replay *rp, int rc);

/* Progress on stderr, only for files over 50 MB and when stderr is a terminal. */
struct cli_progress {
    struct memtrace_reader *r;
    const char *label;
    uint64_t total;
    uint64_t limit_events; /* when non-zero, progress is events / limit_events */
    int enabled;
    int last_pct;
};
void cli_progress_init(struct cli_progress *p, struct memtrace_reader *r, const char *label,
                       uint64_t limit_events);
void cli_progress_update(struct cli_progress *p, uint64_t events);
void cli_progress_done(struct cli_progress *p);

/* Frames of a stack, innermost first: those snapshot/frames.c shows (every frame with
 * --all-frames, cli_all_frames), the first depth of them (depth < 0: all) and up to
 * depth Python frames past those, each numbered by its place in the whole stack, then
 * how many were hidden. The JSON has one object per frame shown, its place as
 * "index". */
void cli_stack_print(FILE *f, const struct memtrace_reader *r, uint32_t stack, int depth,
                     const char *indent);
json_t *cli_stack_json(const struct memtrace_reader *r, uint32_t stack, int depth);
/* How many frames of stack the two above leave out as hidden. */
int cli_stack_hidden(const struct memtrace_reader *r, uint32_t stack);

/* One frame as text: "symbol", else "module+0xOFF", else "0xIP"; then " at file:line"
 * when known. */
const char *cli_frame_text(char *buf, size_t size, const struct memtrace_frame *fr);

/* Writes obj (and steals it) to stdout as indented JSON and a newline. Returns
 * CLI_EXIT_OK, or CLI_EXIT_FAIL if it could not be written. */
int cli_json_print(json_t *obj);

/* json_integer for unsigned figures (clamped to INT64_MAX). */
json_t *cli_json_u64(uint64_t v);

/* Wall-clock nanoseconds of the recording's start (from the metadata) and the
 * monotonic time it corresponds to, if the metadata carries them; 0 otherwise. */
int cli_meta_clock(json_t *meta, uint64_t *wall_ns, uint64_t *mono_ns);

#endif
