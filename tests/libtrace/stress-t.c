/* stress-t: sixteen threads at once through memtrace's caching allocator on the host
 * device, recording to a stream with stacks: allocations and frees on their own
 * streams, blocks used on another thread's stream (record_stream) and freed by that
 * thread, annotation ranges and markers, and snapshot dumps. The stream must hold
 * exactly the operations done, end with nothing live, and every dump must read.
 * Kept short in sanitizer builds; a ThreadSanitizer build runs it for races. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memtrace.h"
#include "memtrace_alloc.h"
#include "memtrace_device.h"
#include "memtrace_snapshot.h"
#include "tests/rng.h"
#include "tests/tap.h"

#define THREADS 16
#define HELD    32 /* blocks a thread keeps at once */
#define MAILBOX 64 /* blocks waiting for the next thread to free them */
#define DUMPS   2  /* per thread */

static const int sanitized = MEMTRACE_SANITIZERS || MEMTRACE_TSAN;

struct mailbox {
    pthread_mutex_t lock;
    uint64_t addr[MAILBOX];
    int n;
};

struct worker {
    int id;
    struct memtrace_stream *own, *next; /* next: the stream of thread id + 1 */
    long long allocs, frees, annotations, dumps, failures;
};

static struct memtrace_allocator *alloc;
static struct mailbox box[THREADS];
static struct worker work[THREADS];
static pthread_barrier_t start, drained;
static char dir[] = "/tmp/stress-t-XXXXXX";
static int rounds;

static void fail(struct worker *w, const char *what, int rc)
{
    if (w->failures++ == 0)
        diag("thread %d: %s: %s", w->id, what, memtrace_strerror(rc));
}

static void do_free(struct worker *w, uint64_t addr)
{
    int rc = memtrace_alloc_free(alloc, addr);
    if (rc != 0)
        fail(w, "free", rc);
    else
        w->frees++;
}

static uint64_t do_alloc(struct worker *w, size_t size)
{
    uint64_t addr = 0;
    int rc = memtrace_alloc_malloc(alloc, size, w->own, &addr);
    if (rc != 0) {
        fail(w, "malloc", rc);
        return 0;
    }
    w->allocs++;
    return addr;
}

/* Frees what the previous thread handed over: blocks allocated on its stream and
 * used on this one's. */
static void drain(struct worker *w)
{
    uint64_t take[MAILBOX];
    struct mailbox *b = &box[w->id];
    pthread_mutex_lock(&b->lock);
    int n = b->n;
    memcpy(take, b->addr, (size_t)n * sizeof *take);
    b->n = 0;
    pthread_mutex_unlock(&b->lock);
    for (int i = 0; i < n; i++)
        do_free(w, take[i]);
}

/* A block used on the next thread's stream too, which that thread frees. */
static void hand_over(struct worker *w, size_t size)
{
    uint64_t addr = do_alloc(w, size);
    if (addr == 0)
        return;
    int rc = memtrace_alloc_record_stream(alloc, addr, w->next);
    if (rc != 0)
        fail(w, "record_stream", rc);
    struct mailbox *b = &box[(w->id + 1) % THREADS];
    pthread_mutex_lock(&b->lock);
    int posted = b->n < MAILBOX;
    if (posted)
        b->addr[b->n++] = addr;
    pthread_mutex_unlock(&b->lock);
    if (!posted)
        do_free(w, addr);
}

static void dump(struct worker *w, int k)
{
    char path[128];
    snprintf(path, sizeof path, "%s/dump-%d-%d.memtrace", dir, w->id, k);
    int rc = memtrace_dump_snapshot(path);
    if (rc != 0)
        fail(w, "dump", rc);
    else
        w->dumps++;
}

static void annotate(struct worker *w, int (*fn)(const char *), const char *name)
{
    int rc = fn(name);
    if (rc != 0)
        fail(w, "annotate", rc);
    else
        w->annotations++;
}

static int pop(const char *unused)
{
    (void)unused;
    return memtrace_annotate_pop();
}

static void *run(void *arg)
{
    struct worker *w = arg;
    uint64_t held[HELD] = {0};
    uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(w->id + 1);
    char name[32];
    snprintf(name, sizeof name, "worker %d", w->id);
    pthread_barrier_wait(&start);
    annotate(w, memtrace_annotate_push, name);
    for (int i = 0; i < rounds; i++) {
        uint64_t r = test_rand(&seed);
        size_t size = (size_t)(r >> 40) % (r & 1 ? 64 << 10 : 3 << 20) + 1;
        int slot = (int)((r >> 8) % HELD);
        switch ((r >> 16) % 8) {
        case 0:
        case 1:
        case 2:
            if (held[slot])
                do_free(w, held[slot]);
            held[slot] = do_alloc(w, size);
            break;
        case 3:
            if (held[slot]) {
                do_free(w, held[slot]);
                held[slot] = 0;
            }
            break;
        case 4:
            hand_over(w, size);
            break;
        case 5:
            drain(w);
            break;
        case 6:
            annotate(w, memtrace_annotate_mark, "step");
            break;
        default:
            annotate(w, memtrace_annotate_push, "inner");
            held[slot] = held[slot] ? held[slot] : do_alloc(w, size);
            annotate(w, pop, NULL);
            break;
        }
        if (i % (rounds / DUMPS) == rounds / DUMPS / 2)
            dump(w, i / (rounds / DUMPS));
    }
    for (int i = 0; i < HELD; i++)
        if (held[i])
            do_free(w, held[i]);
    annotate(w, pop, NULL);
    /* Nothing is handed over after this: what is in the mailbox is the last of it. */
    pthread_barrier_wait(&drained);
    drain(w);
    return NULL;
}

struct tally {
    long long n[MEMTRACE_ACTION_COUNT];
    long long live_bytes, unstacked_allocs;
    int rc, truncated;
    long long segments;
};

static void tally_file(const char *path, struct tally *t)
{
    memset(t, 0, sizeof *t);
    struct memtrace_reader *r = NULL;
    struct memtrace_errinfo err;
    t->rc = memtrace_reader_open(&r, path, &err);
    if (t->rc != 0) {
        diag("cannot open %s: %s", path, err.text);
        return;
    }
    struct memtrace_event e;
    int rc;
    while ((rc = memtrace_reader_next(r, &e)) == 1) {
        if (e.action < MEMTRACE_ACTION_COUNT)
            t->n[e.action]++;
        if (e.action == MEMTRACE_ALLOC) {
            t->live_bytes += (long long)e.size;
            t->unstacked_allocs += e.stack == 0;
        } else if (e.action == MEMTRACE_FREE_COMPLETED) {
            t->live_bytes -= (long long)e.size;
        }
    }
    t->rc = rc < 0 ? rc : 0;
    t->truncated = memtrace_reader_truncated(r);
    t->segments = (long long)memtrace_reader_segment_count(r);
    memtrace_reader_close(r);
}

static void remove_dir(void)
{
    char path[128];
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < DUMPS; k++) {
            snprintf(path, sizeof path, "%s/dump-%d-%d.memtrace", dir, t, k);
            unlink(path);
        }
    snprintf(path, sizeof path, "%s/stream.memtrace", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    struct memtrace_device *dev = NULL;
    char path[128];
    rounds = sanitized ? 400 : 4000;
    if (mkdtemp(dir) == NULL)
        bail_out("mkdtemp failed");
    if (memtrace_device_open_host(&dev, 64ULL << 30) != 0 || memtrace_alloc_create(&alloc, dev))
        bail_out("cannot open the host device and its allocator");

    snprintf(path, sizeof path, "%s/stream.memtrace", dir);
    struct memtrace_options o;
    memtrace_options_init(&o);
    o.stream_path = path;
    o.stack_depth = 16;
    o.max_entries = 20000; /* what dumps hold; the stream gets every event */
    o.flush_ms = 20;
    is_int(0, memtrace_record_history(&o), "recording to a stream, stacks on");

    struct memtrace_stream *streams[THREADS];
    for (int t = 0; t < THREADS; t++)
        if (memtrace_stream_create(dev, &streams[t]) != 0)
            bail_out("cannot create a host stream");
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_barrier_init(&drained, NULL, THREADS);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        pthread_mutex_init(&box[t].lock, NULL);
        work[t] = (struct worker){.id = t, .own = streams[t], .next = streams[(t + 1) % THREADS]};
        pthread_create(&th[t], NULL, run, &work[t]);
    }
    long long allocs = 0, frees = 0, annotations = 0, dumps = 0, failures = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        allocs += work[t].allocs;
        frees += work[t].frees;
        annotations += work[t].annotations;
        dumps += work[t].dumps;
        failures += work[t].failures;
    }
    is_int(0, failures, "%d threads, %d rounds each: no call failed", THREADS, rounds);
    is_int(allocs, frees, "every block allocated was freed (%lld)", allocs);
    is_int(THREADS * DUMPS, dumps, "every thread dumped %d times", DUMPS);

    /* Frees on another stream complete when that stream reaches them. */
    is_int(0, memtrace_alloc_empty_cache(alloc), "empty_cache waits for pending frees");
    struct memtrace_alloc_stats st;
    memtrace_alloc_get_stats(alloc, &st);
    is_int(0, st.allocated_bytes[0].current, "allocator: no bytes allocated");
    is_int(0, st.reserved_bytes[0].current, "allocator: every segment returned");
    is_int(allocs, st.allocation[0].allocated, "allocator: every malloc counted");
    struct memtrace_counts c;
    memtrace_get_counts(&c);
    is_int(0, memtrace_record_history(NULL), "recording stopped, stream closed");

    struct tally f;
    tally_file(path, &f);
    is_int(0, f.rc, "the stream reads without error");
    is_int(0, f.truncated, "the stream is complete");
    is_int(allocs, f.n[MEMTRACE_ALLOC], "alloc events: one per malloc");
    is_int(frees, f.n[MEMTRACE_FREE_REQUESTED], "free_requested events: one per free");
    is_int(frees, f.n[MEMTRACE_FREE_COMPLETED], "free_completed events: one per free");
    is_int(annotations, f.n[MEMTRACE_ANNOTATE], "annotate events: one per push, pop, mark");
    is_int(dumps, f.n[MEMTRACE_SNAPSHOT], "snapshot events: one per dump");
    is_int(f.n[MEMTRACE_SEGMENT_ALLOC], f.n[MEMTRACE_SEGMENT_FREE],
           "every segment allocated was freed (%lld)", f.n[MEMTRACE_SEGMENT_ALLOC]);
    long long total = 0;
    for (int a = 0; a < MEMTRACE_ACTION_COUNT; a++)
        total += f.n[a];
    is_int((long long)c.recorded, total, "the stream holds every event recorded");
    is_int(0, f.live_bytes, "live bytes after every free: 0");
    is_int(0, f.segments, "no live segment in the final state");
    is_int(0, f.unstacked_allocs, "every alloc has a stack");

    int unreadable = 0;
    long long dump_events = 0;
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < DUMPS; k++) {
            struct tally d;
            snprintf(path, sizeof path, "%s/dump-%d-%d.memtrace", dir, t, k);
            tally_file(path, &d);
            unreadable += d.rc != 0 || d.truncated;
            for (int a = 0; a < MEMTRACE_ACTION_COUNT; a++)
                dump_events += d.n[a];
        }
    is_int(0, unreadable, "all %d dumps read to their end", THREADS * DUMPS);
    ok(dump_events > 0, "the dumps hold events (%lld)", dump_events);
    diag("%lld mallocs, %lld annotations, %lld events in the stream", allocs, annotations, total);

    memtrace_alloc_destroy(alloc);
    for (int t = 0; t < THREADS; t++)
        memtrace_stream_destroy(streams[t]);
    memtrace_device_close(dev);
    remove_dir();
    done_testing();
    return exit_status();
}
