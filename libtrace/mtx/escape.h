/* escape.h: one policy for strings that come from a recorded program or a file (frame
 * names, paths, argv, host names): every byte that could act on a terminal or is not
 * UTF-8 (C0 and C1 control characters, DEL, stray bytes) becomes the text \xNN, and a
 * backslash \\, so what is shown is what was recorded. With json set, only what is
 * not UTF-8 is escaped: JSON escapes control characters itself, and a string that is
 * not UTF-8 would otherwise be refused by jansson and lost. */
#ifndef MEMTRACE_MTX_ESCAPE_H
#define MEMTRACE_MTX_ESCAPE_H

#include <stddef.h>

/* Calls put(ctx, piece, len) for s in order, escaped. */
void mtx_escape(const char *s, int json, void (*put)(void *ctx, const char *p, size_t n),
                void *ctx);

/* s escaped, in a malloc'd string; NULL without memory. */
char *mtx_escape_dup(const char *s, int json);

#endif
