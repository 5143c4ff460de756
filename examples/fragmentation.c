/* fragmentation: free memory that cannot be used.
 *
 * On a 64 MiB host device, eight 6 MiB tensors fill three 20 MiB segments of the
 * caching allocator (three tensors per segment and a 2 MiB tail). Freeing every
 * other tensor leaves 36 MiB free in the cache, yet a 12 MiB request fails: no free
 * hole is large enough and the device has only 4 MiB left. The program prints the
 * allocator's statistics at each stage, then frees everything and empties the cache.
 *
 *   fragmentation [out.memtrace]    (default fragmentation.memtrace) */
#include <stdio.h>

#include "args.h"
#include "memtrace.h"
#include "memtrace_alloc.h"
#include "memtrace_device.h"

#define MiB (1024.0 * 1024.0)

static void show(struct memtrace_allocator *a, const char *stage)
{
    struct memtrace_alloc_stats st;
    uint64_t f = 0, t = 0;
    memtrace_alloc_get_stats(a, &st);
    memtrace_device_mem_info(memtrace_alloc_device(a), &f, &t);
    printf("%-34s allocated %5.1f MiB  reserved %5.1f MiB  cached free %5.1f MiB  "
           "device free %5.1f MiB\n",
           stage, st.allocated_bytes[0].current / MiB, st.reserved_bytes[0].current / MiB,
           (st.reserved_bytes[0].current - st.allocated_bytes[0].current) / MiB, f / MiB);
}

int main(int argc, char **argv)
{
    int rc = args_check(argc, argv, 1,
                        "usage: fragmentation [OUT.memtrace]\n"
                        "Shows a request that fails on a 64 MiB host device while 36 MiB sit\n"
                        "free in the caching allocator, and writes the recording to\n"
                        "OUT.memtrace (default fragmentation.memtrace).\n");
    if (rc >= 0)
        return rc;
    const char *out = argc > 1 ? argv[1] : "fragmentation.memtrace";
    struct memtrace_options o;
    memtrace_options_init(&o);
    memtrace_record_history(&o);
    struct memtrace_device *dev;
    struct memtrace_allocator *a;
    rc = memtrace_device_open_host(&dev, 64 << 20);
    if (rc == 0)
        rc = memtrace_alloc_create(&a, dev);
    if (rc) {
        fprintf(stderr, "fragmentation: setup failed: %s\n", memtrace_strerror(rc));
        return 1;
    }
    uint64_t t[8];
    memtrace_annotate_push("fill");
    for (int i = 0; i < 8; i++)
        if ((rc = memtrace_alloc_malloc(a, 6 << 20, NULL, &t[i]))) {
            fprintf(stderr, "fragmentation: %s\n", memtrace_strerror(rc));
            return 1;
        }
    memtrace_annotate_pop();
    show(a, "eight 6 MiB tensors:");

    memtrace_annotate_push("free every other");
    for (int i = 0; i < 8; i += 2)
        memtrace_alloc_free(a, t[i]);
    memtrace_annotate_pop();
    show(a, "every other one freed:");

    uint64_t big;
    memtrace_annotate_mark("12 MiB request");
    struct memtrace_alloc_stats st;
    memtrace_alloc_get_stats(a, &st);
    rc = memtrace_alloc_malloc(a, 12 << 20, NULL, &big);
    printf("a 12 MiB request: %s, although %.0f MiB sit free in the cache\n",
           rc ? memtrace_strerror(rc) : "succeeded",
           (st.reserved_bytes[0].current - st.allocated_bytes[0].current) / MiB);
    show(a, "after the failed request:");
    if (rc == 0)
        memtrace_alloc_free(a, big);

    for (int i = 1; i < 8; i += 2)
        memtrace_alloc_free(a, t[i]);
    memtrace_alloc_empty_cache(a);
    show(a, "all freed, cache emptied:");
    rc = memtrace_alloc_malloc(a, 12 << 20, NULL, &big);
    printf("the same 12 MiB request now: %s\n", rc ? memtrace_strerror(rc) : "succeeded");
    if (rc == 0)
        memtrace_alloc_free(a, big);

    char summary[8192];
    memtrace_alloc_summary(a, summary, sizeof(summary));
    fputs(summary, stdout);
    if (memtrace_dump_snapshot(out) == 0)
        printf("wrote %s\n", out);
    memtrace_record_history(NULL);
    memtrace_alloc_destroy(a);
    memtrace_device_close(dev);
    return 0;
}
