/* device_host.c: the host backend, a simulated device in host memory.
 *
 * Capacity is a hard budget: every allocation and every mapped granule of virtual
 * memory is counted against it, so the caching allocator meets a real
 * out-of-memory. Memory is real (mmap), so kernels read and write it through the
 * device address. A stream is an in-order queue served by its own worker thread;
 * an event is a pair of generations (recorded, completed): recording enqueues a
 * marker that completes its generation, waiting enqueues an item that blocks the
 * worker until the recorded generation has completed. This backend is never in an
 * interposed path, so it may use libc malloc. */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "device_impl.h"
#include "mtx/util.h"

#define HOST_GRANULARITY ((size_t)2 << 20)
#define HOST_BUCKETS     4096

/* ---- work queue ---- */

struct workq_item {
    memtrace_kernel_fn fn;
    void *arg;
    struct workq_item *next;
};

struct mt_workq {
    pthread_mutex_t lock;
    pthread_cond_t work; /* items arrived, or stop */
    pthread_cond_t done; /* an item finished */
    struct workq_item *head, *tail;
    uint64_t pushed, finished;
    int stop;
    pthread_t thread;
};

static void *workq_main(void *p)
{
    struct mt_workq *q = p;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (!q->head && !q->stop)
            pthread_cond_wait(&q->work, &q->lock);
        if (!q->head)
            break;
        struct workq_item *it = q->head;
        q->head = it->next;
        if (!q->head)
            q->tail = NULL;
        pthread_mutex_unlock(&q->lock);
        it->fn(it->arg);
        free(it);
        pthread_mutex_lock(&q->lock);
        q->finished++;
        pthread_cond_broadcast(&q->done);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

int mt_workq_create(struct mt_workq **out)
{
    struct mt_workq *q = calloc(1, sizeof(*q));
    if (!q)
        return MEMTRACE_ENOMEM;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->done, NULL);
    if (pthread_create(&q->thread, NULL, workq_main, q) != 0) {
        pthread_cond_destroy(&q->done);
        pthread_cond_destroy(&q->work);
        pthread_mutex_destroy(&q->lock);
        free(q);
        return MEMTRACE_ENOMEM;
    }
    *out = q;
    return 0;
}

void mt_workq_destroy(struct mt_workq *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    q->stop = 1;
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->thread, NULL);
    pthread_cond_destroy(&q->done);
    pthread_cond_destroy(&q->work);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

int mt_workq_push(struct mt_workq *q, memtrace_kernel_fn fn, void *arg)
{
    struct workq_item *it = malloc(sizeof(*it));
    if (!it)
        return MEMTRACE_ENOMEM;
    it->fn = fn;
    it->arg = arg;
    it->next = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    q->pushed++;
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->lock);
    return 0;
}

void mt_workq_sync(struct mt_workq *q)
{
    pthread_mutex_lock(&q->lock);
    uint64_t target = q->pushed;
    while (q->finished < target)
        pthread_cond_wait(&q->done, &q->lock);
    pthread_mutex_unlock(&q->lock);
}

/* ---- device state ---- */

struct host_alloc {
    uint64_t addr;
    size_t size;
    struct host_alloc *next;
};

struct host_resv {
    uint64_t addr;
    size_t size;
    size_t map_len; /* bytes the mmap really spans (alignment slack included) */
    void *map_base;
    uint8_t *mapped; /* one flag per granule */
    struct host_resv *next;
};

struct host_dev {
    pthread_mutex_t lock; /* memory accounting, tables, default stream creation */
    uint64_t capacity, used;
    struct host_alloc *buckets[HOST_BUCKETS];
    struct host_resv *resvs;
    struct mt_workq *defq;
};

static atomic_uint_fast64_t host_next_stream_id = 1;

static size_t bucket_of(uint64_t addr)
{
    return (size_t)(mtx_hash_u64(addr) % HOST_BUCKETS);
}

int mt_device_host_open_capacity(struct memtrace_device *d, uint64_t capacity)
{
    struct host_dev *h = calloc(1, sizeof(*h));
    if (!h)
        return MEMTRACE_ENOMEM;
    pthread_mutex_init(&h->lock, NULL);
    h->capacity = capacity;
    d->impl = h;
    d->granularity = HOST_GRANULARITY;
    mtx_format(d->name, sizeof(d->name), "host (%llu bytes)", (unsigned long long)capacity);
    return 0;
}

static int host_open(struct memtrace_device *d, int index)
{
    uint64_t cap = 8ULL << 30;
    const char *env = getenv("MEMTRACE_HOST_CAPACITY");
    if (env && mt_device_parse_size(env, &cap) != 0) {
        mtx_log("MEMTRACE_HOST_CAPACITY=\"%s\" is not a size: give bytes with an optional K, M "
               "or G suffix, e.g. 8G",
               env);
        return MEMTRACE_ECONFIG;
    }
    if (env && cap == 0) {
        mtx_log("MEMTRACE_HOST_CAPACITY=\"%s\": the capacity must be above zero", env);
        return MEMTRACE_ECONFIG;
    }
    return mt_device_host_open_capacity(d, cap);
}

static void host_close(struct memtrace_device *d)
{
    struct host_dev *h = d->impl;
    mt_workq_destroy(h->defq);
    for (size_t i = 0; i < HOST_BUCKETS; i++) {
        struct host_alloc *a = h->buckets[i];
        while (a) {
            struct host_alloc *n = a->next;
            munmap((void *)(uintptr_t)a->addr, a->size);
            free(a);
            a = n;
        }
    }
    for (struct host_resv *r = h->resvs, *n; r; r = n) {
        n = r->next;
        munmap(r->map_base, r->map_len);
        free(r->mapped);
        free(r);
    }
    pthread_mutex_destroy(&h->lock);
    free(h);
}

static int host_mem_info(struct memtrace_device *d, uint64_t *free_bytes, uint64_t *total_bytes)
{
    struct host_dev *h = d->impl;
    pthread_mutex_lock(&h->lock);
    *free_bytes = h->capacity - h->used;
    *total_bytes = h->capacity;
    pthread_mutex_unlock(&h->lock);
    return 0;
}

static int host_malloc(struct memtrace_device *d, size_t size, uint64_t *addr)
{
    struct host_dev *h = d->impl;
    pthread_mutex_lock(&h->lock);
    if (size > h->capacity - h->used) {
        pthread_mutex_unlock(&h->lock);
        return MEMTRACE_EOOM;
    }
    h->used += size;
    pthread_mutex_unlock(&h->lock);

    int rc = MEMTRACE_ENOMEM;
    struct host_alloc *a = malloc(sizeof(*a));
    void *p = MAP_FAILED;
    if (!a)
        goto out;
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
             0);
    if (p == MAP_FAILED)
        goto out;
    a->addr = (uint64_t)(uintptr_t)p;
    a->size = size;
    pthread_mutex_lock(&h->lock);
    size_t b = bucket_of(a->addr);
    a->next = h->buckets[b];
    h->buckets[b] = a;
    pthread_mutex_unlock(&h->lock);
    *addr = a->addr;
    return 0;
out:
    free(a);
    pthread_mutex_lock(&h->lock);
    h->used -= size;
    pthread_mutex_unlock(&h->lock);
    return rc;
}

static int host_free(struct memtrace_device *d, uint64_t addr)
{
    struct host_dev *h = d->impl;
    pthread_mutex_lock(&h->lock);
    struct host_alloc **pp = &h->buckets[bucket_of(addr)];
    while (*pp && (*pp)->addr != addr)
        pp = &(*pp)->next;
    struct host_alloc *a = *pp;
    if (!a) {
        pthread_mutex_unlock(&h->lock);
        return MEMTRACE_EINVAL;
    }
    *pp = a->next;
    h->used -= a->size;
    pthread_mutex_unlock(&h->lock);
    munmap((void *)(uintptr_t)a->addr, a->size);
    free(a);
    return 0;
}

static int host_reserve(struct memtrace_device *d, size_t size, uint64_t *addr)
{
    struct host_dev *h = d->impl;
    if (size % HOST_GRANULARITY != 0)
        return MEMTRACE_EINVAL;
    struct host_resv *r = calloc(1, sizeof(*r));
    if (!r)
        return MEMTRACE_ENOMEM;
    r->mapped = calloc(size / HOST_GRANULARITY, 1);
    /* Over-reserve by one granule so the range can start on a granule boundary,
     * as device virtual addresses do. */
    r->map_len = size + HOST_GRANULARITY;
    r->map_base =
        mmap(NULL, r->map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!r->mapped || r->map_base == MAP_FAILED) {
        if (r->map_base != MAP_FAILED && r->map_base)
            munmap(r->map_base, r->map_len);
        free(r->mapped);
        free(r);
        return MEMTRACE_ENOMEM;
    }
    uintptr_t base = (uintptr_t)r->map_base;
    r->addr = (base + HOST_GRANULARITY - 1) & ~(uintptr_t)(HOST_GRANULARITY - 1);
    r->size = size;
    pthread_mutex_lock(&h->lock);
    r->next = h->resvs;
    h->resvs = r;
    pthread_mutex_unlock(&h->lock);
    *addr = r->addr;
    return 0;
}

/* The reservation holding [addr, addr+size), with h->lock held. */
static struct host_resv *find_resv(struct host_dev *h, uint64_t addr, size_t size)
{
    for (struct host_resv *r = h->resvs; r; r = r->next)
        if (addr >= r->addr && addr - r->addr <= r->size && size <= r->size - (addr - r->addr))
            return r;
    return NULL;
}

static int host_release(struct memtrace_device *d, uint64_t addr, size_t size)
{
    struct host_dev *h = d->impl;
    pthread_mutex_lock(&h->lock);
    struct host_resv **pp = &h->resvs;
    while (*pp && !((*pp)->addr == addr && (*pp)->size == size))
        pp = &(*pp)->next;
    struct host_resv *r = *pp;
    if (!r) {
        pthread_mutex_unlock(&h->lock);
        return MEMTRACE_EINVAL;
    }
    *pp = r->next;
    /* Granules still mapped go back with the range, as a context teardown would. */
    for (size_t i = 0; i < r->size / HOST_GRANULARITY; i++)
        if (r->mapped[i])
            h->used -= HOST_GRANULARITY;
    pthread_mutex_unlock(&h->lock);
    munmap(r->map_base, r->map_len);
    free(r->mapped);
    free(r);
    return 0;
}

/* The reservation holding [addr, addr + size) whose granules there are all mapped
 * (mapped = 1) or all unmapped (0), with the first granule's index; NULL if the
 * range is misaligned, outside every reservation or mixed. Called with h->lock. */
static struct host_resv *granules(struct host_dev *h, uint64_t addr, size_t size, uint8_t mapped,
                                  size_t *first)
{
    if (size == 0 || size % HOST_GRANULARITY || addr % HOST_GRANULARITY)
        return NULL;
    struct host_resv *r = find_resv(h, addr, size);
    if (!r)
        return NULL;
    *first = (addr - r->addr) / HOST_GRANULARITY;
    for (size_t i = *first; i < *first + size / HOST_GRANULARITY; i++)
        if (r->mapped[i] != mapped)
            return NULL;
    return r;
}

static int host_map(struct memtrace_device *d, uint64_t addr, size_t size)
{
    struct host_dev *h = d->impl;
    int rc = 0;
    size_t first, n = size / HOST_GRANULARITY;
    pthread_mutex_lock(&h->lock);
    struct host_resv *r = granules(h, addr, size, 0, &first);
    if (!r) {
        rc = MEMTRACE_EINVAL;
        goto out;
    }
    if (size > h->capacity - h->used) {
        rc = MEMTRACE_EOOM;
        goto out;
    }
    void *p = mmap((void *)(uintptr_t)addr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        rc = MEMTRACE_ENOMEM;
        goto out;
    }
    memset(r->mapped + first, 1, n);
    h->used += size;
out:
    pthread_mutex_unlock(&h->lock);
    return rc;
}

static int host_unmap(struct memtrace_device *d, uint64_t addr, size_t size)
{
    struct host_dev *h = d->impl;
    int rc = 0;
    size_t first, n = size / HOST_GRANULARITY;
    pthread_mutex_lock(&h->lock);
    struct host_resv *r = granules(h, addr, size, 1, &first);
    if (!r) {
        rc = MEMTRACE_EINVAL;
        goto out;
    }
    /* A fresh PROT_NONE mapping drops the pages, so the memory really goes back. */
    if (mmap((void *)(uintptr_t)addr, size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
        rc = MEMTRACE_ENOMEM;
        goto out;
    }
    memset(r->mapped + first, 0, n);
    h->used -= size;
out:
    pthread_mutex_unlock(&h->lock);
    return rc;
}

static void *host_ptr(struct memtrace_device *d, uint64_t addr)
{
    return (void *)(uintptr_t)addr;
}

/* ---- streams ---- */

static struct mt_workq *queue_of(struct memtrace_device *d, struct memtrace_stream *s, int *rc)
{
    *rc = 0;
    if (s)
        return s->impl;
    struct host_dev *h = d->impl;
    pthread_mutex_lock(&h->lock);
    if (!h->defq)
        *rc = mt_workq_create(&h->defq);
    struct mt_workq *q = h->defq;
    pthread_mutex_unlock(&h->lock);
    return q;
}

static int host_stream_create(struct memtrace_device *d, struct memtrace_stream *s)
{
    struct mt_workq *q;
    int rc = mt_workq_create(&q);
    if (rc)
        return rc;
    s->impl = q;
    s->id = atomic_fetch_add(&host_next_stream_id, 1);
    return 0;
}

static int host_stream_destroy(struct memtrace_device *d, struct memtrace_stream *s)
{
    mt_workq_destroy(s->impl);
    s->impl = NULL;
    return 0;
}

static int host_launch(struct memtrace_device *d, struct memtrace_stream *s, memtrace_kernel_fn fn,
                       void *arg)
{
    int rc;
    struct mt_workq *q = queue_of(d, s, &rc);
    return rc ? rc : mt_workq_push(q, fn, arg);
}

static int host_stream_sync(struct memtrace_device *d, struct memtrace_stream *s)
{
    int rc;
    struct mt_workq *q = queue_of(d, s, &rc);
    if (rc)
        return rc;
    mt_workq_sync(q);
    return 0;
}

/* ---- events ---- */

struct host_event {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t recorded, completed;
    int refs; /* the user's, plus one per queued marker or wait */
};

struct host_event_item {
    struct host_event *ev;
    uint64_t gen;
};

static void host_event_unref(struct host_event *ev)
{
    pthread_mutex_lock(&ev->lock);
    int last = --ev->refs == 0;
    pthread_mutex_unlock(&ev->lock);
    if (last) {
        pthread_cond_destroy(&ev->cond);
        pthread_mutex_destroy(&ev->lock);
        free(ev);
    }
}

static void host_event_complete(void *p)
{
    struct host_event_item *it = p;
    struct host_event *ev = it->ev;
    pthread_mutex_lock(&ev->lock);
    if (it->gen > ev->completed)
        ev->completed = it->gen;
    pthread_cond_broadcast(&ev->cond);
    pthread_mutex_unlock(&ev->lock);
    host_event_unref(ev);
    free(it);
}

static void host_event_block(void *p)
{
    struct host_event_item *it = p;
    struct host_event *ev = it->ev;
    pthread_mutex_lock(&ev->lock);
    while (ev->completed < it->gen)
        pthread_cond_wait(&ev->cond, &ev->lock);
    pthread_mutex_unlock(&ev->lock);
    host_event_unref(ev);
    free(it);
}

static int host_event_create(struct memtrace_device *d, struct memtrace_devevent *e)
{
    struct host_event *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return MEMTRACE_ENOMEM;
    pthread_mutex_init(&ev->lock, NULL);
    pthread_cond_init(&ev->cond, NULL);
    ev->refs = 1;
    e->impl = ev;
    return 0;
}

static int host_event_destroy(struct memtrace_device *d, struct memtrace_devevent *e)
{
    host_event_unref(e->impl);
    e->impl = NULL;
    return 0;
}

static int host_event_record(struct memtrace_device *d, struct memtrace_devevent *e,
                             struct memtrace_stream *s)
{
    int rc;
    struct mt_workq *q = queue_of(d, s, &rc);
    if (rc)
        return rc;
    struct host_event *ev = e->impl;
    struct host_event_item *it = malloc(sizeof(*it));
    if (!it)
        return MEMTRACE_ENOMEM;
    pthread_mutex_lock(&ev->lock);
    it->ev = ev;
    it->gen = ++ev->recorded;
    ev->refs++;
    pthread_mutex_unlock(&ev->lock);
    rc = mt_workq_push(q, host_event_complete, it);
    if (rc)
        host_event_complete(it); /* nothing to wait for: never leave waiters hanging */
    return rc;
}

static int host_event_query(struct memtrace_device *d, struct memtrace_devevent *e)
{
    struct host_event *ev = e->impl;
    pthread_mutex_lock(&ev->lock);
    int done = ev->completed >= ev->recorded;
    pthread_mutex_unlock(&ev->lock);
    return done;
}

static int host_event_sync(struct memtrace_device *d, struct memtrace_devevent *e)
{
    struct host_event *ev = e->impl;
    pthread_mutex_lock(&ev->lock);
    uint64_t target = ev->recorded;
    while (ev->completed < target)
        pthread_cond_wait(&ev->cond, &ev->lock);
    pthread_mutex_unlock(&ev->lock);
    return 0;
}

static int host_stream_wait(struct memtrace_device *d, struct memtrace_stream *s,
                            struct memtrace_devevent *e)
{
    int rc;
    struct mt_workq *q = queue_of(d, s, &rc);
    if (rc)
        return rc;
    struct host_event *ev = e->impl;
    pthread_mutex_lock(&ev->lock);
    uint64_t target = ev->recorded;
    int done = ev->completed >= target;
    if (!done)
        ev->refs++;
    pthread_mutex_unlock(&ev->lock);
    if (done)
        return 0;
    struct host_event_item *it = malloc(sizeof(*it));
    if (!it) {
        host_event_unref(ev);
        return MEMTRACE_ENOMEM;
    }
    it->ev = ev;
    it->gen = target;
    rc = mt_workq_push(q, host_event_block, it);
    if (rc) {
        host_event_unref(ev);
        free(it);
    }
    return rc;
}

static int host_device_sync(struct memtrace_device *d)
{
    struct host_dev *h = d->impl;
    pthread_mutex_lock(&d->lock);
    for (struct memtrace_stream *s = d->streams; s; s = s->next)
        mt_workq_sync(s->impl);
    pthread_mutex_unlock(&d->lock);
    pthread_mutex_lock(&h->lock);
    struct mt_workq *q = h->defq;
    pthread_mutex_unlock(&h->lock);
    if (q)
        mt_workq_sync(q);
    return 0;
}

const struct mt_device_ops mt_device_host_ops = {
    .name = "host",
    .open = host_open,
    .close = host_close,
    .mem_info = host_mem_info,
    .malloc = host_malloc,
    .free = host_free,
    .reserve = host_reserve,
    .release = host_release,
    .map = host_map,
    .unmap = host_unmap,
    .ptr = host_ptr,
    .stream_create = host_stream_create,
    .stream_destroy = host_stream_destroy,
    .launch = host_launch,
    .stream_sync = host_stream_sync,
    .event_create = host_event_create,
    .event_destroy = host_event_destroy,
    .event_record = host_event_record,
    .event_query = host_event_query,
    .event_sync = host_event_sync,
    .stream_wait = host_stream_wait,
    .device_sync = host_device_sync,
};
