/* pickle.h: a safe reader and a small writer of Python pickles (internal).
 *
 * The reader turns a pickle of plain data (dicts, lists, tuples, str, int, float,
 * bool, None), protocols 2 to 5, into a jansson tree. It knows only the opcodes that
 * build such data; anything that would import a name or call one (GLOBAL,
 * STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, PERSID, BINPERSID,
 * EXT1/2/4) is refused by a scan of the whole input before anything is built, with
 * one error naming the opcode and its offset. Tuples read as arrays. Integers that
 * fit in int64 read as JSON integers; wider ones (LONG1/LONG4 up to 1024 bytes) read
 * as strings of decimal digits, exactly, so that a caller can take an address in
 * [2^63, 2^64) as a uint64 and refuse anything wider. Limits, against the input:
 * nesting depth MT_PICKLE_MAX_DEPTH, memo ids below the input's size, a container
 * may not be changed once it is inside another (which also rules out cycles).
 *
 * The writer emits protocol 4 with the same small set of opcodes, so that Python's
 * pickle module and MemoryViz's reader both load it. */
#ifndef MEMTRACE_PICKLE_H
#define MEMTRACE_PICKLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#define MT_PICKLE_MAX_DEPTH 64
#define MT_PICKLE_MAX_LONG  1024 /* bytes of a LONG4 integer */

struct mt_pickle_error {
    int code;        /* MEMTRACE_EFORMAT, MEMTRACE_ENOMEM */
    uint64_t offset; /* of the offending opcode */
    char text[160];
};

/* Reads the pickle in buf[0..len) into *out (a new reference). Returns 0, or
 * MEMTRACE_EFORMAT (refused, truncated or corrupt) or MEMTRACE_ENOMEM with err filled
 * and *out NULL. Nothing in the input is ever executed. */
int mt_pickle_load(const unsigned char *buf, size_t len, json_t **out, struct mt_pickle_error *err);

/* The writer. Containers nest up to 32 deep; lists are appended in batches of 1000 as
 * Python does. Errors of the stream are sticky: check mt_pkw_end(). */
struct mt_pkw {
    FILE *f;
    int depth;
    unsigned char kind[32]; /* 'd' dict, 'l' list, 't' tuple */
    uint32_t items[32];     /* items since the last MARK (lists) */
    uint32_t next_memo;
};

/* Starts a pickle on f (PROTO 4). */
void mt_pkw_begin(struct mt_pkw *w, FILE *f);
void mt_pkw_dict(struct mt_pkw *w);  /* a dict: then key, value, key, value ... */
void mt_pkw_list(struct mt_pkw *w);  /* a list */
void mt_pkw_tuple(struct mt_pkw *w); /* a tuple */
void mt_pkw_close(struct mt_pkw *w); /* ends the innermost container */
void mt_pkw_int(struct mt_pkw *w, int64_t v);
void mt_pkw_uint(struct mt_pkw *w, uint64_t v);
void mt_pkw_str(struct mt_pkw *w, const char *s);
void mt_pkw_bool(struct mt_pkw *w, int v);
void mt_pkw_none(struct mt_pkw *w);
void mt_pkw_float(struct mt_pkw *w, double v);
/* Memoizes the object just written (the value on top of the stack: a closed
 * container or a scalar) and returns its memo id. */
uint32_t mt_pkw_put(struct mt_pkw *w);
/* Writes the object memoized as id again (the same object, shared). */
void mt_pkw_get(struct mt_pkw *w, uint32_t id);
/* Writes STOP. 0, or MEMTRACE_EIO if f failed. */
int mt_pkw_end(struct mt_pkw *w);

#endif
