/* device_ze-t: the Level Zero backend (libtrace/device_ze.c) against the fake driver
 * tests/fakes/libze_fake.so, loaded by the real loader through ZE_ENABLE_ALT_DRIVERS.
 * The expected figures are what the driver itself reports through the loader. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memtrace_device.h"
#include "tap.h"

#if MEMTRACE_HAVE_LEVEL_ZERO
#include <level_zero/ze_api.h>

#define MiB         ((uint64_t)1 << 20)
#define REEXEC_MARK "DEVICE_ZE_T_REEXEC"

struct seq {
    int n;
    int v[16];
};

struct seq_arg {
    struct seq *s;
    int i;
};

static void append_kernel(void *p)
{
    struct seq_arg *a = p;
    usleep(1000);
    a->s->v[a->s->n++] = a->i;
}

/* The first device as the loader reports it, for the expected figures. */
static ze_device_handle_t first_device(void)
{
    uint32_t n = 1;
    ze_driver_handle_t drv;
    ze_device_handle_t dev;
    if (zeDriverGet(&n, &drv) != ZE_RESULT_SUCCESS || n == 0)
        return NULL;
    n = 1;
    if (zeDeviceGet(drv, &n, &dev) != ZE_RESULT_SUCCESS || n == 0)
        return NULL;
    return dev;
}

static void test_fake(void)
{
    struct memtrace_device *d = NULL;
    is_int(0, memtrace_device_open(&d, "level_zero", 0), "open level_zero 0 on the fake driver");
    if (!d)
        bail_out("cannot open the fake Level Zero device");
    ze_device_handle_t dev = first_device();
    ze_device_properties_t props = {.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES};
    zeDeviceGetProperties(dev, &props);
    is_string(props.name, memtrace_device_name(d), "name from zeDeviceGetProperties");
    is_string("level_zero", memtrace_device_backend(d), "backend");
    uint32_t nmem = 0;
    zeDeviceGetMemoryProperties(dev, &nmem, NULL);
    ze_device_memory_properties_t mp[8];
    for (uint32_t i = 0; i < 8; i++)
        mp[i] =
            (ze_device_memory_properties_t){.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES};
    if (nmem > 8)
        nmem = 8;
    zeDeviceGetMemoryProperties(dev, &nmem, mp);
    uint64_t want_total = 0;
    for (uint32_t i = 0; i < nmem; i++)
        want_total += mp[i].totalSize;

    uint64_t f0 = 0, t = 0, f = 0;
    is_int(0, memtrace_device_mem_info(d, &f0, &t), "mem_info");
    is_int((long long)want_total, (long long)t, "total is the driver's");
    ok(f0 <= t && f0 > 8 * MiB, "free within total");
    uint64_t a = 0, b = 0;
    is_int(0, memtrace_device_malloc(d, 3 * MiB, &a), "malloc 3 MiB");
    ok(a != 0, "an address");
    is_int(0, memtrace_device_malloc(d, 1000, &b), "malloc 1000 bytes");
    memtrace_device_mem_info(d, &f, &t);
    is_int((long long)(f0 - 3 * MiB - 1000), (long long)f, "free after two allocations");
    uint64_t c;
    is_int(MEMTRACE_EOOM, memtrace_device_malloc(d, t + MiB, &c), "past the total: EOOM");
    is_int(0, memtrace_device_free(d, a), "free");
    is_int(0, memtrace_device_free(d, b), "free");
    is_int(MEMTRACE_EINVAL, memtrace_device_free(d, a), "double free: EINVAL");
    memtrace_device_mem_info(d, &f, &t);
    is_int((long long)f0, (long long)f, "all free again");

    size_t g = memtrace_device_granularity(d);
    ok(g >= 4096 && (g & (g - 1)) == 0, "granularity %zu is a power of two page", g);
    uint64_t base = 0;
    is_int(0, memtrace_device_reserve(d, 8 * g, &base), "reserve 8 granules");
    memtrace_device_mem_info(d, &f, &t);
    is_int((long long)f0, (long long)f, "a reservation costs no memory");
    is_int(0, memtrace_device_map(d, base, 2 * g), "map 2 granules at the start");
    is_int(0, memtrace_device_map(d, base + 2 * g, g), "map 1 after");
    memtrace_device_mem_info(d, &f, &t);
    is_int((long long)(f0 - 3 * g), (long long)f, "mapped memory is counted");
    is_int(MEMTRACE_EINVAL, memtrace_device_unmap(d, base, g), "unmap of half a mapping: EINVAL");
    is_int(0, memtrace_device_unmap(d, base, 2 * g), "unmap the first mapping");
    memtrace_device_mem_info(d, &f, &t);
    is_int((long long)(f0 - g), (long long)f, "unmap gives it back");
    is_int(0, memtrace_device_release(d, base, 8 * g), "release with one mapping left");
    memtrace_device_mem_info(d, &f, &t);
    is_int((long long)f0, (long long)f, "release unmapped the rest");

    struct memtrace_stream *s = NULL;
    is_int(0, memtrace_stream_create(d, &s), "stream create");
    ok(memtrace_stream_id(s) != 0, "stream id is the command list");
    struct seq sq = {0};
    struct seq_arg args[10];
    int rc = 0;
    for (int i = 0; i < 10; i++) {
        args[i] = (struct seq_arg){&sq, i};
        rc |= memtrace_stream_launch(d, i < 5 ? s : NULL, append_kernel, &args[i]);
        if (i == 4)
            rc |= memtrace_stream_sync(d, s);
    }
    is_int(0, rc, "10 launches");
    is_int(0, memtrace_device_sync(d), "device sync");
    int inorder = sq.n == 10;
    for (int i = 0; i < sq.n; i++)
        inorder &= sq.v[i] == i;
    ok(inorder, "kernels ran in order");

    struct memtrace_devevent *e = NULL;
    is_int(0, memtrace_devevent_create(d, &e), "event create");
    is_int(1, memtrace_devevent_query(e), "an event never recorded is complete");
    is_int(0, memtrace_devevent_record(e, s), "record");
    is_int(0, memtrace_devevent_sync(e), "event sync");
    is_int(1, memtrace_devevent_query(e), "query: complete after sync");
    is_int(0, memtrace_stream_wait(NULL, e), "default stream waits on it");
    is_int(0, memtrace_stream_sync(d, NULL), "default stream sync");
    is_int(0, memtrace_devevent_destroy(e), "event destroy");
    is_int(0, memtrace_stream_destroy(s), "stream destroy");
    memtrace_device_close(d);
}

int main(int argc, char **argv)
{
    char fake[4096];
    snprintf(fake, sizeof(fake), "%s/libze_fake.so", FAKE_LIBDIR);
    if (argc > 1 && strcmp(argv[1], "--child-open") == 0) {
        struct memtrace_device *d = NULL;
        return -memtrace_device_open(&d, "level_zero", 0);
    }
    if (!getenv(REEXEC_MARK)) {
        if (access(fake, R_OK) != 0)
            skip_all("the fake Level Zero driver is not built (tests/fakes/libze_fake.so)");
        setenv(REEXEC_MARK, "1", 1);
        setenv("ZE_ENABLE_ALT_DRIVERS", fake, 1);
        execv(tap_self(argv[0]), argv);
        bail_out("cannot re-execute with ZE_ENABLE_ALT_DRIVERS set");
    }
    test_fake();

    char path[] = "/tmp/device_ze-t-XXXXXX";
    int fd = mkstemp(path);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 2);
        setenv("ZE_ENABLE_ALT_DRIVERS", "/nonexistent/libze_none.so", 1);
        execl(tap_self(argv[0]), argv[0], "--child-open", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    char log[2048];
    ssize_t n = pread(fd, log, sizeof(log) - 1, 0);
    log[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (code == 0) {
        skip(2, "a system Level Zero driver answers even without the fake");
    } else {
        is_int(-MEMTRACE_ENODEV, code, "no driver: ENODEV");
        ok(strstr(log, "level_zero backend") != NULL, "with a log line");
    }
    done_testing();
    return exit_status();
}

#else

int main(void)
{
    struct memtrace_device *d = NULL;
    int rc = memtrace_device_open(&d, "level_zero", 0);
    if (rc != MEMTRACE_ENOTSUP) {
        plan(1);
        is_int(MEMTRACE_ENOTSUP, rc, "built without Level Zero: ENOTSUP");
        return exit_status();
    }
    skip_all("built without Level Zero");
}

#endif
