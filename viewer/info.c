/* info.c: `memtrace info FILE`: what a file is and what it holds, read in one pass. */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "replay.h"

static int json;

static const struct cli_opt info_opts[] = {
    CLI_OPTION_BOOL('j', "json", &json, "print one JSON object instead of text"),
    CLI_OPTION_END,
};

static const struct cli_help info_help = {
    "info",
    "memtrace info FILE [--json]",
    "Describes a .memtrace file: format version, the recording's metadata (host, pid,\n"
    "argv, rank, start time, devices, allocator settings), file size, event counts\n"
    "per action, distinct stacks and frames, segments in the final state, time span,\n"
    "events dropped while recording, and whether the file is complete or truncated.",
    info_opts,
    0,
};

static json_t *parse_json(const char *text)
{
    if (!text)
        return NULL;
    json_error_t jerr;
    return json_loads(text, 0, &jerr);
}

static const char *meta_str(json_t *meta, const char *key)
{
    json_t *v = json_object_get(meta, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int meta_u64(json_t *o, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 1;
    }
    /* 2^64 and above (1e300) would be undefined as an integer: absent. */
    if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) < 18446744073709551616.0) {
        *out = (uint64_t)json_real_value(v);
        return 1;
    }
    return 0;
}

static uint64_t device_total(json_t *d)
{
    static const char *const keys[] = {"total_memory", "total_bytes", "total", NULL};
    uint64_t v;
    for (int k = 0; keys[k]; k++)
        if (meta_u64(d, keys[k], &v))
            return v;
    return 0;
}

/* A JSON value on one line (strings without quotes). */
static void print_value(json_t *v)
{
    if (json_is_string(v)) {
        cli_fputs_safe(json_string_value(v), stdout);
        return;
    }
    char *s = json_dumps(v, JSON_ENCODE_ANY);
    cli_fputs_safe(s ? s : "?", stdout);
    free(s);
}

static void print_argv(json_t *argv)
{
    if (!json_is_array(argv)) {
        print_value(argv);
        return;
    }
    size_t k;
    json_t *a;
    json_array_foreach(argv, k, a)
    {
        if (k)
            fputc(' ', stdout);
        print_value(a);
    }
}

static const char *const known_meta[] = {"host",
                                         "hostname",
                                         "pid",
                                         "argv",
                                         "rank",
                                         "devices",
                                         "start_time_ns",
                                         "start_wall_ns",
                                         "start_mono_ns",
                                         "start_monotonic_ns",
                                         "allocator_settings",
                                         "format_version",
                                         "memtrace_version", /* in "format version" */
                                         NULL};

static int is_known_meta(const char *key)
{
    for (int k = 0; known_meta[k]; k++)
        if (strcmp(known_meta[k], key) == 0)
            return 1;
    return 0;
}

/* The text report is two columns: labels, then values from column LABEL_WIDTH + 1;
 * a sub-row's label is indented by two. The widest label of memtrace's own is
 * "  free_requested". */
#define LABEL_WIDTH 16

/* Labels and values may come from the file (metadata keys, host names, paths):
 * both are printed escaped (cli_fputs_safe). */
static void label(const char *text)
{
    char *e = cli_escape(text, 0);
    printf("%-*s ", LABEL_WIDTH, e ? e : "?");
    free(e);
}

static void row(const char *text, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void row(const char *text, const char *fmt, ...)
{
    va_list ap;
    char value[1024];
    label(text);
    va_start(ap, fmt);
    vsnprintf(value, sizeof(value), fmt, ap);
    va_end(ap);
    cli_fputs_safe(value, stdout);
    fputc('\n', stdout);
}

static void value_row(const char *text, json_t *v)
{
    label(text);
    print_value(v);
    fputc('\n', stdout);
}

static void sub_row(const char *text, const char *value)
{
    char *e = cli_escape(text, 0);
    printf("  %-*s ", LABEL_WIDTH - 2, e ? e : "?");
    free(e);
    cli_fputs_safe(value, stdout);
    fputc('\n', stdout);
}

static void print_text(const char *path, struct memtrace_reader *r, const struct mt_replay *in,
                       json_t *meta, json_t *end)
{
    char a[64], b[64], c[64];
    int truncated = memtrace_reader_truncated(r);
    uint64_t size = memtrace_reader_file_size(r);

    row("file", "%s", path);
    const char *writer = meta_str(meta, "memtrace_version");
    if (writer)
        row("format version", "%u (written by memtrace %s)", memtrace_reader_version(r), writer);
    else
        row("format version", "%u", memtrace_reader_version(r));
    row("file size", "%s (%" PRIu64 " bytes)", cli_fmt_bytes(a, sizeof(a), size), size);
    row("status", "%s", truncated ? "truncated (no end record)" : "complete");

    const char *host = meta_str(meta, "host");
    if (!host)
        host = meta_str(meta, "hostname");
    if (host)
        row("host", "%s", host);
    json_t *v;
    if ((v = json_object_get(meta, "pid"))) {
        value_row("pid", v);
    }
    if ((v = json_object_get(meta, "argv"))) {
        label("argv");
        print_argv(v);
        fputc('\n', stdout);
    }
    if ((v = json_object_get(meta, "rank")) && !json_is_null(v)) {
        value_row("rank", v);
    }
    uint64_t wall, mono;
    if (cli_meta_clock(meta, &wall, &mono))
        row("start time", "%s", cli_fmt_utc(a, sizeof(a), wall));
    json_t *devices = json_object_get(meta, "devices");
    if (json_is_array(devices)) {
        row("devices", "%zu", json_array_size(devices));
        size_t k;
        json_t *d;
        json_array_foreach(devices, k, d)
        {
            uint64_t index = k;
            meta_u64(d, "index", &index);
            const char *name = meta_str(d, "name");
            const char *backend = meta_str(d, "backend");
            uint64_t total = device_total(d);
            char idx[24], desc[512];
            snprintf(idx, sizeof idx, "%" PRIu64, index);
            snprintf(desc, sizeof desc, "%s, %s (%" PRIu64 " bytes), %s", name ? name : "?",
                     cli_fmt_bytes(a, sizeof(a), total), total, backend ? backend : "?");
            sub_row(idx, desc);
        }
    }
    if ((v = json_object_get(meta, "allocator_settings"))) {
        value_row("allocator", v);
    }
    const char *key;
    json_object_foreach(meta, key, v)
    {
        if (is_known_meta(key))
            continue;
        value_row(key, v);
    }

    row("events", "%s", cli_fmt_count(a, sizeof(a), in->events));
    for (int k = 0; k < MEMTRACE_ACTION_COUNT; k++)
        if (in->actions[k])
            sub_row(memtrace_action_name(k), cli_fmt_count(a, sizeof(a), in->actions[k]));
    if (in->unknown_actions)
        sub_row("unknown", cli_fmt_count(a, sizeof(a), in->unknown_actions));
    row("stacks", "%s distinct, %s frames",
        cli_fmt_count(a, sizeof(a), memtrace_reader_stack_count(r)),
        cli_fmt_count(b, sizeof(b), memtrace_reader_frame_count(r)));
    row("segments", "%s in the final state",
        cli_fmt_count(a, sizeof(a), memtrace_reader_segment_count(r)));
    if (in->events)
        row("time span", "%s (%" PRIu64 " .. %" PRIu64 " ns)",
            cli_fmt_duration(c, sizeof(c), in->t_max - in->t_min), in->t_min, in->t_max);
    if (end) {
        uint64_t dropped = 0;
        json_t *ov = json_object_get(end, "overflowed");
        if (!ov)
            ov = json_object_get(end, "overflow");
        meta_u64(end, "dropped", &dropped);
        row("dropped", "%s events%s", cli_fmt_count(a, sizeof(a), dropped),
            json_is_true(ov) || (json_is_integer(ov) && json_integer_value(ov))
                ? " (the history ring overflowed)"
                : "");
        json_object_foreach(end, key, v)
        {
            if (strcmp(key, "dropped") == 0 || strcmp(key, "overflowed") == 0 ||
                strcmp(key, "overflow") == 0)
                continue;
            char end_key[256];
            snprintf(end_key, sizeof end_key, "end %s", key);
            value_row(end_key, v);
        }
    }
}

static int print_json(const char *path, struct memtrace_reader *r, const struct mt_replay *in,
                      json_t *meta, json_t *end)
{
    char a[64];
    json_t *o = json_object();
    json_object_set_new(o, "file", cli_json_str(path));
    json_object_set_new(o, "format_version", json_integer(memtrace_reader_version(r)));
    json_object_set_new(o, "file_size", cli_json_u64(memtrace_reader_file_size(r)));
    int truncated = memtrace_reader_truncated(r);
    json_object_set_new(o, "complete", json_boolean(!truncated));
    json_object_set_new(o, "truncated", json_boolean(truncated));
    if (truncated)
        json_object_set_new(o, "truncated_at", cli_json_u64(memtrace_reader_offset(r)));
    json_object_set_new(o, "meta", meta ? json_incref(meta) : json_object());
    uint64_t wall, mono;
    if (cli_meta_clock(meta, &wall, &mono))
        json_object_set_new(o, "start_time", json_string(cli_fmt_utc(a, sizeof(a), wall)));
    else
        json_object_set_new(o, "start_time", json_null());
    json_t *devices = json_object_get(meta, "devices");
    json_object_set_new(o, "devices", json_is_array(devices) ? json_incref(devices) : json_array());
    json_object_set_new(o, "events", cli_json_u64(in->events));
    json_t *acts = json_object();
    for (int k = 0; k < MEMTRACE_ACTION_COUNT; k++)
        json_object_set_new(acts, memtrace_action_name(k), cli_json_u64(in->actions[k]));
    if (in->unknown_actions)
        json_object_set_new(acts, "unknown", cli_json_u64(in->unknown_actions));
    json_object_set_new(o, "actions", acts);
    json_object_set_new(o, "stacks", json_integer(memtrace_reader_stack_count(r)));
    json_object_set_new(o, "frames", json_integer(memtrace_reader_frame_count(r)));
    json_object_set_new(o, "segments", cli_json_u64(memtrace_reader_segment_count(r)));
    json_object_set_new(o, "state_time_ns", cli_json_u64(memtrace_reader_state_time(r)));
    json_object_set_new(o, "first_time_ns", cli_json_u64(in->events ? in->t_min : 0));
    json_object_set_new(o, "last_time_ns", cli_json_u64(in->events ? in->t_max : 0));
    json_object_set_new(o, "duration_ns", cli_json_u64(in->events ? in->t_max - in->t_min : 0));
    uint64_t dropped = 0;
    json_t *ov = json_object_get(end, "overflowed");
    if (!ov)
        ov = json_object_get(end, "overflow");
    meta_u64(end, "dropped", &dropped);
    json_object_set_new(o, "dropped", cli_json_u64(dropped));
    json_object_set_new(
        o, "overflowed",
        json_boolean(json_is_true(ov) || (json_is_integer(ov) && json_integer_value(ov))));
    json_object_set_new(o, "end", end ? json_incref(end) : json_null());
    return cli_json_print(o);
}

int cli_cmd_info(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    int rc = cli_options_parse(argc, argv, &info_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (npos == 0)
        return cli_usage_error("info", "'info' needs a FILE argument");
    if (npos > 1)
        return cli_usage_error("info", "'info' takes one file, got '%s' and '%s'", pos[0], pos[1]);
    const char *path = pos[0];

    struct mt_replay *in = cli_replay_open_cli(path, NULL);
    if (!in)
        return CLI_EXIT_FAIL;
    in->lean = 1;
    int status = cli_replay_run_cli(in, "info");
    if (status != CLI_EXIT_OK) {
        mt_replay_close(in);
        return status;
    }
    struct memtrace_reader *r = in->r;
    json_t *meta = parse_json(memtrace_reader_meta(r));
    json_t *end = parse_json(memtrace_reader_end(r));
    if (json)
        status = print_json(path, r, in, meta, end);
    else
        print_text(path, r, in, meta, end);
    json_decref(meta);
    json_decref(end);
    mt_replay_close(in);
    return status;
}
