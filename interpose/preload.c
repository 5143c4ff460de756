/* preload.c: the core of libmemtrace_preload.so.
 *
 * Loading the library costs nothing: no constructor runs. The exported dlsym hook
 * asks each backend (interpose/backends.c) what to hand out; the first wrapped call in a
 * process reads the configuration, starts the recorder with a stream to the
 * expanded output path, the helper thread (counters and signal dumps), the state
 * provider for live segments, the exit and fork handlers. A forked child inherits
 * none of that: it starts its own file on its own first device call.
 *
 * The dlsym hook can run before anything else in the process is initialised (a
 * sanitizer runtime resolves its interceptors through it), so it and what it calls
 * are not instrumented and use no libc beyond the dynamic linker's own calls. */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "segtab.h"
#include "mtx/util.h"

#define NO_ASAN __attribute__((no_sanitize_address))

/* ---- the real dlsym and the exported hook ------------------------------------ */

typedef void *(*dlsym_fn)(void *, const char *);
static _Atomic(dlsym_fn) real_dlsym_p;

NO_ASAN static dlsym_fn real_dlsym(void)
{
    dlsym_fn f = atomic_load_explicit(&real_dlsym_p, memory_order_acquire);
    if (MTX_UNLIKELY(f == NULL)) {
        f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (f == NULL)
            f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        atomic_store_explicit(&real_dlsym_p, f, memory_order_release);
    }
    return f;
}

NO_ASAN void *mt_real_dlsym(void *handle, const char *name)
{
    dlsym_fn f = real_dlsym();
    return f != NULL ? f(handle, name) : NULL;
}

NO_ASAN static struct link_map *map_of(const void *addr)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) == 0)
        return NULL;
    return lm;
}

/* RTLD_NEXT means "after the caller", but the real dlsym sees this library as the
 * caller. For callers loaded before this library (the program, a sanitizer runtime
 * preloaded first) that is the same search; for callers loaded after it, search the
 * objects after the caller one by one. */
NO_ASAN static void *lookup_next(const void *caller, const char *name)
{
    struct link_map *self = map_of((const void *)lookup_next);
    struct link_map *from = map_of(caller);
    int after_self = 0;
    for (struct link_map *m = self; m != NULL && from != NULL; m = m->l_next)
        if (m == from && m != self)
            after_self = 1;
    if (!after_self)
        return mt_real_dlsym(RTLD_NEXT, name);
    for (struct link_map *m = from->l_next; m != NULL; m = m->l_next) {
        void *h = dlopen(m->l_name, RTLD_LAZY | RTLD_NOLOAD);
        if (h == NULL)
            continue;
        void *p = mt_real_dlsym(h, name);
        dlclose(h);
        if (p != NULL && map_of(p) == m)
            return p;
    }
    return NULL;
}

/* The executable segments of libmemtrace.so, [lib_lo, lib_hi), found once. Its
 * allocator's driver calls must reach the driver unwrapped: it records its segments
 * itself, with their blocks. */
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static uintptr_t lib_lo = 1, lib_hi;

NO_ASAN static int find_text(struct dl_phdr_info *info, size_t size, void *data)
{
    uintptr_t *r = data, lo = UINTPTR_MAX, hi = 0;
    int hit = 0;
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr, e = a + ph->p_memsz;
        hit |= r[0] >= a && r[0] < e;
        if (ph->p_flags & PF_X) {
            lo = a < lo ? a : lo;
            hi = e > hi ? e : hi;
        }
    }
    if (!hit || hi == 0)
        return 0;
    r[1] = lo;
    r[2] = hi;
    return 1;
}

NO_ASAN static void find_library(void)
{
    /* The preload links libmemtrace.so, so this address lies in its text. */
    uintptr_t r[3] = {(uintptr_t)&memtrace_record_history, 1, 0};
    dl_iterate_phdr(find_text, r);
    lib_lo = r[1];
    lib_hi = r[2];
}

NO_ASAN int mt_ip_from_library(const void *caller)
{
    pthread_once(&lib_once, find_library);
    return (uintptr_t)caller >= lib_lo && (uintptr_t)caller < lib_hi;
}

MT_EXPORT NO_ASAN void *dlsym(void *handle, const char *name)
{
    const void *caller = __builtin_return_address(0);
    void *p = handle == RTLD_NEXT ? lookup_next(caller, name) : mt_real_dlsym(handle, name);
    for (const struct mt_ip_backend *const *b = mt_ip_backends; *b != NULL; b++) {
        if ((*b)->dlsym == NULL)
            continue;
        void *w = (*b)->dlsym(handle, name, p, caller);
        if (w != NULL)
            return w;
    }
    return p;
}

/* ---- live segments -------------------------------------------------------------- */

/* The table changes only under the recorder's lock (memtrace_record_event_with's
 * callbacks below), so each wrapped call turns one lock, and the table changes in
 * the history's order. */
static struct mt_segtab tab;

struct tab_copy {
    struct mt_seg *seg;
    size_t n, bytes;
};

/* Under the recorder's lock. */
static void tab_copy_locked(void *ctx, struct memtrace_event *ev)
{
    (void)ev;
    struct tab_copy *c = ctx;
    c->bytes = (tab.live ? tab.live : 1) * sizeof(struct mt_seg);
    c->seg = mtx_map(c->bytes);
    for (size_t i = 0; c->seg != NULL && i < tab.cap; i++)
        if (tab.slot[i].used && tab.slot[i].kind != MT_IP_PHYSICAL)
            c->seg[c->n++] = tab.slot[i];
}

static void state_provider(void *ctx, memtrace_segment_sink sink, void *sink_ctx)
{
    (void)ctx;
    struct tab_copy c = {0};
    memtrace_record_event_with(NULL, tab_copy_locked, &c);
    struct mt_seg *copy = c.seg;
    size_t n = c.n, bytes = c.bytes;
    if (copy == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        struct memtrace_block b = {
            .addr = copy[i].key,
            .size = copy[i].size,
            .requested_size = copy[i].size,
            .stack = copy[i].stack,
            .state = MEMTRACE_BLOCK_ACTIVE_ALLOCATED,
        };
        struct memtrace_segment s = {
            .addr = copy[i].key,
            .total_size = copy[i].size,
            .allocated_size = copy[i].size,
            .active_size = copy[i].size,
            .requested_size = copy[i].size,
            .stream = copy[i].stream,
            .device = copy[i].device,
            .is_large = 1,
            .is_expandable = copy[i].kind == MT_IP_MAPPED,
            .stack = copy[i].stack,
            .source = copy[i].source,
            .nblocks = 1,
            .blocks = &b,
        };
        sink(sink_ctx, &s);
    }
    mtx_unmap(copy, bytes);
}

/* ---- recording ------------------------------------------------------------------ */

enum { ST_IDLE = 0, ST_RUNNING, ST_OFF };

static _Atomic int state;
static MTX_TLS int t_busy;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mt_ip_config cfg;
static int owner;      /* this library started the stream, so it ends it */
static int bad_config; /* stays off in forked children too */
static int once_done;  /* atexit, atfork and the provider: once per process image */

const struct mt_ip_config *mt_ip_config(void)
{
    return &cfg;
}

static void finish(void)
{
    pthread_mutex_lock(&start_lock);
    int was = atomic_exchange(&state, ST_OFF);
    pthread_mutex_unlock(&start_lock);
    if (was != ST_RUNNING)
        return;
    mt_sampler_stop();
    if (owner)
        memtrace_record_history(NULL);
}

/* The table needs nothing here: the recorder's own handlers hold its lock across
 * fork. */
static void atfork_prepare(void)
{
    pthread_mutex_lock(&start_lock);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&start_lock);
}

/* The recorder's own child handler (registered before this one, so run first) has
 * stopped recording and forgotten the parent's stream; the child starts afresh on
 * its first device call. */
static void atfork_child(void)
{
    pthread_mutex_init(&start_lock, NULL);
    mt_segtab_clear(&tab);
    mt_sampler_atfork_child();
    for (const struct mt_ip_backend *const *b = mt_ip_backends; *b != NULL; b++)
        if ((*b)->atfork_child != NULL)
            (*b)->atfork_child();
    owner = 0;
    atomic_store(&state, bad_config ? ST_OFF : ST_IDLE);
}

static int do_start(void)
{
    if (mt_ip_config_read(&cfg) != 0) {
        bad_config = 1;
        return ST_OFF;
    }
    for (const struct mt_ip_backend *const *b = mt_ip_backends; *b != NULL; b++)
        if ((*b)->config != NULL && (*b)->config() != 0) {
            bad_config = 1;
            return ST_OFF;
        }
    if (!memtrace_is_recording()) {
        struct memtrace_options o;
        memtrace_options_init(&o);
        o.context = cfg.stack_depth > 0 ? MEMTRACE_CONTEXT_ALL : MEMTRACE_CONTEXT_NONE;
        o.stack_depth = cfg.stack_depth;
        o.stacks = cfg.stack_kind;
        o.flush_ms = cfg.flush_ms;
        o.max_entries = cfg.max_entries;
        o.stream_path = cfg.output;
        int rc = memtrace_record_history(&o);
        if (rc != 0) {
            /* For EIO the recorder keeps errno: "no such file or directory" says what
             * to fix where "input/output error" does not. */
            mtx_log("cannot record to %s: %s; recording is off for this process", cfg.output,
                   rc == MEMTRACE_EIO && errno != 0 ? strerror(errno) : memtrace_strerror(rc));
            return ST_OFF;
        }
        owner = 1;
        memtrace_meta_set("recorded_by", "\"preload\"");
    }
    if (!once_done) {
        once_done = 1;
        memtrace_state_provider_add(state_provider, NULL);
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
        atexit(finish);
    }
    char base[sizeof cfg.output];
    size_t len = strlen(cfg.output);
    memcpy(base, cfg.output, len + 1);
    if (len > 9 && strcmp(base + len - 9, ".memtrace") == 0)
        base[len - 9] = '\0';
    mt_sampler_start(cfg.sample_ms, cfg.dump_signal, base);
    return ST_RUNNING;
}

static int start(void)
{
    t_busy = 1;
    pthread_mutex_lock(&start_lock);
    if (atomic_load(&state) == ST_IDLE)
        atomic_store(&state, do_start());
    int s = atomic_load(&state);
    pthread_mutex_unlock(&start_lock);
    t_busy = 0;
    return s == ST_RUNNING;
}

int mt_ip_enter(void)
{
    if (t_busy)
        return 0;
    if (MTX_UNLIKELY(atomic_load_explicit(&state, memory_order_acquire) != ST_RUNNING)) {
        if (atomic_load(&state) == ST_OFF || !start())
            return 0;
    }
    t_busy = 1;
    return 1;
}

void mt_ip_leave(void)
{
    t_busy = 0;
}

static uint32_t intern_cached(const char *s, uint32_t *slot)
{
    if (s == NULL)
        return 0;
    if (slot == NULL)
        return memtrace_intern(s);
    uint32_t id = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (id == 0) {
        id = memtrace_intern(s);
        __atomic_store_n(slot, id, __ATOMIC_RELAXED);
    }
    return id;
}

enum { OP_NONE = 0, OP_INSERT, OP_REMOVE };

struct tab_op {
    int what, kind;
};

/* Under the recorder's lock, just before the event is stored: a free takes its size
 * (when the API gave none) and device from the table; an allocation enters it. An
 * allocation enters it even when recording is off, so the table is the same however
 * recording starts and stops; ev->stack is 0 then. */
static void tab_update_locked(void *ctx, struct memtrace_event *ev)
{
    const struct tab_op *op = ctx;
    if (op->what == OP_REMOVE) {
        struct mt_seg s;
        if (mt_segtab_remove(&tab, ev->addr, op->kind, &s)) {
            if (ev->size == 0)
                ev->size = s.size;
            ev->device = s.device;
        }
        return;
    }
    struct mt_seg s = {
        .key = ev->addr,
        .size = ev->size,
        .stream = ev->stream,
        .device = ev->device,
        .stack = ev->stack,
        .source = ev->source,
        .kind = (uint8_t)op->kind,
    };
    mt_segtab_insert(&tab, &s);
}

void mt_ip_record_ex(int action, int kind, int device, uint64_t stream, uint64_t addr,
                     uint64_t size, uint64_t aux, const char *source, uint32_t *source_id,
                     const char *category, uint32_t *category_id)
{
    struct memtrace_event ev = {
        .action = (uint8_t)action,
        .device = device,
        .stream = stream,
        .addr = addr,
        .size = size,
        .aux = aux,
        .source = intern_cached(source, source_id),
        .category = intern_cached(category, category_id),
    };
    /* Physical memory (cuMemCreate, zePhysicalMemCreate) is counted where it is
     * mapped, as segment_map: recorded as a segment as well, the same bytes would
     * count twice. Its creation and release stay in the file as marks with their
     * size, named by the caller's category. */
    if (kind == MT_IP_PHYSICAL) {
        ev.action = MEMTRACE_ANNOTATE;
        ev.aux = MEMTRACE_ANNOTATE_MARK;
    }
    struct tab_op op = {.kind = kind};
    if (action == MEMTRACE_SEGMENT_FREE || action == MEMTRACE_SEGMENT_UNMAP)
        op.what = OP_REMOVE;
    else if (action == MEMTRACE_SEGMENT_ALLOC || action == MEMTRACE_SEGMENT_MAP)
        op.what = OP_INSERT;
    if (op.what == OP_NONE)
        memtrace_record_event(&ev);
    else
        memtrace_record_event_with(&ev, tab_update_locked, &op);
}

void mt_ip_record(int action, int device, uint64_t stream, uint64_t addr, uint64_t size,
                  uint64_t aux, const char *source, uint32_t *source_id)
{
    int kind = action == MEMTRACE_SEGMENT_MAP || action == MEMTRACE_SEGMENT_UNMAP ? MT_IP_MAPPED
                                                                                  : MT_IP_SEGMENT;
    mt_ip_record_ex(action, kind, device, stream, addr, size, aux, source, source_id, NULL, NULL);
}
