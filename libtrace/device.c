/* device.c: memtrace_device_* dispatch over the backends of device_impl.h.
 *
 * Devices opened by backend name and index are shared and reference counted in a
 * small registry, so every module of a process that opens "cuda" 0 talks to the
 * same context. Streams and events are kept on their device's lists so that the
 * last close tears down whatever the user left behind (and joins host workers). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "mtx/util.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct memtrace_device *registry;

int mt_device_parse_size(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return MEMTRACE_ECONFIG;
    uint64_t v = 0;
    while (*s >= '0' && *s <= '9') {
        unsigned digit = (unsigned)(*s++ - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return MEMTRACE_ECONFIG;
        v = v * 10 + digit;
    }
    unsigned shift = 0;
    switch (*s) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    }
    if (shift) {
        s++;
        if (*s == 'i')
            s++;
        if (*s == 'B' || *s == 'b')
            s++;
    } else if (*s == 'B' || *s == 'b') {
        s++;
    }
    if (*s != '\0')
        return MEMTRACE_ECONFIG;
    if (shift && v > (UINT64_MAX >> shift))
        return MEMTRACE_ECONFIG;
    *out = v << shift;
    return 0;
}

static const struct mt_device_ops *backend_ops(const char *name)
{
    if (strcmp(name, "host") == 0)
        return &mt_device_host_ops;
    if (strcmp(name, "cuda") == 0)
        return &mt_device_cuda_ops;
    if (strcmp(name, "level_zero") == 0 || strcmp(name, "ze") == 0)
        return &mt_device_ze_ops;
    return NULL;
}

static struct memtrace_device *device_new(const struct mt_device_ops *ops, int index)
{
    struct memtrace_device *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->ops = ops;
    d->backend = ops->name;
    d->index = index;
    d->refs = 1;
    pthread_mutex_init(&d->lock, NULL);
    return d;
}

static void device_delete(struct memtrace_device *d)
{
    pthread_mutex_destroy(&d->lock);
    free(d);
}

/* A device in use belongs in the recording's metadata (its name, capacity and
 * backend), so a file says what it was recorded on. */
static void device_publish(struct memtrace_device *d)
{
    uint64_t free_bytes = 0, total = 0;
    if (memtrace_device_mem_info(d, &free_bytes, &total) != 0)
        total = 0;
    const char *name = memtrace_device_name(d);
    memtrace_device_register(d->index, name ? name : d->backend, total, d->backend);
}

MEMTRACE_API int memtrace_device_open(struct memtrace_device **out, const char *backend, int index)
{
    if (!out || index < 0)
        return MEMTRACE_EINVAL;
    *out = NULL;
    if (!backend || !*backend) {
        backend = getenv("MEMTRACE_DEVICE");
        if (!backend || !*backend)
            backend = "host";
    }
    const struct mt_device_ops *ops = backend_ops(backend);
    if (!ops) {
        mtx_log("unknown device backend \"%s\": use host, cuda or level_zero", backend);
        return MEMTRACE_EINVAL;
    }
    /* Opening under the registry lock keeps two threads from creating two contexts
     * for one device; opens are rare. */
    pthread_mutex_lock(&registry_lock);
    for (struct memtrace_device *d = registry; d; d = d->next) {
        if (d->ops == ops && d->index == index) {
            d->refs++;
            *out = d;
            pthread_mutex_unlock(&registry_lock);
            return 0;
        }
    }
    int rc = MEMTRACE_ENOMEM;
    struct memtrace_device *d = device_new(ops, index);
    if (d && (rc = ops->open(d, index)) == 0) {
        d->shared = 1;
        d->next = registry;
        registry = d;
        *out = d;
        device_publish(d);
    } else if (d) {
        device_delete(d);
    }
    pthread_mutex_unlock(&registry_lock);
    return rc;
}

MEMTRACE_API int memtrace_device_open_host(struct memtrace_device **out, uint64_t capacity)
{
    if (!out || capacity == 0)
        return MEMTRACE_EINVAL;
    struct memtrace_device *d = device_new(&mt_device_host_ops, 0);
    if (!d)
        return MEMTRACE_ENOMEM;
    int rc = mt_device_host_open_capacity(d, capacity);
    if (rc) {
        device_delete(d);
        return rc;
    }
    *out = d;
    device_publish(d);
    return 0;
}

MEMTRACE_API void memtrace_device_close(struct memtrace_device *d)
{
    if (!d)
        return;
    if (d->shared) {
        pthread_mutex_lock(&registry_lock);
        int last = --d->refs == 0;
        if (last) {
            struct memtrace_device **pp = &registry;
            while (*pp != d)
                pp = &(*pp)->next;
            *pp = d->next;
        }
        pthread_mutex_unlock(&registry_lock);
        if (!last)
            return;
    }
    /* Streams first: queued markers still reference events, and a host worker may be
     * blocked on an event that only a later item of another stream completes. */
    d->ops->device_sync(d);
    while (d->streams) {
        struct memtrace_stream *s = d->streams;
        d->streams = s->next;
        d->ops->stream_destroy(d, s);
        free(s);
    }
    while (d->events) {
        struct memtrace_devevent *e = d->events;
        d->events = e->next;
        d->ops->event_destroy(d, e);
        free(e);
    }
    d->ops->close(d);
    device_delete(d);
}

MEMTRACE_API const char *memtrace_device_backend(const struct memtrace_device *d)
{
    return d ? d->backend : NULL;
}

MEMTRACE_API const char *memtrace_device_name(const struct memtrace_device *d)
{
    return d ? d->name : NULL;
}

MEMTRACE_API int memtrace_device_index(const struct memtrace_device *d)
{
    return d ? d->index : -1;
}

MEMTRACE_API int memtrace_device_mem_info(struct memtrace_device *d, uint64_t *free_bytes,
                                          uint64_t *total_bytes)
{
    if (!d)
        return MEMTRACE_EINVAL;
    uint64_t f = 0, t = 0;
    int rc = d->ops->mem_info(d, &f, &t);
    if (rc == 0) {
        if (free_bytes)
            *free_bytes = f;
        if (total_bytes)
            *total_bytes = t;
    }
    return rc;
}

MEMTRACE_API int memtrace_device_malloc(struct memtrace_device *d, size_t size, uint64_t *addr)
{
    if (!d || !addr || size == 0)
        return MEMTRACE_EINVAL;
    return d->ops->malloc(d, size, addr);
}

MEMTRACE_API int memtrace_device_free(struct memtrace_device *d, uint64_t addr)
{
    if (!d)
        return MEMTRACE_EINVAL;
    if (addr == 0)
        return 0;
    return d->ops->free(d, addr);
}

MEMTRACE_API size_t memtrace_device_granularity(struct memtrace_device *d)
{
    return d ? d->granularity : 0;
}

MEMTRACE_API int memtrace_device_reserve(struct memtrace_device *d, size_t size, uint64_t *addr)
{
    if (!d || !addr || size == 0)
        return MEMTRACE_EINVAL;
    if (!d->ops->reserve)
        return MEMTRACE_ENOTSUP;
    return d->ops->reserve(d, size, addr);
}

MEMTRACE_API int memtrace_device_release(struct memtrace_device *d, uint64_t addr, size_t size)
{
    if (!d || size == 0)
        return MEMTRACE_EINVAL;
    if (!d->ops->release)
        return MEMTRACE_ENOTSUP;
    return d->ops->release(d, addr, size);
}

MEMTRACE_API int memtrace_device_map(struct memtrace_device *d, uint64_t addr, size_t size)
{
    if (!d || size == 0)
        return MEMTRACE_EINVAL;
    if (!d->ops->map)
        return MEMTRACE_ENOTSUP;
    return d->ops->map(d, addr, size);
}

MEMTRACE_API int memtrace_device_unmap(struct memtrace_device *d, uint64_t addr, size_t size)
{
    if (!d || size == 0)
        return MEMTRACE_EINVAL;
    if (!d->ops->unmap)
        return MEMTRACE_ENOTSUP;
    return d->ops->unmap(d, addr, size);
}

MEMTRACE_API void *memtrace_device_ptr(struct memtrace_device *d, uint64_t addr)
{
    if (!d || !d->ops->ptr)
        return NULL;
    return d->ops->ptr(d, addr);
}

MEMTRACE_API int memtrace_stream_create(struct memtrace_device *d, struct memtrace_stream **out)
{
    if (!d || !out)
        return MEMTRACE_EINVAL;
    struct memtrace_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return MEMTRACE_ENOMEM;
    s->dev = d;
    int rc = d->ops->stream_create(d, s);
    if (rc) {
        free(s);
        return rc;
    }
    pthread_mutex_lock(&d->lock);
    s->next = d->streams;
    if (d->streams)
        d->streams->prev = s;
    d->streams = s;
    pthread_mutex_unlock(&d->lock);
    *out = s;
    return 0;
}

MEMTRACE_API int memtrace_stream_destroy(struct memtrace_stream *s)
{
    if (!s)
        return MEMTRACE_EINVAL;
    struct memtrace_device *d = s->dev;
    pthread_mutex_lock(&d->lock);
    if (s->prev)
        s->prev->next = s->next;
    else
        d->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    pthread_mutex_unlock(&d->lock);
    int rc = d->ops->stream_destroy(d, s);
    free(s);
    return rc;
}

MEMTRACE_API uint64_t memtrace_stream_id(const struct memtrace_stream *s)
{
    return s ? s->id : 0;
}

MEMTRACE_API int memtrace_stream_launch(struct memtrace_device *d, struct memtrace_stream *s,
                                        memtrace_kernel_fn fn, void *arg)
{
    if (!d || !fn || (s && s->dev != d))
        return MEMTRACE_EINVAL;
    return d->ops->launch(d, s, fn, arg);
}

MEMTRACE_API int memtrace_stream_sync(struct memtrace_device *d, struct memtrace_stream *s)
{
    if (!d || (s && s->dev != d))
        return MEMTRACE_EINVAL;
    return d->ops->stream_sync(d, s);
}

MEMTRACE_API int memtrace_devevent_create(struct memtrace_device *d, struct memtrace_devevent **out)
{
    if (!d || !out)
        return MEMTRACE_EINVAL;
    struct memtrace_devevent *e = calloc(1, sizeof(*e));
    if (!e)
        return MEMTRACE_ENOMEM;
    e->dev = d;
    int rc = d->ops->event_create(d, e);
    if (rc) {
        free(e);
        return rc;
    }
    pthread_mutex_lock(&d->lock);
    e->next = d->events;
    if (d->events)
        d->events->prev = e;
    d->events = e;
    pthread_mutex_unlock(&d->lock);
    *out = e;
    return 0;
}

MEMTRACE_API int memtrace_devevent_destroy(struct memtrace_devevent *e)
{
    if (!e)
        return MEMTRACE_EINVAL;
    struct memtrace_device *d = e->dev;
    pthread_mutex_lock(&d->lock);
    if (e->prev)
        e->prev->next = e->next;
    else
        d->events = e->next;
    if (e->next)
        e->next->prev = e->prev;
    pthread_mutex_unlock(&d->lock);
    int rc = d->ops->event_destroy(d, e);
    free(e);
    return rc;
}

MEMTRACE_API int memtrace_devevent_record(struct memtrace_devevent *e, struct memtrace_stream *s)
{
    if (!e || (s && s->dev != e->dev))
        return MEMTRACE_EINVAL;
    return e->dev->ops->event_record(e->dev, e, s);
}

MEMTRACE_API int memtrace_devevent_query(struct memtrace_devevent *e)
{
    if (!e)
        return MEMTRACE_EINVAL;
    return e->dev->ops->event_query(e->dev, e);
}

MEMTRACE_API int memtrace_devevent_sync(struct memtrace_devevent *e)
{
    if (!e)
        return MEMTRACE_EINVAL;
    return e->dev->ops->event_sync(e->dev, e);
}

MEMTRACE_API int memtrace_stream_wait(struct memtrace_stream *s, struct memtrace_devevent *e)
{
    /* The default stream is NULL and has no device of its own: it takes e's. */
    if (!e || (s && s->dev != e->dev))
        return MEMTRACE_EINVAL;
    return e->dev->ops->stream_wait(e->dev, s, e);
}

MEMTRACE_API int memtrace_device_sync(struct memtrace_device *d)
{
    if (!d)
        return MEMTRACE_EINVAL;
    return d->ops->device_sync(d);
}
