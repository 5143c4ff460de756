/* cache_random-t: random alloc/free/record_stream on 3 streams against a reference
 * model; the allocator's blocks never overlap, lie in live segments, and its stats
 * equal the model at every step. */
#include <stdlib.h>

#include "cache_impl.h"
#include "tests/rng.h"
#include "tests/tap.h"

#define MB       ((uint64_t)1 << 20)
#define MAX_LIVE 256
#define OPS      3000

struct live {
    uint64_t addr, size, req;
};

struct segs {
    uint64_t addr[4096], size[4096];
    int n;
};

static void seg_sink(void *ctx, const struct memtrace_segment *seg)
{
    struct segs *s = ctx;
    if (s->n < 4096) {
        s->addr[s->n] = seg->addr;
        s->size[s->n++] = seg->total_size;
    }
}

static int cmp_live(const void *x, const void *y)
{
    const struct live *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static uint64_t rng_state;
static uint64_t rnd(void)
{
    return test_rand(&rng_state);
}

static int run_seed(struct memtrace_device *d, uint64_t seed, const char *conf)
{
    struct memtrace_allocator *a;
    struct memtrace_stream *st[3];
    struct live live[MAX_LIVE], sorted[MAX_LIVE];
    static struct segs segs;
    struct memtrace_alloc_stats s;
    int n = 0, bad = 0;
    int64_t peak_alloc = 0;
    rng_state = seed * 0x9e3779b97f4a7c15ULL + 1;
    memtrace_alloc_create(&a, d);
    if (conf)
        memtrace_alloc_configure(a, conf, NULL);
    st[0] = NULL;
    memtrace_stream_create(d, &st[1]);
    memtrace_stream_create(d, &st[2]);
    for (int op = 0; op < OPS && !bad; op++) {
        uint64_t r = rnd() % 100, sumsz = 0, sumreq = 0;
        if ((r < 55 && n < MAX_LIVE) || n == 0) {
            uint64_t kind = rnd() % 100, size, addr, bs = 0;
            size = kind < 70   ? rnd() % MB + 1
                   : kind < 95 ? rnd() % (10 * MB) + 1
                               : rnd() % (40 * MB) + 1;
            if (memtrace_alloc_malloc(a, size, st[rnd() % 3], &addr)) {
                diag("seed %llu op %d: malloc %llu failed", (unsigned long long)seed, op,
                     (unsigned long long)size);
                bad = 1;
                break;
            }
            memtrace_alloc_block_info(a, addr, &bs, NULL);
            live[n].addr = addr;
            live[n].size = bs;
            live[n++].req = size;
        } else if (r < 90) {
            int i = (int)(rnd() % (uint64_t)n);
            memtrace_alloc_free(a, live[i].addr);
            live[i] = live[--n];
        } else {
            int i = (int)(rnd() % (uint64_t)n);
            memtrace_alloc_record_stream(a, live[i].addr, st[rnd() % 3]);
        }
        memcpy(sorted, live, sizeof(live[0]) * (size_t)n);
        qsort(sorted, (size_t)n, sizeof(sorted[0]), cmp_live);
        for (int i = 0; i + 1 < n; i++)
            if (sorted[i].addr + sorted[i].size > sorted[i + 1].addr) {
                diag("op %d: blocks overlap at %llx", op, (unsigned long long)sorted[i].addr);
                bad = 1;
            }
        segs.n = 0;
        mt_alloc_provide_state(a, seg_sink, &segs);
        for (int i = 0; i < n; i++) {
            int in = 0;
            for (int k = 0; k < segs.n && !in; k++)
                in = live[i].addr >= segs.addr[k] &&
                     live[i].addr + live[i].size <= segs.addr[k] + segs.size[k];
            if (!in) {
                diag("op %d: block %llx outside every segment", op,
                     (unsigned long long)live[i].addr);
                bad = 1;
            }
            sumsz += live[i].size;
            sumreq += live[i].req;
        }
        memtrace_alloc_get_stats(a, &s);
        if (s.allocated_bytes[0].current != (int64_t)sumsz ||
            s.requested_bytes[0].current != (int64_t)sumreq || s.allocation[0].current != n ||
            s.active[0].current < n) {
            diag("op %d: stats %lld/%lld/%lld, model %llu/%llu/%d", op,
                 (long long)s.allocated_bytes[0].current, (long long)s.requested_bytes[0].current,
                 (long long)s.allocation[0].current, (unsigned long long)sumsz,
                 (unsigned long long)sumreq, n);
            bad = 1;
        }
        if ((int64_t)sumsz > peak_alloc)
            peak_alloc = (int64_t)sumsz;
    }
    while (n > 0)
        memtrace_alloc_free(a, live[--n].addr);
    memtrace_stream_sync(d, st[1]);
    memtrace_stream_sync(d, st[2]);
    memtrace_alloc_get_stats(a, &s);
    ok(!bad, "seed %llu%s%s: model holds at every step", (unsigned long long)seed, conf ? " " : "",
       conf ? conf : "");
    ok(s.reserved_bytes[0].peak <= 3 * peak_alloc + 3 * 22 * (int64_t)MB,
       "seed %llu: reserved peak %lld bounded (allocated peak %lld)", (unsigned long long)seed,
       (long long)s.reserved_bytes[0].peak, (long long)peak_alloc);
    memtrace_alloc_empty_cache(a);
    memtrace_alloc_get_stats(a, &s);
    is_int(0, s.reserved_bytes[0].current, "seed %llu: all returned", (unsigned long long)seed);
    is_int(0, s.active[0].current, "seed %llu: nothing active", (unsigned long long)seed);
    is_int(0, s.segment[0].current, "seed %llu: no segment left", (unsigned long long)seed);
    ok((conf && strstr(conf, "expandable")) || s.num_device_alloc == s.num_device_free,
       "seed %llu: every device allocation freed (%lld/%lld)", (unsigned long long)seed,
       (long long)s.num_device_alloc, (long long)s.num_device_free);
    memtrace_alloc_destroy(a);
    memtrace_stream_destroy(st[1]);
    memtrace_stream_destroy(st[2]);
    return bad;
}

int main(void)
{
    struct memtrace_device *d;
    /* An expandable segment reserves the device's whole size at once, and valgrind
     * refuses a 64 GiB reservation; the seeds reach about 1.3 GB. */
    uint64_t capacity =
        getenv("MEMTRACE_VALGRIND") && *getenv("MEMTRACE_VALGRIND") ? 4ull << 30 : 64ull << 30;
    if (memtrace_device_open_host(&d, capacity))
        skip_all("no host device");
    for (uint64_t seed = 1; seed <= 4; seed++)
        run_seed(d, seed, NULL);
    run_seed(d, 5, "max_split_size_mb:24");
    run_seed(d, 6, "expandable_segments:True");
    run_seed(d, 7, "roundup_power2_divisions:4,garbage_collection_threshold:0.01");
    memtrace_device_close(d);
    done_testing();
    return exit_status();
}
