/* summary-t.c: `memtrace summary` against a reference computed here.
 *
 * Files of random events (several seeds) are written with the internal writer; the
 * test replays the same event list with plain arrays, keeping a copy of the live set
 * each time a new peak is reached, and compares every figure of `summary --json`
 * exactly: peaks, their event and time, totals, what is live at the end, and the
 * stacks at the peak with their frames. */
#include "config.h"

#include <inttypes.h>

#include "cli-util.h"
#include "rng.h"

#define NSYM    6
#define NMOD    3
#define NFILE   2
#define NFRAMES 16
#define NSTACKS 24
#define BASE_T  1000000000000ull
#define WALL0   1700000000000000000ull

/* String ids: symbols 1..NSYM, modules next, files next. */
#define SYM_ID(i)  (1 + (i))
#define MOD_ID(i)  (1 + NSYM + (i))
#define FILE_ID(i) (1 + NSYM + NMOD + (i))

static uint64_t rng_state;

static uint64_t rnd(void)
{
    return test_rand(&rng_state);
}

static uint64_t below(uint64_t n)
{
    return rnd() % n;
}

static const char *strs[NSYM + NMOD + NFILE];
static struct mt_frame_rec frames[NFRAMES + 1];
static uint32_t st_parent[NSTACKS + 1], st_frame[NSTACKS + 1];

static void make_tables(void)
{
    static char buf[NSYM + NMOD + NFILE][32];
    for (int i = 0; i < NSYM; i++)
        snprintf(buf[SYM_ID(i) - 1], 32, "fn_%d", i);
    for (int i = 0; i < NMOD; i++)
        snprintf(buf[MOD_ID(i) - 1], 32, "/usr/lib/libm%d.so", i);
    for (int i = 0; i < NFILE; i++)
        snprintf(buf[FILE_ID(i) - 1], 32, "src/file%d.c", i);
    for (int i = 0; i < NSYM + NMOD + NFILE; i++)
        strs[i] = buf[i];
    for (int i = 1; i <= NFRAMES; i++) {
        frames[i].ip = 0x400000 + (uint64_t)i * 0x40;
        frames[i].offset = (uint64_t)i * 0x40;
        frames[i].module = MOD_ID(i % NMOD);
        frames[i].symbol = i % 4 == 0 ? 0 : SYM_ID(i % NSYM);
        frames[i].file = i % 3 == 0 ? FILE_ID(i % NFILE) : 0;
        frames[i].line = i % 3 == 0 ? 10 + (uint32_t)i : 0;
    }
    for (int i = 1; i <= NSTACKS; i++) {
        st_parent[i] = i <= 4 ? 0 : 1 + (uint32_t)below((uint64_t)i - 1);
        st_frame[i] = 1 + (uint32_t)below(NFRAMES);
    }
}

struct evlist {
    struct memtrace_event *ev;
    size_t n, cap;
};

static struct memtrace_event *push(struct evlist *l, int action, uint64_t *t)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 1024;
        l->ev = realloc(l->ev, l->cap * sizeof(*l->ev));
    }
    struct memtrace_event *e = &l->ev[l->n++];
    memset(e, 0, sizeof(*e));
    *t += 1 + below(2000);
    e->time_ns = *t;
    e->action = (uint8_t)action;
    e->tid = 77;
    e->device = 0;
    return e;
}

struct blk {
    uint64_t addr, size;
    uint32_t stack;
};

struct blks {
    struct blk *b;
    size_t n, cap;
};

static void blk_add(struct blks *s, uint64_t addr, uint64_t size, uint32_t stack)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->b = realloc(s->b, s->cap * sizeof(*s->b));
    }
    s->b[s->n++] = (struct blk){addr, size, stack};
}

static long blk_find(const struct blks *s, uint64_t addr)
{
    for (size_t k = 0; k < s->n; k++)
        if (s->b[k].addr == addr)
            return (long)k;
    return -1;
}

static void blk_del(struct blks *s, size_t k)
{
    s->b[k] = s->b[--s->n];
}

/* Random events: interleaved allocs and frees of random sizes and stacks (addresses
 * reused after a free), free_requested before some frees, frees of unknown
 * addresses, segments allocated, mapped, freed and unmapped, annotations, OOMs and
 * counters. */
static void generate(struct evlist *l, size_t n, int with_blocks)
{
    struct blks live = {0}, segs = {0};
    uint64_t *pool = calloc(n + 1, sizeof(*pool));
    size_t npool = 0;
    uint64_t t = BASE_T, next_addr = 0x7f0000000000ull, next_seg = 0x100000000000ull;
    while (l->n < n) {
        unsigned op = (unsigned)below(100);
        /* Every other thousand events frees more than it allocates, so peaks fall
         * inside the recording rather than at its end. */
        if ((l->n / 1000) % 2 && op < 40 && below(2))
            op = 50;
        if (!with_blocks && op < 78)
            op = 78 + (unsigned)below(14);
        if (op < 40) {
            uint64_t addr;
            if (npool && below(3) == 0) {
                size_t k = below(npool);
                addr = pool[k];
                pool[k] = pool[--npool];
            } else {
                addr = next_addr;
                next_addr += 0x1000 * (1 + below(64));
            }
            uint64_t size = below(4) == 0 ? 1 + below(1024) : 512 * (1 + below(8192));
            struct memtrace_event *e = push(l, MEMTRACE_ALLOC, &t);
            e->addr = addr;
            e->size = size;
            e->requested_size = size;
            e->stack = (uint32_t)below(NSTACKS + 1);
            blk_add(&live, addr, size, e->stack);
        } else if (op < 75) {
            if (!live.n)
                continue;
            size_t k = below(live.n);
            if (below(2)) {
                struct memtrace_event *e = push(l, MEMTRACE_FREE_REQUESTED, &t);
                e->addr = live.b[k].addr;
                e->size = live.b[k].size;
            }
            struct memtrace_event *e = push(l, MEMTRACE_FREE_COMPLETED, &t);
            e->addr = live.b[k].addr;
            e->size = live.b[k].size;
            pool[npool++] = live.b[k].addr;
            blk_del(&live, k);
        } else if (op < 78) {
            struct memtrace_event *e = push(l, MEMTRACE_FREE_COMPLETED, &t);
            e->addr = 0xdead00000000ull + below(1 << 20) * 16;
            e->size = 1 + below(100000);
        } else if (op < 88) {
            int map = op >= 84;
            struct memtrace_event *e =
                push(l, map ? MEMTRACE_SEGMENT_MAP : MEMTRACE_SEGMENT_ALLOC, &t);
            e->addr = next_seg;
            next_seg += 1ull << 26;
            e->size = (2ull << 20) * (1 + below(10));
            e->stack = (uint32_t)below(NSTACKS + 1);
            blk_add(&segs, e->addr, e->size, e->stack);
        } else if (op < 94) {
            if (!segs.n)
                continue;
            size_t k = below(segs.n);
            struct memtrace_event *e =
                push(l, below(2) ? MEMTRACE_SEGMENT_FREE : MEMTRACE_SEGMENT_UNMAP, &t);
            e->addr = segs.b[k].addr;
            e->size = segs.b[k].size;
            blk_del(&segs, k);
        } else if (op < 95) {
            struct memtrace_event *e = push(l, MEMTRACE_SEGMENT_FREE, &t);
            e->addr = 0xbeef00000000ull + below(1000) * 4096;
            e->size = 4096;
        } else if (op < 97) {
            struct memtrace_event *e = push(l, MEMTRACE_ANNOTATE, &t);
            e->aux = below(3);
            e->category = SYM_ID(0);
        } else if (op < 98) {
            struct memtrace_event *e = push(l, MEMTRACE_OOM, &t);
            e->size = 1 + below(1ull << 34);
            e->aux = below(1ull << 30);
        } else {
            struct memtrace_event *e = push(l, MEMTRACE_COUNTER, &t);
            e->addr = below(1ull << 33);
            e->size = 80ull << 30;
        }
    }
    free(pool);
    free(live.b);
    free(segs.b);
}

static int file_rank = -1; /* the rank written into the metadata, if >= 0 */

static void write_file(const char *path, const struct evlist *l, int end)
{
    struct mt_writer *w;
    char meta[256], rank[32] = "";
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    if (file_rank >= 0)
        snprintf(rank, sizeof(rank), ", \"rank\": %d", file_rank);
    snprintf(meta, sizeof(meta),
             "{\"host\": \"testhost\", \"pid\": 1, \"start_time_ns\": %llu, "
             "\"start_monotonic_ns\": %llu%s}",
             (unsigned long long)WALL0, (unsigned long long)BASE_T, rank);
    cli_check(mt_writer_meta(w, meta), "mt_writer_meta");
    cli_check(mt_writer_strings(w, 1, NSYM + NMOD + NFILE, strs), "mt_writer_strings");
    cli_check(mt_writer_frames(w, 1, NFRAMES, frames + 1), "mt_writer_frames");
    cli_check(mt_writer_stacks(w, 1, NSTACKS, st_parent + 1, st_frame + 1), "mt_writer_stacks");
    for (size_t k = 0; k < l->n; k += 500)
        cli_check(mt_writer_events(w, l->ev + k, l->n - k < 500 ? l->n - k : 500),
                  "mt_writer_events");
    if (end) {
        cli_check(mt_writer_state(w, l->n ? l->ev[l->n - 1].time_ns : 0, NULL, 0),
                  "mt_writer_state");
        cli_check(mt_writer_end(w, "{\"dropped\": 0, \"overflowed\": false}"), "mt_writer_end");
    } else {
        mt_writer_abort(w);
    }
}

struct tally {
    uint64_t count, bytes;
};

struct group {
    uint32_t stack;
    uint64_t bytes, count;
};

struct ref {
    uint64_t events, t_min, t_max;
    uint64_t peak[2], peak_event[2], peak_time[2], cur[2], live[2];
    struct tally allocs, frees, unmatched, seg_allocs, seg_frees, seg_unmatched;
    uint64_t annotations, ooms, oom_largest, oom_free;
    struct blks at_peak[2]; /* copies of the live sets when each peak was reached */
    struct group groups[NSTACKS + 1];
    int ngroups;
    const char *of;
};

static void snap(struct blks *dst, const struct blks *src)
{
    dst->n = 0;
    for (size_t k = 0; k < src->n; k++)
        blk_add(dst, src->b[k].addr, src->b[k].size, src->b[k].stack);
}

static int group_cmp(const void *pa, const void *pb)
{
    const struct group *a = pa, *b = pb;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return a->stack < b->stack ? -1 : a->stack > b->stack;
}

/* The reference: exact-address matching over plain arrays. */
static void reference(const struct evlist *l, struct ref *r)
{
    struct blks live[2] = {{0}, {0}};
    memset(r, 0, sizeof(*r));
    r->t_min = UINT64_MAX;
    for (size_t i = 0; i < l->n; i++) {
        const struct memtrace_event *e = &l->ev[i];
        r->events++;
        if (e->time_ns < r->t_min)
            r->t_min = e->time_ns;
        if (e->time_ns > r->t_max)
            r->t_max = e->time_ns;
        int kind = -1;
        long k;
        switch (e->action) {
        case MEMTRACE_ALLOC:
            r->allocs.count++;
            r->allocs.bytes += e->size;
            blk_add(&live[0], e->addr, e->size, e->stack);
            r->cur[0] += e->size;
            kind = 0;
            break;
        case MEMTRACE_FREE_COMPLETED:
            if ((k = blk_find(&live[0], e->addr)) >= 0) {
                r->frees.count++;
                r->frees.bytes += live[0].b[k].size;
                r->cur[0] -= live[0].b[k].size;
                blk_del(&live[0], (size_t)k);
            } else {
                r->unmatched.count++;
                r->unmatched.bytes += e->size;
            }
            break;
        case MEMTRACE_SEGMENT_ALLOC:
        case MEMTRACE_SEGMENT_MAP:
            r->seg_allocs.count++;
            r->seg_allocs.bytes += e->size;
            blk_add(&live[1], e->addr, e->size, e->stack);
            r->cur[1] += e->size;
            kind = 1;
            break;
        case MEMTRACE_SEGMENT_FREE:
        case MEMTRACE_SEGMENT_UNMAP:
            if ((k = blk_find(&live[1], e->addr)) >= 0) {
                r->seg_frees.count++;
                r->seg_frees.bytes += live[1].b[k].size;
                r->cur[1] -= live[1].b[k].size;
                blk_del(&live[1], (size_t)k);
            } else {
                r->seg_unmatched.count++;
                r->seg_unmatched.bytes += e->size;
            }
            break;
        case MEMTRACE_ANNOTATE:
            r->annotations++;
            break;
        case MEMTRACE_OOM:
            if (r->ooms++ == 0 || e->size > r->oom_largest) {
                r->oom_largest = e->size;
                r->oom_free = e->aux;
            }
            break;
        }
        if (kind >= 0 && r->cur[kind] > r->peak[kind]) {
            r->peak[kind] = r->cur[kind];
            r->peak_event[kind] = i;
            r->peak_time[kind] = e->time_ns;
            snap(&r->at_peak[kind], &live[kind]);
        }
    }
    r->live[0] = live[0].n;
    r->live[1] = live[1].n;
    int kind = r->allocs.count ? 0 : 1;
    r->of = r->peak[kind] ? (kind ? "reserved" : "allocated") : NULL;
    for (size_t k = 0; k < r->at_peak[kind].n; k++) {
        const struct blk *b = &r->at_peak[kind].b[k];
        int g;
        for (g = 0; g < r->ngroups && r->groups[g].stack != b->stack; g++)
            ;
        if (g == r->ngroups)
            r->groups[r->ngroups++] = (struct group){b->stack, 0, 0};
        r->groups[g].bytes += b->size;
        r->groups[g].count++;
    }
    qsort(r->groups, (size_t)r->ngroups, sizeof(r->groups[0]), group_cmp);
    free(live[0].b);
    free(live[1].b);
}

static void free_ref(struct ref *r)
{
    free(r->at_peak[0].b);
    free(r->at_peak[1].b);
}

static int stack_depth(uint32_t s)
{
    int d = 0;
    for (; s; s = st_parent[s])
        d++;
    return d;
}

/* Compares the frames of stack s, innermost first, with the JSON array. */
static int frames_match(json_t *arr, uint32_t s, int depth)
{
    int k = 0;
    for (; s && k < depth; s = st_parent[s], k++) {
        json_t *f = json_array_get(arr, (size_t)k);
        const struct mt_frame_rec *fr = &frames[st_frame[s]];
        const char *sym = fr->symbol ? strs[fr->symbol - 1] : "";
        const char *file = fr->file ? strs[fr->file - 1] : "";
        if (json_integer_value(json_object_get(f, "id")) != st_frame[s] ||
            strcmp(json_string_value(json_object_get(f, "symbol")), sym) != 0 ||
            strcmp(json_string_value(json_object_get(f, "module")), strs[fr->module - 1]) != 0 ||
            (uint64_t)json_integer_value(json_object_get(f, "offset")) != fr->offset ||
            strcmp(json_string_value(json_object_get(f, "file")), file) != 0 ||
            (uint32_t)json_integer_value(json_object_get(f, "line")) != fr->line) {
            diag("stack %u frame %d differs", s, k);
            return 0;
        }
    }
    return (size_t)k == json_array_size(arr);
}

static void check_level(json_t *j, const char *name, const struct ref *r, int kind)
{
    char key[64];
#define KEY(k) (snprintf(key, sizeof(key), "%s.%s", name, k), key)
    is_int((long long)r->peak[kind], cli_int(j, KEY("peak_bytes")), "%s peak bytes", name);
    if (r->peak[kind]) {
        is_int((long long)r->peak_event[kind], cli_int(j, KEY("peak_event")), "%s peak event",
               name);
        is_int((long long)r->peak_time[kind], cli_int(j, KEY("peak_time_ns")), "%s peak time",
               name);
        is_int((long long)(r->peak_time[kind] - r->t_min), cli_int(j, KEY("peak_offset_ns")),
               "%s peak offset", name);
    } else {
        ok(json_is_null(cli_get(j, KEY("peak_event"))), "%s: no peak event", name);
        ok(json_is_null(cli_get(j, KEY("peak_time_ns"))), "%s: no peak time", name);
        ok(json_is_null(cli_get(j, KEY("peak_offset_ns"))), "%s: no peak offset", name);
    }
    is_int((long long)r->cur[kind], cli_int(j, KEY("current_bytes")), "%s at the end", name);
    is_int((long long)r->live[kind], cli_int(j, KEY("current_count")), "%s count at the end", name);
#undef KEY
}

static void check_tally(json_t *j, const char *name, const struct tally *t)
{
    char key[64];
    snprintf(key, sizeof(key), "%s.count", name);
    is_int((long long)t->count, cli_int(j, key), "%s count", name);
    snprintf(key, sizeof(key), "%s.bytes", name);
    is_int((long long)t->bytes, cli_int(j, key), "%s bytes", name);
}

static void check_seed(uint64_t seed, size_t n, int with_blocks)
{
    struct evlist l = {0};
    rng_state = seed;
    make_tables();
    generate(&l, n, with_blocks);
    const char *path = cli_path("random.memtrace");
    write_file(path, &l, 1);
    struct ref r;
    reference(&l, &r);
    diag("seed %llu: %zu events, peak allocated %llu at %llu, peak reserved %llu, %d stacks",
         (unsigned long long)seed, l.n, (unsigned long long)r.peak[0],
         (unsigned long long)r.peak_event[0], (unsigned long long)r.peak[1], r.ngroups);

    struct cli_out o =
        cli_run((const char *const[]){"summary", path, "--json", "--top", "5", NULL});
    is_int(0, o.status, "seed %llu: summary exits 0", (unsigned long long)seed);
    is_string("", o.err, "nothing on stderr");
    json_t *j = cli_json(&o);
    ok(j != NULL, "JSON output parses");
    is_int((long long)r.events, cli_int(j, "events"), "events");
    is_int((long long)r.t_min, cli_int(j, "first_time_ns"), "first time");
    is_int((long long)(r.t_max - r.t_min), cli_int(j, "duration_ns"), "duration");
    ok(json_is_false(cli_get(j, "truncated")), "not truncated");
    check_level(j, "allocated", &r, 0);
    check_level(j, "reserved", &r, 1);
    check_tally(j, "allocs", &r.allocs);
    check_tally(j, "frees", &r.frees);
    check_tally(j, "unmatched_frees", &r.unmatched);
    check_tally(j, "segment_allocs", &r.seg_allocs);
    check_tally(j, "segment_frees", &r.seg_frees);
    check_tally(j, "unmatched_segment_frees", &r.seg_unmatched);
    is_int((long long)r.annotations, cli_int(j, "annotations"), "annotations");
    is_int((long long)r.ooms, cli_int(j, "oom.count"), "oom events");
    is_int((long long)r.oom_largest, cli_int(j, "oom.largest_bytes"), "largest oom");
    is_int((long long)r.oom_free, cli_int(j, "oom.device_free_bytes"), "device free at it");

    is_string(r.of, json_string_value(cli_get(j, "top.of")), "top stacks of %s", r.of);
    int kind = r.allocs.count ? 0 : 1;
    is_int((long long)r.peak_event[kind], cli_int(j, "top.event"), "top stacks at the peak");
    is_int((long long)r.at_peak[kind].n, cli_int(j, "top.live_count"), "live at the peak");
    is_int(r.ngroups, cli_int(j, "top.distinct_stacks"), "distinct stacks at the peak");
    json_t *stacks = cli_get(j, "top.stacks");
    int want = r.ngroups < 5 ? r.ngroups : 5;
    is_int(want, (long long)json_array_size(stacks), "--top 5 shows %d stacks", want);
    int same = 1;
    for (int k = 0; k < want; k++) {
        json_t *s = json_array_get(stacks, (size_t)k);
        const struct group *g = &r.groups[k];
        if (json_integer_value(json_object_get(s, "stack")) != g->stack ||
            (uint64_t)json_integer_value(json_object_get(s, "bytes")) != g->bytes ||
            (uint64_t)json_integer_value(json_object_get(s, "count")) != g->count ||
            json_integer_value(json_object_get(s, "depth")) != stack_depth(g->stack) ||
            !frames_match(json_object_get(s, "frames"), g->stack, 16)) {
            diag("stack #%d: want stack %u, %llu bytes, %llu allocations", k, g->stack,
                 (unsigned long long)g->bytes, (unsigned long long)g->count);
            same = 0;
        }
    }
    ok(same, "the top stacks, their bytes, counts and frames match");
    json_decref(j);
    cli_free(&o);

    /* --depth cuts the frames; --top 0 shows every stack. */
    o = cli_run((const char *const[]){"summary", "--json", "--depth=2", "--top", "0", path, NULL});
    j = cli_json(&o);
    stacks = cli_get(j, "top.stacks");
    is_int(r.ngroups, (long long)json_array_size(stacks), "--top 0 shows all stacks");
    same = 1;
    for (int k = 0; k < r.ngroups; k++)
        same &= frames_match(json_object_get(json_array_get(stacks, (size_t)k), "frames"),
                             r.groups[k].stack, 2);
    ok(same, "--depth 2 shows the 2 innermost frames of each");
    json_decref(j);
    cli_free(&o);

    /* The text form shows the same figures. */
    o = cli_run((const char *const[]){"summary", path, NULL});
    is_int(0, o.status, "text summary exits 0");
    char line[512], want_s[128];
    cli_line(o.out, "peak allocated", line, sizeof(line));
    snprintf(want_s, sizeof(want_s), r.peak[0] ? "(%llu bytes) at +" : "(%llu bytes)",
             (unsigned long long)r.peak[0]);
    ok(strstr(line, want_s) != NULL, "text peak allocated: %s", line);
    snprintf(want_s, sizeof(want_s), "event %llu", (unsigned long long)r.peak_event[0]);
    ok(r.peak[0] == 0 || strstr(line, want_s) != NULL, "text peak event");
    cli_line(o.out, "peak reserved", line, sizeof(line));
    snprintf(want_s, sizeof(want_s), "(%llu bytes)", (unsigned long long)r.peak[1]);
    ok(strstr(line, want_s) != NULL, "text peak reserved: %s", line);
    cli_line(o.out, "allocs ", line, sizeof(line));
    snprintf(want_s, sizeof(want_s), " %llu bytes)", (unsigned long long)r.allocs.bytes);
    ok(strstr(line, want_s) != NULL, "text allocs: %s", line);
    if (r.ngroups) {
        cli_line(o.out, " 1. ", line, sizeof(line));
        snprintf(want_s, sizeof(want_s), "(%llu bytes) in ", (unsigned long long)r.groups[0].bytes);
        ok(strstr(line, want_s) != NULL, "text first stack: %s", line);
    } else {
        skip(1, "no stacks");
    }
    cli_free(&o);
    free_ref(&r);
    free(l.ev);
}

/* Hand-made: expandable-segment pieces unmapped several at once and in part, an
 * alloc at a live address, and an empty recording. */
static void check_by_hand(void)
{
    struct evlist l = {0};
    uint64_t t = BASE_T;
    uint64_t A = 0x200000000000ull, MB2 = 2ull << 20;
    rng_state = 99;
    make_tables();
    for (int k = 0; k < 3; k++) {
        struct memtrace_event *e = push(&l, MEMTRACE_SEGMENT_MAP, &t);
        e->addr = A + (uint64_t)k * MB2;
        e->size = MB2;
        e->stack = 3;
    }
    struct memtrace_event *e = push(&l, MEMTRACE_SEGMENT_UNMAP, &t);
    e->addr = A;
    e->size = 2 * MB2; /* two pieces */
    e = push(&l, MEMTRACE_SEGMENT_UNMAP, &t);
    e->addr = A + 2 * MB2;
    e->size = MB2 / 2; /* half of the third */
    e = push(&l, MEMTRACE_SEGMENT_UNMAP, &t);
    e->addr = A + 2 * MB2 + MB2 / 4; /* inside a piece, not at its start */
    e->size = MB2 / 4;
    const char *path = cli_path("unmap.memtrace");
    write_file(path, &l, 1);
    struct cli_out o = cli_run((const char *const[]){"summary", "--json", path, NULL});
    json_t *j = cli_json(&o);
    is_int((long long)(3 * MB2), cli_int(j, "reserved.peak_bytes"), "mapped pieces add up");
    is_int(2, cli_int(j, "reserved.peak_event"), "peak after the third map");
    is_int((long long)(MB2 / 2), cli_int(j, "reserved.current_bytes"),
           "unmapping 2.5 pieces leaves half a piece");
    is_int(1, cli_int(j, "reserved.current_count"), "one piece is left");
    is_int(2, cli_int(j, "segment_frees.count"), "two unmaps matched");
    is_int((long long)(2 * MB2 + MB2 / 2), cli_int(j, "segment_frees.bytes"), "bytes unmapped");
    is_int(1, cli_int(j, "unmatched_segment_frees.count"), "unmap inside a piece is unmatched");
    is_string("reserved", json_string_value(cli_get(j, "top.of")),
              "no block events: top stacks of reserved memory");
    json_t *s0 = json_array_get(cli_get(j, "top.stacks"), 0);
    is_int(3, json_integer_value(json_object_get(s0, "stack")), "the pieces' stack");
    is_int(3, json_integer_value(json_object_get(s0, "count")), "three pieces at the peak");
    json_decref(j);
    cli_free(&o);
    /* Every label fits its column, the longest ("unmatched seg frees") too: values
     * start at column 22 on every line of the figures. */
    o = cli_run((const char *const[]){"summary", path, NULL});
    int rows = 0, aligned = 0;
    for (const char *p = o.out; *p && *p != '\n'; p = strchr(p, '\n') + 1) {
        const char *nl = strchr(p, '\n');
        rows++;
        aligned += nl - p > 21 && p[20] == ' ' && p[21] != ' ';
    }
    ok(rows >= 10 && aligned == rows && strstr(o.out, "unmatched seg frees  1 "),
       "text: %d of %d figure lines have their value at column 22", aligned, rows);
    cli_free(&o);

    l.n = 0;
    t = BASE_T;
    e = push(&l, MEMTRACE_ALLOC, &t);
    e->addr = 0x1000;
    e->size = 100;
    e = push(&l, MEMTRACE_ALLOC, &t);
    e->addr = 0x1000;
    e->size = 300;
    e = push(&l, MEMTRACE_FREE_COMPLETED, &t);
    e->addr = 0x1000;
    e->size = 300;
    write_file(path, &l, 1);
    o = cli_run((const char *const[]){"summary", "--json", path, NULL});
    j = cli_json(&o);
    is_int(300, cli_int(j, "allocated.peak_bytes"), "an alloc at a live address replaces it");
    is_int(1, cli_int(j, "replaced_allocs.count"), "and is counted as replaced");
    is_int(0, cli_int(j, "allocated.current_bytes"), "its free leaves nothing");
    json_decref(j);
    cli_free(&o);

    l.n = 0;
    write_file(path, &l, 1);
    o = cli_run((const char *const[]){"summary", "--json", path, NULL});
    is_int(0, o.status, "a file with no events: exit 0");
    j = cli_json(&o);
    is_int(0, cli_int(j, "events"), "no events");
    ok(json_is_null(cli_get(j, "top.of")), "no top stacks");
    json_decref(j);
    cli_free(&o);
    o = cli_run((const char *const[]){"summary", path, NULL});
    ok(strstr(o.out, "Nothing was allocated") != NULL, "text says nothing was allocated");
    cli_free(&o);
    free(l.ev);
}

/* A file cut short still gives its figures, with a warning. */
static void check_truncated(void)
{
    struct evlist l = {0};
    rng_state = 5;
    make_tables();
    generate(&l, 3000, 1);
    const char *path = cli_path("cut.memtrace");
    write_file(path, &l, 0);
    struct ref r;
    reference(&l, &r);
    struct cli_out o = cli_run((const char *const[]){"summary", "--json", path, NULL});
    is_int(0, o.status, "truncated file: exit 0");
    json_t *j = cli_json(&o);
    ok(json_is_true(cli_get(j, "truncated")), "truncated: true");
    is_int((long long)r.peak[0], cli_int(j, "allocated.peak_bytes"), "peak of what was read");
    ok(strncmp(o.err, "memtrace: warning: ", 19) == 0 &&
           strstr(o.err, "is truncated (no end record)") &&
           strstr(o.err, "showing the 3,000 events before byte") && cli_lines(o.err) == 1,
       "one warning line: %s", o.err);
    json_decref(j);
    cli_free(&o);
    free_ref(&r);
    free(l.ev);
}

/* Several files, one per rank: a line each with the rank of its metadata, and the
 * totals, against each file's own reference. */
static void check_files(void)
{
    enum { NF = 3 };
    struct ref r[NF];
    char names[NF][64];
    const char *args[NF + 3] = {"summary", "--json"};
    uint64_t events = 0, peak_alloc = 0, peak_res = 0, cur_alloc = 0;
    make_tables();
    for (int k = 0; k < NF; k++) {
        struct evlist l = {0};
        rng_state = 100 + (uint64_t)k;
        generate(&l, 1000 + 700 * (size_t)k, 1);
        snprintf(names[k], sizeof(names[k]), "rank-%d.memtrace", k);
        file_rank = 3 - k; /* not the order of the files */
        write_file(cli_path(names[k]), &l, 1);
        reference(&l, &r[k]);
        events += r[k].events;
        peak_alloc += r[k].peak[0];
        peak_res += r[k].peak[1];
        cur_alloc += r[k].cur[0];
        args[2 + k] = strdup(cli_path(names[k]));
        free(l.ev);
    }
    file_rank = -1;
    struct cli_out o = cli_run(args);
    is_int(0, o.status, "%d files: exit 0", NF);
    json_t *j = cli_json(&o);
    json_t *files = cli_get(j, "files");
    is_int(NF, (long long)json_array_size(files), "one entry per file");
    for (int k = 0; k < NF; k++) {
        json_t *f = json_array_get(files, (size_t)k);
        is_int(3 - k, cli_int(f, "rank"), "file %d: the rank of its metadata", k);
        is_int((long long)r[k].events, cli_int(f, "events"), "file %d: events", k);
        is_int((long long)r[k].peak[0], cli_int(f, "peak_allocated_bytes"),
               "file %d: peak allocated", k);
        is_int((long long)r[k].peak[1], cli_int(f, "peak_reserved_bytes"), "file %d: peak reserved",
               k);
        is_int((long long)r[k].cur[0], cli_int(f, "current_allocated_bytes"),
               "file %d: allocated at the end", k);
    }
    is_int((long long)events, cli_int(j, "total.events"), "total events");
    is_int((long long)peak_alloc, cli_int(j, "total.peak_allocated_bytes"),
           "total: the sum of the peaks allocated");
    is_int((long long)peak_res, cli_int(j, "total.peak_reserved_bytes"),
           "total: the sum of the peaks reserved");
    is_int((long long)cur_alloc, cli_int(j, "total.current_allocated_bytes"),
           "total: allocated at the ends");
    json_decref(j);
    cli_free(&o);
    args[1] = "--bytes";
    o = cli_run(args);
    char line[512], want[64];
    snprintf(want, sizeof(want), "     1 ");
    cli_line(o.out, want, line, sizeof(line));
    char peak[32];
    snprintf(peak, sizeof(peak), " %llu B ", (unsigned long long)r[2].peak[0]);
    ok(strstr(line, names[2]) && strstr(line, peak),
       "text: rank 1's line names its file and "
       "its exact peak: %s",
       line);
    is_int(NF + 5, cli_lines(o.out), "text: a header, %d files, the total, a two-line note", NF);
    cli_free(&o);
    for (int k = 0; k < NF; k++) {
        free((char *)args[2 + k]);
        free_ref(&r[k]);
    }
}

/* Stacks sharing a 100,000-deep chain: --top 0 prints each one's first frames and
 * how many more there are, from depths the reader keeps, without walking chains. */
static void check_deep_stacks(void)
{
    const uint32_t chain = 100000, leaves = 2000, n = chain + leaves;
    uint32_t *parent = malloc(n * sizeof(uint32_t)), *frame = malloc(n * sizeof(uint32_t));
    for (uint32_t i = 0; i < chain; i++) {
        parent[i] = i;
        frame[i] = 1;
    }
    for (uint32_t i = chain; i < n; i++) {
        parent[i] = chain;
        frame[i] = 2;
    }
    struct memtrace_event *ev = calloc(leaves, sizeof(*ev));
    for (uint32_t i = 0; i < leaves; i++) {
        ev[i].action = MEMTRACE_ALLOC;
        ev[i].time_ns = BASE_T + i;
        ev[i].addr = 0x100000 + (uint64_t)i * 4096;
        ev[i].size = 4096 + i; /* each stack its own size: a strict order */
        ev[i].stack = chain + 1 + i;
    }
    const char *path = cli_path("deep.memtrace");
    struct mt_writer *w;
    struct mt_frame_rec f[2] = {{0x1000, 0, 0, 0, 0, 0}, {0x2000, 0, 0, 0, 0, 0}};
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_frames(w, 1, 2, f), "mt_writer_frames");
    cli_check(mt_writer_stacks(w, 1, n, parent, frame), "mt_writer_stacks");
    cli_check(mt_writer_events(w, ev, leaves), "mt_writer_events");
    cli_check(mt_writer_end(w, "{}"), "mt_writer_end");
    struct cli_out o =
        cli_run((const char *const[]){"summary", path, "--top", "0", "--depth", "2", NULL});
    is_int(0, o.status, "deep stacks: exit 0");
    int more = 0, firsts = 0;
    for (const char *p = o.out; (p = strstr(p, "... 99999 more frames\n")) != NULL; p++)
        more++;
    for (const char *p = o.out; (p = strstr(p, "#0  0x2000\n")) != NULL; p++)
        firsts++;
    is_int(leaves, more, "each of the %u stacks: 2 frames and '... 99999 more frames'", leaves);
    is_int(leaves, firsts, "each starting at its own frame");
    cli_free(&o);
    free(ev);
    free(parent);
    free(frame);
}

int main(void)
{
    cli_scratch();
    static const uint64_t seeds[] = {1, 42, 977, 123456789};
    for (size_t k = 0; k < sizeof(seeds) / sizeof(seeds[0]); k++)
        check_seed(seeds[k], 3000 + 1500 * k, 1);
    check_seed(31337, 2000, 0); /* segments only, as the interposer writes */
    check_seed(7, 60000, 1);    /* tables grow and shrink many times */
    check_by_hand();
    check_truncated();
    check_files();
    check_deep_stacks();
    done_testing();
    return exit_status();
}
