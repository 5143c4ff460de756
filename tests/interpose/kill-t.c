/* kill-t: crash safety. A program allocates, waits past the flush interval, says
 * how many it made, and is killed with SIGKILL: the file holds exactly those events
 * and reads as truncated. Also: the dump signal writes a complete snapshot. */
#include "harness.h"

#include <poll.h>
#include <time.h>

static int read_count(int fd)
{
    char buf[32] = "";
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 10000) != 1)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    return n > 0 ? atoi(buf) : -1;
}

/* The helper thread logs "wrote PATH" once the dump is complete. */
static int wait_for(const char *err_path)
{
    for (int i = 0; i < 500; i++) {
        char *s = h_slurp_file(err_path);
        int done = strstr(s, "wrote ") != NULL;
        free(s);
        if (done)
            return 1;
        usleep(10000);
    }
    return 0;
}

static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Reads "S <ns>" from the program: the time of its first allocation. */
static long long read_start(int fd)
{
    char buf[64] = "";
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 10000) != 1)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    return n > 2 && buf[0] == 'S' ? atoll(buf + 2) : -1;
}

/* Microseconds during which some task of the machine waited for a CPU (the kernel's
 * pressure stall information), 0 where the kernel does not keep it. */
static long long cpu_stall_us(void)
{
    char *s = h_slurp_file("/proc/pressure/cpu");
    const char *t = strstr(s, "total=");
    long long us = t != NULL ? atoll(t + 6) : 0;
    free(s);
    return us;
}

#define FLUSH_MS 100
#define RUNS     30
/* Under ThreadSanitizer the writer's first flush, which symbolizes every frame seen
 * so far, is slower: events up to 145 ms old were lost there, 105 ms in a plain
 * build, both on the same loaded machine. */
#define MARGIN_MS (MEMTRACE_TSAN ? 150 : 50)

/* The documented bound: a killed process loses at most MEMTRACE_FLUSH_MS of events,
 * from its first event on. A program recording an event every millisecond is killed
 * at random points, early ones included, and the newest event its file holds must
 * be at most FLUSH_MS + MARGIN_MS older than the kill (all events lost counts from
 * the first one). The writer starts a flush at most FLUSH_MS / 2 after the oldest
 * unwritten event, and the write takes a few ms, so on an idle machine the age
 * stays under about 55 ms; the margin, half an interval, is for a writer thread
 * the scheduler wakes late on a loaded machine (up to about 60 ms more was seen
 * with a parallel build running). On a machine busier than that (thirty runs met
 * a 280 ms delay at a load of 7 on 2 cores) the time during which some task waited
 * for a CPU is allowed on top: an idle machine still gets the strict bound.
 * Thirty runs, so that a late flush anywhere in the first second shows. */
static void crash_loss(void)
{
    char path[400], err[400];
    snprintf(path, sizeof path, "%s/loss.memtrace", h_tmpdir);
    snprintf(err, sizeof err, "%s/loss.err", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", path, 1);
    char flush[16];
    snprintf(flush, sizeof flush, "%d", FLUSH_MS);
    setenv("MEMTRACE_FLUSH_MS", flush, 1);
    unsetenv("MEMTRACE_DUMP_SIGNAL");
    unsigned seed = (unsigned)getpid();
    diag("crash loss: seed %u", seed);
    srand(seed);
    long long worst = 0, worst_stall = 0;
    int late = 0, unreadable = 0;
    for (int run = 0; run < RUNS; run++) {
        /* half the kills in the first 400 ms, where the first flush matters */
        int after_ms = run % 2 ? 20 + rand() % 380 : 20 + rand() % 1200;
        char *argv[] = {PROG_DIR "/cuda_prog", "loop", NULL};
        int fd;
        pid_t pid = h_spawn(argv, 1, &fd, err);
        long long start = read_start(fd);
        long long stall = cpu_stall_us();
        usleep((useconds_t)after_ms * 1000);
        long long killed = mono_ns();
        stall = (cpu_stall_us() - stall) / 1000;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(fd);
        struct h_file f;
        h_read(&f, path);
        unreadable += f.rc != 0;
        long long newest = start;
        for (size_t i = 0; i < f.n; i++)
            if ((long long)f.ev[i].time_ns > newest)
                newest = (long long)f.ev[i].time_ns;
        long long age_ms = (killed - newest) / 1000000;
        if (start < 0 || age_ms > FLUSH_MS + MARGIN_MS + stall) {
            diag("run %d: killed %d ms after the first event, %zu events read, newest %lld ms "
                 "old, the machine short of CPU for %lld ms",
                 run, after_ms, f.n, age_ms, stall);
            late++;
        }
        if (age_ms > worst)
            worst = age_ms;
        if (stall > worst_stall)
            worst_stall = stall;
        h_close(&f);
        unlink(path);
    }
    diag("crash loss: the newest recovered event was at most %lld ms old (%d runs); "
         "the machine was short of CPU for up to %lld ms in a run",
         worst, RUNS, worst_stall);
    is_int(0, unreadable, "%d kills: every file reads, up to where it was cut", RUNS);
    /* valgrind runs one thread at a time, each 20 to 50 times slower: the bound is wall
     * time, which it cannot keep (14 of 30 runs late there). */
    const char *vg = getenv("MEMTRACE_VALGRIND");
    if (vg != NULL && *vg != '\0')
        skip(1, "under valgrind the writer thread cannot keep a wall-time bound");
    else
        is_int(0, late,
               "%d kills: every file holds events up to %d ms + %d ms before the kill, plus the "
               "time the machine was short of CPU",
               RUNS, FLUSH_MS, MARGIN_MS);
    unsetenv("MEMTRACE_OUTPUT");
    unsetenv("MEMTRACE_FLUSH_MS");
}

int main(void)
{
    h_setup();
    plan(13);
    char path[400], dump[400], info_err[400], err[400];
    snprintf(path, sizeof path, "%s/kill.memtrace", h_tmpdir);
    snprintf(dump, sizeof dump, "%s/kill.dump1.memtrace", h_tmpdir);
    snprintf(info_err, sizeof info_err, "%s/info.err", h_tmpdir);
    snprintf(err, sizeof err, "%s/prog.err", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", path, 1);
    setenv("MEMTRACE_FLUSH_MS", "100", 1);
    setenv("MEMTRACE_DUMP_SIGNAL", "USR2", 1);
    char *argv[] = {PROG_DIR "/cuda_prog", "kill", "1", "50", NULL};
    int fd, st;
    pid_t pid = h_spawn(argv, 1, &fd, err);
    int n = read_count(fd);
    is_int(50, n, "program made 50 allocations and waited past a flush");

    kill(pid, SIGUSR2);
    ok(wait_for(err), "the dump signal wrote %s", dump);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    close(fd);
    ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "program was killed");

    struct h_file f;
    h_read(&f, path);
    is_int(0, f.rc, "killed program's file reads without error");
    is_int(50, (long long)h_count(&f, MEMTRACE_SEGMENT_ALLOC), "every allocation before the flush");
    is_int(1, f.truncated, "file reads as truncated");
    ok(h_count(&f, MEMTRACE_COUNTER) > 0, "sampler counters were recorded");
    h_close(&f);

    h_read(&f, dump);
    is_int(0, f.truncated, "the dump is complete");
    is_int(50, (long long)h_count(&f, MEMTRACE_SEGMENT_ALLOC), "the dump has the 50 allocations");
    is_int(50, h_segments(&f), "and their 50 live segments");
    h_close(&f);

    char *iargv[] = {BUILDDIR "/memtrace", "info", path, NULL};
    if (access(iargv[0], X_OK) == 0) {
        char *out;
        h_run(iargv, 0, &out, info_err);
        char *ierr = h_slurp_file(info_err);
        ok(strstr(ierr, "truncated") != NULL || strstr(out, "truncated") != NULL,
           "memtrace info says truncated");
        free(ierr);
        free(out);
    } else {
        skip(1, "memtrace CLI not built");
    }
    crash_loss();
    h_cleanup();
    return exit_status();
}
