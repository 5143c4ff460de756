/* oom: what memtrace shows when a device runs out of memory.
 *
 * A 64 MiB host device, memtrace's caching allocator with oom_snapshot set, and a
 * loop that keeps 6 MiB tensors alive until the device says no. The allocator
 * records an oom event (with the device's free bytes), calls the OOM observers
 * (ours prints the figures) and its built-in observer writes a snapshot; this
 * program then reads that snapshot back and prints the oom event and the segments
 * that held the memory.
 *
 *   oom [snapshot path]        (default oom.memtrace) */
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "memtrace.h"
#include "memtrace_alloc.h"
#include "memtrace_device.h"
#include "memtrace_snapshot.h"

#define MiB (1024.0 * 1024.0)

static void on_oom(void *ctx, struct memtrace_allocator *a, int device, uint64_t size,
                   uint64_t device_free, uint64_t device_total)
{
    printf("observer: device %d out of memory asking for %.1f MiB: %.1f MiB free of %.1f MiB\n",
           device, size / MiB, device_free / MiB, device_total / MiB);
}

int main(int argc, char **argv)
{
    int rc = args_check(argc, argv, 1,
                        "usage: oom [OUT.memtrace]\n"
                        "Fills a 64 MiB host device until an allocation fails; the allocator's\n"
                        "out-of-memory observer writes a snapshot to OUT.memtrace (default\n"
                        "oom.memtrace), which the program then reads back.\n");
    if (rc >= 0)
        return rc;
    const char *path = argc > 1 ? argv[1] : "oom.memtrace";
    struct memtrace_options o;
    memtrace_options_init(&o);
    memtrace_record_history(&o);

    struct memtrace_device *dev;
    struct memtrace_allocator *a;
    rc = memtrace_device_open_host(&dev, 64 << 20);
    if (rc == 0)
        rc = memtrace_alloc_create(&a, dev);
    char conf[600];
    snprintf(conf, sizeof(conf), "oom_snapshot:%s", path);
    if (rc == 0)
        rc = memtrace_alloc_configure(a, conf, NULL);
    if (rc) {
        fprintf(stderr, "oom: setup failed: %s\n", memtrace_strerror(rc));
        return 1;
    }
    memtrace_alloc_oom_observer_add(on_oom, NULL);
    printf("oom: a 64 MiB host device; allocating 6 MiB tensors until it is full\n");

    uint64_t blocks[64];
    int n = 0;
    memtrace_category_push("activations");
    for (; n < 64; n++) {
        rc = memtrace_alloc_malloc(a, 6 << 20, NULL, &blocks[n]);
        if (rc)
            break;
    }
    memtrace_category_pop();
    printf("allocation %d failed with \"%s\" after %.0f MiB were handed out\n", n + 1,
           memtrace_strerror(rc), n * 6.0);

    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    if (memtrace_reader_open(&r, path, &err) != 0) {
        fprintf(stderr, "oom: the OOM snapshot %s cannot be read: %s\n", path,
                memtrace_strerror(err.code));
        return 1;
    }
    struct memtrace_event ev;
    int allocs = 0;
    while (memtrace_reader_next(r, &ev) == 1) {
        if (ev.action == MEMTRACE_ALLOC)
            allocs++;
        if (ev.action == MEMTRACE_OOM)
            printf("snapshot %s: oom event: %.1f MiB requested, device free %.1f MiB "
                   "(after %d alloc events)\n",
                   path, ev.size / MiB, ev.aux / MiB, allocs);
    }
    for (size_t i = 0; i < memtrace_reader_segment_count(r); i++) {
        const struct memtrace_segment *s = memtrace_reader_segment(r, i);
        printf("  segment 0x%llx: %5.1f MiB, %5.1f MiB allocated in %zu blocks\n",
               (unsigned long long)s->addr, s->total_size / MiB, s->allocated_size / MiB,
               s->nblocks);
    }
    memtrace_reader_close(r);

    for (int i = 0; i < n; i++)
        memtrace_alloc_free(a, blocks[i]);
    memtrace_record_history(NULL);
    memtrace_alloc_destroy(a);
    memtrace_device_close(dev);
    return 0;
}
