/* ze_oom-t: Level Zero allocations the fake driver refuses (device and shared memory
 * beyond FAKE_ZE_MEMORY, host memory beyond its arena), through both routes of the
 * interposer: the program gets the same results with the preload as without it, and
 * the file has an oom event in place of each refusal with the bytes asked for, the
 * device, and the device's free bytes then from sysman. */
#include "harness.h"

#include "config.h"

#if !MEMTRACE_HAVE_LEVEL_ZERO
int main(void)
{
    skip_all("built without the Level Zero loader (install libze-dev libze1)");
}
#else
#define MiB (1ULL << 20)

/* The program's "R <i> <result>" lines as one string, for comparing two runs. */
static void results(const char *out, char *buf, size_t len)
{
    buf[0] = '\0';
    for (const char *p = out; p != NULL && *p != '\0'; p = strchr(p, '\n')) {
        if (*p == '\n')
            p++;
        if (p[0] == 'R' && p[1] == ' ') {
            size_t n = strcspn(p, "\n"), used = strlen(buf);
            if (used + n + 2 < len)
                snprintf(buf + used, len - used, "%.*s;", (int)n, p);
        }
    }
}

static void check_route(const char *route, int layer, const char *plain)
{
    struct h_route_run r;
    h_route_run(&r, "ze_prog", "oom", route, layer);
    ok(r.status == 0 && r.f.r != NULL, "%s route: ze_prog oom runs and writes a file", route);
    char traced[512];
    results(r.out ? r.out : "", traced, sizeof traced);
    is_string(plain, traced, "%s route: the program gets the driver's results unchanged", route);
    struct h_want w[16];
    size_t nw = h_parse_wants(r.out ? r.out : "", w, 16);
    const struct h_file *f = &r.f;
    is_int(5, (long long)nw, "%s route: the program expects 5 events", route);
    is_int((long long)nw, (long long)f->n, "%s route: as many events in the file", route);
    is_int(0, h_mismatches(f, w, nw), "%s route: action, source, size and device of each", route);
    is_int(3, (long long)h_count(f, MEMTRACE_OOM), "%s route: three oom events", route);
    const struct memtrace_event *dev_oom = f->n > 1 ? &f->ev[1] : NULL;
    is_int((long long)(768 * MiB), dev_oom ? (long long)dev_oom->aux : -1,
           "%s route: the device refusal carries the free bytes then (1 GiB - 256 MiB)", route);
    const struct memtrace_event *host_oom = f->n > 3 ? &f->ev[3] : NULL;
    is_int(0, host_oom ? (long long)host_oom->aux : -1,
           "%s route: host memory has no device figure (0)", route);
    is_int(0, h_segments(f), "%s route: nothing live at exit", route);
    h_route_run_free(&r);
}

int main(void)
{
    if (access(PRELOAD_SO, R_OK) != 0)
        skip_all("the preload library is not built yet");
    if (access(FAKE_DIR "/libze_fake.so", R_OK) != 0)
        skip_all("the fake Level Zero driver is not built");
    void *layer = dlopen("libze_tracing_layer.so.1", RTLD_LAZY);
    int have_layer = layer != NULL;
    if (layer != NULL)
        dlclose(layer);
    h_setup();
    plan(have_layer ? 20 : 11);
    setenv("MEMTRACE_SAMPLE_MS", "0", 1);
    setenv("ZE_ENABLE_ALT_DRIVERS", FAKE_DIR "/libze_fake.so", 1);
    setenv("ZES_ENABLE_SYSMAN", "1", 1);
    setenv("FAKE_ZE_DEVICES", "2", 1);
    setenv("FAKE_ZE_MEMORY", "1G", 1);

    char *argv[] = {PROG_DIR "/ze_prog", "oom", NULL};
    char *out = NULL, plain[512];
    is_int(0, h_run(argv, 0, &out, NULL), "without the preload: ze_prog oom exits 0");
    results(out ? out : "", plain, sizeof plain);
    is_string("R 0 0;R 1 0x70000003;R 2 0x70000003;R 3 0x70000002;", plain,
              "without the preload: 256 MiB granted; 1 GiB and 2 GiB shared refused for device "
              "memory, 1 TiB of host memory for host memory");
    free(out);

    check_route("symbols", 0, plain);
    if (have_layer)
        check_route("tracing", 1, plain);
    else
        diag("the loader's tracing layer (libze_tracing_layer.so.1) is not installed: "
             "tracing route not run");
    h_cleanup();
    return exit_status();
}
#endif
