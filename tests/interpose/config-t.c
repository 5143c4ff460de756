/* config-t: interpose/config.c. The parser itself (compiled into this test), then
 * bad values end to end: one line naming the variable, no file, and the program
 * still runs and exits 0. */
#include "harness.h"

#include <jansson.h>

#include "interpose/internal.h"
#include "mtx/pattern.h"
#include "mtx/rank.h"

static void unit(void)
{
    struct mt_ip_config c;
    char buf[256], want[256];

    unsetenv("MEMTRACE_OUTPUT");
    is_int(0, mt_ip_config_read(&c), "defaults parse");
    snprintf(want, sizeof want, "memtrace-%d.memtrace", (int)getpid());
    is_string(want, c.output, "default output is memtrace-%%p.memtrace");
    ok(c.stack_depth == 32 && c.flush_ms == 1000 && c.sample_ms == 10 && c.dump_signal == 0 &&
           c.max_entries == 0 && c.caching == 0,
       "default depth 32, flush 1000 ms, sample 10 ms, no dump signal");

    setenv("RANK", "3", 1);
    is_int(0, mtx_output_path(buf, sizeof buf, "/x/r%r-p%p-%%.mt", 42), "expand %%r %%p %%%%");
    is_string("/x/r3-p42-%.mt", buf, "rank, pid and percent expanded");
    unsetenv("RANK");
    setenv("SLURM_PROCID", "7", 1);
    mtx_output_path(buf, sizeof buf, "r%r", 1);
    is_string("r7", buf, "rank from SLURM_PROCID");
    unsetenv("SLURM_PROCID");
    mtx_output_path(buf, sizeof buf, "r%r", 1);
    is_string("r0", buf, "rank 0 when no launcher sets one");
    char host[128];
    gethostname(host, sizeof host);
    mtx_output_path(buf, sizeof buf, "%h", 1);
    is_string(host, buf, "%%h is the host name");
    is_int(-1, mtx_output_path(buf, sizeof buf, "a%q", 1), "unknown %%q is an error");
    is_int(-1, mtx_output_path(buf, 8, "%p%p%p", 123456), "too long is an error");

    setenv("MEMTRACE_STACKS", "none", 1);
    setenv("MEMTRACE_FLUSH_MS", "250", 1);
    setenv("MEMTRACE_DUMP_SIGNAL", "SIGUSR1", 1);
    setenv("MEMTRACE_SAMPLE_MS", "0", 1);
    setenv("MEMTRACE_MAX_ENTRIES", "5000", 1);
    is_int(0, mt_ip_config_read(&c), "explicit values parse");
    ok(c.stack_depth == 0 && c.flush_ms == 250 && c.dump_signal == SIGUSR1 && c.sample_ms == 0 &&
           c.max_entries == 5000,
       "none, 250, SIGUSR1, 0, 5000 read back");
    setenv("MEMTRACE_DUMP_SIGNAL", "12", 1);
    setenv("MEMTRACE_STACKS", "128", 1);
    mt_ip_config_read(&c);
    ok(c.dump_signal == 12 && c.stack_depth == 128, "signal by number, depth 128");
    setenv("MEMTRACE_DUMP_SIGNAL", "USR2", 1);
    mt_ip_config_read(&c);
    is_int(SIGUSR2, c.dump_signal, "signal by short name");
    /* A fault signal would loop (the handler returns to the faulting instruction),
     * glibc keeps 32 and 33, and the others mean something to the program. */
    static const char *const refused[] = {
        "11",   "SEGV", "SIGSEGV", "7",  "BUS", "8",    "FPE",  "4",    "ILL",  "5",
        "TRAP", "6",    "ABRT",    "31", "SYS", "32",   "33",   "17",   "CHLD", "2",
        "INT",  "13",   "PIPE",    "9",  "19",  "TERM", "TSTP", "CONT", "0",    "65"};
    int accepted = 0;
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        setenv("MEMTRACE_DUMP_SIGNAL", refused[i], 1);
        if (mt_ip_config_read(&c) == 0) {
            diag("MEMTRACE_DUMP_SIGNAL=%s accepted", refused[i]);
            accepted++;
        }
    }
    is_int(0, accepted, "fault, reserved and system signals refused by name and number");
    setenv("MEMTRACE_DUMP_SIGNAL", "34", 1);
    ok(mt_ip_config_read(&c) == 0 && c.dump_signal == 34, "a real-time signal by number");
    setenv("MEMTRACE_DUMP_SIGNAL", "10", 1);
    ok(mt_ip_config_read(&c) == 0 && c.dump_signal == SIGUSR1, "USR1 by number");
    setenv("MEMTRACE_CACHING", "1", 1);
    setenv("MEMTRACE_ALLOC_CONF", "max_split_size_mb:64", 1);
    ok(mt_ip_config_read(&c) == 0 && c.caching == 1, "MEMTRACE_CACHING=1 turns caching on");
    setenv("MEMTRACE_ALLOC_CONF", "max_split_size_mb:x", 1);
    is_int(-1, mt_ip_config_read(&c), "with caching, a bad MEMTRACE_ALLOC_CONF is an error");
    unsetenv("MEMTRACE_ALLOC_CONF");
    unsetenv("MEMTRACE_CACHING");
    unsetenv("MEMTRACE_STACKS");
    unsetenv("MEMTRACE_FLUSH_MS");
    unsetenv("MEMTRACE_DUMP_SIGNAL");
    unsetenv("MEMTRACE_SAMPLE_MS");
    unsetenv("MEMTRACE_MAX_ENTRIES");
}

static void bad_value(const char *var, const char *value)
{
    char pat[400], err_path[400];
    snprintf(pat, sizeof pat, "%s/bad-%%p.memtrace", h_tmpdir);
    snprintf(err_path, sizeof err_path, "%s/bad.err", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", pat, 1);
    setenv(var, value, 1);
    char *argv[] = {PROG_DIR "/cuda_prog", "driver", NULL};
    char *out;
    int st = h_run(argv, 1, &out, err_path);
    unsetenv(var);
    char *err = h_slurp_file(err_path);
    char want[200];
    snprintf(want, sizeof want, "memtrace: %s=%s is not valid (", var, value);
    int lines = 0;
    for (const char *p = err; *p; p++)
        lines += *p == '\n';
    ok(st == 0 && strstr(out, "C cuMemAlloc_v2 1\n") != NULL &&
           strncmp(err, want, strlen(want)) == 0 && lines == 1 && h_count_files("bad-") == 0,
       "%s=%s: one line on stderr, no file, the program runs to the end", var, value);
    if (strncmp(err, want, strlen(want)) != 0 || lines != 1)
        diag("stderr: %s", err);
    free(err);
    free(out);
}

/* An output folder that does not exist: one line naming the file and the reason,
 * and the program runs to the end unrecorded. */
static void unwritable(void)
{
    char err_path[400];
    snprintf(err_path, sizeof err_path, "%s/unwritable.err", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", "/nonexistent-memtrace-dir/x.memtrace", 1);
    char *argv[] = {PROG_DIR "/cuda_prog", "driver", NULL};
    char *out;
    int st = h_run(argv, 1, &out, err_path);
    unsetenv("MEMTRACE_OUTPUT");
    char *err = h_slurp_file(err_path);
    is_string("memtrace: cannot record to /nonexistent-memtrace-dir/x.memtrace: No such file or "
              "directory; recording is off for this process\n",
              err, "an unwritable output: one line with the reason");
    ok(st == 0 && strstr(out, "C cuMemAlloc_v2 1\n") != NULL, "and the program runs to the end");
    free(err);
    free(out);
}

/* With several launchers' variables set at once, the rank in a file's metadata and
 * the %r in its name are one and the same: the first of RANK, OMPI_COMM_WORLD_RANK,
 * PMI_RANK, SLURM_PROCID that holds a number, LOCAL_RANK only after them. rank is
 * RANK's value (NULL: unset), want the rank both must show. */
static void rank_agrees(const char *rank, long want)
{
    char pat[400], path[400];
    if (rank != NULL)
        setenv("RANK", rank, 1);
    else
        unsetenv("RANK");
    setenv("LOCAL_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_RANK", "5", 1);
    setenv("PMI_RANK", "6", 1);
    setenv("SLURM_PROCID", "7", 1);
    is_int(want, mtx_rank(), "RANK=%s: mtx_rank is %ld", rank ? rank : "(unset)", want);
    snprintf(pat, sizeof pat, "%s/rank-r%%r.memtrace", h_tmpdir);
    snprintf(path, sizeof path, "%s/rank-r%ld.memtrace", h_tmpdir, want);
    setenv("MEMTRACE_OUTPUT", pat, 1);
    char *argv[] = {PROG_DIR "/cuda_prog", "driver", NULL};
    int st = h_run(argv, 1, NULL, NULL);
    unsetenv("MEMTRACE_OUTPUT");
    unsetenv("RANK");
    unsetenv("LOCAL_RANK");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("PMI_RANK");
    unsetenv("SLURM_PROCID");
    struct h_file f;
    h_read(&f, path);
    ok(st == 0 && f.rc == 0, "RANK=%s: the preload wrote %s", rank ? rank : "(unset)",
       strrchr(path, '/') + 1);
    json_t *meta = f.r != NULL ? json_loads(memtrace_reader_meta(f.r), 0, NULL) : NULL;
    json_t *r = meta != NULL ? json_object_get(meta, "rank") : NULL;
    is_int(want, json_is_integer(r) ? (long long)json_integer_value(r) : -1,
           "RANK=%s: its metadata rank is %ld too", rank ? rank : "(unset)", want);
    json_decref(meta);
    h_close(&f);
    unlink(path);
}

/* An output that exists already (a file, or a link to one) is left alone: one line
 * naming it and the reason, and the program runs unrecorded. */
static void existing(void)
{
    char file[400], link_path[400], err_path[400], want[1200];
    snprintf(file, sizeof file, "%s/existing.txt", h_tmpdir);
    snprintf(link_path, sizeof link_path, "%s/existing-link.memtrace", h_tmpdir);
    snprintf(err_path, sizeof err_path, "%s/existing.err", h_tmpdir);
    FILE *f = fopen(file, "w");
    fputs("precious\n", f);
    fclose(f);
    if (symlink(file, link_path) != 0)
        bail_out("symlink failed");
    const char *paths[] = {file, link_path};
    for (int i = 0; i < 2; i++) {
        setenv("MEMTRACE_OUTPUT", paths[i], 1);
        char *argv[] = {PROG_DIR "/cuda_prog", "driver", NULL};
        char *out;
        int st = h_run(argv, 1, &out, err_path);
        char *err = h_slurp_file(err_path);
        snprintf(want, sizeof want,
                 "memtrace: cannot record to %s: File exists; recording is off for this process\n",
                 paths[i]);
        is_string(want, err, "output %s exists: one line naming it", i ? "link" : "file");
        char *kept = h_slurp_file(file);
        ok(st == 0 && strstr(out, "C cuMemAlloc_v2 1\n") != NULL && strcmp(kept, "precious\n") == 0,
           "the program runs to the end and the file is untouched");
        free(kept);
        free(err);
        free(out);
    }
    unsetenv("MEMTRACE_OUTPUT");
    unlink(link_path);
    unlink(file);
}

/* A refused dump signal leaves the program to crash as it would unrecorded: killed
 * by SIGSEGV (exit 139 in a shell), not looping in a handler writing dumps. */
static void crash(void)
{
    char pat[400], err_path[400];
    snprintf(pat, sizeof pat, "%s/crash-%%p.memtrace", h_tmpdir);
    snprintf(err_path, sizeof err_path, "%s/crash.err", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", pat, 1);
    setenv("MEMTRACE_DUMP_SIGNAL", "11", 1);
    /* In a sanitizer build, the program must die of the fault as a plain one does. */
    setenv("ASAN_OPTIONS", "detect_leaks=0:handle_segv=0", 1);
    const char *tsan = getenv("TSAN_OPTIONS");
    char *tsan_saved = tsan ? strdup(tsan) : NULL;
    setenv("TSAN_OPTIONS", "handle_segv=0", 1);
    char *argv[] = {PROG_DIR "/cuda_prog", "crash", NULL};
    pid_t pid = h_spawn(argv, 1, NULL, err_path);
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    if (tsan_saved)
        setenv("TSAN_OPTIONS", tsan_saved, 1);
    else
        unsetenv("TSAN_OPTIONS");
    free(tsan_saved);
    unsetenv("MEMTRACE_DUMP_SIGNAL");
    unsetenv("MEMTRACE_OUTPUT");
    int st = 0, waited = 0;
    for (int i = 0; i < 1000 && (waited = (int)waitpid(pid, &st, WNOHANG)) == 0; i++)
        usleep(10000);
    if (waited == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        diag("still running after 10 s: killed");
    }
    ok(waited == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
       "MEMTRACE_DUMP_SIGNAL=11: a segfaulting program dies of SIGSEGV");
    char *err = h_slurp_file(err_path);
    ok(strncmp(err, "memtrace: MEMTRACE_DUMP_SIGNAL=11 is not valid (", 48) == 0,
       "with one line saying 11 is refused");
    free(err);
    is_int(0, h_count_files("crash-"), "and no file, no dumps");
}

int main(void)
{
    h_setup();
    plan(47);
    unwritable();
    existing();
    unit();
    bad_value("MEMTRACE_STACKS", "deep");
    bad_value("MEMTRACE_STACKS", "129");
    bad_value("MEMTRACE_FLUSH_MS", "0");
    bad_value("MEMTRACE_MAX_ENTRIES", "-5");
    bad_value("MEMTRACE_DUMP_SIGNAL", "KILL");
    bad_value("MEMTRACE_DUMP_SIGNAL", "SEGV");
    bad_value("MEMTRACE_SAMPLE_MS", "10ms");
    bad_value("MEMTRACE_OUTPUT", "out-%z");
    bad_value("MEMTRACE_CACHING", "yes");
    crash();
    is_int(0, h_count_files("bad-"), "no output file from any bad configuration");
    rank_agrees(NULL, 5);
    rank_agrees("x", 5);
    rank_agrees("2", 2);
    h_cleanup();
    return exit_status();
}
