/* frames.h: which frames of a stack the views show by default (internal).
 *
 * A PyTorch snapshot's stack starts with a dozen frames that are in every stack (the
 * unwinder that took it, the caching allocator, the operator dispatcher's generated
 * wrappers) and runs through CPython's evaluation loop between the Python lines; a
 * view that prints frames innermost first never reaches the program's own code. The
 * views (the CLI's stacks, folded stacks, flame graphs, trace slices' names, the web
 * viewer) hide those frames unless asked for every frame; the file and the exports
 * that carry stacks whole (PyTorch snapshots, CSV) keep them all. The rules are
 * listed in docs/REPLAY.md; tests/snapshot/frames-cases.json holds the cases that
 * this and the web viewer's copy (web/format.js) both pass. */
#ifndef MEMTRACE_FRAMES_H
#define MEMTRACE_FRAMES_H
#include <stdint.h>

#include "memtrace_snapshot.h"

/* Why a frame is hidden, or MT_FRAME_SHOWN. */
enum mt_frame_kind {
    MT_FRAME_SHOWN = 0,
    MT_FRAME_CAPTURE,  /* taking the stack, and the allocator that asked for it */
    MT_FRAME_DISPATCH, /* PyTorch's operator dispatch: generated wrappers, boxing */
    MT_FRAME_INTERP,   /* CPython's own C functions between the Python frames */
    MT_FRAME_START,    /* process and thread start, below main */
    MT_FRAME_UNKNOWN,  /* nothing known: no symbol, file, module nor address */
    MT_FRAME_KINDS
};

/* The kind of fr (NULL: MT_FRAME_UNKNOWN). A frame of a Python file is always shown. */
int mt_frame_kind(const struct memtrace_frame *fr);

/* Whether fr is a frame of a Python file (its file ends in ".py"). */
int mt_frame_is_python(const struct memtrace_frame *fr);

/* The name of a kind ("shown", "capture", "dispatch", "interpreter", "start",
 * "unknown"), or NULL. */
const char *mt_frame_kind_name(int kind);

/* Reads stack's frame ids (innermost first) into *buf, growing it (and *cap) when it
 * is too small; returns how many, or -1 when it could not grow (then *buf holds the
 * first *cap of them). */
int mt_stack_frames(const struct memtrace_reader *r, uint32_t stack, uint32_t **buf, int *cap);

/* Keeps, in place and in order, the frames of ids[0 .. n) (a stack's frame ids, as
 * memtrace_reader_stack gives them) that are shown, and returns how many; where, when
 * not NULL, gets each kept frame's index in the whole stack. When no frame would be
 * shown, all are kept: a stack is never shown empty. */
int mt_stack_shown(const struct memtrace_reader *r, uint32_t *ids, int n, int *where);

/* The innermost frame of stack that names it in one line: its innermost Python frame
 * when it has one, else its innermost shown frame; 0 when the stack has none. */
uint32_t mt_stack_name_frame(const struct memtrace_reader *r, uint32_t stack);

#endif
