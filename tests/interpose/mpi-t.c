/* mpi-t: `memtrace run -o run-%r.memtrace` under a real mpirun with 4 ranks writes one
 * file per rank whose name and metadata agree on the rank, and `memtrace summary`
 * of the 4 files prints one line per rank. Skips where Open MPI's mpirun is absent. */
#include "harness.h"

#include <jansson.h>

static int find_in_path(const char *name, char *out, size_t size)
{
    const char *path = getenv("PATH");
    if (path == NULL)
        return -1;
    char *copy = strdup(path), *save = NULL;
    int found = -1;
    for (char *dir = strtok_r(copy, ":", &save); dir && found < 0;
         dir = strtok_r(NULL, ":", &save)) {
        snprintf(out, size, "%s/%s", dir, name);
        if (access(out, X_OK) == 0)
            found = 0;
    }
    free(copy);
    return found;
}

/* The rank in a file's metadata, or -1. */
static long long meta_rank(const char *path)
{
    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    if (memtrace_reader_open(&r, path, &err) != 0)
        return -1;
    struct memtrace_event ev;
    while (memtrace_reader_next(r, &ev) == 1)
        ;
    json_t *meta = json_loads(memtrace_reader_meta(r), 0, NULL);
    json_t *rank = json_object_get(meta, "rank");
    long long v = json_is_integer(rank) ? json_integer_value(rank) : -1;
    json_decref(meta);
    memtrace_reader_close(r);
    return v;
}

int main(void)
{
    h_setup();
    h_skip_under_tsan(
        "the preloaded TSan runtime would watch mpirun and Open MPI, which are not built with it");
    char mpirun[600];
    if (find_in_path("mpirun", mpirun, sizeof mpirun) != 0)
        skip_all("mpirun not found (Debian: apt-get install openmpi-bin)");
    if (access(BUILDDIR "/memtrace", X_OK) != 0)
        skip_all("memtrace CLI not built");
    plan(12);
    /* A sanitizer runtime stays first, as run-t does it. */
    char asan[600];
    snprintf(asan, sizeof asan, "%s", getenv("LD_PRELOAD_FOR_TEST"));
    char *sp = strchr(asan, ' ');
    if (sp != NULL) {
        *sp = '\0';
        setenv("LD_PRELOAD", asan, 1);
    }
    setenv("MEMTRACE_SAMPLE_MS", "0", 1);
    /* Open MPI refuses root unless told; these machines run tests as root. */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    char pat[400], err_path[400];
    snprintf(pat, sizeof pat, "%s/run-%%r.memtrace", h_tmpdir);
    snprintf(err_path, sizeof err_path, "%s/mpirun.err", h_tmpdir);
    char *argv[] = {mpirun,
                    "--oversubscribe",
                    "-np",
                    "4",
                    "-x",
                    "LD_LIBRARY_PATH",
                    "-x",
                    "MEMTRACE_SAMPLE_MS",
                    BUILDDIR "/memtrace",
                    "run",
                    "-o",
                    pat,
                    "--stacks",
                    "none",
                    "--",
                    PROG_DIR "/cuda_prog",
                    "driver",
                    NULL};
    int st = h_run(argv, 0, NULL, err_path);
    if (!ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "mpirun -np 4 memtrace run: exit 0")) {
        char *err = h_slurp_file(err_path);
        diag("%s", err);
        free(err);
    }
    is_int(4, h_count_files("run-"), "4 files written");
    /* Each rank's memtrace run names its own file, and no other rank's half-written one. */
    char *err = h_slurp_file(err_path);
    int own = 0, closing = 0;
    for (const char *p = err; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
        if (strncmp(p, "memtrace: ", 10) != 0)
            continue;
        closing++;
        for (int k = 0; k < 4; k++) {
            char want[600];
            snprintf(want, sizeof want, "memtrace: %s/run-%d.memtrace: ", h_tmpdir, k);
            own += strncmp(p, want, strlen(want)) == 0;
        }
    }
    ok(own == 4 && closing == 4 && strstr(err, "truncated") == NULL,
       "each rank's closing line names its own file only (%d lines)", closing);
    free(err);
    char paths[4][512];
    for (int k = 0; k < 4; k++) {
        snprintf(paths[k], sizeof paths[k], "%s/run-%d.memtrace", h_tmpdir, k);
        is_int(k, meta_rank(paths[k]), "run-%d.memtrace: its metadata says rank %d", k, k);
    }
    char summary_err[400];
    snprintf(summary_err, sizeof summary_err, "%s/summary.err", h_tmpdir);
    char *sargv[] = {
        BUILDDIR "/memtrace", "summary", "--json", paths[2], paths[0], paths[3], paths[1], NULL};
    char *out;
    st = h_run(sargv, 0, &out, summary_err);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "summary of the 4 files: exit 0");
    json_t *j = json_loads(out, 0, NULL);
    json_t *files = json_object_get(j, "files");
    static const int order[4] = {2, 0, 3, 1};
    int ranks_ok = json_array_size(files) == 4, events_ok = 1;
    long long total = 0;
    for (size_t k = 0; k < json_array_size(files); k++) {
        json_t *f = json_array_get(files, k);
        ranks_ok &= json_integer_value(json_object_get(f, "rank")) == order[k];
        long long ev = json_integer_value(json_object_get(f, "events"));
        events_ok &= ev >= 29; /* cuda_prog driver's 29, plus any counter sample */
        total += ev;
    }
    ok(ranks_ok, "summary: one entry per file, with the rank of each");
    ok(events_ok, "summary: each rank's file has the program's 29 events");
    is_int(total, json_integer_value(json_object_get(json_object_get(j, "total"), "events")),
           "summary: the total adds the ranks' events");
    json_decref(j);
    free(out);
    char *targv[] = {BUILDDIR "/memtrace", "summary", paths[0], paths[1], paths[2], paths[3], NULL};
    st = h_run(targv, 0, &out, summary_err);
    int lines = 0;
    for (int k = 0; k < 4; k++) {
        char want[64];
        snprintf(want, sizeof want, "\n     %d ", k);
        lines += strstr(out, want) != NULL;
    }
    is_int(4, lines, "summary text: a line for each of the ranks 0 to 3");
    free(out);
    h_cleanup();
    return exit_status();
}
