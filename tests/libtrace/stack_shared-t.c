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

int main(void)
{
    plan(6);
    char path[] = "/tmp/stack_shared-t-XXXXXX";
    close(mkstemp(path));
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
