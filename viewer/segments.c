/* segments.c: `memtrace segments FILE`: the segment map at one point of a recording.
 *
 * A first pass finds the point (the peak of reserved memory, a time, an annotation);
 * a second replays the shared model (snapshot/replay.h) to it and reads its live
 * tables: segments and blocks, sorted by address, each block under the segment that
 * holds it. Memory follows the live entries at that point. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "replay.h"

static int json;
static long long width = 48;
static struct mt_point at;
static struct cli_filter_opts fo;

static const struct cli_opt segments_opts[] = {
    CLI_OPTION_POINT(0, "at", &at, "WHEN",
                     "show the map after event WHEN: a time after the first event (1.5s, "
                     "20ms; the last event at or before it), an event index (#123), or an "
                     "annotation's name (its first event); default: the peak of reserved "
                     "memory"),
    CLI_OPTION_BOOL('j', "json", &json, "print one JSON object (bytes and ns) instead of text"),
    CLI_OPTION_BOOL(0, "bytes", &cli_exact_bytes, "print sizes in bytes, not in KiB/MiB/GiB"),
    CLI_OPTION_INT('w', "width", &width, "N", 4, 1000,
                   "draw each segment's bar N characters wide (default 48)"),
    CLI_FILTER_OPTIONS(&fo),
    CLI_OPTION_END,
};

static const struct cli_help segments_help = {
    "segments",
    "memtrace segments FILE [--at WHEN] [--json] [--bytes] [--width N] [filters]",
    "Replays FILE to one event (by default the one at which reserved memory peaked)\n"
    "and prints its live segments by address: size, device, stream, pool (small,\n"
    "large or a number), the API that reported it, its live blocks, and a bar in\n"
    "which each character stands for an equal share of the segment and shows the\n"
    "state that holds most of that share's bytes: '#' allocated, '+' pending free\n"
    "(free_requested, not yet free_completed), '.' free (reserved, not allocated).\n"
    "A segment's free bytes are its size less its blocks; its largest gap is the\n"
    "longest free run inside it. Contiguous pieces of an expandable segment\n"
    "(segment_map) on the same device, stream and pool show as one segment with the\n"
    "number of its pieces. Blocks that lie in no live segment are listed apart.\n"
    "Filters choose which allocations count, as for the other commands; --from/--to\n"
    "bound the window in which the peak is sought.",
    segments_opts,
    0,
};

struct seg {
    uint64_t addr, size, stream;
    int32_t device, pool;
    uint32_t source, stack;
    uint64_t pieces;
    int mapped;
    size_t first_block, nblocks; /* into the sorted blocks */
    uint64_t allocated, pending, free, gap;
};

/* The live entries of t sorted by address (counted ones only: what the filter
 * keeps). NULL with *n 0 when there are none; -1 when out of memory. */
static int sorted(const struct mt_addrtab *t, const struct mt_live ***out, size_t *n)
{
    void **all;
    size_t m;
    *out = NULL;
    *n = 0;
    if (mt_addrtab_sorted(t, &all, &m) != 0)
        return -1;
    const struct mt_live **v = (const struct mt_live **)all;
    for (size_t k = 0; k < m; k++)
        if (v[k]->counted)
            v[(*n)++] = v[k];
    *out = v;
    return 0;
}

/* Finds the event index the map is shown at: a first pass over the file. Returns an
 * CLI_EXIT_* status; *none is set when the point is not in the file, *said when this
 * pass read to the end and warned of a truncated file. */
static int find_point(const char *path, const struct mt_filter *f, uint64_t *index, int *none,
                      int *said)
{
    *none = 0;
    *said = 0;
    if (at.kind == MT_POINT_EVENT) {
        *index = at.value;
        return CLI_EXIT_OK;
    }
    struct mt_replay *rp = cli_replay_open_cli(path, f);
    if (!rp)
        return CLI_EXIT_FAIL;
    int rc, found = 0;
    while ((rc = mt_replay_next(rp)) == 1) {
        const struct memtrace_event *ev = rp->ev;
        if (at.kind == MT_POINT_TIME) {
            if (ev->time_ns - rp->t_first > at.value)
                break;
            *index = rp->index;
            found = 1;
        } else if (at.kind == MT_POINT_ANNOTATION) {
            if (ev->action == MEMTRACE_ANNOTATE && ev->category &&
                ev->aux != MEMTRACE_ANNOTATE_POP &&
                strcmp(memtrace_reader_string(rp->r, ev->category), at.name) == 0) {
                *index = rp->index;
                found = 1;
                break;
            }
        }
    }
    int status = rc == 1 ? CLI_EXIT_OK : cli_replay_done_cli(rp, rc);
    *said = rc != 1 && mt_replay_truncated(rp);
    if (status == CLI_EXIT_OK && at.kind == MT_POINT_NONE) {
        found = 1;
        /* No segment ever: show the end. */
        *index = rp->reserved.peak ? rp->reserved.peak_index : UINT64_MAX;
    }
    mt_replay_close(rp);
    *none = !found;
    return status;
}

static const char *pool_name(char *buf, size_t size, int32_t pool)
{
    if (pool == 1)
        return "small";
    if (pool == 2)
        return "large";
    if (pool == 0)
        return "-";
    snprintf(buf, size, "%" PRId32, pool);
    return buf;
}

/* Groups the sorted pieces into segments and the sorted blocks under them. */
static struct seg *build(const struct mt_live **sv, size_t ns, const struct mt_live **bv, size_t nb,
                         size_t *nseg)
{
    struct seg *s = calloc(ns ? ns : 1, sizeof(*s));
    if (!s)
        return NULL;
    size_t n = 0;
    for (size_t k = 0; k < ns; k++) {
        const struct mt_live *e = sv[k];
        struct seg *p = n ? &s[n - 1] : NULL;
        if (p && p->mapped && e->mapped && p->addr + p->size == e->head.key &&
            p->device == e->device && p->stream == e->stream && p->pool == e->pool) {
            p->size += e->size;
            p->pieces++;
            continue;
        }
        s[n++] = (struct seg){.addr = e->head.key,
                              .size = e->size,
                              .stream = e->stream,
                              .device = e->device,
                              .pool = e->pool,
                              .source = e->source,
                              .stack = e->stack,
                              .pieces = 1,
                              .mapped = e->mapped};
    }
    size_t b = 0;
    for (size_t k = 0; k < n; k++) {
        struct seg *g = &s[k];
        uint64_t end = g->addr + g->size, cursor = g->addr, used = 0;
        while (b < nb && bv[b]->head.key < g->addr)
            b++; /* outside any segment: counted by the caller */
        g->first_block = b;
        for (; b < nb && bv[b]->head.key < end; b++) {
            const struct mt_live *e = bv[b];
            uint64_t bend = e->head.key + e->size > end ? end : e->head.key + e->size;
            if (e->head.key > cursor && e->head.key - cursor > g->gap)
                g->gap = e->head.key - cursor;
            if (bend > cursor)
                cursor = bend;
            used += bend - e->head.key;
            if (e->pending)
                g->pending += bend - e->head.key;
            else
                g->allocated += bend - e->head.key;
        }
        g->nblocks = b - g->first_block;
        if (end - cursor > g->gap)
            g->gap = end - cursor;
        g->free = used < g->size ? g->size - used : 0;
    }
    *nseg = n;
    return s;
}

/* The bar: for each of w cells, the state holding most of its bytes. */
static void bar(char *out, size_t w, const struct seg *g, const struct mt_live **bv)
{
    if (g->size == 0) {
        out[0] = '\0';
        return;
    }
    uint64_t(*cell)[2] = calloc(w, sizeof(*cell));
    if (g->size < w)
        w = (size_t)g->size;
    uint64_t q = g->size / w, r = g->size % w;
#define CELL_START(k) ((uint64_t)(k)*q + (uint64_t)(k)*r / w)
    for (size_t i = 0; cell && i < g->nblocks; i++) {
        const struct mt_live *e = bv[g->first_block + i];
        uint64_t lo = e->head.key - g->addr, hi = lo + e->size;
        if (hi > g->size)
            hi = g->size;
        size_t k = (size_t)(lo / (q + 1));
        while (k > 0 && CELL_START(k) > lo)
            k--;
        while (k + 1 < w && CELL_START(k + 1) <= lo)
            k++;
        for (; k < w && CELL_START(k) < hi; k++) {
            uint64_t c0 = CELL_START(k), c1 = CELL_START(k + 1);
            uint64_t a = lo > c0 ? lo : c0, z = hi < c1 ? hi : c1;
            cell[k][e->pending] += z - a;
        }
    }
    for (size_t k = 0; k < w; k++) {
        uint64_t len = CELL_START(k + 1) - CELL_START(k);
        uint64_t al = cell ? cell[k][0] : 0, pe = cell ? cell[k][1] : 0;
        uint64_t fr = len - al - pe;
        out[k] = al >= pe && al >= fr ? '#' : pe >= fr ? '+' : '.';
    }
#undef CELL_START
    out[w] = '\0';
    free(cell);
}

static json_t *block_json(const struct mt_live *e)
{
    json_t *o = json_object();
    json_object_set_new(o, "address", cli_json_u64(e->head.key));
    json_object_set_new(o, "size", cli_json_u64(e->size));
    json_object_set_new(o, "requested", cli_json_u64(e->requested));
    json_object_set_new(o, "state", json_string(e->pending ? "pending_free" : "allocated"));
    json_object_set_new(o, "stack", json_integer(e->stack));
    json_object_set_new(o, "event", cli_json_u64(e->index));
    return o;
}

struct view {
    const char *path;
    const struct mt_replay *rp;
    struct seg *segs;
    size_t nseg;
    const struct mt_live **bv;
    size_t nb;
    uint64_t out_count, out_bytes, reserved, allocated, pending, free, gap;
};

static int print_json(const struct view *v)
{
    const struct mt_replay *rp = v->rp;
    char *b = malloc((size_t)width + 1);
    if (!b) {
        cli_error("out of memory while drawing the segments of %s", v->path);
        return CLI_EXIT_FAIL;
    }
    json_t *j = json_object();
    json_object_set_new(j, "file", json_string(v->path));
    json_object_set_new(j, "event", rp->events ? cli_json_u64(rp->index) : json_null());
    json_object_set_new(j, "time_ns", cli_json_u64(rp->events ? rp->ev->time_ns : 0));
    json_object_set_new(j, "offset_ns",
                        cli_json_u64(rp->events ? rp->ev->time_ns - rp->t_first : 0));
    json_t *arr = json_array();
    for (size_t k = 0; k < v->nseg; k++) {
        const struct seg *g = &v->segs[k];
        json_t *o = json_object();
        json_object_set_new(o, "address", cli_json_u64(g->addr));
        json_object_set_new(o, "size", cli_json_u64(g->size));
        json_object_set_new(o, "device", json_integer(g->device));
        json_object_set_new(o, "stream", cli_json_u64(g->stream));
        json_object_set_new(o, "pool", json_integer(g->pool));
        json_object_set_new(o, "source",
                            g->source ? json_string(memtrace_reader_string(rp->r, g->source))
                                      : json_null());
        json_object_set_new(o, "stack", json_integer(g->stack));
        json_object_set_new(o, "expandable", json_boolean(g->mapped));
        json_object_set_new(o, "pieces", cli_json_u64(g->pieces));
        json_object_set_new(o, "allocated_bytes", cli_json_u64(g->allocated));
        json_object_set_new(o, "pending_free_bytes", cli_json_u64(g->pending));
        json_object_set_new(o, "free_bytes", cli_json_u64(g->free));
        json_object_set_new(o, "largest_free_bytes", cli_json_u64(g->gap));
        bar(b, (size_t)width, g, v->bv);
        json_object_set_new(o, "bar", json_string(b));
        json_t *blocks = json_array();
        for (size_t i = 0; i < g->nblocks; i++)
            json_array_append_new(blocks, block_json(v->bv[g->first_block + i]));
        json_object_set_new(o, "blocks", blocks);
        json_array_append_new(arr, o);
    }
    free(b);
    json_object_set_new(j, "segments", arr);
    json_t *outside = json_array();
    for (size_t i = 0, k = 0; i < v->nb; i++) {
        while (k < v->nseg && v->segs[k].addr + v->segs[k].size <= v->bv[i]->head.key)
            k++;
        if (k < v->nseg && v->bv[i]->head.key >= v->segs[k].addr)
            continue;
        json_array_append_new(outside, block_json(v->bv[i]));
    }
    json_object_set_new(j, "outside", outside);
    json_t *t = json_object();
    json_object_set_new(t, "segments", cli_json_u64(v->nseg));
    json_object_set_new(t, "reserved_bytes", cli_json_u64(v->reserved));
    json_object_set_new(t, "allocated_bytes", cli_json_u64(v->allocated));
    json_object_set_new(t, "pending_free_bytes", cli_json_u64(v->pending));
    json_object_set_new(t, "free_bytes", cli_json_u64(v->free));
    json_object_set_new(t, "largest_free_bytes", cli_json_u64(v->gap));
    json_object_set_new(t, "blocks", cli_json_u64(v->nb));
    json_object_set_new(t, "outside_blocks", cli_json_u64(v->out_count));
    json_object_set_new(t, "outside_bytes", cli_json_u64(v->out_bytes));
    json_object_set_new(j, "totals", t);
    return cli_json_print(j);
}

static int print_text(const struct view *v)
{
    const struct mt_replay *rp = v->rp;
    char a[64], b[64], c[64], d[64], e[64], f[64], p[32];
    char *bb = malloc((size_t)width + 1);
    if (!bb) {
        cli_error("out of memory while drawing the segments of %s", v->path);
        return CLI_EXIT_FAIL;
    }
    if (rp->events)
        printf("segments of %s after event %" PRIu64 " (+%s)\n", v->path, rp->index,
               cli_fmt_duration(a, sizeof(a), rp->ev->time_ns - rp->t_first));
    else
        printf("segments of %s: no events\n", v->path);
    printf("legend: '#' allocated, '+' pending free, '.' free (reserved, not allocated)\n");
    printf("%-18s %12s %4s %-10s %-5s %-18s %6s %12s %12s %12s %12s  %s\n", "address", "size",
           "dev", "stream", "pool", "source", "blocks", "allocated", "pending", "free",
           "largest gap", "map");
    for (size_t k = 0; k < v->nseg; k++) {
        const struct seg *g = &v->segs[k];
        const char *src = g->source ? memtrace_reader_string(rp->r, g->source) : "-";
        char stream[32];
        snprintf(stream, sizeof(stream), "0x%" PRIx64, g->stream);
        bar(bb, (size_t)width, g, v->bv);
        printf("0x%016" PRIx64 " %12s %4" PRId32 " %-10s %-5s %-18s %6zu %12s %12s %12s %12s  "
               "[%s]",
               g->addr, cli_fmt_bytes(a, sizeof(a), g->size), g->device, stream,
               pool_name(p, sizeof(p), g->pool), src, g->nblocks,
               cli_fmt_bytes(b, sizeof(b), g->allocated), cli_fmt_bytes(c, sizeof(c), g->pending),
               cli_fmt_bytes(d, sizeof(d), g->free), cli_fmt_bytes(e, sizeof(e), g->gap), bb);
        if (g->pieces > 1)
            printf(" %" PRIu64 " pieces", g->pieces);
        putchar('\n');
    }
    free(bb);
    if (v->out_count)
        printf("outside any segment: %" PRIu64 " blocks, %s\n", v->out_count,
               cli_fmt_bytes(a, sizeof(a), v->out_bytes));
    printf("total: %zu segments, reserved %s, allocated %s, pending %s, free %s (%.1f%% of "
           "reserved), largest gap %s, %zu blocks\n",
           v->nseg, cli_fmt_bytes(a, sizeof(a), v->reserved),
           cli_fmt_bytes(b, sizeof(b), v->allocated), cli_fmt_bytes(c, sizeof(c), v->pending),
           cli_fmt_bytes(d, sizeof(d), v->free),
           v->reserved ? 100.0 * (double)v->free / (double)v->reserved : 0.0,
           cli_fmt_bytes(f, sizeof(f), v->gap), v->nb);
    return CLI_EXIT_OK;
}

static int show(const char *path, struct mt_replay *rp)
{
    const struct mt_live **sv = NULL, **bv = NULL;
    size_t ns, nb;
    struct view v = {.path = path, .rp = rp};
    int status = CLI_EXIT_FAIL;
    if (sorted(&rp->segs, &sv, &ns) < 0 || sorted(&rp->blocks, &bv, &nb) < 0 ||
        (v.segs = build(sv, ns, bv, nb, &v.nseg)) == NULL) {
        cli_error("out of memory while sorting the segments of %s", path);
        goto out;
    }
    v.bv = bv;
    v.nb = nb;
    size_t inside = 0;
    for (size_t k = 0; k < v.nseg; k++) {
        const struct seg *g = &v.segs[k];
        v.reserved += g->size;
        v.allocated += g->allocated;
        v.pending += g->pending;
        v.free += g->free;
        if (g->gap > v.gap)
            v.gap = g->gap;
        inside += g->nblocks;
        for (size_t i = 0; i < g->nblocks; i++)
            v.out_bytes -= bv[g->first_block + i]->size;
    }
    for (size_t i = 0; i < nb; i++)
        v.out_bytes += bv[i]->size;
    v.out_count = nb - inside;
    status = json ? print_json(&v) : print_text(&v);
out:
    free(v.segs);
    free(sv);
    free(bv);
    return status;
}

int cli_cmd_segments(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    int rc = cli_options_parse(argc, argv, &segments_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (npos == 0)
        return cli_usage_error("segments", "'segments' needs a FILE argument");
    if (npos > 1)
        return cli_usage_error("segments", "'segments' takes one file, got '%s' and '%s'", pos[0],
                               pos[1]);
    struct mt_filter f;
    if ((rc = cli_filter_from_opts("segments", &fo, 1, &f)) != 0)
        return rc;
    const char *path = pos[0];
    uint64_t index = UINT64_MAX;
    int none, said;
    int status = find_point(path, &f, &index, &none, &said);
    if (status != CLI_EXIT_OK)
        return status;
    if (none) {
        if (at.kind == MT_POINT_ANNOTATION)
            cli_error("%s has no annotation named '%s' (for --at)", path, at.name);
        else
            cli_error("%s has no event at or before %" PRIu64 " ns after its first (for --at)",
                      path, at.value);
        return CLI_EXIT_USAGE;
    }
    struct mt_replay *rp = cli_replay_open_cli(path, &f);
    if (!rp)
        return CLI_EXIT_FAIL;
    rc = mt_replay_to(rp, index);
    status = rc == 1 ? CLI_EXIT_OK
             : said  ? cli_replay_done_again(rp, rc) /* (the truncation was said) */
                     : cli_replay_done_cli(rp, rc);
    if (status == CLI_EXIT_OK)
        status = show(path, rp);
    mt_replay_close(rp);
    return status;
}
