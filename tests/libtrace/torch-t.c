/* torch-t: PyTorch's pluggable-allocator entry points over the fake libcuda. */
#include <stdlib.h>
#include <unistd.h>

#include "cache_impl.h"
#include "tests/tap.h"

int main(int argc, char **argv)
{
    struct memtrace_alloc_stats st;
    struct memtrace_allocator *a;
    void *p, *q, *stream = (void *)(uintptr_t)0x1000;
    (void)argc;
    /* The fake driver is found through LD_LIBRARY_PATH, which the loader reads only at
     * start: set it and run again. */
    if (!getenv("TORCH_T_CHILD")) {
        const char *top = getenv("top_builddir");
        char path[4096];
        mtx_format(path, sizeof(path), "%s/tests/fakes", top ? top : ".");
        setenv("LD_LIBRARY_PATH", path, 1);
        setenv("TORCH_T_CHILD", "1", 1);
        execv(tap_self(argv[0]), argv);
        skip_all("cannot re-execute");
    }
    p = memtrace_torch_malloc(1000, 0, stream);
    if (!p)
        skip_all("no cuda device (fake libcuda not built)");
    a = memtrace_torch_allocator(0);
    ok(a != NULL, "allocator created on first use");
    q = memtrace_torch_malloc(1000, 0, stream);
    is_int((intptr_t)p + 1024, (intptr_t)q, "second block follows in the same segment");
    memtrace_alloc_get_stats(a, &st);
    is_int(2048, st.allocated_bytes[0].current, "2 x 1024 B allocated");
    is_int(2 << 20, st.reserved_bytes[0].current, "one 2 MiB segment");
    memtrace_torch_free(p, 1000, 0, stream);
    memtrace_torch_free(q, 1000, 0, stream);
    ok(memtrace_torch_malloc(-1, 0, stream) == NULL, "negative size refused");
    ok(memtrace_torch_malloc(1, 99, stream) == NULL, "absent device gives NULL");
    memtrace_torch_empty_cache();
    memtrace_alloc_get_stats(a, &st);
    is_int(0, st.reserved_bytes[0].current, "empty_cache returns the segment");
    is_int(1, st.num_device_free, "one cuMemFree");
    done_testing();
    return exit_status();
}
