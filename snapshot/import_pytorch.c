/* import_pytorch.c: a PyTorch memory snapshot into a .memtrace file.
 *
 * The snapshot is one dict (or, from the oldest PyTorch, a bare list of segments):
 * `segments` become the STATE chunk written after all events (they describe the
 * allocator when the snapshot was taken), `device_traces[d]` become events of device
 * d, merged across devices by time so that each device keeps its own order, and
 * `external_annotations` become annotate events in the same merge. Every frames list
 * (innermost first) becomes a stack of frames (filename -> file, line, name ->
 * symbol). allocator_settings goes to the metadata under its own key; every other
 * top-level key is kept in the metadata under "pytorch_snapshot". docs/PYTORCH.md
 * has the whole mapping.
 *
 * A pickle is mapped, not read, and streamed: each trace entry becomes a compact
 * record (varints, deltas: about 20 bytes) as soon as the reader has it and is then
 * freed. The records wait for the end of the input because the metadata, written
 * first, needs the first time and the top-level keys that follow the traces; then
 * the lists merge by time as they always did. Frames are interned once per memoized
 * frame dict (its box remembers its id) and stacks once per sequence of frame ids.
 * The reading thread turns each entry into an event; a second thread (struct back)
 * keeps the records, finds what was live before the trace and, where no merge turns
 * out to be needed (struct spec), also writes the events into memory as they stream,
 * whose chunks are then used. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "import.h"
#include "memtrace.h"
#include "pickle.h"

/* The compact records of one list (a device trace, or the annotations). */
struct clist {
    unsigned char *buf;
    size_t len, cap;
    uint64_t prev_t, prev_addr; /* deltas against these */
};

/* Stacks by their sequence of frame ids (outermost first): the ids live in seq. */
struct seqtab {
    uint64_t *hash;
    uint32_t *off, *len, *stack; /* slot: 0 len = empty */
    size_t cap, n;
    uint32_t *seq;
    size_t nseq, capseq;
};

/* Memos keyed by the address of a string in the input (memoized strings recur at
 * one address): which field a key names, which action a name is. */
struct pcache {
    const char *p[256];
    uint32_t n[256];
    int v[256];
};

struct imp {
    const char *path;
    struct memtrace_errinfo *err;
    struct mt_intern in;
    struct mt_writer *w;
    struct mt_import_stats *st;
    uint64_t t0, t1;
    struct seqtab seqs;
    uint32_t *fids;
    size_t capfids;
    struct back *back; /* the thread keeping the records while streaming, or NULL */
    struct pcache keys, actions;
    /* Kept by the second thread while it runs (keep_rec), apart from what the reading
     * thread changes at every entry above: a line both write goes back and forth. */
    struct clist *lists; /* by device */
    size_t nlists;
    struct clist annots;
    struct spec *spec;        /* the events written ahead while streaming, or NULL */
    struct mt_before *before; /* what the trace shows was live before it */
    struct memtrace_event batch[4096];
    size_t nbatch;
};

/* The events of device 0, written ahead while the pickle streams: encoding and
 * deflating them, the costly part of writing, then run on the second thread (struct
 * back) alongside the reading, into memory, since the metadata that goes first is
 * known only at the end. Used when the snapshot turns out to need no merge (one
 * device trace, no annotations), dropped otherwise for the records. */
#define SPEC_BATCH 4096
struct spec {
    struct mt_writer *mem;
    struct memtrace_event batch[SPEC_BATCH];
    size_t n;
    uint64_t events;
};

/* An entry as the reading thread hands it to the second one: its event (unless it is
 * skipped), the merge time and the device. */
struct rec {
    struct memtrace_event ev;
    uint64_t mt;
    int32_t d;
    int skip;
};

/* The second thread of a streamed import. The reading thread turns each entry into
 * a record (the part that reads the entry's tree, and interns its frames and
 * strings, in order) and hands records over in batches; the thread keeps them in
 * their lists, finds what was live before the trace and writes the events ahead
 * (struct spec). Only batches of plain records written in order and read in order
 * go between the two: a tree's boxes, shared from entry to entry and counted without
 * atomics, would go back and forth between the two cores at every entry. At most
 * BACK_QUEUE batches wait; the first error (out of memory) is kept and the records
 * after it are dropped. */
#define BACK_BATCH 2048
#define BACK_QUEUE 4

struct rbatch {
    struct rbatch *next;
    size_t n;
    struct rec r[BACK_BATCH];
};

struct back {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;        /* a batch queued, one done, or the end asked */
    struct rbatch *head, *tail; /* queued */
    struct rbatch *pool;        /* done, to fill again */
    struct rbatch *cur;         /* the reading thread's */
    size_t queued;              /* batches queued or running */
    int ending, rc;
    atomic_int failed; /* rc != 0, for the reading thread */
    struct imp *im;
};

static int ifail(struct imp *im, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The error is one line: control characters that came from the snapshot (a block
 * state, a JSON token) become \xNN text, so they can neither end the line nor act on
 * a terminal. */
static int ifail(struct imp *im, int code, const char *fmt, ...)
{
    if (im->err && im->err->code == 0) {
        char raw[sizeof(im->err->text)];
        im->err->code = code;
        int n = snprintf(raw, sizeof(raw), "%s: ", im->path);
        if (n < 0 || (size_t)n >= sizeof(raw))
            n = 0;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw + n, sizeof(raw) - (size_t)n, fmt, ap);
        va_end(ap);
        char *t = im->err->text, *end = t + sizeof(im->err->text) - 1;
        for (const unsigned char *p = (const unsigned char *)raw; *p && t < end; p++) {
            if (*p >= 0x20 && *p != 0x7f) {
                *t++ = (char)*p;
            } else if (end - t >= 4) {
                snprintf(t, 5, "\\x%02x", *p);
                t += 4;
            } else {
                break;
            }
        }
        *t = 0;
    }
    return code;
}

enum { U_OK, U_NEG, U_NOTNN, U_NOTINT, U_WIDE };

/* An unsigned value: an integer >= 0, a wide integer or a string of decimal digits
 * that fits 64 bits (as the pickle reader once made of wide integers), a float in
 * range. Absent or None: dflt. Returns U_OK or what is wrong. */
static int u64_of(const struct mt_pv *v, uint64_t dflt, uint64_t *out)
{
    *out = dflt;
    if (!v || v->type == MT_PV_NONE)
        return U_OK;
    if (v->type == MT_PV_INT) {
        if (v->u.i < 0)
            return U_NEG;
        *out = (uint64_t)v->u.i;
        return U_OK;
    }
    if (v->type == MT_PV_BIG) {
        const unsigned char *p = (const unsigned char *)v->u.s;
        if (p[v->n - 1] & 0x80)
            return U_NOTNN;
        for (size_t k = 8; k < v->n; k++)
            if (p[k])
                return U_WIDE;
        uint64_t u = 0;
        for (size_t k = v->n < 8 ? v->n : 8; k-- > 0;)
            u = u << 8 | p[k];
        *out = u;
        return U_OK;
    }
    size_t n;
    const char *s = mt_pv_str(v, &n);
    if (s) {
        uint64_t u = 0;
        if (!n || *s == '-')
            return U_NOTNN;
        for (size_t k = 0; k < n; k++) {
            if (s[k] < '0' || s[k] > '9')
                return U_NOTINT;
            unsigned d = (unsigned)(s[k] - '0');
            if (u > (UINT64_MAX - d) / 10)
                return U_WIDE;
            u = u * 10 + d;
        }
        *out = u;
        return U_OK;
    }
    if (v->type == MT_PV_FLOAT && v->u.d >= 0 && v->u.d < 1.8e19) {
        *out = (uint64_t)v->u.d;
        return U_OK;
    }
    return U_NOTINT;
}

static int u64_fail(struct imp *im, int why, const char *what, const char *key)
{
    switch (why) {
    case U_NEG:
        return ifail(im, MEMTRACE_EFORMAT, "%s: '%s' is negative", what, key);
    case U_NOTNN:
        return ifail(im, MEMTRACE_EFORMAT, "%s: '%s' is not a non-negative integer", what, key);
    case U_WIDE:
        return ifail(im, MEMTRACE_EFORMAT,
                     "%s: '%s' is wider than 64 bits, which memtrace cannot hold", what, key);
    default:
        return ifail(im, MEMTRACE_EFORMAT, "%s: '%s' is not an integer", what, key);
    }
}

/* An unsigned field of dict o (absent: dflt), failing with the error named after
 * what. */
static int get_u64(struct imp *im, const struct mt_pv *o, const char *key, uint64_t dflt,
                   uint64_t *out, const char *what)
{
    int why = u64_of(mt_pv_get(o, key), dflt, out);
    return why ? u64_fail(im, why, what, key) : 0;
}

static int get_i32(struct imp *im, const struct mt_pv *o, const char *key, int32_t *out,
                   const char *what)
{
    const struct mt_pv *v = mt_pv_get(o, key);
    if (!v)
        return 0;
    if (v->type != MT_PV_INT || v->u.i < INT32_MIN || v->u.i > INT32_MAX)
        return ifail(im, MEMTRACE_EFORMAT, "%s: '%s' is not a small integer", what, key);
    *out = (int32_t)v->u.i;
    return 0;
}

/* The string at key (up to a NUL; "" when absent or not a string). */
static const char *get_str(const struct mt_pv *o, const char *key, size_t *n)
{
    const char *s = mt_pv_str(mt_pv_get(o, key), n);
    if (!s) {
        *n = 0;
        return "";
    }
    return s;
}

static int str_eq(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* The cached value of the string v (a memo by address), or -2 when not yet known. */
static int *pcache_slot(struct pcache *c, const struct mt_pv *v, int *hit)
{
    size_t h = ((uintptr_t)v->u.s >> 3 ^ (uintptr_t)v->u.s >> 11) & 255;
    *hit = c->p[h] == v->u.s && c->n[h] == v->n;
    c->p[h] = v->u.s;
    c->n[h] = v->n;
    return &c->v[h];
}

/* Frames and stacks. */

static uint32_t frame_of(struct imp *im, const struct mt_pv *f)
{
    struct mt_pbox *b = f->u.c;
    if (b->memo)
        return (uint32_t)(b->memo - 1);
    struct mt_frame_rec rec;
    memset(&rec, 0, sizeof(rec));
    size_t n;
    const char *s = get_str(f, "name", &n);
    rec.symbol = mt_intern_stringn(&im->in, s, n);
    s = get_str(f, "filename", &n);
    rec.file = mt_intern_stringn(&im->in, s, n);
    const struct mt_pv *line = mt_pv_get(f, "line");
    if (line && line->type == MT_PV_INT && line->u.i > 0 && line->u.i <= UINT32_MAX)
        rec.line = (uint32_t)line->u.i;
    uint32_t id = mt_intern_frame(&im->in, &rec);
    if (!im->in.nomem)
        b->memo = (uint64_t)id + 1;
    return id;
}

static uint64_t hash_seq(const uint32_t *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (size_t k = 0; k < n; k++) {
        h = (h ^ s[k]) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    return h ? h : 1;
}

/* The slot of the sequence s[0..n) with hash h, or of the empty slot for it. */
static size_t seq_slot(const struct seqtab *t, const uint32_t *s, size_t n, uint64_t h)
{
    size_t mask = t->cap - 1, i = (size_t)h & mask;
    while (t->len[i] && !(t->hash[i] == h && t->len[i] == n &&
                          memcmp(t->seq + t->off[i], s, n * sizeof(*s)) == 0))
        i = (i + 1) & mask;
    return i;
}

static int seq_grow(struct seqtab *t)
{
    struct seqtab g = *t;
    g.cap = t->cap ? t->cap * 2 : 1024;
    g.hash = calloc(g.cap, sizeof(*g.hash));
    g.off = calloc(g.cap, sizeof(*g.off));
    g.len = calloc(g.cap, sizeof(*g.len));
    g.stack = calloc(g.cap, sizeof(*g.stack));
    if (!g.hash || !g.off || !g.len || !g.stack) {
        free(g.hash);
        free(g.off);
        free(g.len);
        free(g.stack);
        return -1;
    }
    for (size_t k = 0; k < t->cap; k++)
        if (t->len[k]) {
            size_t i = (size_t)t->hash[k] & (g.cap - 1);
            while (g.len[i])
                i = (i + 1) & (g.cap - 1);
            g.hash[i] = t->hash[k];
            g.off[i] = t->off[k];
            g.len[i] = t->len[k];
            g.stack[i] = t->stack[k];
        }
    free(t->hash);
    free(t->off);
    free(t->len);
    free(t->stack);
    *t = g;
    return 0;
}

static void seq_free(struct seqtab *t)
{
    free(t->hash);
    free(t->off);
    free(t->len);
    free(t->stack);
    free(t->seq);
    memset(t, 0, sizeof(*t));
}

/* Sequences kept at most (frame ids): past it, stacks are found frame by frame. */
#define SEQ_MAX (4u << 20)

/* The stack of a frames list (innermost first), 0 for none. */
static uint32_t stack_of(struct imp *im, const struct mt_pv *frames)
{
    if (!frames || frames->type != MT_PV_LIST)
        return 0;
    struct mt_pbox *b = frames->u.c;
    if (b->memo)
        return (uint32_t)(b->memo - 1);
    if (b->n > im->capfids) {
        uint32_t *f = realloc(im->fids, b->n * sizeof(*f));
        if (!f) {
            im->in.nomem = 1;
            return 0;
        }
        im->fids = f;
        im->capfids = b->n;
    }
    size_t n = 0;
    for (size_t k = b->n; k-- > 0;)
        if (b->items[k].type == MT_PV_DICT)
            im->fids[n++] = frame_of(im, &b->items[k]);
    if (n == 0)
        return 0;
    struct seqtab *t = &im->seqs;
    uint64_t h = hash_seq(im->fids, n);
    size_t i = 0;
    int cached = n <= UINT32_MAX && t->nseq + n <= SEQ_MAX;
    if (cached && (t->n + 1) * 4 > t->cap * 3 && seq_grow(t) != 0)
        cached = 0;
    if (cached) {
        i = seq_slot(t, im->fids, n, h);
        if (t->len[i]) {
            b->memo = (uint64_t)t->stack[i] + 1;
            return t->stack[i];
        }
    }
    uint32_t parent = 0;
    for (size_t k = 0; k < n; k++)
        parent = mt_intern_stack(&im->in, parent, im->fids[k]);
    if (im->in.nomem)
        return 0;
    if (cached && t->nseq + n > t->capseq) {
        size_t cap = t->capseq ? t->capseq : 4096;
        while (cap < t->nseq + n)
            cap *= 2;
        uint32_t *s = realloc(t->seq, cap * sizeof(*s));
        if (!s)
            cached = 0;
        else {
            t->seq = s;
            t->capseq = cap;
        }
    }
    if (cached) {
        memcpy(t->seq + t->nseq, im->fids, n * sizeof(*im->fids));
        t->hash[i] = h;
        t->off[i] = (uint32_t)t->nseq;
        t->len[i] = (uint32_t)n;
        t->stack[i] = parent;
        t->nseq += n;
        t->n++;
    }
    b->memo = (uint64_t)parent + 1;
    return parent;
}

/* Compact records. Each: a flags byte, the merge time as a zigzag delta, then for an
 * event the action, the time in ns when it is not merge time * 1000, and the fields
 * as varints (the address as a zigzag delta). */
enum { R_SKIP = 1, R_TIME = 2 };

static void put_var(unsigned char **p, uint64_t v)
{
    while (v >= 0x80) {
        *(*p)++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *(*p)++ = (unsigned char)v;
}

static uint64_t get_var(const unsigned char **p)
{
    uint64_t v = 0;
    for (int s = 0;; s += 7) {
        unsigned char b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80))
            return v;
    }
}

static uint64_t zz(uint64_t d)
{
    return (d << 1) ^ (uint64_t) - (int64_t)(d >> 63);
}

static uint64_t unzz(uint64_t z)
{
    return (z >> 1) ^ (uint64_t) - (int64_t)(z & 1);
}

/* Appends a record: ev NULL for an entry that is skipped. 0 or MEMTRACE_ENOMEM. */
static int put_record(struct clist *l, uint64_t mt, const struct memtrace_event *ev)
{
    if (l->cap - l->len < 128) {
        size_t cap = l->cap ? l->cap * 2 : 4096;
        unsigned char *b = realloc(l->buf, cap);
        if (!b)
            return MEMTRACE_ENOMEM;
        l->buf = b;
        l->cap = cap;
    }
    unsigned char *p = l->buf + l->len;
    int timed = ev && ev->time_ns != mt * 1000;
    *p++ = (unsigned char)((ev ? 0 : R_SKIP) | (timed ? R_TIME : 0));
    put_var(&p, zz(mt - l->prev_t));
    l->prev_t = mt;
    if (ev) {
        *p++ = ev->action;
        if (timed)
            put_var(&p, ev->time_ns);
        put_var(&p, zz(ev->addr - l->prev_addr));
        l->prev_addr = ev->addr;
        put_var(&p, ev->size);
        put_var(&p, ev->requested_size);
        put_var(&p, ev->stream);
        put_var(&p, ev->aux);
        put_var(&p, zz((uint64_t)(int64_t)ev->device));
        put_var(&p, zz((uint64_t)(int64_t)ev->pool));
        put_var(&p, ev->stack);
        put_var(&p, ev->category);
    }
    l->len = (size_t)(p - l->buf);
    return 0;
}

/* A reader of one list's records. */
struct cursor {
    const unsigned char *p, *end;
    uint64_t t, addr;
    int skip;
    struct memtrace_event ev;
};

static void cursor_next(struct cursor *c)
{
    unsigned flags = *c->p++;
    c->t += unzz(get_var(&c->p));
    c->skip = flags & R_SKIP;
    if (c->skip)
        return;
    memset(&c->ev, 0, sizeof(c->ev));
    c->ev.action = *c->p++;
    c->ev.time_ns = flags & R_TIME ? get_var(&c->p) : c->t * 1000;
    c->addr += unzz(get_var(&c->p));
    c->ev.addr = c->addr;
    c->ev.size = get_var(&c->p);
    c->ev.requested_size = get_var(&c->p);
    c->ev.stream = get_var(&c->p);
    c->ev.aux = get_var(&c->p);
    c->ev.device = (int32_t)(int64_t)unzz(get_var(&c->p));
    c->ev.pool = (int32_t)(int64_t)unzz(get_var(&c->p));
    c->ev.stack = (uint32_t)get_var(&c->p);
    c->ev.category = (uint32_t)get_var(&c->p);
}

static int flush_events(struct imp *im)
{
    if (!im->nbatch)
        return 0;
    int rc = mt_intern_flush(&im->in, im->w);
    if (rc == 0)
        rc = mt_writer_events(im->w, im->batch, im->nbatch);
    if (rc)
        return ifail(im, rc, "cannot write the output: %s", mt_writer_strerror(rc));
    im->st->events += im->nbatch;
    im->nbatch = 0;
    return 0;
}

static int add_event(struct imp *im, const struct memtrace_event *ev)
{
    im->batch[im->nbatch++] = *ev;
    return im->nbatch == sizeof(im->batch) / sizeof(im->batch[0]) ? flush_events(im) : 0;
}

static void spec_drop(struct imp *im)
{
    if (im->spec) {
        mt_writer_abort(im->spec->mem);
        free(im->spec);
        im->spec = NULL;
    }
}

static void spec_start(struct imp *im)
{
    spec_drop(im);
    struct spec *sp = calloc(1, sizeof(*sp));
    if (sp && mt_writer_open_mem(&sp->mem) != 0) {
        free(sp);
        sp = NULL;
    }
    im->spec = sp; /* without it, the records do */
}

/* Writes the batch. The tables are not: they are all written at the end, before
 * the state before the first event and these events (write_ahead). */
static int spec_flush(struct imp *im)
{
    struct spec *sp = im->spec;
    int rc = sp->n ? mt_writer_events(sp->mem, sp->batch, sp->n) : 0;
    sp->events += sp->n;
    sp->n = 0;
    if (rc)
        spec_drop(im);
    return rc;
}

/* An event of device d in file order, for the events written ahead. */
static void spec_add(struct imp *im, int32_t d, const struct memtrace_event *ev)
{
    if (!im->spec)
        return;
    if (d != 0) {
        spec_drop(im); /* a merge of devices: the records do */
        return;
    }
    im->spec->batch[im->spec->n++] = *ev;
    if (im->spec->n == SPEC_BATCH)
        spec_flush(im);
}

/* The entry's time in us for the merge (entries without one sort as 0). */
static uint64_t entry_time(const struct mt_pv *e)
{
    const struct mt_pv *t = mt_pv_get(e, "time_us");
    return t && t->type == MT_PV_INT && t->u.i > 0 ? (uint64_t)t->u.i : 0;
}

enum { K_ACTION, K_ADDR, K_SIZE, K_REQ, K_STREAM, K_TIME, K_FREE, K_FRAMES, K_CC, K_N };
static const char *const key_name[K_N] = {"action",         "addr",   "size",
                                          "requested_size", "stream", "time_us",
                                          "device_free",    "frames", "compile_context"};

/* Which of key_name the key k is, or -1. */
static int key_of(struct imp *im, const struct mt_pv *k)
{
    if (k->type != MT_PV_STR)
        return -1;
    int hit;
    int *v = pcache_slot(&im->keys, k, &hit);
    if (!hit) {
        size_t n;
        const char *s = mt_pv_str(k, &n);
        *v = -1;
        for (int f = 0; f < K_N; f++)
            if (str_eq(s, n, key_name[f]))
                *v = f;
    }
    return *v;
}

static int action_of(struct imp *im, const struct mt_pv *a)
{
    if (a->type != MT_PV_STR)
        return memtrace_action_from_name("");
    int hit;
    int *v = pcache_slot(&im->actions, a, &hit);
    if (!hit) {
        size_t n;
        const char *s = mt_pv_str(a, &n);
        char name[32];
        if (n < sizeof(name)) {
            memcpy(name, s, n);
            name[n] = '\0';
            *v = memtrace_action_from_name(name);
        } else
            *v = -1;
    }
    return *v;
}

static struct clist *list_of(struct imp *im, int32_t d)
{
    if ((size_t)d >= im->nlists) {
        size_t n = im->nlists ? im->nlists : 4;
        while (n <= (size_t)d)
            n *= 2;
        struct clist *l = realloc(im->lists, n * sizeof(*l));
        if (!l)
            return NULL;
        memset(l + im->nlists, 0, (n - im->nlists) * sizeof(*l));
        im->lists = l;
        im->nlists = n;
    }
    return &im->lists[d];
}

/* The pool of a trace entry as PyTorch's caching allocator chooses it: a block of at
 * most 1 MiB (kSmallSize) comes from the small pool (1), a larger one from the large
 * pool (2); a segment of the small pool is 2 MiB (kSmallBuffer), the large pool's
 * are 10 MiB and more. Pieces of expandable segments say nothing: 0. */
static int32_t pytorch_pool(int action, uint64_t size)
{
    switch (action) {
    case MEMTRACE_ALLOC:
    case MEMTRACE_FREE_REQUESTED:
    case MEMTRACE_FREE_COMPLETED:
        return size <= ((uint64_t)1 << 20) ? 1 : 2;
    case MEMTRACE_SEGMENT_ALLOC:
    case MEMTRACE_SEGMENT_FREE:
        return size == ((uint64_t)2 << 20) ? 1 : 2;
    default:
        return 0;
    }
}

/* The record of a trace entry of device d (its first half: what reads the entry's
 * tree and interns, in the entries' order). */
static int entry_rec(struct imp *im, int32_t d, size_t k, const struct mt_pv *e, struct rec *r)
{
    char what[96];
    if (e->type != MT_PV_DICT) {
        snprintf(what, sizeof(what), "device_traces[%d][%zu]", (int)d, k);
        return ifail(im, MEMTRACE_EFORMAT, "%s is not a dict", what);
    }
    const struct mt_pv *f[K_N] = {0};
    const struct mt_pbox *b = e->u.c;
    for (size_t j = 0; j + 1 < b->n; j += 2) {
        int kf = key_of(im, &b->items[j]);
        if (kf >= 0)
            f[kf] = &b->items[j + 1];
    }
    uint64_t mt = f[K_TIME] && f[K_TIME]->type == MT_PV_INT && f[K_TIME]->u.i > 0
                      ? (uint64_t)f[K_TIME]->u.i
                      : 0;
    if (mt * 1000 < im->t0)
        im->t0 = mt * 1000;
    if (mt * 1000 > im->t1)
        im->t1 = mt * 1000;
    r->mt = mt;
    r->d = d;
    int a = f[K_ACTION] ? action_of(im, f[K_ACTION]) : memtrace_action_from_name("");
    if ((r->skip = a < 0 || a == MEMTRACE_COUNTER)) {
        im->st->skipped++;
        return 0;
    }
    struct memtrace_event *ev = &r->ev;
    memset(ev, 0, sizeof(*ev));
    uint64_t t_us;
    static const int order[6] = {K_TIME, K_ADDR, K_SIZE, K_REQ, K_STREAM, K_FREE};
    uint64_t *dst[6] = {&t_us, &ev->addr, &ev->size, &ev->requested_size, &ev->stream, &ev->aux};
    for (int j = 0; j < 6; j++) {
        int why = u64_of(f[order[j]], 0, dst[j]);
        if (why) {
            snprintf(what, sizeof(what), "device_traces[%d][%zu]", (int)d, k);
            return u64_fail(im, why, what, key_name[order[j]]);
        }
    }
    ev->time_ns = t_us * 1000;
    ev->action = (uint8_t)a;
    ev->device = d;
    ev->pool = pytorch_pool(a, ev->size);
    ev->stack = stack_of(im, f[K_FRAMES]);
    size_t n;
    const char *cc = mt_pv_str(f[K_CC], &n);
    if (cc)
        ev->category = mt_intern_stringn(&im->in, cc, n);
    return im->in.nomem ? ifail(im, MEMTRACE_ENOMEM, "out of memory") : 0;
}

/* The record's second half: kept in its list, fed to what was live before the trace
 * and to the events written ahead. 0 or MEMTRACE_ENOMEM. */
static int keep_rec(struct imp *im, const struct rec *r)
{
    struct clist *l = list_of(im, r->d);
    if (!l)
        return MEMTRACE_ENOMEM;
    if (r->skip)
        return put_record(l, r->mt, NULL);
    if (mt_before_event(im->before, &r->ev) != 0)
        return MEMTRACE_ENOMEM;
    spec_add(im, r->d, &r->ev);
    return put_record(l, r->mt, &r->ev);
}

static void *back_main(void *arg)
{
    struct back *bk = arg;
    pthread_mutex_lock(&bk->lock);
    for (;;) {
        while (!bk->head && !bk->ending)
            pthread_cond_wait(&bk->cond, &bk->lock);
        struct rbatch *b = bk->head;
        if (!b)
            break;
        bk->head = b->next;
        if (!bk->head)
            bk->tail = NULL;
        int rc = bk->rc;
        pthread_mutex_unlock(&bk->lock);
        for (size_t k = 0; k < b->n && rc == 0; k++)
            rc = keep_rec(bk->im, &b->r[k]);
        pthread_mutex_lock(&bk->lock);
        if (rc && !bk->rc) {
            bk->rc = rc;
            atomic_store_explicit(&bk->failed, 1, memory_order_relaxed);
        }
        b->n = 0;
        b->next = bk->pool;
        bk->pool = b;
        bk->queued--;
        pthread_cond_broadcast(&bk->cond);
    }
    pthread_mutex_unlock(&bk->lock);
    return NULL;
}

/* Starts the second thread (im->back stays NULL if it cannot: the reading thread
 * keeps the records itself then). */
static void back_start(struct imp *im)
{
    struct back *bk = calloc(1, sizeof(*bk));
    if (!bk)
        return;
    bk->im = im;
    atomic_init(&bk->failed, 0);
    pthread_mutex_init(&bk->lock, NULL);
    pthread_cond_init(&bk->cond, NULL);
    if (pthread_create(&bk->thread, NULL, back_main, bk) != 0) {
        pthread_cond_destroy(&bk->cond);
        pthread_mutex_destroy(&bk->lock);
        free(bk);
        return;
    }
    im->back = bk;
}

/* Queues the batch being filled, waiting for room unless at the end. */
static void back_queue(struct back *bk, int wait)
{
    pthread_mutex_lock(&bk->lock);
    while (wait && bk->queued >= BACK_QUEUE)
        pthread_cond_wait(&bk->cond, &bk->lock);
    if (bk->tail)
        bk->tail->next = bk->cur;
    else
        bk->head = bk->cur;
    bk->tail = bk->cur;
    bk->cur->next = NULL;
    bk->cur = NULL;
    bk->queued++;
    pthread_cond_broadcast(&bk->cond);
    pthread_mutex_unlock(&bk->lock);
}

/* The next record to fill, NULL once the thread has failed or out of memory. */
static struct rec *back_slot(struct back *bk)
{
    if (atomic_load_explicit(&bk->failed, memory_order_relaxed))
        return NULL;
    if (!bk->cur) {
        pthread_mutex_lock(&bk->lock);
        if ((bk->cur = bk->pool) != NULL)
            bk->pool = bk->cur->next;
        pthread_mutex_unlock(&bk->lock);
        if (!bk->cur && (bk->cur = malloc(sizeof(*bk->cur))) == NULL)
            return NULL;
        bk->cur->n = 0;
    }
    return &bk->cur->r[bk->cur->n];
}

/* The record filled goes with the others. */
static void back_push(struct back *bk)
{
    if (++bk->cur->n == BACK_BATCH)
        back_queue(bk, 1);
}

/* Waits for the records handed over, ends the thread: 0, or its first error. */
static int back_finish(struct imp *im)
{
    struct back *bk = im->back;
    if (!bk)
        return 0;
    if (bk->cur && bk->cur->n)
        back_queue(bk, 0);
    pthread_mutex_lock(&bk->lock);
    bk->ending = 1;
    pthread_cond_broadcast(&bk->cond);
    pthread_mutex_unlock(&bk->lock);
    pthread_join(bk->thread, NULL);
    free(bk->cur);
    while (bk->pool) {
        struct rbatch *b = bk->pool;
        bk->pool = b->next;
        free(b);
    }
    pthread_cond_destroy(&bk->cond);
    pthread_mutex_destroy(&bk->lock);
    int rc = bk->rc;
    free(bk);
    im->back = NULL;
    return rc;
}

/* A trace entry of device d into a record of its list: handed to the second thread
 * while one runs, else kept at once. */
static int trace_entry(struct imp *im, int32_t d, size_t k, const struct mt_pv *e)
{
    if (im->back) {
        struct rec *r = back_slot(im->back);
        if (!r)
            return MEMTRACE_ENOMEM; /* the read gives up, and the read whole says why */
        int rc = entry_rec(im, d, k, e, r);
        if (rc == 0)
            back_push(im->back);
        return rc;
    }
    struct rec r;
    int rc = entry_rec(im, d, k, e, &r);
    if (rc == 0 && (rc = keep_rec(im, &r)) != 0)
        rc = ifail(im, rc, "out of memory");
    return rc;
}

static int annotation_entry(struct imp *im, size_t k, const struct mt_pv *e)
{
    char what[64];
    snprintf(what, sizeof(what), "external_annotations[%zu]", k);
    uint64_t mt = entry_time(e);
    if (e->type != MT_PV_DICT || !mt_pv_get(e, "time_us")) {
        im->st->skipped++;
        return put_record(&im->annots, mt, NULL) ? ifail(im, MEMTRACE_ENOMEM, "out of memory") : 0;
    }
    struct memtrace_event ev;
    memset(&ev, 0, sizeof(ev));
    uint64_t t_us;
    int rc = get_u64(im, e, "time_us", 0, &t_us, what);
    if (rc == 0)
        rc = get_i32(im, e, "device", &ev.device, what);
    if (rc)
        return rc;
    size_t n;
    const char *stage = get_str(e, "stage", &n);
    ev.action = MEMTRACE_ANNOTATE;
    ev.time_ns = t_us * 1000;
    ev.aux = str_eq(stage, n, "START") ? MEMTRACE_ANNOTATE_PUSH
             : str_eq(stage, n, "END") ? MEMTRACE_ANNOTATE_POP
                                       : MEMTRACE_ANNOTATE_MARK;
    const char *name = get_str(e, "name", &n);
    ev.category = mt_intern_stringn(&im->in, name, n);
    return put_record(&im->annots, mt, &ev) ? ifail(im, MEMTRACE_ENOMEM, "out of memory") : 0;
}

/* The streaming reader's callback: an entry of device_traces[list]. */
static int stream_entry(void *ctx, int32_t list, size_t k, const struct mt_pv *v)
{
    return trace_entry(ctx, list, k, v);
}

/* Every device trace (lists 0 .. ndev-1) and the annotations (list ndev), merged by
 * time as their records go; a list keeps its order, ties go to the lower list. */
static int write_events(struct imp *im, size_t ndev)
{
    size_t nl = ndev + 1, nact = 0;
    struct cursor *c = calloc(nl, sizeof(*c));
    size_t *act = calloc(nl, sizeof(*act));
    int rc = 0;
    if (!c || !act)
        rc = ifail(im, MEMTRACE_ENOMEM, "out of memory");
    for (size_t l = 0; rc == 0 && l < nl; l++) {
        const struct clist *cl = l < ndev ? (l < im->nlists ? &im->lists[l] : NULL) : &im->annots;
        if (!cl || !cl->len)
            continue;
        c[l].p = cl->buf;
        c[l].end = cl->buf + cl->len;
        cursor_next(&c[l]);
        act[nact++] = l;
    }
    while (rc == 0 && nact) {
        size_t bi = 0;
        for (size_t j = 1; j < nact; j++)
            if (c[act[j]].t < c[act[bi]].t)
                bi = j;
        struct cursor *b = &c[act[bi]];
        if (!b->skip)
            rc = add_event(im, &b->ev);
        if (b->p < b->end)
            cursor_next(b);
        else
            memmove(act + bi, act + bi + 1, (--nact - bi) * sizeof(*act));
    }
    free(c);
    free(act);
    return rc ? rc : flush_events(im);
}

/* The events written ahead, after the metadata, the tables (all known now: the
 * events written ahead hold none) and the state before the first event, pre (none
 * when nsegs is 0): 1 when they are in the file, 0 when there are none (the records
 * are written instead), or an error. */
static int write_ahead(struct imp *im, const struct mt_before_state *pre, uint64_t t0)
{
    if (!im->spec || spec_flush(im) != 0)
        return 0; /* none, or the writing failed: the records are still there */
    uint64_t events = im->spec->events;
    struct mt_writer *mem = im->spec->mem;
    free(im->spec);
    im->spec = NULL;
    int rc = im->in.nomem ? MEMTRACE_ENOMEM : mt_intern_flush(&im->in, im->w);
    if (rc == 0 && pre->nsegs)
        rc = mt_writer_state(im->w, t0, pre->segs, pre->nsegs);
    if (rc == 0)
        rc = mt_writer_take(im->w, mem);
    else
        mt_writer_abort(mem);
    if (rc)
        return ifail(im, rc, "cannot write the output: %s", mt_writer_strerror(rc));
    im->st->events += events;
    return 1;
}

static int block_state(const char *s, size_t n)
{
    if (str_eq(s, n, "active_allocated"))
        return MEMTRACE_BLOCK_ACTIVE_ALLOCATED;
    if (str_eq(s, n, "active_pending_free"))
        return MEMTRACE_BLOCK_ACTIVE_PENDING_FREE;
    if (str_eq(s, n, "inactive"))
        return MEMTRACE_BLOCK_INACTIVE;
    return -1;
}

static int64_t int_or_0(const struct mt_pv *v)
{
    return v && v->type == MT_PV_INT ? v->u.i : 0;
}

static int read_segment(struct imp *im, const struct mt_pv *s, size_t i,
                        struct memtrace_segment *seg, struct memtrace_block **blocks)
{
    char what[64];
    snprintf(what, sizeof(what), "segments[%zu]", i);
    memset(seg, 0, sizeof(*seg));
    *blocks = NULL;
    if (s->type != MT_PV_DICT)
        return ifail(im, MEMTRACE_EFORMAT, "%s is not a dict", what);
    int rc;
    if ((rc = get_u64(im, s, "address", 0, &seg->addr, what)) ||
        (rc = get_u64(im, s, "total_size", 0, &seg->total_size, what)) ||
        (rc = get_u64(im, s, "allocated_size", 0, &seg->allocated_size, what)) ||
        (rc = get_u64(im, s, "active_size", 0, &seg->active_size, what)) ||
        (rc = get_u64(im, s, "requested_size", 0, &seg->requested_size, what)) ||
        (rc = get_u64(im, s, "stream", 0, &seg->stream, what)) ||
        (rc = get_i32(im, s, "device", &seg->device, what)))
        return rc;
    size_t n;
    const char *type = get_str(s, "segment_type", &n);
    seg->is_large = !str_eq(type, n, "small");
    const struct mt_pv *x = mt_pv_get(s, "is_expandable");
    seg->is_expandable = x && x->type == MT_PV_BOOL && x->u.i;
    const struct mt_pv *pool = mt_pv_get(s, "segment_pool_id");
    if (mt_pv_len(pool) == 2) {
        /* (graph pool id, 0) -> id; (0, user pool id) -> -id */
        int64_t a = int_or_0(mt_pv_at(pool, 0)), b = int_or_0(mt_pv_at(pool, 1));
        int64_t p = a != 0 ? a : -b;
        seg->pool = p > INT32_MAX ? INT32_MAX : p < -INT32_MAX ? -INT32_MAX : (int32_t)p;
    } else if (pool && pool->type == MT_PV_INT)
        rc = get_i32(im, s, "segment_pool_id", &seg->pool, what);
    if (rc)
        return rc;
    seg->stack = stack_of(im, mt_pv_get(s, "frames"));
    const struct mt_pv *bl = mt_pv_get(s, "blocks");
    size_t nb = mt_pv_len(bl);
    if (nb == 0)
        return 0;
    *blocks = calloc(nb, sizeof(**blocks));
    if (!*blocks)
        return ifail(im, MEMTRACE_ENOMEM, "out of memory");
    uint64_t addr = seg->addr;
    for (size_t k = 0; k < nb; k++) {
        const struct mt_pv *b = mt_pv_at(bl, k);
        struct memtrace_block *mb = &(*blocks)[k];
        snprintf(what, sizeof(what), "segments[%zu].blocks[%zu]", i, k);
        if (b->type != MT_PV_DICT)
            return ifail(im, MEMTRACE_EFORMAT, "%s is not a dict", what);
        const struct mt_pv *hist = mt_pv_at(mt_pv_get(b, "history"), 0);
        uint64_t real = 0;
        if ((rc = get_u64(im, b, "address", addr, &mb->addr, what)) ||
            (rc = get_u64(im, b, "size", 0, &mb->size, what)) ||
            (hist && (rc = get_u64(im, hist, "real_size", mb->size, &real, what))) ||
            (rc = get_u64(im, b, "requested_size", hist ? real : mb->size, &mb->requested_size,
                          what)))
            return rc;
        const char *state = get_str(b, "state", &n);
        int st = block_state(state, n);
        if (st < 0)
            return ifail(im, MEMTRACE_EFORMAT, "%s: unknown state '%.*s'", what, (int)n, state);
        mb->state = st;
        const struct mt_pv *frames = mt_pv_get(b, "frames");
        mb->stack = stack_of(im, frames ? frames : mt_pv_get(hist, "frames"));
        addr = mb->addr + mb->size;
    }
    seg->nblocks = nb;
    seg->blocks = *blocks;
    im->st->blocks += nb;
    return 0;
}

/* The snapshot's segments, read into *out (each one's blocks into bv[i]). */
struct final {
    struct memtrace_segment *sv;
    struct memtrace_block **bv;
    size_t n;
};

static void final_free(struct final *f)
{
    for (size_t i = 0; f->bv && i < f->n; i++)
        free(f->bv[i]);
    free(f->bv);
    free(f->sv);
    memset(f, 0, sizeof(*f));
}

static int read_final(struct imp *im, const struct mt_pv *segs, struct final *f)
{
    memset(f, 0, sizeof(*f));
    size_t n = mt_pv_len(segs);
    f->sv = calloc(n ? n : 1, sizeof(*f->sv));
    f->bv = calloc(n ? n : 1, sizeof(*f->bv));
    if (!f->sv || !f->bv)
        return ifail(im, MEMTRACE_ENOMEM, "out of memory");
    f->n = n;
    for (size_t i = 0; i < n; i++) {
        int rc = read_segment(im, mt_pv_at(segs, i), i, &f->sv[i], &f->bv[i]);
        if (rc)
            return rc;
    }
    im->st->segments = n;
    return 0;
}

static int write_state(struct imp *im, const struct memtrace_segment *sv, size_t n,
                       uint64_t time_ns)
{
    int rc = mt_intern_flush(&im->in, im->w);
    if (rc == 0)
        rc = mt_writer_state(im->w, time_ns, sv, n);
    if (rc && im->err->code == 0)
        ifail(im, rc, "cannot write the output: %s", mt_writer_strerror(rc));
    return rc;
}

/* What the streaming reader built up, dropped before reading again whole. */
static void reset(struct imp *im)
{
    spec_drop(im);
    for (size_t l = 0; l < im->nlists; l++)
        free(im->lists[l].buf);
    free(im->lists);
    im->lists = NULL;
    im->nlists = 0;
    free(im->annots.buf);
    memset(&im->annots, 0, sizeof(im->annots));
    seq_free(&im->seqs);
    mt_before_free(im->before);
    im->before = mt_before_new();
    mt_intern_free(&im->in);
    mt_intern_init(&im->in);
    memset(&im->keys, 0, sizeof(im->keys));
    memset(&im->actions, 0, sizeof(im->actions));
    im->t0 = UINT64_MAX;
    im->t1 = 0;
}

/* A streaming read of the pickle, the entries' records kept on a second thread where
 * one starts. */
static int read_streamed(struct imp *im, const unsigned char *buf, size_t len,
                         const struct mt_pickle_opts *o, struct mt_pv *root,
                         struct mt_pickle_error *perr)
{
    spec_start(im);
    back_start(im);
    int rc = mt_pickle_read(buf, len, o, root, perr);
    if (back_finish(im) != 0 && rc == 0) {
        /* out of memory keeping the records: as when the reading thread runs out, the
         * streaming read gives up (and the read whole says so) */
        mt_pv_release(root);
        rc = MT_PICKLE_AGAIN;
    }
    return rc;
}

/* The input mapped (a pickle's values point into it), parsed into *root; a JSON
 * document's tree stays in *json for the values pointing into it. */
static int parse(struct imp *im, void **map, size_t *maplen, json_t **json, struct mt_pv *root)
{
    int fd = open(im->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ifail(im, MEMTRACE_EIO, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ifail(im, MEMTRACE_EIO, "not a regular file");
    }
    size_t len = (size_t)sb.st_size;
    const unsigned char *buf = (const unsigned char *)"";
    if (len > 0) {
        *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (*map == MAP_FAILED) {
            *map = NULL;
            close(fd);
            return ifail(im, MEMTRACE_EIO, "cannot map %zu bytes: %s", len, strerror(errno));
        }
        *maplen = len;
        buf = *map;
        madvise(*map, len, MADV_SEQUENTIAL);
    }
    close(fd);
    size_t i = 0;
    int rc = 0;
    while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r'))
        i++;
    if (i < len && (buf[i] == '{' || buf[i] == '[')) {
        json_error_t jerr;
        *json = json_loadb((const char *)buf, len, 0, &jerr);
        if (!*json)
            return ifail(im, MEMTRACE_EFORMAT, "bad JSON at line %d, column %d: %s", jerr.line,
                         jerr.column, jerr.text);
        if (mt_pv_from_json(*json, root) != 0)
            return ifail(im, MEMTRACE_ENOMEM, "out of memory");
    } else if (len > 0 && buf[0] == 0x80) {
        struct mt_pickle_error perr;
        struct mt_pickle_opts o = {.key = "device_traces",
                                   .item = stream_entry,
                                   .ctx = im,
                                   .drop_behind = 1,
                                   .one_pass = 1};
        im->st->pickle = 1;
        rc = read_streamed(im, buf, len, &o, root, &perr);
        if (rc == MT_PICKLE_AGAIN) {
            /* not as a snapshot's pickle usually is, or refused: with the scan */
            reset(im);
            memset(im->err, 0, sizeof(*im->err));
            im->st->skipped = 0;
            o.one_pass = 0;
            rc = read_streamed(im, buf, len, &o, root, &perr);
        }
        if (rc == MT_PICKLE_AGAIN) {
            /* shaped otherwise than streaming foresaw, or an entry is bad: read whole */
            reset(im);
            memset(im->err, 0, sizeof(*im->err));
            im->st->skipped = 0;
            o.item = NULL;
            rc = mt_pickle_read(buf, len, &o, root, &perr);
        }
        if (rc)
            ifail(im, rc, "%s", perr.text);
    } else
        rc = ifail(im, MEMTRACE_EFORMAT,
                   "not a PyTorch memory snapshot (neither a pickle nor JSON)");
    return rc;
}

static json_t *build_meta(struct imp *im, const struct mt_pv *root, uint64_t t0)
{
    json_t *meta = json_object();
    json_object_set_new(meta, "imported_from", json_string(im->path));
    json_object_set_new(meta, "source_format",
                        json_string(im->st->pickle ? "pytorch-pickle" : "pytorch-json"));
    /* time_us is wall-clock: make wall time = time_ns */
    json_object_set_new(meta, "start_time_ns", json_integer((json_int_t)t0));
    json_object_set_new(meta, "start_monotonic_ns", json_integer((json_int_t)t0));
    if (root->type != MT_PV_DICT)
        return meta;
    static const char *const big[] = {"segments", "device_traces", NULL};
    json_t *rest = mt_pv_to_json_without(root, big);
    json_t *kept = json_object();
    const char *key;
    json_t *v;
    json_object_foreach(rest, key, v)
    {
        if (strcmp(key, "allocator_settings") == 0)
            json_object_set(meta, key, v);
        else
            json_object_set(kept, key, v);
    }
    if (json_object_size(kept))
        json_object_set(meta, "pytorch_snapshot", kept);
    json_decref(kept);
    json_decref(rest);
    return meta;
}

int mt_import_pytorch(const char *in_path, const char *out_path, unsigned writer_flags,
                      struct mt_import_stats *st, struct memtrace_errinfo *err)
{
    struct memtrace_errinfo e0;
    struct mt_import_stats s0;
    struct imp *im = calloc(1, sizeof(*im));
    if (!err)
        err = &e0;
    if (!st)
        st = &s0;
    memset(err, 0, sizeof(*err));
    memset(st, 0, sizeof(*st));
    if (!im) {
        err->code = MEMTRACE_ENOMEM;
        snprintf(err->text, sizeof(err->text), "%s: out of memory", in_path);
        return MEMTRACE_ENOMEM;
    }
    im->path = in_path;
    im->err = err;
    im->st = st;
    im->t0 = UINT64_MAX;
    mt_intern_init(&im->in);
    im->before = mt_before_new();
    json_t *meta = NULL, *json = NULL;
    struct final fin = {0};
    struct mt_before_state pre = {0};
    struct mt_pv root = {.type = MT_PV_NONE};
    void *map = NULL;
    size_t maplen = 0;
    char *text = NULL;
    int rc = im->before ? parse(im, &map, &maplen, &json, &root)
                        : ifail(im, MEMTRACE_ENOMEM, "out of memory");
    if (rc)
        goto out;
    const struct mt_pv *segs = root.type == MT_PV_LIST ? &root : mt_pv_get(&root, "segments");
    const struct mt_pv *traces = mt_pv_get(&root, "device_traces");
    const struct mt_pv *annots = mt_pv_get(&root, "external_annotations");
    if (root.type != MT_PV_LIST && root.type != MT_PV_DICT) {
        rc = ifail(im, MEMTRACE_EFORMAT, "not a PyTorch memory snapshot (no segments)");
        goto out;
    }
    if (root.type == MT_PV_DICT && !segs && !traces) {
        rc = ifail(im, MEMTRACE_EFORMAT,
                   "not a PyTorch memory snapshot (neither 'segments' nor 'device_traces')");
        goto out;
    }
    if ((segs && segs->type != MT_PV_LIST) || (traces && traces->type != MT_PV_LIST)) {
        rc = ifail(im, MEMTRACE_EFORMAT, "'segments' and 'device_traces' must be lists");
        goto out;
    }
    size_t ndev = mt_pv_len(traces);
    for (size_t d = 0; d < ndev; d++)
        if (mt_pv_at(traces, d)->type != MT_PV_LIST) {
            rc = ifail(im, MEMTRACE_EFORMAT, "device_traces[%zu] is not a list", d);
            goto out;
        }
    /* what streaming did not take (all of it, for JSON or a pickle read whole) */
    for (size_t d = 0; d < ndev; d++) {
        const struct mt_pv *list = mt_pv_at(traces, d);
        for (size_t k = 0; k < mt_pv_len(list); k++)
            if ((rc = trace_entry(im, (int32_t)d, k, mt_pv_at(list, k))) != 0)
                goto out;
    }
    if (mt_pv_len(annots))
        spec_drop(im); /* they merge with the events by time: the records do */
    for (size_t k = 0; k < mt_pv_len(annots); k++)
        if ((rc = annotation_entry(im, k, mt_pv_at(annots, k))) != 0)
            goto out;
    uint64_t t0 = im->t0 == UINT64_MAX ? 0 : im->t0;
    st->devices = ndev;
    if ((rc = read_final(im, segs, &fin)) != 0)
        goto out;
    /* Rule 0: memory live before the trace's first entry goes in a state before the
     * events. */
    int have_events = 0;
    for (size_t l = 0; l < im->nlists; l++)
        have_events |= im->lists[l].len > 0;
    if (have_events) {
        if (mt_before_state(im->before, fin.sv, fin.n, &pre) != 0) {
            rc = ifail(im, MEMTRACE_ENOMEM, "out of memory");
            goto out;
        }
        st->before_segments = pre.nsegs;
        st->before_blocks = pre.live_blocks;
        st->before_dropped = pre.dropped;
    }
    meta = build_meta(im, &root, t0);
    text = json_dumps(meta, JSON_COMPACT);
    if (!text) {
        rc = ifail(im, MEMTRACE_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = mt_writer_open(&im->w, out_path, writer_flags | MT_WRITER_ATOMIC)) != 0) {
        rc = ifail(im, rc, "cannot create %s: %s", out_path, strerror(errno));
        goto out;
    }
    if ((rc = mt_writer_meta(im->w, text)) != 0) {
        rc = ifail(im, rc, "cannot write %s: %s", out_path, mt_writer_strerror(rc));
        goto out;
    }
    if ((rc = write_ahead(im, &pre, t0)) < 0)
        goto out;
    if (rc == 0 && ((pre.nsegs && (rc = write_state(im, pre.segs, pre.nsegs, t0)) != 0) ||
                    (rc = write_events(im, ndev)) != 0))
        goto out;
    if ((rc = write_state(im, fin.sv, fin.n, im->t1)) != 0)
        goto out;
    char end[160];
    snprintf(end, sizeof(end), "{\"events\": %llu, \"skipped_entries\": %llu}",
             (unsigned long long)st->events, (unsigned long long)st->skipped);
    rc = mt_writer_end(im->w, end);
    im->w = NULL;
    if (rc)
        ifail(im, rc, "cannot finish %s: %s", out_path, mt_writer_strerror(rc));
out:
    spec_drop(im);
    final_free(&fin);
    mt_before_state_free(&pre);
    /* An atomic writer never touched out_path: a file there (the one --force would
     * have replaced) stays as it was. */
    if (im->w)
        mt_writer_abort(im->w);
    free(text);
    json_decref(meta);
    mt_pv_release(&root);
    json_decref(json);
    if (map)
        munmap(map, maplen);
    reset(im);
    mt_intern_free(&im->in);
    mt_before_free(im->before);
    free(im->fids);
    free(im);
    return rc;
}
