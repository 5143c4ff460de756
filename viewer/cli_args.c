/* cli_args.c: the CLI's flags: parsing argv against a command's option table,
 * typed values written straight into the command's variables, --help generated from
 * the same table, and the one-line usage errors. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("memtrace: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
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
    return CLI_EXIT_USAGE;
}

void cli_args_init(struct cli_args *a, int argc, char **argv, const struct cli_help *help)
{
    memset(a, 0, sizeof(*a));
    a->argc = argc;
    a->argv = argv;
    a->i = 1;
    a->help = help;
}

static int find_long(const struct cli_opt *opts, const char *name, size_t len)
{
    for (int k = 0; opts && opts[k].name; k++)
        if (strlen(opts[k].name) == len && memcmp(opts[k].name, name, len) == 0)
            return k;
    return -1;
}

static int find_short(const struct cli_opt *opts, char c)
{
    for (int k = 0; opts && opts[k].name; k++)
        if (opts[k].short_name == c)
            return k;
    return -1;
}

int cli_args_next(struct cli_args *a, const char **value)
{
    const struct cli_opt *opts = a->help->opts;
    const char *cmd = a->help->cmd;

    *value = NULL;
    if (a->i >= a->argc)
        return CLI_OPT_END;
    char *arg = a->argv[a->i++];
    if (a->only_positional || arg[0] != '-' || arg[1] == '\0') {
        if (a->stop_at_positional)
            a->only_positional = 1;
        *value = arg;
        return CLI_OPT_POSITIONAL;
    }
    if (strcmp(arg, "--") == 0) {
        a->only_positional = 1;
        return cli_args_next(a, value);
    }
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
        return CLI_OPT_HELP;

    int k;
    const char *inline_val = NULL;
    if (arg[1] == '-') {
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        k = find_long(opts, name, len);
        if (k < 0) {
            cli_usage_error(cmd, "unknown option '%.*s' for '%s'", (int)(len + 2), arg, cmd);
            return CLI_OPT_ERROR;
        }
        if (eq) {
            if (!opts[k].arg) {
                cli_usage_error(cmd, "option '--%s' of '%s' takes no value", opts[k].name, cmd);
                return CLI_OPT_ERROR;
            }
            inline_val = eq + 1;
        }
    } else {
        k = find_short(opts, arg[1]);
        if (k < 0) {
            cli_usage_error(cmd, "unknown option '-%c' for '%s'", arg[1], cmd);
            return CLI_OPT_ERROR;
        }
        if (arg[2] != '\0') {
            if (!opts[k].arg) {
                cli_usage_error(cmd, "option '-%c' of '%s' takes no value", arg[1], cmd);
                return CLI_OPT_ERROR;
            }
            inline_val = arg + 2;
        }
    }
    if (opts[k].arg) {
        if (!inline_val) {
            if (a->i >= a->argc) {
                cli_usage_error(cmd, "option '--%s' of '%s' needs a value (%s)", opts[k].name, cmd,
                                opts[k].arg);
                return CLI_OPT_ERROR;
            }
            inline_val = a->argv[a->i++];
        }
        *value = inline_val;
    }
    return k;
}

void cli_help_print(FILE *f, const struct cli_help *h)
{
    fprintf(f, "usage: %s\n\n%s\n", h->usage, h->text);
    fputs("\noptions:\n", f);
    for (int k = 0; h->opts && h->opts[k].name; k++) {
        const struct cli_opt *o = &h->opts[k];
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

int cli_parse_int(const char *cmd, const char *opt, const char *value, long long min, long long max,
                  long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (value[0] == '\0' || *end != '\0' || errno == ERANGE || v < min || v > max)
        return cli_usage_error(
            cmd, "invalid value '%s' for --%s of '%s': expected an integer from %lld to %lld",
            value, opt, cmd, min, max);
    *out = v;
    return 0;
}

/* "4096", "64K", "1.5M", "2G", "2GiB", "512B": bytes, binary units. */
static int parse_bytes(const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || v < 0 || v != v || text[0] == '-' || text[0] == '+')
        return -1;
    double mult = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mult = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mult = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mult = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 't':
    case 'T':
        mult = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default:
        break;
    }
    if (mult > 1 && (end[0] == 'i' || end[0] == 'I') && (end[1] == 'b' || end[1] == 'B'))
        end += 2;
    else if (end[0] == 'b' || end[0] == 'B')
        end++;
    if (*end != '\0' || v * mult >= 1.8e19)
        return -1;
    *out = (uint64_t)(v * mult);
    return 0;
}

static int store(const char *cmd, const struct cli_opt *o, const char *v)
{
    switch (o->type) {
    case CLI_T_BOOL:
        *(int *)o->value = 1;
        return 0;
    case CLI_T_INT:
        return cli_parse_int(cmd, o->name, v, o->min, o->max, (long long *)o->value);
    case CLI_T_STR:
        *(const char **)o->value = v;
        return 0;
    case CLI_T_BYTES:
        if (parse_bytes(v, (uint64_t *)o->value) == 0)
            return 0;
        return cli_usage_error(cmd,
                               "invalid size '%s' for --%s of '%s': expected bytes like 4096, "
                               "64K, 1.5M or 2G",
                               v, o->name, cmd);
    case CLI_T_POINT:
        if (mt_point_parse(v, (struct mt_point *)o->value) == 0)
            return 0;
        return cli_usage_error(cmd,
                               "invalid point '%s' for --%s of '%s': expected a time (1.5s, "
                               "20ms, 300us, 900ns), an event index (#123) or a name",
                               v, o->name, cmd);
    default:
        return cli_usage_error(cmd, "option '--%s' of '%s' is not handled", o->name, cmd);
    }
}

int cli_options_parse(int argc, char **argv, const struct cli_help *h, char **pos, int *npos)
{
    struct cli_args a;
    const char *v;
    int k;
    *npos = 0;
    cli_args_init(&a, argc, argv, h);
    a.stop_at_positional = h->stop_at_command;
    while ((k = cli_args_next(&a, &v)) != CLI_OPT_END) {
        if (k == CLI_OPT_HELP) {
            cli_help_print(stdout, h);
            return -1;
        }
        if (k == CLI_OPT_ERROR)
            return CLI_EXIT_USAGE;
        if (k == CLI_OPT_POSITIONAL) {
            pos[(*npos)++] = (char *)v;
            continue;
        }
        if (store(h->cmd, &h->opts[k], v) != 0)
            return CLI_EXIT_USAGE;
    }
    return 0;
}

int cli_filter_from_opts(const char *cmd, const struct cli_filter_opts *fo, int window,
                         struct mt_filter *f)
{
    memset(f, 0, sizeof(*f));
    char *end;
    if (fo->device) {
        errno = 0;
        long d = strtol(fo->device, &end, 10);
        if (!fo->device[0] || *end || errno || d < -1 || d > INT32_MAX)
            return cli_usage_error(cmd,
                                   "invalid device '%s' for --device of '%s': expected an "
                                   "index (0, 1, ...; -1 for host memory)",
                                   fo->device, cmd);
        f->has_device = 1;
        f->device = (int32_t)d;
    }
    if (fo->stream) {
        errno = 0;
        unsigned long long st = strtoull(fo->stream, &end, 0);
        if (!fo->stream[0] || fo->stream[0] == '-' || *end || errno)
            return cli_usage_error(cmd,
                                   "invalid stream '%s' for --stream of '%s': expected a "
                                   "number (0 for the default stream, or 0x7f...)",
                                   fo->stream, cmd);
        f->has_stream = 1;
        f->stream = st;
    }
    f->category = fo->category;
    f->min_size = fo->min_size;
    f->from = fo->from;
    f->to = fo->to;
    if (window && f->from.kind == f->to.kind &&
        (f->from.kind == MT_POINT_TIME || f->from.kind == MT_POINT_EVENT) &&
        f->from.value > f->to.value)
        return cli_usage_error(cmd, "--from comes after --to: the window of '%s' would be empty",
                               cmd);
    return 0;
}
