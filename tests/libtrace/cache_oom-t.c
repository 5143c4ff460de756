/* cache_oom-t: the host device failing allocations at chosen points
 * (MEMTRACE_HOST_FAIL_AT, test-only) and for want of room. The device returns the
 * same error either way and its accounting stays exact; the caching allocator
 * retries, then returns that error to its caller, tells the OOM observers and
 * records an oom event in place with the bytes asked for and the device's free
 * bytes then. A bad value is one line and no device. */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memtrace.h"
#include "memtrace_alloc.h"
#include "memtrace_device.h"
#include "memtrace_snapshot.h"
#include "tests/tap.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

static char dir[] = "/tmp/cache-oom-t-XXXXXX";

static void device_calls(void)
{
    struct memtrace_device *d = NULL;
    uint64_t a[4] = {0}, fb = 0, tb = 0;
    setenv("MEMTRACE_HOST_FAIL_AT", "2,4", 1);
    is_int(0, memtrace_device_open_host(&d, GiB), "host device with MEMTRACE_HOST_FAIL_AT=2,4");
    unsetenv("MEMTRACE_HOST_FAIL_AT");
    if (d == NULL)
        bail_out("no host device");
    is_int(0, memtrace_device_malloc(d, MiB, &a[0]), "allocation 1 succeeds");
    is_int(MEMTRACE_EOOM, memtrace_device_malloc(d, MiB, &a[1]), "allocation 2 fails: EOOM");
    is_int(0, memtrace_device_malloc(d, MiB, &a[2]), "allocation 3 succeeds");
    is_int(0, memtrace_device_reserve(d, 4 * MiB, &a[3]), "a reservation is not an allocation");
    is_int(MEMTRACE_EOOM, memtrace_device_map(d, a[3], 2 * MiB), "allocation 4, a map, fails");
    is_int(0, memtrace_device_map(d, a[3], 2 * MiB), "allocation 5, the same map, succeeds");
    is_int(MEMTRACE_EOOM, memtrace_device_malloc(d, 2 * GiB, &a[1]),
           "beyond the capacity: the same EOOM");
    memtrace_device_mem_info(d, &fb, &tb);
    is_int((long long)(GiB - 4 * MiB), (long long)fb, "free bytes count only what succeeded");
    memtrace_device_unmap(d, a[3], 2 * MiB);
    memtrace_device_release(d, a[3], 4 * MiB);
    memtrace_device_free(d, a[0]);
    memtrace_device_free(d, a[2]);
    memtrace_device_mem_info(d, &fb, &tb);
    is_int((long long)GiB, (long long)fb, "all back after the frees");
    memtrace_device_close(d);
}

static void bad_value(void)
{
    char err[300];
    snprintf(err, sizeof err, "%s/err", dir);
    int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600), saved = dup(2);
    struct memtrace_device *d = NULL;
    setenv("MEMTRACE_HOST_FAIL_AT", "3,x", 1);
    fflush(stderr);
    dup2(fd, 2);
    int rc = memtrace_device_open_host(&d, GiB);
    dup2(saved, 2);
    close(saved);
    close(fd);
    unsetenv("MEMTRACE_HOST_FAIL_AT");
    is_int(MEMTRACE_ECONFIG, rc, "MEMTRACE_HOST_FAIL_AT=3,x: ECONFIG, no device");
    char text[400] = "";
    fd = open(err, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : 0;
    text[n > 0 ? n : 0] = '\0';
    if (fd >= 0)
        close(fd);
    ok(strncmp(text, "memtrace: MEMTRACE_HOST_FAIL_AT=\"3,x\"", 37) == 0 &&
           strchr(text, '\n') == text + strlen(text) - 1,
       "one line names the variable and its value");
    unlink(err);
}

struct seen {
    int calls;
    uint64_t size, free_bytes, total;
};

static void observer(void *ctx, struct memtrace_allocator *a, int device, uint64_t size,
                     uint64_t device_free, uint64_t device_total)
{
    (void)a, (void)device;
    struct seen *s = ctx;
    s->calls++;
    s->size = size;
    s->free_bytes = device_free;
    s->total = device_total;
}

static void allocator(void)
{
    struct memtrace_device *d = NULL;
    struct memtrace_allocator *a = NULL;
    char path[300];
    snprintf(path, sizeof path, "%s/oom.memtrace", dir);
    /* The allocator's second segment needs three tries: at once, after freeing the
     * pool's cache, after freeing every cache. */
    setenv("MEMTRACE_HOST_FAIL_AT", "2,3", 1);
    if (memtrace_device_open_host(&d, GiB) != 0 || memtrace_alloc_create(&a, d) != 0)
        bail_out("no host device or allocator");
    unsetenv("MEMTRACE_HOST_FAIL_AT");
    struct seen seen = {0};
    int h = memtrace_alloc_oom_observer_add(observer, &seen);
    struct memtrace_options o;
    memtrace_options_init(&o);
    o.stream_path = path;
    is_int(0, memtrace_record_history(&o), "recording");

    uint64_t p[3] = {0};
    is_int(0, memtrace_alloc_malloc(a, 5 * MiB, NULL, &p[0]), "5 MiB: a 20 MiB segment");
    is_int(MEMTRACE_EOOM, memtrace_alloc_malloc(a, 30 * MiB, NULL, &p[1]),
           "30 MiB while the device fails: EOOM, as the device said");
    is_int(1, seen.calls, "the OOM observer was told");
    ok(seen.size == 30 * MiB && seen.free_bytes == GiB - 20 * MiB && seen.total == GiB,
       "with the size, the device's free and total bytes (%llu, %llu, %llu)",
       (unsigned long long)seen.size, (unsigned long long)seen.free_bytes,
       (unsigned long long)seen.total);
    is_int(0, memtrace_alloc_malloc(a, 30 * MiB, NULL, &p[1]), "30 MiB again: the device has it");
    is_int(MEMTRACE_EOOM, memtrace_alloc_malloc(a, 2 * GiB, NULL, &p[2]),
           "2 GiB on a 1 GiB device: the same EOOM");
    struct memtrace_alloc_stats st;
    memtrace_alloc_get_stats(a, &st);
    is_int(2, st.num_ooms, "two ooms counted");
    memtrace_alloc_free(a, p[0]);
    memtrace_alloc_free(a, p[1]);
    memtrace_record_history(NULL);
    memtrace_alloc_oom_observer_remove(h);

    struct memtrace_reader *r = NULL;
    struct memtrace_errinfo err;
    struct memtrace_event e, ev[64];
    int n = 0;
    if (memtrace_reader_open(&r, path, &err) != 0)
        bail_out(err.text);
    while (n < 64 && memtrace_reader_next(r, &e) == 1)
        if (e.action != MEMTRACE_COUNTER)
            ev[n++] = e;
    memtrace_reader_close(r);
    /* segment_alloc, alloc, oom, segment_alloc, alloc, oom, ... */
    ok(n > 5 && ev[0].action == MEMTRACE_SEGMENT_ALLOC && ev[1].action == MEMTRACE_ALLOC &&
           ev[2].action == MEMTRACE_OOM && ev[3].action == MEMTRACE_SEGMENT_ALLOC &&
           ev[4].action == MEMTRACE_ALLOC && ev[5].action == MEMTRACE_OOM,
       "each oom event stands where the allocation failed");
    ok(n > 2 && ev[2].size == 30 * MiB && ev[2].requested_size == 30 * MiB && ev[2].device == 0,
       "the injected one: 30 MiB asked for on device 0");
    is_int((long long)(GiB - 20 * MiB), n > 2 ? (long long)ev[2].aux : -1,
           "its free bytes: 1 GiB - 20 MiB");
    ok(n > 5 && ev[5].size == 2 * GiB && ev[5].requested_size == 2 * GiB,
       "the one for want of room: 2 GiB asked for");
    is_int((long long)(GiB - 50 * MiB), n > 5 ? (long long)ev[5].aux : -1,
           "its free bytes: 1 GiB - 50 MiB");
    unlink(path);
    memtrace_alloc_destroy(a);
    memtrace_device_close(d);
}

int main(void)
{
    if (mkdtemp(dir) == NULL)
        bail_out("mkdtemp failed");
    device_calls();
    bad_value();
    allocator();
    rmdir(dir);
    done_testing();
    return exit_status();
}
