/* cache-t: the caching allocator's policy, one group per rule, with exact figures. */
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_impl.h"
#include "memtrace_snapshot.h"
#include "recorder.h"
#include "tests/tap.h"
#include "mtx/util.h"

#define MB ((uint64_t)1 << 20)

static struct memtrace_device *dev;

static struct memtrace_allocator *fresh(const char *conf)
{
    struct memtrace_allocator *a = NULL;
    if (memtrace_alloc_create(&a, dev))
        bail_out("memtrace_alloc_create failed");
    if (conf && memtrace_alloc_configure(a, conf, NULL))
        bail_out("configure failed");
    return a;
}

static uint64_t xalloc(struct memtrace_allocator *a, size_t size, struct memtrace_stream *s)
{
    uint64_t addr = 0;
    int rc = memtrace_alloc_malloc(a, size, s, &addr);
    if (rc)
        diag("malloc(%zu) failed: %s", size, memtrace_strerror(rc));
    return addr;
}

static uint64_t bsize(struct memtrace_allocator *a, uint64_t addr)
{
    uint64_t size = 0;
    memtrace_alloc_block_info(a, addr, &size, NULL);
    return size;
}

static struct memtrace_alloc_stats stats(struct memtrace_allocator *a)
{
    struct memtrace_alloc_stats st;
    memtrace_alloc_get_stats(a, &st);
    return st;
}

static uint64_t recorded(void)
{
    struct memtrace_counts c;
    memtrace_get_counts(&c);
    return c.recorded;
}

/* State capture: the state of the block at want. */
struct find {
    uint64_t want;
    int state;
    uint64_t seg_addr, seg_total;
    int nsegs;
};

static void sink(void *ctx, const struct memtrace_segment *seg)
{
    struct find *f = ctx;
    f->nsegs++;
    for (size_t i = 0; i < seg->nblocks; i++)
        if (seg->blocks[i].addr == f->want) {
            f->state = seg->blocks[i].state;
            f->seg_addr = seg->addr;
            f->seg_total = seg->total_size;
        }
}

static struct find state_of(struct memtrace_allocator *a, uint64_t addr)
{
    struct find f = {addr, -1, 0, 0, 0};
    mt_alloc_provide_state(a, sink, &f);
    return f;
}

static void test_rounding(void)
{
    struct memtrace_allocator *a = fresh(NULL);
    uint64_t x = xalloc(a, 1, NULL), y = xalloc(a, 513, NULL), z = xalloc(a, 0, NULL);
    is_int(512, bsize(a, x), "1 B rounds to 512");
    is_int(1024, bsize(a, y), "513 B rounds to 1024");
    is_int(512, bsize(a, z), "0 B gives 512");
    is_int(x + 512, y, "next block follows the first");
    memtrace_alloc_destroy(a);

    a = fresh("roundup_power2_divisions:4");
    x = xalloc(a, 1300 * 1024, NULL);
    is_int(1536 * 1024, bsize(a, x), "1300 KiB with 4 divisions rounds to 1.5 MiB");
    y = xalloc(a, 5 * MB + 1, NULL);
    is_int(6 * MB, bsize(a, y), "5 MiB + 1 with 4 divisions rounds to 6 MiB");
    z = xalloc(a, 4 * MB, NULL);
    is_int(4 * MB, bsize(a, z), "a power of two stays");
    x = xalloc(a, 1500, NULL);
    is_int(1536, bsize(a, x), "small sizes (<= 512 * divisions) keep 512 B rounding");
    memtrace_alloc_destroy(a);

    a = fresh("roundup_power2_divisions:[1:1,2:8,>:2]");
    x = xalloc(a, 1300 * 1024, NULL);
    is_int(1300 * 1024, bsize(a, x), "interval 1 MiB: 1 division, plain rounding");
    y = xalloc(a, 2 * MB + 1, NULL);
    is_int(2 * MB + 256 * 1024, bsize(a, y), "interval 2 MiB: 8 divisions (256 KiB steps)");
    z = xalloc(a, 5 * MB, NULL);
    is_int(6 * MB, bsize(a, z), "interval 4 MiB: '>' gives 2 divisions");
    memtrace_alloc_destroy(a);
}

static void test_pools(void)
{
    struct memtrace_allocator *a = fresh(NULL);
    struct memtrace_alloc_stats st;
    xalloc(a, MB, NULL);
    st = stats(a);
    is_int(2 * MB, st.reserved_bytes[MEMTRACE_STAT_SMALL_POOL].current,
           "1 MiB: small, 2 MiB segment");
    xalloc(a, MB + 1, NULL);
    st = stats(a);
    is_int(20 * MB, st.reserved_bytes[MEMTRACE_STAT_LARGE_POOL].current,
           "1 MiB + 1: large, 20 MiB");
    xalloc(a, 10 * MB - 512, NULL);
    st = stats(a);
    is_int(20 * MB, st.reserved_bytes[MEMTRACE_STAT_LARGE_POOL].current,
           "below 10 MiB: served from the cached 20 MiB segment remainder");
    xalloc(a, 10 * MB, NULL);
    st = stats(a);
    is_int(30 * MB, st.reserved_bytes[MEMTRACE_STAT_LARGE_POOL].current,
           "10 MiB: a segment of its own, 10 MiB");
    xalloc(a, 11 * MB + 1, NULL);
    st = stats(a);
    is_int(42 * MB, st.reserved_bytes[MEMTRACE_STAT_LARGE_POOL].current,
           "11 MiB + 1: a segment rounded to 12 MiB");
    is_int(4, st.segment[MEMTRACE_STAT_ALL].current, "4 segments");
    is_int(1, st.segment[MEMTRACE_STAT_SMALL_POOL].current, "1 small segment");
    is_int(4, st.num_device_alloc, "4 device allocations");
    is_int(5, st.allocation[MEMTRACE_STAT_ALL].current, "5 allocations");
    memtrace_alloc_destroy(a);
}

static void test_split_merge(void)
{
    struct memtrace_allocator *a = fresh(NULL);
    struct memtrace_alloc_stats st;
    uint64_t x = xalloc(a, 1000, NULL), y = xalloc(a, 1000, NULL), z, big, c;
    struct find f = state_of(a, x);
    is_int(f.seg_addr, x, "first block at the segment start");
    is_int(x + 1024, y, "second block right after");
    st = stats(a);
    is_int(1, st.inactive_split[0].current, "one cached remainder");
    is_int(2 * MB - 2048, st.inactive_split_bytes[0].current, "remainder bytes");
    memtrace_alloc_free(a, x);
    st = stats(a);
    is_int(2, st.inactive_split[0].current, "freed piece and remainder are inactive splits");
    memtrace_alloc_free(a, y);
    st = stats(a);
    is_int(0, st.inactive_split[0].current, "all merged back into one block");
    is_int(0, st.inactive_split_bytes[0].current, "no split bytes");
    z = xalloc(a, MB, NULL);
    is_int(x, z, "merged block serves the largest small request from its start");
    is_int(MB, bsize(a, z), "split leaves the other 1 MiB cached");
    memtrace_alloc_free(a, z);

    big = xalloc(a, 9 * MB, NULL);
    st = stats(a);
    is_int(20 * MB, st.reserved_bytes[MEMTRACE_STAT_LARGE_POOL].current, "20 MiB segment");
    is_int(11 * MB, st.inactive_split_bytes[MEMTRACE_STAT_LARGE_POOL].current, "11 MiB rest");
    c = xalloc(a, 10 * MB + 512 * 1024, NULL);
    is_int(big + 9 * MB, c, "best fit takes the 11 MiB rest");
    is_int(11 * MB, bsize(a, c), "rest of 512 KiB <= 1 MiB: not split");
    memtrace_alloc_free(a, big);
    memtrace_alloc_free(a, c);
    st = stats(a);
    is_int(0, st.inactive_split[MEMTRACE_STAT_LARGE_POOL].current, "large blocks merged");
    memtrace_alloc_destroy(a);
}

static void test_max_split(void)
{
    struct memtrace_allocator *a = fresh("max_split_size_mb:32");
    struct memtrace_alloc_stats st;
    uint64_t b40 = xalloc(a, 40 * MB, NULL), b46, x, y, z;
    memtrace_alloc_free(a, b40);
    x = xalloc(a, MB + 1, NULL);
    ok(x < b40 || x >= b40 + 40 * MB, "a small request does not take an oversize block");
    st = stats(a);
    is_int(60 * MB, st.reserved_bytes[0].current, "new 20 MiB segment");
    b46 = xalloc(a, 45 * MB, NULL);
    is_int(46 * MB, bsize(a, b46), "45 MiB in its own 46 MiB segment");
    memtrace_alloc_free(a, b46);
    y = xalloc(a, 35 * MB, NULL);
    is_int(b40, y, "35 MiB takes the 40 MiB block (40 < 35 + 20)");
    is_int(40 * MB, bsize(a, y), "oversize block is not split");
    z = xalloc(a, 24 * MB, NULL);
    ok(z != b46, "24 MiB (< max_split) does not take the 46 MiB block");
    st = stats(a);
    is_int(60 * MB + 46 * MB + 24 * MB, st.reserved_bytes[0].current, "24 MiB segment added");
    is_int(32 * MB, st.max_split_size, "max_split_size reported");
    memtrace_alloc_destroy(a);
}

static atomic_int gate;

static void wait_gate(void *arg)
{
    (void)arg;
    while (!atomic_load(&gate))
        usleep(1000);
}

static void test_pending_free(void)
{
    struct memtrace_allocator *a = fresh(NULL);
    struct memtrace_stream *s1;
    struct memtrace_alloc_stats st;
    uint64_t x, y, n0;
    if (memtrace_stream_create(dev, &s1)) {
        skip(9, "no stream");
        memtrace_alloc_destroy(a);
        return;
    }
    x = xalloc(a, 4096, NULL);
    atomic_store(&gate, 0);
    memtrace_stream_launch(dev, s1, wait_gate, NULL);
    is_int(0, memtrace_alloc_record_stream(a, x, s1), "record_stream");
    n0 = recorded();
    memtrace_alloc_free(a, x);
    is_int(n0 + 1, recorded(), "only free_requested recorded while the stream is busy");
    is_int(MEMTRACE_BLOCK_ACTIVE_PENDING_FREE, state_of(a, x).state,
           "block is active_pending_free");
    st = stats(a);
    is_int(0, st.allocation[0].current, "allocation count dropped at free");
    is_int(1, st.active[0].current, "still active");
    y = xalloc(a, 4096, NULL);
    ok(y != x, "a pending block is not reused");
    atomic_store(&gate, 1);
    memtrace_stream_sync(dev, s1);
    memtrace_alloc_process_events(a);
    is_int(n0 + 3, recorded(), "alloc and free_completed recorded after the event");
    is_int(MEMTRACE_BLOCK_INACTIVE, state_of(a, x).state, "block inactive after the event");
    st = stats(a);
    is_int(1, st.active[0].current, "only y active");
    memtrace_alloc_free(a, y);
    memtrace_alloc_destroy(a);
    memtrace_stream_destroy(s1);
}

static void test_empty_cache(void)
{
    struct memtrace_allocator *a = fresh(NULL);
    struct memtrace_alloc_stats st;
    uint64_t x = xalloc(a, 1000, NULL), y = xalloc(a, 3 * MB, NULL), z = xalloc(a, 18 * MB, NULL);
    memtrace_alloc_free(a, y);
    memtrace_alloc_free(a, z);
    st = stats(a);
    is_int(40 * MB, st.reserved_bytes[0].current, "2 + 20 + 18 MiB reserved");
    memtrace_alloc_empty_cache(a);
    st = stats(a);
    is_int(2 * MB, st.reserved_bytes[0].current, "the small segment in use stays");
    is_int(1, st.segment[0].current, "one segment left");
    is_int(2, st.num_device_free, "two segments returned");
    memtrace_alloc_free(a, x);
    memtrace_alloc_empty_cache(a);
    st = stats(a);
    is_int(0, st.reserved_bytes[0].current, "nothing reserved");
    is_int(40 * MB, st.reserved_bytes[0].peak, "peak kept");
    memtrace_alloc_reset_peak(a);
    st = stats(a);
    is_int(0, st.reserved_bytes[0].peak, "reset_peak");
    memtrace_alloc_destroy(a);
}

static void test_gc(void)
{
    struct memtrace_device *small;
    struct memtrace_allocator *a = NULL;
    struct memtrace_alloc_stats st;
    uint64_t A, B, C, D;
    memtrace_device_open_host(&small, 100 * MB);
    memtrace_alloc_create(&a, small);
    memtrace_alloc_configure(a, "garbage_collection_threshold:0.5", NULL);
    A = xalloc(a, 20 * MB, NULL);
    B = xalloc(a, 24 * MB, NULL);
    memtrace_alloc_free(a, A);
    memtrace_alloc_free(a, B);
    C = xalloc(a, 30 * MB, NULL);
    st = stats(a);
    is_int(74 * MB, st.reserved_bytes[0].current, "below the threshold: nothing collected");
    memtrace_alloc_free(a, C);
    D = xalloc(a, 32 * MB, NULL);
    st = stats(a);
    is_int(82 * MB, st.reserved_bytes[0].current, "over 50 MiB: the oldest 24 MiB freed first");
    is_int(1, st.num_device_free, "one segment collected");
    is_int(3, st.segment[0].current, "three segments");
    ok(D != 0, "D allocated");
    memtrace_alloc_destroy(a);
    memtrace_device_close(small);
}

static void test_expandable(void)
{
    struct memtrace_allocator *a = fresh("expandable_segments:True");
    struct memtrace_alloc_stats st;
    uint64_t n0 = recorded(), s, x, y;
    s = xalloc(a, 1000, NULL);
    st = stats(a);
    is_int(2 * MB, st.reserved_bytes[MEMTRACE_STAT_SMALL_POOL].current, "small: one 2 MiB map");
    x = xalloc(a, 3 * MB, NULL);
    st = stats(a);
    is_int(4 * MB, st.reserved_bytes[MEMTRACE_STAT_LARGE_POOL].current, "3 MiB maps 4 MiB");
    y = xalloc(a, 2 * MB, NULL);
    st = stats(a);
    is_int(x + 3 * MB, y, "growth continues the same range");
    is_int(6 * MB, st.reserved_bytes[MEMTRACE_STAT_LARGE_POOL].current, "one more granule");
    is_int(3, st.num_device_alloc, "three maps");
    is_int(1, state_of(a, x).nsegs >= 2, "segments reported");
    is_int(6 * MB, state_of(a, x).seg_total, "large range reports 6 MiB mapped");
    if (memtrace_is_recording())
        is_int(n0 + 6, recorded(), "3 segment_map + 3 alloc events");
    else
        skip(1, "not recording");
    memtrace_alloc_free(a, x);
    memtrace_alloc_free(a, y);
    memtrace_alloc_free(a, s);
    memtrace_alloc_empty_cache(a);
    st = stats(a);
    is_int(0, st.reserved_bytes[0].current, "all unmapped");
    is_int(2, st.num_device_free, "two unmaps");
    is_int(0, st.segment[0].current, "ranges released");
    memtrace_alloc_destroy(a);
}

static int observed;
static uint64_t observed_free;

static void observer(void *ctx, struct memtrace_allocator *a, int device, uint64_t size,
                     uint64_t device_free, uint64_t device_total)
{
    (void)ctx;
    (void)a;
    (void)device;
    (void)size;
    (void)device_total;
    observed++;
    observed_free = device_free;
}

static void test_oom(void)
{
    struct memtrace_device *small;
    struct memtrace_allocator *a = NULL;
    struct memtrace_alloc_stats st;
    char conf[256], path[256];
    struct stat sb;
    uint64_t A, B, C, D = 0, n0;
    int h, rc;
    memtrace_device_open_host(&small, 80 * MB);
    memtrace_alloc_create(&a, small);
    mtx_format(path, sizeof(path), "/tmp/cache-t-oom-%d.memtrace", (int)getpid());
    mtx_format(conf, sizeof(conf), "oom_snapshot:/tmp/cache-t-oom-%%p.memtrace");
    memtrace_alloc_configure(a, conf, NULL);
    unlink(path);
    h = memtrace_alloc_oom_observer_add(observer, NULL);
    ok(h > 0, "observer added");
    A = xalloc(a, 30 * MB, NULL);
    B = xalloc(a, 30 * MB, NULL);
    memtrace_alloc_free(a, A);
    C = xalloc(a, 40 * MB, NULL);
    ok(C != 0, "40 MiB fits after freeing the cached 30 MiB");
    st = stats(a);
    is_int(70 * MB, st.reserved_bytes[0].current, "70 MiB reserved");
    is_int(1, st.num_device_free, "cached segment returned");
    n0 = recorded();
    rc = memtrace_alloc_malloc(a, 20 * MB, NULL, &D);
    is_int(MEMTRACE_EOOM, rc, "20 MiB more: MEMTRACE_EOOM");
    st = stats(a);
    is_int(1, st.num_ooms, "num_ooms");
    is_int(1, st.num_alloc_retries, "one retry after freeing all");
    is_int(1, observed, "observer called once");
    is_int(10 * MB, observed_free, "observer sees 10 MiB free");
    if (memtrace_is_recording()) {
        ok(recorded() >= n0 + 1, "oom event recorded");
        ok(stat(path, &sb) == 0 && sb.st_size > 0, "snapshot written to %s", path);
    } else {
        skip(2, "not recording");
    }
    unlink(path);
    memtrace_alloc_oom_observer_remove(h);
    memtrace_alloc_free(a, B);
    memtrace_alloc_free(a, C);
    memtrace_alloc_destroy(a);
    memtrace_device_close(small);
}

static void test_recorded(void)
{
    struct memtrace_allocator *a = fresh(NULL);
    uint64_t n0 = recorded(), x;
    char buf[8192];
    int len;
    x = xalloc(a, 100, NULL);
    is_int(n0 + 2, recorded(), "segment_alloc + alloc");
    memtrace_alloc_free(a, x);
    is_int(n0 + 4, recorded(), "free_requested + free_completed");
    memtrace_alloc_empty_cache(a);
    is_int(n0 + 5, recorded(), "segment_free");
    len = memtrace_alloc_summary(a, buf, sizeof(buf));
    ok(len > 0 && (size_t)len < sizeof(buf) && strstr(buf, "Allocated memory"), "summary table");
    int lines = 0, even = 1;
    for (char *p = buf, *nl; (nl = strchr(p, '\n')) != NULL; p = nl + 1, lines++)
        even = even && nl - p == 81 && p[0] == '|' && nl[-1] == '|';
    ok(lines == 45 && even, "summary: %d lines, each 81 columns wide, bar to bar", lines);
    memtrace_alloc_destroy(a);
}

/* Restarts the recorder with context and skip, streaming to path when given. */
static void restart(int context, uint32_t skip, const char *path)
{
    struct memtrace_options o;
    memtrace_record_history(NULL);
    memtrace_options_init(&o);
    o.context = context;
    o.skip_actions = skip;
    o.stream_path = path;
    if (memtrace_record_history(&o))
        bail_out("recorder did not restart");
}

/* The history's events from index from on, in *n. */
static struct memtrace_event *history_from(size_t from, size_t *n)
{
    struct memtrace_event *ev = NULL;
    size_t all = 0;
    if (mt_recorder_history(&ev, &all) || all < from)
        bail_out("no history");
    *n = all - from;
    memmove(ev, ev + from, *n * sizeof *ev);
    return ev;
}

static size_t history_len(void)
{
    size_t n = 0;
    free(history_from(0, &n));
    return n;
}

/* Every field the allocator gives its events, as recorded and as streamed. */
static void test_event_fields(void)
{
    char path[] = "/tmp/cache-t-stream-XXXXXX";
    close(mkstemp(path));
    unlink(path); /* the name only: the recorder creates files, never reuses them */
    restart(MEMTRACE_CONTEXT_STATE, 0, path);
    struct memtrace_allocator *a = fresh(NULL);
    uint32_t source = memtrace_intern("caching_allocator");
    uint32_t cat = memtrace_intern("activations");
    memtrace_category_push("activations");
    uint64_t x = xalloc(a, 100, NULL);
    memtrace_category_pop();
    memtrace_alloc_free(a, x);
    size_t n;
    struct memtrace_event *ev = history_from(0, &n);
    is_int(4, (long long)n, "segment_alloc, alloc, free_requested, free_completed");
    if (n != 4) {
        skip(16, "unexpected history");
        unlink(path);
        free(ev);
        memtrace_alloc_destroy(a);
        return;
    }
    const struct memtrace_event *al = &ev[1], *fr = &ev[2], *fc = &ev[3];
    ok(ev[0].action == MEMTRACE_SEGMENT_ALLOC && al->action == MEMTRACE_ALLOC &&
           fr->action == MEMTRACE_FREE_REQUESTED && fc->action == MEMTRACE_FREE_COMPLETED,
       "actions in order");
    ok(al->addr == x && al->size == 512 && al->requested_size == 100,
       "alloc: address, 512 B block, 100 B requested");
    ok(al->stream == 0 && al->device == 0 && al->pool == 1 && al->aux == 0,
       "alloc: default stream, device 0, small pool");
    ok(al->source == source && al->tid == mtx_gettid(), "alloc: source and thread");
    is_int(cat, al->category, "alloc: the pushed category");
    ok(al->stack != 0, "alloc: a stack (context state)");
    ok(ev[0].time_ns > 0 && ev[0].time_ns <= al->time_ns && al->time_ns <= fr->time_ns,
       "times in order");
    for (int i = 0; i < 2; i++) {
        const struct memtrace_event *f = i ? fc : fr;
        const char *name = i ? "free_completed" : "free_requested";
        ok(f->addr == x && f->size == 512 && f->requested_size == 100 && f->pool == 1 &&
               f->source == source && f->tid == al->tid,
           "%s: the block's fields", name);
        ok(f->category == 0 && f->stack == 0, "%s: no category, no stack (context state)", name);
    }
    ok(fr->time_ns == fc->time_ns, "a block freed at once: one time for both events");

    memtrace_record_history(NULL);
    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    struct memtrace_event got;
    size_t same = 0, nread = 0;
    if (memtrace_reader_open(&r, path, &err) == 0) {
        while (memtrace_reader_next(r, &got) == 1) {
            if (nread < n && got.time_ns == ev[nread].time_ns && got.addr == ev[nread].addr &&
                got.size == ev[nread].size && got.requested_size == ev[nread].requested_size &&
                got.action == ev[nread].action && got.pool == ev[nread].pool &&
                got.tid == ev[nread].tid && (got.stack != 0) == (ev[nread].stack != 0))
                same++;
            nread++;
        }
        memtrace_reader_close(r);
    }
    ok(nread == n && same == n, "the stream has the same events (%zu of %zu read, %zu equal)",
       nread, n, same);
    unlink(path);
    free(ev);

    /* Context all: the freed pair shares the free's one stack. */
    restart(MEMTRACE_CONTEXT_ALL, 0, NULL);
    size_t from = history_len();
    x = xalloc(a, 100, NULL);
    memtrace_alloc_free(a, x);
    ev = history_from(from, &n);
    ok(n == 3 && ev[1].stack != 0 && ev[1].stack == ev[2].stack && ev[0].stack != 0,
       "context all: alloc and both free events have stacks, the pair one");
    free(ev);

    /* Skipped actions: only what is not skipped of the pair. */
    restart(MEMTRACE_CONTEXT_NONE, 1u << MEMTRACE_FREE_COMPLETED, NULL);
    from = history_len();
    x = xalloc(a, 100, NULL);
    memtrace_alloc_free(a, x);
    ev = history_from(from, &n);
    ok(n == 2 && ev[0].action == MEMTRACE_ALLOC && ev[1].action == MEMTRACE_FREE_REQUESTED,
       "free_completed skipped: alloc and free_requested");
    free(ev);
    restart(MEMTRACE_CONTEXT_NONE, 1u << MEMTRACE_FREE_COMPLETED | 1u << MEMTRACE_FREE_REQUESTED,
            NULL);
    from = history_len();
    x = xalloc(a, 100, NULL);
    memtrace_alloc_free(a, x);
    ev = history_from(from, &n);
    ok(n == 1 && ev[0].action == MEMTRACE_ALLOC, "both free actions skipped: the alloc alone");
    free(ev);
    memtrace_alloc_destroy(a);
}

int main(void)
{
    struct memtrace_options o;
    if (memtrace_device_open_host(&dev, (uint64_t)1 << 30))
        skip_all("no host device");
    memtrace_options_init(&o);
    o.context = MEMTRACE_CONTEXT_NONE;
    if (memtrace_record_history(&o))
        diag("recorder did not start");
    test_rounding();
    test_pools();
    test_split_merge();
    test_max_split();
    test_pending_free();
    test_empty_cache();
    test_gc();
    test_expandable();
    test_oom();
    if (memtrace_is_recording())
        test_recorded();
    test_event_fields();
    memtrace_record_history(NULL);
    memtrace_device_close(dev);
    done_testing();
    return exit_status();
}
