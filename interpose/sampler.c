/* sampler.c: the interposer's helper thread.
 *
 * Every sample_ms it records a counter event (device bytes used and total as the
 * driver reports them, process RSS), and it writes a snapshot when the dump signal
 * arrives: the signal handler only writes a byte to a pipe, this thread does the
 * work. The thread blocks every signal so the program's handlers see them all. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "mtx/util.h"

static pthread_t thread;
static int running;
static int pipe_fd[2] = {-1, -1};
static int statm_fd = -1;
static unsigned period_ms;
static char dump_base[4096];
static unsigned dumps;
static _Atomic uint64_t last_rss;
static int installed_signal;
static struct sigaction old_action;

uint64_t mt_sampler_rss(void)
{
    return atomic_load_explicit(&last_rss, memory_order_relaxed);
}

static uint64_t read_rss(void)
{
    char buf[128];
    if (statm_fd < 0)
        statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (statm_fd < 0)
        return 0;
    ssize_t n = pread(statm_fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *p = buf;
    while (*p && *p != ' ')
        p++;
    uint64_t pages = 0;
    for (p++; *p >= '0' && *p <= '9'; p++)
        pages = pages * 10 + (uint64_t)(*p - '0');
    return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void sample(void)
{
    static uint32_t src_id;
    uint64_t rss = read_rss();
    atomic_store_explicit(&last_rss, rss, memory_order_relaxed);
    /* Each family records a counter per device it has figures for; RSS alone goes
     * in a figureless one only if none did. */
    int recorded = 0;
    for (const struct mt_ip_backend *const *b = mt_ip_backends; *b != NULL; b++)
        if ((*b)->sample != NULL)
            recorded += (*b)->sample(rss);
    if (recorded > 0)
        return;
    struct memtrace_event ev = {
        .action = MEMTRACE_COUNTER,
        .device = -1,
        .requested_size = rss,
    };
    if (src_id == 0)
        src_id = memtrace_intern("sampler");
    ev.source = src_id;
    memtrace_record_event(&ev);
}

static void dump(void)
{
    char path[sizeof dump_base + 32];
    mtx_format(path, sizeof path, "%s.dump%u.memtrace", dump_base, ++dumps);
    int rc = memtrace_dump_snapshot(path);
    if (rc == 0)
        mtx_log("wrote %s", path);
    else
        mtx_log("cannot write %s: %s", path, memtrace_strerror(rc));
}

static void *loop(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd p = {.fd = pipe_fd[0], .events = POLLIN};
        int n = poll(&p, 1, period_ms ? (int)period_ms : -1);
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0) {
            char c;
            if (read(pipe_fd[0], &c, 1) == 1) {
                if (c == 'q')
                    break;
                if (c == 'd')
                    dump();
            }
            continue;
        }
        if (n == 0)
            sample();
    }
    return NULL;
}

static void on_signal(int sig)
{
    int e = errno;
    char c = 'd';
    (void)sig;
    if (pipe_fd[1] >= 0 && write(pipe_fd[1], &c, 1) < 0) {
        /* pipe full: a dump is already pending */
    }
    errno = e;
}

int mt_sampler_start(unsigned sample_ms, int dump_signal, const char *base)
{
    if (running || (sample_ms == 0 && dump_signal == 0))
        return 0;
    size_t len = strlen(base);
    if (len >= sizeof dump_base)
        len = sizeof dump_base - 1;
    memcpy(dump_base, base, len);
    dump_base[len] = '\0';
    period_ms = sample_ms;
    if (pipe2(pipe_fd, O_CLOEXEC | O_NONBLOCK) != 0) {
        pipe_fd[0] = pipe_fd[1] = -1;
        return -1;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&thread, NULL, loop, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close(pipe_fd[0]);
        close(pipe_fd[1]);
        pipe_fd[0] = pipe_fd[1] = -1;
        return -1;
    }
    running = 1;
    if (dump_signal != 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(dump_signal, &sa, &old_action) == 0)
            installed_signal = dump_signal;
    }
    return 0;
}

void mt_sampler_stop(void)
{
    if (!running)
        return;
    if (installed_signal != 0) {
        sigaction(installed_signal, &old_action, NULL);
        installed_signal = 0;
    }
    char c = 'q';
    /* The pipe is non-blocking; if it is full the thread is awake and will see 'q'
     * after draining, so retry until it goes in. */
    while (write(pipe_fd[1], &c, 1) < 0 && (errno == EAGAIN || errno == EINTR))
        usleep(1000);
    pthread_join(thread, NULL);
    close(pipe_fd[0]);
    close(pipe_fd[1]);
    pipe_fd[0] = pipe_fd[1] = -1;
    running = 0;
}

/* The thread does not exist in a child; /proc/self/statm opened in the parent
 * still describes the parent. */
void mt_sampler_atfork_child(void)
{
    if (installed_signal != 0) {
        sigaction(installed_signal, &old_action, NULL);
        installed_signal = 0;
    }
    if (running) {
        close(pipe_fd[0]);
        close(pipe_fd[1]);
        pipe_fd[0] = pipe_fd[1] = -1;
        running = 0;
    }
    if (statm_fd >= 0) {
        close(statm_fd);
        statm_fd = -1;
    }
    dumps = 0;
    atomic_store(&last_rss, 0);
}
