/* pickle.h: a safe reader and a small writer of Python pickles (internal).
 *
 * The reader turns a pickle of plain data (dicts, lists, tuples, str, int, float,
 * bool, None), protocols 2 to 5, into a tree of its own small values (struct mt_pv),
 * or into a jansson tree. It knows only the opcodes that build such data; anything
 * that would import a name or call one (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST,
 * OBJ, NEWOBJ, NEWOBJ_EX, PERSID, BINPERSID, EXT1/2/4) is refused by a scan of the
 * whole input before anything is built, with one error naming the opcode and its
 * offset (a streaming read may skip the scan: opts->one_pass). Tuples read as lists.
 * Integers that fit in int64 read as integers; wider ones (LONG1/LONG4 up to 1024
 * bytes) keep their bytes (MT_PV_BIG), and read as strings of decimal digits in
 * jansson, exactly, so that a caller can take an address in [2^63, 2^64) as a uint64
 * and refuse anything wider. Limits, against the input:
 * nesting depth MT_PICKLE_MAX_DEPTH, memo ids below the input's size, a container
 * may not be changed once it is inside another (which also rules out cycles).
 *
 * A caller may stream: the items of each list inside root[key] (PyTorch's
 * device_traces) are handed to a callback as they are appended, complete and frozen,
 * and are then dropped instead of kept, so memory holds the rest of the tree and the
 * memoized objects that are fetched again, not the entries.
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

/* The reader's values. Strings (MT_PV_STR: u.s, n bytes, valid UTF-8, not
 * NUL-terminated) and wide integers (MT_PV_BIG: u.s, n bytes of little-endian two's
 * complement) point into the input, which must outlive the tree. Dicts and lists are
 * reference-counted boxes; a dict's items are key, value, key, value ... in the
 * order set, a key set twice keeps both pairs and the later one wins (mt_pv_get). */
enum mt_pv_type {
    MT_PV_NONE,
    MT_PV_BOOL,
    MT_PV_INT,
    MT_PV_FLOAT,
    MT_PV_STR,
    MT_PV_BIG,
    MT_PV_DICT,
    MT_PV_LIST,
};

struct mt_pbox;

struct mt_pv {
    uint8_t type;
    uint32_t n;
    union {
        int64_t i; /* INT, BOOL */
        double d;
        const char *s;
        struct mt_pbox *c;
    } u;
};

struct mt_pbox {
    size_t refs;
    size_t n, cap; /* items */
    struct mt_pv *items;
    uint64_t memo;   /* the caller's, 0 until it sets it (the box never changes after) */
    size_t streamed; /* items handed to the stream callback */
    int32_t index;   /* the reader's own bookkeeping from here */
    uint32_t adopted;
    uint8_t kind, frozen, role, height, shared, item, run;
};

/* How a read streams; all fields may be 0. */
struct mt_pickle_opts {
    const char *key; /* stream the items of each list in root[key] ... */
    /* ... to this: list is the index in root[key], k the item's index in that list.
     * Non-zero gives up the streaming read (mt_pickle_read returns MT_PICKLE_AGAIN). */
    int (*item)(void *ctx, int32_t list, size_t k, const struct mt_pv *v);
    void *ctx;
    int drop_behind; /* buf is a page-aligned read-only file mapping: pages read are
                        given back as the reader goes (madvise), to keep RSS small */
    /* Streaming only: read in one pass, without the scan. The memo then keeps every
     * value put but the streamed items and the lists put while one is on the stack
     * (PyTorch's entries and their frames lists), and the read gives up, returning
     * MT_PICKLE_AGAIN, at anything else: a fetch of a value not kept, too many kept,
     * an opcode not ours, any error. Read again without it for the scan, which
     * refuses what it must before anything is built, and for the error's text. */
    int one_pass;
};

/* Returned by mt_pickle_read when the streaming read cannot stand: the input does not
 * have the shape streaming foresaw (root[key] a list of lists, each in it once), or
 * the callback gave up. Nothing of the tree is returned; read again without opts->item
 * for the whole tree. */
#define MT_PICKLE_AGAIN 1

/* Reads the pickle in buf[0..len) into *out (owning one reference): 0, MT_PICKLE_AGAIN,
 * or MEMTRACE_EFORMAT (refused, truncated or corrupt) or MEMTRACE_ENOMEM with err
 * filled and *out NONE. Nothing in the input is ever executed. With opts->item the
 * streamed items are missing from the lists of root[key] in *out. */
int mt_pickle_read(const unsigned char *buf, size_t len, const struct mt_pickle_opts *opts,
                   struct mt_pv *out, struct mt_pickle_error *err);

/* Reads the pickle in buf[0..len) into *out (a new reference), as mt_pickle_read
 * without streaming, as a jansson tree. */
int mt_pickle_load(const unsigned char *buf, size_t len, json_t **out, struct mt_pickle_error *err);

/* Drops one reference of v (and what only it held); v becomes NONE. */
void mt_pv_release(struct mt_pv *v);
/* The value of key in dict v (the last pair set), NULL if absent or v is no dict. Keys
 * compare as C strings (up to a NUL), as jansson keeps them. */
const struct mt_pv *mt_pv_get(const struct mt_pv *v, const char *key);
/* The items of list v (0 if v is not a list), item k. */
size_t mt_pv_len(const struct mt_pv *v);
const struct mt_pv *mt_pv_at(const struct mt_pv *v, size_t k);
/* Bytes of the string v up to a NUL (*n), NULL if v is no string. */
const char *mt_pv_str(const struct mt_pv *v, size_t *n);
/* v as a jansson tree (a new reference, NULL when out of memory): wide integers as
 * their decimal text, integer keys as theirs. */
json_t *mt_pv_to_json(const struct mt_pv *v);
/* The same for dict v less its keys in skip (NULL-terminated). */
json_t *mt_pv_to_json_without(const struct mt_pv *v, const char *const *skip);
/* A jansson tree as values: strings point into j, which must outlive *out. 0 or
 * MEMTRACE_ENOMEM. */
int mt_pv_from_json(json_t *j, struct mt_pv *out);
/* The decimal text of the wide integer v into buf (at least MT_PICKLE_MAX_LONG * 3 + 3
 * bytes). */
void mt_pv_big_text(const struct mt_pv *v, char *buf);

/* The writer. Containers nest up to 32 deep; lists are appended in batches of 1000 as
 * Python does. Errors of the stream are sticky: check mt_pkw_end(). Only the thread
 * that writes the pickle may write its FILE meanwhile: bytes go in without the
 * stream's lock. */
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
