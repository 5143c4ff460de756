/* config-t: interpose/config.c. The parser itself (compiled into this test), then
 * bad values end to end: one line naming the variable, no file, and the program
 * still runs and exits 0. */
#include "harness.h"

#include "interpose/internal.h"

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
    is_int(0, mt_ip_expand_output("/x/r%r-p%p-%%.mt", 42, buf, sizeof buf), "expand %%r %%p %%%%");
    is_string("/x/r3-p42-%.mt", buf, "rank, pid and percent expanded");
    unsetenv("RANK");
    setenv("SLURM_PROCID", "7", 1);
    mt_ip_expand_output("r%r", 1, buf, sizeof buf);
    is_string("r7", buf, "rank from SLURM_PROCID");
    unsetenv("SLURM_PROCID");
    mt_ip_expand_output("r%r", 1, buf, sizeof buf);
    is_string("r0", buf, "rank 0 when no launcher sets one");
    char host[128];
    gethostname(host, sizeof host);
    mt_ip_expand_output("%h", 1, buf, sizeof buf);
    is_string(host, buf, "%%h is the host name");
    is_int(-1, mt_ip_expand_output("a%q", 1, buf, sizeof buf), "unknown %%q is an error");
    is_int(-1, mt_ip_expand_output("%p%p%p", 123456, buf, 8), "too long is an error");

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

int main(void)
{
    h_setup();
    plan(27);
    unwritable();
    unit();
    bad_value("MEMTRACE_STACKS", "deep");
    bad_value("MEMTRACE_STACKS", "129");
    bad_value("MEMTRACE_FLUSH_MS", "0");
    bad_value("MEMTRACE_MAX_ENTRIES", "-5");
    bad_value("MEMTRACE_DUMP_SIGNAL", "KILL");
    bad_value("MEMTRACE_SAMPLE_MS", "10ms");
    bad_value("MEMTRACE_OUTPUT", "out-%z");
    bad_value("MEMTRACE_CACHING", "yes");
    is_int(0, h_count_files("bad-"), "no output file from any bad configuration");
    h_cleanup();
    return exit_status();
}
