/* ze_sysman-t: the sampler's Level Zero counters. ze_hold_prog holds 1 MiB + 1000
 * bytes on device 0 and 8192 bytes of shared memory on device 1 for 10 sample
 * periods, then frees everything: with ZES_ENABLE_SYSMAN=1 the counters show exactly
 * those used bytes and the fake's capacity per device, then 0; without it there is
 * no Level Zero counter and one line says why. */
#include "harness.h"

#include "config.h"

#if !MEMTRACE_HAVE_LEVEL_ZERO
int main(void)
{
    skip_all("built without the Level Zero loader (install libze-dev libze1)");
}
#else
#define CAPACITY (64ULL << 20)

struct counts {
    size_t dev0_held, dev1_held, dev0_zero, dev1_zero, other, figureless;
    size_t passing; /* states the program passes through between its calls */
};

static void count(const struct h_file *f, struct counts *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < f->n; i++) {
        const struct memtrace_event *e = &f->ev[i];
        if (e->action != MEMTRACE_COUNTER)
            continue;
        if (e->device == -1 && e->addr == 0 && e->size == 0)
            c->figureless++;
        else if (e->device == 0 && e->size == CAPACITY && e->addr == (1u << 20) + 1000)
            c->dev0_held++;
        else if (e->device == 1 && e->size == CAPACITY && e->addr == 8192)
            c->dev1_held++;
        else if (e->device == 0 && e->size == CAPACITY && e->addr == 0)
            c->dev0_zero++;
        else if (e->device == 1 && e->size == CAPACITY && e->addr == 0)
            c->dev1_zero++;
        else if (e->device == 0 && e->size == CAPACITY && (e->addr == 1u << 20 || e->addr == 1000))
            c->passing++; /* a sample between the two allocations or the two frees */
        else {
            diag("unexpected counter: device %d used %llu total %llu", e->device,
                 (unsigned long long)e->addr, (unsigned long long)e->size);
            c->other++;
        }
    }
}

static int run(const char *name, int sysman, struct h_file *f, char **err)
{
    char pat[400], err_path[400], file[600];
    snprintf(pat, sizeof pat, "%s/%s-%%p.memtrace", h_tmpdir, name);
    snprintf(err_path, sizeof err_path, "%s/%s.stderr", h_tmpdir, name);
    setenv("MEMTRACE_OUTPUT", pat, 1);
    if (sysman)
        setenv("ZES_ENABLE_SYSMAN", "1", 1);
    else
        unsetenv("ZES_ENABLE_SYSMAN");
    char *argv[] = {PROG_DIR "/ze_hold_prog", "200", NULL};
    int st = h_run(argv, 1, NULL, err_path);
    *err = h_slurp_file(err_path);
    unlink(err_path);
    DIR *d = opendir(h_tmpdir);
    struct dirent *e;
    file[0] = '\0';
    while (d != NULL && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, name, strlen(name)) == 0 && strstr(e->d_name, ".memtrace"))
            snprintf(file, sizeof file, "%s/%s", h_tmpdir, e->d_name);
    if (d != NULL)
        closedir(d);
    h_read(f, file);
    return st;
}

int main(void)
{
    if (access(PRELOAD_SO, R_OK) != 0)
        skip_all("the preload library is not built yet");
    if (access(FAKE_DIR "/libze_fake.so", R_OK) != 0)
        skip_all("the fake Level Zero driver is not built");
    h_setup();
    setenv("MEMTRACE_SAMPLE_MS", "20", 1);
    setenv("MEMTRACE_STACKS", "none", 1);
    setenv("ZE_ENABLE_ALT_DRIVERS", FAKE_DIR "/libze_fake.so", 1);
    setenv("FAKE_ZE_DEVICES", "2", 1);
    setenv("FAKE_ZE_MEMORY", "64M", 1);
    unsetenv("ZE_ENABLE_TRACING_LAYER");

    struct h_file f;
    struct counts c;
    char *err;
    int st = run("sysman", 1, &f, &err);
    is_int(0, st, "ze_hold_prog exits 0 with ZES_ENABLE_SYSMAN=1");
    is_int(0, f.rc, "file reads without error");
    is_int(8, (long long)(h_count(&f, MEMTRACE_SEGMENT_ALLOC) + h_count(&f, MEMTRACE_SEGMENT_FREE)),
           "4 allocations and 4 frees");
    count(&f, &c);
    /* 200 ms held at a 20 ms period: 10 samples, fewer on a loaded machine. */
    ok(c.dev0_held >= 3, "device 0: used = 1 MiB + 1000 bytes, total = 64 MiB, in %zu samples",
       c.dev0_held);
    ok(c.dev1_held >= 3, "device 1: used = 8192 bytes, total = 64 MiB, in %zu samples",
       c.dev1_held);
    ok(c.dev0_zero >= 1 && c.dev1_zero >= 1,
       "after the frees both devices show 0 used (%zu, %zu samples)", c.dev0_zero, c.dev1_zero);
    is_int(0, (long long)c.other,
           "no counter with a figure the program never had (%zu between calls)", c.passing);
    is_int(0, (long long)c.figureless, "no figureless counter while Level Zero answers");
    ok(strstr(err, "sysman") == NULL, "nothing on stderr about sysman");
    free(err);
    h_close(&f);

    st = run("nosysman", 0, &f, &err);
    is_int(0, st, "ze_hold_prog exits 0 without ZES_ENABLE_SYSMAN");
    count(&f, &c);
    is_int(0,
           (long long)(c.dev0_held + c.dev1_held + c.dev0_zero + c.dev1_zero + c.other + c.passing),
           "without sysman: no Level Zero counter");
    ok(c.figureless >= 3, "without sysman: the figureless counter carries on (%zu)", c.figureless);
    ok(strstr(err, "memtrace: Level Zero sysman answered 0x78000001: no device memory "
                   "counters (set ZES_ENABLE_SYSMAN=1 before the program's zeInit)") != NULL,
       "without sysman: one line says why");
    free(err);
    h_close(&f);

    h_cleanup();
    done_testing();
    return exit_status();
}
#endif
