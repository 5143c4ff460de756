/* memtrace_snapshot.h: reading .memtrace files as a stream.
 *
 * A reader holds the file's tables (strings, frames, stacks) and the latest segment
 * state, never the events: memory grows with distinct stacks, not with events.
 * memtrace_reader_next() returns events one at a time in file order. A file that
 * ends early (no end record, or a partial last chunk) reads up to its last complete
 * chunk and then reports itself truncated; a corrupt or foreign file is an error
 * with a message naming the byte offset. */
#ifndef MEMTRACE_SNAPSHOT_H
#define MEMTRACE_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "memtrace.h"

#ifdef __cplusplus
extern "C" {
#endif

struct memtrace_reader;

struct memtrace_frame {
    uint64_t ip;        /* return address in the recorded process */
    uint64_t offset;    /* offset inside the module */
    const char *module; /* "" if unknown */
    const char *symbol; /* "" if unknown */
    const char *file;   /* "" if unknown */
    uint32_t line;      /* 0 if unknown */
};

/* A reader's error: code (MEMTRACE_E*), the file offset where it was found, and one
 * line of text naming the file and what is wrong. */
struct memtrace_errinfo {
    int code;
    uint64_t offset;
    char text[256];
};

/* Opens path and reads the header and the chunks up to the first event. On error
 * returns a negative code, fills err (may be NULL) and sets *out to NULL. */
MEMTRACE_API int memtrace_reader_open(struct memtrace_reader **out, const char *path,
                                      struct memtrace_errinfo *err);

/* Reads the next event into ev. Returns 1 with an event, 0 at the end of the file
 * (check memtrace_reader_truncated()), or a negative code on corruption (see
 * memtrace_reader_error()); after an error or the end, it keeps returning the same. */
MEMTRACE_API int memtrace_reader_next(struct memtrace_reader *r, struct memtrace_event *ev);

/* As memtrace_reader_next, without the copy: points *ev at the next event, held by
 * the reader until the next call that reads an event (or close). At the end or on an
 * error *ev points at a copy of the last event returned (left as it was if none). */
MEMTRACE_API int memtrace_reader_next_ref(struct memtrace_reader *r,
                                          const struct memtrace_event **ev);

/* The last error (code 0 when none). */
MEMTRACE_API const struct memtrace_errinfo *memtrace_reader_error(const struct memtrace_reader *r);

/* 1 if the file has ended without its end record (known once next() returned 0). */
MEMTRACE_API int memtrace_reader_truncated(const struct memtrace_reader *r);

/* Metadata read so far, merged, as JSON object text owned by the reader. */
MEMTRACE_API const char *memtrace_reader_meta(const struct memtrace_reader *r);

/* The end record's JSON object text, or NULL if not (yet) read. */
MEMTRACE_API const char *memtrace_reader_end(const struct memtrace_reader *r);

/* Format version of the file. */
MEMTRACE_API unsigned memtrace_reader_version(const struct memtrace_reader *r);

/* String id, or "" for 0 and unknown ids. Valid until close. */
MEMTRACE_API const char *memtrace_reader_string(const struct memtrace_reader *r, uint32_t id);

/* Fills frames[0..max) with the frame ids of stack (innermost first) and returns the
 * stack's depth (which may exceed max). 0 for stack 0 or an unknown id. Costs what
 * it copies: the reader keeps each node's depth, so the depth alone is O(1). */
MEMTRACE_API int memtrace_reader_stack(const struct memtrace_reader *r, uint32_t stack,
                                       uint32_t *frames, int max);

/* Frame id, or NULL for an unknown id. Valid until close. */
MEMTRACE_API const struct memtrace_frame *memtrace_reader_frame(const struct memtrace_reader *r,
                                                                uint32_t id);

/* Table sizes read so far. */
MEMTRACE_API uint32_t memtrace_reader_stack_count(const struct memtrace_reader *r);
MEMTRACE_API uint32_t memtrace_reader_frame_count(const struct memtrace_reader *r);

/* The latest segment state read so far (state chunks come at snapshots and at the
 * end): count, and segment i (with its blocks), valid until the next call to
 * memtrace_reader_next() or close. state_time is its time_ns (0 if none). */
MEMTRACE_API size_t memtrace_reader_segment_count(const struct memtrace_reader *r);
MEMTRACE_API const struct memtrace_segment *memtrace_reader_segment(const struct memtrace_reader *r,
                                                                    size_t i);
MEMTRACE_API uint64_t memtrace_reader_state_time(const struct memtrace_reader *r);

/* Bytes of the file consumed so far and its total size (for progress). */
MEMTRACE_API uint64_t memtrace_reader_offset(const struct memtrace_reader *r);
MEMTRACE_API uint64_t memtrace_reader_file_size(const struct memtrace_reader *r);

MEMTRACE_API void memtrace_reader_close(struct memtrace_reader *r);

#ifdef __cplusplus
}
#endif
#endif
