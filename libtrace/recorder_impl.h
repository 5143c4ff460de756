/* recorder_impl.h: what the recorder's modules share, and nothing else reaches.
 *
 *   recorder.c         start and stop, options, the lock, fork, annotations
 *   recorder_ring.c    the hot path: stamping and storing events; the history ring
 *   recorder_meta.c    the JSON metadata: host, rank, argv, options, devices
 *   recorder_frames.c  symbolized frames, and the tables a writer needs first
 *   recorder_state.c   state providers, and the state written at the end of a file
 *   recorder_stream.c  the writer thread that streams events to a file
 *   recorder_dump.c    memtrace_dump_snapshot
 *
 * Shared state is the one struct below: the recorder's lock, what the lock guards
 * that more than one module reads (the options, the stream's buffers), and whether
 * recording is on. Everything else stays static in the module that owns it. The hot
 * path's helpers here are static inline: a call into another file would cost on
 * every event. */
#ifndef MEMTRACE_RECORDER_IMPL_H
#define MEMTRACE_RECORDER_IMPL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "memtrace.h"
#include "mtx/util.h"
#include "writer.h"
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define HAVE_SINGLE_THREADED 1
#endif
#endif
#ifndef HAVE_SINGLE_THREADED
#define HAVE_SINGLE_THREADED 0
#endif

#define MT_STREAM_BUF_EVENTS 65536u
#define MT_PREFETCH_AHEAD    8 /* events; a prefetch past the end is harmless */

struct mt_recorder {
    atomic_int lock; /* see mt_rlock() */
    atomic_int recording;
    /* options in force */
    int context;
    size_t max_entries; /* 0 = unlimited */
    size_t limit;       /* max_entries, or SIZE_MAX for unlimited */
    uint32_t skip_actions;
    uint32_t stack_actions; /* actions that get a stack: context and depth in one mask */
    int stack_depth;
    int stack_kind; /* enum memtrace_stacks */
    unsigned flush_ms;
    /* the stream's buffers: recording threads fill buf[cur], the writer the other */
    int streaming;
    atomic_uint work, space; /* futex words: bumped when there is work, or space */
    int space_waiters;
    struct memtrace_event *buf[2];
    uint32_t nbuf[2];
    int cur;           /* buffer being filled */
    uint64_t first_ns; /* when buf[cur] got its first event (mtx_now_ns) */
    int writer_busy;   /* the other buffer is with the writer */
    int stopping;
    /* fork: the writer thread must not be inside malloc (libc's, or a sanitizer's
     * allocator, whose locks a child inherits held) when another thread forks */
    int writer_active; /* the writer thread starts, works outside the lock, or exits */
    int forking;       /* between the prepare and the parent's handler: start no work */
    int controlling;   /* a memtrace_record_history call is under way */
};

/* Defined in recorder.c. */
extern MTX_HIDDEN struct mt_recorder mt_rec;

/* ---- the lock (recorder.c) ---- */

/* mt_rec.lock is held for a few stores per event: a test-and-set lock released by a
 * plain store is one atomic per turn where a mutex takes two, and none while the
 * process has one thread (only this thread could start another, and never holding
 * the lock). Waiters spin briefly, then yield; the writer thread and a recording
 * thread that waits for buffer space sleep on futex words instead, without the
 * lock. */
MTX_HIDDEN void mt_rlock_slow(void);

static inline void mt_rlock(void)
{
#if HAVE_SINGLE_THREADED
    if (__libc_single_threaded) {
        atomic_store_explicit(&mt_rec.lock, 1, memory_order_relaxed);
        return;
    }
#endif
    if (MTX_UNLIKELY(atomic_exchange_explicit(&mt_rec.lock, 1, memory_order_acquire)))
        mt_rlock_slow();
}

static inline void mt_runlock(void)
{
    atomic_store_explicit(&mt_rec.lock, 0, memory_order_release);
}

/* ---- the ring (recorder_ring.c) ---- */

/* Called with the lock: empties the history and zeroes the counts. */
MTX_HIDDEN void mt_ring_reset(void);
/* Called with the lock: drops the oldest events beyond max_entries. */
MTX_HIDDEN void mt_ring_trim(void);
/* Called with the lock: the history (oldest first) in a malloc'd array, or NULL. */
MTX_HIDDEN struct memtrace_event *mt_ring_copy(size_t *n);
/* Sets this thread's re-entry guard (1: what it does is not recorded); returns the
 * guard's previous value. */
MTX_HIDDEN int mt_ring_set_busy(int busy);

/* ---- metadata (recorder_meta.c) ---- */

/* Notes the wall and monotonic time at which recording starts. */
MTX_HIDDEN void mt_meta_start(void);
/* The whole metadata object as JSON text (malloc'd), and its generation in *gen when
 * gen is not NULL. Takes the lock for the options. */
MTX_HIDDEN char *mt_meta_dump(uint64_t *gen);
/* The generation of the metadata, bumped on every change. */
MTX_HIDDEN uint64_t mt_meta_gen(void);
/* The end object of a file (the counts) as JSON text (malloc'd). */
MTX_HIDDEN char *mt_meta_end_json(void);
MTX_HIDDEN void mt_meta_lock(void);
MTX_HIDDEN void mt_meta_unlock(void);
MTX_HIDDEN void mt_meta_atfork_child(void);

/* ---- tables (recorder_frames.c) ---- */

/* The table entries a writer has had: ids up to these are written. */
struct mt_table_marks {
    uint32_t strings, frames, stacks;
};

/* Writes the table entries interned since *marks, in dependency order, and moves
 * the marks. 0 or MEMTRACE_E*. */
MTX_HIDDEN int mt_tables_write(struct mt_writer *w, struct mt_table_marks *marks);
/* Symbolizes the frames interned so far that are not yet; returns the frame count. */
MTX_HIDDEN uint32_t mt_frames_symbolize(void);
MTX_HIDDEN void mt_frames_lock(void);
MTX_HIDDEN void mt_frames_unlock(void);
MTX_HIDDEN void mt_frames_atfork_child(void);

/* ---- state (recorder_state.c) ---- */

/* Collects the state from every provider and writes it with the tables it needs;
 * called without the lock. */
MTX_HIDDEN int mt_state_write(struct mt_writer *w, struct mt_table_marks *marks);

/* The providers' state collected now, to write later (a dump needs it before the
 * events: what was live before the first one). */
struct mt_state_now {
    struct memtrace_segment *segs; /* each one's blocks its own allocation */
    size_t n;
    uint64_t time_ns;
};
/* Called without the lock. 0 or MEMTRACE_ENOMEM (nothing to free then). */
MTX_HIDDEN int mt_state_now(struct mt_state_now *s);
/* In a forked child: no collection is under way there. */
MTX_HIDDEN void mt_state_atfork_child(void);
/* Frees what s holds; s may be zeroed (nothing collected). */
MTX_HIDDEN void mt_state_now_free(struct mt_state_now *s);
/* Writes s with the tables it needs. 0 or MEMTRACE_E*. */
MTX_HIDDEN int mt_state_now_write(struct mt_writer *w, struct mt_table_marks *marks,
                                  const struct mt_state_now *s);

/* Writes, with the tables it needs, the state of what was live before the events
 * fed to b (snapshot/before.h), found from them and the state fin collected after
 * them as an import finds it; time_ns is the first event's. Nothing when nothing
 * was live. 0 or MEMTRACE_E*. */
struct mt_before;
MTX_HIDDEN int mt_state_before_write(struct mt_writer *w, struct mt_table_marks *marks,
                                     struct mt_before *b, uint64_t time_ns,
                                     const struct mt_state_now *fin);

/* ---- the stream (recorder_stream.c) ---- */

/* Opens path and starts the writer thread; called without the lock. */
MTX_HIDDEN int mt_stream_start(const char *path);
/* After a successful mt_stream_start, by the same thread, without the lock: collects
 * the providers' state for the writer thread, which writes from it and the events
 * recorded meanwhile what was live before the stream's first event, then the
 * events. */
MTX_HIDDEN void mt_stream_collect_before(void);
/* Stops the writer thread and finishes the file; called without the lock. */
MTX_HIDDEN void mt_stream_finish(void);
/* Called with the lock, when the buffer being filled is full: hands it to the
 * writer, or waits for the writer to give the other one back. Returns 0 when there
 * is room again, -1 when the stream stopped meanwhile. */
MTX_HIDDEN int mt_stream_wait_room(void);
MTX_HIDDEN void mt_stream_first_event(void);
/* Called with the lock, in fork's prepare handler before the recorder's other
 * locks: waits until the writer thread is idle and keeps it so (mt_rec.forking)
 * until mt_stream_atfork_parent. Returns with the lock. */
MTX_HIDDEN void mt_stream_atfork_prepare(void);
/* Called with the lock: lets the writer work again. */
MTX_HIDDEN void mt_stream_atfork_parent(void);
/* In a forked child: forgets the parent's stream. */
MTX_HIDDEN void mt_stream_atfork_child(void);

/* MT_WRITER_OVERWRITE when MEMTRACE_OVERWRITE=1 allows replacing an existing file,
 * else 0: the flags of every file the recorder creates. */
MTX_HIDDEN unsigned mt_output_flags(void);

/* Between hold and release, a write by this thread past RLIMIT_FSIZE fails with
 * EFBIG instead of killing the process with SIGXFSZ; release consumes the signal
 * such a write left pending, and restores the thread's mask. */
struct mt_xfsz {
    sigset_t old;
    int was_pending;
};
MTX_HIDDEN void mt_xfsz_hold(struct mt_xfsz *x);
MTX_HIDDEN void mt_xfsz_release(const struct mt_xfsz *x);

/* Called with the lock. */
static inline void mt_stream_append(const struct memtrace_event *ev)
{
    if (MTX_UNLIKELY(mt_rec.nbuf[mt_rec.cur] == MT_STREAM_BUF_EVENTS) && mt_stream_wait_room() != 0)
        return;
    struct memtrace_event *b = mt_rec.buf[mt_rec.cur];
    uint32_t k = mt_rec.nbuf[mt_rec.cur]++;
    if (MTX_UNLIKELY(k == 0))
        mt_stream_first_event();
    __builtin_prefetch((void *)((uintptr_t)&b[k] + MT_PREFETCH_AHEAD * sizeof *ev), 1, 3);
    b[k] = *ev;
}

#endif
