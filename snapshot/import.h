/* import.h: bringing other formats into .memtrace files (internal).
 *
 * mt_import_pytorch() reads a PyTorch memory snapshot (the dict that
 * torch.cuda.memory._snapshot() returns, as a pickle or as JSON) and writes it as a
 * .memtrace file; docs/PYTORCH.md gives the mapping. The interner beneath it turns
 * strings, frames and stacks from anywhere (a snapshot, or other .memtrace files being
 * merged) into the table ids of one output file, and writes the entries that are new
 * before the events that use them. */
#ifndef MEMTRACE_IMPORT_H
#define MEMTRACE_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "before.h"
#include "memtrace_snapshot.h"
#include "writer.h"

struct mt_itab {
    uint64_t *hash;
    uint32_t *id;
    size_t cap, n;
};

struct mt_intern {
    char **str; /* by id - 1 */
    size_t nstr, capstr, wstr;
    struct mt_frame_rec *frame;
    size_t nframe, capframe, wframe;
    uint32_t *parent, *pframe;
    size_t nstack, capstack, wstack;
    struct mt_itab tstr, tframe, tstack;
    int nomem;
};

void mt_intern_init(struct mt_intern *in);
void mt_intern_free(struct mt_intern *in);

/* Ids in the output file (0 for "" and on exhausted memory, which sets in->nomem). */
uint32_t mt_intern_string(struct mt_intern *in, const char *s);
/* The same for the n bytes at s (no NUL among them). */
uint32_t mt_intern_stringn(struct mt_intern *in, const char *s, size_t n);
uint32_t mt_intern_frame(struct mt_intern *in, const struct mt_frame_rec *f);
/* The node (parent, frame): parent 0 is the root. */
uint32_t mt_intern_stack(struct mt_intern *in, uint32_t parent, uint32_t frame);

/* Writes the entries interned since the last flush. 0 or the writer's error;
 * MEMTRACE_ENOMEM if interning ran out of memory. */
int mt_intern_flush(struct mt_intern *in, struct mt_writer *w);

/* What an import found, for the caller's report. */
struct mt_import_stats {
    uint64_t events;   /* events written */
    uint64_t skipped;  /* trace entries with an action memtrace does not know */
    uint64_t segments; /* segments in the state */
    uint64_t blocks;   /* blocks in the state */
    uint64_t devices;  /* device traces */
    uint64_t before_segments, before_blocks; /* live before the trace began (rule 0) */
    uint64_t before_dropped; /* blocks live before it in no known segment: left out */
    int pickle;              /* the input was a pickle (else JSON) */
};

/* Imports the snapshot at in_path into a new .memtrace file at out_path, created as
 * mt_writer_open() does with writer_flags (MT_WRITER_ATOMIC is always added). A
 * pickle is mapped and streamed: memory holds a compact record per trace entry (the
 * metadata, written first, needs all of them seen) and the rest of the snapshot, not
 * the entries; JSON is read whole. Returns 0, or a negative MEMTRACE_E* code with
 * err->text one line naming the file and the problem. */
int mt_import_pytorch(const char *in_path, const char *out_path, unsigned writer_flags,
                      struct mt_import_stats *st, struct memtrace_errinfo *err);

/* What a merge did. */
struct mt_merge_stats {
    uint64_t events;
    int renumbered;             /* devices were renumbered (else kept) */
    int aligned;                /* times were aligned by the files' wall clocks */
    size_t truncated;           /* inputs that ended without their end record */
    const char *truncated_path; /* the first of them (one of paths), or NULL */
};

/* Merges the .memtrace files paths[0..n) into one at out_path: events interleaved by
 * time (wall clock where every file's metadata has one), devices kept when the files
 * use disjoint device numbers and carry distinct ranks, else renumbered file after
 * file (in rank order where every file has a rank, else in the order given), the
 * final states joined, and the metadata listing the sources and their device maps.
 * Each input is read twice as a stream. Returns 0 or a negative MEMTRACE_E* code with
 * err->text filled. */
int mt_merge(const char *const *paths, size_t n, const char *out_path, unsigned writer_flags,
             struct mt_merge_stats *st, struct memtrace_errinfo *err);

#endif
