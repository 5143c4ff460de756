/* cache_stats.c: the caching allocator's statistics and its memory_summary table. */
#include <stdio.h>
#include <string.h>

#include "cache_impl.h"

MEMTRACE_API int memtrace_alloc_get_stats(struct memtrace_allocator *a,
                                          struct memtrace_alloc_stats *out)
{
    if (!a || !out)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&a->lock);
    *out = a->stats;
    pthread_mutex_unlock(&a->lock);
    return 0;
}

#define FOR_EACH_ARRAY(st, X)                                                                      \
    X((st)->allocation)                                                                            \
    X((st)->segment)                                                                               \
    X((st)->active)                                                                                \
    X((st)->inactive_split)                                                                        \
    X((st)->allocated_bytes)                                                                       \
    X((st)->reserved_bytes)                                                                        \
    X((st)->active_bytes)                                                                          \
    X((st)->inactive_split_bytes)                                                                  \
    X((st)->requested_bytes)

MEMTRACE_API int memtrace_alloc_reset_peak(struct memtrace_allocator *a)
{
    if (!a)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&a->lock);
#define RESET_PEAK(arr)                                                                            \
    for (int i = 0; i < MEMTRACE_STAT_TYPES; i++)                                                  \
        arr[i].peak = arr[i].current;
    FOR_EACH_ARRAY(&a->stats, RESET_PEAK)
#undef RESET_PEAK
    pthread_mutex_unlock(&a->lock);
    return 0;
}

MEMTRACE_API int memtrace_alloc_reset_accumulated(struct memtrace_allocator *a)
{
    if (!a)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&a->lock);
#define RESET_ACC(arr)                                                                             \
    for (int i = 0; i < MEMTRACE_STAT_TYPES; i++)                                                  \
        arr[i].allocated = arr[i].freed = 0;
    FOR_EACH_ARRAY(&a->stats, RESET_ACC)
#undef RESET_ACC
    a->stats.num_alloc_retries = 0;
    a->stats.num_ooms = 0;
    a->stats.num_sync_all_streams = 0;
    a->stats.num_device_alloc = 0;
    a->stats.num_device_free = 0;
    pthread_mutex_unlock(&a->lock);
    return 0;
}

/* Bytes scaled to the largest unit that keeps the figure readable, as the table
 * PyTorch prints. */
static void fmt_bytes(char *out, size_t size, int64_t v)
{
    static const char *unit[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    int64_t mag = v < 0 ? -v : v;
    while (u < 5 && mag >= 768 * 1024) {
        v /= 1024;
        mag /= 1024;
        u++;
    }
    if (u == 0 && mag >= 1024 * 8) {
        v /= 1024;
        u = 1;
    }
    snprintf(out, size, "%7lld %s", (long long)v, unit[u]);
}

static void fmt_count(char *out, size_t size, int64_t v)
{
    snprintf(out, size, "%11lld", (long long)v);
}

struct buf {
    char *p;
    size_t size, len;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(b->len < b->size ? b->p + b->len : NULL, b->len < b->size ? b->size - b->len : 0,
                  fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len += (size_t)n;
}

/* Every line of the table is as wide as a row of figures: 79 columns between the
 * outer bars. */
#define INNER 79

static void rule(struct buf *b, char c)
{
    char line[INNER + 1];
    memset(line, c, INNER);
    line[INNER] = '\0';
    put(b, "|%s|\n", line);
}

static void text_row(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_row(struct buf *b, const char *fmt, ...)
{
    char t[INNER - 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    put(b, "| %-*s |\n", INNER - 2, t);
}

static void rows(struct buf *b, const char *name, const struct memtrace_stat *arr, int bytes)
{
    static const char *sub[] = {"", "      from small pool", "      from large pool"};
    for (int i = 0; i < MEMTRACE_STAT_TYPES; i++) {
        char c[4][24];
        int64_t v[4] = {arr[i].current, arr[i].peak, arr[i].allocated, arr[i].freed};
        for (int k = 0; k < 4; k++) {
            if (bytes)
                fmt_bytes(c[k], sizeof(c[k]), v[k]);
            else
                fmt_count(c[k], sizeof(c[k]), v[k]);
        }
        put(b, "| %-21s | %s | %s | %s | %s |\n", i ? sub[i] : name, c[0], c[1], c[2], c[3]);
    }
    rule(b, '-');
}

MEMTRACE_API int memtrace_alloc_summary(struct memtrace_allocator *a, char *out, size_t size)
{
    struct memtrace_alloc_stats st;
    struct buf b = {out, size, 0};
    if (!a || (!out && size))
        return MEMTRACE_EINVAL;
    memtrace_alloc_get_stats(a, &st);
    if (size)
        out[0] = 0;
    rule(&b, '=');
    static const char title[] = "memtrace caching allocator memory summary";
    text_row(&b, "%*s", (int)(INNER - 2 + sizeof title - 1) / 2, title);
    rule(&b, '-');
    text_row(&b, "device %d    OOMs: %lld    allocation retries: %lld    syncs: %lld", a->device,
             (long long)st.num_ooms, (long long)st.num_alloc_retries,
             (long long)st.num_sync_all_streams);
    rule(&b, '=');
    put(&b, "|        Metric         |  Cur Usage  | Peak Usage  |  Tot Alloc  |  Tot Freed  |\n");
    rule(&b, '-');
    rows(&b, "Allocated memory", st.allocated_bytes, 1);
    rows(&b, "Active memory", st.active_bytes, 1);
    rows(&b, "Requested memory", st.requested_bytes, 1);
    rows(&b, "Reserved memory", st.reserved_bytes, 1);
    rows(&b, "Non-releasable memory", st.inactive_split_bytes, 1);
    rows(&b, "Allocations", st.allocation, 0);
    rows(&b, "Active allocs", st.active, 0);
    rows(&b, "Reserved segments", st.segment, 0);
    rows(&b, "Non-releasable allocs", st.inactive_split, 0);
    text_row(&b, "device calls: %lld alloc, %lld free", (long long)st.num_device_alloc,
             (long long)st.num_device_free);
    rule(&b, '=');
    return (int)b.len;
}
