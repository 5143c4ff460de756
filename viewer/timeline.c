/* timeline.c: `memtrace timeline FILE`: allocated, reserved and device-reported
 * memory over time, as a terminal chart, CSV or JSON.
 *
 * One pass over the shared replay model (snapshot/replay.h), nothing per event kept:
 * each series holds N buckets of equal width W from the first event on, and a bucket
 * holds the highest level the series had during its interval. When an event falls
 * past the last bucket, neighbouring buckets merge pairwise and W doubles, so a short
 * spike is never lost between two points. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "replay.h"

static long long npoints, height = 8;
static const char *format;
static int json;
static struct cli_filter_opts fo;

static const struct cli_opt timeline_opts[] = {
    CLI_OPTION_INT('n', "points", &npoints, "N", 2, 1000000,
                   "cut the time axis into N buckets (default 100 for csv and json, the "
                   "terminal's width for the chart)"),
    CLI_OPTION_STRING('f', "format", &format, "FMT", "chart (default), csv or json"),
    CLI_OPTION_BOOL('j', "json", &json, "the same as --format json"),
    CLI_OPTION_BOOL(0, "bytes", &cli_exact_bytes, "print the chart's sizes in bytes"),
    CLI_OPTION_INT(0, "height", &height, "N", 2, 100, "draw the chart N rows high (default 8)"),
    CLI_FILTER_OPTIONS(&fo),
    CLI_OPTION_END,
};

static const struct cli_help timeline_help = {
    "timeline",
    "memtrace timeline FILE... [--points N] [--format chart|csv|json] [--bytes] [filters]",
    "Replays FILE once and follows, over time: allocated bytes (live blocks, up at\n"
    "'alloc', down at 'free_completed'), reserved bytes (live segments), and for each\n"
    "device with counter events the used bytes the device itself reported.\n"
    "\n"
    "The time axis starts at the first event (of the --from window) and is cut into\n"
    "buckets of W nanoseconds, W a power of two: the smallest with which N buckets\n"
    "reach the last event. Point i covers [i*W, (i+1)*W) after the first event, and\n"
    "its value is the HIGHEST level the series had at any moment in that interval:\n"
    "the level carried in at its start and the level after each event inside it. So\n"
    "a spike shorter than a bucket still shows, at its full height. As W doubles\n"
    "while the recording outgrows the buckets, between N/2 and N points come out\n"
    "(fewer when the file spans fewer than N ns). The chart draws one character per\n"
    "point and series ('a' allocated, 'r' reserved, the device's digit for used)\n"
    "and marks each series' peak under the time axis; csv prints offset_ns (the\n"
    "start of the point) and one column per series; json prints one object.\n"
    "\n"
    "With several files (one per rank or process), the chart of each in turn, then one\n"
    "line per file with the rank of its metadata and its peak of allocated bytes, and\n"
    "the totals; json holds each file's object in files[]; csv takes one file.",
    timeline_opts,
    0,
};

struct series {
    const char *name; /* "allocated", "reserved", "used" */
    int32_t device;   /* for "used" */
    char mark;
    uint64_t *b;
    uint64_t last;
    uint64_t peak, peak_off;
    uint64_t total; /* "used": the device's total memory */
};

struct tl {
    size_t k;        /* buckets */
    size_t top;      /* highest bucket touched */
    uint64_t w;      /* bucket width, ns: a power of two */
    unsigned wshift; /* log2(w): an event's bucket is a shift, not a division */
    uint64_t t0;     /* time of the first bucketed event */
    int started;
    struct series *s;
    size_t ns;
};

static struct series *add_series(struct tl *t, const char *name, int32_t device, char mark)
{
    struct series *v = realloc(t->s, (t->ns + 1) * sizeof(*v));
    if (!v)
        return NULL;
    t->s = v;
    struct series *s = &v[t->ns];
    memset(s, 0, sizeof(*s));
    s->b = calloc(t->k, sizeof(*s->b));
    if (!s->b)
        return NULL;
    s->name = name;
    s->device = device;
    s->mark = mark;
    t->ns++;
    return s;
}

static void merge(struct tl *t)
{
    for (size_t j = 0; j < t->ns; j++) {
        uint64_t *b = t->s[j].b;
        for (size_t i = 0; i < t->k; i++) {
            uint64_t v = b[i];
            if (i % 2 == 0 || v > b[i / 2])
                b[i / 2] = v;
        }
        memset(b + (t->k + 1) / 2, 0, (t->k - (t->k + 1) / 2) * sizeof(*b));
    }
    t->top /= 2;
    t->w *= 2;
    t->wshift++;
}

/* Series s takes level v in bucket idx, off ns after the first event. */
static inline void bump(struct series *s, size_t idx, uint64_t v, uint64_t off)
{
    if (v > s->b[idx])
        s->b[idx] = v;
    if (v > s->peak) {
        s->peak = v;
        s->peak_off = off;
    }
    s->last = v;
}

/* Puts the levels after the event at time `time` into its bucket. */
static void put(struct tl *t, uint64_t time, const uint64_t *levels)
{
    if (!t->started) {
        t->started = 1;
        t->t0 = time;
        t->w = 1;
        t->wshift = 0;
        t->top = 0;
        for (size_t j = 0; j < t->ns; j++)
            t->s[j].b[0] = t->s[j].last;
    }
    uint64_t off = time > t->t0 ? time - t->t0 : 0;
    while ((off >> t->wshift) >= t->k)
        merge(t);
    size_t idx = (size_t)(off >> t->wshift);
    for (size_t j = 0; j < t->ns; j++) {
        struct series *s = &t->s[j];
        for (size_t i = t->top + 1; i <= idx; i++)
            s->b[i] = s->last;
        bump(s, idx, levels[j], off);
    }
    if (idx > t->top)
        t->top = idx;
}

static int collect(struct mt_replay *rp, struct tl *t)
{
    uint64_t *levels = NULL;
    size_t cap = 0;
    struct cli_progress prog;
    cli_progress_init(&prog, rp->r, "timeline", 0);
    int rc;
    while ((rc = mt_replay_next(rp)) == 1) {
        cli_progress_update(&prog, rp->events);
        /* Most events land in the bucket of the one before, with no device series:
         * only the two levels to take, without the general put(). */
        if (t->ns == 2 && t->started && rp->in_window && rp->ev->action != MEMTRACE_COUNTER) {
            uint64_t time = rp->ev->time_ns, off = time > t->t0 ? time - t->t0 : 0;
            if ((off >> t->wshift) == t->top) {
                bump(&t->s[0], t->top, rp->allocated.cur, off);
                bump(&t->s[1], t->top, rp->reserved.cur, off);
                continue;
            }
        }
        if (rp->ev->action == MEMTRACE_COUNTER) {
            size_t j;
            for (j = 2; j < t->ns && t->s[j].device != rp->ev->device; j++)
                ;
            if (j == t->ns) {
                char mark = (char)('0' + (rp->ev->device < 0 ? 0 : rp->ev->device % 10));
                if (!add_series(t, "used", rp->ev->device, rp->ev->device < 0 ? 'h' : mark)) {
                    rc = MEMTRACE_ENOMEM;
                    break;
                }
            }
            t->s[j].total = rp->ev->size;
        }
        if (t->ns > cap) {
            uint64_t *l = realloc(levels, t->ns * sizeof(*l));
            if (!l) {
                rc = MEMTRACE_ENOMEM;
                break;
            }
            levels = l;
            cap = t->ns;
        }
        levels[0] = rp->allocated.cur;
        levels[1] = rp->reserved.cur;
        for (size_t j = 2; j < t->ns; j++) {
            const struct mt_devlevel *d = mt_replay_device(rp, t->s[j].device);
            levels[j] = d ? d->used : 0;
        }
        if (rp->in_window)
            put(t, rp->ev->time_ns, levels);
        else
            for (size_t j = 0; j < t->ns; j++)
                t->s[j].last = levels[j];
    }
    cli_progress_done(&prog);
    free(levels);
    if (rc == MEMTRACE_ENOMEM && memtrace_reader_error(rp->r)->code == 0) {
        cli_error("out of memory while replaying %s", rp->path);
        return CLI_EXIT_FAIL;
    }
    return cli_replay_done_cli(rp, rc);
}

static size_t points_of(const struct tl *t)
{
    return t->started ? t->top + 1 : 0;
}

static void column_name(char *buf, size_t size, const struct series *s)
{
    if (strcmp(s->name, "used") == 0)
        snprintf(buf, size, "device%" PRId32 "_used_bytes", s->device);
    else
        snprintf(buf, size, "%s_bytes", s->name);
}

static int print_csv(const struct tl *t)
{
    char name[64];
    fputs("offset_ns", stdout);
    for (size_t j = 0; j < t->ns; j++) {
        column_name(name, sizeof(name), &t->s[j]);
        printf(",%s", name);
    }
    putchar('\n');
    for (size_t i = 0; i < points_of(t); i++) {
        printf("%" PRIu64, (uint64_t)i * t->w);
        for (size_t j = 0; j < t->ns; j++)
            printf(",%" PRIu64, t->s[j].b[i]);
        putchar('\n');
    }
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

static json_t *timeline_json(const char *path, const struct tl *t)
{
    json_t *j = json_object();
    json_object_set_new(j, "file", cli_json_str(path));
    json_object_set_new(j, "start_time_ns", cli_json_u64(t->started ? t->t0 : 0));
    json_object_set_new(j, "bucket_ns", cli_json_u64(t->started ? t->w : 0));
    json_object_set_new(j, "points", cli_json_u64(points_of(t)));
    json_t *offs = json_array();
    for (size_t i = 0; i < points_of(t); i++)
        json_array_append_new(offs, cli_json_u64((uint64_t)i * t->w));
    json_object_set_new(j, "offsets_ns", offs);
    json_t *arr = json_array();
    for (size_t k = 0; k < t->ns; k++) {
        const struct series *s = &t->s[k];
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(s->name));
        int used = strcmp(s->name, "used") == 0;
        json_object_set_new(o, "device", used ? json_integer(s->device) : json_null());
        if (used)
            json_object_set_new(o, "total_bytes", cli_json_u64(s->total));
        json_object_set_new(o, "peak_bytes", cli_json_u64(s->peak));
        json_object_set_new(o, "peak_offset_ns", cli_json_u64(s->peak_off));
        json_t *v = json_array();
        for (size_t i = 0; i < points_of(t); i++)
            json_array_append_new(v, cli_json_u64(s->b[i]));
        json_object_set_new(o, "values", v);
        json_array_append_new(arr, o);
    }
    json_object_set_new(j, "series", arr);
    return j;
}

static int print_chart(const char *path, const struct tl *t)
{
    char a[64], b[64];
    size_t n = points_of(t);
    printf("memory of %s over %s\n", path,
           cli_fmt_duration(a, sizeof(a), n ? (uint64_t)n * t->w : 0));
    if (n == 0) {
        printf("no events\n");
        return CLI_EXIT_OK;
    }
    uint64_t max = 0;
    for (size_t j = 0; j < t->ns; j++)
        if (t->s[j].peak > max)
            max = t->s[j].peak;
    size_t h = (size_t)height;
    char *row = malloc(n + 1);
    if (!row) {
        cli_error("out of memory while drawing the timeline of %s", path);
        return CLI_EXIT_FAIL;
    }
    for (size_t r = h; r-- > 0;) {
        memset(row, ' ', n);
        row[n] = '\0';
        /* Later series draw over earlier ones: used, reserved, then allocated. */
        for (size_t j = t->ns; j-- > 0;) {
            const struct series *s = &t->s[j];
            for (size_t i = 0; i < n; i++) {
                uint64_t v = s->b[i];
                if (v == 0 || max == 0)
                    continue;
                /* Row ceil(v * h / max) - 1: the top row holds the maximum. */
                double x = (double)v * (double)h / (double)max;
                size_t c = (size_t)x;
                if ((double)c < x)
                    c++;
                if (c - 1 == r)
                    row[i] = s->mark;
            }
        }
        const char *label = r == h - 1 ? cli_fmt_bytes(a, sizeof(a), max) : r == 0 ? "0" : "";
        printf("%12s |%s\n", label, row);
    }
    memset(row, '-', n);
    printf("%12s +%s\n", "", row);
    /* The time axis: start, middle and end of the points. */
    memset(row, ' ', n);
    char mid[64], end[64];
    snprintf(a, sizeof(a), "0");
    snprintf(mid, sizeof(mid), "+%s", cli_fmt_duration(b, sizeof(b), (uint64_t)(n / 2) * t->w));
    snprintf(end, sizeof(end), "+%s", cli_fmt_duration(b, sizeof(b), (uint64_t)n * t->w));
    memcpy(row, a, strlen(a) < n ? strlen(a) : n);
    if (strlen(mid) + n / 2 < n && n / 2 > strlen(a) + 1)
        memcpy(row + n / 2, mid, strlen(mid));
    if (strlen(end) < n && n - strlen(end) > n / 2 + strlen(mid))
        memcpy(row + n - strlen(end), end, strlen(end));
    printf("%12s  %s\n", "", row);
    /* Peak markers. */
    memset(row, ' ', n);
    for (size_t j = 0; j < t->ns; j++) {
        size_t i = (size_t)(t->s[j].peak_off / t->w);
        if (t->s[j].peak && i < n)
            row[i] = row[i] == ' ' ? '^' : '*';
    }
    printf("%12s  %s\n", "peaks (^)", row);
    for (size_t j = 0; j < t->ns; j++) {
        const struct series *s = &t->s[j];
        char name[48];
        if (strcmp(s->name, "used") == 0)
            snprintf(name, sizeof(name), "device %" PRId32 " used", s->device);
        else
            snprintf(name, sizeof(name), "%s", s->name);
        printf("  %c %-16s peak %s at +%s", s->mark, name, cli_fmt_bytes(a, sizeof(a), s->peak),
               cli_fmt_duration(b, sizeof(b), s->peak_off));
        if (s->total)
            printf(" of %s", cli_fmt_bytes(a, sizeof(a), s->total));
        putchar('\n');
    }
    printf("  each point: the highest level in %s\n", cli_fmt_duration(a, sizeof(a), t->w));
    free(row);
    return CLI_EXIT_OK;
}

static long long terminal_points(void)
{
    struct winsize ws;
    long long cols = 80;
    const char *env = getenv("COLUMNS");
    if (env && atoll(env) > 0)
        cols = atoll(env);
    else if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col)
        cols = ws.ws_col;
    return cols > 24 ? cols - 15 : 10;
}

enum tl_format { CHART, CSV, JSON };
static enum tl_format fmt;
static struct mt_filter filter;

/* One file: its own output, and its peak of allocated memory for the table of several. */
static int timeline_file(const char *path, struct cli_file_part *part)
{
    struct tl t = {.k = (size_t)(npoints ? npoints : fmt == CHART ? terminal_points() : 100)};
    int status = CLI_EXIT_FAIL;
    struct mt_replay *rp = cli_replay_open_cli(path, &filter);
    if (!rp)
        return CLI_EXIT_FAIL;
    rp->lean = 1;
    if (!add_series(&t, "allocated", 0, 'a') || !add_series(&t, "reserved", 0, 'r')) {
        cli_error("out of memory while replaying %s", path);
        goto out;
    }
    status = collect(rp, &t);
    if (status != CLI_EXIT_OK)
        goto out;
    cli_file_part_fill(part, rp);
    part->bytes = rp->allocated.peak;
    if (fmt == CSV)
        status = print_csv(&t);
    else if (fmt == JSON)
        part->json = timeline_json(path, &t);
    else
        status = print_chart(path, &t);
out:
    for (size_t j = 0; j < t.ns; j++)
        free(t.s[j].b);
    free(t.s);
    mt_replay_close(rp);
    return status;
}

int cli_cmd_timeline(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    int rc = cli_options_parse(argc, argv, &timeline_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (npos == 0)
        return cli_usage_error("timeline", "'timeline' needs a FILE argument");
    fmt = json ? JSON : CHART;
    if (format && strcmp(format, "csv") == 0)
        fmt = CSV;
    else if (format && strcmp(format, "json") == 0)
        fmt = JSON;
    else if (format && strcmp(format, "chart") != 0)
        return cli_usage_error("timeline", "unknown format '%s' for --format: chart, csv or json",
                               format);
    if (json && format && fmt != JSON)
        return cli_usage_error("timeline", "--json and --format %s disagree", format);
    if (fmt == CSV && npos > 1)
        return cli_usage_error("timeline", "CSV holds one file: give one, or --format json for "
                                           "several");
    if ((rc = cli_filter_from_opts("timeline", &fo, 1, &filter)) != 0)
        return rc;
    if (npos > 1)
        return cli_run_files(pos, npos, fmt == JSON, "peak allocated", timeline_file);
    struct cli_file_part part = {.path = pos[0]};
    int status = timeline_file(pos[0], &part);
    if (status == CLI_EXIT_OK && part.json)
        status = cli_json_print(json_incref(part.json));
    json_decref(part.json);
    json_decref(part.rank);
    return status;
}
