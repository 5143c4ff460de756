/* recorder-t: the recording core: concurrency, ring semantics, options, stacks,
 * categories and annotations, streaming and dumps read back through the reader. */
#include "config.h"

#include "memtrace.h"
#include "memtrace_snapshot.h"
#include "recorder.h"
#include "stack.h"
#include "symbolize.h"
#include "tap.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NTHREADS   8
#define PER_THREAD 100000

static void start(size_t max_entries, int context, const char *stream)
{
    struct memtrace_options o;
    memtrace_options_init(&o);
    o.max_entries = max_entries;
    o.context = context;
    o.stream_path = stream;
    o.flush_ms = 50;
    if (memtrace_record_history(&o) != 0)
        bail_out("cannot start recording");
}

static void *thread_main(void *arg)
{
    uint64_t t = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < PER_THREAD; i++) {
        struct memtrace_event ev = {
            .action = i % 2 ? MEMTRACE_FREE_COMPLETED : MEMTRACE_ALLOC,
            .addr = (t << 32) | i,
            .size = 512,
        };
        memtrace_record_event(&ev);
    }
    return NULL;
}

static void test_threads(void)
{
    start(0, MEMTRACE_CONTEXT_NONE, NULL);
    pthread_t th[NTHREADS];
    for (uintptr_t t = 0; t < NTHREADS; t++)
        pthread_create(&th[t], NULL, thread_main, (void *)t);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    memtrace_record_history(NULL);

    struct memtrace_counts c;
    memtrace_get_counts(&c);
    is_int(NTHREADS * PER_THREAD, (long long)c.recorded, "8 threads x 100k: every event recorded");
    is_int(0, (long long)c.dropped, "no event dropped without a limit");

    struct memtrace_event *ev;
    size_t n;
    mt_recorder_history(&ev, &n);
    is_int(NTHREADS * PER_THREAD, (long long)n, "history holds every event");
    uint64_t next[NTHREADS] = {0};
    int in_order = 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t t = ev[i].addr >> 32;
        if (t >= NTHREADS || (ev[i].addr & 0xffffffffu) != next[t]++)
            in_order = 0;
    }
    ok(in_order, "each thread's events are all there, once, in its order");
    free(ev);
}

static void test_ring(void)
{
    start(1000, MEMTRACE_CONTEXT_NONE, NULL);
    for (uint64_t i = 0; i < 2500; i++) {
        struct memtrace_event ev = {.action = MEMTRACE_ALLOC, .addr = i, .size = 1};
        memtrace_record_event(&ev);
    }
    struct memtrace_counts c;
    memtrace_get_counts(&c);
    is_int(2500, (long long)c.recorded, "ring: 2500 recorded");
    is_int(1500, (long long)c.dropped, "ring: 1500 dropped");
    ok(c.overflowed, "ring: overflow flag set");
    struct memtrace_event *ev;
    size_t n;
    mt_recorder_history(&ev, &n);
    is_int(1000, (long long)n, "ring keeps exactly max_entries");
    is_int(1500, (long long)ev[0].addr, "oldest kept is event 1500");
    is_int(2499, (long long)ev[n - 1].addr, "newest kept is event 2499");
    free(ev);

    /* Across chunk boundaries: 200k events into a 70k ring. */
    start(70000, MEMTRACE_CONTEXT_NONE, NULL);
    memtrace_record_history(NULL);
    start(70000, MEMTRACE_CONTEXT_NONE, NULL);
    for (uint64_t i = 0; i < 200000; i++) {
        struct memtrace_event e = {.action = MEMTRACE_ALLOC, .addr = i};
        memtrace_record_event(&e);
    }
    mt_recorder_history(&ev, &n);
    int contiguous = n == 70000;
    for (size_t i = 0; contiguous && i < n; i++)
        contiguous = ev[i].addr == 130000 + i;
    ok(contiguous, "ring over several chunks keeps the newest 70000 in order");
    free(ev);
    memtrace_get_counts(&c);
    is_int(130000, (long long)c.dropped, "ring over several chunks: 130000 dropped");
    memtrace_record_history(NULL);
}

/* The ring's inline drop stops at the last event of a chunk (65536 events): a ring of
 * exactly one chunk, and one of one chunk plus one, drop across that edge; lowering
 * max_entries while recording keeps the newest and counts the rest. */
static int ring_run(size_t max, uint64_t events, uint64_t *dropped)
{
    start(max, MEMTRACE_CONTEXT_NONE, NULL);
    memtrace_record_history(NULL);
    start(max, MEMTRACE_CONTEXT_NONE, NULL);
    for (uint64_t i = 0; i < events; i++) {
        struct memtrace_event e = {.action = MEMTRACE_ALLOC, .addr = i};
        memtrace_record_event(&e);
    }
    struct memtrace_event *ev;
    size_t n;
    mt_recorder_history(&ev, &n);
    int exact = n == max;
    for (size_t i = 0; exact && i < n; i++)
        exact = ev[i].addr == events - max + i;
    free(ev);
    struct memtrace_counts c;
    memtrace_get_counts(&c);
    *dropped = c.dropped;
    return exact;
}

static void test_ring_edges(void)
{
    uint64_t dropped;
    ok(ring_run(65536, 300000, &dropped), "a one-chunk ring keeps the newest 65536 in order");
    is_int(300000 - 65536, (long long)dropped, "one-chunk ring: 234464 dropped");
    ok(ring_run(65537, 300000, &dropped), "a chunk-plus-one ring keeps the newest 65537");
    is_int(300000 - 65537, (long long)dropped, "chunk-plus-one ring: 234463 dropped");

    memtrace_record_history(NULL);
    start(5000, MEMTRACE_CONTEXT_NONE, NULL);
    for (uint64_t i = 0; i < 8000; i++) {
        struct memtrace_event e = {.action = MEMTRACE_ALLOC, .addr = i};
        memtrace_record_event(&e);
    }
    start(300, MEMTRACE_CONTEXT_NONE, NULL); /* recording goes on with a smaller ring */
    for (uint64_t i = 8000; i < 9000; i++) {
        struct memtrace_event e = {.action = MEMTRACE_ALLOC, .addr = i};
        memtrace_record_event(&e);
    }
    struct memtrace_event *ev;
    size_t n;
    mt_recorder_history(&ev, &n);
    is_int(300, (long long)n, "a lowered max_entries holds");
    is_int(8700, n ? (long long)ev[0].addr : -1, "and keeps the newest: 8700..8999");
    free(ev);
    struct memtrace_counts c;
    memtrace_get_counts(&c);
    is_int(8700, (long long)c.dropped, "8700 dropped in all");
    is_int(9000, (long long)c.recorded, "9000 recorded");
    memtrace_record_history(NULL);
}

static void test_options(void)
{
    struct memtrace_options o;
    memtrace_options_init(&o);
    is_int(MEMTRACE_CONTEXT_ALL, o.context, "default context is all");
    is_int(32, o.stack_depth, "default depth is 32");
    o.stack_depth = MEMTRACE_MAX_FRAMES + 1;
    is_int(MEMTRACE_EINVAL, memtrace_record_history(&o), "depth past the maximum is rejected");
    memtrace_options_init(&o);
    o.context = 7;
    is_int(MEMTRACE_EINVAL, memtrace_record_history(&o), "unknown context is rejected");
    ok(!memtrace_is_recording(), "a rejected start leaves the recorder stopped");
    struct memtrace_event ev = {.action = MEMTRACE_ALLOC};
    is_int(MEMTRACE_ESTATE, memtrace_record_event(&ev), "recording while stopped: ESTATE");

    memtrace_options_init(&o);
    o.skip_actions = 1u << MEMTRACE_FREE_REQUESTED;
    o.context = MEMTRACE_CONTEXT_NONE;
    memtrace_record_history(&o);
    struct memtrace_event a = {.action = MEMTRACE_ALLOC};
    struct memtrace_event f = {.action = MEMTRACE_FREE_REQUESTED};
    struct memtrace_event bad = {.action = MEMTRACE_ACTION_COUNT};
    memtrace_record_event(&a);
    memtrace_record_event(&f);
    is_int(MEMTRACE_EINVAL, memtrace_record_event(&bad), "unknown action: EINVAL");
    struct memtrace_counts c;
    memtrace_get_counts(&c);
    is_int(1, (long long)c.recorded, "skip_actions drops the skipped action only");
    memtrace_record_history(NULL);
}

static void test_categories(void)
{
    start(0, MEMTRACE_CONTEXT_NONE, NULL);
    uint32_t act = memtrace_intern("activations");
    is_int(act, memtrace_intern("activations"), "interning twice gives one id");
    ok(act != memtrace_intern("gradients"), "different strings, different ids");
    is_int(0, memtrace_intern(""), "empty string is id 0");
    memtrace_category_push("activations");
    struct memtrace_event a = {.action = MEMTRACE_ALLOC};
    memtrace_record_event(&a);
    memtrace_category_push("gradients");
    struct memtrace_event b = {.action = MEMTRACE_ALLOC};
    memtrace_record_event(&b);
    struct memtrace_event fr = {.action = MEMTRACE_FREE_COMPLETED};
    memtrace_record_event(&fr);
    memtrace_category_pop();
    memtrace_category_pop();
    is_int(MEMTRACE_ESTATE, memtrace_category_pop(), "popping an empty category stack: ESTATE");
    is_int(act, a.category, "alloc under a pushed category carries it");
    is_int(memtrace_intern("gradients"), b.category, "the innermost category wins");
    is_int(0, fr.category, "frees carry no category");

    memtrace_annotate_push("step 1");
    memtrace_annotate_mark("checkpoint");
    memtrace_annotate_pop();
    is_int(MEMTRACE_ESTATE, memtrace_annotate_pop(), "pop without push: ESTATE");
    struct memtrace_event *ev;
    size_t n;
    mt_recorder_history(&ev, &n);
    is_int(6, (long long)n, "3 allocs/frees and 3 annotations recorded");
    ok(n == 6 && ev[3].action == MEMTRACE_ANNOTATE && ev[3].aux == MEMTRACE_ANNOTATE_PUSH &&
           ev[3].category == memtrace_intern("step 1"),
       "push recorded with its name");
    ok(n == 6 && ev[4].aux == MEMTRACE_ANNOTATE_MARK && ev[5].aux == MEMTRACE_ANNOTATE_POP,
       "mark and pop recorded in order");
    free(ev);
    memtrace_record_history(NULL);
}

static __attribute__((noinline)) uint32_t recorder_test_alloc_site(void)
{
    struct memtrace_event ev = {.action = MEMTRACE_ALLOC, .addr = 0x1000, .size = 4096};
    memtrace_record_event(&ev);
    __asm__ volatile("" ::: "memory");
    return ev.stack;
}

static void test_stacks(void)
{
    start(0, MEMTRACE_CONTEXT_STATE, NULL);
    uint32_t s[2];
    for (volatile int i = 0; i < 2; i++) /* volatile: one call site, not unrolled */
        s[i] = recorder_test_alloc_site();
    uint32_t s1 = s[0], s2 = s[1];
    struct memtrace_event fr = {.action = MEMTRACE_FREE_COMPLETED};
    memtrace_record_event(&fr);
    memtrace_record_history(NULL);
    ok(s1 != 0, "alloc under context 'state' gets a stack");
    is_int(0, fr.stack, "a free under context 'state' gets none");
    is_int(s1, s2, "the same call site interns to the same stack id");
    uint32_t parent, frame;
    mt_stack_node(s1, &parent, &frame);
    struct mt_symbol sym;
    mt_symbolize(mt_frame_ip(frame), &sym);
    is_string("recorder_test_alloc_site", sym.function,
              "the innermost frame is the function that recorded");

    /* Which actions get a stack is one mask per context and depth. */
    static const int acts[4] = {MEMTRACE_ALLOC, MEMTRACE_SEGMENT_MAP, MEMTRACE_FREE_REQUESTED,
                                MEMTRACE_COUNTER};
    int with[4][4] = {{0}};
    static const int contexts[4] = {MEMTRACE_CONTEXT_NONE, MEMTRACE_CONTEXT_STATE,
                                    MEMTRACE_CONTEXT_ALLOC, MEMTRACE_CONTEXT_ALL};
    for (int c = 0; c < 4; c++) {
        start(0, contexts[c], NULL);
        for (int a = 0; a < 4; a++) {
            struct memtrace_event e = {.action = (uint8_t)acts[a]};
            memtrace_record_event(&e);
            with[c][a] = e.stack != 0;
        }
        memtrace_record_history(NULL);
    }
    ok(!with[0][0] && !with[0][1] && !with[0][2] && !with[0][3], "context none: no stacks");
    ok(with[1][0] && !with[1][1] && !with[1][2] && !with[1][3], "context state: alloc only");
    ok(with[2][0] && with[2][1] && !with[2][2] && !with[2][3], "context alloc: alloc, map");
    ok(with[3][0] && with[3][1] && with[3][2] && !with[3][3], "context all: all but counters");
    struct memtrace_options o;
    memtrace_options_init(&o);
    o.stack_depth = 0;
    memtrace_record_history(&o);
    struct memtrace_event e = {.action = MEMTRACE_ALLOC};
    memtrace_record_event(&e);
    memtrace_record_history(NULL);
    is_int(0, e.stack, "stack depth 0: no stack even for context all");
}

static void test_batch(void)
{
    start(0, MEMTRACE_CONTEXT_ALL, NULL);
    struct memtrace_event ev[2] = {
        {.action = MEMTRACE_FREE_REQUESTED, .addr = 0x5000, .size = 512},
        {.action = MEMTRACE_FREE_COMPLETED, .addr = 0x5000, .size = 512},
    };
    is_int(0, memtrace_record_events(ev, 2), "a batch of two records");
    ok(ev[0].time_ns != 0 && ev[0].time_ns == ev[1].time_ns, "the batch shares one time");
    ok(ev[0].stack != 0 && ev[0].stack == ev[1].stack, "the batch shares one stack");
    struct memtrace_event bad[2] = {{.action = MEMTRACE_ALLOC}, {.action = 200}};
    is_int(MEMTRACE_EINVAL, memtrace_record_events(bad, 2), "a bad action fails the batch");
    struct memtrace_counts c;
    memtrace_get_counts(&c);
    is_int(2, (long long)c.recorded, "nothing of a failed batch is recorded");
    memtrace_record_history(NULL);
}

/* memtrace_record_event_with: a plain counter bumped by the callback, with no lock
 * of its own, numbers the events in the history's order only if the callback runs
 * under the recorder's lock and before the event is stored. */
#define WITH_THREADS 4
#define WITH_EACH    20000

static uint64_t with_counter;
static int with_null_calls;

static void with_count(void *ctx, struct memtrace_event *ev)
{
    (void)ctx;
    with_counter++;
    if (ev != NULL)
        ev->aux = with_counter;
    else
        with_null_calls++;
}

static void *with_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < WITH_EACH; i++) {
        struct memtrace_event ev = {.action = MEMTRACE_SEGMENT_ALLOC, .size = 4096};
        memtrace_record_event_with(&ev, with_count, NULL);
    }
    return NULL;
}

static void test_with(void)
{
    start(0, MEMTRACE_CONTEXT_NONE, NULL);
    pthread_t th[WITH_THREADS];
    for (int t = 0; t < WITH_THREADS; t++)
        pthread_create(&th[t], NULL, with_thread, NULL);
    for (int t = 0; t < WITH_THREADS; t++)
        pthread_join(th[t], NULL);
    struct memtrace_event *ev;
    size_t n;
    mt_recorder_history(&ev, &n);
    int numbered = n == WITH_THREADS * WITH_EACH;
    for (size_t i = 0; numbered && i < n; i++)
        numbered = ev[i].aux == i + 1;
    free(ev);
    ok(numbered, "the callback ran once per event, under the lock, in the history's order");

    uint64_t counted = with_counter;
    struct memtrace_event bad = {.action = 200};
    is_int(MEMTRACE_EINVAL, memtrace_record_event_with(&bad, with_count, NULL),
           "an unknown action fails");
    is_int((long long)counted, (long long)with_counter, "with no callback");
    is_int(MEMTRACE_EINVAL, memtrace_record_event_with(NULL, NULL, NULL), "no event, no callback");
    is_int(0, memtrace_record_event_with(NULL, with_count, NULL), "no event: the callback alone");
    is_int(1, with_null_calls, "and it ran once, with no event");
    memtrace_record_history(NULL);

    uint64_t before = with_counter;
    struct memtrace_event off = {.action = MEMTRACE_SEGMENT_FREE, .addr = 0x9000};
    is_int(MEMTRACE_ESTATE, memtrace_record_event_with(&off, with_count, NULL),
           "recording off: not recorded");
    is_int((long long)before + 1, (long long)with_counter, "but the callback still ran");
}

struct provider_ctx {
    int calls;
};

static void provide(void *ctx, memtrace_segment_sink sink, void *sink_ctx)
{
    struct provider_ctx *p = ctx;
    p->calls++;
    struct memtrace_block blocks[2] = {
        {.addr = 0x10000, .size = 1024, .requested_size = 1000, .state = 1},
        {.addr = 0x10400, .size = 1024, .state = MEMTRACE_BLOCK_INACTIVE},
    };
    struct memtrace_segment seg = {
        .addr = 0x10000,
        .total_size = 2048,
        .allocated_size = 1024,
        .active_size = 1024,
        .requested_size = 1000,
        .device = 0,
        .pool = 1,
        .nblocks = 2,
        .blocks = blocks,
    };
    sink(sink_ctx, &seg);
}

static void read_back(const char *path, const char *what, size_t want_events, int want_segments)
{
    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    if (memtrace_reader_open(&r, path, &err) != 0) {
        ok(0, "%s: opens (%s)", what, err.text);
        skip(4, "file did not open");
        return;
    }
    ok(1, "%s: opens", what);
    struct memtrace_event ev;
    size_t n = 0, allocs_with_stack = 0;
    while (memtrace_reader_next(r, &ev) == 1) {
        n++;
        if (ev.action == MEMTRACE_ALLOC && ev.stack != 0) {
            uint32_t frames[4];
            int d = memtrace_reader_stack(r, ev.stack, frames, 4);
            const struct memtrace_frame *f = d > 0 ? memtrace_reader_frame(r, frames[0]) : NULL;
            if (f != NULL && strcmp(f->symbol, "recorder_test_alloc_site") == 0)
                allocs_with_stack++;
        }
    }
    is_int((long long)want_events, (long long)n, "%s: every event read back", what);
    ok(!memtrace_reader_truncated(r) && memtrace_reader_end(r) != NULL, "%s: complete file", what);
    is_int(want_segments, (long long)memtrace_reader_segment_count(r), "%s: state segments", what);
    ok(allocs_with_stack > 0, "%s: stacks resolve to the recording function", what);
    memtrace_reader_close(r);
}

static void test_stream_and_dump(void)
{
    char stream[] = "/tmp/recorder-t-stream-XXXXXX";
    char dump[] = "/tmp/recorder-t-dump-XXXXXX";
    close(mkstemp(stream));
    unlink(stream); /* the name only: the recorder creates files, never reuses them */
    close(mkstemp(dump));
    unlink(dump); /* the name only: the recorder creates files, never reuses them */
    struct provider_ctx pc = {0};
    int h = memtrace_state_provider_add(provide, &pc);
    ok(h > 0, "state provider registered");
    start(0, MEMTRACE_CONTEXT_ALL, stream);
    for (int i = 0; i < 150000; i++) /* more than two stream buffers */
        recorder_test_alloc_site();
    is_int(0, memtrace_dump_snapshot(dump), "dump while streaming");
    memtrace_record_history(NULL);
    is_int(3, pc.calls, "provider called as the stream opened, for the dump and at its end");
    /* The stream has the allocs and the snapshot marker; its history ring is capped. */
    read_back(stream, "stream", 150001, 1);
    read_back(dump, "dump", 100000, 1);
    memtrace_state_provider_remove(h);
    is_int(MEMTRACE_EIO, memtrace_dump_snapshot("/nonexistent-dir/x.memtrace"),
           "dump to an unwritable path: EIO");
    unlink(stream);
    unlink(dump);
}

/* The allocator's state at a dump: a segment at 0x20000 whose blocks A, B (allocated
 * before the ring's history), E and F (in it) are live. */
static void provide_before(void *ctx, memtrace_segment_sink sink, void *sink_ctx)
{
    (void)ctx;
    struct memtrace_block blocks[5] = {
        {.addr = 0x20000, .size = 512, .state = MEMTRACE_BLOCK_ACTIVE_ALLOCATED},
        {.addr = 0x20200, .size = 512, .state = MEMTRACE_BLOCK_ACTIVE_ALLOCATED},
        {.addr = 0x20400, .size = 512, .state = MEMTRACE_BLOCK_ACTIVE_ALLOCATED},
        {.addr = 0x20600, .size = 512, .state = MEMTRACE_BLOCK_ACTIVE_ALLOCATED},
        {.addr = 0x20800, .size = 6144, .state = MEMTRACE_BLOCK_INACTIVE},
    };
    struct memtrace_segment seg = {
        .addr = 0x20000, .total_size = 8192, .pool = 1, .nblocks = 5, .blocks = blocks};
    sink(sink_ctx, &seg);
}

/* A dump whose ring lost its first events holds, before its first event, the state
 * of what was live then (docs/REPLAY.md, rule 0): A and B, which the state holds and
 * the history never allocated, and D, which the history frees. */
static void test_dump_before(void)
{
    char dump[] = "/tmp/recorder-t-before-XXXXXX";
    close(mkstemp(dump));
    unlink(dump);
    int h = memtrace_state_provider_add(provide_before, NULL);
    start(4, MEMTRACE_CONTEXT_NONE, NULL);
    /* A B C, free C, D E F, free D; the ring keeps E, F, free D and the dump's marker */
    static const struct {
        int action;
        uint64_t addr;
    } seq[8] = {{MEMTRACE_ALLOC, 0x20000}, {MEMTRACE_ALLOC, 0x20200},
                {MEMTRACE_ALLOC, 0x20800}, {MEMTRACE_FREE_COMPLETED, 0x20800},
                {MEMTRACE_ALLOC, 0x20800}, {MEMTRACE_ALLOC, 0x20400},
                {MEMTRACE_ALLOC, 0x20600}, {MEMTRACE_FREE_COMPLETED, 0x20800}};
    for (int i = 0; i < 8; i++) {
        struct memtrace_event ev = {
            .action = (uint8_t)seq[i].action, .addr = seq[i].addr, .size = 512};
        memtrace_record_event(&ev);
    }
    is_int(0, memtrace_dump_snapshot(dump), "dump before: written");
    memtrace_record_history(NULL);
    memtrace_state_provider_remove(h);
    struct memtrace_reader *r;
    if (memtrace_reader_open(&r, dump, NULL) != 0) {
        ok(0, "dump before: opens");
        skip(2, "file did not open");
        return;
    }
    struct memtrace_event ev;
    int first = memtrace_reader_next(r, &ev);
    const struct memtrace_segment *g = memtrace_reader_segment(r, 0);
    ok(first == 1 && ev.action == MEMTRACE_ALLOC && ev.addr == 0x20400 &&
           memtrace_reader_segment_count(r) == 1 && g && g->nblocks == 3 &&
           g->blocks[0].addr == 0x20000 && g->blocks[1].addr == 0x20200 &&
           g->blocks[2].addr == 0x20800,
       "dump before: the state before the first kept event holds A, B and D");
    size_t n = 1;
    while (memtrace_reader_next(r, &ev) == 1)
        n++;
    g = memtrace_reader_segment(r, 0);
    ok(n == 4 && g && g->nblocks == 5, "dump before: the 4 kept events, then the state at the end");
    memtrace_reader_close(r);
    unlink(dump);
}

/* A device name that is not UTF-8 (Latin-1 here) is kept in the metadata, escaped;
 * jansson refuses such a string, and registering it used to fail with ENOMEM. */
static void test_meta_strings(void)
{
    char dir[] = "/tmp/recorder-t-meta-XXXXXX", path[64];
    if (mkdtemp(dir) == NULL)
        bail_out("mkdtemp failed");
    snprintf(path, sizeof path, "%s/meta.memtrace", dir);
    start(0, MEMTRACE_CONTEXT_NONE, NULL);
    is_int(0, memtrace_device_register(7, "carte graphique \xe9", 1 << 20, "host"),
           "a device name that is not UTF-8 registers");
    memtrace_dump_snapshot(path);
    memtrace_record_history(NULL);
    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    const char *name = NULL;
    json_t *meta = NULL;
    if (memtrace_reader_open(&r, path, &err) == 0) {
        struct memtrace_event ev;
        while (memtrace_reader_next(r, &ev) == 1)
            ;
        meta = json_loads(memtrace_reader_meta(r), 0, NULL);
        json_t *d;
        size_t i;
        json_array_foreach(json_object_get(meta, "devices"), i, d)
        {
            if (json_integer_value(json_object_get(d, "index")) == 7)
                name = json_string_value(json_object_get(d, "name"));
        }
        memtrace_reader_close(r);
    }
    ok(name && strcmp(name, "carte graphique \\xe9") == 0,
       "the metadata keeps it, with the byte as \\xe9: %s", name ? name : "(lost)");
    json_decref(meta);
    unlink(path);
    rmdir(dir);
}

/* A provider whose context its owner frees once memtrace_state_provider_remove
 * returns (as memtrace_alloc_destroy does): no collection may call it after. */
#define LIVE_MAGIC 0x6c697665u

struct owned {
    unsigned magic;
};

static atomic_int stale_calls, collections_done, owned_calls;
static atomic_int collecting_stop;

static void provide_owned(void *ctx, memtrace_segment_sink sink, void *sink_ctx)
{
    (void)sink;
    (void)sink_ctx;
    const volatile struct owned *o = ctx;
    atomic_fetch_add(&owned_calls, 1);
    usleep(300); /* a collection that takes its time, as a real one may */
    if (o->magic != LIVE_MAGIC)
        atomic_fetch_add(&stale_calls, 1);
}

static void *dumper(void *arg)
{
    const char *dir = arg;
    char path[96];
    for (int i = 0; !atomic_load(&collecting_stop); i++) {
        snprintf(path, sizeof path, "%s/%d.memtrace", dir, i);
        memtrace_dump_snapshot(path);
        unlink(path);
        atomic_fetch_add(&collections_done, 1);
    }
    return NULL;
}

static void test_provider_remove(void)
{
    char dir[] = "/tmp/recorder-t-remove-XXXXXX";
    if (mkdtemp(dir) == NULL)
        bail_out("mkdtemp failed");
    start(1000, MEMTRACE_CONTEXT_NONE, NULL);
    pthread_t th;
    pthread_create(&th, NULL, dumper, dir);
    int bad_handles = 0;
    for (int i = 0; i < 300; i++) {
        struct owned *o = malloc(sizeof *o);
        if (o == NULL)
            bail_out("out of memory");
        o->magic = LIVE_MAGIC;
        int h = memtrace_state_provider_add(provide_owned, o);
        bad_handles += h <= 0;
        usleep(150);
        bad_handles += memtrace_state_provider_remove(h) != 0;
        o->magic = 0; /* what a freed context may hold */
        free(o);
    }
    atomic_store(&collecting_stop, 1);
    pthread_join(th, NULL);
    memtrace_record_history(NULL);
    rmdir(dir);
    is_int(0, bad_handles, "300 providers added and removed while another thread dumps");
    is_int(0, atomic_load(&stale_calls),
           "no collection called a provider after its removal returned (%d dumps, %d calls)",
           atomic_load(&collections_done), atomic_load(&owned_calls));
}

/* A fork while another thread is inside a provider: the child has no such thread,
 * and removing the provider there must not wait for it. */
static void provide_slowly(void *ctx, memtrace_segment_sink sink, void *sink_ctx)
{
    (void)ctx;
    (void)sink;
    (void)sink_ctx;
    usleep(200000);
}

static void *dump_once(void *arg)
{
    memtrace_dump_snapshot(arg);
    return NULL;
}

static void test_fork_in_collection(void)
{
    char path[] = "/tmp/recorder-t-forkdump-XXXXXX";
    close(mkstemp(path));
    unlink(path);
    start(1000, MEMTRACE_CONTEXT_NONE, NULL);
    int h = memtrace_state_provider_add(provide_slowly, NULL);
    pthread_t th;
    pthread_create(&th, NULL, dump_once, path);
    usleep(50000); /* the dump is inside provide_slowly now */
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        _exit(memtrace_state_provider_remove(h) == 0 ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "a child forked during a collection removes the provider at once");
    pthread_join(th, NULL);
    memtrace_state_provider_remove(h);
    memtrace_record_history(NULL);
    unlink(path);
}

static void test_fork(void)
{
    start(0, MEMTRACE_CONTEXT_NONE, NULL);
    struct memtrace_event ev = {.action = MEMTRACE_ALLOC};
    memtrace_record_event(&ev);
    pid_t pid = fork();
    if (pid == 0) {
        struct memtrace_counts c;
        memtrace_get_counts(&c);
        struct memtrace_event e = {.action = MEMTRACE_ALLOC};
        int rc = memtrace_record_event(&e);
        _exit(c.recorded == 0 && rc == MEMTRACE_ESTATE && !memtrace_is_recording() ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "forked child starts stopped with an empty history");
    pid = fork();
    if (pid == 0) {
        /* The child's thread id is its pid, not the cached id of the parent thread. */
        start(0, MEMTRACE_CONTEXT_NONE, NULL);
        struct memtrace_event e = {.action = MEMTRACE_ALLOC};
        memtrace_record_event(&e);
        _exit(e.tid == (uint32_t)getpid() ? 0 : 1);
    }
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a forked child's events carry its own tid");
    struct memtrace_counts c;
    memtrace_get_counts(&c);
    is_int(1, (long long)c.recorded, "parent's recording is untouched by the fork");
    memtrace_record_history(NULL);
}

int main(void)
{
    plan(86);
    test_threads();
    test_ring();
    test_ring_edges();
    test_options();
    test_categories();
    test_stacks();
    test_batch();
    test_with();
    test_stream_and_dump();
    test_dump_before();
    test_meta_strings();
    test_provider_remove();
    test_fork_in_collection();
    test_fork();
    return exit_status();
}
