/* device_cuda.c: the CUDA backend, through the driver API.
 *
 * libcuda.so.1 is opened with dlopen on the first open of a "cuda" device (never
 * in a constructor: processes that never touch a device pay nothing); the driver
 * types come from mtx/cuda_driver.h, so memtrace builds without CUDA.
 * Every call first makes the device's primary context current on the calling
 * thread, so any thread may use the device. Kernels are host functions run with
 * cuLaunchHostFunc: in stream order, and like every host function they must not
 * call CUDA themselves. */
#include "config.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "mtx/cuda_driver.h"
#include "mtx/util.h"

static struct {
    PFN_cuInit Init;
    PFN_cuDeviceGetCount DeviceGetCount;
    PFN_cuDeviceGet DeviceGet;
    PFN_cuDeviceGetName DeviceGetName;
    PFN_cuDeviceTotalMem_v2 DeviceTotalMem;
    PFN_cuDevicePrimaryCtxRetain PrimaryCtxRetain;
    PFN_cuDevicePrimaryCtxRelease PrimaryCtxRelease;
    PFN_cuCtxSetCurrent CtxSetCurrent;
    PFN_cuCtxSynchronize CtxSynchronize;
    PFN_cuMemAlloc_v2 MemAlloc;
    PFN_cuMemFree_v2 MemFree;
    PFN_cuMemGetInfo_v2 MemGetInfo;
    PFN_cuMemAddressReserve MemAddressReserve;
    PFN_cuMemAddressFree MemAddressFree;
    PFN_cuMemCreate MemCreate;
    PFN_cuMemRelease MemRelease;
    PFN_cuMemMap MemMap;
    PFN_cuMemUnmap MemUnmap;
    PFN_cuMemSetAccess MemSetAccess;
    PFN_cuMemGetAllocationGranularity MemGetAllocationGranularity;
    PFN_cuStreamCreate StreamCreate;
    PFN_cuStreamDestroy_v2 StreamDestroy;
    PFN_cuStreamSynchronize StreamSynchronize;
    PFN_cuLaunchHostFunc LaunchHostFunc;
    PFN_cuEventCreate EventCreate;
    PFN_cuEventRecord EventRecord;
    PFN_cuEventQuery EventQuery;
    PFN_cuEventSynchronize EventSynchronize;
    PFN_cuEventDestroy_v2 EventDestroy;
    PFN_cuStreamWaitEvent StreamWaitEvent;
} cu;

static pthread_mutex_t cuda_load_lock = PTHREAD_MUTEX_INITIALIZER;
static void *cuda_lib;
static int cuda_init_rc = 1; /* 1: not tried yet */

struct cuda_dev {
    CUdevice dev;
    CUcontext ctx;
};

static int cuda_err(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS:
        return 0;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return MEMTRACE_EOOM;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
        return MEMTRACE_ENODEV;
    case CUDA_ERROR_NOT_SUPPORTED:
        return MEMTRACE_ENOTSUP;
    default:
        return MEMTRACE_EINVAL;
    }
}

/* Loads libcuda.so.1 and runs cuInit once per process; with cuda_load_lock held. */
static int cuda_load(void)
{
    if (cuda_init_rc != 1)
        return cuda_init_rc;
    /* RTLD_NODELETE: handles and host functions must stay valid for the process. */
    cuda_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!cuda_lib) {
        mtx_log("cuda backend: cannot load libcuda.so.1 (%s): no NVIDIA driver on this machine?",
               dlerror());
        return cuda_init_rc = MEMTRACE_ENODEV;
    }
    static const struct {
        const char *name;
        size_t off;
    } syms[] = {
#define SYM(field, name) {name, offsetof(__typeof__(cu), field)}
        SYM(Init, "cuInit"),
        SYM(DeviceGetCount, "cuDeviceGetCount"),
        SYM(DeviceGet, "cuDeviceGet"),
        SYM(DeviceGetName, "cuDeviceGetName"),
        SYM(DeviceTotalMem, "cuDeviceTotalMem_v2"),
        SYM(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
        SYM(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease"),
        SYM(CtxSetCurrent, "cuCtxSetCurrent"),
        SYM(CtxSynchronize, "cuCtxSynchronize"),
        SYM(MemAlloc, "cuMemAlloc_v2"),
        SYM(MemFree, "cuMemFree_v2"),
        SYM(MemGetInfo, "cuMemGetInfo_v2"),
        SYM(MemAddressReserve, "cuMemAddressReserve"),
        SYM(MemAddressFree, "cuMemAddressFree"),
        SYM(MemCreate, "cuMemCreate"),
        SYM(MemRelease, "cuMemRelease"),
        SYM(MemMap, "cuMemMap"),
        SYM(MemUnmap, "cuMemUnmap"),
        SYM(MemSetAccess, "cuMemSetAccess"),
        SYM(MemGetAllocationGranularity, "cuMemGetAllocationGranularity"),
        SYM(StreamCreate, "cuStreamCreate"),
        SYM(StreamDestroy, "cuStreamDestroy_v2"),
        SYM(StreamSynchronize, "cuStreamSynchronize"),
        SYM(LaunchHostFunc, "cuLaunchHostFunc"),
        SYM(EventCreate, "cuEventCreate"),
        SYM(EventRecord, "cuEventRecord"),
        SYM(EventQuery, "cuEventQuery"),
        SYM(EventSynchronize, "cuEventSynchronize"),
        SYM(EventDestroy, "cuEventDestroy_v2"),
        SYM(StreamWaitEvent, "cuStreamWaitEvent"),
#undef SYM
    };
    for (size_t i = 0; i < MTX_ARRAY_SIZE(syms); i++) {
        void *f = dlsym(cuda_lib, syms[i].name);
        if (!f) {
            mtx_log("cuda backend: libcuda.so.1 lacks %s: the driver is too old", syms[i].name);
            memset(&cu, 0, sizeof(cu));
            return cuda_init_rc = MEMTRACE_ENODEV;
        }
        memcpy((char *)&cu + syms[i].off, &f, sizeof(f));
    }
    CUresult r = cu.Init(0);
    if (r != CUDA_SUCCESS) {
        mtx_log("cuda backend: cuInit failed with CUDA error %d: no usable CUDA device", r);
        return cuda_init_rc = MEMTRACE_ENODEV;
    }
    return cuda_init_rc = 0;
}

static int cuda_cur(struct memtrace_device *d)
{
    struct cuda_dev *c = d->impl;
    return cuda_err(cu.CtxSetCurrent(c->ctx));
}

static int cuda_open(struct memtrace_device *d, int index)
{
    pthread_mutex_lock(&cuda_load_lock);
    int rc = cuda_load();
    pthread_mutex_unlock(&cuda_load_lock);
    if (rc)
        return rc;
    int count = 0;
    CUresult r = cu.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS || index >= count) {
        mtx_log("cuda backend: no CUDA device %d (%d present)", index, count);
        return MEMTRACE_ENODEV;
    }
    struct cuda_dev *c = calloc(1, sizeof(*c));
    if (!c)
        return MEMTRACE_ENOMEM;
    if ((r = cu.DeviceGet(&c->dev, index)) != CUDA_SUCCESS ||
        (r = cu.PrimaryCtxRetain(&c->ctx, c->dev)) != CUDA_SUCCESS) {
        mtx_log("cuda backend: cannot open CUDA device %d: CUDA error %d", index, r);
        free(c);
        return MEMTRACE_ENODEV;
    }
    d->impl = c;
    if (cu.DeviceGetName(d->name, (int)sizeof(d->name), c->dev) != CUDA_SUCCESS)
        mtx_format(d->name, sizeof(d->name), "CUDA device %d", index);
    d->name[sizeof(d->name) - 1] = '\0';
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, c->dev}};
    size_t g = 0;
    if (cuda_cur(d) == 0 &&
        cu.MemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
            CUDA_SUCCESS &&
        g)
        d->granularity = g;
    else
        d->granularity = (size_t)2 << 20;
    return 0;
}

static void cuda_close(struct memtrace_device *d)
{
    struct cuda_dev *c = d->impl;
    cu.PrimaryCtxRelease(c->dev);
    free(c);
}

static int cuda_mem_info(struct memtrace_device *d, uint64_t *free_bytes, uint64_t *total_bytes)
{
    int rc = cuda_cur(d);
    size_t f = 0, t = 0;
    if (rc || (rc = cuda_err(cu.MemGetInfo(&f, &t))))
        return rc;
    *free_bytes = f;
    *total_bytes = t;
    return 0;
}

static int cuda_malloc(struct memtrace_device *d, size_t size, uint64_t *addr)
{
    int rc = cuda_cur(d);
    CUdeviceptr p = 0;
    if (rc || (rc = cuda_err(cu.MemAlloc(&p, size))))
        return rc;
    *addr = p;
    return 0;
}

static int cuda_free(struct memtrace_device *d, uint64_t addr)
{
    int rc = cuda_cur(d);
    return rc ? rc : cuda_err(cu.MemFree(addr));
}

static int cuda_reserve(struct memtrace_device *d, size_t size, uint64_t *addr)
{
    if (size % d->granularity)
        return MEMTRACE_EINVAL;
    int rc = cuda_cur(d);
    CUdeviceptr p = 0;
    if (rc || (rc = cuda_err(cu.MemAddressReserve(&p, size, 0, 0, 0))))
        return rc;
    *addr = p;
    return 0;
}

static int cuda_release(struct memtrace_device *d, uint64_t addr, size_t size)
{
    int rc = cuda_cur(d);
    return rc ? rc : cuda_err(cu.MemAddressFree(addr, size));
}

static int cuda_map(struct memtrace_device *d, uint64_t addr, size_t size)
{
    struct cuda_dev *c = d->impl;
    if (size % d->granularity || addr % d->granularity)
        return MEMTRACE_EINVAL;
    int rc = cuda_cur(d);
    if (rc)
        return rc;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, c->dev}};
    CUmemGenericAllocationHandle h = 0;
    if ((rc = cuda_err(cu.MemCreate(&h, size, &prop, 0))))
        return rc;
    if ((rc = cuda_err(cu.MemMap(addr, size, 0, h, 0)))) {
        cu.MemRelease(h);
        return rc;
    }
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, c->dev},
                           CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if ((rc = cuda_err(cu.MemSetAccess(addr, size, &acc, 1)))) {
        cu.MemUnmap(addr, size);
        cu.MemRelease(h);
        return rc;
    }
    /* The mapping holds the physical memory; releasing the handle now means unmap
     * alone gives it back, so no handle table is needed. */
    cu.MemRelease(h);
    return 0;
}

static int cuda_unmap(struct memtrace_device *d, uint64_t addr, size_t size)
{
    int rc = cuda_cur(d);
    return rc ? rc : cuda_err(cu.MemUnmap(addr, size));
}

static int cuda_stream_create(struct memtrace_device *d, struct memtrace_stream *s)
{
    int rc = cuda_cur(d);
    CUstream st = NULL;
    if (rc || (rc = cuda_err(cu.StreamCreate(&st, CU_STREAM_NON_BLOCKING))))
        return rc;
    s->impl = st;
    s->id = (uint64_t)(uintptr_t)st;
    return 0;
}

static CUstream cuda_stream(struct memtrace_stream *s)
{
    return s ? (CUstream)s->impl : NULL;
}

static int cuda_stream_destroy(struct memtrace_device *d, struct memtrace_stream *s)
{
    int rc = cuda_cur(d);
    return rc ? rc : cuda_err(cu.StreamDestroy(cuda_stream(s)));
}

static int cuda_launch(struct memtrace_device *d, struct memtrace_stream *s, memtrace_kernel_fn fn,
                       void *arg)
{
    int rc = cuda_cur(d);
    return rc ? rc : cuda_err(cu.LaunchHostFunc(cuda_stream(s), fn, arg));
}

static int cuda_stream_sync(struct memtrace_device *d, struct memtrace_stream *s)
{
    int rc = cuda_cur(d);
    return rc ? rc : cuda_err(cu.StreamSynchronize(cuda_stream(s)));
}

static int cuda_event_create(struct memtrace_device *d, struct memtrace_devevent *e)
{
    int rc = cuda_cur(d);
    CUevent ev = NULL;
    if (rc || (rc = cuda_err(cu.EventCreate(&ev, CU_EVENT_DISABLE_TIMING))))
        return rc;
    e->impl = ev;
    return 0;
}

static int cuda_event_destroy(struct memtrace_device *d, struct memtrace_devevent *e)
{
    int rc = cuda_cur(d);
    return rc ? rc : cuda_err(cu.EventDestroy((CUevent)e->impl));
}

static int cuda_event_record(struct memtrace_device *d, struct memtrace_devevent *e,
                             struct memtrace_stream *s)
{
    int rc = cuda_cur(d);
    return rc ? rc : cuda_err(cu.EventRecord((CUevent)e->impl, cuda_stream(s)));
}

static int cuda_event_query(struct memtrace_device *d, struct memtrace_devevent *e)
{
    int rc = cuda_cur(d);
    if (rc)
        return rc;
    CUresult r = cu.EventQuery((CUevent)e->impl);
    if (r == CUDA_ERROR_NOT_READY)
        return 0;
    return r == CUDA_SUCCESS ? 1 : cuda_err(r);
}

static int cuda_event_sync(struct memtrace_device *d, struct memtrace_devevent *e)
{
    int rc = cuda_cur(d);
    return rc ? rc : cuda_err(cu.EventSynchronize((CUevent)e->impl));
}

static int cuda_stream_wait(struct memtrace_device *d, struct memtrace_stream *s,
                            struct memtrace_devevent *e)
{
    int rc = cuda_cur(d);
    return rc ? rc : cuda_err(cu.StreamWaitEvent(cuda_stream(s), (CUevent)e->impl, 0));
}

static int cuda_device_sync(struct memtrace_device *d)
{
    int rc = cuda_cur(d);
    return rc ? rc : cuda_err(cu.CtxSynchronize());
}

const struct mt_device_ops mt_device_cuda_ops = {
    .name = "cuda",
    .open = cuda_open,
    .close = cuda_close,
    .mem_info = cuda_mem_info,
    .malloc = cuda_malloc,
    .free = cuda_free,
    .reserve = cuda_reserve,
    .release = cuda_release,
    .map = cuda_map,
    .unmap = cuda_unmap,
    .ptr = NULL,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .launch = cuda_launch,
    .stream_sync = cuda_stream_sync,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_sync = cuda_event_sync,
    .stream_wait = cuda_stream_wait,
    .device_sync = cuda_device_sync,
};
