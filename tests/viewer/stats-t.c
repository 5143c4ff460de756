/* stats-t.c: `memtrace stats` against statistics recomputed here from scratch.
 *
 * Random files (several seeds) on two devices: segments of the small and the large
 * pool, blocks placed inside them, free_requested before some frees, expandable
 * pieces mapped and unmapped in part, OOM events. After every event the test
 * recomputes each figure from its plain lists of what is live (no running sums),
 * and takes peaks and totals from one event to the next; then it compares every key
 * of --json, with and without --device. */
#include "config.h"

#include <inttypes.h>

#include "cli-util.h"
#include "rng.h"

#define M (1024ull * 1024ull)

static uint64_t rng_state;

static uint64_t below(uint64_t n)
{
    uint64_t x = test_rand(&rng_state);
    return x % n;
}

struct seg {
    uint64_t addr, size, bump;
    int32_t pool, device;
    int mapped;
};

struct blk {
    uint64_t addr, size, req;
    int32_t pool, device;
    int pending;
};

static struct memtrace_event *evs;
static size_t nev, cap;

static struct memtrace_event *push(int action)
{
    if (nev == cap) {
        cap = cap ? cap * 2 : 1024;
        evs = realloc(evs, cap * sizeof(*evs));
    }
    struct memtrace_event *e = &evs[nev++];
    memset(e, 0, sizeof(*e));
    e->time_ns = 1000000 + 10 * nev;
    e->action = (uint8_t)action;
    e->tid = 5;
    return e;
}

static void generate(size_t n)
{
    struct seg segs[256];
    struct blk blks[1024];
    size_t ns = 0, nb = 0;
    uint64_t next = 0x100000000ull;
    nev = 0;
    while (nev < n) {
        unsigned op = (unsigned)below(100);
        if (op < 12 && ns < 256) {
            int large = (int)below(2), map = large && below(3) == 0;
            struct seg s = {next, large ? 20 * M : 2 * M, 0, large ? 2 : 1, (int32_t)below(2), map};
            next += 64 * M;
            struct memtrace_event *e = push(map ? MEMTRACE_SEGMENT_MAP : MEMTRACE_SEGMENT_ALLOC);
            e->addr = s.addr;
            e->size = s.size;
            e->device = s.device;
            e->pool = s.pool;
            segs[ns++] = s;
        } else if (op < 50 && ns && nb < 1024) {
            struct seg *s = &segs[below(ns)];
            uint64_t size = s->pool == 1 ? 512 * (1 + below(64)) : M * (1 + below(4));
            if (s->bump + size > s->size)
                continue;
            struct memtrace_event *e = push(MEMTRACE_ALLOC);
            e->addr = s->addr + s->bump;
            e->size = size;
            e->requested_size = size - below(512);
            e->device = s->device;
            e->pool = s->pool;
            blks[nb++] = (struct blk){e->addr, size, e->requested_size, s->pool, s->device, 0};
            s->bump += size;
        } else if (op < 62 && nb) {
            struct blk *b = &blks[below(nb)];
            struct memtrace_event *e = push(MEMTRACE_FREE_REQUESTED);
            e->addr = b->addr;
            e->size = b->size;
            e->device = b->device;
            e->pool = b->pool;
            b->pending = 1;
        } else if (op < 85 && nb) {
            size_t k = below(nb);
            struct memtrace_event *e = push(MEMTRACE_FREE_COMPLETED);
            e->addr = blks[k].addr;
            e->size = blks[k].size;
            e->device = blks[k].device;
            e->pool = blks[k].pool;
            blks[k] = blks[--nb];
        } else if (op < 93 && ns) {
            /* Free a segment with no live block; unmap the first half of an empty
             * piece (what is left stays mapped at the half). */
            size_t k = below(ns);
            int used = 0;
            for (size_t i = 0; i < nb; i++)
                used |= blks[i].addr >= segs[k].addr && blks[i].addr < segs[k].addr + segs[k].size;
            if (used)
                continue;
            struct seg *s = &segs[k];
            int half = s->mapped && below(2);
            struct memtrace_event *e =
                push(s->mapped ? MEMTRACE_SEGMENT_UNMAP : MEMTRACE_SEGMENT_FREE);
            e->addr = s->addr;
            e->size = half ? s->size / 2 : s->size;
            e->device = s->device;
            e->pool = s->pool;
            if (half) {
                s->addr += s->size / 2;
                s->size /= 2;
                s->bump = 0;
            } else {
                segs[k] = segs[--ns];
            }
        } else if (op < 96) {
            struct memtrace_event *e = push(MEMTRACE_OOM);
            e->size = 1ull << 34;
            e->device = (int32_t)below(2);
            e->pool = 2;
        }
    }
}

/* ---- the reference ---- */

enum {
    ALLOCATION,
    SEGMENT,
    ACTIVE,
    ALLOCATED_BYTES,
    RESERVED_BYTES,
    ACTIVE_BYTES,
    SPLIT_BYTES,
    REQUESTED_BYTES,
    NSTAT
};
static const char *const names[NSTAT] = {"allocation",           "segment",        "active",
                                         "allocated_bytes",      "reserved_bytes", "active_bytes",
                                         "inactive_split_bytes", "requested_bytes"};
static const char *const pools[3] = {"all", "small_pool", "large_pool"};

struct fig {
    uint64_t cur, peak, alloc, freed;
};

struct ref {
    struct fig f[NSTAT][3];
    uint64_t ooms, dev_alloc, dev_free;
};

/* Current figures from the live lists. */
static void now(const struct seg *segs, size_t ns, const struct blk *blks, size_t nb,
                uint64_t cur[NSTAT][3])
{
    memset(cur, 0, sizeof(uint64_t) * NSTAT * 3);
    for (size_t i = 0; i < nb; i++) {
        const struct blk *b = &blks[i];
        for (int p = 0; p < 3; p++) {
            if (p && p != b->pool)
                continue;
            cur[ACTIVE][p]++;
            cur[ACTIVE_BYTES][p] += b->size;
            if (!b->pending) {
                cur[ALLOCATION][p]++;
                cur[ALLOCATED_BYTES][p] += b->size;
                cur[REQUESTED_BYTES][p] += b->req;
            }
        }
    }
    for (size_t k = 0; k < ns; k++) {
        const struct seg *s = &segs[k];
        uint64_t act = 0, n = 0;
        for (size_t i = 0; i < nb; i++)
            if (blks[i].addr >= s->addr && blks[i].addr < s->addr + s->size)
                act += blks[i].size, n++;
        for (int p = 0; p < 3; p++) {
            if (p && p != s->pool)
                continue;
            cur[SEGMENT][p]++;
            cur[RESERVED_BYTES][p] += s->size;
            if (n)
                cur[SPLIT_BYTES][p] += s->size - act;
        }
    }
}

static void reference(int device, struct ref *r)
{
    static struct seg segs[512];
    static struct blk blks[2048];
    size_t ns = 0, nb = 0;
    uint64_t prev[NSTAT][3] = {{0}}, cur[NSTAT][3];
    memset(r, 0, sizeof(*r));
    for (size_t i = 0; i < nev; i++) {
        const struct memtrace_event *e = &evs[i];
        int mine = device < 0 || e->device == device;
        switch (e->action) {
        case MEMTRACE_SEGMENT_ALLOC:
        case MEMTRACE_SEGMENT_MAP:
            if (mine) {
                segs[ns++] = (struct seg){e->addr, e->size, 0, e->pool, e->device, 0};
                r->dev_alloc++;
            }
            break;
        case MEMTRACE_SEGMENT_FREE:
        case MEMTRACE_SEGMENT_UNMAP:
            for (size_t k = 0; k < ns; k++)
                if (segs[k].addr == e->addr) {
                    r->dev_free++;
                    if (e->action == MEMTRACE_SEGMENT_UNMAP && e->size < segs[k].size) {
                        segs[k].addr += e->size;
                        segs[k].size -= e->size;
                    } else {
                        segs[k] = segs[--ns];
                    }
                    break;
                }
            break;
        case MEMTRACE_ALLOC:
            if (mine)
                blks[nb++] =
                    (struct blk){e->addr, e->size, e->requested_size, e->pool, e->device, 0};
            break;
        case MEMTRACE_FREE_REQUESTED:
            for (size_t k = 0; k < nb; k++)
                if (blks[k].addr == e->addr)
                    blks[k].pending = 1;
            break;
        case MEMTRACE_FREE_COMPLETED:
            for (size_t k = 0; k < nb; k++)
                if (blks[k].addr == e->addr) {
                    blks[k] = blks[--nb];
                    break;
                }
            break;
        case MEMTRACE_OOM:
            r->ooms += mine;
            break;
        }
        now(segs, ns, blks, nb, cur);
        for (int s = 0; s < NSTAT; s++)
            for (int p = 0; p < 3; p++) {
                struct fig *f = &r->f[s][p];
                f->cur = cur[s][p];
                if (cur[s][p] > f->peak)
                    f->peak = cur[s][p];
                if (cur[s][p] > prev[s][p])
                    f->alloc += cur[s][p] - prev[s][p];
                else
                    f->freed += prev[s][p] - cur[s][p];
                prev[s][p] = cur[s][p];
            }
    }
}

static void write_file(const char *path)
{
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_meta(w, "{\"host\": \"h\", \"pid\": 1, \"allocator_settings\": "
                                "{\"max_split_size_mb\": 64, \"expandable_segments\": false}}"),
              "mt_writer_meta");
    for (size_t k = 0; k < nev; k += 500)
        cli_check(mt_writer_events(w, evs + k, nev - k < 500 ? nev - k : 500), "mt_writer_events");
    cli_check(mt_writer_end(w, "{\"dropped\": 0}"), "mt_writer_end");
}

static void compare(const char *path, int device, uint64_t seed)
{
    struct ref r;
    reference(device, &r);
    char dev[16];
    snprintf(dev, sizeof(dev), "%d", device);
    const char *args[] = {"stats", path, "--json", device >= 0 ? "--device" : NULL, dev, NULL};
    struct cli_out o = cli_run(args);
    is_int(0, o.status, "seed %llu device %d: exits 0", (unsigned long long)seed, device);
    is_string("", o.err, "nothing on stderr");
    json_t *j = cli_json(&o);
    int bad = 0, checked = 0;
    for (int s = 0; s < NSTAT; s++)
        for (int p = 0; p < 3; p++) {
            static const char *const field[4] = {"current", "peak", "allocated", "freed"};
            const struct fig *f = &r.f[s][p];
            const uint64_t want[4] = {f->cur, f->peak, f->alloc, f->freed};
            for (int k = 0; k < 4; k++) {
                char key[96];
                snprintf(key, sizeof(key), "%s.%s.%s", names[s], pools[p], field[k]);
                json_t *v = json_object_get(j, key);
                checked++;
                if (!json_is_integer(v) || (uint64_t)json_integer_value(v) != want[k]) {
                    bad++;
                    diag("%s: got %lld, want %" PRIu64, key,
                         v ? (long long)json_integer_value(v) : -1, want[k]);
                }
            }
        }
    is_int(NSTAT * 3 * 4, checked, "all %d keys", NSTAT * 3 * 4);
    is_int(0, bad, "every statistic matches the reference");
    is_int((long long)r.ooms, cli_int(j, "num_ooms"), "num_ooms");
    is_int((long long)r.dev_alloc, cli_int(j, "num_device_alloc"), "num_device_alloc");
    is_int((long long)r.dev_free, cli_int(j, "num_device_free"), "num_device_free");
    is_int(64, cli_int(j, "allocator_settings.max_split_size_mb"), "settings from the metadata");
    diag("peak allocated %" PRIu64 ", peak inactive split %" PRIu64 ", %" PRIu64 " segments",
         r.f[ALLOCATED_BYTES][0].peak, r.f[SPLIT_BYTES][0].peak, r.dev_alloc);
    json_decref(j);
    cli_free(&o);
}

/* A file by hand: a large segment with a pending free, what the text shows. */
static void by_hand(void)
{
    nev = 0;
    struct memtrace_event *e = push(MEMTRACE_SEGMENT_ALLOC);
    e->addr = 0x1000000;
    e->size = 20 * M;
    e->pool = 2;
    e = push(MEMTRACE_ALLOC);
    e->addr = 0x1000000;
    e->size = 4 * M;
    e->requested_size = 4 * M - 100;
    e->pool = 2;
    e = push(MEMTRACE_ALLOC);
    e->addr = 0x1000000 + 4 * M;
    e->size = 2 * M;
    e->requested_size = 2 * M;
    e->pool = 2;
    e = push(MEMTRACE_FREE_REQUESTED);
    e->addr = 0x1000000;
    e->size = 4 * M;
    e->pool = 2;
    const char *path = cli_path("hand.memtrace");
    write_file(path);
    struct cli_out o = cli_run((const char *const[]){"stats", path, "--bytes", NULL});
    is_int(0, o.status, "by hand: exits 0");
    char buf[256];
    /* Allocated: 6 MiB at the peak, 2 MiB after the free request; active stays 6. */
    is_string(
        "| Allocated memory       |    2097152 B |    6291456 B |    6291456 B |    4194304 B |",
        cli_line(o.out, "| Allocated memory", buf, sizeof(buf)), "by hand: allocated");
    is_string(
        "| Active memory          |    6291456 B |    6291456 B |    6291456 B |          0 B |",
        cli_line(o.out, "| Active memory", buf, sizeof(buf)), "by hand: active");
    is_string(
        "| Non-releasable memory  |   14680064 B |   16777216 B |   16777216 B |    2097152 B |",
        cli_line(o.out, "| Non-releasable memory", buf, sizeof(buf)),
        "by hand: 20 MiB less the active blocks");
    is_string(
        "| Requested memory       |    2097152 B |    6291356 B |    6291356 B |    4194204 B |",
        cli_line(o.out, "| Requested memory", buf, sizeof(buf)), "by hand: requested");
    cli_free(&o);
}

int main(void)
{
    cli_scratch();
    static const uint64_t seeds[] = {11, 2024, 99991};
    for (size_t k = 0; k < sizeof(seeds) / sizeof(seeds[0]); k++) {
        rng_state = seeds[k];
        generate(3000);
        const char *path = cli_path("stats.memtrace");
        write_file(path);
        compare(path, -1, seeds[k]);
        compare(path, 1, seeds[k]);
    }
    by_hand();
    free(evs);
    done_testing();
    return exit_status();
}
