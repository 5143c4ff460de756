/* summary.c: `memtrace summary FILE`: peaks, totals and the stacks alive at the peak.
 *
 * One pass of the shared replay model (snapshot/replay.h), so memory follows live
 * allocations and distinct stacks, never the number of events. The stacks alive at the
 * peak come from the model's per-stack tallies, which keep each stack's figures as
 * they were at the latest peak: no second pass is needed to find them. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "replay.h"

static int json;
static long long ntop = 10, depth = 16;

static const struct cli_opt summary_opts[] = {
    CLI_OPTION_BOOL('j', "json", &json, "print one JSON object (bytes and ns) instead of text"),
    CLI_OPTION_INT('n', "top", &ntop, "N", 0, 1000000000,
                   "show the N largest stacks alive at the peak (default 10, 0: all)"),
    CLI_OPTION_INT('d', "depth", &depth, "N", 0, 4096,
                   "show at most N frames of each stack (default 16, 0: all)"),
    CLI_FRAMES_OPTION,
    CLI_OPTION_BOOL(0, "bytes", &cli_exact_bytes, "print sizes in bytes, not KiB, MiB, GiB"),
    CLI_OPTION_END,
};

static const struct cli_help summary_help = {
    "summary",
    "memtrace summary FILE [--json] [--top N] [--depth N] [--all-frames] [--bytes]\n"
    "       memtrace summary FILE1 FILE2... [--json] [--bytes]",
    "Replays the events of FILE. Allocated bytes rise on 'alloc' and fall on\n"
    "'free_completed' of a live block (a free of an unknown address is counted as\n"
    "unmatched); reserved bytes rise on 'segment_alloc' and 'segment_map' and fall on\n"
    "'segment_free' and 'segment_unmap'. Prints the peaks of both with their times,\n"
    "totals, what is live at the end, annotations and OOM events, then the stacks\n"
    "holding the most bytes at the peak of allocated memory (of reserved memory when\n"
    "the file has no block events), innermost frame first.\n\n"
    "With several files (one per rank or process), prints one line per file with the\n"
    "rank from its metadata, its events, peaks and what was allocated at its end, and\n"
    "the totals.",
    summary_opts,
    0,
};

struct group {
    uint32_t stack;
    uint64_t bytes, count;
};

static int group_cmp(const void *pa, const void *pb)
{
    const struct group *a = pa, *b = pb;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return a->stack < b->stack ? -1 : a->stack > b->stack;
}

struct top {
    const char *of; /* "allocated", "reserved", or NULL when nothing was live */
    uint64_t event, time, bytes, live_count;
    struct group *groups;
    size_t ngroups;
};

/* The stacks live at the peak, from the tallies the replay kept of them. */
static int group_at_peak(const struct mt_replay *rp, struct top *top)
{
    memset(top, 0, sizeof(*top));
    int blocks = rp->allocs.count > 0;
    const struct mt_level *l = blocks ? &rp->allocated : &rp->reserved;
    const struct mt_tallies *ts = blocks ? &rp->block_stacks : &rp->seg_stacks;
    if (l->peak == 0)
        return CLI_EXIT_OK;
    top->of = blocks ? "allocated" : "reserved";
    top->event = l->peak_index;
    top->time = l->peak_time;
    top->bytes = l->peak;
    top->groups = calloc(ts->n ? ts->n : 1, sizeof(*top->groups));
    if (!top->groups) {
        cli_error("out of memory while grouping the stacks of %s", rp->path);
        return CLI_EXIT_FAIL;
    }
    for (size_t k = 0; k < ts->n; k++) {
        uint64_t bytes, count;
        mt_tally_at_peak(ts, l, (uint32_t)k, &bytes, &count);
        if (count == 0)
            continue;
        top->groups[top->ngroups++] =
            (struct group){.stack = (uint32_t)k, .bytes = bytes, .count = count};
        top->live_count += count;
    }
    qsort(top->groups, top->ngroups, sizeof(*top->groups), group_cmp);
    return CLI_EXIT_OK;
}

/* Replays path to the end: one pass, which the peak's stacks need no second one for. */
static int replay_file(const char *path, struct mt_replay **out, int *have_wall, uint64_t *wall0,
                       uint64_t *mono0)
{
    struct mt_replay *rp = cli_replay_open_cli(path, NULL);
    *out = NULL;
    if (!rp)
        return CLI_EXIT_FAIL;
    int status = cli_replay_run_cli(rp, "summary");
    if (status != CLI_EXIT_OK) {
        mt_replay_close(rp);
        return status;
    }
    const char *text = memtrace_reader_meta(rp->r);
    json_t *meta = text ? json_loads(text, 0, NULL) : NULL;
    *have_wall = cli_meta_clock(meta, wall0, mono0) && *mono0 != 0;
    json_decref(meta);
    *out = rp;
    return CLI_EXIT_OK;
}

struct out {
    const char *path;
    const struct mt_replay *rp;
    const struct top *top;
    const struct memtrace_reader *r;
    size_t ntop;
    int depth;
    int have_wall; /* the metadata gives the wall time of monotonic time mono0 */
    uint64_t wall0, mono0;
};

static uint64_t wall_of(const struct out *o, uint64_t t)
{
    return o->wall0 + (t - o->mono0);
}

static json_t *tally_json(const struct mt_count *t)
{
    json_t *o = json_object();
    json_object_set_new(o, "count", cli_json_u64(t->count));
    json_object_set_new(o, "bytes", cli_json_u64(t->bytes));
    return o;
}

static json_t *level_json(const struct out *o, const struct mt_level *l, uint64_t live)
{
    char buf[64];
    json_t *j = json_object();
    json_object_set_new(j, "peak_bytes", cli_json_u64(l->peak));
    if (l->peak) {
        json_object_set_new(j, "peak_event", cli_json_u64(l->peak_index));
        json_object_set_new(j, "peak_time_ns", cli_json_u64(l->peak_time));
        json_object_set_new(j, "peak_offset_ns", cli_json_u64(l->peak_time - o->rp->t_min));
        json_object_set_new(
            j, "peak_time_utc",
            o->have_wall && l->peak_time >= o->mono0
                ? json_string(cli_fmt_utc(buf, sizeof(buf), wall_of(o, l->peak_time)))
                : json_null());
    } else {
        json_object_set_new(j, "peak_event", json_null());
        json_object_set_new(j, "peak_time_ns", json_null());
        json_object_set_new(j, "peak_offset_ns", json_null());
        json_object_set_new(j, "peak_time_utc", json_null());
    }
    json_object_set_new(j, "current_bytes", cli_json_u64(l->cur));
    json_object_set_new(j, "current_count", cli_json_u64(live));
    return j;
}

static int print_json(const struct out *o)
{
    const struct mt_replay *rp = o->rp, *f = rp;
    const struct top *top = o->top;
    json_t *j = json_object();
    json_object_set_new(j, "file", cli_json_str(o->path));
    json_object_set_new(j, "truncated", json_boolean(mt_replay_truncated(rp)));
    json_object_set_new(j, "events", cli_json_u64(f->events));
    json_object_set_new(j, "first_time_ns", cli_json_u64(f->events ? f->t_min : 0));
    json_object_set_new(j, "last_time_ns", cli_json_u64(f->events ? f->t_max : 0));
    json_object_set_new(j, "duration_ns", cli_json_u64(f->events ? f->t_max - f->t_min : 0));
    json_object_set_new(j, "allocated", level_json(o, &rp->allocated, rp->blocks.n));
    json_object_set_new(j, "reserved", level_json(o, &rp->reserved, rp->segs.n));
    json_object_set_new(j, "allocs", tally_json(&rp->allocs));
    json_object_set_new(j, "frees", tally_json(&rp->frees));
    json_object_set_new(j, "unmatched_frees", tally_json(&rp->unmatched_frees));
    json_object_set_new(j, "replaced_allocs", tally_json(&rp->replaced_allocs));
    json_object_set_new(j, "segment_allocs", tally_json(&rp->seg_allocs));
    json_object_set_new(j, "segment_frees", tally_json(&rp->seg_frees));
    json_object_set_new(j, "unmatched_segment_frees", tally_json(&rp->unmatched_seg_frees));
    json_object_set_new(j, "replaced_segments", tally_json(&rp->replaced_segs));
    json_object_set_new(j, "annotations", cli_json_u64(f->annotations));
    json_t *oom = json_object();
    json_object_set_new(oom, "count", cli_json_u64(f->ooms.count));
    json_object_set_new(oom, "largest_bytes", cli_json_u64(f->oom_largest));
    json_object_set_new(oom, "device_free_bytes", cli_json_u64(f->oom_free));
    json_object_set_new(j, "oom", oom);

    json_t *t = json_object();
    json_object_set_new(t, "of", top->of ? json_string(top->of) : json_null());
    json_object_set_new(t, "event", top->of ? cli_json_u64(top->event) : json_null());
    json_object_set_new(t, "time_ns", top->of ? cli_json_u64(top->time) : json_null());
    json_object_set_new(t, "bytes", cli_json_u64(top->bytes));
    json_object_set_new(t, "live_count", cli_json_u64(top->live_count));
    json_object_set_new(t, "distinct_stacks", cli_json_u64(top->ngroups));
    json_t *arr = json_array();
    for (size_t k = 0; k < o->ntop; k++) {
        const struct group *g = &top->groups[k];
        json_t *s = json_object();
        json_object_set_new(s, "stack", json_integer(g->stack));
        json_object_set_new(s, "bytes", cli_json_u64(g->bytes));
        json_object_set_new(s, "count", cli_json_u64(g->count));
        uint32_t none[1];
        json_object_set_new(
            s, "depth",
            json_integer(g->stack ? memtrace_reader_stack(o->r, g->stack, none, 0) : 0));
        json_object_set_new(s, "hidden_frames", json_integer(cli_stack_hidden(o->r, g->stack)));
        json_object_set_new(s, "frames", cli_stack_json(o->r, g->stack, o->depth));
        json_array_append_new(arr, s);
    }
    json_object_set_new(t, "stacks", arr);
    json_object_set_new(j, "top", t);
    return cli_json_print(j);
}

static void print_level(const struct out *o, const char *name, const struct mt_level *l)
{
    char a[64], b[64], c[64];
    if (!l->peak) {
        printf("peak %-15s 0 B (0 bytes)\n", name);
        return;
    }
    printf("peak %-15s %s (%" PRIu64 " bytes) at +%s (%" PRIu64 " ns", name,
           cli_fmt_bytes(a, sizeof(a), l->peak), l->peak,
           cli_fmt_duration(b, sizeof(b), l->peak_time - o->rp->t_min), l->peak_time);
    if (o->have_wall && l->peak_time >= o->mono0)
        printf(", %s", cli_fmt_utc(c, sizeof(c), wall_of(o, l->peak_time)));
    printf("), event %" PRIu64 "\n", l->peak_index);
}

static void print_tally(const char *name, const struct mt_count *t)
{
    char a[64], b[64];
    printf("%-20s %s (%s, %" PRIu64 " bytes)\n", name, cli_fmt_count(a, sizeof(a), t->count),
           cli_fmt_bytes(b, sizeof(b), t->bytes), t->bytes);
}

static void print_text(const struct out *o)
{
    const struct mt_replay *rp = o->rp, *f = rp;
    const struct top *top = o->top;
    char a[64], b[64], c[64], d[64];
    fputs("file                 ", stdout);
    cli_fputs_safe(o->path, stdout);
    puts(mt_replay_truncated(rp) ? " (truncated)" : "");
    printf("events               %s over %s\n", cli_fmt_count(a, sizeof(a), f->events),
           cli_fmt_duration(b, sizeof(b), f->events ? f->t_max - f->t_min : 0));
    print_level(o, "allocated", &rp->allocated);
    print_level(o, "reserved", &rp->reserved);
    print_tally("allocs", &rp->allocs);
    print_tally("frees", &rp->frees);
    if (rp->unmatched_frees.count)
        print_tally("unmatched frees", &rp->unmatched_frees);
    if (rp->replaced_allocs.count)
        print_tally("replaced allocs", &rp->replaced_allocs);
    print_tally("segment allocs", &rp->seg_allocs);
    print_tally("segment frees", &rp->seg_frees);
    if (rp->unmatched_seg_frees.count)
        print_tally("unmatched seg frees", &rp->unmatched_seg_frees);
    if (rp->replaced_segs.count)
        print_tally("replaced segments", &rp->replaced_segs);
    printf("at end               allocated %s (%" PRIu64
           " bytes) in %s blocks, reserved %s (%" PRIu64 " bytes) in %s segments\n",
           cli_fmt_bytes(a, sizeof(a), rp->allocated.cur), rp->allocated.cur,
           cli_fmt_count(b, sizeof(b), rp->blocks.n), cli_fmt_bytes(c, sizeof(c), rp->reserved.cur),
           rp->reserved.cur, cli_fmt_count(d, sizeof(d), rp->segs.n));
    printf("annotations          %s\n", cli_fmt_count(a, sizeof(a), f->annotations));
    if (f->ooms.count)
        printf("oom events           %s (largest request %s, device free %s)\n",
               cli_fmt_count(a, sizeof(a), f->ooms.count),
               cli_fmt_bytes(b, sizeof(b), f->oom_largest),
               cli_fmt_bytes(c, sizeof(c), f->oom_free));
    else
        printf("oom events           0\n");

    if (!top->of) {
        printf("\nNothing was allocated: no stacks to show.\n");
        return;
    }
    printf("\nTop %zu of %zu stacks alive at the peak of %s memory (event %" PRIu64
           ", %s in %s %s):\n",
           o->ntop, top->ngroups, top->of, top->event, cli_fmt_bytes(a, sizeof(a), top->bytes),
           cli_fmt_count(b, sizeof(b), top->live_count),
           strcmp(top->of, "allocated") == 0 ? "blocks" : "segments");
    for (size_t k = 0; k < o->ntop; k++) {
        const struct group *g = &top->groups[k];
        printf("\n%2zu. %s (%" PRIu64 " bytes) in %s %s, stack %u\n", k + 1,
               cli_fmt_bytes(a, sizeof(a), g->bytes), g->bytes,
               cli_fmt_count(b, sizeof(b), g->count), g->count == 1 ? "allocation" : "allocations",
               (unsigned)g->stack);
        cli_stack_print(stdout, o->r, g->stack, o->depth, "      ");
    }
}

/* Several files (one per rank or process): one line each, with the rank their
 * metadata gives, and the totals. Each file is replayed on its own, one at a time. */
struct file_row {
    const char *path;
    json_t *rank; /* from the metadata, or NULL */
    uint64_t events;
    struct mt_level allocated, reserved;
    int truncated;
};

static int summarise_files(char **paths, int n)
{
    struct file_row *rows = calloc((size_t)n, sizeof(*rows));
    if (!rows)
        return CLI_EXIT_FAIL;
    int status = CLI_EXIT_OK;
    for (int k = 0; k < n && status == CLI_EXIT_OK; k++) {
        struct mt_replay *rp = cli_replay_open_cli(paths[k], NULL);
        if (!rp) {
            status = CLI_EXIT_FAIL;
            break;
        }
        status = cli_replay_run_cli(rp, "summary");
        if (status == CLI_EXIT_OK) {
            const char *text = memtrace_reader_meta(rp->r);
            json_t *meta = text ? json_loads(text, 0, NULL) : NULL;
            json_t *rank = json_object_get(meta, "rank");
            rows[k] = (struct file_row){
                .path = paths[k],
                .rank = rank && !json_is_null(rank) ? json_incref(rank) : NULL,
                .events = rp->events,
                .allocated = rp->allocated,
                .reserved = rp->reserved,
                .truncated = mt_replay_truncated(rp),
            };
            json_decref(meta);
        }
        mt_replay_close(rp);
    }
    struct file_row total = {.path = "total"};
    for (int k = 0; k < n; k++) {
        total.events += rows[k].events;
        total.allocated.peak += rows[k].allocated.peak;
        total.allocated.cur += rows[k].allocated.cur;
        total.reserved.peak += rows[k].reserved.peak;
        total.reserved.cur += rows[k].reserved.cur;
    }
    if (status == CLI_EXIT_OK && json) {
        json_t *j = json_object(), *files = json_array();
        for (int k = 0; k <= n; k++) {
            const struct file_row *r = k < n ? &rows[k] : &total;
            json_t *o = json_object();
            if (k < n) {
                json_object_set_new(o, "file", cli_json_str(r->path));
                json_object_set_new(o, "rank", r->rank ? json_incref(r->rank) : json_null());
                json_object_set_new(o, "truncated", json_boolean(r->truncated));
            }
            json_object_set_new(o, "events", cli_json_u64(r->events));
            json_object_set_new(o, "peak_allocated_bytes", cli_json_u64(r->allocated.peak));
            json_object_set_new(o, "peak_reserved_bytes", cli_json_u64(r->reserved.peak));
            json_object_set_new(o, "current_allocated_bytes", cli_json_u64(r->allocated.cur));
            json_object_set_new(o, "current_reserved_bytes", cli_json_u64(r->reserved.cur));
            if (k < n)
                json_array_append_new(files, o);
            else
                json_object_set_new(j, "total", o);
        }
        json_object_set_new(j, "files", files);
        status = cli_json_print(j);
    } else if (status == CLI_EXIT_OK) {
        printf("%6s %12s %16s %16s %16s  %s\n", "rank", "events", "peak allocated", "peak reserved",
               "allocated at end", "file");
        for (int k = 0; k <= n; k++) {
            const struct file_row *r = k < n ? &rows[k] : &total;
            char rank[32] = "-", a[32], b[32], c[32], d[32];
            if (r->rank && json_is_integer(r->rank))
                snprintf(rank, sizeof(rank), "%" JSON_INTEGER_FORMAT, json_integer_value(r->rank));
            else if (r->rank)
                snprintf(rank, sizeof(rank), "?");
            if (k == n)
                rank[0] = '\0';
            printf("%6s %12s %16s %16s %16s  ", rank, cli_fmt_count(a, sizeof(a), r->events),
                   cli_fmt_bytes(b, sizeof(b), r->allocated.peak),
                   cli_fmt_bytes(c, sizeof(c), r->reserved.peak),
                   cli_fmt_bytes(d, sizeof(d), r->allocated.cur));
            cli_fputs_safe(r->path, stdout);
            puts(r->truncated ? " (truncated)" : "");
        }
        puts("\nThe total's peaks are the sum of each file's own peak: an upper bound of what\n"
             "the files held at one time, reached only if their peaks coincide.");
    }
    for (int k = 0; k < n; k++)
        json_decref(rows[k].rank);
    free(rows);
    return status;
}

int cli_summary_peaks(const char *path, struct cli_peaks *p)
{
    struct mt_replay *rp = cli_replay_open_cli(path, NULL);
    if (!rp)
        return CLI_EXIT_FAIL;
    int status = cli_replay_run_cli(rp, "summary");
    if (status == CLI_EXIT_OK) {
        p->events = rp->events;
        p->peak_allocated = rp->allocated.peak;
        p->peak_reserved = rp->reserved.peak;
        p->truncated = mt_replay_truncated(rp);
    }
    mt_replay_close(rp);
    return status;
}

int cli_cmd_summary(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    int rc = cli_options_parse(argc, argv, &summary_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (npos == 0)
        return cli_usage_error("summary", "'summary' needs a FILE argument");
    if (npos > 1)
        return summarise_files(pos, npos);
    const char *path = pos[0];

    struct mt_replay *rp;
    struct out o = {.path = path};
    int status = replay_file(path, &rp, &o.have_wall, &o.wall0, &o.mono0);
    if (status != CLI_EXIT_OK)
        return status;
    struct top top;
    status = group_at_peak(rp, &top);
    if (status == CLI_EXIT_OK) {
        o.rp = rp;
        o.top = &top;
        o.r = rp->r;
        o.ntop = ntop == 0 || (size_t)ntop > top.ngroups ? top.ngroups : (size_t)ntop;
        o.depth = depth == 0 ? -1 : (int)depth;
        if (json)
            status = print_json(&o);
        else
            print_text(&o);
    }
    free(top.groups);
    mt_replay_close(rp);
    return status;
}
