/* summary.c: `memtrace summary FILE`: peaks, totals and the stacks alive at the peak.
 *
 * Streaming in two passes, so memory follows live allocations and distinct stacks,
 * never the number of events. Pass 1 replays every event into a table of live blocks
 * (keyed by address) and one of live segments, and remembers the index of the event
 * that first reached each peak. Pass 2 reopens the file, replays the same rules up to
 * that index, and groups what is live then by stack. Both passes apply events with the
 * same functions, so the peak that pass 2 stops at is exactly the one pass 1 found. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const struct mt_opt summary_opts[] = {
    {"json", 'j', NULL, "print one JSON object (bytes and ns) instead of text"},
    {"top", 'n', "N", "show the N largest stacks alive at the peak (default 10, 0: all)"},
    {"depth", 'd', "N", "show at most N frames of each stack (default 16, 0: all)"},
    {NULL, 0, NULL, NULL},
};
enum { OPT_JSON, OPT_TOP, OPT_DEPTH };

static const struct mt_help summary_help = {
    "summary",
    "memtrace summary FILE [--json] [--top N] [--depth N]",
    "Replays the events of FILE. Allocated bytes rise on 'alloc' and fall on\n"
    "'free_completed' of a live block (a free of an unknown address is counted as\n"
    "unmatched); reserved bytes rise on 'segment_alloc' and 'segment_map' and fall on\n"
    "'segment_free' and 'segment_unmap'. Prints the peaks of both with their times,\n"
    "totals, what is live at the end, annotations and OOM events, then the stacks\n"
    "holding the most bytes at the peak of allocated memory (of reserved memory when\n"
    "the file has no block events), innermost frame first.",
    summary_opts,
};

/* Open addressing with linear probing and backward-shift deletion. */
struct live {
    uint64_t key;
    uint64_t size;
    uint32_t stack;
    uint32_t used;
};

struct table {
    struct live *slots;
    size_t cap; /* a power of two */
    size_t n;
};

static size_t slot_of(const struct table *t, uint64_t key)
{
    uint64_t x = key;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (t->cap - 1);
}

static int table_grow(struct table *t)
{
    size_t cap = t->cap ? t->cap * 2 : 1024;
    struct live *old = t->slots;
    size_t oldcap = t->cap;
    t->slots = calloc(cap, sizeof(*t->slots));
    if (!t->slots) {
        t->slots = old;
        return -1;
    }
    t->cap = cap;
    for (size_t k = 0; k < oldcap; k++) {
        if (!old[k].used)
            continue;
        size_t s = slot_of(t, old[k].key);
        while (t->slots[s].used)
            s = (s + 1) & (cap - 1);
        t->slots[s] = old[k];
    }
    free(old);
    return 0;
}

static struct live *table_find(const struct table *t, uint64_t key)
{
    if (!t->n)
        return NULL;
    for (size_t s = slot_of(t, key);; s = (s + 1) & (t->cap - 1)) {
        if (!t->slots[s].used)
            return NULL;
        if (t->slots[s].key == key)
            return &t->slots[s];
    }
}

/* Returns the slot for key, marking it used (size 0) if new and telling which in
 * *existed when not NULL; NULL without memory. */
static struct live *table_get(struct table *t, uint64_t key, int *existed)
{
    if ((t->n + 1) * 2 > t->cap && table_grow(t) < 0)
        return NULL;
    size_t s = slot_of(t, key);
    while (t->slots[s].used) {
        if (t->slots[s].key == key) {
            if (existed)
                *existed = 1;
            return &t->slots[s];
        }
        s = (s + 1) & (t->cap - 1);
    }
    if (existed)
        *existed = 0;
    t->slots[s].used = 1;
    t->slots[s].key = key;
    t->slots[s].size = 0;
    t->slots[s].stack = 0;
    t->n++;
    return &t->slots[s];
}

static void table_remove(struct table *t, struct live *e)
{
    size_t mask = t->cap - 1;
    size_t hole = (size_t)(e - t->slots);
    size_t s = hole;
    t->slots[hole].used = 0;
    t->n--;
    for (;;) {
        s = (s + 1) & mask;
        if (!t->slots[s].used)
            return;
        size_t home = slot_of(t, t->slots[s].key);
        /* Move s into the hole unless its home lies cyclically in (hole, s]. */
        if (((s - home) & mask) >= ((s - hole) & mask)) {
            t->slots[hole] = t->slots[s];
            t->slots[s].used = 0;
            hole = s;
        }
    }
}

static void table_free(struct table *t)
{
    free(t->slots);
    memset(t, 0, sizeof(*t));
}

struct tally {
    uint64_t count, bytes;
};

struct level {
    uint64_t cur;
    uint64_t peak;
    uint64_t peak_event; /* valid when peak > 0 */
    uint64_t peak_time;
};

struct replay {
    struct table blocks, segs;
    struct level allocated, reserved;
    struct tally allocs, frees, unmatched_frees, replaced_allocs;
    struct tally seg_allocs, seg_frees, unmatched_seg_frees, replaced_segs;
    int nomem;
};

static void rise(struct level *l, uint64_t by, uint64_t index, uint64_t t)
{
    l->cur += by;
    if (l->cur > l->peak) {
        l->peak = l->cur;
        l->peak_event = index;
        l->peak_time = t;
    }
}

/* An allocation at a live address replaces the live one: the recorder missed its
 * free, and counting both would leave bytes that are never freed. */
static void add_live(struct replay *rp, struct table *t, struct level *l, struct tally *replaced,
                     const struct memtrace_event *ev, uint64_t index)
{
    int existed;
    struct live *e = table_get(t, ev->addr, &existed);
    if (!e) {
        rp->nomem = 1;
        return;
    }
    if (existed) {
        replaced->count++;
        replaced->bytes += e->size;
        l->cur -= e->size;
    }
    e->size = ev->size;
    e->stack = ev->stack;
    rise(l, ev->size, index, ev->time_ns);
}

static void apply_block(struct replay *rp, const struct memtrace_event *ev, uint64_t index)
{
    if (ev->action == MEMTRACE_ALLOC) {
        rp->allocs.count++;
        rp->allocs.bytes += ev->size;
        add_live(rp, &rp->blocks, &rp->allocated, &rp->replaced_allocs, ev, index);
    } else if (ev->action == MEMTRACE_FREE_COMPLETED) {
        struct live *e = table_find(&rp->blocks, ev->addr);
        if (!e) {
            rp->unmatched_frees.count++;
            rp->unmatched_frees.bytes += ev->size;
            return;
        }
        rp->frees.count++;
        rp->frees.bytes += e->size;
        rp->allocated.cur -= e->size;
        table_remove(&rp->blocks, e);
    }
}

/* segment_free releases the whole segment at addr. segment_unmap releases size bytes
 * from addr: expandable segments map in pieces and may unmap several pieces, or part
 * of one, at once, so it walks live pieces from addr and trims a partly unmapped one. */
static void apply_seg(struct replay *rp, const struct memtrace_event *ev, uint64_t index)
{
    switch (ev->action) {
    case MEMTRACE_SEGMENT_ALLOC:
    case MEMTRACE_SEGMENT_MAP:
        rp->seg_allocs.count++;
        rp->seg_allocs.bytes += ev->size;
        add_live(rp, &rp->segs, &rp->reserved, &rp->replaced_segs, ev, index);
        return;
    case MEMTRACE_SEGMENT_FREE: {
        struct live *e = table_find(&rp->segs, ev->addr);
        if (!e)
            break;
        rp->seg_frees.count++;
        rp->seg_frees.bytes += e->size;
        rp->reserved.cur -= e->size;
        table_remove(&rp->segs, e);
        return;
    }
    case MEMTRACE_SEGMENT_UNMAP: {
        uint64_t at = ev->addr, left = ev->size, freed = 0;
        int matched = 0;
        struct live *e;
        while ((e = table_find(&rp->segs, at)) != NULL) {
            uint64_t sz = e->size;
            matched = 1;
            if (left != 0 && sz > left) {
                uint32_t stack = e->stack;
                table_remove(&rp->segs, e);
                struct live *rest = table_get(&rp->segs, at + left, NULL);
                if (!rest) {
                    rp->nomem = 1;
                } else {
                    rest->size = sz - left;
                    rest->stack = stack;
                }
                freed += left;
                break;
            }
            table_remove(&rp->segs, e);
            freed += sz;
            if (left == 0 || sz == left || sz == 0)
                break;
            left -= sz;
            at += sz;
        }
        if (!matched)
            break;
        rp->seg_frees.count++;
        rp->seg_frees.bytes += freed;
        rp->reserved.cur -= freed;
        return;
    }
    default:
        return;
    }
    rp->unmatched_seg_frees.count++;
    rp->unmatched_seg_frees.bytes += ev->size;
}

struct figures {
    struct replay rp;
    uint64_t events;
    uint64_t t_min, t_max;
    uint64_t annotations, annotate_marks;
    uint64_t ooms, oom_largest, oom_free;
    int truncated;
    int have_wall; /* the metadata gives the wall time of monotonic time mono0 */
    uint64_t wall0, mono0;
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
    /* Pass 2's reader, stopped at the peak: every stack live there was written
     * before it, so its tables can print them. */
    struct memtrace_reader *r;
};

static int pass1(const char *path, struct figures *f)
{
    struct memtrace_reader *r = mt_open(path);
    if (!r)
        return MT_EXIT_FAIL;
    struct mt_progress prog;
    mt_progress_init(&prog, r, "summary: pass 1 of 2", 0);
    struct memtrace_event ev;
    int rc;
    f->t_min = UINT64_MAX;
    while ((rc = memtrace_reader_next(r, &ev)) == 1) {
        uint64_t i = f->events++;
        if (ev.time_ns < f->t_min)
            f->t_min = ev.time_ns;
        if (ev.time_ns > f->t_max)
            f->t_max = ev.time_ns;
        switch (ev.action) {
        case MEMTRACE_ALLOC:
        case MEMTRACE_FREE_REQUESTED:
        case MEMTRACE_FREE_COMPLETED:
            apply_block(&f->rp, &ev, i);
            break;
        case MEMTRACE_SEGMENT_ALLOC:
        case MEMTRACE_SEGMENT_FREE:
        case MEMTRACE_SEGMENT_MAP:
        case MEMTRACE_SEGMENT_UNMAP:
            apply_seg(&f->rp, &ev, i);
            break;
        case MEMTRACE_ANNOTATE:
            f->annotations++;
            break;
        case MEMTRACE_OOM:
            if (f->ooms++ == 0 || ev.size > f->oom_largest) {
                f->oom_largest = ev.size;
                f->oom_free = ev.aux;
            }
            break;
        default:
            break;
        }
        mt_progress_update(&prog, f->events);
    }
    mt_progress_done(&prog);
    int status = MT_EXIT_OK;
    if (rc < 0)
        status = mt_read_failed(r, path);
    else if (f->rp.nomem) {
        mt_error("out of memory while replaying %s", path);
        status = MT_EXIT_FAIL;
    } else {
        mt_warn_if_truncated(r, path, f->events);
        f->truncated = memtrace_reader_truncated(r);
        const char *text = memtrace_reader_meta(r);
        json_t *meta = text ? json_loads(text, 0, NULL) : NULL;
        f->have_wall = mt_meta_clock(meta, &f->wall0, &f->mono0) && f->mono0 != 0;
        json_decref(meta);
    }
    memtrace_reader_close(r);
    return status;
}

static int pass2(const char *path, const struct figures *f, struct top *top)
{
    memset(top, 0, sizeof(*top));
    int blocks = f->rp.allocs.count > 0;
    const struct level *l = blocks ? &f->rp.allocated : &f->rp.reserved;
    if (l->peak == 0)
        return MT_EXIT_OK;
    top->of = blocks ? "allocated" : "reserved";
    top->event = l->peak_event;
    top->time = l->peak_time;
    top->bytes = l->peak;

    struct memtrace_reader *r = mt_open(path);
    if (!r)
        return MT_EXIT_FAIL;
    struct mt_progress prog;
    mt_progress_init(&prog, r, "summary: pass 2 of 2", top->event + 1);
    struct replay rp;
    memset(&rp, 0, sizeof(rp));
    struct memtrace_event ev;
    uint64_t i = 0;
    int rc = 0;
    while (i <= top->event && (rc = memtrace_reader_next(r, &ev)) == 1) {
        if (blocks)
            apply_block(&rp, &ev, i);
        else
            apply_seg(&rp, &ev, i);
        i++;
        mt_progress_update(&prog, i);
    }
    mt_progress_done(&prog);
    int status = MT_EXIT_OK;
    if (rc < 0) {
        status = mt_read_failed(r, path);
        goto out;
    }
    const struct table *t = blocks ? &rp.blocks : &rp.segs;
    struct table by_stack;
    memset(&by_stack, 0, sizeof(by_stack));
    for (size_t k = 0; k < t->cap; k++) {
        const struct live *e = &t->slots[k];
        if (!e->used)
            continue;
        struct live *g = table_get(&by_stack, e->stack, NULL);
        if (!g) {
            rp.nomem = 1;
            break;
        }
        g->size += e->size;
        g->stack++; /* the number of live allocations with this stack */
        top->live_count++;
    }
    top->groups = calloc(by_stack.n ? by_stack.n : 1, sizeof(*top->groups));
    if (!top->groups || rp.nomem) {
        table_free(&by_stack);
        mt_error("out of memory while grouping the stacks of %s", path);
        status = MT_EXIT_FAIL;
        goto out;
    }
    for (size_t k = 0; k < by_stack.cap; k++) {
        const struct live *g = &by_stack.slots[k];
        if (g->used)
            top->groups[top->ngroups++] =
                (struct group){.stack = (uint32_t)g->key, .bytes = g->size, .count = g->stack};
    }
    table_free(&by_stack);
    qsort(top->groups, top->ngroups, sizeof(*top->groups), group_cmp);
out:
    table_free(&rp.blocks);
    table_free(&rp.segs);
    if (status == MT_EXIT_OK)
        top->r = r;
    else
        memtrace_reader_close(r);
    return status;
}

struct out {
    const char *path;
    const struct figures *f;
    const struct top *top;
    const struct memtrace_reader *r;
    size_t ntop;
    int depth;
};

static uint64_t wall_of(const struct out *o, uint64_t t)
{
    return o->f->wall0 + (t - o->f->mono0);
}

static json_t *tally_json(const struct tally *t)
{
    json_t *o = json_object();
    json_object_set_new(o, "count", mt_json_u64(t->count));
    json_object_set_new(o, "bytes", mt_json_u64(t->bytes));
    return o;
}

static json_t *level_json(const struct out *o, const struct level *l, uint64_t live)
{
    char buf[64];
    json_t *j = json_object();
    json_object_set_new(j, "peak_bytes", mt_json_u64(l->peak));
    if (l->peak) {
        json_object_set_new(j, "peak_event", mt_json_u64(l->peak_event));
        json_object_set_new(j, "peak_time_ns", mt_json_u64(l->peak_time));
        json_object_set_new(j, "peak_offset_ns", mt_json_u64(l->peak_time - o->f->t_min));
        json_object_set_new(
            j, "peak_time_utc",
            o->f->have_wall && l->peak_time >= o->f->mono0
                ? json_string(mt_fmt_utc(buf, sizeof(buf), wall_of(o, l->peak_time)))
                : json_null());
    } else {
        json_object_set_new(j, "peak_event", json_null());
        json_object_set_new(j, "peak_time_ns", json_null());
        json_object_set_new(j, "peak_offset_ns", json_null());
        json_object_set_new(j, "peak_time_utc", json_null());
    }
    json_object_set_new(j, "current_bytes", mt_json_u64(l->cur));
    json_object_set_new(j, "current_count", mt_json_u64(live));
    return j;
}

static int print_json(const struct out *o)
{
    const struct figures *f = o->f;
    const struct replay *rp = &f->rp;
    const struct top *top = o->top;
    json_t *j = json_object();
    json_object_set_new(j, "file", json_string(o->path));
    json_object_set_new(j, "truncated", json_boolean(o->f->truncated));
    json_object_set_new(j, "events", mt_json_u64(f->events));
    json_object_set_new(j, "first_time_ns", mt_json_u64(f->events ? f->t_min : 0));
    json_object_set_new(j, "last_time_ns", mt_json_u64(f->events ? f->t_max : 0));
    json_object_set_new(j, "duration_ns", mt_json_u64(f->events ? f->t_max - f->t_min : 0));
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
    json_object_set_new(j, "annotations", mt_json_u64(f->annotations));
    json_t *oom = json_object();
    json_object_set_new(oom, "count", mt_json_u64(f->ooms));
    json_object_set_new(oom, "largest_bytes", mt_json_u64(f->oom_largest));
    json_object_set_new(oom, "device_free_bytes", mt_json_u64(f->oom_free));
    json_object_set_new(j, "oom", oom);

    json_t *t = json_object();
    json_object_set_new(t, "of", top->of ? json_string(top->of) : json_null());
    json_object_set_new(t, "event", top->of ? mt_json_u64(top->event) : json_null());
    json_object_set_new(t, "time_ns", top->of ? mt_json_u64(top->time) : json_null());
    json_object_set_new(t, "bytes", mt_json_u64(top->bytes));
    json_object_set_new(t, "live_count", mt_json_u64(top->live_count));
    json_object_set_new(t, "distinct_stacks", mt_json_u64(top->ngroups));
    json_t *arr = json_array();
    for (size_t k = 0; k < o->ntop; k++) {
        const struct group *g = &top->groups[k];
        json_t *s = json_object();
        json_object_set_new(s, "stack", json_integer(g->stack));
        json_object_set_new(s, "bytes", mt_json_u64(g->bytes));
        json_object_set_new(s, "count", mt_json_u64(g->count));
        uint32_t none[1];
        json_object_set_new(
            s, "depth",
            json_integer(g->stack ? memtrace_reader_stack(o->r, g->stack, none, 0) : 0));
        json_object_set_new(s, "frames", mt_stack_json(o->r, g->stack, o->depth));
        json_array_append_new(arr, s);
    }
    json_object_set_new(t, "stacks", arr);
    json_object_set_new(j, "top", t);
    return mt_json_print(j);
}

static void print_level(const struct out *o, const char *name, const struct level *l)
{
    char a[64], b[64], c[64];
    if (!l->peak) {
        printf("peak %-12s 0 B (0 bytes)\n", name);
        return;
    }
    printf("peak %-12s %s (%" PRIu64 " bytes) at +%s (%" PRIu64 " ns", name,
           mt_fmt_bytes(a, sizeof(a), l->peak), l->peak,
           mt_fmt_duration(b, sizeof(b), l->peak_time - o->f->t_min), l->peak_time);
    if (o->f->have_wall && l->peak_time >= o->f->mono0)
        printf(", %s", mt_fmt_utc(c, sizeof(c), wall_of(o, l->peak_time)));
    printf("), event %" PRIu64 "\n", l->peak_event);
}

static void print_tally(const char *name, const struct tally *t)
{
    char a[64], b[64];
    printf("%-17s %s (%s, %" PRIu64 " bytes)\n", name, mt_fmt_count(a, sizeof(a), t->count),
           mt_fmt_bytes(b, sizeof(b), t->bytes), t->bytes);
}

static void print_text(const struct out *o)
{
    const struct figures *f = o->f;
    const struct replay *rp = &f->rp;
    const struct top *top = o->top;
    char a[64], b[64], c[64], d[64];
    printf("file              %s%s\n", o->path, o->f->truncated ? " (truncated)" : "");
    printf("events            %s over %s\n", mt_fmt_count(a, sizeof(a), f->events),
           mt_fmt_duration(b, sizeof(b), f->events ? f->t_max - f->t_min : 0));
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
    printf("at end            allocated %s (%" PRIu64 " bytes) in %s blocks, reserved %s (%" PRIu64
           " bytes) in %s segments\n",
           mt_fmt_bytes(a, sizeof(a), rp->allocated.cur), rp->allocated.cur,
           mt_fmt_count(b, sizeof(b), rp->blocks.n), mt_fmt_bytes(c, sizeof(c), rp->reserved.cur),
           rp->reserved.cur, mt_fmt_count(d, sizeof(d), rp->segs.n));
    printf("annotations       %s\n", mt_fmt_count(a, sizeof(a), f->annotations));
    if (f->ooms)
        printf("oom events        %s (largest request %s, device free %s)\n",
               mt_fmt_count(a, sizeof(a), f->ooms), mt_fmt_bytes(b, sizeof(b), f->oom_largest),
               mt_fmt_bytes(c, sizeof(c), f->oom_free));
    else
        printf("oom events        0\n");

    if (!top->of) {
        printf("\nNothing was allocated: no stacks to show.\n");
        return;
    }
    printf("\nTop %zu of %zu stacks alive at the peak of %s memory (event %" PRIu64
           ", %s in %s %s):\n",
           o->ntop, top->ngroups, top->of, top->event, mt_fmt_bytes(a, sizeof(a), top->bytes),
           mt_fmt_count(b, sizeof(b), top->live_count),
           strcmp(top->of, "allocated") == 0 ? "blocks" : "segments");
    for (size_t k = 0; k < o->ntop; k++) {
        const struct group *g = &top->groups[k];
        printf("\n%2zu. %s (%" PRIu64 " bytes) in %s %s, stack %u\n", k + 1,
               mt_fmt_bytes(a, sizeof(a), g->bytes), g->bytes, mt_fmt_count(b, sizeof(b), g->count),
               g->count == 1 ? "allocation" : "allocations", (unsigned)g->stack);
        mt_stack_print(stdout, o->r, g->stack, o->depth, "      ");
    }
}

int mt_summary_peaks(const char *path, struct mt_peaks *p)
{
    struct figures f;
    memset(&f, 0, sizeof(f));
    int status = pass1(path, &f);
    if (status == MT_EXIT_OK) {
        p->events = f.events;
        p->peak_allocated = f.rp.allocated.peak;
        p->peak_reserved = f.rp.reserved.peak;
        p->truncated = f.truncated;
    }
    table_free(&f.rp.blocks);
    table_free(&f.rp.segs);
    return status;
}

int mt_cmd_summary(int argc, char **argv)
{
    struct mt_args args;
    const char *path = NULL, *val;
    int json = 0, k;
    long long ntop = 10, depth = 16;
    mt_args_init(&args, argc, argv, &summary_help);
    while ((k = mt_args_next(&args, &val)) != MT_OPT_END) {
        switch (k) {
        case MT_OPT_HELP:
            mt_help_print(stdout, &summary_help);
            return MT_EXIT_OK;
        case MT_OPT_ERROR:
            return MT_EXIT_USAGE;
        case MT_OPT_POSITIONAL:
            if (path)
                return mt_usage_error("summary", "'summary' takes one file, got '%s' and '%s'",
                                      path, val);
            path = val;
            break;
        case OPT_JSON:
            json = 1;
            break;
        case OPT_TOP:
            if (mt_parse_int("summary", "top", val, 0, 1000000000, &ntop))
                return MT_EXIT_USAGE;
            break;
        case OPT_DEPTH:
            if (mt_parse_int("summary", "depth", val, 0, 4096, &depth))
                return MT_EXIT_USAGE;
            break;
        default:
            break;
        }
    }
    if (!path)
        return mt_usage_error("summary", "'summary' needs a FILE argument");

    struct figures f;
    memset(&f, 0, sizeof(f));
    struct top top;
    memset(&top, 0, sizeof(top));
    int status = pass1(path, &f);
    if (status == MT_EXIT_OK)
        status = pass2(path, &f, &top);
    if (status != MT_EXIT_OK)
        goto out;

    struct out o = {
        .path = path,
        .f = &f,
        .top = &top,
        .r = top.r,
        .ntop = ntop == 0 || (size_t)ntop > top.ngroups ? top.ngroups : (size_t)ntop,
        .depth = depth == 0 ? -1 : (int)depth,
    };
    if (json)
        status = print_json(&o);
    else
        print_text(&o);
out:
    if (top.r)
        memtrace_reader_close(top.r);
    free(top.groups);
    table_free(&f.rp.blocks);
    table_free(&f.rp.segs);
    return status;
}
