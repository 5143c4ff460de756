/* device-t: the host backend of the device runtime (libtrace/device.c, device_host.c). */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_impl.h"
#include "memtrace_device.h"
#include "memtrace_snapshot.h"
#include <jansson.h>
#include "tap.h"

#define MiB ((uint64_t)1 << 20)

/* Runs open("host") with MEMTRACE_HOST_CAPACITY=value and returns its code; the
 * log it writes to stderr lands in logbuf. */
static int open_with_env(const char *value, char *logbuf, size_t logsize,
                         struct memtrace_device **out)
{
    char path[] = "/tmp/device-t-log-XXXXXX";
    int fd = mkstemp(path);
    int saved = dup(2);
    dup2(fd, 2);
    setenv("MEMTRACE_HOST_CAPACITY", value, 1);
    *out = NULL;
    int rc = memtrace_device_open(out, "host", 0);
    unsetenv("MEMTRACE_HOST_CAPACITY");
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, logbuf, logsize - 1, 0);
    logbuf[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

static void test_parse(void)
{
    uint64_t v = 0;
    is_int(0, mt_device_parse_size("8G", &v), "8G parses");
    is_int(8ULL << 30, (long long)v, "8G is 8 GiB");
    is_int(0, mt_device_parse_size("123", &v), "plain bytes parse");
    is_int(123, (long long)v, "123 bytes");
    is_int(0, mt_device_parse_size("3MiB", &v), "3MiB parses");
    is_int(3 << 20, (long long)v, "3MiB is 3 MiB");
    is_int(0, mt_device_parse_size("16k", &v), "16k parses");
    is_int(16384, (long long)v, "16k is 16384");
    const char *bad[] = {
        "", "G", "-1", "12Q", "1.5G", "8 G", "99999999999999999999", "20000000000G"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        is_int(MEMTRACE_ECONFIG, mt_device_parse_size(bad[i], &v), "\"%s\" is rejected", bad[i]);
}

static void test_env(void)
{
    char log[512];
    struct memtrace_device *d;
    is_int(MEMTRACE_ECONFIG, open_with_env("12Q", log, sizeof(log), &d),
           "bad MEMTRACE_HOST_CAPACITY: ECONFIG");
    ok(d == NULL, "no device on a bad capacity");
    ok(strstr(log, "MEMTRACE_HOST_CAPACITY") && strstr(log, "\"12Q\""),
       "the log line names the variable and the value");
    is_int(1, (long long)(strchr(log, '\n') == log + strlen(log) - 1), "exactly one log line");
    is_int(MEMTRACE_ECONFIG, open_with_env("0", log, sizeof(log), &d), "capacity 0: ECONFIG");

    is_int(0, open_with_env("64M", log, sizeof(log), &d), "MEMTRACE_HOST_CAPACITY=64M opens");
    uint64_t f = 0, t = 0;
    memtrace_device_mem_info(d, &f, &t);
    is_int(64 * MiB, (long long)t, "total is 64 MiB");
    is_int(64 * MiB, (long long)f, "all free");
    is_string("host", memtrace_device_backend(d), "backend name");
    is_int(0, memtrace_device_index(d), "index 0");
    struct memtrace_device *d2 = NULL;
    is_int(0, memtrace_device_open(&d2, "host", 0), "second open");
    ok(d2 == d, "the same backend and index share one device");
    memtrace_device_close(d2);
    uint64_t a;
    is_int(0, memtrace_device_malloc(d, 4096, &a), "still open after one close");
    memtrace_device_free(d, a);
    memtrace_device_close(d);

    is_int(MEMTRACE_EINVAL, memtrace_device_open(&d, "nosuch", 0), "unknown backend: EINVAL");
#if !MEMTRACE_HAVE_LEVEL_ZERO
    is_int(MEMTRACE_ENOTSUP, memtrace_device_open(&d, "level_zero", 0),
           "level_zero not built: ENOTSUP");
#endif
}

static void test_capacity(void)
{
    struct memtrace_device *d;
    is_int(0, memtrace_device_open_host(&d, 10 * MiB), "open_host 10 MiB");
    uint64_t a, b, c, f, t;
    is_int(0, memtrace_device_malloc(d, 4 * MiB, &a), "4 MiB");
    is_int(0, memtrace_device_malloc(d, 6 * MiB, &b), "6 MiB: exactly full");
    memtrace_device_mem_info(d, &f, &t);
    is_int(0, (long long)f, "free 0 when full");
    is_int(10 * MiB, (long long)t, "total 10 MiB");
    is_int(MEMTRACE_EOOM, memtrace_device_malloc(d, 1, &c), "one byte past capacity: EOOM");
    is_int(0, memtrace_device_free(d, a), "free 4 MiB");
    is_int(MEMTRACE_EOOM, memtrace_device_malloc(d, 4 * MiB + 1, &c), "4 MiB + 1: EOOM");
    is_int(0, memtrace_device_malloc(d, 4 * MiB - 100, &c), "4 MiB - 100 fits");
    memtrace_device_mem_info(d, &f, &t);
    is_int(100, (long long)f, "100 bytes free");
    is_int(0, memtrace_device_malloc(d, 100, &a), "the last 100 bytes");
    memtrace_device_mem_info(d, &f, &t);
    is_int(0, (long long)f, "free 0 again");
    unsigned char *p = memtrace_device_ptr(d, b);
    ok(p == (void *)(uintptr_t)b, "device_ptr is the address on host");
    memset(p, 0xab, 6 * MiB);
    is_int(0xab, p[6 * MiB - 1], "allocated memory is writable to its last byte");
    is_int(MEMTRACE_EINVAL, memtrace_device_free(d, b + 8), "free of an unknown address: EINVAL");
    is_int(MEMTRACE_EINVAL, memtrace_device_malloc(d, 0, &a), "malloc 0: EINVAL");
    memtrace_device_free(d, b);
    memtrace_device_free(d, c);
    memtrace_device_mem_info(d, &f, &t);
    is_int(10 * MiB - 100, (long long)f, "free after releasing all but 100 bytes");
    memtrace_device_free(d, a);
    memtrace_device_close(d);
}

struct seq {
    int n;
    int v[256];
};

struct seq_arg {
    struct seq *s;
    int i;
};

static void append_kernel(void *p)
{
    struct seq_arg *a = p;
    a->s->v[a->s->n++] = a->i;
}

static void test_order(void)
{
    struct memtrace_device *d;
    memtrace_device_open_host(&d, 16 * MiB);
    struct memtrace_stream *s;
    is_int(0, memtrace_stream_create(d, &s), "stream create");
    ok(memtrace_stream_id(s) != 0, "a created stream's id is not 0");
    is_int(0, (long long)memtrace_stream_id(NULL), "the default stream's id is 0");
    struct seq sq = {0};
    struct seq_arg args[200];
    int rc = 0;
    for (int i = 0; i < 200; i++) {
        args[i] = (struct seq_arg){&sq, i};
        rc |= memtrace_stream_launch(d, s, append_kernel, &args[i]);
    }
    is_int(0, rc, "200 launches");
    is_int(0, memtrace_stream_sync(d, s), "stream sync");
    int inorder = sq.n == 200;
    for (int i = 0; i < sq.n; i++)
        inorder &= sq.v[i] == i;
    ok(inorder, "200 kernels ran in launch order");

    struct seq dq = {0};
    for (int i = 0; i < 50; i++) {
        args[i] = (struct seq_arg){&dq, i};
        memtrace_stream_launch(d, NULL, append_kernel, &args[i]);
    }
    is_int(0, memtrace_device_sync(d), "device sync");
    inorder = dq.n == 50;
    for (int i = 0; i < dq.n; i++)
        inorder &= dq.v[i] == i;
    ok(inorder, "the default stream runs 50 kernels in order");
    is_int(0, memtrace_stream_destroy(s), "stream destroy");
    memtrace_device_close(d);
}

struct xfer {
    atomic_int order;
    int value;
    int a_order, b_order, seen;
};

static void slow_producer(void *p)
{
    struct xfer *x = p;
    usleep(200 * 1000);
    x->value = 42;
    x->a_order = atomic_fetch_add(&x->order, 1);
}

static void consumer(void *p)
{
    struct xfer *x = p;
    x->seen = x->value;
    x->b_order = atomic_fetch_add(&x->order, 1);
}

static void test_events(void)
{
    struct memtrace_device *d;
    memtrace_device_open_host(&d, 16 * MiB);
    struct memtrace_stream *a, *b;
    memtrace_stream_create(d, &a);
    memtrace_stream_create(d, &b);
    struct memtrace_devevent *e;
    is_int(0, memtrace_devevent_create(d, &e), "event create");
    is_int(1, memtrace_devevent_query(e), "an event never recorded is complete");
    struct xfer x = {0};
    memtrace_stream_launch(d, a, slow_producer, &x);
    is_int(0, memtrace_devevent_record(e, a), "record after the slow kernel");
    is_int(0, memtrace_devevent_query(e), "query 0 while the slow kernel runs");
    is_int(0, memtrace_stream_wait(b, e), "stream B waits on the event");
    memtrace_stream_launch(d, b, consumer, &x);
    is_int(0, memtrace_stream_sync(d, b), "sync B");
    is_int(42, x.seen, "B's kernel read A's result");
    is_int(0, x.a_order, "A's kernel ran first");
    is_int(1, x.b_order, "B's kernel ran second");
    is_int(1, memtrace_devevent_query(e), "query 1 after completion");

    /* The same through the default stream, and devevent_sync from the host. */
    struct xfer y = {0};
    memtrace_stream_launch(d, NULL, slow_producer, &y);
    memtrace_devevent_record(e, NULL);
    is_int(0, memtrace_devevent_query(e), "re-recorded on the default stream: 0 again");
    memtrace_stream_wait(a, e);
    memtrace_stream_launch(d, a, consumer, &y);
    is_int(0, memtrace_devevent_sync(e), "devevent_sync");
    is_int(42, y.value, "the producer finished when sync returned");
    memtrace_stream_sync(d, a);
    is_int(42, y.seen, "A read the default stream's result");
    is_int(1, y.b_order, "and ran after it");

    /* An event destroyed while its marker is queued must stay valid for the worker. */
    struct xfer z = {0};
    memtrace_stream_launch(d, a, slow_producer, &z);
    memtrace_devevent_record(e, a);
    memtrace_stream_wait(b, e);
    memtrace_stream_launch(d, b, consumer, &z);
    is_int(0, memtrace_devevent_destroy(e), "destroy with a pending record");
    memtrace_device_sync(d);
    is_int(42, z.seen, "the wait still held after destroy");
    memtrace_stream_destroy(a);
    memtrace_stream_destroy(b);
    memtrace_device_close(d);
}

static void test_vm(void)
{
    struct memtrace_device *d;
    memtrace_device_open_host(&d, 8 * MiB);
    size_t g = memtrace_device_granularity(d);
    is_int(2 * MiB, (long long)g, "granularity 2 MiB");
    uint64_t base, f, t;
    is_int(MEMTRACE_EINVAL, memtrace_device_reserve(d, g + 1, &base), "reserve of a non-multiple");
    is_int(0, memtrace_device_reserve(d, 32 * MiB, &base), "reserve 32 MiB (past capacity)");
    is_int(0, (long long)(base % g), "reserved address is granule aligned");
    memtrace_device_mem_info(d, &f, &t);
    is_int(8 * MiB, (long long)f, "a reservation costs nothing");
    is_int(0, memtrace_device_map(d, base, 4 * MiB), "map 4 MiB");
    memtrace_device_mem_info(d, &f, &t);
    is_int(4 * MiB, (long long)f, "mapped bytes are counted");
    unsigned char *p = memtrace_device_ptr(d, base);
    memset(p, 7, 4 * MiB);
    is_int(7, p[4 * MiB - 1], "mapped memory is writable");
    is_int(MEMTRACE_EINVAL, memtrace_device_map(d, base + 2 * MiB, 2 * MiB),
           "mapping a mapped granule: EINVAL");
    is_int(MEMTRACE_EINVAL, memtrace_device_map(d, base + 4096, 2 * MiB), "unaligned map: EINVAL");
    is_int(MEMTRACE_EINVAL, memtrace_device_map(d, base + 32 * MiB, 2 * MiB),
           "map outside the reservation: EINVAL");
    is_int(0, memtrace_device_map(d, base + 20 * MiB, 4 * MiB), "map 4 MiB further on");
    memtrace_device_mem_info(d, &f, &t);
    is_int(0, (long long)f, "capacity exhausted by mappings");
    is_int(MEMTRACE_EOOM, memtrace_device_map(d, base + 8 * MiB, 2 * MiB),
           "map past capacity: EOOM");
    uint64_t a;
    is_int(MEMTRACE_EOOM, memtrace_device_malloc(d, 1, &a), "malloc shares the same budget");
    is_int(0, memtrace_device_unmap(d, base, 2 * MiB), "unmap the first granule");
    memtrace_device_mem_info(d, &f, &t);
    is_int(2 * MiB, (long long)f, "unmap returns its bytes");
    is_int(8 * MiB, (long long)t, "total unchanged");
    is_int(7, p[2 * MiB], "the granule still mapped keeps its data");
    is_int(MEMTRACE_EINVAL, memtrace_device_unmap(d, base, 2 * MiB), "unmap twice: EINVAL");
    is_int(0, memtrace_device_map(d, base, 2 * MiB), "map the granule again");
    is_int(0, p[0], "a fresh mapping is zeroed");
    is_int(MEMTRACE_EINVAL, memtrace_device_release(d, base, 16 * MiB), "release of a wrong size");
    is_int(0, memtrace_device_release(d, base, 32 * MiB), "release with mappings in place");
    memtrace_device_mem_info(d, &f, &t);
    is_int(8 * MiB, (long long)f, "release returns the mapped bytes");
    memtrace_device_close(d);
}

struct conc {
    struct memtrace_device *d;
    struct memtrace_stream *s;
    int id;
    int counter; /* touched only by the stream's worker */
    int last[8]; /* last sequence number seen per thread */
    int out_of_order;
};

struct conc_item {
    struct conc *c;
    int thread, seq;
};

static void conc_kernel(void *p)
{
    struct conc_item *it = p;
    struct conc *c = it->c;
    c->counter++;
    if (it->seq != c->last[it->thread] + 1)
        c->out_of_order++;
    c->last[it->thread] = it->seq;
    free(it);
}

struct conc_thread {
    struct conc *c;
    int thread;
    int rc;
};

static void *conc_main(void *p)
{
    struct conc_thread *t = p;
    for (int i = 1; i <= 2000; i++) {
        struct conc_item *it = malloc(sizeof(*it));
        *it = (struct conc_item){t->c, t->thread, i};
        t->rc |= memtrace_stream_launch(t->c->d, t->c->s, conc_kernel, it);
    }
    return NULL;
}

static void test_threads(void)
{
    struct conc c = {0};
    memtrace_device_open_host(&c.d, 16 * MiB);
    memtrace_stream_create(c.d, &c.s);
    pthread_t th[8];
    struct conc_thread ct[8];
    for (int i = 0; i < 8; i++) {
        ct[i] = (struct conc_thread){&c, i, 0};
        pthread_create(&th[i], NULL, conc_main, &ct[i]);
    }
    int rc = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        rc |= ct[i].rc;
    }
    is_int(0, rc, "8 threads launched 2000 kernels each");
    memtrace_stream_sync(c.d, c.s);
    is_int(16000, c.counter, "16000 kernels ran");
    is_int(0, c.out_of_order, "each thread's kernels ran in its launch order");
    int all = 1;
    for (int i = 0; i < 8; i++)
        all &= c.last[i] == 2000;
    ok(all, "every thread's last kernel ran");
    memtrace_device_close(c.d);
}

static void count_kernel(void *p)
{
    usleep(20 * 1000);
    atomic_fetch_add((atomic_int *)p, 1);
}

static void test_close(void)
{
    struct memtrace_device *d;
    memtrace_device_open_host(&d, 16 * MiB);
    struct memtrace_stream *s[3];
    atomic_int n = 0;
    for (int i = 0; i < 3; i++) {
        memtrace_stream_create(d, &s[i]);
        for (int k = 0; k < 5; k++)
            memtrace_stream_launch(d, s[i], count_kernel, &n);
    }
    memtrace_stream_launch(d, NULL, count_kernel, &n);
    struct memtrace_devevent *e;
    memtrace_devevent_create(d, &e);
    memtrace_devevent_record(e, s[0]);
    uint64_t a;
    memtrace_device_malloc(d, MiB, &a);
    uint64_t r;
    memtrace_device_reserve(d, 4 * MiB, &r);
    memtrace_device_map(d, r, 2 * MiB);
    memtrace_device_close(d);
    is_int(16, atomic_load(&n), "close ran every queued kernel before joining the workers");
}

/* A device opened while recording is named in the file's metadata. */
static void test_metadata(void)
{
    char path[] = "/tmp/device-t-meta-XXXXXX";
    close(mkstemp(path));
    unlink(path); /* the name only: the recorder creates files, never reuses them */
    struct memtrace_options o;
    memtrace_options_init(&o);
    memtrace_record_history(&o);
    struct memtrace_device *d;
    is_int(0, memtrace_device_open_host(&d, 3u << 20), "host device of 3 MiB for metadata");
    is_int(0, memtrace_dump_snapshot(path), "dump with the device open");
    memtrace_record_history(NULL);
    memtrace_device_close(d);
    struct memtrace_reader *r;
    json_t *devs = NULL, *meta = NULL;
    if (memtrace_reader_open(&r, path, NULL) == 0) {
        meta = json_loads(memtrace_reader_meta(r), 0, NULL);
        devs = json_object_get(meta, "devices");
        memtrace_reader_close(r);
    }
    json_t *dev0 = json_array_get(devs, 0);
    is_int(1, (long long)json_array_size(devs), "one device in the metadata");
    is_string("host", json_string_value(json_object_get(dev0, "backend")), "its backend");
    is_int(3 << 20, json_integer_value(json_object_get(dev0, "total_memory")),
           "its total memory is the capacity");
    is_int(0, json_integer_value(json_object_get(dev0, "index")), "its index");
    json_decref(meta);
    unlink(path);
}

int main(void)
{
    test_parse();
    test_env();
    test_capacity();
    test_order();
    test_events();
    test_vm();
    test_threads();
    test_close();
    test_metadata();
    done_testing();
    return exit_status();
}
