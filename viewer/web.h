/* web.h: the web viewer's files for `memtrace html` and `memtrace view`: their one
 * list, where they are (the source tree for a binary run from its build tree, else
 * the installed package data directory), and reading them. */
#ifndef MEMTRACE_VIEWER_WEB_H
#define MEMTRACE_VIEWER_WEB_H

#include <stddef.h>
#include <stdio.h>

/* The files the viewer's page is made of, NULL-terminated; index.html first. Only
 * these are ever read from the viewer's directory. */
extern const char *const cli_web_files[];

/* Whether name is one of cli_web_files. */
int cli_web_known(const char *name);

/* Writes the viewer's directory into out: $MEMTRACE_WEB_DIR when set, the source
 * tree's web/ when this binary runs from its build tree, else the installed one.
 * Returns 0, or -1 having reported that index.html is not there. */
int cli_web_dir(char *out, size_t size);

/* Writes dir/name into out. Returns 0, or -1 having reported a path too long. */
int cli_web_path(char *out, size_t size, const char *dir, const char *name);

/* Reads the whole file path into a malloc'd, NUL-terminated buffer (*len bytes
 * without the NUL). Returns 0, or -1 having reported why. */
int cli_read_all(const char *path, char **data, size_t *len);

/* Whether the viewer can open the file f (of path), by its first bytes: a .memtrace
 * file, a pickle or JSON. Returns 0 with f rewound, or -1 having said why not. */
int cli_web_check_kind(const char *path, FILE *f);

/* cli_web_check_kind on each of paths[0..n), opened in turn: 0, or -1 having said
 * which one the viewer cannot open (or that it cannot be read). */
int cli_web_check_files(char **paths, int n);

/* The Content-Type of a file by its name's ending. */
const char *cli_web_type(const char *name);

#endif
