/* diff-t.c: `memtrace diff` against figures known by construction and a reference
 * computed here.
 *
 * By hand: two files whose stacks share frames under other ids (strings, frames and
 * stacks written in another order, symbol frames at other offsets, two stack ids of
 * the same frames in one file), with stacks only in A, only in B and in both; the
 * deltas are constants worked out below. The one-file form is checked at event,
 * time and annotation points of the same file.
 *
 * Random: logical stacks drawn into two files with their ids shuffled; the test
 * replays both event lists with plain arrays, keyed by the logical stack (never by
 * frames), and compares every stack of `diff --json --top 0` for each cost. */
#include "config.h"

#include <inttypes.h>

#include "cli-util.h"

#define BASE_T 1000000000000ull
#define MiB    (1ull << 20)

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static uint64_t below(uint64_t n)
{
    return rnd() % n;
}

/* ---- files: a string table, frames, stack nodes and events ---- */

struct file {
    const char *strs[256];
    size_t nstr;
    struct mt_frame_rec fr[256]; /* ids 1..nfr */
    size_t nfr;
    uint32_t parent[512], frame[512]; /* nodes 1..nst */
    size_t nst;
    struct memtrace_event *ev;
    size_t nev, cap;
};

static uint32_t str_id(struct file *f, const char *s)
{
    if (!s || !*s)
        return 0;
    for (size_t k = 0; k < f->nstr; k++)
        if (strcmp(f->strs[k], s) == 0)
            return (uint32_t)k + 1;
    f->strs[f->nstr++] = s;
    return (uint32_t)f->nstr;
}

static uint32_t add_frame(struct file *f, const char *sym, const char *file, uint32_t line,
                          const char *mod, uint64_t off, uint64_t ip)
{
    struct mt_frame_rec *r = &f->fr[++f->nfr];
    r->symbol = str_id(f, sym);
    r->file = str_id(f, file);
    r->line = line;
    r->module = str_id(f, mod);
    r->offset = off;
    r->ip = ip;
    return (uint32_t)f->nfr;
}

static uint32_t add_node(struct file *f, uint32_t parent, uint32_t frame)
{
    f->nst++;
    f->parent[f->nst] = parent;
    f->frame[f->nst] = frame;
    return (uint32_t)f->nst;
}

static struct memtrace_event *ev_push(struct file *f, int action, uint64_t addr, uint64_t size,
                                      uint32_t stack)
{
    if (f->nev == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 1024;
        f->ev = realloc(f->ev, f->cap * sizeof(*f->ev));
    }
    struct memtrace_event *e = &f->ev[f->nev];
    memset(e, 0, sizeof(*e));
    e->time_ns = BASE_T + 1000 * f->nev; /* event i at +i us */
    f->nev++;
    e->action = (uint8_t)action;
    e->addr = addr;
    e->size = size;
    e->requested_size = size;
    e->stack = stack;
    e->tid = 7;
    return e;
}

static void write_file(const char *path, const struct file *f)
{
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_meta(w, "{\"host\": \"testhost\", \"pid\": 1}"), "mt_writer_meta");
    if (f->nstr)
        cli_check(mt_writer_strings(w, 1, f->nstr, f->strs), "mt_writer_strings");
    if (f->nfr)
        cli_check(mt_writer_frames(w, 1, f->nfr, f->fr + 1), "mt_writer_frames");
    if (f->nst)
        cli_check(mt_writer_stacks(w, 1, f->nst, f->parent + 1, f->frame + 1), "mt_writer_stacks");
    for (size_t k = 0; k < f->nev; k += 500)
        cli_check(mt_writer_events(w, f->ev + k, f->nev - k < 500 ? f->nev - k : 500),
                  "mt_writer_events");
    cli_check(mt_writer_state(w, f->nev ? f->ev[f->nev - 1].time_ns : 0, NULL, 0),
              "mt_writer_state");
    cli_check(mt_writer_end(w, "{\"dropped\": 0}"), "mt_writer_end");
}

/* s without its last newline, for test names. */
static const char *chomp(char *s)
{
    size_t n = strlen(s);
    if (n && s[n - 1] == '\n')
        s[n - 1] = '\0';
    return s;
}

static json_t *run_json(const char *const *args, const char *what)
{
    struct cli_out o = cli_run(args);
    if (o.status != 0 || o.err[0])
        diag("%s: exit %d, stderr: %s", what, o.status, o.err);
    json_t *j = o.status == 0 ? cli_json(&o) : NULL;
    cli_free(&o);
    return j;
}

/* The entry of "stacks" whose stack_after (or, for a stack that is gone,
 * stack_before) is id; NULL when none. */
static json_t *entry_of(json_t *j, const char *side, long long id)
{
    json_t *arr = json_object_get(j, "stacks");
    for (size_t k = 0; k < json_array_size(arr); k++) {
        json_t *s = json_array_get(arr, k);
        json_t *v = json_object_get(s, side);
        if (json_is_integer(v) && json_integer_value(v) == id)
            return s;
    }
    return NULL;
}

/* Checks one listed stack: change, bytes and counts before and after. */
static void check_entry(json_t *j, const char *side, long long id, const char *change, long long b0,
                        long long b1, long long c0, long long c1, const char *what)
{
    json_t *s = entry_of(j, side, id);
    if (!s) {
        ok(0, "%s: listed (%s %lld)", what, side, id);
        return;
    }
    int same = strcmp(json_string_value(json_object_get(s, "change")), change) == 0 &&
               cli_int(s, "bytes.before") == b0 && cli_int(s, "bytes.after") == b1 &&
               cli_int(s, "bytes.delta") == b1 - b0 && cli_int(s, "count.before") == c0 &&
               cli_int(s, "count.after") == c1 && cli_int(s, "count.delta") == c1 - c0;
    if (!same)
        diag("%s: got %s, bytes %lld -> %lld, count %lld -> %lld", what,
             json_string_value(json_object_get(s, "change")), cli_int(s, "bytes.before"),
             cli_int(s, "bytes.after"), cli_int(s, "count.before"), cli_int(s, "count.after"));
    ok(same, "%s: %s, %lld -> %lld bytes, %lld -> %lld allocations", what, change, b0, b1, c0, c1);
}

/* The order of "stacks": absolute byte change never grows down the list. */
static int ordered(json_t *j)
{
    json_t *arr = json_object_get(j, "stacks");
    long long last = -1;
    for (size_t k = 0; k < json_array_size(arr); k++) {
        long long d = cli_int(json_array_get(arr, k), "bytes.delta");
        d = d < 0 ? -d : d;
        if (last >= 0 && d > last)
            return 0;
        last = d;
    }
    return 1;
}

/* ---- by hand ---- */

/* Stack ids of the hand-made files, by logical stack: S1 alloc_act <- forward <-
 * train <- main; S2 alloc_grad <- backward <- train <- main; S3 optimizer_init <-
 * train <- main (A only); S4 load_data <- main (B only); S5 libx.so+0x1234 <- forward
 * <- train <- main; S6 libx.so+0x5678 <- forward <- train <- main (B only). */
struct hand {
    uint32_t s1, s1b, s2, s3, s4, s5, s6;
};

static void hand_a(struct file *f, struct hand *h)
{
    memset(f, 0, sizeof(*f));
    uint32_t fmain = add_frame(f, "main", "train.c", 10, "/bin/train", 0x100, 0x400100);
    uint32_t ftrain = add_frame(f, "train", "train.c", 40, "/bin/train", 0x200, 0x400200);
    uint32_t ffwd = add_frame(f, "forward", "model.c", 12, "/bin/train", 0x300, 0x400300);
    uint32_t fbwd = add_frame(f, "backward", "model.c", 30, "/bin/train", 0x400, 0x400400);
    uint32_t fact = add_frame(f, "alloc_act", "model.c", 15, "/bin/train", 0x500, 0x400500);
    uint32_t fgrad = add_frame(f, "alloc_grad", "model.c", 33, "/bin/train", 0x600, 0x400600);
    uint32_t fopt = add_frame(f, "optimizer_init", "optim.c", 8, "/bin/train", 0x700, 0x400700);
    uint32_t fx = add_frame(f, "", "", 0, "/usr/lib/libx.so", 0x1234, 0x7f0000001234);
    uint32_t nmain = add_node(f, 0, fmain);
    uint32_t ntrain = add_node(f, nmain, ftrain);
    uint32_t nfwd = add_node(f, ntrain, ffwd);
    h->s1 = add_node(f, nfwd, fact);
    uint32_t nbwd = add_node(f, ntrain, fbwd);
    h->s2 = add_node(f, nbwd, fgrad);
    h->s3 = add_node(f, ntrain, fopt);
    h->s5 = add_node(f, nfwd, fx);
    h->s1b = h->s4 = h->s6 = 0;
    /* 0-4: allocations, peak 2050 at event 4; 5: S3's freed; 6-7: segments. */
    ev_push(f, MEMTRACE_ALLOC, 0x1000, 1000, h->s1);
    ev_push(f, MEMTRACE_ALLOC, 0x2000, 500, h->s2);
    ev_push(f, MEMTRACE_ALLOC, 0x3000, 300, h->s3);
    ev_push(f, MEMTRACE_ALLOC, 0x4000, 200, h->s5);
    ev_push(f, MEMTRACE_ALLOC, 0x5000, 50, 0);
    ev_push(f, MEMTRACE_FREE_COMPLETED, 0x3000, 300, 0);
    ev_push(f, MEMTRACE_SEGMENT_ALLOC, 0x100000000, 2 * MiB, h->s1);
    ev_push(f, MEMTRACE_SEGMENT_ALLOC, 0x200000000, 20 * MiB, h->s2);
}

/* B: other string, frame and stack order, other offsets of the symbol frames, and S1
 * twice (through a second frame of alloc_act at another address). */
static void hand_b(struct file *f, struct hand *h)
{
    memset(f, 0, sizeof(*f));
    uint32_t fload = add_frame(f, "load_data", "data.c", 5, "/opt/train2", 0x90, 0x500090);
    uint32_t fx2 = add_frame(f, "", "", 0, "/usr/lib/libx.so", 0x5678, 0x7f1000005678);
    uint32_t fx = add_frame(f, "", "", 0, "/usr/lib/libx.so", 0x1234, 0x7f1000001234);
    uint32_t fgrad = add_frame(f, "alloc_grad", "model.c", 33, "/opt/train2", 0x16, 0x500016);
    uint32_t fact = add_frame(f, "alloc_act", "model.c", 15, "/opt/train2", 0x15, 0x500015);
    uint32_t fact2 = add_frame(f, "alloc_act", "model.c", 15, "/opt/train2", 0x25, 0x500025);
    uint32_t fbwd = add_frame(f, "backward", "model.c", 30, "/opt/train2", 0x14, 0x500014);
    uint32_t ffwd = add_frame(f, "forward", "model.c", 12, "/opt/train2", 0x13, 0x500013);
    uint32_t ftrain = add_frame(f, "train", "train.c", 40, "/opt/train2", 0x12, 0x500012);
    uint32_t fmain = add_frame(f, "main", "train.c", 10, "/opt/train2", 0x11, 0x500011);
    uint32_t nmain = add_node(f, 0, fmain);
    h->s4 = add_node(f, nmain, fload);
    add_node(f, nmain, fx); /* a stack no event uses */
    uint32_t ntrain = add_node(f, nmain, ftrain);
    uint32_t nbwd = add_node(f, ntrain, fbwd);
    uint32_t nfwd = add_node(f, ntrain, ffwd);
    h->s6 = add_node(f, nfwd, fx2);
    h->s5 = add_node(f, nfwd, fx);
    h->s2 = add_node(f, nbwd, fgrad);
    h->s1 = add_node(f, nfwd, fact);
    h->s1b = add_node(f, nfwd, fact2);
    h->s3 = 0;
    /* 0-1 allocations; 2-6 the annotation 'grow' around three more; 7-9 allocations
     * (peak 3780 at event 9); 10: S4's freed; 11-15 segments. */
    ev_push(f, MEMTRACE_ALLOC, 0x1000, 1000, h->s1);
    ev_push(f, MEMTRACE_ALLOC, 0x2000, 500, h->s2);
    struct memtrace_event *e = ev_push(f, MEMTRACE_ANNOTATE, 0, 0, 0);
    e->aux = MEMTRACE_ANNOTATE_PUSH;
    e->category = str_id(f, "grow");
    ev_push(f, MEMTRACE_ALLOC, 0x3000, 1000, h->s1b);
    ev_push(f, MEMTRACE_ALLOC, 0x4000, 700, h->s4);
    ev_push(f, MEMTRACE_ALLOC, 0x5000, 100, h->s5);
    e = ev_push(f, MEMTRACE_ANNOTATE, 0, 0, 0);
    e->aux = MEMTRACE_ANNOTATE_POP;
    ev_push(f, MEMTRACE_ALLOC, 0x6000, 400, h->s6);
    ev_push(f, MEMTRACE_ALLOC, 0x7000, 50, 0);
    ev_push(f, MEMTRACE_ALLOC, 0x8000, 30, 0);
    ev_push(f, MEMTRACE_FREE_COMPLETED, 0x4000, 700, 0);
    ev_push(f, MEMTRACE_SEGMENT_ALLOC, 0x100000000, 2 * MiB, h->s1);
    ev_push(f, MEMTRACE_SEGMENT_ALLOC, 0x200000000, 2 * MiB, h->s1);
    ev_push(f, MEMTRACE_SEGMENT_ALLOC, 0x300000000, 20 * MiB, h->s2);
    ev_push(f, MEMTRACE_SEGMENT_ALLOC, 0x400000000, 64 * MiB, h->s2);
    ev_push(f, MEMTRACE_SEGMENT_FREE, 0x100000000, 2 * MiB, 0);
}

static json_t *size_class(json_t *j, long long max)
{
    json_t *arr = cli_get(j, "segments.size_classes");
    for (size_t k = 0; k < json_array_size(arr); k++)
        if (cli_int(json_array_get(arr, k), "max_bytes") == max)
            return json_array_get(arr, k);
    return NULL;
}

static void check_two_files(const char *pa, const char *pb, const struct hand *ha,
                            const struct hand *hb)
{
    /* Peak: A at event 4 (2050), B at event 9 (3780). */
    json_t *j =
        run_json((const char *const[]){"diff", pa, pb, "--json", "--top", "0", NULL}, "diff A B");
    ok(j != NULL, "diff A B --json parses");
    is_string("peak", json_string_value(cli_get(j, "cost")), "default cost: peak");
    is_string("allocated", json_string_value(cli_get(j, "of")), "of allocated memory");
    is_int(8, cli_int(j, "before.events"), "A has 8 events");
    is_int(16, cli_int(j, "after.events"), "B has 16 events");
    is_int(2050, cli_int(j, "totals.cost_bytes.before"), "cost before: A's peak");
    is_int(3780, cli_int(j, "totals.cost_bytes.after"), "cost after: B's peak");
    is_int(1730, cli_int(j, "totals.cost_bytes.delta"), "cost delta");
    is_int(5, cli_int(j, "totals.cost_count.before"), "5 allocations at A's peak");
    is_int(8, cli_int(j, "totals.cost_count.after"), "8 at B's peak");
    is_int(2050, cli_int(j, "totals.peak_allocated.before"), "peak allocated before");
    is_int(3780, cli_int(j, "totals.peak_allocated.after"), "peak allocated after");
    is_int(1750, cli_int(j, "totals.allocated_at_end.before"), "allocated at the end of A");
    is_int(3080, cli_int(j, "totals.allocated_at_end.after"), "allocated at the end of B");
    is_int(5, cli_int(j, "totals.allocs.before"), "allocs in A");
    is_int(8, cli_int(j, "totals.allocs.after"), "allocs in B");
    is_int(7, cli_int(j, "stack_counts.compared"), "7 stacks by frames (S1-S6 and none)");
    is_int(6, cli_int(j, "stack_counts.changed"), "6 changed (S2 did not)");
    is_int(4, cli_int(j, "stack_counts.grown"), "4 grown");
    is_int(2, cli_int(j, "stack_counts.new"), "2 new");
    is_int(2, cli_int(j, "stack_counts.shrunk"), "2 shrunk");
    is_int(1, cli_int(j, "stack_counts.gone"), "1 gone");
    is_int(6, (long long)json_array_size(cli_get(j, "stacks")), "--top 0 lists all 6");
    check_entry(j, "stack_after", hb->s1, "grown", 1000, 2000, 1, 2,
                "S1: two stack ids of B add up, matched to A's by frames");
    json_t *s1 = entry_of(j, "stack_after", hb->s1);
    is_int(ha->s1, cli_int(s1, "stack_before"), "S1's id in A");
    is_int(4, cli_int(s1, "depth"), "S1 is 4 frames deep");
    is_string("alloc_act",
              json_string_value(
                  json_object_get(json_array_get(json_object_get(s1, "frames"), 0), "symbol")),
              "S1's innermost frame");
    ok(entry_of(j, "stack_before", ha->s2) == NULL, "S2 (same bytes) is not listed");
    check_entry(j, "stack_before", ha->s3, "gone", 300, 0, 1, 0, "S3: only in A");
    check_entry(j, "stack_after", hb->s4, "new", 0, 700, 0, 1, "S4: only in B");
    check_entry(j, "stack_after", hb->s5, "shrunk", 200, 100, 1, 1, "S5: matched by module+offset");
    check_entry(j, "stack_after", hb->s6, "new", 0, 400, 0, 1, "S6: another offset, new");
    check_entry(j, "stack_after", 0, "grown", 50, 80, 1, 2, "no stack");
    json_t *arr = cli_get(j, "stacks");
    long long want_order[] = {1000, 700, 400, -300, -100, 30};
    int same = 1;
    for (size_t k = 0; k < 6; k++)
        same &= cli_int(json_array_get(arr, k), "bytes.delta") == want_order[k];
    ok(same, "largest absolute change first: +1000 +700 +400 -300 -100 +30");

    /* Segments: A 2 + 20 MiB; B 2 + 2 + 20 + 64 MiB, one 2 MiB freed. */
    is_int((long long)(22 * MiB), cli_int(j, "segments.peak_reserved.before"), "A's reserved peak");
    is_int((long long)(88 * MiB), cli_int(j, "segments.peak_reserved.after"), "B's reserved peak");
    is_int((long long)(66 * MiB), cli_int(j, "segments.peak_reserved.delta"), "its delta");
    is_int(2, cli_int(j, "segments.at_peak.before"), "2 segments at A's peak");
    is_int(4, cli_int(j, "segments.at_peak.after"), "4 at B's");
    is_int(3, cli_int(j, "segments.at_end.after"), "3 at B's end");
    is_int(1, cli_int(j, "segments.frees.after"), "B frees one");
    is_int(3, (long long)json_array_size(cli_get(j, "segments.size_classes")),
           "three size classes in use");
    json_t *c2 = size_class(j, (long long)(2 * MiB)), *c32 = size_class(j, (long long)(32 * MiB)),
           *c64 = size_class(j, (long long)(64 * MiB));
    ok(c2 && cli_int(c2, "allocs.before") == 1 && cli_int(c2, "allocs.after") == 2 &&
           cli_int(c2, "at_end.before") == 1 && cli_int(c2, "at_end.after") == 1 &&
           cli_int(c2, "allocs_bytes.delta") == (long long)(2 * MiB),
       "<= 2 MiB: 1 -> 2 made, 1 -> 1 at the end");
    ok(c32 && cli_int(c32, "allocs.before") == 1 && cli_int(c32, "allocs.after") == 1 &&
           cli_int(c32, "allocs.delta") == 0,
       "<= 32 MiB: the 20 MiB segment in both");
    ok(c64 && cli_int(c64, "allocs.before") == 0 && cli_int(c64, "at_end.after") == 1 &&
           cli_int(c64, "at_end_bytes.after") == (long long)(64 * MiB),
       "<= 64 MiB: new in B");
    json_decref(j);

    /* Leaked: A ends with S1 1000, S2 500, S5 200, none 50; B with S1 2000, S2 500,
     * S5 100, S6 400, none 80. */
    j = run_json((const char *const[]){"diff", "--cost", "leaked", "--json", pa, pb, NULL},
                 "diff --cost leaked");
    is_string("leaked", json_string_value(cli_get(j, "cost")), "cost leaked");
    is_int(1750, cli_int(j, "totals.cost_bytes.before"), "alive at A's end");
    is_int(3080, cli_int(j, "totals.cost_bytes.after"), "alive at B's end");
    is_int(5, cli_int(j, "stack_counts.compared"), "S3 and S4 are freed in both: not compared");
    is_int(4, cli_int(j, "stack_counts.changed"), "4 changed");
    check_entry(j, "stack_after", hb->s1, "grown", 1000, 2000, 1, 2, "leaked S1");
    check_entry(j, "stack_after", hb->s6, "new", 0, 400, 0, 1, "leaked S6");
    check_entry(j, "stack_after", hb->s5, "shrunk", 200, 100, 1, 1, "leaked S5");
    check_entry(j, "stack_after", 0, "grown", 50, 80, 1, 2, "leaked, no stack");
    json_decref(j);

    /* Allocated, --top 2: the two largest changes. */
    j = run_json(
        (const char *const[]){"diff", "--cost=allocated", "--json", "--top=2", pa, pb, NULL},
        "diff --cost allocated");
    is_int(2050, cli_int(j, "totals.cost_bytes.before"), "allocated in A");
    is_int(3780, cli_int(j, "totals.cost_bytes.after"), "allocated in B");
    is_int(2, (long long)json_array_size(cli_get(j, "stacks")), "--top 2 lists 2");
    check_entry(j, "stack_after", hb->s1, "grown", 1000, 2000, 1, 2, "allocated S1 first");
    check_entry(j, "stack_after", hb->s4, "new", 0, 700, 0, 1, "allocated S4 second");
    json_decref(j);

    /* The other way round, the signs turn. */
    j = run_json((const char *const[]){"diff", pb, pa, "--json", NULL}, "diff B A");
    check_entry(j, "stack_before", hb->s1, "shrunk", 2000, 1000, 2, 1, "B A: S1 shrunk");
    check_entry(j, "stack_after", ha->s3, "new", 0, 300, 0, 1, "B A: S3 new");
    is_int(-1730, cli_int(j, "totals.cost_bytes.delta"), "B A: cost delta");
    json_decref(j);

    /* Text, in bytes. */
    struct cli_out o = cli_run((const char *const[]){"diff", pa, pb, "--bytes", NULL});
    is_int(0, o.status, "text diff exits 0");
    char line[512], want[256];
    cli_line(o.out, " 1. ", line, sizeof(line));
    snprintf(want, sizeof(want),
             " 1. +1000 B (+1000 bytes) grown: 1000 B in 1 -> 2000 B in 2 allocations, stack %u "
             "-> %u",
             (unsigned)ha->s1, (unsigned)hb->s1);
    is_string(want, line, "text: first stack");
    cli_line(o.out, " 4. ", line, sizeof(line));
    snprintf(want, sizeof(want),
             " 4. -300 B (-300 bytes) gone: 300 B in 1 -> 0 B in 0 allocations, stack %u -> -",
             (unsigned)ha->s3);
    is_string(want, line, "text: the stack only in A");
    cli_line(o.out, "peak allocated", line, sizeof(line));
    ok(strstr(line, "2050 B") && strstr(line, "3780 B") && strstr(line, "+1730 B"),
       "text: peak allocated row: %s", line);
    ok(strstr(o.out, "      #0  alloc_act at model.c:15\n") != NULL, "text: frames printed");
    ok(strstr(o.out, "<= 67108864 B") != NULL, "text: size classes, in bytes");
    cli_free(&o);
}

static void check_one_file(const char *pb, const struct hand *hb)
{
    /* Live after event 1 (S1 1000, S2 500) against after event 5 (S1 2000, S2 500, S4
     * 700, S5 100). */
    json_t *j =
        run_json((const char *const[]){"diff", pb, "--from", "#1", "--to", "#5", "--json", NULL},
                 "diff B --from #1 --to #5");
    is_string("leaked", json_string_value(cli_get(j, "cost")), "one file: default cost leaked");
    is_int(2, cli_int(j, "before.events"), "before: 2 events read");
    is_int(6, cli_int(j, "after.events"), "after: 6 events read");
    is_string("event #1", json_string_value(cli_get(j, "before.point")), "before's point");
    is_int(1500, cli_int(j, "totals.cost_bytes.before"), "1500 alive after event 1");
    is_int(3300, cli_int(j, "totals.cost_bytes.after"), "3300 alive after event 5");
    is_int(3, cli_int(j, "stack_counts.changed"), "3 changed");
    check_entry(j, "stack_after", hb->s1, "grown", 1000, 2000, 1, 2, "#1..#5: S1");
    check_entry(j, "stack_after", hb->s4, "new", 0, 700, 0, 1, "#1..#5: S4");
    check_entry(j, "stack_after", hb->s5, "new", 0, 100, 0, 1, "#1..#5: S5");
    json_decref(j);

    /* From the start to the end of the annotation 'grow' (event 6). */
    j = run_json((const char *const[]){"diff", pb, "--to", "grow", "--json", NULL},
                 "diff B --to grow");
    is_int(0, cli_int(j, "before.events"), "before: nothing read");
    is_int(7, cli_int(j, "after.events"), "after: up to the annotation's end");
    is_int(4, cli_int(j, "stack_counts.new"), "everything is new");
    is_int(3300, cli_int(j, "totals.cost_bytes.delta"), "3300 grown");
    json_decref(j);

    /* From the end of 'grow' to the end: S4 freed, S6 and the unknown stack new. */
    j = run_json((const char *const[]){"diff", pb, "--from", "grow", "--json", NULL},
                 "diff B --from grow");
    is_int(16, cli_int(j, "after.events"), "after: the whole file");
    is_int(3, cli_int(j, "stack_counts.changed"), "3 changed");
    check_entry(j, "stack_before", hb->s4, "gone", 700, 0, 1, 0, "grow..end: S4 freed");
    check_entry(j, "stack_after", hb->s6, "new", 0, 400, 0, 1, "grow..end: S6");
    check_entry(j, "stack_after", 0, "new", 0, 80, 0, 2, "grow..end: no stack");
    is_int(0, cli_int(j, "segments.at_end.before"), "no segments before");
    is_int(3, cli_int(j, "segments.at_end.after"), "3 segments at the end");
    json_decref(j);

    /* Times: events are 1 us apart; 2500ns keeps events 0-2, 8us events 0-8. */
    j = run_json((const char *const[]){"diff", pb, "--from", "2500ns", "--to", "8us", "--json",
                                       "--top", "0", NULL},
                 "diff B by time");
    is_int(3, cli_int(j, "before.events"), "2500ns: 3 events");
    is_int(9, cli_int(j, "after.events"), "8us: 9 events");
    is_int(5, cli_int(j, "stack_counts.changed"), "5 changed");
    check_entry(j, "stack_after", hb->s6, "new", 0, 400, 0, 1, "by time: S6");
    check_entry(j, "stack_after", 0, "new", 0, 50, 0, 1, "by time: one of no stack");
    json_decref(j);

    /* Allocated in total, and the peak so far, at two points. */
    j = run_json((const char *const[]){"diff", pb, "--from", "#1", "--to", "#10", "--cost",
                                       "allocated", "--json", NULL},
                 "diff B allocated");
    check_entry(j, "stack_after", hb->s4, "new", 0, 700, 0, 1, "allocated: S4 (freed) counts");
    check_entry(j, "stack_after", 0, "new", 0, 80, 0, 2, "allocated: no stack");
    is_int(2280, cli_int(j, "totals.cost_bytes.delta"), "allocated between: 2280");
    json_decref(j);
    j = run_json((const char *const[]){"diff", pb, "--from", "#4", "--to", "#10", "--cost", "peak",
                                       "--json", NULL},
                 "diff B peak");
    is_int(3200, cli_int(j, "totals.cost_bytes.before"), "peak up to event 4");
    is_int(3780, cli_int(j, "totals.cost_bytes.after"), "peak up to event 10");
    is_int(3, cli_int(j, "stack_counts.changed"), "S5, S6 and no stack changed");
    check_entry(j, "stack_after", hb->s6, "new", 0, 400, 0, 1, "peak: S6");
    json_decref(j);

    /* A point the file never reaches: its end, with a warning. */
    struct cli_out o = cli_run(
        (const char *const[]){"diff", pb, "--from", "#3", "--to", "nosuch", "--json", NULL});
    is_int(0, o.status, "unreached point: exit 0");
    int warned = strstr(o.err, "memtrace: warning: ") == o.err &&
                 strstr(o.err, "ends before --to 'nosuch'") && cli_lines(o.err) == 1;
    ok(warned, "one warning line: %s", chomp(o.err));
    j = cli_json(&o);
    is_int(16, cli_int(j, "after.events"), "compared at its end");
    json_decref(j);
    cli_free(&o);

    o = cli_run((const char *const[]){"diff", pb, "--from", "#1", "--to", "#5", NULL});
    char line[512];
    cli_line(o.out, "before", line, sizeof(line));
    ok(strstr(line, "at event #1 (2 events)") != NULL, "text names the point: %s", line);
    cli_free(&o);
}

static void check_usage(const char *pa, const char *pb)
{
    static const struct {
        const char *args[6];
        int status;
        const char *says;
    } cases[] = {
        {{"diff", NULL}, 2, "needs two files"},
        {{"diff", "a.memtrace", NULL}, 2, "needs two files"},
        {{"diff", "a", "b", "c", NULL}, 2, "compares two files"},
        {{"diff", "A", "B", "--cost", "worst", NULL}, 2, "invalid cost 'worst'"},
        {{"diff", "A", "B", "--top", "-1", NULL}, 2, "--top"},
        {{"diff", "A", "--from", "12xs", NULL}, 2, "invalid point"},
        {{"diff", "A", "/nonexistent/b.memtrace", NULL}, 1, "/nonexistent/b.memtrace"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const char *args[6];
        for (int i = 0; i < 6; i++)
            args[i] = cases[k].args[i] && strcmp(cases[k].args[i], "A") == 0   ? pa
                      : cases[k].args[i] && strcmp(cases[k].args[i], "B") == 0 ? pb
                                                                               : cases[k].args[i];
        struct cli_out o = cli_run(args);
        int pass = o.status == cases[k].status && strncmp(o.err, "memtrace: ", 10) == 0 &&
                   strstr(o.err, cases[k].says) && cli_lines(o.err) == 1 && o.out[0] == '\0';
        ok(pass, "usage case %zu: exit %d, one line: %s", k, o.status, chomp(o.err));
        cli_free(&o);
    }
    struct cli_out o = cli_run((const char *const[]){"diff", "--help", NULL});
    ok(o.status == 0 && strstr(o.out, "--cost") && strstr(o.out, "--from"), "--help");
    cli_free(&o);
}

/* ---- random files against a reference ---- */

#define NLF 14 /* logical frames */
#define NLS 30 /* logical stacks (a trie of them); NLS stands for "no stack" */

static const char *lf_sym[NLF], *lf_file[NLF];
static char lf_names[NLF][2][32];
static uint32_t lf_line[NLF];
static uint64_t lf_off[NLF];
static int ls_parent[NLS], ls_frame[NLS]; /* parent -1: a root */

static void make_logical(void)
{
    for (int k = 0; k < NLF; k++) {
        snprintf(lf_names[k][0], 32, "fn_%d", k);
        snprintf(lf_names[k][1], 32, "src/f%d.c", k % 4);
        lf_sym[k] = k % 5 == 4 ? "" : lf_names[k][0];
        lf_file[k] = k % 3 == 0 ? "" : lf_names[k][1];
        lf_line[k] = k % 3 == 0 ? 0 : 100 + (uint32_t)k;
        lf_off[k] = 0x1000 + 0x40 * (uint64_t)k;
    }
    for (int i = 0; i < NLS; i++) {
        for (;;) {
            ls_parent[i] = i < 3 ? -1 : (int)below((uint64_t)i + 1) - 1;
            ls_frame[i] = (int)below(NLF);
            int dup = 0;
            for (int j = 0; j < i; j++)
                dup |= ls_parent[j] == ls_parent[i] && ls_frame[j] == ls_frame[i];
            if (!dup)
                break;
        }
    }
}

struct rfile {
    struct file f;
    uint32_t lf_id[NLF][2]; /* frame ids; [1] a second frame of the same, or 0 */
    uint32_t node[NLS][2];  /* node ids per variant (0: not yet made) */
    int node_ls[512];       /* node id -> logical stack */
    int used[NLS];
};

static uint32_t make_node(struct rfile *rf, int ls, int variant)
{
    if (!rf->lf_id[ls_frame[ls]][1])
        variant = 0;
    if (rf->node[ls][variant])
        return rf->node[ls][variant];
    uint32_t parent = ls_parent[ls] < 0 ? 0 : make_node(rf, ls_parent[ls], 0);
    uint32_t id = add_node(&rf->f, parent, rf->lf_id[ls_frame[ls]][variant]);
    rf->node[ls][variant] = id;
    rf->node_ls[id] = ls;
    return id;
}

/* which: 0 for A, 1 for B. Stacks in both, only in A, only in B by a fixed draw. */
static void make_rfile(struct rfile *rf, int which, const int *in)
{
    memset(rf, 0, sizeof(*rf));
    int order[NLF];
    for (int k = 0; k < NLF; k++)
        order[k] = k;
    for (int k = NLF - 1; k > 0; k--) {
        int j = (int)below((uint64_t)k + 1), t = order[k];
        order[k] = order[j];
        order[j] = t;
    }
    for (int k = 0; k < NLF; k++) {
        int lf = order[k];
        int has_sym = lf_sym[lf][0] != 0;
        /* Symbol frames sit at other offsets in each file (another build); frames
         * without a symbol keep their module offset. */
        uint64_t off = has_sym ? 0x9000 * (uint64_t)(which + 1) + below(4096) : lf_off[lf];
        for (int v = 0; v < (below(3) == 0 ? 2 : 1); v++)
            rf->lf_id[lf][v] = add_frame(&rf->f, lf_sym[lf], lf_file[lf], lf_line[lf],
                                         "/usr/lib/libw.so", off, 0x7f0000000000ull + off + v);
    }
    int sorder[NLS];
    for (int k = 0; k < NLS; k++)
        sorder[k] = k;
    for (int k = NLS - 1; k > 0; k--) {
        int j = (int)below((uint64_t)k + 1), t = sorder[k];
        sorder[k] = sorder[j];
        sorder[j] = t;
    }
    for (int k = 0; k < NLS; k++) {
        int ls = sorder[k];
        rf->used[ls] = in[ls] == 2 || in[ls] == which;
        if (rf->used[ls]) {
            make_node(rf, ls, 0);
            make_node(rf, ls, 1);
        }
    }
}

struct rref {
    uint64_t peak_bytes[NLS + 1], peak_count[NLS + 1];
    uint64_t end_bytes[NLS + 1], end_count[NLS + 1];
    uint64_t all_bytes[NLS + 1], all_count[NLS + 1];
    uint64_t peak, level, rpeak, rlevel, seg_at_peak, events;
    uint32_t min_id[3][NLS + 1]; /* per cost, lowest node id with a cost (0: none) */
    uint64_t node_cost[3][512];
};

struct lblk {
    uint64_t addr, size;
    uint32_t node;
};

static void gen_events(struct rfile *rf, size_t n)
{
    struct file *f = &rf->f;
    int used[NLS], nused = 0;
    for (int k = 0; k < NLS; k++)
        if (rf->used[k])
            used[nused++] = k;
    struct lblk *live = calloc(n + 1, sizeof(*live)), *segs = calloc(n + 1, sizeof(*segs));
    size_t nlive = 0, nsegs = 0;
    uint64_t next = 0x10000, nseg = 0x100000000ull;
    static const uint64_t seg_sizes[] = {MiB, 2 * MiB, 3 * MiB, 20 * MiB, 3ull << 30};
    while (f->nev < n) {
        unsigned op = (unsigned)below(100);
        if ((f->nev / 500) % 2 && op < 45)
            op = 60; /* phases that free more, so peaks fall inside */
        if (op < 45) {
            uint32_t node = 0;
            if (nused && below(10) != 0) {
                int ls = used[below((uint64_t)nused)], v = (int)below(2);
                node = rf->node[ls][v] ? rf->node[ls][v] : rf->node[ls][0];
            }
            uint64_t size = 16 * (1 + below(4096));
            live[nlive++] = (struct lblk){next, size, node};
            ev_push(f, MEMTRACE_ALLOC, next, size, node);
            next += 0x100000;
        } else if (op < 85) {
            if (!nlive)
                continue;
            size_t k = below(nlive);
            ev_push(f, MEMTRACE_FREE_COMPLETED, live[k].addr, live[k].size, 0);
            live[k] = live[--nlive];
        } else if (op < 93) {
            uint64_t size = seg_sizes[below(5)];
            segs[nsegs++] = (struct lblk){nseg, size, 0};
            ev_push(f, MEMTRACE_SEGMENT_ALLOC, nseg, size, 0);
            nseg += 1ull << 32;
        } else if (nsegs) {
            size_t k = below(nsegs);
            ev_push(f, MEMTRACE_SEGMENT_FREE, segs[k].addr, segs[k].size, 0);
            segs[k] = segs[--nsegs];
        }
    }
    free(live);
    free(segs);
}

static int ls_of(const struct rfile *rf, uint32_t node)
{
    return node ? rf->node_ls[node] : NLS;
}

static void reference(const struct rfile *rf, struct rref *r)
{
    memset(r, 0, sizeof(*r));
    const struct file *f = &rf->f;
    struct lblk *live = calloc(f->nev + 1, sizeof(*live));
    uint64_t *segsz = calloc(f->nev + 1, sizeof(*segsz)), *segad = calloc(f->nev + 1, 8);
    size_t nlive = 0, nsegs = 0;
    uint64_t now_bytes[NLS + 1] = {0}, now_count[NLS + 1] = {0};
    uint64_t node_now[512] = {0}, node_peak[512] = {0};
    for (size_t i = 0; i < f->nev; i++) {
        const struct memtrace_event *e = &f->ev[i];
        r->events++;
        if (e->action == MEMTRACE_ALLOC) {
            int ls = ls_of(rf, e->stack);
            live[nlive++] = (struct lblk){e->addr, e->size, e->stack};
            now_bytes[ls] += e->size;
            now_count[ls]++;
            node_now[e->stack] += e->size;
            r->all_bytes[ls] += e->size;
            r->all_count[ls]++;
            r->node_cost[2][e->stack] += e->size;
            r->level += e->size;
            if (r->level > r->peak) {
                r->peak = r->level;
                memcpy(r->peak_bytes, now_bytes, sizeof(now_bytes));
                memcpy(r->peak_count, now_count, sizeof(now_count));
                memcpy(node_peak, node_now, sizeof(node_now));
            }
        } else if (e->action == MEMTRACE_FREE_COMPLETED) {
            for (size_t k = 0; k < nlive; k++) {
                if (live[k].addr != e->addr)
                    continue;
                int ls = ls_of(rf, live[k].node);
                now_bytes[ls] -= live[k].size;
                now_count[ls]--;
                node_now[live[k].node] -= live[k].size;
                r->level -= live[k].size;
                live[k] = live[--nlive];
                break;
            }
        } else if (e->action == MEMTRACE_SEGMENT_ALLOC) {
            segad[nsegs] = e->addr;
            segsz[nsegs++] = e->size;
            r->rlevel += e->size;
            if (r->rlevel > r->rpeak) {
                r->rpeak = r->rlevel;
                r->seg_at_peak = nsegs;
            }
        } else if (e->action == MEMTRACE_SEGMENT_FREE) {
            for (size_t k = 0; k < nsegs; k++) {
                if (segad[k] != e->addr)
                    continue;
                r->rlevel -= segsz[k];
                nsegs--;
                segad[k] = segad[nsegs];
                segsz[k] = segsz[nsegs];
                break;
            }
        }
    }
    memcpy(r->end_bytes, now_bytes, sizeof(now_bytes));
    memcpy(r->end_count, now_count, sizeof(now_count));
    memcpy(r->node_cost[0], node_peak, sizeof(node_peak));
    memcpy(r->node_cost[1], node_now, sizeof(node_now));
    /* The lowest node id per logical stack with a cost, counting a node alive with 0
     * bytes as having one: sizes are never 0 here, so bytes tell. */
    for (int c = 0; c < 3; c++)
        for (uint32_t id = (uint32_t)f->nst + 1; id-- > 0;)
            if (r->node_cost[c][id])
                r->min_id[c][ls_of(rf, id)] = id;
    free(live);
    free(segsz);
    free(segad);
}

static void cost_of(const struct rref *r, int cost, int ls, uint64_t *bytes, uint64_t *count)
{
    *bytes = cost == 0 ? r->peak_bytes[ls] : cost == 1 ? r->end_bytes[ls] : r->all_bytes[ls];
    *count = cost == 0 ? r->peak_count[ls] : cost == 1 ? r->end_count[ls] : r->all_count[ls];
}

static void check_random(uint64_t seed, size_t n)
{
    rng_state = seed;
    make_logical();
    int in[NLS];
    for (int k = 0; k < NLS; k++) {
        unsigned d = (unsigned)below(10);
        in[k] = d < 6 ? 2 : d < 8 ? 0 : 1;
    }
    static struct rfile rf[2];
    struct rref *ref = calloc(2, sizeof(*ref));
    const char *paths[2] = {cli_path("ra.memtrace"), cli_path("rb.memtrace")};
    for (int s = 0; s < 2; s++) {
        make_rfile(&rf[s], s, in);
        gen_events(&rf[s], n + 1000 * (size_t)s);
        write_file(paths[s], &rf[s].f);
        reference(&rf[s], &ref[s]);
    }
    static const char *const costs[3] = {"peak", "leaked", "allocated"};
    for (int c = 0; c < 3; c++) {
        json_t *j = run_json((const char *const[]){"diff", paths[0], paths[1], "--json", "--top",
                                                   "0", "--depth", "0", "--cost", costs[c], NULL},
                             "random diff");
        ok(j != NULL, "seed %llu, cost %s: parses", (unsigned long long)seed, costs[c]);
        uint64_t tot[2] = {0, 0};
        int want = 0, compared = 0, grown = 0, shrunk = 0;
        for (int ls = 0; ls <= NLS; ls++) {
            uint64_t b[2], k[2];
            cost_of(&ref[0], c, ls, &b[0], &k[0]);
            cost_of(&ref[1], c, ls, &b[1], &k[1]);
            tot[0] += b[0];
            tot[1] += b[1];
            compared += b[0] || b[1];
            want += b[0] != b[1] || k[0] != k[1];
            grown += b[1] > b[0];
            shrunk += b[1] < b[0];
        }
        is_int((long long)tot[0], cli_int(j, "totals.cost_bytes.before"), "%s: total before",
               costs[c]);
        is_int((long long)tot[1], cli_int(j, "totals.cost_bytes.after"), "%s: total after",
               costs[c]);
        is_int(compared, cli_int(j, "stack_counts.compared"), "%s: stacks compared", costs[c]);
        is_int(want, cli_int(j, "stack_counts.changed"), "%s: stacks changed", costs[c]);
        is_int(grown, cli_int(j, "stack_counts.grown"), "%s: grown", costs[c]);
        is_int(shrunk, cli_int(j, "stack_counts.shrunk"), "%s: shrunk", costs[c]);
        json_t *arr = cli_get(j, "stacks");
        is_int(want, (long long)json_array_size(arr), "%s: all listed", costs[c]);
        int seen[NLS + 1] = {0}, good = 1;
        for (size_t k = 0; k < json_array_size(arr); k++) {
            json_t *s = json_array_get(arr, k);
            json_t *ib = json_object_get(s, "stack_before"),
                   *ia = json_object_get(s, "stack_after");
            int lb = json_is_integer(ib) ? ls_of(&rf[0], (uint32_t)json_integer_value(ib)) : -1;
            int la = json_is_integer(ia) ? ls_of(&rf[1], (uint32_t)json_integer_value(ia)) : -1;
            int ls = la >= 0 ? la : lb;
            uint64_t b[2], n2[2];
            if (ls < 0 || (lb >= 0 && la >= 0 && lb != la) || seen[ls]) {
                diag("entry %zu: stacks %d / %d", k, lb, la);
                good = 0;
                continue;
            }
            seen[ls] = 1;
            cost_of(&ref[0], c, ls, &b[0], &n2[0]);
            cost_of(&ref[1], c, ls, &b[1], &n2[1]);
            uint32_t want_b = ref[0].min_id[c][ls], want_a = ref[1].min_id[c][ls];
            int ok_ids = ls == NLS ? (lb < 0 || json_integer_value(ib) == 0) &&
                                         (la < 0 || json_integer_value(ia) == 0)
                                   : (b[0] ? json_integer_value(ib) == want_b : lb < 0) &&
                                         (b[1] ? json_integer_value(ia) == want_a : la < 0);
            if ((uint64_t)cli_int(s, "bytes.before") != b[0] ||
                (uint64_t)cli_int(s, "bytes.after") != b[1] ||
                (uint64_t)cli_int(s, "count.before") != n2[0] ||
                (uint64_t)cli_int(s, "count.after") != n2[1] || !ok_ids) {
                diag("%s: logical stack %d: want %llu/%llu -> %llu/%llu", costs[c], ls,
                     (unsigned long long)b[0], (unsigned long long)n2[0], (unsigned long long)b[1],
                     (unsigned long long)n2[1]);
                good = 0;
            }
            /* The frames shown are the logical stack's, innermost first. */
            json_t *fr = json_object_get(s, "frames");
            size_t d = 0;
            for (int x = ls == NLS ? -1 : ls; x >= 0; x = ls_parent[x], d++) {
                json_t *f = json_array_get(fr, d);
                const char *sym = json_string_value(json_object_get(f, "symbol"));
                if (!sym || strcmp(sym, lf_sym[ls_frame[x]]) != 0 ||
                    cli_int(f, "line") != lf_line[ls_frame[x]]) {
                    diag("logical stack %d: frame %zu differs", ls, d);
                    good = 0;
                }
            }
            good &= d == json_array_size(fr);
        }
        ok(good, "%s: every stack's figures, ids and frames match the reference", costs[c]);
        ok(ordered(j), "%s: largest absolute change first", costs[c]);
        if (c == 0) {
            is_int((long long)ref[0].peak, cli_int(j, "totals.peak_allocated.before"), "peak A");
            is_int((long long)ref[1].peak, cli_int(j, "totals.peak_allocated.after"), "peak B");
            is_int((long long)ref[0].rpeak, cli_int(j, "segments.peak_reserved.before"),
                   "reserved peak A");
            is_int((long long)ref[1].rpeak, cli_int(j, "segments.peak_reserved.after"),
                   "reserved peak B");
            is_int((long long)ref[0].seg_at_peak, cli_int(j, "segments.at_peak.before"),
                   "segments at A's reserved peak");
            is_int((long long)ref[1].seg_at_peak, cli_int(j, "segments.at_peak.after"),
                   "segments at B's reserved peak");
            is_int((long long)ref[1].events, cli_int(j, "after.events"), "events of B");
        }
        json_decref(j);
    }
    for (int s = 0; s < 2; s++)
        free(rf[s].f.ev);
    free(ref);
}

int main(void)
{
    cli_scratch();
    struct file fa, fb;
    struct hand ha, hb;
    hand_a(&fa, &ha);
    hand_b(&fb, &hb);
    const char *pa = cli_path("a.memtrace"), *pb = cli_path("b.memtrace");
    write_file(pa, &fa);
    write_file(pb, &fb);
    check_two_files(pa, pb, &ha, &hb);
    check_one_file(pb, &hb);
    check_usage(pa, pb);
    static const uint64_t seeds[] = {3, 2024, 77777};
    for (size_t k = 0; k < sizeof(seeds) / sizeof(seeds[0]); k++)
        check_random(seeds[k], 3000 + 2000 * k);
    free(fa.ev);
    free(fb.ev);
    done_testing();
    return exit_status();
}
