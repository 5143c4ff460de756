/* writer.h: writing .memtrace files chunk by chunk (internal to libmemtrace).
 *
 * Each call writes exactly one self-delimiting, zlib-compressed chunk with write(2)
 * and returns only when the chunk is in the kernel: a process killed after a call
 * returns leaves a file readable up to and including that chunk. Tables are written
 * incrementally: a chunk of strings, frames or stack nodes continues the ids where
 * the previous one of its kind stopped, and the recorder writes table entries before
 * the first event or segment that refers to them. Not thread-safe: one writer, one
 * thread at a time. May allocate (never called from hot paths). */
#ifndef MEMTRACE_WRITER_H
#define MEMTRACE_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "memtrace.h"

struct mt_writer;

/* A frame as stored: strings by id in the file's string table. */
struct mt_frame_rec {
    uint64_t ip;
    uint64_t offset;
    uint32_t module;
    uint32_t symbol;
    uint32_t file;
    uint32_t line;
};

/* Flags of mt_writer_open. */
#define MT_WRITER_OVERWRITE 1u /* replace an existing file instead of refusing it */
#define MT_WRITER_ATOMIC    2u /* path appears, whole, at mt_writer_end (see below) */

/* Creates path and writes the file header. The file is created mode 0600 (less the
 * umask), never through a symbolic link (one at path is refused: EEXIST, or ELOOP
 * with MT_WRITER_OVERWRITE), and an existing file is refused with EEXIST unless
 * flags has MT_WRITER_OVERWRITE. With MT_WRITER_ATOMIC the chunks go to a new
 * temporary file in path's directory (path.tmp-XXXXXX) that mt_writer_end renames
 * to path, without replacing a file that appeared meanwhile unless overwriting,
 * and that mt_writer_abort removes: a reader never sees part of the file. Without
 * it, path itself grows chunk by chunk (a stream, readable while written).
 * 0, MEMTRACE_EIO (errno kept) or MEMTRACE_ENOMEM. */
int mt_writer_open(struct mt_writer **out, const char *path, unsigned flags);

/* A writer whose chunks stay in memory, for mt_writer_take: no header, no file, and
 * every call below but mt_writer_end works on it. 0 or MEMTRACE_ENOMEM. */
int mt_writer_open_mem(struct mt_writer **out);

/* Writes the chunks that the memory writer mem holds after those of w (a file
 * writer) with one write(2). Either w has written no table yet (its META at most),
 * and w's tables then continue after mem's, or mem holds no table (its events use
 * ids of w's tables). mem is freed whatever the result. 0, MEMTRACE_EINVAL (w or mem
 * of the wrong kind, or both with tables), MEMTRACE_EIO (errno kept; or mem failed
 * before). */
int mt_writer_take(struct mt_writer *w, struct mt_writer *mem);

/* Metadata as a JSON object text; a later META chunk adds to and overrides keys of
 * earlier ones. MEMTRACE_EINVAL if json is not an object. */
int mt_writer_meta(struct mt_writer *w, const char *json);

/* Strings with ids first_id .. first_id + n - 1; first_id must follow the last id
 * written (1 for the first call). MEMTRACE_EINVAL otherwise. */
int mt_writer_strings(struct mt_writer *w, uint32_t first_id, size_t n, const char *const *s);

/* Frames with ids first_id .. first_id + n - 1, same rule. */
int mt_writer_frames(struct mt_writer *w, uint32_t first_id, size_t n,
                     const struct mt_frame_rec *f);

/* Stack trie nodes with ids first_id .. first_id + n - 1, same rule; node i has
 * parent[i] (0 = root, else an id already written or earlier in this call) and
 * frame[i] (an id already written). */
int mt_writer_stacks(struct mt_writer *w, uint32_t first_id, size_t n, const uint32_t *parent,
                     const uint32_t *frame);

/* Events in recording order (time_ns need not be monotonic across threads). */
int mt_writer_events(struct mt_writer *w, const struct memtrace_event *ev, size_t n);

/* The segment and block state at time_ns; replaces any earlier state for readers. */
int mt_writer_state(struct mt_writer *w, uint64_t time_ns, const struct memtrace_segment *segs,
                    size_t n);

/* Writes the end record (JSON object text: totals) and closes the file (for an
 * atomic writer: syncs it and renames it into place); w is freed whatever the
 * result. 0, MEMTRACE_EIO (errno kept) or MEMTRACE_ENOMEM. */
int mt_writer_end(struct mt_writer *w, const char *json);

/* Closes without an end record (the file then reads as truncated; an atomic
 * writer's temporary file is removed); frees w. */
void mt_writer_abort(struct mt_writer *w);

/* Bytes written so far. */
uint64_t mt_writer_bytes(const struct mt_writer *w);

/* The reason for a writer's error rc, for a message: for MEMTRACE_EIO the system's
 * reason, which every writer call that returns it leaves in errno (so call this before
 * anything else can change errno), else memtrace_strerror(rc). */
const char *mt_writer_strerror(int rc);

/* Puts a finished temporary file tmp at path, replacing a file there only with
 * overwrite, never through a symbolic link: 0 or -errno (-EEXIST: a file is there). */
int mt_rename_into_place(const char *tmp, const char *path, int overwrite);

/* Removes what a failed writer left at path, if it is a regular file: never a device
 * or a pipe that the output was pointed at (a stream to /dev/full, export -o). */
void mt_remove_output(const char *path);

#endif
