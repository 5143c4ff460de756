/* stack_py.h: the calling thread's CPython frames, read in-process without the GIL.
 *
 * When the process runs CPython (a shared libpython or an interpreter linked into
 * the executable), the interpreter's entry points and layout are found with dlsym
 * at first use, never by linking. A Python frame is interned as a token: a value
 * with the top bit set (no user-space return address has it) whose low bits are
 * the id of a (function, file, line) record, so stack.c interns mixed stacks of
 * tokens and return addresses alike and a repeated stack keeps one id.
 * docs/python.md says why the frames are read without the GIL and what that
 * relies on. */
#ifndef MEMTRACE_STACK_PY_H
#define MEMTRACE_STACK_PY_H

#include <stdint.h>

/* The module of every Python frame in a file. */
#define MT_PY_MODULE "python"

#define MT_PY_TAG ((uintptr_t)1 << (sizeof(uintptr_t) * 8 - 1))

static inline int mt_py_is_token(uintptr_t ip)
{
    return (ip & MT_PY_TAG) != 0;
}

/* The calling thread's Python frames, innermost first. end[i] is 1 where frame i is
 * the outermost of the frames one activation of the evaluation loop runs (the
 * frames that replace one native frame of the loop in a mixed stack). */
struct mt_py_stack {
    int n;
    uintptr_t tok[128];
    uint8_t end[128];
};

/* Fills st with the calling thread's Python frames (at most 128). Returns st->n: 0
 * when the process runs no supported CPython, the interpreter is not running (not
 * yet initialised, or finalising), or this thread has no Python frames. Until an
 * interpreter is found, one capture in 1024 of each thread looks for one loaded
 * since (docs/python.md). Never takes the GIL, never calls malloc; thread-safe. */
int mt_py_capture(struct mt_py_stack *st);

/* Splices py into native[0..n) (innermost first): each native frame inside the
 * interpreter's evaluation loop is replaced by the frames that activation runs;
 * frames of activations beyond the native frames go after them. Writes at most max
 * frames to out and returns how many. */
int mt_py_splice(const uintptr_t *native, int n, const struct mt_py_stack *py, uintptr_t *out,
                 int max);

/* The string ids (strtab.h) of a token's function and file, and its line. Returns
 * 0, or -1 for a value that is no token of this process. */
int mt_py_frame(uintptr_t token, uint32_t *function, uint32_t *file, uint32_t *line);

/* Status, for the metadata and the tests: 1 while frames can be read (a supported
 * interpreter was found), 0 otherwise; *version gets PY_VERSION_HEX when an
 * interpreter was found, 0 otherwise. Looks for the interpreter again when objects
 * were loaded since the last look and none was found yet. */
int mt_py_status(unsigned long *version);

/* A count that moves when mt_py_status's answer changes (an interpreter found
 * late), so that the metadata is written again. Reads one atomic. */
unsigned mt_py_generation(void);

/* In a forked child: re-initialises the lock. */
void mt_py_atfork_child(void);

#endif
