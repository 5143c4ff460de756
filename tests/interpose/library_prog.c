/* library_prog.c: a program that uses memtrace's caching allocator on the cuda
 * backend through the shared libmemtrace (which finds the driver with dlopen and
 * dlsym) and never calls the driver itself. Run under the preload, its allocator's
 * segment calls must be recorded once, by the allocator. Prints the driver's real
 * call counters (C <symbol> <calls>) and the allocator's (S <name> <value>). */
#include <dlfcn.h>
#include <stdio.h>

#include "memtrace_alloc.h"

#define MIB (1024ull * 1024)

int main(void)
{
    struct memtrace_device *d;
    struct memtrace_allocator *a;
    static uint64_t p[53];
    if (memtrace_device_open(&d, "cuda", 0) != 0 || memtrace_alloc_create(&a, d) != 0)
        return 2;
    /* 50 small blocks (two per 2 MiB segment) and 3 large ones (a segment each). */
    for (int i = 0; i < 53; i++)
        if (memtrace_alloc_malloc(a, i < 50 ? MIB : 30 * MIB, NULL, &p[i]) != 0)
            return 3;
    for (int i = 0; i < 53; i++)
        if (memtrace_alloc_free(a, p[i]) != 0)
            return 4;
    if (memtrace_alloc_empty_cache(a) != 0)
        return 5;
    struct memtrace_alloc_stats st;
    memtrace_alloc_get_stats(a, &st);
    printf("S num_device_alloc %lld\nS num_device_free %lld\n", (long long)st.num_device_alloc,
           (long long)st.num_device_free);
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    long long (*calls)(const char *) =
        cuda != NULL ? (long long (*)(const char *))dlsym(cuda, "fake_cuda_calls") : NULL;
    if (calls == NULL)
        return 6;
    printf("C cuMemAlloc_v2 %lld\nC cuMemFree_v2 %lld\n", calls("cuMemAlloc_v2"),
           calls("cuMemFree_v2"));
    memtrace_alloc_destroy(a);
    memtrace_device_close(d);
    return 0;
}
