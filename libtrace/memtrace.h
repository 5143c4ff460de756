/* memtrace.h: the recording API of libmemtrace.
 *
 * A process has one recorder. Allocators (memtrace's own caching allocator, the
 * interposer, or any other) report events to it; it stamps each with the time, the
 * thread and an interned native stack, keeps a history in memory (a ring of
 * max_entries) and, when asked to, streams it to a .memtrace file as it goes.
 * memtrace_dump_snapshot() writes the history and the current segment state to a
 * file at any time.
 *
 * Every function returning int returns 0 (MEMTRACE_OK) or a negative MEMTRACE_E*
 * code; memtrace_strerror() names it. All functions are thread-safe.
 */
#ifndef MEMTRACE_H
#define MEMTRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef MEMTRACE_BUILDING
#define MEMTRACE_API __attribute__((visibility("default")))
#else
#define MEMTRACE_API
#endif

#define MEMTRACE_OK       0
#define MEMTRACE_EINVAL   (-1)  /* an argument is out of range */
#define MEMTRACE_ENOMEM   (-2)  /* host memory exhausted */
#define MEMTRACE_EIO      (-3)  /* a read or write failed (errno is kept) */
#define MEMTRACE_EFORMAT  (-4)  /* not a .memtrace file, or a corrupt one */
#define MEMTRACE_ETRUNC   (-5)  /* the file ends early (readers warn, not fail) */
#define MEMTRACE_ESTATE   (-6)  /* wrong state, e.g. not recording */
#define MEMTRACE_ENODEV   (-7)  /* no such device, or its backend is absent */
#define MEMTRACE_EOOM     (-8)  /* the device is out of memory */
#define MEMTRACE_ECONFIG  (-9)  /* a configuration key or value is wrong */
#define MEMTRACE_ENOTSUP  (-10) /* not supported by this backend or build */
#define MEMTRACE_EVERSION (-11) /* file written by a newer format version */

/* Returns a static English description of a MEMTRACE_E* code. */
MEMTRACE_API const char *memtrace_strerror(int err);

/* Returns the library version, "MAJOR.MINOR.PATCH". */
MEMTRACE_API const char *memtrace_version(void);

/* Actions, PyTorch's names plus memtrace's own. The numbers are part of the file
 * format: never renumber. */
enum memtrace_action {
    MEMTRACE_ALLOC = 0,
    MEMTRACE_FREE_REQUESTED = 1,
    MEMTRACE_FREE_COMPLETED = 2,
    MEMTRACE_SEGMENT_ALLOC = 3,
    MEMTRACE_SEGMENT_FREE = 4,
    MEMTRACE_SEGMENT_MAP = 5,
    MEMTRACE_SEGMENT_UNMAP = 6,
    MEMTRACE_SNAPSHOT = 7,
    MEMTRACE_OOM = 8,
    MEMTRACE_ANNOTATE = 9,
    MEMTRACE_COUNTER = 10, /* addr = device bytes used, size = device total,
                              requested_size = process RSS */
    MEMTRACE_ACTION_COUNT
};

/* Returns "alloc", "free_requested", ... or NULL for an unknown action. */
MEMTRACE_API const char *memtrace_action_name(int action);
/* Returns the action named name, or -1. */
MEMTRACE_API int memtrace_action_from_name(const char *name);

/* aux of an MEMTRACE_ANNOTATE event; its category is the annotation's name. */
enum memtrace_annotate_kind {
    MEMTRACE_ANNOTATE_PUSH = 0,
    MEMTRACE_ANNOTATE_POP = 1,
    MEMTRACE_ANNOTATE_MARK = 2
};

/* One recorded event. Callers fill action..aux; the recorder fills time_ns (when 0),
 * tid and stack. */
struct memtrace_event {
    uint64_t time_ns;        /* CLOCK_MONOTONIC nanoseconds */
    uint64_t addr;           /* block or segment address */
    uint64_t size;           /* bytes */
    uint64_t requested_size; /* bytes the user asked for (0: same as size) */
    uint64_t stream;         /* stream handle, 0 for the default stream */
    uint64_t aux;            /* oom: device free bytes; annotate: kind; else 0 */
    int32_t device;          /* device index, -1 for host memory */
    int32_t pool;            /* pool id (0 default, 1 small, 2 large, or a user pool) */
    uint32_t tid;            /* kernel thread id */
    uint32_t stack;          /* stack id, 0 = none */
    uint32_t category;       /* string id of the category or annotation, 0 = none */
    uint32_t source;         /* string id of the reporting API, 0 = none */
    uint8_t action;          /* enum memtrace_action */
};

/* How much context to capture, as PyTorch's _record_memory_history: NONE records no
 * stacks; STATE captures stacks for allocations only (what the state needs); ALLOC
 * also for segment events; ALL for every event, frees included. */
enum memtrace_context {
    MEMTRACE_CONTEXT_NONE = 0,
    MEMTRACE_CONTEXT_STATE = 1,
    MEMTRACE_CONTEXT_ALLOC = 2,
    MEMTRACE_CONTEXT_ALL = 3
};

#define MEMTRACE_MAX_FRAMES 128

/* Which frames a stack holds. In a process that runs CPython (3.9 to 3.14), ALL puts
 * the calling thread's Python frames (function, file, line) where the interpreter's
 * evaluation loop stands among the native frames; PYTHON keeps the Python frames
 * alone, the cheapest; NATIVE ignores Python. A thread with no Python frames gets
 * its native stack whatever the kind. docs/python.md has the details. */
enum memtrace_stacks {
    MEMTRACE_STACKS_ALL = 0,
    MEMTRACE_STACKS_NATIVE = 1,
    MEMTRACE_STACKS_PYTHON = 2
};

struct memtrace_options {
    int context;             /* enum memtrace_context; default ALL */
    size_t max_entries;      /* history kept in memory; 0 = unlimited when not
                                streaming, 100000 when streaming. Older events are
                                dropped past it and counted. */
    uint32_t skip_actions;   /* bit (1u << action) set: that action is not recorded */
    int stack_depth;         /* frames per stack, 1..MEMTRACE_MAX_FRAMES; default 32 */
    const char *stream_path; /* if set, stream every event to this file */
    unsigned flush_ms;       /* longest time between stream flushes; default 1000 */
    int stacks;              /* enum memtrace_stacks; default ALL. stack_depth counts
                                native frames (Python ones for PYTHON) */
};

/* Fills o with the defaults above. */
MEMTRACE_API void memtrace_options_init(struct memtrace_options *o);

/* Starts recording with options o, or changes the options of a running recorder
 * (a stream, once open, stays open). With o == NULL, stops recording: the stream,
 * if any, gets the final state and its end record and is closed; the history is
 * kept for memtrace_dump_snapshot() until the next start. Returns MEMTRACE_EINVAL
 * for an option out of range, MEMTRACE_EIO if the stream cannot be created (errno
 * kept): it is created mode 0600, never through a symbolic link, and never over an
 * existing file (EEXIST) unless the environment has MEMTRACE_OVERWRITE=1. A stream
 * opened while the state providers hold memory begins with that state, so that its
 * replay starts from what was live (this call collects it from the providers).
 * Calls from several threads take effect one at a time: of two that open a stream at
 * once, one opens it and the other finds it open. */
MEMTRACE_API int memtrace_record_history(const struct memtrace_options *o);

/* In a child made by fork(), recording is stopped, the history is empty and the
 * parent's stream is left to the parent: call memtrace_record_history() again to
 * record in the child (to a file of its own). */

/* Returns 1 while recording, 0 otherwise. Cheap: meant for hot paths. */
MEMTRACE_API int memtrace_is_recording(void);

/* Records ev: fills time_ns (when 0), tid and, as the context asks, stack (when 0), then
 * appends the event to the history and the stream. Returns MEMTRACE_ESTATE when not
 * recording (nothing happens), MEMTRACE_EINVAL for an unknown action. Never blocks
 * on I/O for longer than it takes to hand a full buffer to the writer thread, never
 * calls malloc from libc. */
MEMTRACE_API int memtrace_record_event(struct memtrace_event *ev);

/* Records ev[0..n) as memtrace_record_event() would, in order and as one unit: the
 * events get one time (where time_ns is 0), one stack (captured once, for the events
 * the context gives a stack) and one turn of the recorder's lock, so they are never
 * interleaved with other threads' events. For an allocator that reports
 * free_requested and free_completed together. Returns as memtrace_record_event(),
 * MEMTRACE_EINVAL if any action is unknown (then nothing is recorded). */
MEMTRACE_API int memtrace_record_events(struct memtrace_event *ev, size_t n);

/* Records ev as memtrace_record_event() does, and calls fn(ctx, ev) once under the
 * recorder's lock, just before ev is stored, also when ev is not kept (recording off,
 * its action skipped): state a caller keeps beside the history, such as a table of
 * live segments, then changes in the history's order with no lock of its own. fn may
 * fill ev's fields (a free's size, from that table); it must be short and must not
 * call memtrace. With ev NULL, only fn(ctx, NULL) runs under the lock: a consistent
 * read of that state. Returns as memtrace_record_event(); fn is not called when ev's
 * action is unknown (MEMTRACE_EINVAL) or fn is NULL. */
typedef void (*memtrace_locked_fn)(void *ctx, struct memtrace_event *ev);
MEMTRACE_API int memtrace_record_event_with(struct memtrace_event *ev, memtrace_locked_fn fn,
                                            void *ctx);

/* Returns the id of string s in the recorder's string table (stable for the life of
 * the process), or 0 for NULL, the empty string, or when host memory is exhausted. */
MEMTRACE_API uint32_t memtrace_intern(const char *s);

/* Annotations: named ranges on this thread, and instant markers. Each records an
 * MEMTRACE_ANNOTATE event. */
MEMTRACE_API int memtrace_annotate_push(const char *name);
MEMTRACE_API int memtrace_annotate_pop(void);
MEMTRACE_API int memtrace_annotate_mark(const char *name);

/* Per-allocation categories: while a category is pushed on this thread, alloc
 * events recorded by this thread with category 0 carry it. Pushes nest (up to 32). */
MEMTRACE_API int memtrace_category_push(const char *name);
MEMTRACE_API int memtrace_category_pop(void);

/* Process-wide metadata written into the file's JSON metadata: key with a JSON
 * value given as text (e.g. "{\"max_split_size_mb\": 64}"). Returns
 * MEMTRACE_EINVAL if json does not parse. */
MEMTRACE_API int memtrace_meta_set(const char *key, const char *json);

/* Registers a device for the metadata's "devices" list. */
MEMTRACE_API int memtrace_device_register(int index, const char *name, uint64_t total_bytes,
                                          const char *backend);

/* Block and segment state, as PyTorch's snapshot segments. */
enum memtrace_block_state {
    MEMTRACE_BLOCK_INACTIVE = 0,
    MEMTRACE_BLOCK_ACTIVE_ALLOCATED = 1,
    MEMTRACE_BLOCK_ACTIVE_PENDING_FREE = 2
};

struct memtrace_block {
    uint64_t addr;
    uint64_t size;
    uint64_t requested_size;
    uint32_t stack; /* stack id of the allocation, 0 = none */
    int state;      /* enum memtrace_block_state */
};

struct memtrace_segment {
    uint64_t addr;
    uint64_t total_size;
    uint64_t allocated_size;
    uint64_t active_size;
    uint64_t requested_size;
    uint64_t stream;
    int32_t device;
    int32_t pool; /* segment_pool_id */
    int is_large; /* segment_type "large" (1) or "small" (0) */
    int is_expandable;
    uint32_t stack;  /* stack id of the segment's allocation, 0 = none */
    uint32_t source; /* string id of the API that made it, 0 = none */
    size_t nblocks;
    const struct memtrace_block *blocks;
};

/* A state provider reports its live segments by calling sink once per segment.
 * Providers run at dump time and at the end of a stream, on the dumping thread,
 * outside the recorder's locks, so they may take their own. */
typedef void (*memtrace_segment_sink)(void *sink_ctx, const struct memtrace_segment *seg);
typedef void (*memtrace_state_fn)(void *ctx, memtrace_segment_sink sink, void *sink_ctx);

/* Returns a handle (> 0) or a negative MEMTRACE_E* code. */
MEMTRACE_API int memtrace_state_provider_add(memtrace_state_fn fn, void *ctx);
/* Returns 0, or MEMTRACE_EINVAL for an unknown handle. It returns once no dump or
 * stream is calling the provider any more (unless called from the provider itself),
 * so its ctx may be freed then; it must not be called while holding a lock that the
 * provider takes. */
MEMTRACE_API int memtrace_state_provider_remove(int handle);

/* Writes the history held in memory, the current state from every provider and an
 * end record to a new .memtrace file at path, and records a MEMTRACE_SNAPSHOT event.
 * Works while recording or after a stop. The file is written under a temporary
 * name in path's directory and renamed to path once complete, with the rules of
 * a stream (0600, no link, no existing file unless MEMTRACE_OVERWRITE=1). Returns
 * MEMTRACE_EIO if path cannot be written (errno kept: EEXIST for an existing file);
 * nothing is left behind then. */
MEMTRACE_API int memtrace_dump_snapshot(const char *path);

/* Counts since the last start: events accepted, events dropped from the history
 * ring, and whether the ring ever overflowed. */
struct memtrace_counts {
    uint64_t recorded;
    uint64_t dropped;
    int overflowed;
};
MEMTRACE_API void memtrace_get_counts(struct memtrace_counts *c);

#ifdef __cplusplus
}
#endif
#endif
