/* device_ze.c: the Level Zero backend, through the loader (libze_loader).
 *
 * Device index N is the Nth device over every driver the loader reports. A stream
 * is an immediate command list plus a host worker: Level Zero cannot run a host
 * function in stream order, so memtrace_stream_launch() synchronizes the list (a
 * private event signalled at its tail) and hands the function to the worker; every
 * other stream operation first waits for the worker to be idle, so the stream stays
 * one ordered sequence. Events are single-event pools, host visible. Free memory
 * comes from sysman when it answers (ZES_ENABLE_SYSMAN=1), else from the bytes this
 * backend itself has allocated and mapped. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "mtx/util.h"

#if MEMTRACE_HAVE_LEVEL_ZERO

#include <level_zero/ze_api.h>
#include <level_zero/zes_api.h>

#define ZE_BUCKETS 256

struct ze_alloc {
    uint64_t addr;
    size_t size;
    ze_physical_mem_handle_t phys; /* mappings only */
    struct ze_alloc *next;
};

struct ze_stream {
    ze_command_list_handle_t list;
    ze_event_pool_handle_t pool;
    ze_event_handle_t tail; /* signalled at the list's tail to synchronize it */
    struct mt_workq *host;
    pthread_mutex_t lock; /* one appender at a time on the immediate list */
};

struct ze_dev {
    ze_driver_handle_t drv;
    ze_device_handle_t dev;
    ze_context_handle_t ctx;
    uint32_t ordinal;
    uint64_t total;
    pthread_mutex_t lock;
    uint64_t used;
    struct ze_alloc *allocs[ZE_BUCKETS];
    struct ze_alloc *maps;
    struct ze_stream *defs;
};

struct ze_event {
    ze_event_pool_handle_t pool;
    ze_event_handle_t ev;
    int recorded;
};

static pthread_mutex_t ze_init_lock = PTHREAD_MUTEX_INITIALIZER;
static int ze_init_rc = 1; /* 1: not tried yet */

static int ze_err(ze_result_t r)
{
    switch (r) {
    case ZE_RESULT_SUCCESS:
        return 0;
    case ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY:
        return MEMTRACE_EOOM;
    case ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY:
        return MEMTRACE_ENOMEM;
    case ZE_RESULT_ERROR_UNSUPPORTED_FEATURE:
        return MEMTRACE_ENOTSUP;
    case ZE_RESULT_ERROR_UNINITIALIZED:
    case ZE_RESULT_ERROR_DEVICE_LOST:
        return MEMTRACE_ENODEV;
    default:
        return MEMTRACE_EINVAL;
    }
}

static size_t ze_bucket(uint64_t addr)
{
    return (size_t)(mtx_hash_u64(addr) % ZE_BUCKETS);
}

static int ze_find_device(int index, ze_driver_handle_t *drv_out, ze_device_handle_t *dev_out,
                          int *total_out)
{
    uint32_t ndrv = 0;
    int seen = 0;
    if (zeDriverGet(&ndrv, NULL) != ZE_RESULT_SUCCESS || ndrv == 0) {
        *total_out = 0;
        return MEMTRACE_ENODEV;
    }
    ze_driver_handle_t *drvs = calloc(ndrv, sizeof(*drvs));
    if (!drvs)
        return MEMTRACE_ENOMEM;
    int rc = MEMTRACE_ENODEV;
    if (zeDriverGet(&ndrv, drvs) != ZE_RESULT_SUCCESS)
        ndrv = 0;
    for (uint32_t i = 0; i < ndrv && rc; i++) {
        uint32_t ndev = 0;
        if (zeDeviceGet(drvs[i], &ndev, NULL) != ZE_RESULT_SUCCESS || ndev == 0)
            continue;
        if (index < seen + (int)ndev) {
            ze_device_handle_t *devs = calloc(ndev, sizeof(*devs));
            if (!devs) {
                rc = MEMTRACE_ENOMEM;
                break;
            }
            if (zeDeviceGet(drvs[i], &ndev, devs) == ZE_RESULT_SUCCESS &&
                index - seen < (int)ndev) {
                *drv_out = drvs[i];
                *dev_out = devs[index - seen];
                rc = 0;
            }
            free(devs);
        }
        seen += (int)ndev;
    }
    free(drvs);
    *total_out = seen;
    return rc;
}

static int ze_open(struct memtrace_device *d, int index)
{
    pthread_mutex_lock(&ze_init_lock);
    if (ze_init_rc == 1) {
        ze_result_t r = zeInit(0);
        ze_init_rc = r == ZE_RESULT_SUCCESS ? 0 : MEMTRACE_ENODEV;
        if (ze_init_rc)
            mtx_log("level_zero backend: zeInit failed with 0x%x: no Level Zero driver",
                   (unsigned)r);
    }
    int rc = ze_init_rc;
    pthread_mutex_unlock(&ze_init_lock);
    if (rc)
        return rc;

    struct ze_dev *z = calloc(1, sizeof(*z));
    if (!z)
        return MEMTRACE_ENOMEM;
    int ndev = 0;
    if ((rc = ze_find_device(index, &z->drv, &z->dev, &ndev))) {
        if (rc == MEMTRACE_ENODEV)
            mtx_log("level_zero backend: no Level Zero device %d (%d present)", index, ndev);
        free(z);
        return rc;
    }
    ze_context_desc_t cdesc = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
    ze_result_t r = zeContextCreate(z->drv, &cdesc, &z->ctx);
    if (r != ZE_RESULT_SUCCESS) {
        mtx_log("level_zero backend: cannot create a context on device %d: 0x%x", index,
               (unsigned)r);
        free(z);
        return ze_err(r) == MEMTRACE_EOOM ? MEMTRACE_EOOM : MEMTRACE_ENODEV;
    }
    pthread_mutex_init(&z->lock, NULL);
    d->impl = z;

    ze_device_properties_t props = {.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES};
    if (zeDeviceGetProperties(z->dev, &props) == ZE_RESULT_SUCCESS) {
        size_t n = strnlen(props.name, sizeof(props.name));
        if (n >= sizeof(d->name))
            n = sizeof(d->name) - 1;
        memcpy(d->name, props.name, n);
        d->name[n] = '\0';
    }
    if (!d->name[0])
        mtx_format(d->name, sizeof(d->name), "Level Zero device %d", index);

    uint32_t nmem = 0;
    if (zeDeviceGetMemoryProperties(z->dev, &nmem, NULL) == ZE_RESULT_SUCCESS && nmem) {
        ze_device_memory_properties_t *mp = calloc(nmem, sizeof(*mp));
        if (mp) {
            for (uint32_t i = 0; i < nmem; i++)
                mp[i].stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
            if (zeDeviceGetMemoryProperties(z->dev, &nmem, mp) == ZE_RESULT_SUCCESS)
                for (uint32_t i = 0; i < nmem; i++)
                    z->total += mp[i].totalSize;
            free(mp);
        }
    }

    uint32_t ngroups = 0;
    if (zeDeviceGetCommandQueueGroupProperties(z->dev, &ngroups, NULL) == ZE_RESULT_SUCCESS &&
        ngroups) {
        ze_command_queue_group_properties_t *gp = calloc(ngroups, sizeof(*gp));
        if (gp) {
            for (uint32_t i = 0; i < ngroups; i++)
                gp[i].stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
            if (zeDeviceGetCommandQueueGroupProperties(z->dev, &ngroups, gp) == ZE_RESULT_SUCCESS)
                for (uint32_t i = ngroups; i-- > 0;)
                    if (gp[i].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE)
                        z->ordinal = i;
            free(gp);
        }
    }

    size_t page = 0;
    if (zeVirtualMemQueryPageSize(z->ctx, z->dev, (size_t)2 << 20, &page) == ZE_RESULT_SUCCESS &&
        page)
        d->granularity = page;
    else
        d->granularity = (size_t)2 << 20;
    return 0;
}

static void ze_stream_free(struct ze_stream *s)
{
    if (!s)
        return;
    mt_workq_destroy(s->host);
    if (s->tail)
        zeEventDestroy(s->tail);
    if (s->pool)
        zeEventPoolDestroy(s->pool);
    if (s->list)
        zeCommandListDestroy(s->list);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static int ze_event_pool1(struct ze_dev *z, ze_event_pool_handle_t *pool, ze_event_handle_t *ev)
{
    ze_event_pool_desc_t pd = {.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
                               .flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE,
                               .count = 1};
    ze_result_t r = zeEventPoolCreate(z->ctx, &pd, 1, &z->dev, pool);
    if (r != ZE_RESULT_SUCCESS)
        return ze_err(r);
    ze_event_desc_t ed = {.stype = ZE_STRUCTURE_TYPE_EVENT_DESC,
                          .index = 0,
                          .signal = ZE_EVENT_SCOPE_FLAG_HOST,
                          .wait = ZE_EVENT_SCOPE_FLAG_HOST};
    r = zeEventCreate(*pool, &ed, ev);
    if (r != ZE_RESULT_SUCCESS) {
        zeEventPoolDestroy(*pool);
        *pool = NULL;
        return ze_err(r);
    }
    return 0;
}

static int ze_stream_new(struct ze_dev *z, struct ze_stream **out)
{
    struct ze_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return MEMTRACE_ENOMEM;
    pthread_mutex_init(&s->lock, NULL);
    ze_command_queue_desc_t qd = {.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
                                  .ordinal = z->ordinal,
                                  .index = 0,
                                  .mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
                                  .priority = ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    int rc = ze_err(zeCommandListCreateImmediate(z->ctx, z->dev, &qd, &s->list));
    if (!rc)
        rc = ze_event_pool1(z, &s->pool, &s->tail);
    if (!rc)
        rc = mt_workq_create(&s->host);
    if (rc) {
        ze_stream_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void ze_close(struct memtrace_device *d)
{
    struct ze_dev *z = d->impl;
    ze_stream_free(z->defs);
    for (struct ze_alloc *m = z->maps, *n; m; m = n) {
        n = m->next;
        zeVirtualMemUnmap(z->ctx, (void *)(uintptr_t)m->addr, m->size);
        zePhysicalMemDestroy(z->ctx, m->phys);
        free(m);
    }
    for (size_t i = 0; i < ZE_BUCKETS; i++)
        for (struct ze_alloc *a = z->allocs[i], *n; a; a = n) {
            n = a->next;
            zeMemFree(z->ctx, (void *)(uintptr_t)a->addr);
            free(a);
        }
    zeContextDestroy(z->ctx);
    pthread_mutex_destroy(&z->lock);
    free(z);
}

/* Free and total bytes from sysman, or -1 if it does not answer. */
static int ze_sysman_info(struct ze_dev *z, uint64_t *free_bytes, uint64_t *total_bytes)
{
    zes_device_handle_t sd = (zes_device_handle_t)z->dev;
    uint32_t n = 0;
    if (zesDeviceEnumMemoryModules(sd, &n, NULL) != ZE_RESULT_SUCCESS || n == 0)
        return -1;
    zes_mem_handle_t *mods = calloc(n, sizeof(*mods));
    if (!mods)
        return -1;
    int rc = -1;
    uint64_t f = 0, t = 0;
    if (zesDeviceEnumMemoryModules(sd, &n, mods) == ZE_RESULT_SUCCESS) {
        rc = 0;
        for (uint32_t i = 0; i < n && !rc; i++) {
            zes_mem_state_t st = {.stype = ZES_STRUCTURE_TYPE_MEM_STATE};
            if (zesMemoryGetState(mods[i], &st) != ZE_RESULT_SUCCESS)
                rc = -1;
            f += st.free;
            t += st.size;
        }
    }
    free(mods);
    if (rc == 0 && t) {
        *free_bytes = f;
        *total_bytes = t;
        return 0;
    }
    return -1;
}

static int ze_mem_info(struct memtrace_device *d, uint64_t *free_bytes, uint64_t *total_bytes)
{
    struct ze_dev *z = d->impl;
    if (ze_sysman_info(z, free_bytes, total_bytes) == 0)
        return 0;
    pthread_mutex_lock(&z->lock);
    *total_bytes = z->total;
    *free_bytes = z->total > z->used ? z->total - z->used : 0;
    pthread_mutex_unlock(&z->lock);
    return 0;
}

static int ze_malloc(struct memtrace_device *d, size_t size, uint64_t *addr)
{
    struct ze_dev *z = d->impl;
    struct ze_alloc *a = malloc(sizeof(*a));
    if (!a)
        return MEMTRACE_ENOMEM;
    ze_device_mem_alloc_desc_t md = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
    void *p = NULL;
    int rc = ze_err(zeMemAllocDevice(z->ctx, &md, size, 0, z->dev, &p));
    if (rc) {
        free(a);
        return rc;
    }
    a->addr = (uint64_t)(uintptr_t)p;
    a->size = size;
    a->phys = NULL;
    pthread_mutex_lock(&z->lock);
    size_t b = ze_bucket(a->addr);
    a->next = z->allocs[b];
    z->allocs[b] = a;
    z->used += size;
    pthread_mutex_unlock(&z->lock);
    *addr = a->addr;
    return 0;
}

static int ze_free(struct memtrace_device *d, uint64_t addr)
{
    struct ze_dev *z = d->impl;
    pthread_mutex_lock(&z->lock);
    struct ze_alloc **pp = &z->allocs[ze_bucket(addr)];
    while (*pp && (*pp)->addr != addr)
        pp = &(*pp)->next;
    struct ze_alloc *a = *pp;
    if (a) {
        *pp = a->next;
        z->used -= a->size;
    }
    pthread_mutex_unlock(&z->lock);
    if (!a)
        return MEMTRACE_EINVAL;
    free(a);
    return ze_err(zeMemFree(z->ctx, (void *)(uintptr_t)addr));
}

static int ze_reserve(struct memtrace_device *d, size_t size, uint64_t *addr)
{
    struct ze_dev *z = d->impl;
    if (size % d->granularity)
        return MEMTRACE_EINVAL;
    void *p = NULL;
    int rc = ze_err(zeVirtualMemReserve(z->ctx, NULL, size, &p));
    if (rc)
        return rc;
    *addr = (uint64_t)(uintptr_t)p;
    return 0;
}

/* Unmaps every mapping inside [addr, addr+size); EINVAL if one straddles an end or
 * (when need_any) none is inside. */
static int ze_unmap_range(struct ze_dev *z, uint64_t addr, size_t size, int need_any)
{
    uint64_t end = addr + size;
    int found = 0;
    pthread_mutex_lock(&z->lock);
    for (struct ze_alloc *m = z->maps; m; m = m->next) {
        uint64_t mend = m->addr + m->size;
        if (mend <= addr || m->addr >= end)
            continue;
        if (m->addr < addr || mend > end) {
            pthread_mutex_unlock(&z->lock);
            return MEMTRACE_EINVAL;
        }
        found = 1;
    }
    if (need_any && !found) {
        pthread_mutex_unlock(&z->lock);
        return MEMTRACE_EINVAL;
    }
    int rc = 0;
    for (struct ze_alloc **pp = &z->maps; *pp;) {
        struct ze_alloc *m = *pp;
        if (m->addr >= addr && m->addr + m->size <= end) {
            int r = ze_err(zeVirtualMemUnmap(z->ctx, (void *)(uintptr_t)m->addr, m->size));
            if (r) {
                rc = r;
                pp = &m->next;
                continue;
            }
            zePhysicalMemDestroy(z->ctx, m->phys);
            z->used -= m->size;
            *pp = m->next;
            free(m);
        } else {
            pp = &m->next;
        }
    }
    pthread_mutex_unlock(&z->lock);
    return rc;
}

static int ze_release(struct memtrace_device *d, uint64_t addr, size_t size)
{
    struct ze_dev *z = d->impl;
    int rc = ze_unmap_range(z, addr, size, 0);
    if (rc)
        return rc;
    return ze_err(zeVirtualMemFree(z->ctx, (void *)(uintptr_t)addr, size));
}

static int ze_map(struct memtrace_device *d, uint64_t addr, size_t size)
{
    struct ze_dev *z = d->impl;
    if (size % d->granularity || addr % d->granularity)
        return MEMTRACE_EINVAL;
    struct ze_alloc *m = calloc(1, sizeof(*m));
    if (!m)
        return MEMTRACE_ENOMEM;
    ze_physical_mem_desc_t pd = {.stype = ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, .size = size};
    int rc = ze_err(zePhysicalMemCreate(z->ctx, z->dev, &pd, &m->phys));
    if (rc) {
        free(m);
        return rc;
    }
    rc = ze_err(zeVirtualMemMap(z->ctx, (void *)(uintptr_t)addr, size, m->phys, 0,
                                ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE));
    if (rc) {
        zePhysicalMemDestroy(z->ctx, m->phys);
        free(m);
        return rc;
    }
    m->addr = addr;
    m->size = size;
    pthread_mutex_lock(&z->lock);
    m->next = z->maps;
    z->maps = m;
    z->used += size;
    pthread_mutex_unlock(&z->lock);
    return 0;
}

static int ze_unmap(struct memtrace_device *d, uint64_t addr, size_t size)
{
    return ze_unmap_range(d->impl, addr, size, 1);
}

/* ---- streams ---- */

static struct ze_stream *ze_stream_of(struct memtrace_device *d, struct memtrace_stream *s, int *rc)
{
    *rc = 0;
    if (s)
        return s->impl;
    struct ze_dev *z = d->impl;
    pthread_mutex_lock(&z->lock);
    if (!z->defs)
        *rc = ze_stream_new(z, &z->defs);
    struct ze_stream *zs = z->defs;
    pthread_mutex_unlock(&z->lock);
    return zs;
}

/* Waits for everything appended to the list so far; with zs->lock held. */
static int ze_list_sync(struct ze_stream *zs)
{
    int rc = ze_err(zeCommandListAppendEventReset(zs->list, zs->tail));
    if (!rc)
        rc = ze_err(zeCommandListAppendSignalEvent(zs->list, zs->tail));
    if (!rc)
        rc = ze_err(zeEventHostSynchronize(zs->tail, UINT64_MAX));
    return rc;
}

static int ze_stream_create(struct memtrace_device *d, struct memtrace_stream *s)
{
    struct ze_stream *zs;
    int rc = ze_stream_new(d->impl, &zs);
    if (rc)
        return rc;
    s->impl = zs;
    s->id = (uint64_t)(uintptr_t)zs->list;
    return 0;
}

static int ze_stream_destroy(struct memtrace_device *d, struct memtrace_stream *s)
{
    struct ze_stream *zs = s->impl;
    mt_workq_sync(zs->host);
    pthread_mutex_lock(&zs->lock);
    int rc = ze_list_sync(zs);
    pthread_mutex_unlock(&zs->lock);
    ze_stream_free(zs);
    s->impl = NULL;
    return rc;
}

static int ze_launch(struct memtrace_device *d, struct memtrace_stream *s, memtrace_kernel_fn fn,
                     void *arg)
{
    int rc;
    struct ze_stream *zs = ze_stream_of(d, s, &rc);
    if (rc)
        return rc;
    pthread_mutex_lock(&zs->lock);
    mt_workq_sync(zs->host);
    rc = ze_list_sync(zs);
    if (!rc)
        rc = mt_workq_push(zs->host, fn, arg);
    pthread_mutex_unlock(&zs->lock);
    return rc;
}

static int ze_stream_sync(struct memtrace_device *d, struct memtrace_stream *s)
{
    int rc;
    struct ze_stream *zs = ze_stream_of(d, s, &rc);
    if (rc)
        return rc;
    pthread_mutex_lock(&zs->lock);
    mt_workq_sync(zs->host);
    rc = ze_list_sync(zs);
    pthread_mutex_unlock(&zs->lock);
    return rc;
}

/* ---- events ---- */

static int ze_event_create(struct memtrace_device *d, struct memtrace_devevent *e)
{
    struct ze_event *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return MEMTRACE_ENOMEM;
    int rc = ze_event_pool1(d->impl, &ev->pool, &ev->ev);
    if (rc) {
        free(ev);
        return rc;
    }
    e->impl = ev;
    return 0;
}

static int ze_event_destroy(struct memtrace_device *d, struct memtrace_devevent *e)
{
    struct ze_event *ev = e->impl;
    zeEventDestroy(ev->ev);
    zeEventPoolDestroy(ev->pool);
    free(ev);
    e->impl = NULL;
    return 0;
}

static int ze_event_record(struct memtrace_device *d, struct memtrace_devevent *e,
                           struct memtrace_stream *s)
{
    int rc;
    struct ze_stream *zs = ze_stream_of(d, s, &rc);
    if (rc)
        return rc;
    struct ze_event *ev = e->impl;
    pthread_mutex_lock(&zs->lock);
    mt_workq_sync(zs->host);
    rc = ze_err(zeCommandListAppendEventReset(zs->list, ev->ev));
    if (!rc)
        rc = ze_err(zeCommandListAppendSignalEvent(zs->list, ev->ev));
    if (!rc)
        __atomic_store_n(&ev->recorded, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&zs->lock);
    return rc;
}

static int ze_event_query(struct memtrace_device *d, struct memtrace_devevent *e)
{
    struct ze_event *ev = e->impl;
    /* As CUDA's: an event never recorded has nothing to wait for. */
    if (!__atomic_load_n(&ev->recorded, __ATOMIC_ACQUIRE))
        return 1;
    ze_result_t r = zeEventQueryStatus(ev->ev);
    if (r == ZE_RESULT_NOT_READY)
        return 0;
    return r == ZE_RESULT_SUCCESS ? 1 : ze_err(r);
}

static int ze_event_sync(struct memtrace_device *d, struct memtrace_devevent *e)
{
    struct ze_event *ev = e->impl;
    if (!__atomic_load_n(&ev->recorded, __ATOMIC_ACQUIRE))
        return 0;
    return ze_err(zeEventHostSynchronize(ev->ev, UINT64_MAX));
}

static int ze_stream_wait(struct memtrace_device *d, struct memtrace_stream *s,
                          struct memtrace_devevent *e)
{
    struct ze_event *ev = e->impl;
    if (!__atomic_load_n(&ev->recorded, __ATOMIC_ACQUIRE))
        return 0;
    int rc;
    struct ze_stream *zs = ze_stream_of(d, s, &rc);
    if (rc)
        return rc;
    pthread_mutex_lock(&zs->lock);
    mt_workq_sync(zs->host);
    rc = ze_err(zeCommandListAppendWaitOnEvents(zs->list, 1, &ev->ev));
    pthread_mutex_unlock(&zs->lock);
    return rc;
}

static int ze_device_sync(struct memtrace_device *d)
{
    struct ze_dev *z = d->impl;
    int rc = 0;
    pthread_mutex_lock(&d->lock);
    for (struct memtrace_stream *s = d->streams; s; s = s->next) {
        int r = ze_stream_sync(d, s);
        if (r && !rc)
            rc = r;
    }
    pthread_mutex_unlock(&d->lock);
    pthread_mutex_lock(&z->lock);
    int have_default = z->defs != NULL;
    pthread_mutex_unlock(&z->lock);
    if (have_default) {
        int r = ze_stream_sync(d, NULL);
        if (r && !rc)
            rc = r;
    }
    return rc;
}

const struct mt_device_ops mt_device_ze_ops = {
    .name = "level_zero",
    .open = ze_open,
    .close = ze_close,
    .mem_info = ze_mem_info,
    .malloc = ze_malloc,
    .free = ze_free,
    .reserve = ze_reserve,
    .release = ze_release,
    .map = ze_map,
    .unmap = ze_unmap,
    .ptr = NULL,
    .stream_create = ze_stream_create,
    .stream_destroy = ze_stream_destroy,
    .launch = ze_launch,
    .stream_sync = ze_stream_sync,
    .event_create = ze_event_create,
    .event_destroy = ze_event_destroy,
    .event_record = ze_event_record,
    .event_query = ze_event_query,
    .event_sync = ze_event_sync,
    .stream_wait = ze_stream_wait,
    .device_sync = ze_device_sync,
};

#else /* !MEMTRACE_HAVE_LEVEL_ZERO */

static int ze_open_absent(struct memtrace_device *d, int index)
{
    mtx_log("level_zero backend: this memtrace was built without Level Zero; install libze-dev "
           "and rebuild");
    return MEMTRACE_ENOTSUP;
}

const struct mt_device_ops mt_device_ze_ops = {
    .name = "level_zero",
    .open = ze_open_absent,
};

#endif
