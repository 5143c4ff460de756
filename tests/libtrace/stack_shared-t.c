/* stack_shared-t: through the shared libmemtrace, a recorded stack starts at the
 * program's call into memtrace: the recorder's and the allocator's frames are
 * trimmed (stack.c), so the innermost frame is the function that allocated. */
#include "config.h"

#include "memtrace.h"
#include "memtrace_alloc.h"
#include "memtrace_device.h"
#include "memtrace_snapshot.h"
#include "tap.h"

#include <string.h>
#include <unistd.h>

static __attribute__((noinline)) uint64_t stack_shared_alloc_site(struct memtrace_allocator *a)
{
    uint64_t x = 0;
    memtrace_alloc_malloc(a, 4096, NULL, &x);
    __asm__ volatile("" ::: "memory");
    return x;
}

/* 20 frames deep, then 3 allocations: stacks are capped at the configured depth. */
static __attribute__((noinline)) void deep_allocs(struct memtrace_allocator *a, int levels,
                                                  uint64_t *x)
{
    if (levels > 0) {
        deep_allocs(a, levels - 1, x);
        __asm__ volatile("" ::: "memory");
        return;
    }
    for (int i = 0; i < 3; i++)
        x[i] = stack_shared_alloc_site(a);
}

int main(void)
{
    plan(8);
    char path[] = "/tmp/stack_shared-t-XXXXXX";
    close(mkstemp(path));
    unlink(path); /* the name only: the recorder creates files, never reuses them */
    struct memtrace_options o;
    memtrace_options_init(&o);
    memtrace_record_history(&o);
    struct memtrace_device *d;
    struct memtrace_allocator *a;
    if (memtrace_device_open_host(&d, 64u << 20) != 0 || memtrace_alloc_create(&a, d) != 0)
        bail_out("no host device");
    uint64_t x = stack_shared_alloc_site(a);
    ok(x != 0, "allocated through the shared library");
    is_int(0, memtrace_dump_snapshot(path), "dumped");
    memtrace_record_history(NULL);
    memtrace_alloc_free(a, x);

    /* A capture unwinds only as far as it keeps, after learning how many frames it
     * drops on top: from the second capture on, every stack has the full depth. */
    char path8[] = "/tmp/stack_shared-t8-XXXXXX";
    close(mkstemp(path8));
    unlink(path8); /* the name only: the recorder creates files, never reuses them */
    o.stack_depth = 8;
    memtrace_record_history(&o);
    uint64_t xs[3];
    deep_allocs(a, 20, xs);
    memtrace_dump_snapshot(path8);
    memtrace_record_history(NULL);
    for (int i = 0; i < 3; i++)
        memtrace_alloc_free(a, xs[i]);
    struct memtrace_reader *r8;
    int depths[3] = {0}, nd = 0;
    if (memtrace_reader_open(&r8, path8, NULL) == 0) {
        struct memtrace_event e8;
        uint32_t fr[16];
        while (memtrace_reader_next(r8, &e8) == 1)
            if (e8.action == MEMTRACE_ALLOC && nd < 3)
                depths[nd++] = memtrace_reader_stack(r8, e8.stack, fr, 16);
        memtrace_reader_close(r8);
    }
    unlink(path8);
    is_int(3, nd, "three allocations 20 frames deep");
    ok(depths[1] == 8 && depths[2] == 8, "they keep the full 8 frames (%d, %d, %d)", depths[0],
       depths[1], depths[2]);
    memtrace_alloc_destroy(a);
    memtrace_device_close(d);

    struct memtrace_reader *r;
    if (memtrace_reader_open(&r, path, NULL) != 0)
        bail_out("cannot read the dump back");
    struct memtrace_event ev;
    const char *innermost = NULL;
    int own_frames = 0, allocs = 0, depth = 0;
    while (memtrace_reader_next(r, &ev) == 1) {
        if (ev.action != MEMTRACE_ALLOC)
            continue;
        allocs++;
        uint32_t frames[64];
        depth = memtrace_reader_stack(r, ev.stack, frames, 64);
        for (int i = 0; i < depth && i < 64; i++) {
            const struct memtrace_frame *f = memtrace_reader_frame(r, frames[i]);
            if (i == 0)
                innermost = f ? f->symbol : NULL;
            if (f != NULL && strstr(f->module, "libmemtrace") != NULL)
                own_frames++;
        }
    }
    is_int(1, allocs, "one alloc recorded");
    ok(depth >= 2, "its stack has the program's frames (%d)", depth);
    is_string("stack_shared_alloc_site", innermost,
              "the innermost frame is the allocating function");
    is_int(0, own_frames, "no frame of memtrace's own libraries");
    memtrace_reader_close(r);
    unlink(path);
    return exit_status();
}
