/* kill-t: crash safety. A program allocates, waits past the flush interval, says
 * how many it made, and is killed with SIGKILL: the file holds exactly those events
 * and reads as truncated. Also: the dump signal writes a complete snapshot. */
#include "harness.h"

#include <poll.h>

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

int main(void)
{
    h_setup();
    plan(11);
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
    h_cleanup();
    return exit_status();
}
