/* ze_trace-t: the Level Zero tracing-layer route. ze_prog run with
 * MEMTRACE_ZE_ROUTE=tracing records exactly what the exported-symbol route records;
 * auto with both routes live records each call once; ze_dl_prog, which reaches the
 * loader only through a private (RTLD_LOCAL) handle and its dispatch tables (as a statically
 * linked loader does), is recorded through the tracing layer alone. */
#include "harness.h"

#include <dlfcn.h>

#include "config.h"

#if !MEMTRACE_HAVE_LEVEL_ZERO
int main(void)
{
    skip_all("built without the Level Zero loader (install libze-dev libze1)");
}
#else
/* Events of r that differ from what the program printed, counting a missing or
 * extra event as one each. */
static int mismatches(const struct h_route_run *r)
{
    struct h_want w[64];
    size_t nw = h_parse_wants(r->out, w, 64);
    int bad = nw > r->f.n ? (int)(nw - r->f.n) : (int)(r->f.n - nw);
    return bad + h_mismatches(&r->f, w, nw);
}

/* Physical memory handles are the fake's heap addresses, different in each
 * process: compare them by the index of the event that created them. Under
 * ThreadSanitizer every arena of the fake is where the kernel put it, so every
 * address is compared that way. */
static const int fixed_addresses = !MEMTRACE_TSAN;

static uint64_t norm(const struct h_file *f, uint64_t v)
{
    for (size_t i = 0; v != 0 && i < f->n; i++)
        if (f->ev[i].addr == v &&
            (!fixed_addresses ||
             strcmp(memtrace_reader_string(f->r, f->ev[i].source), "zePhysicalMemCreate") == 0))
            return i + 1;
    return v;
}

static int same_events(const struct h_route_run *a, const struct h_route_run *b)
{
    if (a->f.n != b->f.n)
        return 0;
    for (size_t i = 0; i < a->f.n; i++) {
        const struct memtrace_event *x = &a->f.ev[i], *y = &b->f.ev[i];
        if (x->action != y->action || norm(&a->f, x->addr) != norm(&b->f, y->addr) ||
            x->size != y->size || x->device != y->device ||
            norm(&a->f, x->aux) != norm(&b->f, y->aux) ||
            strcmp(memtrace_reader_string(a->f.r, x->source),
                   memtrace_reader_string(b->f.r, y->source)) != 0)
            return 0;
    }
    return 1;
}

int main(void)
{
    if (access(PRELOAD_SO, R_OK) != 0)
        skip_all("the preload library is not built yet");
    if (access(FAKE_DIR "/libze_fake.so", R_OK) != 0)
        skip_all("the fake Level Zero driver is not built");
    void *layer = dlopen("libze_tracing_layer.so.1", RTLD_LAZY);
    if (layer == NULL)
        skip_all("the loader's tracing layer (libze_tracing_layer.so.1) is not installed");
    dlclose(layer);
    h_setup();
    setenv("MEMTRACE_SAMPLE_MS", "0", 1);
    setenv("ZE_ENABLE_ALT_DRIVERS", FAKE_DIR "/libze_fake.so", 1);
    setenv("FAKE_ZE_DEVICES", "2", 1);

    struct h_route_run sym, trc, both;
    h_route_run(&sym, "ze_prog", NULL, "symbols", 1);
    is_int(0, sym.status, "ze_prog, symbols route with the layer loaded: exits 0");
    is_int(20, (long long)sym.f.n, "symbols route: 20 events");
    is_int(0, mismatches(&sym), "symbols route: every event as the program printed it");

    h_route_run(&trc, "ze_prog", NULL, "tracing", 1);
    is_int(0, trc.status, "ze_prog, tracing route: exits 0");
    is_int(0, trc.f.rc, "tracing route: file reads without error");
    is_int(0, trc.f.truncated, "tracing route: file is complete");
    is_int(20, (long long)trc.f.n, "tracing route: 20 events");
    is_int(0, mismatches(&trc), "tracing route: every event as the program printed it");
    ok(same_events(&sym, &trc), "tracing and symbols routes: the same events, in order");
    is_int(0, (long long)(trc.f.r ? (long long)memtrace_reader_segment_count(trc.f.r) : -1),
           "tracing route: no live segment at exit");
    is_int(7, h_line_value(trc.out, 'C', "zeMemFree"),
           "tracing route: zeMemFree reached the driver 7 times");
    is_int(1, h_line_value(trc.out, 'C', "zePhysicalMemDestroy"),
           "tracing route: zePhysicalMemDestroy reached the driver once");
    ok(strstr(trc.err, "memtrace") == NULL, "tracing route: nothing on stderr from memtrace");

    h_route_run(&both, "ze_prog", NULL, "auto", 1);
    is_int(0, both.status, "ze_prog, auto with both routes live: exits 0");
    is_int(20, (long long)both.f.n, "auto: 20 events, no call counted twice");
    is_int(0, mismatches(&both), "auto: every event as the program printed it");
    h_route_run_free(&sym);
    h_route_run_free(&trc);
    h_route_run_free(&both);

    struct h_route_run dl;
    h_route_run(&dl, "ze_dl_prog", NULL, "auto", 1);
    is_int(0, dl.status, "ze_dl_prog (private loader, dispatch tables), auto: exits 0");
    is_int(14, (long long)dl.f.n, "ze_dl_prog: 14 events through the tracing layer");
    is_int(0, mismatches(&dl), "ze_dl_prog: every event as the program printed it");
    is_int(0, (long long)(dl.f.r ? (long long)memtrace_reader_segment_count(dl.f.r) : -1),
           "ze_dl_prog: no live segment");
    h_route_run_free(&dl);

    h_route_run(&dl, "ze_dl_prog", NULL, "tracing", 1);
    is_int(14, (long long)dl.f.n, "ze_dl_prog, tracing route: 14 events");
    is_int(0, mismatches(&dl), "ze_dl_prog, tracing route: every event as printed");
    h_route_run_free(&dl);

    h_route_run(&dl, "ze_dl_prog", NULL, "symbols", 1);
    is_int(0, dl.status, "ze_dl_prog, symbols route: exits 0");
    is_int(0, dl.files, "ze_dl_prog, symbols route: the exported symbols see no call, no file");
    h_route_run_free(&dl);

    h_route_run(&dl, "ze_dl_prog", NULL, "auto", 0);
    is_int(0, dl.files, "ze_dl_prog without ZE_ENABLE_TRACING_LAYER: nothing sees it, no file");
    h_route_run_free(&dl);

    struct h_route_run none;
    h_route_run(&none, "ze_prog", NULL, "tracing", 0);
    is_int(0, none.status, "ze_prog, tracing route without the layer: exits 0");
    is_int(0, (long long)none.f.n, "tracing route without the layer: no event");
    ok(strstr(none.err, "memtrace: MEMTRACE_ZE_ROUTE=tracing, but the loader's tracing layer "
                        "is not loaded") != NULL,
       "tracing route without the layer: one line says why");
    h_route_run_free(&none);

    h_route_run(&none, "ze_prog", NULL, "both", 1);
    is_int(0, none.status, "MEMTRACE_ZE_ROUTE=both: the program runs to the end");
    is_int(0, none.files, "MEMTRACE_ZE_ROUTE=both: recording is off, no file");
    ok(strstr(none.err, "memtrace: MEMTRACE_ZE_ROUTE=both is not valid (auto, symbols or "
                        "tracing); recording is off for this process") != NULL,
       "MEMTRACE_ZE_ROUTE=both: one line names the variable and what is accepted");
    h_route_run_free(&none);

    h_cleanup();
    done_testing();
    return exit_status();
}
#endif
