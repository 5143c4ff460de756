/* cache_impl.h: internals of the caching allocator shared by cache.c (policy),
 * cache_config.c (settings) and cache_stats.c (statistics, summary). */
#ifndef MEMTRACE_CACHE_IMPL_H
#define MEMTRACE_CACHE_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "memtrace.h"
#include "memtrace_alloc.h"
#include "memtrace_device.h"
#include "mtx/util.h"

#define MT_KB              ((uint64_t)1024)
#define MT_MB              (MT_KB * 1024)
#define MT_MIN_BLOCK       ((uint64_t)512)       /* every size is a multiple */
#define MT_SMALL_SIZE      MT_MB                 /* largest small-pool request */
#define MT_SMALL_BUFFER    (2 * MT_MB)           /* small-pool segment */
#define MT_LARGE_BUFFER    (20 * MT_MB)          /* large-pool segment */
#define MT_MIN_LARGE_ALLOC (10 * MT_MB)          /* from here, one segment per request */
#define MT_ROUND_LARGE     (2 * MT_MB)           /* ... rounded to this */
#define MT_DIV_INTERVALS   16                    /* power-of-two intervals from 1 MiB */
#define MT_NO_SPLIT_LIMIT  ((uint64_t)INT64_MAX) /* max_split_size when unset */

enum { MT_POOL_SMALL = 0, MT_POOL_LARGE = 1, MT_POOLS = 2 };

/* Keys of struct mt_alloc_settings, as bits of set_mask. */
enum {
    MT_KEY_MAX_SPLIT = 1u << 0,
    MT_KEY_ROUNDUP = 1u << 1,
    MT_KEY_GC = 1u << 2,
    MT_KEY_EXPANDABLE = 1u << 3,
    MT_KEY_RELEASE_LOCK = 1u << 4,
    MT_KEY_PINNED = 1u << 5,
    MT_KEY_OOM_SNAPSHOT = 1u << 6
};

struct mt_alloc_settings {
    uint64_t max_split_size;
    unsigned divisions[MT_DIV_INTERVALS]; /* 0 or 1: plain 512 B rounding */
    double gc_threshold;                  /* 0: off */
    int expandable;
    int release_lock_on_cudamalloc;
    int pinned_use_cuda_host_register;
    char oom_snapshot[512];
    unsigned set_mask; /* keys given explicitly */
};

void mt_alloc_settings_default(struct mt_alloc_settings *s);
/* Parses conf on top of *s; on error leaves *s unchanged, fills err and returns
 * MEMTRACE_ECONFIG. what names the source in messages ("MEMTRACE_ALLOC_CONF"). */
int mt_alloc_config_parse(const char *conf, struct mt_alloc_settings *s,
                          struct memtrace_alloc_config_error *err);
/* Copies the keys set in src->set_mask into dst. */
void mt_alloc_settings_merge(struct mt_alloc_settings *dst, const struct mt_alloc_settings *src);
/* Writes s as JSON; returns the length (it may exceed size, as snprintf). */
size_t mt_alloc_settings_to_json(const struct mt_alloc_settings *s, char *buf, size_t size);
/* The settings given through memtrace_alloc_config_set() so far (process-wide). */
void mt_alloc_api_settings(struct mt_alloc_settings *out);
void mt_alloc_set_error_text(const char *text);

struct mt_segment;
struct mt_desc_chunk;

struct mt_block {
    uint64_t addr;
    uint64_t size;
    uint64_t requested;
    uint64_t stream;
    struct mt_segment *seg;
    struct mt_block *prev, *next;     /* address neighbours within the segment */
    struct mt_block *left, *right;    /* free tree (treap) */
    struct mt_block *hnext;           /* address hash chain, while allocated */
    struct memtrace_stream **streams; /* other streams it was used on */
    uint32_t nstreams, capstreams;
    uint32_t pending; /* events still to complete */
    uint32_t stack;
    uint64_t last_used; /* gc clock at free */
    uint64_t prio;      /* treap priority, fixed while in the tree */
    uint8_t allocated;  /* handed out (or pending free) */
    uint8_t in_tree;
    uint8_t pool;
};

struct mt_segment {
    uint64_t addr;
    uint64_t size;  /* mapped bytes for expandable segments */
    uint64_t vsize; /* reserved bytes (expandable), else size */
    uint64_t stream;
    struct mt_block *first;
    struct mt_segment *prev, *next;
    uint32_t stack;
    uint8_t pool;
    uint8_t expandable;
};

struct mt_pending {
    struct memtrace_devevent *ev;
    struct mt_block *block;
};

struct memtrace_allocator {
    pthread_mutex_t lock;
    struct memtrace_device *dev;
    int device;
    uint64_t capacity;
    uint64_t granularity;
    struct mt_alloc_settings settings;
    struct mt_block *tree[MT_POOLS];
    struct mt_block **buckets;
    size_t nbuckets, nhashed;
    struct mt_segment *segments;
    struct mt_block *free_blocks;     /* recycled descriptors */
    struct mt_segment *free_segments; /* recycled descriptors */
    struct mtx_arena arena;            /* bump pointer inside the newest chunk */
    struct mt_desc_chunk *chunks;     /* every descriptor chunk, freed at destroy */
    struct mt_pending *pending;
    size_t npending, cappending;
    uint64_t gc_clock;
    struct memtrace_alloc_stats stats;
    uint32_t source;
    int provider;
    struct memtrace_allocator *reg_next; /* registry of live allocators */
};

/* The stat arrays are indexed 0 (all), 1 + pool. Inline: it runs ten times per
 * alloc+free pair. */
static inline void mt_stat_one(struct memtrace_stat *s, int64_t delta)
{
    s->current += delta;
    if (delta > 0) {
        s->allocated += delta;
        if (s->current > s->peak)
            s->peak = s->current;
    } else {
        s->freed -= delta;
    }
}

static inline void mt_stat_update(struct memtrace_stat *arr, int pool, int64_t delta)
{
    mt_stat_one(&arr[MEMTRACE_STAT_ALL], delta);
    mt_stat_one(&arr[1 + pool], delta);
}

/* cache.c: the state provider (tests call it directly). */
void mt_alloc_provide_state(void *ctx, memtrace_segment_sink sink, void *sink_ctx);

/* cache.c: used by cache_config.c to apply API settings to live allocators. */
void mt_alloc_apply_api_settings(const struct mt_alloc_settings *api);

#endif
