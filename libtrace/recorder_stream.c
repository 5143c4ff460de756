/* recorder_stream.c: streaming to a file. Owns the writer thread, its file, the
 * marks of the tables and metadata already written, and the first write error; the
 * two event buffers it shares with the hot path are in mt_rec (recorder_impl.h).
 *
 * Recording threads fill one buffer while the writer encodes the other; a full
 * buffer is handed over at once, a partial one flush_ms / 2 after its first event,
 * so that it is on disk within flush_ms of it. If the writer falls behind, a
 * recording thread waits for it rather than dropping events.
 *
 * A stream opened while memory is in use begins with the state of what was live
 * before its first event (docs/REPLAY.md, rule 0). The thread that opens it collects
 * the providers' state and notes how many events the stream had by then; the writer
 * thread finds from those events and that state what was live before them, as a
 * dump does, and writes it first. Until then it keeps copies of the buffers it is
 * handed rather than waiting for the state: a recording thread that waits for room
 * may hold the allocator's lock that a provider needs. Past MAX_HELD_EVENTS it gives
 * the state up and writes them. */
#include "config.h"

#include "recorder_impl.h"

#include "before.h"
#include "memtrace.h"
#include "stack.h"
#include "mtx/util.h"
#include "writer.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static struct mt_writer *writer;
static pthread_t writer_thread;
static int stream_error;
static struct mt_table_marks stream_marks;
static uint64_t stream_meta_gen;
static uint32_t frames_ahead; /* frames symbolized while no flush was due */
/* The state before the stream's first event, guarded by the lock: the opening
 * thread sets before_ready with before_fin and before_need (the events the stream
 * had when the state was collected); the writer sets before_done once it wrote it. */
static int before_ready, before_done;
static struct mt_state_now before_fin;
static uint64_t before_need;
static uint64_t stream_handed; /* events in the buffers handed to the writer so far */

/* Buffers handed over before the state before the events was written (the writer
 * thread's alone). */
struct held {
    struct held *next;
    size_t n;
    struct memtrace_event ev[];
};
static struct held *held_head, **held_tail = &held_head;
static uint64_t held_total;

/* Past this many events held (about 84 MB) the writer gives the state up and writes
 * what it holds: a provider that takes that long must not cost memory without end. */
#define MAX_HELD_EVENTS (16u * MT_STREAM_BUF_EVENTS)

static void futex_wake_all(atomic_uint *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Called with the lock; returns with it, after *word changed, ms passed (0: no
 * limit) or a spurious wake: callers check their condition again. */
static void rwait(atomic_uint *word, unsigned ms)
{
    unsigned seen = atomic_load_explicit(word, memory_order_relaxed);
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    mt_runlock();
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, ms ? &ts : NULL, NULL, 0);
    mt_rlock();
}

/* Called with the lock. */
static void rsignal(atomic_uint *word)
{
    atomic_fetch_add_explicit(word, 1, memory_order_relaxed);
    futex_wake_all(word);
}

unsigned mt_output_flags(void)
{
    const char *v = getenv("MEMTRACE_OVERWRITE");
    return v != NULL && strcmp(v, "1") == 0 ? MT_WRITER_OVERWRITE : 0;
}

void mt_xfsz_hold(struct mt_xfsz *x)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &s, &x->old);
    sigset_t pending;
    x->was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1;
}

void mt_xfsz_release(const struct mt_xfsz *x)
{
    sigset_t pending;
    if (!x->was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1) {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGXFSZ);
        struct timespec now = {0, 0};
        int e = errno;
        sigtimedwait(&s, NULL, &now); /* ours: the write already failed with EFBIG */
        errno = e;
    }
    pthread_sigmask(SIG_SETMASK, &x->old, NULL);
}

static int stream_write_buffer(const struct memtrace_event *ev, size_t n)
{
    int rc = mt_tables_write(writer, &stream_marks);
    if (rc == 0) {
        int dirty = mt_meta_gen() != stream_meta_gen;
        if (dirty) {
            char *m = mt_meta_dump(&stream_meta_gen);
            rc = m ? mt_writer_meta(writer, m) : MEMTRACE_ENOMEM;
            free(m);
        }
    }
    if (rc == 0 && n > 0)
        rc = mt_writer_events(writer, ev, n);
    return rc;
}

/* Keeps a copy of a buffer until the state before the stream's events is written. */
static int hold(const struct memtrace_event *ev, size_t n)
{
    struct held *h = malloc(sizeof *h + n * sizeof *ev);
    if (h == NULL)
        return MEMTRACE_ENOMEM;
    h->next = NULL;
    h->n = n;
    memcpy(h->ev, ev, n * sizeof *ev);
    *held_tail = h;
    held_tail = &h->next;
    held_total += n;
    return 0;
}

/* Writes the buffers held, oldest first, when write is set and the stream has not
 * failed, and frees them. */
static int release_held(int write)
{
    int rc = 0;
    while (held_head != NULL) {
        struct held *h = held_head;
        held_head = h->next;
        if (write && rc == 0 && !stream_error)
            rc = stream_write_buffer(h->ev, h->n);
        free(h);
    }
    held_tail = &held_head;
    held_total = 0;
    return rc;
}

/* Writes the state before the stream's first event, found from the first
 * before_need events held and before_fin, then the buffers held. */
static int write_before(void)
{
    struct mt_before *b = mt_before_new();
    int rc = b ? 0 : MEMTRACE_ENOMEM;
    uint64_t left = before_need;
    for (struct held *h = held_head; rc == 0 && h != NULL && left > 0; h = h->next) {
        size_t k = h->n < left ? h->n : (size_t)left;
        for (size_t i = 0; rc == 0 && i < k; i++)
            rc = mt_before_event(b, &h->ev[i]);
        left -= k;
    }
    uint64_t t0 = held_head && held_head->n ? held_head->ev[0].time_ns : before_fin.time_ns;
    if (rc == 0 && !stream_error)
        rc = mt_state_before_write(writer, &stream_marks, b, t0, &before_fin);
    int e = errno;
    mt_before_free(b);
    mt_state_now_free(&before_fin);
    if (rc == MEMTRACE_ENOMEM) {
        /* The events matter more than the state: the file goes on without it. */
        mtx_log("out of memory finding what was live before the stream's first event: "
                "the file begins without it");
        rc = 0;
    }
    /* After a failed write nothing more goes to the file (the caller tells why). */
    int rc2 = release_held(rc == 0);
    if (rc == 0)
        return rc2;
    errno = e;
    return rc;
}

/* Called with the lock, after a write failed: the first error stops the stream's
 * writes, and is told once. */
static void stream_failed(int rc, int e)
{
    if (rc == 0 || stream_error)
        return;
    stream_error = rc;
    mtx_log("stream write failed (%s); recording goes on in memory only",
            rc == MEMTRACE_EIO ? strerror(e) : memtrace_strerror(rc));
}

/* Called with the lock: how long the writer may sleep before it must hand the
 * buffer being filled to the file. A flush starts at most flush_ms / 2 after the
 * buffer's first event, so that the write has the other half of the interval to
 * finish: the documented bound is on what is on disk, from the first event on. */
static unsigned stream_wait_ms(void)
{
    unsigned half = mt_rec.flush_ms / 2 ? mt_rec.flush_ms / 2 : 1;
    if (mt_rec.nbuf[mt_rec.cur] == 0)
        return half;
    uint64_t age = mtx_now_ns() - mt_rec.first_ns;
    uint64_t due = (uint64_t)half * 1000000u;
    return age >= due ? 0 : (unsigned)((due - age + 999999u) / 1000000u);
}

/* Called with the lock: the writer thread is at rest, or starts work. */
static void writer_rest(int active)
{
    mt_rec.writer_active = active;
    if (!active && mt_rec.forking)
        rsignal(&mt_rec.space); /* the forking thread waits for this */
}

/* Called with the lock, when the writer is free: the buffer being filled goes to the
 * writer and recording goes on in the other one. */
static void hand_over(void)
{
    stream_handed += mt_rec.nbuf[mt_rec.cur];
    mt_rec.cur ^= 1;
    mt_rec.nbuf[mt_rec.cur] = 0;
    mt_rec.writer_busy = 1;
}

static void *stream_main(void *arg)
{
    (void)arg;
    mt_ring_set_busy(1); /* never record our own work */
    mt_rlock();
    writer_rest(0); /* the thread's start (its stack, TLS, a sanitizer's records) is done */
    for (;;) {
        if (mt_rec.forking) {
            rwait(&mt_rec.work, 0);
            continue;
        }
        if (!before_done && before_ready && (held_total >= before_need || stream_error)) {
            writer_rest(1);
            mt_runlock();
            int rc = write_before();
            int e = errno;
            mt_rlock();
            writer_rest(0);
            before_done = 1;
            stream_failed(rc, e);
            continue;
        }
        /* Waiting for the events the state needs: take the buffer now. */
        int urgent = before_ready && !before_done;
        if (!mt_rec.writer_busy && !mt_rec.stopping && !urgent) {
            unsigned ms = stream_wait_ms();
            if (ms > 0 && mt_rec.nbuf[mt_rec.cur] > 0 && mt_frame_count() > frames_ahead) {
                /* The first frame of a module loads its debug information (70 ms
                 * for libc's with its debug files installed): done while the flush
                 * is not due, it no longer delays the flush past flush_ms. */
                writer_rest(1); /* symbolizing allocates: a fork must wait for it */
                mt_runlock();
                frames_ahead = mt_frames_symbolize();
                mt_rlock();
                writer_rest(0);
                continue;
            }
            if (ms > 0)
                rwait(&mt_rec.work, ms);
            if (!mt_rec.writer_busy && !mt_rec.stopping && stream_wait_ms() > 0)
                continue; /* woken early, or the buffer's first event came meanwhile */
        }
        if (!mt_rec.writer_busy && mt_rec.nbuf[mt_rec.cur] > 0)
            hand_over();
        int full = mt_rec.cur ^ 1;
        int stopping = mt_rec.stopping;
        if (mt_rec.forking)
            continue; /* a fork began while the writer waited: it goes first */
        if (mt_rec.writer_busy) {
            int before = before_done, give_up = 0;
            if (!before && held_total + mt_rec.nbuf[full] > MAX_HELD_EVENTS)
                before_done = before = give_up = 1;
            writer_rest(1);
            mt_runlock();
            int rc = 0;
            if (give_up) {
                mtx_log("the state before the stream's first event took too long to collect "
                        "(%llu events meanwhile): the file begins without it",
                        (unsigned long long)held_total);
                rc = release_held(1);
            }
            if (rc == 0 && !before)
                rc = hold(mt_rec.buf[full], mt_rec.nbuf[full]);
            else if (rc == 0 && !stream_error)
                rc = stream_write_buffer(mt_rec.buf[full], mt_rec.nbuf[full]);
            int e = errno;
            mt_rlock();
            writer_rest(0);
            stream_failed(rc, e);
            mt_rec.nbuf[full] = 0;
            mt_rec.writer_busy = 0;
            atomic_fetch_add_explicit(&mt_rec.space, 1, memory_order_relaxed);
            if (mt_rec.space_waiters > 0)
                futex_wake_all(&mt_rec.space);
            continue;
        }
        if (stopping && mt_rec.nbuf[mt_rec.cur] == 0) {
            if (before_done)
                break; /* nothing is held: that was written first */
            if (!before_ready)
                rwait(&mt_rec.work, 0); /* the opening thread signals when it is */
            /* else the top of the loop writes the state, then what is held */
        }
    }
    writer_rest(1); /* the thread's end frees memory: active until it is joined */
    mt_runlock();
    return NULL;
}

void mt_stream_finish(void)
{
    mt_rlock();
    if (!mt_rec.streaming) {
        mt_runlock();
        return;
    }
    mt_rec.stopping = 1;
    rsignal(&mt_rec.work);
    mt_runlock();
    pthread_join(writer_thread, NULL);
    mt_rlock();
    writer_rest(0);
    mt_runlock();
    struct mt_xfsz x;
    mt_xfsz_hold(&x);
    int rc = stream_error;
    if (rc == 0)
        rc = mt_state_write(writer, &stream_marks);
    char *end = mt_meta_end_json();
    if (rc == 0 && end != NULL)
        rc = mt_writer_end(writer, end);
    else
        mt_writer_abort(writer);
    int e = errno;
    free(end);
    mt_xfsz_release(&x);
    if (rc != 0 && !stream_error)
        mtx_log("could not finish the stream: %s",
                rc == MEMTRACE_EIO ? strerror(e) : memtrace_strerror(rc));
    mt_rlock();
    writer = NULL;
    mt_rec.streaming = 0;
    mt_rec.stopping = 0;
    mtx_unmap(mt_rec.buf[0], MT_STREAM_BUF_EVENTS * sizeof(struct memtrace_event));
    mtx_unmap(mt_rec.buf[1], MT_STREAM_BUF_EVENTS * sizeof(struct memtrace_event));
    mt_rec.buf[0] = mt_rec.buf[1] = NULL;
    mt_runlock();
}

int mt_stream_start(const char *path)
{
    struct mt_writer *w;
    int rc = mt_writer_open(&w, path, mt_output_flags());
    if (rc != 0)
        return rc;
    char *m = mt_meta_dump(&stream_meta_gen);
    rc = m ? mt_writer_meta(w, m) : MEMTRACE_ENOMEM;
    free(m);
    struct memtrace_event *b0 = mtx_map(MT_STREAM_BUF_EVENTS * sizeof *b0);
    struct memtrace_event *b1 = mtx_map(MT_STREAM_BUF_EVENTS * sizeof *b1);
    if (rc == 0 && (b0 == NULL || b1 == NULL))
        rc = MEMTRACE_ENOMEM;
    if (rc != 0) {
        mtx_unmap(b0, MT_STREAM_BUF_EVENTS * sizeof *b0);
        mtx_unmap(b1, MT_STREAM_BUF_EVENTS * sizeof *b1);
        mt_writer_abort(w);
        mt_remove_output(path);
        return rc;
    }
    stream_marks = (struct mt_table_marks){0};
    frames_ahead = 0;
    writer = w;
    mt_rec.buf[0] = b0;
    mt_rec.buf[1] = b1;
    mt_rec.nbuf[0] = mt_rec.nbuf[1] = 0;
    mt_rec.cur = 0;
    mt_rec.writer_busy = 0;
    mt_rec.stopping = 0;
    stream_error = 0;
    mt_rlock();
    mt_rec.writer_active = 1; /* from its creation: see writer_rest */
    before_ready = before_done = 0;
    before_need = stream_handed = 0;
    mt_rec.streaming = 1;
    mt_runlock();
    /* The writer thread takes no signal meant for the program, and a write past
     * RLIMIT_FSIZE fails there with EFBIG, like a full disk, instead of raising
     * SIGXFSZ, which would kill the process. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int created = pthread_create(&writer_thread, NULL, stream_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (created != 0) {
        mt_rlock();
        writer_rest(0);
        mt_rec.streaming = 0;
        mt_runlock();
        writer = NULL;
        mt_writer_abort(w);
        mt_remove_output(path);
        return MEMTRACE_ENOMEM;
    }
    return 0;
}

void mt_stream_collect_before(void)
{
    struct mt_state_now fin;
    int rc = mt_state_now(&fin);
    mt_rlock();
    int late = before_done; /* the writer gave the state up meanwhile */
    if (rc == 0 && !late) {
        before_fin = fin;
        before_need = stream_handed + mt_rec.nbuf[mt_rec.cur];
    } else {
        before_fin = (struct mt_state_now){0};
        before_need = 0;
    }
    before_ready = 1;
    rsignal(&mt_rec.work);
    mt_runlock();
    if (late)
        mt_state_now_free(&fin);
    if (rc != 0)
        mtx_log("cannot collect the state as the stream opens (%s): it does not say what "
                "was live before its first event",
                memtrace_strerror(rc));
}

/* Called with the lock, for the first event of an empty buffer: the writer's
 * deadline counts from here, and the writer wakes to symbolize its frames early. */
__attribute__((noinline)) void mt_stream_first_event(void)
{
    mt_rec.first_ns = mtx_now_ns();
    rsignal(&mt_rec.work);
}

__attribute__((noinline)) int mt_stream_wait_room(void)
{
    while (mt_rec.nbuf[mt_rec.cur] == MT_STREAM_BUF_EVENTS) {
        if (!mt_rec.writer_busy) {
            hand_over();
            rsignal(&mt_rec.work);
        } else {
            mt_rec.space_waiters++;
            rwait(&mt_rec.space, 0);
            mt_rec.space_waiters--;
        }
        if (!mt_rec.streaming || mt_rec.stopping)
            return -1;
    }
    return 0;
}

void mt_stream_atfork_prepare(void)
{
    mt_rec.forking = 1;
    while (mt_rec.writer_active) {
        mt_rec.space_waiters++;
        rwait(&mt_rec.space, 0);
        mt_rec.space_waiters--;
    }
}

void mt_stream_atfork_parent(void)
{
    mt_rec.forking = 0;
    rsignal(&mt_rec.work);
}

void mt_stream_atfork_child(void)
{
    mt_rec.writer_active = 0;
    mt_rec.space_waiters = 0;
    if (mt_rec.streaming) {
        /* The parent still writes this file: just forget it. */
        writer = NULL;
        mt_rec.streaming = 0;
        mtx_unmap(mt_rec.buf[0], MT_STREAM_BUF_EVENTS * sizeof(struct memtrace_event));
        mtx_unmap(mt_rec.buf[1], MT_STREAM_BUF_EVENTS * sizeof(struct memtrace_event));
        mt_rec.buf[0] = mt_rec.buf[1] = NULL;
        held_head = NULL; /* the parent's copies, left to the child's heap */
        held_tail = &held_head;
        held_total = 0;
        before_fin = (struct mt_state_now){0};
    }
}
