/* recorder.c: the process's one recorder.
 *
 * Hot path (memtrace_record_event, and mt_record_block for the caching allocator):
 * stamp the event, capture and intern its stack outside any recorder lock, then
 * under one short lock append it to the history and, when streaming, to the stream
 * buffer. No libc malloc, no stdio: the history is a list of mmap'd chunks, the
 * stream has two fixed buffers.
 *
 * The history keeps the newest max_entries events exactly: appends go to the tail
 * chunk, drops advance a head offset and unmap a head chunk once it is consumed.
 *
 * Streaming: a writer thread owns the file. Recording threads fill one buffer while
 * the writer encodes the other; a full buffer is handed over at once, a partial one
 * every flush_ms, so a killed process loses at most about flush_ms of events. If the
 * writer falls behind, a recording thread waits for it rather than dropping events.
 * Before each events chunk the writer writes the table entries (strings, symbolized
 * frames, stack nodes) interned since its last chunk; every id an event refers to was
 * interned before the event was appended, so the tables always come first. */
#include "config.h"

#include "recorder.h"

#include "memtrace.h"
#include "mtx/rank.h"
#include "stack.h"
#include "strings.h"
#include "symbolize.h"
#include "util.h"
#include "writer.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define HAVE_SINGLE_THREADED 1
#endif
#endif
#ifndef HAVE_SINGLE_THREADED
#define HAVE_SINGLE_THREADED 0
#endif

#define HCHUNK_EVENTS              65536u
#define STREAM_BUF_EVENTS          65536u
#define DEFAULT_STREAM_MAX_ENTRIES 100000u
#define MAX_PROVIDERS              16
#define MAX_NESTING                32
#define PREFETCH_AHEAD             8 /* events; a prefetch past the end is harmless */

struct hchunk {
    struct hchunk *next;
    uint32_t n;
    struct memtrace_event ev[HCHUNK_EVENTS];
};

struct provider {
    memtrace_state_fn fn;
    void *ctx;
    int handle;
};

static struct {
    atomic_int lock; /* see rlock() */
    atomic_int recording;
    /* options in force */
    int context;
    size_t max_entries; /* 0 = unlimited */
    size_t limit;       /* max_entries, or SIZE_MAX for unlimited */
    uint32_t skip_actions;
    uint32_t stack_actions; /* actions that get a stack: context and depth in one mask */
    int stack_depth;
    unsigned flush_ms;
    /* history */
    struct hchunk *head, *tail;
    struct hchunk *spare; /* a consumed head chunk kept for the next tail */
    uint32_t head_off;
    size_t hcount;
    uint64_t recorded, dropped;
    int overflowed;
    /* stream */
    int streaming;
    struct mt_writer *writer;
    pthread_t writer_thread;
    atomic_uint work, space; /* futex words: bumped when there is work, or space */
    int space_waiters;
    struct memtrace_event *buf[2];
    uint32_t nbuf[2];
    int cur;         /* buffer being filled */
    int writer_busy; /* the other buffer is with the writer */
    int stopping;
    int stream_error;
    /* state providers */
    struct provider providers[MAX_PROVIDERS];
    int next_handle;
} R = {
    .next_handle = 1,
};

/* R.lock is held for a few stores per event: a test-and-set lock released by a plain
 * store is one atomic per turn where a mutex takes two, and none while the process
 * has one thread (only this thread could start another, and never holding the
 * lock). Waiters spin briefly, then yield; the writer thread and a recording thread
 * that waits for buffer space sleep on futex words instead, without the lock. */
static __attribute__((noinline)) void rlock_slow(void)
{
    int spins = 0;
    do {
        while (atomic_load_explicit(&R.lock, memory_order_relaxed))
            if (++spins > 100)
                sched_yield();
    } while (atomic_exchange_explicit(&R.lock, 1, memory_order_acquire));
}

static inline void rlock(void)
{
#if HAVE_SINGLE_THREADED
    if (__libc_single_threaded) {
        atomic_store_explicit(&R.lock, 1, memory_order_relaxed);
        return;
    }
#endif
    if (MT_UNLIKELY(atomic_exchange_explicit(&R.lock, 1, memory_order_acquire)))
        rlock_slow();
}

static inline void runlock(void)
{
    atomic_store_explicit(&R.lock, 0, memory_order_release);
}

static void futex_wake_all(atomic_uint *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Called with R.lock; returns with it, after *word changed, ms passed (0: no limit)
 * or a spurious wake: callers check their condition again. */
static void rwait(atomic_uint *word, unsigned ms)
{
    unsigned seen = atomic_load_explicit(word, memory_order_relaxed);
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    runlock();
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, ms ? &ts : NULL, NULL, 0);
    rlock();
}

/* Called with R.lock. */
static void rsignal(atomic_uint *word)
{
    atomic_fetch_add_explicit(word, 1, memory_order_relaxed);
    futex_wake_all(word);
}

/* Metadata (jansson: off the hot path) and symbolized frames, shared by the stream
 * writer and dumps. */
static pthread_mutex_t meta_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *meta_extra;   /* keys set by memtrace_meta_set */
static json_t *meta_devices; /* array */
static uint64_t meta_gen;    /* bumped on every change */
static uint64_t start_wall_ns, start_mono_ns;

static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mt_frame_rec *frame_recs; /* index = frame id */
static uint32_t nframe_recs;            /* symbolized: ids 1..nframe_recs */
static uint32_t frame_recs_cap;

static MT_TLS int tls_busy;
static __thread uint32_t tls_categories[MAX_NESTING];
static MT_TLS int tls_ncategories;
static MT_TLS int tls_nannotations;

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* ---- history ---------------------------------------------------------------- */

/* New chunks are prefaulted in one call: faulting 1000 pages one by one on the
 * recording path costs more than the events themselves. */
static struct hchunk *hchunk_new(void)
{
    struct hchunk *c = R.spare;
    if (c != NULL) {
        R.spare = NULL;
        c->next = NULL;
        c->n = 0;
        return c;
    }
    c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
             -1, 0);
    return c == MAP_FAILED ? NULL : c;
}

static void hchunk_retire(struct hchunk *c)
{
    if (R.spare == NULL)
        R.spare = c;
    else
        mt_unmap(c, sizeof *c);
}

static void history_free(void)
{
    struct hchunk *c = R.head;
    while (c != NULL) {
        struct hchunk *next = c->next;
        mt_unmap(c, sizeof *c);
        c = next;
    }
    mt_unmap(R.spare, sizeof *R.spare);
    R.spare = NULL;
    R.head = R.tail = NULL;
    R.head_off = 0;
    R.hcount = 0;
}

static void history_drop_oldest(size_t n)
{
    while (n > 0 && R.head != NULL) {
        uint32_t avail = R.head->n - R.head_off;
        uint32_t take = n < avail ? (uint32_t)n : avail;
        R.head_off += take;
        R.hcount -= take;
        R.dropped += take;
        n -= take;
        if (R.head_off == R.head->n && (R.head->n == HCHUNK_EVENTS || R.head != R.tail)) {
            struct hchunk *next = R.head->next;
            hchunk_retire(R.head);
            R.head = next;
            R.head_off = 0;
            if (R.head == NULL)
                R.tail = NULL;
        }
    }
    R.overflowed = 1;
}

/* Called with R.lock held. Returns 0, or -1 when no memory is left for a chunk (the
 * event then only goes to the stream, and counts as dropped from the history). */
static int history_append_slow(const struct memtrace_event *ev)
{
    if (R.tail == NULL || R.tail->n == HCHUNK_EVENTS) {
        struct hchunk *c = hchunk_new();
        if (c == NULL) {
            R.dropped++;
            R.overflowed = 1;
            return -1;
        }
        if (R.tail != NULL)
            R.tail->next = c;
        else
            R.head = c;
        R.tail = c;
    }
    R.tail->ev[R.tail->n++] = *ev;
    R.hcount++;
    if (R.max_entries != 0 && R.hcount > R.max_entries)
        history_drop_oldest(R.hcount - R.max_entries);
    return 0;
}

/* The common case inline: room in the tail chunk, and a full ring whose oldest event
 * is not the last of its chunk, so dropping it is one offset step. */
static inline int history_append(const struct memtrace_event *ev)
{
    struct hchunk *t = R.tail;
    if (MT_UNLIKELY(t == NULL || t->n == HCHUNK_EVENTS))
        return history_append_slow(ev);
    /* The ring is far larger than the caches: ask for the lines a few events ahead
     * now, so that the next stores do not wait for memory under the lock. */
    __builtin_prefetch((void *)((uintptr_t)&t->ev[t->n] + PREFETCH_AHEAD * sizeof *ev), 1, 3);
    t->ev[t->n++] = *ev;
    if (R.hcount < R.limit) {
        R.hcount++;
        return 0;
    }
    if (MT_LIKELY(R.head_off + 1 < R.head->n)) {
        R.head_off++;
        R.dropped++;
        R.overflowed = 1;
        return 0;
    }
    R.hcount++;
    history_drop_oldest(1);
    return 0;
}

/* Copies the history (oldest first) into a malloc'd array; called with R.lock. */
static struct memtrace_event *history_copy(size_t *n)
{
    *n = R.hcount;
    struct memtrace_event *out = malloc((R.hcount ? R.hcount : 1) * sizeof *out);
    if (out == NULL)
        return NULL;
    size_t k = 0;
    uint32_t off = R.head_off;
    for (struct hchunk *c = R.head; c != NULL; c = c->next, off = 0) {
        memcpy(out + k, c->ev + off, (c->n - off) * sizeof *out);
        k += c->n - off;
    }
    return out;
}

/* ---- metadata --------------------------------------------------------------- */

static json_t *argv_json(void)
{
    json_t *arr = json_array();
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (f == NULL)
        return arr;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        json_array_append_new(arr, json_string(buf + i));
    return arr;
}

/* The rank that the preload's %r also names (mtx/rank.h). */
static json_t *rank_json(void)
{
    long r = mtx_rank();
    return r >= 0 ? json_integer(r) : json_null();
}

static const char *context_name(int c)
{
    static const char *const names[] = {"none", "state", "alloc", "all"};
    return c >= 0 && c < 4 ? names[c] : "all";
}

/* The whole metadata object as JSON text (malloc'd). */
static char *meta_dump(uint64_t *gen)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    json_t *m = json_object();
    json_object_set_new(m, "format_version", json_integer(1));
    json_object_set_new(m, "memtrace_version", json_string(PACKAGE_VERSION));
    json_object_set_new(m, "host", json_string(host));
    json_object_set_new(m, "pid", json_integer(getpid()));
    json_object_set_new(m, "argv", argv_json());
    json_object_set_new(m, "rank", rank_json());
    rlock();
    json_t *opts =
        json_pack("{s:s, s:I, s:I, s:i, s:I}", "context", context_name(R.context), "max_entries",
                  (json_int_t)R.max_entries, "skip_actions", (json_int_t)R.skip_actions,
                  "stack_depth", R.stack_depth, "flush_ms", (json_int_t)R.flush_ms);
    runlock();
    json_object_set_new(m, "options", opts);
    pthread_mutex_lock(&meta_lock);
    json_object_set_new(m, "start_time_ns", json_integer((json_int_t)start_wall_ns));
    json_object_set_new(m, "start_monotonic_ns", json_integer((json_int_t)start_mono_ns));
    json_object_set_new(m, "devices", meta_devices ? json_deep_copy(meta_devices) : json_array());
    if (meta_extra != NULL)
        json_object_update(m, meta_extra);
    if (gen != NULL)
        *gen = meta_gen;
    pthread_mutex_unlock(&meta_lock);
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    return text;
}

int memtrace_meta_set(const char *key, const char *json)
{
    if (key == NULL || *key == '\0' || json == NULL)
        return MEMTRACE_EINVAL;
    json_error_t err;
    json_t *v = json_loads(json, JSON_DECODE_ANY, &err);
    if (v == NULL)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&meta_lock);
    if (meta_extra == NULL)
        meta_extra = json_object();
    json_object_set_new(meta_extra, key, v);
    meta_gen++;
    pthread_mutex_unlock(&meta_lock);
    return 0;
}

int memtrace_device_register(int index, const char *name, uint64_t total_bytes, const char *backend)
{
    if (index < -1 || name == NULL || backend == NULL)
        return MEMTRACE_EINVAL;
    json_t *d = json_pack("{s:i, s:s, s:I, s:s}", "index", index, "name", name, "total_memory",
                          (json_int_t)total_bytes, "backend", backend);
    if (d == NULL)
        return MEMTRACE_ENOMEM;
    pthread_mutex_lock(&meta_lock);
    if (meta_devices == NULL)
        meta_devices = json_array();
    size_t i;
    json_t *old;
    json_array_foreach(meta_devices, i, old)
    {
        if (json_integer_value(json_object_get(old, "index")) == index &&
            strcmp(json_string_value(json_object_get(old, "backend")), backend) == 0)
            break;
    }
    if (i < json_array_size(meta_devices))
        json_array_set_new(meta_devices, i, d);
    else
        json_array_append_new(meta_devices, d);
    meta_gen++;
    pthread_mutex_unlock(&meta_lock);
    return 0;
}

/* ---- tables for writers ----------------------------------------------------- */

/* Symbolizes frames up to the current frame count; returns that count. */
static uint32_t frames_symbolize(void)
{
    pthread_mutex_lock(&sym_lock);
    uint32_t nf = mt_frame_count();
    if (nf + 1 > frame_recs_cap) {
        uint32_t cap = frame_recs_cap ? frame_recs_cap : 1024;
        while (cap < nf + 1)
            cap *= 2;
        struct mt_frame_rec *n = realloc(frame_recs, cap * sizeof *n);
        if (n == NULL) {
            nf = nframe_recs;
            goto out;
        }
        frame_recs = n;
        frame_recs_cap = cap;
    }
    for (uint32_t id = nframe_recs + 1; id <= nf; id++) {
        struct mt_symbol sym;
        uintptr_t ip = mt_frame_ip(id);
        mt_symbolize(ip, &sym);
        frame_recs[id] = (struct mt_frame_rec){
            .ip = ip,
            .offset = sym.offset,
            .module = mt_strings_intern(sym.module),
            .symbol = mt_strings_intern(sym.function),
            .file = mt_strings_intern(sym.file),
            .line = sym.line,
        };
    }
    nframe_recs = nf;
out:
    pthread_mutex_unlock(&sym_lock);
    return nf;
}

struct table_marks {
    uint32_t strings, frames, stacks;
};

/* Writes table entries interned since *marks, in dependency order. */
static int tables_write(struct mt_writer *w, struct table_marks *marks)
{
    int rc = 0;
    uint32_t ns = mt_stack_node_count();
    uint32_t nf = frames_symbolize();
    uint32_t nstr = mt_strings_count();
    if (nstr > marks->strings) {
        size_t n = nstr - marks->strings;
        const char **s = malloc(n * sizeof *s);
        if (s == NULL)
            return MEMTRACE_ENOMEM;
        for (size_t i = 0; i < n; i++)
            s[i] = mt_strings_get(marks->strings + 1 + (uint32_t)i);
        rc = mt_writer_strings(w, marks->strings + 1, n, s);
        free(s);
        if (rc != 0)
            return rc;
        marks->strings = nstr;
    }
    if (nf > marks->frames) {
        pthread_mutex_lock(&sym_lock);
        rc = mt_writer_frames(w, marks->frames + 1, nf - marks->frames,
                              frame_recs + marks->frames + 1);
        pthread_mutex_unlock(&sym_lock);
        if (rc != 0)
            return rc;
        marks->frames = nf;
    }
    if (ns > marks->stacks) {
        size_t n = ns - marks->stacks;
        uint32_t *parent = malloc(n * sizeof *parent);
        uint32_t *frame = malloc(n * sizeof *frame);
        if (parent == NULL || frame == NULL) {
            free(parent);
            free(frame);
            return MEMTRACE_ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
            mt_stack_node(marks->stacks + 1 + (uint32_t)i, &parent[i], &frame[i]);
        rc = mt_writer_stacks(w, marks->stacks + 1, n, parent, frame);
        free(parent);
        free(frame);
        if (rc != 0)
            return rc;
        marks->stacks = ns;
    }
    return 0;
}

/* ---- state ------------------------------------------------------------------ */

struct state_buf {
    struct memtrace_segment *segs;
    size_t n, cap;
    int failed;
};

static void state_sink(void *ctx, const struct memtrace_segment *seg)
{
    struct state_buf *sb = ctx;
    if (sb->failed)
        return;
    if (sb->n == sb->cap) {
        size_t cap = sb->cap ? sb->cap * 2 : 64;
        struct memtrace_segment *n = realloc(sb->segs, cap * sizeof *n);
        if (n == NULL) {
            sb->failed = 1;
            return;
        }
        sb->segs = n;
        sb->cap = cap;
    }
    struct memtrace_segment copy = *seg;
    struct memtrace_block *blocks = NULL;
    if (seg->nblocks > 0) {
        blocks = malloc(seg->nblocks * sizeof *blocks);
        if (blocks == NULL) {
            sb->failed = 1;
            return;
        }
        memcpy(blocks, seg->blocks, seg->nblocks * sizeof *blocks);
    }
    copy.blocks = blocks;
    sb->segs[sb->n++] = copy;
}

static void state_free(struct state_buf *sb)
{
    for (size_t i = 0; i < sb->n; i++)
        free((void *)sb->segs[i].blocks);
    free(sb->segs);
}

/* Collects the state from every provider; must be called without R.lock. */
static void state_collect(struct state_buf *sb)
{
    struct provider p[MAX_PROVIDERS];
    rlock();
    memcpy(p, R.providers, sizeof p);
    runlock();
    memset(sb, 0, sizeof *sb);
    for (int i = 0; i < MAX_PROVIDERS; i++)
        if (p[i].fn != NULL)
            p[i].fn(p[i].ctx, state_sink, sb);
}

int memtrace_state_provider_add(memtrace_state_fn fn, void *ctx)
{
    if (fn == NULL)
        return MEMTRACE_EINVAL;
    int rc = MEMTRACE_ENOMEM;
    rlock();
    for (int i = 0; i < MAX_PROVIDERS; i++) {
        if (R.providers[i].fn == NULL) {
            R.providers[i] = (struct provider){fn, ctx, R.next_handle++};
            rc = R.providers[i].handle;
            break;
        }
    }
    runlock();
    return rc;
}

int memtrace_state_provider_remove(int handle)
{
    int rc = MEMTRACE_EINVAL;
    rlock();
    for (int i = 0; i < MAX_PROVIDERS; i++) {
        if (R.providers[i].fn != NULL && R.providers[i].handle == handle) {
            R.providers[i] = (struct provider){0};
            rc = 0;
        }
    }
    runlock();
    return rc;
}

static int state_write(struct mt_writer *w, struct table_marks *marks)
{
    struct state_buf sb;
    uint64_t now = mt_now_ns();
    state_collect(&sb);
    int rc = sb.failed ? MEMTRACE_ENOMEM : tables_write(w, marks);
    if (rc == 0)
        rc = mt_writer_state(w, now, sb.segs, sb.n);
    state_free(&sb);
    return rc;
}

static char *end_json(void)
{
    rlock();
    json_t *e = json_pack("{s:I, s:I, s:b}", "events", (json_int_t)R.recorded, "dropped",
                          (json_int_t)R.dropped, "overflowed", R.overflowed);
    runlock();
    char *text = json_dumps(e, JSON_COMPACT);
    json_decref(e);
    return text;
}

/* ---- the stream writer thread ----------------------------------------------- */

static struct table_marks stream_marks;
static uint64_t stream_meta_gen;

static int stream_write_buffer(const struct memtrace_event *ev, size_t n)
{
    int rc = tables_write(R.writer, &stream_marks);
    if (rc == 0) {
        pthread_mutex_lock(&meta_lock);
        int dirty = meta_gen != stream_meta_gen;
        pthread_mutex_unlock(&meta_lock);
        if (dirty) {
            char *m = meta_dump(&stream_meta_gen);
            rc = m ? mt_writer_meta(R.writer, m) : MEMTRACE_ENOMEM;
            free(m);
        }
    }
    if (rc == 0 && n > 0)
        rc = mt_writer_events(R.writer, ev, n);
    return rc;
}

static void *stream_main(void *arg)
{
    (void)arg;
    tls_busy = 1; /* never record our own work */
    rlock();
    for (;;) {
        if (!R.writer_busy && !R.stopping)
            rwait(&R.work, R.flush_ms);
        if (!R.writer_busy && R.nbuf[R.cur] > 0) {
            R.cur ^= 1;
            R.nbuf[R.cur] = 0;
            R.writer_busy = 1;
        }
        int full = R.cur ^ 1;
        int stopping = R.stopping;
        if (R.writer_busy) {
            runlock();
            int rc = R.stream_error ? 0 : stream_write_buffer(R.buf[full], R.nbuf[full]);
            rlock();
            if (rc != 0 && !R.stream_error) {
                R.stream_error = rc;
                mt_log("stream write failed (%s); recording goes on in memory only",
                       memtrace_strerror(rc));
            }
            R.nbuf[full] = 0;
            R.writer_busy = 0;
            atomic_fetch_add_explicit(&R.space, 1, memory_order_relaxed);
            if (R.space_waiters > 0)
                futex_wake_all(&R.space);
            continue;
        }
        if (stopping && R.nbuf[R.cur] == 0)
            break;
    }
    runlock();
    return NULL;
}

/* Stops the writer thread and finishes the file; called without R.lock. */
static void stream_finish(void)
{
    rlock();
    if (!R.streaming) {
        runlock();
        return;
    }
    R.stopping = 1;
    rsignal(&R.work);
    runlock();
    pthread_join(R.writer_thread, NULL);
    int rc = R.stream_error;
    if (rc == 0)
        rc = state_write(R.writer, &stream_marks);
    char *end = end_json();
    if (rc == 0 && end != NULL)
        rc = mt_writer_end(R.writer, end);
    else
        mt_writer_abort(R.writer);
    free(end);
    if (rc != 0 && !R.stream_error)
        mt_log("could not finish the stream: %s", memtrace_strerror(rc));
    rlock();
    R.writer = NULL;
    R.streaming = 0;
    R.stopping = 0;
    mt_unmap(R.buf[0], STREAM_BUF_EVENTS * sizeof(struct memtrace_event));
    mt_unmap(R.buf[1], STREAM_BUF_EVENTS * sizeof(struct memtrace_event));
    R.buf[0] = R.buf[1] = NULL;
    runlock();
}

static int stream_start(const char *path)
{
    struct mt_writer *w;
    int rc = mt_writer_open(&w, path);
    if (rc != 0)
        return rc;
    char *m = meta_dump(&stream_meta_gen);
    rc = m ? mt_writer_meta(w, m) : MEMTRACE_ENOMEM;
    free(m);
    struct memtrace_event *b0 = mt_map(STREAM_BUF_EVENTS * sizeof *b0);
    struct memtrace_event *b1 = mt_map(STREAM_BUF_EVENTS * sizeof *b1);
    if (rc == 0 && (b0 == NULL || b1 == NULL))
        rc = MEMTRACE_ENOMEM;
    if (rc != 0) {
        mt_unmap(b0, STREAM_BUF_EVENTS * sizeof *b0);
        mt_unmap(b1, STREAM_BUF_EVENTS * sizeof *b1);
        mt_writer_abort(w);
        unlink(path);
        return rc;
    }
    stream_marks = (struct table_marks){0};
    R.writer = w;
    R.buf[0] = b0;
    R.buf[1] = b1;
    R.nbuf[0] = R.nbuf[1] = 0;
    R.cur = 0;
    R.writer_busy = 0;
    R.stopping = 0;
    R.stream_error = 0;
    R.streaming = 1;
    if (pthread_create(&R.writer_thread, NULL, stream_main, NULL) != 0) {
        R.streaming = 0;
        R.writer = NULL;
        mt_writer_abort(w);
        unlink(path);
        return MEMTRACE_ENOMEM;
    }
    return 0;
}

/* Called with R.lock held, when the buffer being filled is full: hands it to the
 * writer, or waits for the writer to give the other one back. Returns 0 when there
 * is room again, -1 when the stream stopped meanwhile. */
static __attribute__((noinline)) int stream_wait_room(void)
{
    while (R.nbuf[R.cur] == STREAM_BUF_EVENTS) {
        if (!R.writer_busy) {
            R.cur ^= 1;
            R.nbuf[R.cur] = 0;
            R.writer_busy = 1;
            rsignal(&R.work);
        } else {
            R.space_waiters++;
            rwait(&R.space, 0);
            R.space_waiters--;
        }
        if (!R.streaming || R.stopping)
            return -1;
    }
    return 0;
}

/* Called with R.lock held. */
static inline void stream_append(const struct memtrace_event *ev)
{
    if (MT_UNLIKELY(R.nbuf[R.cur] == STREAM_BUF_EVENTS) && stream_wait_room() != 0)
        return;
    struct memtrace_event *b = R.buf[R.cur];
    uint32_t k = R.nbuf[R.cur]++;
    __builtin_prefetch((void *)((uintptr_t)&b[k] + PREFETCH_AHEAD * sizeof *ev), 1, 3);
    b[k] = *ev;
}

/* ---- recording -------------------------------------------------------------- */

static void atfork_prepare(void)
{
    pthread_mutex_lock(&meta_lock);
    pthread_mutex_lock(&sym_lock);
    rlock();
}

static void atfork_parent(void)
{
    runlock();
    pthread_mutex_unlock(&sym_lock);
    pthread_mutex_unlock(&meta_lock);
}

/* The child has no writer thread: it starts with recording stopped, no stream and
 * an empty history; it may start its own recording. */
static void atfork_child(void)
{
    atomic_store(&R.lock, 0);
    pthread_mutex_init(&sym_lock, NULL);
    pthread_mutex_init(&meta_lock, NULL);
    R.space_waiters = 0;
    mt_strings_atfork_child();
    mt_stack_atfork_child();
    mt_tls_tid = 0; /* the forking thread's id was cached; this one has a new id */
    atomic_store(&R.recording, 0);
    if (R.streaming) {
        /* The parent still writes this file: just forget it. */
        R.writer = NULL;
        R.streaming = 0;
        mt_unmap(R.buf[0], STREAM_BUF_EVENTS * sizeof(struct memtrace_event));
        mt_unmap(R.buf[1], STREAM_BUF_EVENTS * sizeof(struct memtrace_event));
        R.buf[0] = R.buf[1] = NULL;
    }
    history_free();
    R.recorded = R.dropped = 0;
    R.overflowed = 0;
}

static void register_atfork(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

void memtrace_options_init(struct memtrace_options *o)
{
    memset(o, 0, sizeof *o);
    o->context = MEMTRACE_CONTEXT_ALL;
    o->stack_depth = 32;
    o->flush_ms = 1000;
}

static int options_check(const struct memtrace_options *o)
{
    if (o->context < MEMTRACE_CONTEXT_NONE || o->context > MEMTRACE_CONTEXT_ALL)
        return MEMTRACE_EINVAL;
    if (o->stack_depth < 0 || o->stack_depth > MEMTRACE_MAX_FRAMES)
        return MEMTRACE_EINVAL;
    if (o->flush_ms == 0 || o->flush_ms > 3600000)
        return MEMTRACE_EINVAL;
    if (o->skip_actions >> MEMTRACE_ACTION_COUNT)
        return MEMTRACE_EINVAL;
    return 0;
}

static bool wants_stack(int context, int action)
{
    switch (context) {
    case MEMTRACE_CONTEXT_STATE:
        return action == MEMTRACE_ALLOC;
    case MEMTRACE_CONTEXT_ALLOC:
        return action == MEMTRACE_ALLOC || action == MEMTRACE_SEGMENT_ALLOC ||
               action == MEMTRACE_SEGMENT_MAP || action == MEMTRACE_OOM;
    case MEMTRACE_CONTEXT_ALL:
        return action != MEMTRACE_COUNTER;
    default:
        return false;
    }
}

int memtrace_record_history(const struct memtrace_options *o)
{
    pthread_once(&atfork_once, register_atfork);
    if (o == NULL) {
        rlock();
        atomic_store(&R.recording, 0);
        runlock();
        stream_finish();
        return 0;
    }
    int rc = options_check(o);
    if (rc != 0)
        return rc;
    int starting = !atomic_load(&R.recording);
    if (starting) {
        pthread_mutex_lock(&meta_lock);
        start_wall_ns = mt_wall_ns();
        start_mono_ns = mt_now_ns();
        pthread_mutex_unlock(&meta_lock);
    }
    rlock();
    R.context = o->context;
    R.skip_actions = o->skip_actions;
    R.stack_depth = o->stack_depth;
    R.flush_ms = o->flush_ms;
    R.max_entries = o->max_entries;
    if (R.max_entries == 0 && (o->stream_path != NULL || R.streaming))
        R.max_entries = DEFAULT_STREAM_MAX_ENTRIES;
    R.limit = R.max_entries != 0 ? R.max_entries : SIZE_MAX;
    R.stack_actions = 0;
    for (int a = 0; a < MEMTRACE_ACTION_COUNT && o->stack_depth > 0; a++)
        if (wants_stack(o->context, a))
            R.stack_actions |= 1u << a;
    if (starting) {
        history_free();
        R.recorded = R.dropped = 0;
        R.overflowed = 0;
    } else if (R.max_entries != 0 && R.hcount > R.max_entries) {
        history_drop_oldest(R.hcount - R.max_entries);
    }
    if (o->stream_path != NULL && !R.streaming) {
        runlock();
        rc = stream_start(o->stream_path); /* takes no R.lock until the thread runs */
        rlock();
    }
    if (rc == 0)
        atomic_store(&R.recording, 1);
    runlock();
    return rc;
}

int memtrace_is_recording(void)
{
    return atomic_load_explicit(&R.recording, memory_order_relaxed);
}

/* Called with R.lock, while recording: stores ev unless its action is skipped. */
static inline __attribute__((always_inline)) void keep(const struct memtrace_event *ev)
{
    if (R.skip_actions & (1u << ev->action))
        return;
    R.recorded++;
    history_append(ev);
    if (R.streaming && !R.stopping)
        stream_append(ev);
}

/* The category an alloc recorded now gets: the innermost one pushed on this thread. */
static inline uint32_t current_category(void)
{
    return MT_UNLIKELY(tls_ncategories > 0) ? tls_categories[tls_ncategories - 1] : 0;
}

/* Captures and interns the current stack. Always inlined: the one frame it skips is
 * then the recorder's entry point, and the stack starts at its caller. */
static inline __attribute__((always_inline)) uint32_t capture_stack(int depth)
{
    uintptr_t ips[MEMTRACE_MAX_FRAMES];
    int nips = mt_stack_capture(ips, depth, 1);
    return mt_stack_intern(ips, nips);
}

/* memtrace_record_event_with's callback, under R.lock, when the event is not kept. */
static __attribute__((noinline)) int locked_only(struct memtrace_event *ev, memtrace_locked_fn fn,
                                                 void *ctx, int rc)
{
    rlock();
    fn(ctx, ev);
    runlock();
    return rc;
}

/* One clock read, at most one stack capture and one lock for the whole batch: an
 * allocator that frees a block at once reports free_requested and free_completed
 * together. fn, when given (n is 1 then), runs under the lock before the event is
 * stored. Always inlined so that the public entry points skip one frame alike, and
 * the checks for fn vanish from those that pass none. */
static inline __attribute__((always_inline)) int record_batch(struct memtrace_event *ev, size_t n,
                                                              memtrace_locked_fn fn, void *ctx)
{
    int recording = atomic_load_explicit(&R.recording, memory_order_relaxed);
    if (!recording && fn == NULL)
        return MEMTRACE_ESTATE;
    if (ev == NULL && n > 0)
        return MEMTRACE_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (ev[i].action >= MEMTRACE_ACTION_COUNT)
            return MEMTRACE_EINVAL;
    if (!recording)
        return locked_only(ev, fn, ctx, MEMTRACE_ESTATE);
    if (tls_busy)
        return fn != NULL ? locked_only(ev, fn, ctx, 0) : 0;
    tls_busy = 1;
    uint64_t now = 0;
    uint32_t tid = mt_gettid();
    uint32_t stack = 0;
    int captured = 0;
    int depth = R.stack_depth;
    uint32_t skip = R.skip_actions, stacked = R.stack_actions;
    for (size_t i = 0; i < n; i++) {
        struct memtrace_event *e = &ev[i];
        uint32_t bit = 1u << e->action;
        if (skip & bit)
            continue;
        if (e->time_ns == 0)
            e->time_ns = now ? now : (now = mt_now_ns());
        e->tid = tid;
        if (e->action == MEMTRACE_ALLOC && e->category == 0)
            e->category = current_category();
        if ((stacked & bit) && e->stack == 0) {
            if (!captured) {
                stack = capture_stack(depth);
                captured = 1;
            }
            e->stack = stack;
        }
    }
    rlock();
    if (fn != NULL)
        fn(ctx, ev);
    if (atomic_load_explicit(&R.recording, memory_order_relaxed))
        for (size_t i = 0; i < n; i++)
            keep(&ev[i]);
    runlock();
    tls_busy = 0;
    return 0;
}

int memtrace_record_event(struct memtrace_event *ev)
{
    if (ev == NULL)
        return MEMTRACE_EINVAL;
    return record_batch(ev, 1, NULL, NULL);
}

int memtrace_record_events(struct memtrace_event *ev, size_t n)
{
    return record_batch(ev, n, NULL, NULL);
}

/* record_batch for the caching allocator, which has no event of its own to fill: the
 * event is built once, here, with none of the checks a caller's event needs. */
uint32_t mt_record_block(const struct mt_block_event *f, int freed)
{
    int action = freed ? MEMTRACE_FREE_REQUESTED : f->action;
    uint32_t bits =
        freed ? 1u << MEMTRACE_FREE_REQUESTED | 1u << MEMTRACE_FREE_COMPLETED : 1u << action;
    if (!atomic_load_explicit(&R.recording, memory_order_relaxed) || tls_busy)
        return 0;
    bits &= ~R.skip_actions;
    if (bits == 0)
        return 0;
    tls_busy = 1;
    struct memtrace_event ev = {
        .time_ns = mt_now_ns(),
        .addr = f->addr,
        .size = f->size,
        .requested_size = f->requested,
        .stream = f->stream,
        .aux = f->aux,
        .device = f->device,
        .pool = f->pool,
        .tid = mt_gettid(),
        .source = f->source,
        .action = (uint8_t)action,
    };
    if (action == MEMTRACE_ALLOC)
        ev.category = current_category();
    uint32_t stack = R.stack_actions & bits ? capture_stack(R.stack_depth) : 0;
    rlock();
    if (atomic_load_explicit(&R.recording, memory_order_relaxed)) {
        ev.stack = R.stack_actions & 1u << ev.action ? stack : 0;
        keep(&ev);
        if (freed) {
            ev.action = MEMTRACE_FREE_COMPLETED;
            ev.stack = R.stack_actions & 1u << ev.action ? stack : 0;
            keep(&ev);
        }
    }
    runlock();
    tls_busy = 0;
    return stack;
}

int memtrace_record_event_with(struct memtrace_event *ev, memtrace_locked_fn fn, void *ctx)
{
    if (fn == NULL)
        return ev != NULL ? record_batch(ev, 1, NULL, NULL) : MEMTRACE_EINVAL;
    if (ev == NULL)
        return locked_only(NULL, fn, ctx, 0);
    return record_batch(ev, 1, fn, ctx);
}

uint32_t memtrace_intern(const char *s)
{
    return mt_strings_intern(s);
}

static int annotate(const char *name, uint64_t kind)
{
    struct memtrace_event ev = {
        .action = MEMTRACE_ANNOTATE,
        .aux = kind,
        .device = -1,
        .category = mt_strings_intern(name),
    };
    return memtrace_record_event(&ev);
}

int memtrace_annotate_push(const char *name)
{
    if (name == NULL || *name == '\0')
        return MEMTRACE_EINVAL;
    tls_nannotations++;
    return annotate(name, MEMTRACE_ANNOTATE_PUSH);
}

int memtrace_annotate_pop(void)
{
    if (tls_nannotations == 0)
        return MEMTRACE_ESTATE;
    tls_nannotations--;
    return annotate(NULL, MEMTRACE_ANNOTATE_POP);
}

int memtrace_annotate_mark(const char *name)
{
    if (name == NULL || *name == '\0')
        return MEMTRACE_EINVAL;
    return annotate(name, MEMTRACE_ANNOTATE_MARK);
}

int memtrace_category_push(const char *name)
{
    if (name == NULL || *name == '\0')
        return MEMTRACE_EINVAL;
    if (tls_ncategories == MAX_NESTING)
        return MEMTRACE_ESTATE;
    uint32_t id = mt_strings_intern(name);
    if (id == 0)
        return MEMTRACE_ENOMEM;
    tls_categories[tls_ncategories++] = id;
    return 0;
}

int memtrace_category_pop(void)
{
    if (tls_ncategories == 0)
        return MEMTRACE_ESTATE;
    tls_ncategories--;
    return 0;
}

void memtrace_get_counts(struct memtrace_counts *c)
{
    rlock();
    c->recorded = R.recorded;
    c->dropped = R.dropped;
    c->overflowed = R.overflowed;
    runlock();
}

int mt_recorder_history(struct memtrace_event **out, size_t *n)
{
    rlock();
    *out = history_copy(n);
    runlock();
    return *out ? 0 : MEMTRACE_ENOMEM;
}

/* ---- dumps -------------------------------------------------------------------- */

#define DUMP_CHUNK_EVENTS 65536u

int memtrace_dump_snapshot(const char *path)
{
    if (path == NULL || *path == '\0')
        return MEMTRACE_EINVAL;
    struct memtrace_event snap = {.action = MEMTRACE_SNAPSHOT, .device = -1};
    memtrace_record_event(&snap);

    int saved_busy = tls_busy;
    tls_busy = 1;
    struct mt_writer *w = NULL;
    struct memtrace_event *ev = NULL;
    size_t n = 0;
    struct table_marks marks = {0};
    char *m = NULL, *end = NULL;
    int created = 0;
    int rc = mt_writer_open(&w, path);
    if (rc != 0)
        goto label_return;
    created = 1;
    m = meta_dump(NULL);
    rc = m ? mt_writer_meta(w, m) : MEMTRACE_ENOMEM;
    if (rc != 0)
        goto label_return;
    rlock();
    ev = history_copy(&n);
    runlock();
    if (ev == NULL) {
        rc = MEMTRACE_ENOMEM;
        goto label_return;
    }
    rc = tables_write(w, &marks);
    for (size_t i = 0; rc == 0 && i < n; i += DUMP_CHUNK_EVENTS)
        rc = mt_writer_events(w, ev + i, n - i < DUMP_CHUNK_EVENTS ? n - i : DUMP_CHUNK_EVENTS);
    if (rc == 0)
        rc = state_write(w, &marks);
    end = end_json();
    if (rc == 0)
        rc = end ? mt_writer_end(w, end) : MEMTRACE_ENOMEM;
    else
        mt_writer_abort(w);
    w = NULL;
label_return:
    if (w != NULL)
        mt_writer_abort(w);
    if (rc != 0 && created) {
        int e = errno;
        unlink(path);
        errno = e;
    }
    free(ev);
    free(m);
    free(end);
    tls_busy = saved_busy;
    return rc;
}

/* A streaming process that exits without stopping still gets a complete file. */
__attribute__((destructor)) static void recorder_fini(void)
{
    if (R.streaming)
        memtrace_record_history(NULL);
}
