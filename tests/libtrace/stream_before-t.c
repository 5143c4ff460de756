/* stream_before-t: a stream opened while the caching allocator holds memory begins
 * with what was live then (docs/REPLAY.md, rule 0), so that its replay ends where the
 * allocator stands: no free of an unknown block, the same bytes allocated and
 * reserved. With one thread, added to a running recording, and with threads
 * allocating and freeing while the stream opens and its state is collected. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memtrace.h"
#include "memtrace_alloc.h"
#include "memtrace_device.h"
#include "replay.h"
#include "tests/tap.h"

#define THREADS           3
#define SLOTS             32
#define MAX_HELD_EVENTS_T (16u * 65536u) /* recorder_stream.c's bound */

static struct memtrace_allocator *a;
static struct memtrace_device *d;
static atomic_int stop;
static atomic_int slow; /* the slow provider sleeps */
static int failures[THREADS];

/* A provider that holds nothing and takes its time, called before the allocator's:
 * the churning threads fill and hand over stream buffers while the state is being
 * collected, which the writer must keep until it has written that state. */
static const char *growing; /* slow == 2: the stream the provider watches */
static atomic_int grew;

static void slow_provider(void *ctx, memtrace_segment_sink sink, void *sink_ctx)
{
    (void)ctx;
    (void)sink;
    (void)sink_ctx;
    if (atomic_load(&slow) == 1)
        usleep(50000);
    /* 2: as slow as it takes for the writer to give the state up and write the
     * events it held (the file grows past 1 MB), 60 s at most. */
    for (int i = 0; atomic_load(&slow) == 2 && i < 6000; i++) {
        struct stat st;
        if (stat(growing, &st) == 0 && st.st_size > (1 << 20)) {
            atomic_store(&grew, 1);
            break;
        }
        usleep(10000);
    }
}

static void start_stream(const char *path)
{
    struct memtrace_options o;
    memtrace_options_init(&o);
    o.context = MEMTRACE_CONTEXT_NONE;
    o.stream_path = path;
    if (memtrace_record_history(&o) != 0)
        bail_out("cannot start a stream");
}

static void add_initial(void *ctx, const struct mt_live *e, int is_seg)
{
    uint64_t *bytes = ctx;
    if (!is_seg)
        *bytes += e->size;
}

/* Opens path and replays it to the end: the replay (NULL when the file does not
 * open, a failed check then), the run's code in *rc and the bytes of the state
 * before its first event in *initial. */
static struct mt_replay *replay(const char *path, const char *what, uint64_t *initial, int *rc)
{
    struct mt_replay *rp;
    struct memtrace_errinfo err;
    *initial = 0;
    if (mt_replay_open(&rp, path, NULL, &err) != 0) {
        ok(0, "%s: the stream opens (%s)", what, err.text);
        return NULL;
    }
    rp->on_initial = add_initial;
    rp->on_initial_ctx = initial;
    *rc = mt_replay_run(rp);
    return rp;
}

/* Replays path; checks it against the allocator's figures now. want_initial: the
 * bytes live when the stream opened; UINT64_MAX: some, how many unknown. */
static void check_replay(const char *path, const char *what, uint64_t want_initial)
{
    uint64_t initial;
    int rc;
    struct mt_replay *rp = replay(path, what, &initial, &rc);
    if (rp == NULL) {
        skip(4, "no file");
        return;
    }
    struct memtrace_alloc_stats st;
    memtrace_alloc_get_stats(a, &st);
    ok(rc == 0 && !mt_replay_truncated(rp), "%s: the stream replays whole", what);
    if (want_initial == UINT64_MAX) /* threads that hold blocks all along */
        ok(initial > 0, "%s: it begins with memory live (%llu bytes)", what,
           (unsigned long long)initial);
    else
        is_int((int64_t)want_initial, (int64_t)initial,
               "%s: it begins with the bytes live when it opened", what);
    is_int(0, (int64_t)rp->unmatched_frees.count, "%s: no free of an unknown block", what);
    is_int(st.allocated_bytes[0].current, (int64_t)rp->allocated.cur,
           "%s: it ends with the bytes the allocator has allocated", what);
    is_int(st.reserved_bytes[0].current, (int64_t)rp->reserved.cur,
           "%s: and with the bytes it has reserved", what);
    mt_replay_close(rp);
}

static void test_one_thread(const char *path)
{
    uint64_t held[10], extra[2];
    uint64_t bytes = 0;
    for (int i = 0; i < 10; i++) {
        size_t size = i % 2 ? 1u << 20 : 3000u * (unsigned)(i + 1);
        if (memtrace_alloc_malloc(a, size, NULL, &held[i]) != 0)
            bail_out("an allocation before the stream failed");
    }
    struct memtrace_alloc_stats st;
    memtrace_alloc_get_stats(a, &st);
    bytes = (uint64_t)st.allocated_bytes[0].current;
    start_stream(path);
    for (int i = 0; i < 3; i++)
        memtrace_alloc_free(a, held[i]);
    for (int i = 0; i < 2; i++)
        memtrace_alloc_malloc(a, 5000, NULL, &extra[i]);
    memtrace_record_history(NULL);
    check_replay(path, "one thread", bytes);
    for (int i = 3; i < 10; i++)
        memtrace_alloc_free(a, held[i]);
    for (int i = 0; i < 2; i++)
        memtrace_alloc_free(a, extra[i]);
}

/* A stream added to a recording that runs without one: the history holds events
 * from before the stream, which are not the stream's. */
static void test_running(const char *path)
{
    struct memtrace_options o;
    memtrace_options_init(&o);
    o.context = MEMTRACE_CONTEXT_NONE;
    if (memtrace_record_history(&o) != 0)
        bail_out("cannot start recording");
    uint64_t held[4];
    for (int i = 0; i < 4; i++)
        if (memtrace_alloc_malloc(a, 4096u << i, NULL, &held[i]) != 0)
            bail_out("an allocation before the stream failed");
    memtrace_alloc_free(a, held[0]);
    struct memtrace_alloc_stats st;
    memtrace_alloc_get_stats(a, &st);
    uint64_t bytes = (uint64_t)st.allocated_bytes[0].current;
    start_stream(path);
    memtrace_alloc_free(a, held[1]);
    memtrace_record_history(NULL);
    check_replay(path, "added to a running recording", bytes);
    memtrace_alloc_free(a, held[2]);
    memtrace_alloc_free(a, held[3]);
}

/* A stream closed right after it opened: the writer may learn that the state is
 * ready and that the stream stops in one wake-up. Every one of these must close
 * (an alarm ends a hang). */
static void test_open_close(void)
{
    char dir[] = "/tmp/stream_before-t-dir-XXXXXX", path[64];
    if (mkdtemp(dir) == NULL)
        bail_out("mkdtemp failed");
    int closed = 0;
    alarm(60);
    for (int i = 0; i < 300; i++) {
        snprintf(path, sizeof path, "%s/%d.memtrace", dir, i);
        start_stream(path);
        memtrace_record_history(NULL);
        struct memtrace_reader *r;
        if (memtrace_reader_open(&r, path, NULL) == 0) {
            struct memtrace_event ev;
            while (memtrace_reader_next(r, &ev) == 1)
                ;
            closed += memtrace_reader_end(r) != NULL;
            memtrace_reader_close(r);
        }
        unlink(path);
    }
    alarm(0);
    rmdir(dir);
    is_int(300, closed, "300 streams opened and closed at once: each file is complete");
}

/* Two threads that start a stream at the same moment: one stream opens, the other
 * call finds it open (a stream, once open, stays open). */
static pthread_barrier_t both;
static char race_path[2][80];

static void *race_start(void *arg)
{
    int k = (int)(intptr_t)arg;
    struct memtrace_options o;
    memtrace_options_init(&o);
    o.context = MEMTRACE_CONTEXT_NONE;
    o.stream_path = race_path[k];
    pthread_barrier_wait(&both);
    return (void *)(intptr_t)memtrace_record_history(&o);
}

static void test_two_starts(void)
{
    char dir[] = "/tmp/stream_before-t-race-XXXXXX";
    if (mkdtemp(dir) == NULL)
        bail_out("mkdtemp failed");
    int one_file = 0, failed = 0;
    for (int i = 0; i < 100; i++) {
        pthread_t th[2];
        pthread_barrier_init(&both, NULL, 2);
        for (int k = 0; k < 2; k++) {
            snprintf(race_path[k], sizeof race_path[k], "%s/%d-%d.memtrace", dir, i, k);
            pthread_create(&th[k], NULL, race_start, (void *)(intptr_t)k);
        }
        for (int k = 0; k < 2; k++) {
            void *rc;
            pthread_join(th[k], &rc);
            failed += rc != NULL;
        }
        pthread_barrier_destroy(&both);
        struct memtrace_event ev = {.action = MEMTRACE_ANNOTATE, .device = -1};
        memtrace_record_event(&ev);
        memtrace_record_history(NULL);
        int complete = 0;
        for (int k = 0; k < 2; k++) {
            struct memtrace_reader *r;
            if (access(race_path[k], F_OK) != 0)
                continue;
            if (memtrace_reader_open(&r, race_path[k], NULL) == 0) {
                while (memtrace_reader_next(r, &ev) == 1)
                    ;
                complete += memtrace_reader_end(r) != NULL;
                memtrace_reader_close(r);
            }
            unlink(race_path[k]);
        }
        one_file += complete == 1;
    }
    rmdir(dir);
    is_int(0, failed, "two threads start a stream at once, 100 times: both calls succeed");
    is_int(100, one_file, "and each time one complete stream was written, not two");
}

static void *churn(void *arg)
{
    int t = (int)(intptr_t)arg;
    uint64_t held[SLOTS] = {0};
    uint64_t x = (uint64_t)t * 2654435761u + 17;
    for (unsigned i = 0; !atomic_load(&stop) || i < 2 * SLOTS; i++) {
        unsigned slot = i % SLOTS;
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        if (held[slot] && memtrace_alloc_free(a, held[slot]))
            failures[t]++;
        held[slot] = 0;
        if (memtrace_alloc_malloc(a, (x >> 33) % (512u << 10) + 1, NULL, &held[slot]))
            failures[t]++;
    }
    /* Half is left live: the stream ends with memory in use (the allocator's
     * destruction gives it back). */
    for (unsigned i = 0; i < SLOTS; i += 2)
        if (held[i] && memtrace_alloc_free(a, held[i]))
            failures[t]++;
    return NULL;
}

static void test_threads(const char *path)
{
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, churn, (void *)(intptr_t)i);
    usleep(20000);
    atomic_store(&slow, 1);
    start_stream(path);
    atomic_store(&slow, 0);
    usleep(50000);
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    memtrace_record_history(NULL);
    int bad = 0;
    for (int i = 0; i < THREADS; i++)
        bad += failures[i];
    is_int(0, bad, "threads: every malloc and free succeeded");
    check_replay(path, "threads", UINT64_MAX);
}

/* A provider that takes longer than a million events: the writer stops holding them,
 * gives the state up and writes them, so its memory stays bounded. */
static void test_give_up(const char *path)
{
    pthread_t th[THREADS];
    struct rusage before, after;
    atomic_store(&stop, 0);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, churn, (void *)(intptr_t)i);
    usleep(20000);
    getrusage(RUSAGE_SELF, &before);
    growing = path;
    atomic_store(&slow, 2);
    start_stream(path);
    atomic_store(&slow, 0);
    getrusage(RUSAGE_SELF, &after);
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    memtrace_record_history(NULL);
    ok(atomic_load(&grew), "give up: the writer wrote what it held while the state was collected");
    long grown_mb = (after.ru_maxrss - before.ru_maxrss) / 1024;
#ifdef __SANITIZE_THREAD__
    (void)grown_mb; /* the sanitizer's shadow memory is several times what is held */
    skip(1, "memory is not measured under ThreadSanitizer");
#else
    ok(grown_mb < 200, "give up: memory grew by %ld MB meanwhile (at most 84 MB held)", grown_mb);
#endif
    uint64_t initial;
    int rc;
    struct mt_replay *rp = replay(path, "give up", &initial, &rc);
    if (rp == NULL) {
        skip(1, "no file");
        return;
    }
    ok(rc == 0 && !mt_replay_truncated(rp) && rp->events > MAX_HELD_EVENTS_T,
       "give up: the stream replays whole (%llu events)", (unsigned long long)rp->events);
    is_int(0, (int64_t)initial, "give up: and begins without a state");
    mt_replay_close(rp);
}

int main(void)
{
    if (memtrace_state_provider_add(slow_provider, NULL) <= 0)
        bail_out("cannot add a provider");
    if (memtrace_device_open_host(&d, 8ull << 30) || memtrace_alloc_create(&a, d))
        skip_all("no host device");
    char one[] = "/tmp/stream_before-t-XXXXXX", many[] = "/tmp/stream_before-t-XXXXXX";
    char running[] = "/tmp/stream_before-t-XXXXXX", late[] = "/tmp/stream_before-t-XXXXXX";
    close(mkstemp(one));
    unlink(one); /* the name only: the recorder creates files, never reuses them */
    close(mkstemp(many));
    unlink(many);
    close(mkstemp(running));
    unlink(running);
    close(mkstemp(late));
    unlink(late);
    test_one_thread(one);
    test_running(running);
    test_open_close();
    test_two_starts();
    test_threads(many);
    test_give_up(late);
    unlink(late);
    unlink(one);
    unlink(running);
    unlink(many);
    memtrace_alloc_destroy(a);
    memtrace_device_close(d);
    done_testing();
    return exit_status();
}
