/* recorder.c: the process's one recorder: starting and stopping it, its options,
 * its lock, what a fork does to it, and annotations. Owns the state the modules
 * share (mt_rec, see recorder_impl.h); the work itself is in the other recorder_*.c
 * files.
 *
 * Hot path (memtrace_record_event, and mt_record_block for the caching allocator;
 * recorder_ring.c): stamp the event, capture and intern its stack outside any
 * recorder lock, then under one short lock append it to the history and, when
 * streaming, to the stream buffer. No libc malloc, no stdio: the history is a list
 * of mmap'd chunks, the stream has two fixed buffers.
 *
 * Streaming (recorder_stream.c): a writer thread owns the file. Recording threads
 * fill one buffer while the writer encodes the other; a full buffer is handed over
 * at once, a partial one every flush_ms, so a killed process loses at most about
 * flush_ms of events. If the writer falls behind, a recording thread waits for it
 * rather than dropping events. Before each events chunk the writer writes the table
 * entries (strings, symbolized frames, stack nodes) interned since its last chunk;
 * every id an event refers to was interned before the event was appended, so the
 * tables always come first. */
#include "config.h"

#include "recorder_impl.h"

#include "memtrace.h"
#include "stack.h"
#include "strtab.h"
#include "mtx/util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define DEFAULT_STREAM_MAX_ENTRIES 100000u

struct mt_recorder mt_rec;

static MTX_TLS int tls_nannotations;

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

__attribute__((noinline)) void mt_rlock_slow(void)
{
    int spins = 0;
    do {
        while (atomic_load_explicit(&mt_rec.lock, memory_order_relaxed))
            if (++spins > 100)
                sched_yield();
    } while (atomic_exchange_explicit(&mt_rec.lock, 1, memory_order_acquire));
}

/* The writer thread takes the metadata's and the frames' locks while it works, so
 * it is brought to rest first, with the recorder's lock alone; the locks are then
 * taken in their usual order. */
static void atfork_prepare(void)
{
    mt_rlock();
    mt_stream_atfork_prepare();
    mt_runlock();
    mt_meta_lock();
    mt_frames_lock();
    mt_rlock();
}

static void atfork_parent(void)
{
    mt_stream_atfork_parent();
    mt_runlock();
    mt_frames_unlock();
    mt_meta_unlock();
}

/* The child has no writer thread: it starts with recording stopped, no stream and
 * an empty history; it may start its own recording. */
static void atfork_child(void)
{
    atomic_store(&mt_rec.lock, 0);
    mt_rec.forking = 0;
    mt_frames_atfork_child();
    mt_meta_atfork_child();
    mt_strings_atfork_child();
    mt_stack_atfork_child();
    mtx_tls_tid = 0; /* the forking thread's id was cached; this one has a new id */
    atomic_store(&mt_rec.recording, 0);
    mt_stream_atfork_child();
    mt_state_atfork_child();
    mt_ring_reset();
    mt_rec.controlling = 0; /* a thread that was starting or stopping is not here */
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
    if (o->stacks < MEMTRACE_STACKS_ALL || o->stacks > MEMTRACE_STACKS_PYTHON)
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

static int record_history(const struct memtrace_options *o);

/* One start, change or stop at a time: two threads that start a stream at once must
 * not both open one. A flag under the recorder's lock rather than a mutex, so that a
 * fork needs nothing more than resetting it in the child. */
static void control_enter(void)
{
    mt_rlock();
    while (mt_rec.controlling) {
        mt_runlock();
        sched_yield();
        mt_rlock();
    }
    mt_rec.controlling = 1;
    mt_runlock();
}

static void control_leave(void)
{
    mt_rlock();
    mt_rec.controlling = 0;
    mt_runlock();
}

int memtrace_record_history(const struct memtrace_options *o)
{
    pthread_once(&atfork_once, register_atfork);
    control_enter();
    int rc = record_history(o);
    control_leave();
    return rc;
}

static int record_history(const struct memtrace_options *o)
{
    if (o == NULL) {
        mt_rlock();
        atomic_store(&mt_rec.recording, 0);
        mt_runlock();
        mt_stream_finish();
        return 0;
    }
    int rc = options_check(o);
    if (rc != 0)
        return rc;
    int starting = !atomic_load(&mt_rec.recording);
    if (starting)
        mt_meta_start();
    mt_rlock();
    mt_rec.context = o->context;
    mt_rec.skip_actions = o->skip_actions;
    mt_rec.stack_depth = o->stack_depth;
    mt_rec.stack_kind = o->stacks;
    mt_rec.flush_ms = o->flush_ms;
    mt_rec.max_entries = o->max_entries;
    if (mt_rec.max_entries == 0 && (o->stream_path != NULL || mt_rec.streaming))
        mt_rec.max_entries = DEFAULT_STREAM_MAX_ENTRIES;
    mt_rec.limit = mt_rec.max_entries != 0 ? mt_rec.max_entries : SIZE_MAX;
    mt_rec.stack_actions = 0;
    for (int a = 0; a < MEMTRACE_ACTION_COUNT && o->stack_depth > 0; a++)
        if (wants_stack(o->context, a))
            mt_rec.stack_actions |= 1u << a;
    if (starting)
        mt_ring_reset();
    else
        mt_ring_trim();
    int opened = 0;
    if (o->stream_path != NULL && !mt_rec.streaming) {
        mt_runlock();
        rc = mt_stream_start(o->stream_path); /* takes no lock until the thread runs */
        opened = rc == 0;
        mt_rlock();
    }
    if (rc == 0)
        atomic_store(&mt_rec.recording, 1);
    mt_runlock();
    if (opened)
        mt_stream_collect_before();
    return rc;
}

int memtrace_is_recording(void)
{
    return atomic_load_explicit(&mt_rec.recording, memory_order_relaxed);
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

/* A streaming process that exits without stopping still gets a complete file. */
__attribute__((destructor)) static void recorder_fini(void)
{
    if (mt_rec.streaming)
        memtrace_record_history(NULL);
}
