/* diff.c: `memtrace diff A B` and `memtrace diff FILE --from WHEN --to WHEN`: what
 * changed between two files, or between two points of one file.
 *
 * Each side is one pass of the shared replay model (snapshot/replay.h); the one-file
 * form replays the file twice, each pass stopping after its point (the model's --to),
 * so a side is exactly "the file as it stood at WHEN". Stack ids are private to a
 * file, so stacks are matched by a key made of their frames, innermost first: symbol,
 * file and line, or module+offset where a frame has no symbol, or the address where
 * it has neither. Stacks of one file with the same key add up. Memory follows the
 * distinct stacks of both files, never their events. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "frames.h"
#include "replay.h"

enum { COST_PEAK, COST_LEAKED, COST_ALLOCATED };

static int json;
static long long ntop = 10, depth = 16;
static const char *cost_name;
static struct cli_filter_opts fo;

/* The filters one by one rather than CLI_FILTER_OPTIONS: --from and --to name the two
 * points in the one-file form, and their help must say so. */
static const struct cli_opt diff_opts[] = {
    CLI_OPTION_STRING('c', "cost", &cost_name, "COST",
                      "peak (alive at the peak; the default with two files), leaked (alive at "
                      "the end or point; the default with one file) or allocated (in total)"),
    CLI_OPTION_INT('n', "top", &ntop, "N", 0, 1000000000,
                   "show the N stacks that changed most (default 10, 0: all)"),
    CLI_OPTION_INT('d', "depth", &depth, "N", 0, 4096,
                   "show at most N frames of each stack (default 16, 0: all)"),
    CLI_FRAMES_OPTION,
    CLI_OPTION_BOOL('j', "json", &json, "print one JSON object (bytes and ns) instead of text"),
    CLI_OPTION_BOOL(0, "bytes", &cli_exact_bytes, "print sizes in bytes, not in KiB, MiB, GiB"),
    CLI_OPTION_STRING(0, "device", &fo.device, "N", "only allocations on device N"),
    CLI_OPTION_STRING(0, "stream", &fo.stream, "S", "only allocations on stream S"),
    CLI_OPTION_BYTES(0, "min-size", &fo.min_size, "SIZE",
                     "only allocations of at least SIZE (4096, 64K, 1.5M, 2G)"),
    CLI_OPTION_STRING(0, "category", &fo.category, "NAME",
                      "only allocations tagged with category NAME"),
    CLI_OPTION_POINT(0, "from", &fo.from, "WHEN",
                     "one file: the first point, after WHEN (1.5s, #123, an annotation's "
                     "end); two files: start both at WHEN"),
    CLI_OPTION_POINT(0, "to", &fo.to, "WHEN",
                     "one file: the second point (default: the end); two files: stop both "
                     "after WHEN"),
    CLI_OPTION_END,
};

static const struct cli_help diff_help = {
    "diff",
    "memtrace diff A B [--cost peak|leaked|allocated] [--top N] [--depth N] [--all-frames] "
    "[--json]\n"
    "                    [--bytes] [filters]\n"
    "       memtrace diff FILE [--from WHEN] [--to WHEN] [options]",
    "Compares two recordings, A (before) and B (after), or one file at two points:\n"
    "the state after --from (the start when it is absent) against the state after --to\n"
    "(the end when it is absent). Stacks are matched by their frames (symbol, file and\n"
    "line; module+offset for frames without a symbol), not by their ids, which differ\n"
    "between files. Lists the stacks whose cost differs, grown and shrunk, largest\n"
    "absolute change first, with bytes and allocations before and after; then the\n"
    "totals (peaks, levels at the end, allocations) and the segments: the reserved\n"
    "peak, segments live at the peak and at the end, and segment allocations and live\n"
    "segments by size class. Cost 'peak' takes each side at the peak of its allocated\n"
    "memory (reserved memory when neither side has block events).",
    diff_opts,
    0,
};

/* Segment size classes: up to 1 MiB, then powers of two to 1 GiB, then larger. */
#define NCLASS 12

static int size_class(uint64_t size)
{
    int c = 0;
    uint64_t max = 1u << 20;
    while (c < NCLASS - 1 && size > max) {
        max <<= 1;
        c++;
    }
    return c;
}

struct segclass {
    uint64_t allocs, alloc_bytes, live, live_bytes;
};

struct side {
    const char *path;
    const char *point; /* the one-file form's point as text (in buf), or NULL */
    char buf[96];
    struct mt_replay *rp;
    int at_start; /* the one-file form without --from: nothing is replayed */
    struct segclass cls[NCLASS];
    uint64_t seg_at_peak; /* segment pieces live at the reserved peak */
    uint64_t cost_bytes, cost_count;
};

/* A stack of either side, by its frames. */
struct kentry {
    char *key; /* NULL: a free slot */
    uint64_t hash;
    int has[2];
    uint32_t stack[2]; /* the lowest id of the key in each side */
    uint64_t bytes[2], count[2];
};

struct ktab {
    struct kentry *e;
    size_t cap, n;
};

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t k = 0; k < n; k++)
        h = (h ^ (unsigned char)s[k]) * 0x100000001b3ull;
    return h;
}

static int ktab_grow(struct ktab *t)
{
    size_t cap = t->cap ? t->cap * 2 : 256;
    struct kentry *e = calloc(cap, sizeof(*e));
    if (!e)
        return -1;
    for (size_t k = 0; k < t->cap; k++) {
        if (!t->e[k].key)
            continue;
        size_t i = t->e[k].hash & (cap - 1);
        while (e[i].key)
            i = (i + 1) & (cap - 1);
        e[i] = t->e[k];
    }
    free(t->e);
    t->e = e;
    t->cap = cap;
    return 0;
}

/* The entry of key (len bytes), made if new; NULL when out of memory. */
static struct kentry *ktab_get(struct ktab *t, const char *key, size_t len)
{
    if ((t->n + 1) * 2 > t->cap && ktab_grow(t) != 0)
        return NULL;
    uint64_t h = fnv(key, len);
    size_t i = h & (t->cap - 1);
    for (; t->e[i].key; i = (i + 1) & (t->cap - 1))
        if (t->e[i].hash == h && strlen(t->e[i].key) == len && memcmp(t->e[i].key, key, len) == 0)
            return &t->e[i];
    char *k = malloc(len + 1);
    if (!k)
        return NULL;
    memcpy(k, key, len);
    k[len] = '\0';
    memset(&t->e[i], 0, sizeof(t->e[i]));
    t->e[i].key = k;
    t->e[i].hash = h;
    t->n++;
    return &t->e[i];
}

static void ktab_free(struct ktab *t)
{
    for (size_t k = 0; k < t->cap; k++)
        free(t->e[k].key);
    free(t->e);
}

struct sbuf {
    char *p;
    size_t n, cap;
    int nomem;
};

static void sb_add(struct sbuf *b, const char *s, size_t len)
{
    if (b->nomem)
        return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->nomem = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
    sb_add(b, s ? s : "", s ? strlen(s) : 0);
}

/* The key of a stack: its frames innermost first, fields apart by \x1f and frames by
 * \x1e (neither occurs in names a recorder writes). */
static int stack_key(const struct memtrace_reader *r, uint32_t stack, struct sbuf *b,
                     uint32_t **ids, int *cap)
{
    b->n = 0;
    sb_add(b, "", 0);
    if (stack == 0)
        return b->nomem ? -1 : 0;
    int n = mt_stack_frames(r, stack, ids, cap);
    if (n < 0)
        return -1;
    for (int k = 0; k < n; k++) {
        const struct memtrace_frame *fr = memtrace_reader_frame(r, (*ids)[k]);
        char num[64];
        if (k)
            sb_add(b, "\x1e", 1);
        if (!fr) {
            sb_add(b, "?", 1);
        } else if (fr->symbol && fr->symbol[0]) {
            sb_add(b, "s", 1);
            sb_str(b, fr->symbol);
            sb_add(b, "\x1f", 1);
            sb_str(b, fr->file);
            snprintf(num, sizeof(num), "\x1f%u", (unsigned)fr->line);
            sb_str(b, num);
        } else if (fr->module && fr->module[0]) {
            sb_add(b, "m", 1);
            sb_str(b, fr->module);
            snprintf(num, sizeof(num), "+%" PRIx64 "\x1f", fr->offset);
            sb_str(b, num);
            sb_str(b, fr->file);
            snprintf(num, sizeof(num), "\x1f%u", (unsigned)fr->line);
            sb_str(b, num);
        } else {
            snprintf(num, sizeof(num), "i%" PRIx64, fr->ip);
            sb_str(b, num);
        }
    }
    return b->nomem ? -1 : 0;
}

/* A stack's cost in a replay. */
static void stack_cost(const struct mt_replay *rp, int cost, int blocks, uint32_t stack,
                       uint64_t *bytes, uint64_t *count)
{
    const struct mt_tallies *ts = blocks ? &rp->block_stacks : &rp->seg_stacks;
    const struct mt_level *l = blocks ? &rp->allocated : &rp->reserved;
    *bytes = *count = 0;
    if (stack >= ts->n)
        return;
    const struct mt_tally *t = &ts->t[stack];
    switch (cost) {
    case COST_PEAK:
        mt_tally_at_peak(ts, l, stack, bytes, count);
        break;
    case COST_LEAKED:
        *bytes = t->live_bytes;
        *count = t->live_count;
        break;
    default:
        *bytes = t->alloc_bytes;
        *count = t->alloc_count;
        break;
    }
}

/* Adds the stacks of side s (0 before, 1 after) to the table. */
static int collect(struct ktab *t, struct side *sd, int s, int cost, int blocks)
{
    const struct mt_replay *rp = sd->rp;
    const struct mt_tallies *ts = blocks ? &rp->block_stacks : &rp->seg_stacks;
    struct sbuf b = {0};
    uint32_t *ids = NULL;
    int cap = 0, rc = 0;
    for (size_t k = 0; k < ts->n; k++) {
        uint64_t bytes, count;
        stack_cost(rp, cost, blocks, (uint32_t)k, &bytes, &count);
        if (bytes == 0 && count == 0)
            continue;
        sd->cost_bytes += bytes;
        sd->cost_count += count;
        struct kentry *e;
        if (stack_key(rp->r, (uint32_t)k, &b, &ids, &cap) != 0 || !(e = ktab_get(t, b.p, b.n))) {
            rc = -1;
            break;
        }
        if (!e->has[s]) {
            e->has[s] = 1;
            e->stack[s] = (uint32_t)k;
        }
        e->bytes[s] += bytes;
        e->count[s] += count;
    }
    free(b.p);
    free(ids);
    return rc;
}

/* Replays one side to its end (or its point), keeping segment figures by size class
 * from what the model did at each event. */
static int replay_side(struct side *sd)
{
    struct mt_replay *rp = sd->rp;
    struct cli_progress prog;
    cli_progress_init(&prog, rp->r, "diff", 0);
    int rc = 0;
    while (!sd->at_start && (rc = mt_replay_next(rp)) == 1) {
        cli_progress_update(&prog, rp->events);
        if (rp->eff.kind != MT_EFF_SEG_ADD || !rp->in_window)
            continue;
        const struct mt_live *e = mt_addrtab_find(&rp->segs, rp->ev->addr);
        if (e && e->counted) {
            struct segclass *c = &sd->cls[size_class(e->size)];
            c->allocs++;
            c->alloc_bytes += e->size;
        }
    }
    cli_progress_done(&prog);
    int status = cli_replay_done_cli(rp, rc);
    if (status != CLI_EXIT_OK)
        return status;
    for (size_t i = 0; i < rp->segs.cap; i++) {
        const struct mt_live *e = mt_addrtab_at(&rp->segs, i);
        if (e && e->counted) {
            struct segclass *c = &sd->cls[size_class(e->size)];
            c->live++;
            c->live_bytes += e->size;
        }
    }
    for (size_t k = 0; k < rp->seg_stacks.n; k++) {
        uint64_t bytes, count;
        mt_tally_at_peak(&rp->seg_stacks, &rp->reserved, (uint32_t)k, &bytes, &count);
        sd->seg_at_peak += count;
    }
    return CLI_EXIT_OK;
}

/* Whether a one-file side's replay got to its point; a file that ends first is
 * compared at its end, with a warning. */
static void check_point(const struct side *sd, const struct mt_point *p, const char *flag)
{
    const struct mt_replay *rp = sd->rp;
    int reached = rp->window_done;
    if (p->kind == MT_POINT_EVENT)
        reached |= rp->events > p->value;
    else if (p->kind == MT_POINT_TIME)
        reached |= rp->events && rp->ev->time_ns - rp->t_first >= p->value;
    if (!reached)
        cli_error("warning: %s ends before --%s %s: comparing its end", sd->path, flag, sd->point);
}

static int64_t delta(uint64_t before, uint64_t after)
{
    return after >= before ? (int64_t)(after - before) : -(int64_t)(before - after);
}

static uint64_t mag(int64_t d)
{
    return d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d;
}

static const char *change_of(const struct kentry *e)
{
    if (!e->has[0])
        return "new";
    if (!e->has[1])
        return "gone";
    if (e->bytes[1] != e->bytes[0])
        return e->bytes[1] > e->bytes[0] ? "grown" : "shrunk";
    return e->count[1] > e->count[0] ? "more" : "fewer";
}

static int entry_cmp(const void *pa, const void *pb)
{
    const struct kentry *a = *(const struct kentry *const *)pa;
    const struct kentry *b = *(const struct kentry *const *)pb;
    uint64_t ma = mag(delta(a->bytes[0], a->bytes[1])), mb = mag(delta(b->bytes[0], b->bytes[1]));
    if (ma != mb)
        return ma > mb ? -1 : 1;
    ma = mag(delta(a->count[0], a->count[1]));
    mb = mag(delta(b->count[0], b->count[1]));
    if (ma != mb)
        return ma > mb ? -1 : 1;
    if (a->bytes[1] != b->bytes[1])
        return a->bytes[1] > b->bytes[1] ? -1 : 1;
    return strcmp(a->key, b->key);
}

struct result {
    struct side *side; /* [2] */
    int cost, blocks;
    struct kentry **changed;
    size_t nchanged, nshow, nkeys, grown, shrunk, added, gone;
};

/* The cost in words, for text. */
static const char *cost_words(const struct result *res, int one_file)
{
    switch (res->cost) {
    case COST_PEAK:
        return res->blocks ? "bytes alive at the peak of allocated memory"
                           : "bytes alive at the peak of reserved memory";
    case COST_LEAKED:
        if (one_file)
            return res->blocks ? "bytes allocated and alive at each point"
                               : "bytes reserved at each point";
        return res->blocks ? "bytes allocated and alive at the end" : "bytes reserved at the end";
    default:
        return res->blocks ? "bytes allocated in total" : "bytes reserved in total";
    }
}

static const char *cost_names[] = {"peak", "leaked", "allocated"};

/* A row of figures: before, after, delta. */
struct row {
    const char *name, *key;
    uint64_t v[2];
    int bytes;
};

static json_t *pair_json(uint64_t before, uint64_t after)
{
    json_t *o = json_object();
    json_object_set_new(o, "before", cli_json_u64(before));
    json_object_set_new(o, "after", cli_json_u64(after));
    json_object_set_new(o, "delta", json_integer(delta(before, after)));
    return o;
}

static json_t *side_json(const struct side *sd)
{
    const struct mt_replay *rp = sd->rp;
    json_t *o = json_object();
    json_object_set_new(o, "file", json_string(sd->path));
    json_object_set_new(o, "point", sd->point ? json_string(sd->point) : json_null());
    json_object_set_new(o, "events", cli_json_u64(rp->events));
    json_object_set_new(o, "truncated", json_boolean(mt_replay_truncated(rp)));
    return o;
}

static size_t total_rows(const struct result *res, struct row *rows)
{
    const struct mt_replay *a = res->side[0].rp, *b = res->side[1].rp;
    size_t n = 0;
#define ROW(nm, k, x, isb) rows[n++] = (struct row){nm, k, {a->x, b->x}, isb}
    rows[n++] =
        (struct row){"cost", "cost_bytes", {res->side[0].cost_bytes, res->side[1].cost_bytes}, 1};
    rows[n++] = (struct row){
        "  in allocations", "cost_count", {res->side[0].cost_count, res->side[1].cost_count}, 0};
    ROW("events", "events", events, 0);
    ROW("peak allocated", "peak_allocated", allocated.peak, 1);
    ROW("peak reserved", "peak_reserved", reserved.peak, 1);
    ROW("allocated at end", "allocated_at_end", allocated.cur, 1);
    ROW("blocks at end", "blocks_at_end", blocks.n, 0);
    ROW("allocs", "allocs", allocs.count, 0);
    ROW("  bytes", "allocs_bytes", allocs.bytes, 1);
    ROW("frees", "frees", frees.count, 0);
    ROW("  bytes", "frees_bytes", frees.bytes, 1);
#undef ROW
    return n;
}

static size_t seg_rows(const struct result *res, struct row *rows)
{
    const struct side *s = res->side;
    const struct mt_replay *a = s[0].rp, *b = s[1].rp;
    size_t n = 0;
    rows[n++] =
        (struct row){"peak reserved", "peak_reserved", {a->reserved.peak, b->reserved.peak}, 1};
    rows[n++] =
        (struct row){"segments at peak", "at_peak", {s[0].seg_at_peak, s[1].seg_at_peak}, 0};
    rows[n++] =
        (struct row){"reserved at end", "reserved_at_end", {a->reserved.cur, b->reserved.cur}, 1};
    rows[n++] = (struct row){"segments at end", "at_end", {a->segs.n, b->segs.n}, 0};
    rows[n++] =
        (struct row){"segment allocs", "allocs", {a->seg_allocs.count, b->seg_allocs.count}, 0};
    rows[n++] =
        (struct row){"  bytes", "allocs_bytes", {a->seg_allocs.bytes, b->seg_allocs.bytes}, 1};
    rows[n++] = (struct row){"segment frees", "frees", {a->seg_frees.count, b->seg_frees.count}, 0};
    return n;
}

static uint64_t class_max(int c)
{
    return c == NCLASS - 1 ? 0 : (uint64_t)1 << (20 + c);
}

static int class_used(const struct result *res, int c)
{
    const struct segclass *x = &res->side[0].cls[c], *y = &res->side[1].cls[c];
    return x->allocs || x->live || y->allocs || y->live;
}

static json_t *stack_json(const struct result *res, const struct kentry *e, int dep)
{
    json_t *s = json_object();
    json_object_set_new(s, "change", json_string(change_of(e)));
    json_object_set_new(s, "bytes", pair_json(e->bytes[0], e->bytes[1]));
    json_object_set_new(s, "count", pair_json(e->count[0], e->count[1]));
    json_object_set_new(s, "stack_before", e->has[0] ? json_integer(e->stack[0]) : json_null());
    json_object_set_new(s, "stack_after", e->has[1] ? json_integer(e->stack[1]) : json_null());
    int k = e->has[1] ? 1 : 0;
    const struct memtrace_reader *r = res->side[k].rp->r;
    uint32_t none[1];
    json_object_set_new(
        s, "depth", json_integer(e->stack[k] ? memtrace_reader_stack(r, e->stack[k], none, 0) : 0));
    json_object_set_new(s, "hidden_frames", json_integer(cli_stack_hidden(r, e->stack[k])));
    json_object_set_new(s, "frames", cli_stack_json(r, e->stack[k], dep));
    return s;
}

static int print_json(const struct result *res, int dep)
{
    json_t *j = json_object();
    json_object_set_new(j, "before", side_json(&res->side[0]));
    json_object_set_new(j, "after", side_json(&res->side[1]));
    json_object_set_new(j, "cost", json_string(cost_names[res->cost]));
    json_object_set_new(j, "of", json_string(res->blocks ? "allocated" : "reserved"));

    struct row rows[16];
    size_t n = total_rows(res, rows);
    json_t *t = json_object();
    for (size_t k = 0; k < n; k++)
        json_object_set_new(t, rows[k].key, pair_json(rows[k].v[0], rows[k].v[1]));
    json_object_set_new(j, "totals", t);

    json_t *st = json_object();
    json_object_set_new(st, "compared", cli_json_u64(res->nkeys));
    json_object_set_new(st, "changed", cli_json_u64(res->nchanged));
    json_object_set_new(st, "grown", cli_json_u64(res->grown));
    json_object_set_new(st, "shrunk", cli_json_u64(res->shrunk));
    json_object_set_new(st, "new", cli_json_u64(res->added));
    json_object_set_new(st, "gone", cli_json_u64(res->gone));
    json_object_set_new(j, "stack_counts", st);

    n = seg_rows(res, rows);
    json_t *sg = json_object();
    for (size_t k = 0; k < n; k++)
        json_object_set_new(sg, rows[k].key, pair_json(rows[k].v[0], rows[k].v[1]));
    json_t *cls = json_array();
    for (int c = 0; c < NCLASS; c++) {
        if (!class_used(res, c))
            continue;
        const struct segclass *x = &res->side[0].cls[c], *y = &res->side[1].cls[c];
        json_t *o = json_object();
        json_object_set_new(o, "max_bytes",
                            c == NCLASS - 1 ? json_null() : cli_json_u64(class_max(c)));
        json_object_set_new(o, "allocs", pair_json(x->allocs, y->allocs));
        json_object_set_new(o, "allocs_bytes", pair_json(x->alloc_bytes, y->alloc_bytes));
        json_object_set_new(o, "at_end", pair_json(x->live, y->live));
        json_object_set_new(o, "at_end_bytes", pair_json(x->live_bytes, y->live_bytes));
        json_array_append_new(cls, o);
    }
    json_object_set_new(sg, "size_classes", cls);
    json_object_set_new(j, "segments", sg);

    json_t *arr = json_array();
    for (size_t k = 0; k < res->nshow; k++)
        json_array_append_new(arr, stack_json(res, res->changed[k], dep));
    json_object_set_new(j, "stacks", arr);
    return cli_json_print(j);
}

static const char *fmt_value(char *buf, size_t size, uint64_t v, int bytes)
{
    return bytes ? cli_fmt_bytes(buf, size, v) : cli_fmt_count(buf, size, v);
}

static const char *fmt_delta(char *buf, size_t size, int64_t d, int bytes)
{
    char v[48];
    if (d == 0)
        snprintf(buf, size, "0");
    else
        snprintf(buf, size, "%c%s", d > 0 ? '+' : '-', fmt_value(v, sizeof(v), mag(d), bytes));
    return buf;
}

static void print_rows(const struct row *rows, size_t n)
{
    char a[48], b[48], c[48];
    printf("%-22s %14s %14s %14s\n", "", "before", "after", "delta");
    for (size_t k = 0; k < n; k++)
        printf("%-22s %14s %14s %14s\n", rows[k].name,
               fmt_value(a, sizeof(a), rows[k].v[0], rows[k].bytes),
               fmt_value(b, sizeof(b), rows[k].v[1], rows[k].bytes),
               fmt_delta(c, sizeof(c), delta(rows[k].v[0], rows[k].v[1]), rows[k].bytes));
}

static void print_side(const char *label, const struct side *sd)
{
    char a[48];
    printf("%-8s %s", label, sd->path);
    if (sd->point)
        printf(" at %s", sd->point);
    else if (sd->at_start)
        printf(" at its start");
    printf(" (%s events%s)\n", cli_fmt_count(a, sizeof(a), sd->rp->events),
           mt_replay_truncated(sd->rp) ? ", truncated" : "");
}

static void print_text(const struct result *res, int one_file, int dep)
{
    char a[48], b[48], c[48], d[48], e[48], g[48];
    print_side("before", &res->side[0]);
    print_side("after", &res->side[1]);
    printf("cost     %s; stacks matched by their frames\n\n", cost_words(res, one_file));
    struct row rows[16];
    print_rows(rows, total_rows(res, rows));
    printf("\nstacks: %zu compared, %zu changed: %zu grown (%zu new), %zu shrunk (%zu gone)\n",
           res->nkeys, res->nchanged, res->grown, res->added, res->shrunk, res->gone);

    printf("\nSegments\n");
    print_rows(rows, seg_rows(res, rows));
    int any = 0;
    for (int k = 0; k < NCLASS; k++)
        any |= class_used(res, k);
    if (any) {
        printf("\n%-14s %26s   %26s\n%-14s %8s %8s %8s   %8s %8s %8s\n", "", "segment allocations",
               "live at the end", "segment size", "before", "after", "delta", "before", "after",
               "delta");
        for (int k = 0; k < NCLASS; k++) {
            if (!class_used(res, k))
                continue;
            const struct segclass *x = &res->side[0].cls[k], *y = &res->side[1].cls[k];
            char cls[48];
            if (k == NCLASS - 1)
                snprintf(cls, sizeof(cls), "> %s", cli_fmt_bytes(a, sizeof(a), class_max(k - 1)));
            else
                snprintf(cls, sizeof(cls), "<= %s", cli_fmt_bytes(a, sizeof(a), class_max(k)));
            printf("%-14s %8s %8s %8s   %8s %8s %8s\n", cls, cli_fmt_count(a, sizeof(a), x->allocs),
                   cli_fmt_count(b, sizeof(b), y->allocs),
                   fmt_delta(c, sizeof(c), delta(x->allocs, y->allocs), 0),
                   cli_fmt_count(d, sizeof(d), x->live), cli_fmt_count(e, sizeof(e), y->live),
                   fmt_delta(g, sizeof(g), delta(x->live, y->live), 0));
        }
    }

    if (res->nchanged == 0) {
        printf("\nNo stack differs.\n");
        return;
    }
    printf("\nTop %zu of %zu stacks by change (largest first):\n", res->nshow, res->nchanged);
    for (size_t k = 0; k < res->nshow; k++) {
        const struct kentry *en = res->changed[k];
        int64_t db = delta(en->bytes[0], en->bytes[1]);
        printf("\n%2zu. %s (%s%" PRIu64 " bytes) %s: %s in %s -> %s in %s allocations, stack ",
               k + 1, fmt_delta(a, sizeof(a), db, 1),
               db < 0   ? "-"
               : db > 0 ? "+"
                        : "",
               mag(db), change_of(en), cli_fmt_bytes(b, sizeof(b), en->bytes[0]),
               cli_fmt_count(c, sizeof(c), en->count[0]), cli_fmt_bytes(d, sizeof(d), en->bytes[1]),
               cli_fmt_count(e, sizeof(e), en->count[1]));
        if (en->has[0])
            printf("%u", (unsigned)en->stack[0]);
        else
            printf("-");
        printf(" -> ");
        if (en->has[1])
            printf("%u\n", (unsigned)en->stack[1]);
        else
            printf("-\n");
        int s = en->has[1] ? 1 : 0;
        cli_stack_print(stdout, res->side[s].rp->r, en->stack[s], dep, "      ");
    }
}

static int parse_cost(const char *name, int one_file, int *cost)
{
    if (!name) {
        *cost = one_file ? COST_LEAKED : COST_PEAK;
        return 0;
    }
    for (int k = 0; k < 3; k++) {
        if (strcmp(name, cost_names[k]) == 0) {
            *cost = k;
            return 0;
        }
    }
    return cli_usage_error("diff",
                           "invalid cost '%s' for --cost of 'diff': expected peak, leaked or "
                           "allocated",
                           name);
}

/* A point as text for the labels, or NULL for none. */
/* Opens the two sides: two files with the same filter, or one file with a filter that
 * stops after each point. */
static int open_sides(struct side *sd, char **pos, int npos, const struct mt_filter *f)
{
    if (npos == 2) {
        for (int s = 0; s < 2; s++) {
            sd[s].path = pos[s];
            if (!(sd[s].rp = cli_replay_open_cli(pos[s], f)))
                return CLI_EXIT_FAIL;
        }
        return CLI_EXIT_OK;
    }
    const struct mt_point *pts[2] = {&f->from, &f->to};
    for (int s = 0; s < 2; s++) {
        struct mt_filter g = *f;
        memset(&g.from, 0, sizeof(g.from));
        g.to = *pts[s];
        sd[s].path = pos[0];
        sd[s].point = cli_point_text(sd[s].buf, sizeof(sd[s].buf), pts[s]);
        sd[s].at_start = s == 0 && !sd[s].point;
        if (!(sd[s].rp = cli_replay_open_cli(pos[0], &g)))
            return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

int cli_cmd_diff(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    int rc = cli_options_parse(argc, argv, &diff_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    int one_file = npos == 1;
    if (npos > 2)
        return cli_usage_error("diff", "'diff' compares two files, got %d", npos);
    if (npos == 0 || (one_file && fo.from.kind == MT_POINT_NONE && fo.to.kind == MT_POINT_NONE))
        return cli_usage_error("diff", "'diff' needs two files (A B), or one file with --from "
                                       "and/or --to");
    struct result res;
    memset(&res, 0, sizeof(res));
    if ((rc = parse_cost(cost_name, one_file, &res.cost)) != 0)
        return rc;
    struct mt_filter f;
    if ((rc = cli_filter_from_opts("diff", &fo, 0, &f)) != 0)
        return rc;

    struct side sd[2];
    memset(sd, 0, sizeof(sd));
    res.side = sd;
    struct ktab tab = {0};
    int status = open_sides(sd, pos, npos, &f);
    for (int s = 0; s < 2 && status == CLI_EXIT_OK; s++) {
        status = replay_side(&sd[s]);
        if (status == CLI_EXIT_OK && one_file && sd[s].point)
            check_point(&sd[s], s ? &f.to : &f.from, s ? "to" : "from");
    }
    if (status != CLI_EXIT_OK)
        goto out;

    res.blocks = sd[0].rp->allocs.count > 0 || sd[1].rp->allocs.count > 0;
    if (collect(&tab, &sd[0], 0, res.cost, res.blocks) != 0 ||
        collect(&tab, &sd[1], 1, res.cost, res.blocks) != 0 ||
        !(res.changed = malloc((tab.n ? tab.n : 1) * sizeof(*res.changed)))) {
        cli_error("out of memory while matching the stacks of %s and %s", sd[0].path, sd[1].path);
        status = CLI_EXIT_FAIL;
        goto out;
    }
    res.nkeys = tab.n;
    for (size_t k = 0; k < tab.cap; k++) {
        struct kentry *e = &tab.e[k];
        if (!e->key || (e->bytes[0] == e->bytes[1] && e->count[0] == e->count[1]))
            continue;
        res.changed[res.nchanged++] = e;
        if (e->bytes[1] > e->bytes[0])
            res.grown++;
        else if (e->bytes[1] < e->bytes[0])
            res.shrunk++;
        res.added += !e->has[0];
        res.gone += !e->has[1];
    }
    qsort(res.changed, res.nchanged, sizeof(*res.changed), entry_cmp);
    res.nshow = ntop == 0 || (size_t)ntop > res.nchanged ? res.nchanged : (size_t)ntop;
    int dep = depth == 0 ? -1 : (int)depth;
    if (json)
        status = print_json(&res, dep);
    else
        print_text(&res, one_file, dep);
out:
    free(res.changed);
    ktab_free(&tab);
    mt_replay_close(sd[0].rp);
    mt_replay_close(sd[1].rp);
    return status;
}
