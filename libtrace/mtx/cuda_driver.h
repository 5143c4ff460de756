/* cuda_driver.h: the subset of the CUDA driver API that memtrace uses, declared
 * here so that nothing needs CUDA installed to build: libtrace/device_cuda.c calls
 * these functions, interpose/cuda.c wraps them, tests/fakes/fake_cuda.c implements
 * them. Types and values are the driver's (cuda.h); handles are pointers to
 * incomplete structures with the driver's tag names, so a fake may complete them.
 * PFN_<name> is the type of the driver function <name>, the ABI version it names
 * included (cuMemAlloc_v2 is the 64-bit one; unversioned cuMemAlloc is not here). */
#ifndef MEMTRACE_MTX_CUDA_DRIVER_H
#define MEMTRACE_MTX_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef uint64_t cuuint64_t;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef void (*CUhostFn)(void *user_data);

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999,
};

enum { CU_STREAM_NON_BLOCKING = 1, CU_EVENT_DISABLE_TIMING = 2 };
enum { CU_MEM_ALLOCATION_TYPE_PINNED = 1, CU_MEM_LOCATION_TYPE_DEVICE = 1 };
enum { CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3, CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0 };
enum { CU_STREAM_CAPTURE_MODE_RELAXED = 2 };
enum { CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2 };
enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};
/* The stream handle that means "the calling thread's default stream". */
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

typedef struct {
    int type; /* CUmemLocationType */
    int id;
} CUmemLocation;

typedef struct {
    int type;                 /* CUmemAllocationType */
    int requestedHandleTypes; /* CUmemAllocationHandleType */
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;

typedef struct {
    CUmemLocation location;
    int flags; /* CUmemAccess_flags */
} CUmemAccessDesc;

typedef struct {
    int allocType;
    int handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;

typedef struct {
    CUmemPoolProps poolProps;
    const CUmemAccessDesc *accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    CUdeviceptr dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS;

_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp layout");
_Static_assert(sizeof(CUmemPoolProps) == 88, "CUmemPoolProps layout");

/* Initialisation, devices, contexts. */
typedef CUresult (*PFN_cuInit)(unsigned flags);
typedef CUresult (*PFN_cuDeviceGetCount)(int *count);
typedef CUresult (*PFN_cuDeviceGet)(CUdevice *dev, int ordinal);
typedef CUresult (*PFN_cuDeviceGetName)(char *name, int len, CUdevice dev);
typedef CUresult (*PFN_cuDeviceTotalMem_v2)(size_t *bytes, CUdevice dev);
typedef CUresult (*PFN_cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
typedef CUresult (*PFN_cuDevicePrimaryCtxRelease)(CUdevice dev);
typedef CUresult (*PFN_cuCtxGetDevice)(CUdevice *dev);
typedef CUresult (*PFN_cuCtxGetCurrent)(CUcontext *ctx);
typedef CUresult (*PFN_cuCtxSetCurrent)(CUcontext ctx);
typedef CUresult (*PFN_cuCtxSynchronize)(void);
typedef CUresult (*PFN_cuThreadExchangeStreamCaptureMode)(int *mode);

/* Memory. */
typedef CUresult (*PFN_cuMemAlloc_v2)(CUdeviceptr *dptr, size_t bytesize);
typedef CUresult (*PFN_cuMemAllocPitch_v2)(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                           size_t height, unsigned elem_size);
typedef CUresult (*PFN_cuMemAllocManaged)(CUdeviceptr *dptr, size_t bytesize, unsigned flags);
typedef CUresult (*PFN_cuMemFree_v2)(CUdeviceptr dptr);
typedef CUresult (*PFN_cuMemAllocHost_v2)(void **pp, size_t bytesize);
typedef CUresult (*PFN_cuMemHostAlloc)(void **pp, size_t bytesize, unsigned flags);
typedef CUresult (*PFN_cuMemFreeHost)(void *p);
typedef CUresult (*PFN_cuMemHostRegister_v2)(void *p, size_t bytesize, unsigned flags);
typedef CUresult (*PFN_cuMemHostUnregister)(void *p);
typedef CUresult (*PFN_cuMemAllocAsync)(CUdeviceptr *dptr, size_t bytesize, CUstream s);
typedef CUresult (*PFN_cuMemAllocFromPoolAsync)(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream s);
typedef CUresult (*PFN_cuMemFreeAsync)(CUdeviceptr dptr, CUstream s);
typedef CUresult (*PFN_cuMemGetInfo_v2)(size_t *free_bytes, size_t *total_bytes);

/* Virtual memory. */
typedef CUresult (*PFN_cuMemCreate)(CUmemGenericAllocationHandle *handle, size_t size,
                                    const CUmemAllocationProp *prop, unsigned long long flags);
typedef CUresult (*PFN_cuMemRelease)(CUmemGenericAllocationHandle handle);
typedef CUresult (*PFN_cuMemMap)(CUdeviceptr ptr, size_t size, size_t offset,
                                 CUmemGenericAllocationHandle handle, unsigned long long flags);
typedef CUresult (*PFN_cuMemUnmap)(CUdeviceptr ptr, size_t size);
typedef CUresult (*PFN_cuMemAddressReserve)(CUdeviceptr *ptr, size_t size, size_t alignment,
                                            CUdeviceptr addr, unsigned long long flags);
typedef CUresult (*PFN_cuMemAddressFree)(CUdeviceptr ptr, size_t size);
typedef CUresult (*PFN_cuMemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                       size_t count);
typedef CUresult (*PFN_cuMemGetAllocationGranularity)(size_t *granularity,
                                                      const CUmemAllocationProp *prop, int option);

/* Streams, events, graphs. */
typedef CUresult (*PFN_cuStreamCreate)(CUstream *s, unsigned flags);
typedef CUresult (*PFN_cuStreamDestroy_v2)(CUstream s);
typedef CUresult (*PFN_cuStreamSynchronize)(CUstream s);
typedef CUresult (*PFN_cuStreamWaitEvent)(CUstream s, CUevent e, unsigned flags);
typedef CUresult (*PFN_cuLaunchHostFunc)(CUstream s, CUhostFn fn, void *user_data);
typedef CUresult (*PFN_cuEventCreate)(CUevent *e, unsigned flags);
typedef CUresult (*PFN_cuEventRecord)(CUevent e, CUstream s);
typedef CUresult (*PFN_cuEventQuery)(CUevent e);
typedef CUresult (*PFN_cuEventSynchronize)(CUevent e);
typedef CUresult (*PFN_cuEventDestroy_v2)(CUevent e);
typedef CUresult (*PFN_cuGraphAddMemAllocNode)(CUgraphNode *node, CUgraph graph,
                                               const CUgraphNode *deps, size_t ndeps,
                                               CUDA_MEM_ALLOC_NODE_PARAMS *params);
typedef CUresult (*PFN_cuGraphAddMemFreeNode)(CUgraphNode *node, CUgraph graph,
                                              const CUgraphNode *deps, size_t ndeps,
                                              CUdeviceptr dptr);

/* Entry points. */
typedef CUresult (*PFN_cuGetProcAddress)(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags);
typedef CUresult (*PFN_cuGetProcAddress_v2)(const char *symbol, void **pfn, int version,
                                            cuuint64_t flags, int *status);

/* The per-thread-stream variants take what their legacy forms take. */
typedef PFN_cuMemAllocAsync PFN_cuMemAllocAsync_ptsz;
typedef PFN_cuMemAllocFromPoolAsync PFN_cuMemAllocFromPoolAsync_ptsz;
typedef PFN_cuMemFreeAsync PFN_cuMemFreeAsync_ptsz;

/* True when fn (a function) has exactly the type of the driver function name. */
#define MT_CU_SAME_TYPE(fn, name) __builtin_types_compatible_p(__typeof__(&(fn)), PFN_##name)

#endif
