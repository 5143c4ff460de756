/* cli.c: helpers every memtrace command shares: flag parsing and its errors, human
 * units, reading with one-line errors and the truncation warning, progress, stacks,
 * JSON output. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

void mt_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("memtrace: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int mt_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("memtrace: ", stderr);
    vfprintf(stderr, fmt, ap);
    if (cmd)
        fprintf(stderr, "; see 'memtrace %s --help'\n", cmd);
    else
        fputs("; see 'memtrace --help'\n", stderr);
    va_end(ap);
    return MT_EXIT_USAGE;
}

void mt_args_init(struct mt_args *a, int argc, char **argv, const struct mt_help *help)
{
    memset(a, 0, sizeof(*a));
    a->argc = argc;
    a->argv = argv;
    a->i = 1;
    a->help = help;
}

static int find_long(const struct mt_opt *opts, const char *name, size_t len)
{
    for (int k = 0; opts && opts[k].name; k++)
        if (strlen(opts[k].name) == len && memcmp(opts[k].name, name, len) == 0)
            return k;
    return -1;
}

static int find_short(const struct mt_opt *opts, char c)
{
    for (int k = 0; opts && opts[k].name; k++)
        if (opts[k].short_name == c)
            return k;
    return -1;
}

int mt_args_next(struct mt_args *a, const char **value)
{
    const struct mt_opt *opts = a->help->opts;
    const char *cmd = a->help->cmd;

    *value = NULL;
    if (a->i >= a->argc)
        return MT_OPT_END;
    char *arg = a->argv[a->i++];
    if (a->only_positional || arg[0] != '-' || arg[1] == '\0') {
        if (a->stop_at_positional)
            a->only_positional = 1;
        *value = arg;
        return MT_OPT_POSITIONAL;
    }
    if (strcmp(arg, "--") == 0) {
        a->only_positional = 1;
        return mt_args_next(a, value);
    }
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
        return MT_OPT_HELP;

    int k;
    const char *inline_val = NULL;
    if (arg[1] == '-') {
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        k = find_long(opts, name, len);
        if (k < 0) {
            mt_usage_error(cmd, "unknown option '%.*s' for '%s'", (int)(len + 2), arg, cmd);
            return MT_OPT_ERROR;
        }
        if (eq) {
            if (!opts[k].arg) {
                mt_usage_error(cmd, "option '--%s' of '%s' takes no value", opts[k].name, cmd);
                return MT_OPT_ERROR;
            }
            inline_val = eq + 1;
        }
    } else {
        k = find_short(opts, arg[1]);
        if (k < 0) {
            mt_usage_error(cmd, "unknown option '-%c' for '%s'", arg[1], cmd);
            return MT_OPT_ERROR;
        }
        if (arg[2] != '\0') {
            if (!opts[k].arg) {
                mt_usage_error(cmd, "option '-%c' of '%s' takes no value", arg[1], cmd);
                return MT_OPT_ERROR;
            }
            inline_val = arg + 2;
        }
    }
    if (opts[k].arg) {
        if (!inline_val) {
            if (a->i >= a->argc) {
                mt_usage_error(cmd, "option '--%s' of '%s' needs a value (%s)", opts[k].name, cmd,
                               opts[k].arg);
                return MT_OPT_ERROR;
            }
            inline_val = a->argv[a->i++];
        }
        *value = inline_val;
    }
    return k;
}

void mt_help_print(FILE *f, const struct mt_help *h)
{
    fprintf(f, "usage: %s\n\n%s\n", h->usage, h->text);
    fputs("\noptions:\n", f);
    for (int k = 0; h->opts && h->opts[k].name; k++) {
        const struct mt_opt *o = &h->opts[k];
        char left[64];
        if (o->short_name)
            snprintf(left, sizeof(left), "-%c, --%s%s%s", o->short_name, o->name, o->arg ? " " : "",
                     o->arg ? o->arg : "");
        else
            snprintf(left, sizeof(left), "    --%s%s%s", o->name, o->arg ? " " : "",
                     o->arg ? o->arg : "");
        fprintf(f, "  %-22s %s\n", left, o->help);
    }
    fprintf(f, "  %-22s %s\n", "-h, --help", "show this help");
}

int mt_parse_int(const char *cmd, const char *opt, const char *value, long long min, long long max,
                 long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (value[0] == '\0' || *end != '\0' || errno == ERANGE || v < min || v > max)
        return mt_usage_error(
            cmd, "invalid value '%s' for --%s of '%s': expected an integer from %lld to %lld",
            value, opt, cmd, min, max);
    *out = v;
    return 0;
}

const char *mt_fmt_bytes(char *buf, size_t size, uint64_t bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    /* Switch units where the rounded figure would read 1024.0. */
    while (v >= 1023.95 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

const char *mt_fmt_duration(char *buf, size_t size, uint64_t ns)
{
    if (ns < 1000)
        snprintf(buf, size, "%" PRIu64 " ns", ns);
    else if (ns < 1000000)
        snprintf(buf, size, "%.1f us", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, size, "%.1f ms", (double)ns / 1e6);
    else
        snprintf(buf, size, "%.3f s", (double)ns / 1e9);
    return buf;
}

const char *mt_fmt_count(char *buf, size_t size, uint64_t n)
{
    char digits[32];
    int len = snprintf(digits, sizeof(digits), "%" PRIu64, n);
    size_t o = 0;
    for (int k = 0; k < len && o + 1 < size; k++) {
        if (k > 0 && (len - k) % 3 == 0 && o + 2 < size)
            buf[o++] = ',';
        buf[o++] = digits[k];
    }
    if (size)
        buf[o < size ? o : size - 1] = '\0';
    return buf;
}

const char *mt_fmt_utc(char *buf, size_t size, uint64_t epoch_ns)
{
    time_t secs = (time_t)(epoch_ns / 1000000000u);
    struct tm tm;
    if (!gmtime_r(&secs, &tm)) {
        snprintf(buf, size, "?");
        return buf;
    }
    char day[40];
    strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%s.%03uZ", day, (unsigned)(epoch_ns % 1000000000u / 1000000u));
    return buf;
}

struct memtrace_reader *mt_open(const char *path)
{
    struct memtrace_reader *r = NULL;
    struct memtrace_errinfo err;
    memset(&err, 0, sizeof(err));
    int rc = memtrace_reader_open(&r, path, &err);
    if (rc < 0 || !r) {
        if (err.text[0])
            mt_error("%s", err.text);
        else
            mt_error("%s: %s", path, memtrace_strerror(rc));
        return NULL;
    }
    return r;
}

int mt_read_failed(struct memtrace_reader *r, const char *path)
{
    const struct memtrace_errinfo *e = memtrace_reader_error(r);
    if (e && e->text[0])
        mt_error("%s", e->text);
    else
        mt_error("%s: %s", path, memtrace_strerror(e ? e->code : MEMTRACE_EFORMAT));
    return MT_EXIT_FAIL;
}

void mt_warn_if_truncated(struct memtrace_reader *r, const char *path, uint64_t events)
{
    if (!memtrace_reader_truncated(r))
        return;
    char n[32];
    mt_error("warning: %s is truncated (no end record): showing the %s events before byte %" PRIu64,
             path, mt_fmt_count(n, sizeof(n), events), memtrace_reader_offset(r));
}

#define MT_PROGRESS_MIN_BYTES (50u * 1000u * 1000u)

void mt_progress_init(struct mt_progress *p, struct memtrace_reader *r, const char *label,
                      uint64_t limit_events)
{
    memset(p, 0, sizeof(*p));
    p->r = r;
    p->label = label;
    p->total = memtrace_reader_file_size(r);
    p->limit_events = limit_events;
    p->last_pct = -1;
    p->enabled = p->total > MT_PROGRESS_MIN_BYTES && isatty(STDERR_FILENO);
}

void mt_progress_update(struct mt_progress *p, uint64_t events)
{
    /* Checked every 64Ki events: cheap enough to leave in the read loops. */
    if (!p->enabled || (events & 0xffff) != 0)
        return;
    int pct;
    if (p->limit_events)
        pct = (int)(events * 100 / p->limit_events);
    else
        pct = p->total ? (int)(memtrace_reader_offset(p->r) * 100 / p->total) : 0;
    if (pct > 100)
        pct = 100;
    if (pct == p->last_pct)
        return;
    p->last_pct = pct;
    fprintf(stderr, "\rmemtrace: %s %3d%%", p->label, pct);
    fflush(stderr);
}

void mt_progress_done(struct mt_progress *p)
{
    if (p->enabled && p->last_pct >= 0)
        fputs("\r\033[K", stderr);
    p->last_pct = -1;
}

const char *mt_frame_text(char *buf, size_t size, const struct memtrace_frame *fr)
{
    int n;
    if (fr->symbol && fr->symbol[0])
        n = snprintf(buf, size, "%s", fr->symbol);
    else if (fr->module && fr->module[0])
        n = snprintf(buf, size, "%s+0x%" PRIx64, fr->module, fr->offset);
    else
        n = snprintf(buf, size, "0x%" PRIx64, fr->ip);
    if (n >= 0 && (size_t)n < size && fr->file && fr->file[0]) {
        if (fr->line)
            snprintf(buf + n, size - (size_t)n, " at %s:%u", fr->file, (unsigned)fr->line);
        else
            snprintf(buf + n, size - (size_t)n, " at %s", fr->file);
    }
    return buf;
}

#define MT_STACK_MAX 4096

static int stack_frames(const struct memtrace_reader *r, uint32_t stack, int depth, uint32_t *ids,
                        int *total)
{
    int max = depth < 0 || depth > MT_STACK_MAX ? MT_STACK_MAX : depth;
    *total = stack ? memtrace_reader_stack(r, stack, ids, max) : 0;
    return *total < max ? *total : max;
}

void mt_stack_print(FILE *f, const struct memtrace_reader *r, uint32_t stack, int depth,
                    const char *indent)
{
    static uint32_t ids[MT_STACK_MAX];
    int total;
    int n = stack_frames(r, stack, depth, ids, &total);
    if (total == 0) {
        fprintf(f, "%s(no stack)\n", indent);
        return;
    }
    for (int k = 0; k < n; k++) {
        const struct memtrace_frame *fr = memtrace_reader_frame(r, ids[k]);
        char text[1200];
        if (fr)
            fprintf(f, "%s#%-2d %s\n", indent, k, mt_frame_text(text, sizeof(text), fr));
        else
            fprintf(f, "%s#%-2d (unknown frame %u)\n", indent, k, (unsigned)ids[k]);
    }
    if (total > n)
        fprintf(f, "%s... %d more frames\n", indent, total - n);
}

json_t *mt_stack_json(const struct memtrace_reader *r, uint32_t stack, int depth)
{
    static uint32_t ids[MT_STACK_MAX];
    int total;
    int n = stack_frames(r, stack, depth, ids, &total);
    json_t *arr = json_array();
    for (int k = 0; k < n; k++) {
        const struct memtrace_frame *fr = memtrace_reader_frame(r, ids[k]);
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(ids[k]));
        if (fr) {
            char ip[32];
            snprintf(ip, sizeof(ip), "0x%" PRIx64, fr->ip);
            json_object_set_new(o, "ip", json_string(ip));
            json_object_set_new(o, "symbol", json_string(fr->symbol ? fr->symbol : ""));
            json_object_set_new(o, "module", json_string(fr->module ? fr->module : ""));
            json_object_set_new(o, "offset", mt_json_u64(fr->offset));
            json_object_set_new(o, "file", json_string(fr->file ? fr->file : ""));
            json_object_set_new(o, "line", json_integer(fr->line));
        }
        json_array_append_new(arr, o);
    }
    return arr;
}

int mt_json_print(json_t *obj)
{
    int rc = json_dumpf(obj, stdout, JSON_INDENT(2));
    json_decref(obj);
    if (rc != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
        mt_error("cannot write the JSON output: %s", strerror(errno));
        return MT_EXIT_FAIL;
    }
    return MT_EXIT_OK;
}

json_t *mt_json_u64(uint64_t v)
{
    return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

static int json_u64(json_t *o, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v) && json_integer_value(v) > 0) {
        *out = (uint64_t)json_integer_value(v);
        return 1;
    }
    if (json_is_real(v) && json_real_value(v) > 0) {
        *out = (uint64_t)json_real_value(v);
        return 1;
    }
    return 0;
}

int mt_meta_clock(json_t *meta, uint64_t *wall_ns, uint64_t *mono_ns)
{
    *wall_ns = 0;
    *mono_ns = 0;
    if (!json_is_object(meta))
        return 0;
    if (!json_u64(meta, "start_time_ns", wall_ns) && !json_u64(meta, "start_wall_ns", wall_ns))
        return 0;
    if (!json_u64(meta, "start_mono_ns", mono_ns) && !json_u64(meta, "start_monotonic_ns", mono_ns))
        *mono_ns = 0;
    return 1;
}
