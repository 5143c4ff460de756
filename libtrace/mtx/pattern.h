/* pattern.h: %-patterns in file names, expanded one way everywhere: the preload's
 * output path (%p %r %h), `memtrace run`'s search for the files it wrote (the same
 * pattern as a glob) and the allocator's out-of-memory snapshot path (%p %d %n).
 * No stdio and no malloc: the preload expands its path inside an interposed call. */
#ifndef MEMTRACE_MTX_PATTERN_H
#define MEMTRACE_MTX_PATTERN_H

#include <stddef.h>

/* %key in a pattern stands for value. */
struct mtx_pattern_var {
    char key;
    const char *value;
};

/* Expands pattern into out (size bytes; NUL-terminated whenever size > 0): %X, for X
 * a key of vars[0..nvars), becomes its value and %% a percent sign. With strict set,
 * an unknown %-sequence, a % at the end and a result that does not fit are errors;
 * without, they are copied as they are and the result is cut to fit. Returns the
 * length written, or -1 on an error. */
int mtx_pattern_expand(char *out, size_t size, const char *pattern,
                       const struct mtx_pattern_var *vars, size_t nvars, int strict);

/* The host name for %h ("localhost" when it cannot be read). */
void mtx_hostname(char *out, size_t size);

/* The output pattern's path for process pid: %p the pid, %r the rank (mtx_rank, 0
 * when none is set), %h the host, %% a percent sign. 0, or -1 for an unknown
 * %-sequence, an empty result or one that does not fit. */
int mtx_output_path(char *out, size_t size, const char *pattern, int pid);

/* The output pattern as a glob that matches what mtx_output_path writes on this
 * host, with this process's rank, for any pid: %p becomes *, %r the rank as
 * mtx_output_path writes it. The processes of one `memtrace run` share its rank; the
 * other ranks of an MPI job, writing beside them, are not theirs. Cut to fit. */
void mtx_output_glob(char *out, size_t size, const char *pattern);

#endif
