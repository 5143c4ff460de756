/* getproc_prog.c: reaches the (fake) driver as CUDA runtimes do: dlopen, then
 * dlsym(h, "cuGetProcAddress_v2"), then one query per function by base name,
 * version and flags. Prints E lines as cuda_prog does, then C counters. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef CUresult (*getproc_fn)(const char *, void **, int, unsigned long long, int *);

#define PTDS 2ull

static getproc_fn getproc;

static void *get(const char *name, int version, unsigned long long flags)
{
    void *p = NULL;
    int status = -1;
    if (getproc(name, &p, version, flags, &status) != 0 || p == NULL) {
        fprintf(stderr, "getproc_prog: %s not found\n", name);
        exit(3);
    }
    return p;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            fprintf(stderr, "getproc_prog: %s failed\n", #call);                                   \
            exit(3);                                                                               \
        }                                                                                          \
    } while (0)

int main(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "getproc_prog: %s\n", dlerror());
        return 3;
    }
    getproc = (getproc_fn)dlsym(h, "cuGetProcAddress_v2");
    long long (*calls)(const char *) = (long long (*)(const char *))dlsym(h, "fake_cuda_calls");
    if (getproc == NULL || calls == NULL)
        return 3;

    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))get("cuInit", 12000, 0);
    CUresult (*dev_get)(int *, int) = (CUresult(*)(int *, int))get("cuDeviceGet", 12000, 0);
    CUresult (*retain)(void **, int) =
        (CUresult(*)(void **, int))get("cuDevicePrimaryCtxRetain", 12000, 0);
    CUresult (*set)(void *) = (CUresult(*)(void *))get("cuCtxSetCurrent", 12000, 0);
    CUresult (*alloc)(CUdeviceptr *, size_t) =
        (CUresult(*)(CUdeviceptr *, size_t))get("cuMemAlloc", 12000, 0);
    CUresult (*freep)(CUdeviceptr) = (CUresult(*)(CUdeviceptr))get("cuMemFree", 12000, 0);
    CUresult (*alloc_async)(CUdeviceptr *, size_t, void *) =
        (CUresult(*)(CUdeviceptr *, size_t, void *))get("cuMemAllocAsync", 12000, PTDS);
    CUresult (*free_async)(CUdeviceptr, void *) =
        (CUresult(*)(CUdeviceptr, void *))get("cuMemFreeAsync", 12000, PTDS);
    CUresult (*alloc_legacy)(CUdeviceptr *, size_t, void *) =
        (CUresult(*)(CUdeviceptr *, size_t, void *))get("cuMemAllocAsync", 12000, 0);
    CUresult (*free_legacy)(CUdeviceptr, void *) =
        (CUresult(*)(CUdeviceptr, void *))get("cuMemFreeAsync", 12000, 0);
    CUresult (*alloc32)(unsigned *, unsigned) =
        (CUresult(*)(unsigned *, unsigned))get("cuMemAlloc", 2000, 0);
    CUresult (*free32)(unsigned) = (CUresult(*)(unsigned))get("cuMemFree", 2000, 0);
    /* The resolver asked through itself must stay wrapped. */
    getproc_fn again = (getproc_fn)get("cuGetProcAddress", 12000, 0);

    int dev;
    void *ctx;
    CHECK(init(0));
    CHECK(dev_get(&dev, 0));
    CHECK(retain(&ctx, dev));
    CHECK(set(ctx));

    CUdeviceptr a, b, c;
    unsigned small;
    CHECK(alloc(&a, 1 << 20));
    printf("E segment_alloc cuMemAlloc_v2 0x%llx %u 0\n", a, 1u << 20);
    CHECK(alloc_async(&b, 3000, NULL));
    printf("E segment_alloc cuMemAllocAsync_ptsz 0x%llx 3000 0\n", b);
    CHECK(alloc_legacy(&c, 5000, NULL));
    printf("E segment_alloc cuMemAllocAsync 0x%llx 5000 0\n", c);
    CHECK(alloc32(&small, 128));
    CHECK(free32(small));
    getproc = again;
    CUresult (*free_again)(CUdeviceptr) = (CUresult(*)(CUdeviceptr))get("cuMemFree", 12000, 0);
    CHECK(free_async(b, NULL));
    printf("E segment_free cuMemFreeAsync_ptsz 0x%llx 3000 0\n", b);
    CHECK(free_legacy(c, NULL));
    printf("E segment_free cuMemFreeAsync 0x%llx 5000 0\n", c);
    CHECK(free_again(a));
    printf("E segment_free cuMemFree_v2 0x%llx %u 0\n", a, 1u << 20);
    (void)freep;

    static const char *const names[] = {
        "cuMemAlloc_v2",   "cuMemAlloc",           "cuMemFree_v2",   "cuMemFree",
        "cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuMemFreeAsync", "cuMemFreeAsync_ptsz"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        printf("C %s %lld\n", names[i], calls(names[i]));
    return 0;
}
