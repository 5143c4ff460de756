/* device_cuda-t: the CUDA backend (libtrace/device_cuda.c) against the fake driver
 * tests/fakes/libcuda.so.1. The test re-executes itself with LD_LIBRARY_PATH on the
 * fake; the ENODEV cases run as child processes (the backend loads the driver once
 * per process) with the fake failing cuInit, and with no libcuda.so.1 at all. */
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memtrace_device.h"
#include "tap.h"

#define MiB         ((uint64_t)1 << 20)
#define REEXEC_MARK "DEVICE_CUDA_T_REEXEC"

static long long (*calls)(const char *name);
/* Where the fake's arenas start: fixed, but chosen by the kernel under ThreadSanitizer. */
static unsigned long long (*fake_base)(const char *arena);

/* Child mode: open "cuda" twice, exit with the negated codes packed in one byte. */
static int child_open(void)
{
    struct memtrace_device *d = NULL;
    int rc1 = memtrace_device_open(&d, "cuda", 0);
    int rc2 = memtrace_device_open(&d, "cuda", 0);
    return (-rc1) * 16 + (-rc2);
}

/* Runs this program in child mode with env changes; returns its exit code and puts
 * its stderr in log. */
static int run_child(const char *self, const char *const *env, char *log, size_t logsize)
{
    char path[] = "/tmp/device_cuda-t-XXXXXX";
    int fd = mkstemp(path);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 2);
        for (size_t i = 0; env[i]; i += 2) {
            if (env[i + 1])
                setenv(env[i], env[i + 1], 1);
            else
                unsetenv(env[i]);
        }
        execl(self, self, "--child-open", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ssize_t n = pread(fd, log, logsize - 1, 0);
    log[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

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
    a->s->v[a->s->n++] = a->i;
}

struct thread_arg {
    struct memtrace_device *d;
    uint64_t addr;
    int rc;
};

static void *alloc_thread(void *p)
{
    struct thread_arg *t = p;
    t->rc = memtrace_device_malloc(t->d, MiB, &t->addr);
    if (t->rc == 0)
        t->rc = memtrace_device_free(t->d, t->addr);
    return NULL;
}

static void test_fake(void)
{
    struct memtrace_device *d = NULL;
    is_int(0, memtrace_device_open(&d, "cuda", 0), "open cuda 0 on the fake driver");
    if (!d)
        bail_out("cannot open the fake CUDA device");
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    calls = h ? (long long (*)(const char *))dlsym(h, "fake_cuda_calls") : NULL;
    fake_base = h ? (unsigned long long (*)(const char *))dlsym(h, "fake_cuda_base") : NULL;
    if (!calls || !fake_base)
        bail_out("the loaded libcuda.so.1 is not the fake");
    is_int(1, calls("cuInit"), "cuInit called once");
    is_string("cuda", memtrace_device_backend(d), "backend");
    is_string("memtrace fake GPU 0", memtrace_device_name(d), "name from cuDeviceGetName");
    is_int(2 * MiB, (long long)memtrace_device_granularity(d), "granularity from the driver");

    uint64_t f = 0, t = 0;
    is_int(0, memtrace_device_mem_info(d, &f, &t), "mem_info");
    is_int(1024 * MiB, (long long)t, "total: FAKE_CUDA_MEMORY=1G");
    is_int(1024 * MiB, (long long)f, "free: all of it");

    uint64_t a = 0, b = 0;
    is_int(0, memtrace_device_malloc(d, 3 * MiB, &a), "malloc 3 MiB");
    is_int((long long)fake_base("device0"), (long long)a, "at the fake's first device address");
    is_int(0, memtrace_device_malloc(d, 1000, &b), "malloc 1000 bytes");
    is_int((long long)fake_base("device0") + 3 * MiB, (long long)b, "right after the first");
    memtrace_device_mem_info(d, &f, &t);
    is_int(1024 * MiB - 3 * MiB - 1000, (long long)f, "free after two allocations");
    uint64_t c;
    is_int(MEMTRACE_EOOM, memtrace_device_malloc(d, 1022 * MiB, &c),
           "CUDA_ERROR_OUT_OF_MEMORY is EOOM");
    is_int(0, memtrace_device_free(d, a), "free");
    is_int(0, memtrace_device_free(d, b), "free");
    memtrace_device_mem_info(d, &f, &t);
    is_int(1024 * MiB, (long long)f, "all free again");
    ok(memtrace_device_ptr(d, a) == NULL, "no host pointer on cuda");

    struct thread_arg ta = {d, 0, -100};
    pthread_t th;
    pthread_create(&th, NULL, alloc_thread, &ta);
    pthread_join(th, NULL);
    is_int(0, ta.rc, "another thread allocates: the backend made the context current there");

    uint64_t base = 0;
    is_int(0, memtrace_device_reserve(d, 16 * MiB, &base), "reserve 16 MiB");
    memtrace_device_mem_info(d, &f, &t);
    is_int(1024 * MiB, (long long)f, "a reservation costs no memory");
    is_int(0, memtrace_device_map(d, base, 4 * MiB), "map 4 MiB");
    is_int(0, memtrace_device_map(d, base + 4 * MiB, 2 * MiB), "map 2 MiB after it");
    memtrace_device_mem_info(d, &f, &t);
    is_int(1018 * MiB, (long long)f, "mapped memory is counted");
    is_int(2, calls("cuMemCreate"), "one cuMemCreate per map");
    is_int(2, calls("cuMemRelease"), "every handle is released right after its map");
    is_int(MEMTRACE_EOOM, memtrace_device_map(d, base + 6 * MiB, 1020 * MiB),
           "map past capacity: EOOM");
    is_int(0, memtrace_device_unmap(d, base, 4 * MiB), "unmap the first mapping");
    memtrace_device_mem_info(d, &f, &t);
    is_int(1022 * MiB, (long long)f, "unmap gives the memory back");
    is_int(MEMTRACE_EINVAL, memtrace_device_unmap(d, base, 4 * MiB), "unmap twice: EINVAL");
    is_int(0, memtrace_device_unmap(d, base + 4 * MiB, 2 * MiB), "unmap the second");
    is_int(0, memtrace_device_release(d, base, 16 * MiB), "release");
    memtrace_device_mem_info(d, &f, &t);
    is_int(1024 * MiB, (long long)f, "all free after VM");

    struct memtrace_stream *s = NULL;
    is_int(0, memtrace_stream_create(d, &s), "stream create");
    ok(memtrace_stream_id(s) != 0, "stream id is the CUstream, not 0");
    long long launches = calls("cuLaunchHostFunc");
    struct seq sq = {0};
    struct seq_arg args[10];
    for (int i = 0; i < 10; i++) {
        args[i] = (struct seq_arg){&sq, i};
        memtrace_stream_launch(d, i < 5 ? s : NULL, append_kernel, &args[i]);
    }
    is_int(10, calls("cuLaunchHostFunc") - launches, "10 launches through cuLaunchHostFunc");
    is_int(0, memtrace_stream_sync(d, s), "stream sync");
    is_int(0, memtrace_device_sync(d), "device sync");
    int inorder = sq.n == 10;
    for (int i = 0; i < sq.n; i++)
        inorder &= sq.v[i] == i;
    ok(inorder, "kernels ran in order");

    struct memtrace_devevent *e = NULL;
    is_int(0, memtrace_devevent_create(d, &e), "event create");
    is_int(0, memtrace_devevent_record(e, s), "record");
    is_int(1, memtrace_devevent_query(e), "query: complete (the fake runs work at once)");
    is_int(0, memtrace_stream_wait(NULL, e), "default stream waits on it");
    is_int(0, memtrace_devevent_sync(e), "event sync");
    is_int(1, calls("cuStreamWaitEvent"), "cuStreamWaitEvent reached the driver");
    is_int(0, memtrace_devevent_destroy(e), "event destroy");
    is_int(0, memtrace_stream_destroy(s), "stream destroy");
    is_int(1, calls("cuStreamDestroy_v2"), "cuStreamDestroy_v2 once");

    struct memtrace_device *d2 = NULL;
    is_int(0, memtrace_device_open(&d2, "cuda", 0), "open again");
    ok(d == d2, "the same device");
    is_int(MEMTRACE_ENODEV, memtrace_device_open(&d2, "cuda", 1), "device 1 absent: ENODEV");
    memtrace_device_close(d);
    is_int(0, calls("cuDevicePrimaryCtxRelease"), "still referenced after one close");
    struct memtrace_stream *left;
    memtrace_stream_create(d, &left);
    memtrace_device_close(d);
    is_int(1, calls("cuDevicePrimaryCtxRelease"), "the last close releases the context");
    is_int(2, calls("cuStreamDestroy_v2"), "and destroys the stream left behind");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child-open") == 0)
        return child_open();

    const char *fakedir = FAKE_LIBDIR;
    char fake[4096];
    snprintf(fake, sizeof(fake), "%s/libcuda.so.1", fakedir);
    if (!getenv(REEXEC_MARK)) {
        if (access(fake, R_OK) != 0)
            skip_all("the fake libcuda.so.1 is not built (make tests/fakes/libcuda.so.1)");
        setenv(REEXEC_MARK, "1", 1);
        setenv("LD_LIBRARY_PATH", fakedir, 1);
        setenv("FAKE_CUDA_MEMORY", "1G", 1);
        unsetenv("FAKE_CUDA_NO_DEVICE");
        execv(tap_self(argv[0]), argv);
        bail_out("cannot re-execute with LD_LIBRARY_PATH set");
    }

    test_fake();

    char log[2048];
    const char *noinit[] = {"FAKE_CUDA_NO_DEVICE", "1", NULL};
    int code = run_child(tap_self(argv[0]), noinit, log, sizeof(log));
    is_int(-MEMTRACE_ENODEV * 16 - MEMTRACE_ENODEV, code, "cuInit failing: ENODEV, twice");
    ok(strstr(log, "cuInit failed") != NULL, "the log says cuInit failed");
    is_int(1, count_lines(log), "one log line for two opens");

    char empty[] = "/tmp/device_cuda-t-empty-XXXXXX";
    mkdtemp(empty);
    const char *absent[] = {"LD_LIBRARY_PATH", empty, NULL};
    code = run_child(tap_self(argv[0]), absent, log, sizeof(log));
    rmdir(empty);
    if (strstr(log, "cannot load libcuda.so.1") || code != 0) {
        is_int(-MEMTRACE_ENODEV * 16 - MEMTRACE_ENODEV, code, "no libcuda.so.1: ENODEV, twice");
        ok(strstr(log, "cannot load libcuda.so.1") != NULL, "the log names libcuda.so.1");
        is_int(1, count_lines(log), "one log line");
    } else {
        skip(3, "a system libcuda.so.1 is installed, so it cannot be made absent");
    }
    done_testing();
    return exit_status();
}
