/* run-t: `memtrace run` finds the preload library in the build tree, sets the
 * output pattern and stacks, returns the command's status (128 + signal when
 * killed) and summarises the file written. */
#include "harness.h"

static int run_cli(char *const argv[], char **err_out)
{
    char err_path[400];
    snprintf(err_path, sizeof err_path, "%s/run.err", h_tmpdir);
    char *out;
    int st = h_run(argv, 0, &out, err_path);
    free(out);
    *err_out = h_slurp_file(err_path);
    return st;
}

int main(void)
{
    h_setup();
    if (access(BUILDDIR "/memtrace", X_OK) != 0)
        skip_all("memtrace CLI not built");
    plan(15);
    /* A sanitizer runtime stays first; memtrace run puts the preload after it. */
    char asan[600];
    snprintf(asan, sizeof asan, "%s", getenv("LD_PRELOAD_FOR_TEST"));
    char *sp = strchr(asan, ' ');
    if (sp != NULL) {
        *sp = '\0';
        setenv("LD_PRELOAD", asan, 1);
    }
    char pat[400], path_prefix[32];
    snprintf(pat, sizeof pat, "%s/run-%%p.memtrace", h_tmpdir);
    snprintf(path_prefix, sizeof path_prefix, "run-");
    setenv("MEMTRACE_SAMPLE_MS", "0", 1);
    char *err;
    char *argv[] = {
        BUILDDIR "/memtrace",  "run",    "-o", pat, "--stacks", "none", "--flush-ms", "200", "--",
        PROG_DIR "/cuda_prog", "driver", NULL};
    int st = run_cli(argv, &err);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "memtrace run exits with the command's 0");
    is_int(1, h_count_files(path_prefix), "one file written from the pattern");
    ok(strstr(err, ": 29 events, peak reserved ") != NULL, "summary names 29 events");
    /* The program's peak is 2,130,944 bytes with its mapped and host memory: the line
     * gives memtrace summary's figure, not one replayed by other rules. */
    ok(strstr(err, "peak reserved 2.0 MiB") != NULL, "the peak is memtrace summary's");
    ok(strstr(err, h_tmpdir) != NULL, "summary names the file");
    free(err);

    /* The same path again: the recorder refuses to replace it, and the file from the
     * run before (written within the same second) is not summarised as this run's. */
    char fixed[400];
    snprintf(fixed, sizeof fixed, "%s/run-fixed.memtrace", h_tmpdir);
    char *argv8[] = {BUILDDIR "/memtrace",  "run",    "-o", fixed, "--stacks", "none", "--",
                     PROG_DIR "/cuda_prog", "driver", NULL};
    run_cli(argv8, &err);
    free(err);
    st = run_cli(argv8, &err);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(err, "File exists") != NULL &&
           strstr(err, " events, peak ") == NULL && strstr(err, "nothing recorded") != NULL,
       "a second run to the same file: said refused, the old file not summarised (%s)", err);
    free(err);

    char *argv2[] = {BUILDDIR "/memtrace", "run", "-o", pat, "sh", "-c", "exit 7", NULL};
    st = run_cli(argv2, &err);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 7, "exit status 7 is passed on");
    ok(strstr(err, "memtrace: nothing recorded: no file from this run matches ") != NULL,
       "no device allocation: said, not silence");
    ok(strstr(err, " events, peak ") == NULL, "and no earlier file summarised");
    free(err);
    char *argv3[] = {BUILDDIR "/memtrace", "run", "-o", pat, "sh", "-c", "kill -9 $$", NULL};
    st = run_cli(argv3, &err);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 137, "killed by SIGKILL gives 137");
    free(err);
    char *argv4[] = {BUILDDIR "/memtrace", "run", "--stacks", "200", "true", NULL};
    st = run_cli(argv4, &err);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 2 && strstr(err, "--stacks") != NULL,
       "a bad --stacks is a usage error naming the flag");
    free(err);
    char *argv5[] = {BUILDDIR "/memtrace", "run", NULL};
    st = run_cli(argv5, &err);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 2, "no command is a usage error");
    free(err);
    /* Level Zero's sysman answers only when this is set before zeInit. */
    char *argv7[] = {BUILDDIR "/memtrace", "run", "sh", "-c", "exit ${ZES_ENABLE_SYSMAN:-9}", NULL};
    unsetenv("ZES_ENABLE_SYSMAN");
    st = run_cli(argv7, &err);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 1, "ZES_ENABLE_SYSMAN=1 is set for the command");
    free(err);
    setenv("ZES_ENABLE_SYSMAN", "0", 1);
    st = run_cli(argv7, &err);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a ZES_ENABLE_SYSMAN of the user's is kept");
    unsetenv("ZES_ENABLE_SYSMAN");
    free(err);
    char *argv6[] = {BUILDDIR "/memtrace", "run", "--", "/nonexistent/prog", NULL};
    st = run_cli(argv6, &err);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 127 && strstr(err, "cannot run") != NULL,
       "a missing command gives 127 and a message");
    free(err);
    h_cleanup();
    return exit_status();
}
