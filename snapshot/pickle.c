/* pickle.c: the safe pickle reader and the protocol 4 writer (see pickle.h).
 *
 * Reading is two passes over the bytes. The scan walks opcode by opcode with each
 * one's argument length, refusing the first opcode that imports or calls and any
 * opcode outside the data-only set; so a hostile file is refused before a single
 * object exists. It also marks which memo ids are ever fetched (BINGET, LONG_BINGET):
 * the build pass keeps only those in its memo, numbered densely by rank, so that the
 * thousands of entries PyTorch memoizes and never fetches again die as soon as they
 * are used. The build pass then runs a stack machine over the same opcodes: a stack
 * of values, a stack of marks and the memo. Each box (dict or list) carries its
 * height and whether it sits inside another: a box inside another is frozen, which
 * keeps the result a tree with shared leaves and no cycles, and heights bound the
 * depth.
 *
 * Streaming guesses each new box's place from the stack beneath it (the box at the
 * bottom is the root; a list whose key just below it is opts->key under the root
 * holds the streamed lists; a list whose container below is that list is one of
 * them) and checks every guess when the box is put in its parent and at STOP. A
 * streamed list hands each item to the callback when it is appended, so an item is
 * complete and frozen by then. Any guess found wrong gives MT_PICKLE_AGAIN. A dict
 * about to be such an item (a trace entry) is read at once (entry_fast): the opcodes
 * an entry is made of, each with its effects, the items straight into the dict, and
 * from the first opcode it does not know, the opcodes one by one as it would have left
 * them.
 *
 * A streaming read may also go without the scan (opts->one_pass): the build pass
 * alone, with a memo that keeps what may be fetched (see struct omemo), checking
 * each opcode and argument itself and giving up, never refusing, at anything the
 * scan would have refused or found, so that the caller's read with the scan does it.
 *
 * Opcodes (the argument follows the opcode byte; n: little-endian length):
 *   0x80 PROTO v     0x95 FRAME u64    ( MARK          . STOP
 *   } EMPTY_DICT     ] EMPTY_LIST      ) EMPTY_TUPLE   d DICT   l LIST   t TUPLE
 *   s SETITEM        u SETITEMS        a APPEND        e APPENDS
 *   0x85/86/87 TUPLE1/2/3              N NONE   0x88 NEWTRUE   0x89 NEWFALSE
 *   K BININT1 u8     M BININT2 u16     J BININT i32    G BINFLOAT f64 (big-endian)
 *   0x8a LONG1 n8    0x8b LONG4 n32    (two's complement, little-endian)
 *   0x8c SHORT_BINUNICODE n8           X BINUNICODE n32   0x8d BINUNICODE8 n64
 *   0x94 MEMOIZE     q BINPUT u8       r LONG_BINPUT u32
 *   h BINGET u8      j LONG_BINGET u32 0 POP   1 POP_MARK */
#include "config.h"

#include "pickle.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memtrace.h"

enum {
    OP_MARK = '(',
    OP_STOP = '.',
    OP_POP = '0',
    OP_POP_MARK = '1',
    OP_BINFLOAT = 'G',
    OP_BININT = 'J',
    OP_BININT1 = 'K',
    OP_BININT2 = 'M',
    OP_NONE = 'N',
    OP_BINUNICODE = 'X',
    OP_APPEND = 'a',
    OP_DICT = 'd',
    OP_APPENDS = 'e',
    OP_BINGET = 'h',
    OP_LONG_BINGET = 'j',
    OP_LIST = 'l',
    OP_BINPUT = 'q',
    OP_LONG_BINPUT = 'r',
    OP_SETITEM = 's',
    OP_TUPLE = 't',
    OP_SETITEMS = 'u',
    OP_EMPTY_DICT = '}',
    OP_EMPTY_LIST = ']',
    OP_EMPTY_TUPLE = ')',
    OP_PROTO = 0x80,
    OP_TUPLE1 = 0x85,
    OP_TUPLE2 = 0x86,
    OP_TUPLE3 = 0x87,
    OP_NEWTRUE = 0x88,
    OP_NEWFALSE = 0x89,
    OP_LONG1 = 0x8a,
    OP_LONG4 = 0x8b,
    OP_SHORT_BINUNICODE = 0x8c,
    OP_BINUNICODE8 = 0x8d,
    OP_MEMOIZE = 0x94,
    OP_FRAME = 0x95,
};

/* Opcodes that import or call, by name. */
static const char *code_opcode(unsigned op)
{
    switch (op) {
    case 'c':
        return "GLOBAL";
    case 0x93:
        return "STACK_GLOBAL";
    case 'R':
        return "REDUCE";
    case 'b':
        return "BUILD";
    case 'i':
        return "INST";
    case 'o':
        return "OBJ";
    case 0x81:
        return "NEWOBJ";
    case 0x92:
        return "NEWOBJ_EX";
    case 'P':
        return "PERSID";
    case 'Q':
        return "BINPERSID";
    case 0x82:
        return "EXT1";
    case 0x83:
        return "EXT2";
    case 0x84:
        return "EXT4";
    default:
        return NULL;
    }
}

static int fail(struct mt_pickle_error *err, int code, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(struct mt_pickle_error *err, int code, uint64_t off, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        err->offset = off;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof(err->text), fmt, ap);
        va_end(ap);
    }
    return code;
}

static inline uint64_t le(const unsigned char *p, int n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* the widths of the hot opcodes, as single loads */
    if (n == 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    if (n == 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    if (n == 1)
        return p[0];
    /* the rest (LONG1's addresses and times are 6 and 7 bytes) as two loads that
     * overlap, not a copy of n bytes into a word, which stalls its load */
    if (n > 4 && n < 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + n - 4, 4);
        return lo | (uint64_t)hi << (8 * (n - 4));
    }
    if (n > 1 && n < 4) {
        uint16_t lo;
        memcpy(&lo, p, 2);
        return n == 2 ? lo : lo | (uint64_t)p[2] << 16;
    }
#endif
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; k--)
        v = v << 8 | p[k];
    return v;
}

/* Argument shape by opcode: 0 not ours, 1 + the fixed length, or VAR | the width of
 * a length prefix. */
#define VAR 0x40
static const unsigned char arg_shape[256] = {
    [OP_MARK] = 1,
    [OP_STOP] = 1,
    [OP_POP] = 1,
    [OP_POP_MARK] = 1,
    [OP_NONE] = 1,
    [OP_APPEND] = 1,
    [OP_DICT] = 1,
    [OP_APPENDS] = 1,
    [OP_LIST] = 1,
    [OP_SETITEM] = 1,
    [OP_TUPLE] = 1,
    [OP_SETITEMS] = 1,
    [OP_EMPTY_DICT] = 1,
    [OP_EMPTY_LIST] = 1,
    [OP_EMPTY_TUPLE] = 1,
    [OP_TUPLE1] = 1,
    [OP_TUPLE2] = 1,
    [OP_TUPLE3] = 1,
    [OP_NEWTRUE] = 1,
    [OP_NEWFALSE] = 1,
    [OP_MEMOIZE] = 1,
    [OP_PROTO] = 2,
    [OP_BININT1] = 2,
    [OP_BINGET] = 2,
    [OP_BINPUT] = 2,
    [OP_BININT2] = 3,
    [OP_BININT] = 5,
    [OP_LONG_BINGET] = 5,
    [OP_LONG_BINPUT] = 5,
    [OP_BINFLOAT] = 9,
    [OP_FRAME] = 9,
    [OP_LONG1] = VAR | 1,
    [OP_SHORT_BINUNICODE] = VAR | 1,
    [OP_LONG4] = VAR | 4,
    [OP_BINUNICODE] = VAR | 4,
    [OP_BINUNICODE8] = VAR | 8,
};

/* 1 + the argument's width of the opcodes the scan passes without a look: fixed
 * widths, neither PROTO, STOP nor a fetch. */
static const unsigned char plain_step[256] = {
    [OP_MARK] = 1,        [OP_POP] = 1,         [OP_POP_MARK] = 1, [OP_NONE] = 1,
    [OP_APPEND] = 1,      [OP_DICT] = 1,        [OP_APPENDS] = 1,  [OP_LIST] = 1,
    [OP_SETITEM] = 1,     [OP_TUPLE] = 1,       [OP_SETITEMS] = 1, [OP_EMPTY_DICT] = 1,
    [OP_EMPTY_LIST] = 1,  [OP_EMPTY_TUPLE] = 1, [OP_TUPLE1] = 1,   [OP_TUPLE2] = 1,
    [OP_TUPLE3] = 1,      [OP_NEWTRUE] = 1,     [OP_NEWFALSE] = 1, [OP_MEMOIZE] = 1,
    [OP_BININT1] = 2,     [OP_BINPUT] = 2,      [OP_BININT2] = 3,  [OP_BININT] = 5,
    [OP_LONG_BINPUT] = 5, [OP_BINFLOAT] = 9,    [OP_FRAME] = 9,
};

/* Bytes of op's argument at p (left bytes after the opcode), or -1 when op is not
 * one of ours, -2 when the argument runs past the end. */
static inline int64_t arg_len(unsigned op, const unsigned char *p, size_t left)
{
    unsigned s = arg_shape[op];
    if (s == 0)
        return -1;
    if (!(s & VAR))
        return left < s - 1 ? -2 : (int64_t)(s - 1);
    unsigned w = s & ~VAR;
    if (left < w)
        return -2;
    uint64_t n = w == 1 ? p[0] : le(p, (int)w);
    return n > left - w ? -2 : (int64_t)(w + n);
}

/* What the scan learns: the memo ids fetched, as a bitmap with a rank per word. */
struct scan {
    uint64_t *bits;
    uint32_t *rank;
    size_t nwords, nslots;
    uint32_t *direct; /* slot + 1 by id, when small enough to keep (the usual case) */
    size_t ndirect;
};

static int mark_grow(struct scan *s, uint64_t id);

static inline int mark_fetched(struct scan *s, uint64_t id)
{
    size_t w = (size_t)(id >> 6);
    if (w >= s->nwords)
        return mark_grow(s, id);
    /* most fetches fetch again what was fetched: a test spares the store */
    if (!(s->bits[w] & 1ull << (id & 63)))
        s->bits[w] |= 1ull << (id & 63);
    return 0;
}

static int mark_grow(struct scan *s, uint64_t id)
{
    size_t w = (size_t)(id >> 6), n = s->nwords ? s->nwords : 64;
    while (n <= w)
        n *= 2;
    uint64_t *b = realloc(s->bits, n * sizeof(*b));
    if (!b)
        return -1;
    memset(b + s->nwords, 0, (n - s->nwords) * sizeof(*b));
    s->bits = b;
    s->nwords = n;
    s->bits[w] |= 1ull << (id & 63);
    return 0;
}

/* The dense memo slot of id, or SIZE_MAX when id is never fetched. */
static inline size_t slot_of(const struct scan *s, uint64_t id)
{
    if (id < s->ndirect)
        return (size_t)s->direct[id] - 1;
    size_t w = (size_t)(id >> 6);
    if (w >= s->nwords)
        return SIZE_MAX;
    uint64_t bit = 1ull << (id & 63);
    if (!(s->bits[w] & bit))
        return SIZE_MAX;
    return s->rank[w] + (size_t)__builtin_popcountll(s->bits[w] & (bit - 1));
}

/* The window of a pass over a file mapping: the pages below upto are given back (a
 * read-only file mapping: they read again from the file if touched) and the next
 * DROP_STEP bytes are mapped in one call where the kernel can, instead of a fault per
 * few pages. */
#define DROP_STEP ((size_t)8 << 20)

static void drop_pages(const unsigned char *buf, size_t len, size_t upto, size_t *dropped)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t end = upto / page * page;
    if (end > *dropped) {
        madvise((void *)(uintptr_t)(buf + *dropped), end - *dropped, MADV_DONTNEED);
        *dropped = end;
    }
#ifdef MADV_POPULATE_READ
    size_t ahead = len - end < DROP_STEP + page ? len - end : DROP_STEP + page;
    if (ahead)
        madvise((void *)(uintptr_t)(buf + end), ahead, MADV_POPULATE_READ);
#else
    (void)len;
#endif
}

/* The scan: every opcode is ours, every argument is inside the input, a STOP ends it. */
static int scan(const unsigned char *buf, size_t len, int drop, struct scan *s,
                struct mt_pickle_error *err)
{
    size_t i = 0, dropped = 0, next_drop = DROP_STEP;
    if (drop)
        drop_pages(buf, len, 0, &dropped);
    while (i < len) {
        /* the common opcodes, far from the end: fixed widths, nothing to check */
        /* (branches rather than a table for the fetches: a predicted branch lets
         * the loads run ahead, a width read from a table makes each wait) */
        while (i + 9 < len && i < next_drop) {
            uint64_t id;
            if (buf[i] == OP_LONG_BINGET) {
                id = le(buf + i + 1, 4);
                i += 5;
            } else if (buf[i] == OP_BINGET) {
                id = buf[i + 1];
                i += 2;
            } else {
                unsigned st = plain_step[buf[i]];
                if (!st)
                    break;
                i += st;
                continue;
            }
            if (id < len && mark_fetched(s, id) != 0)
                return fail(err, MEMTRACE_ENOMEM, i, "out of memory reading the pickle");
        }
        if (i >= next_drop) {
            if (drop)
                drop_pages(buf, len, i, &dropped);
            next_drop = i + DROP_STEP;
            continue;
        }
        if (i >= len)
            break;
        unsigned op = buf[i];
        int64_t a = arg_len(op, buf + i + 1, len - i - 1);
        if (a < 0) {
            const char *name = code_opcode(op);
            if (name)
                return fail(err, MEMTRACE_EFORMAT, i,
                            "pickle opcode %s at offset %zu would import or call code; refused",
                            name, i);
            if (a == -1)
                return fail(err, MEMTRACE_EFORMAT, i,
                            "unsupported pickle opcode 0x%02x at offset %zu (not a plain-data "
                            "pickle)",
                            op, i);
            return fail(err, MEMTRACE_EFORMAT, i,
                        "pickle truncated: opcode at offset %zu runs past "
                        "the end",
                        i);
        }
        if (op == OP_BINGET || op == OP_LONG_BINGET) {
            uint64_t id = le(buf + i + 1, (int)a);
            if (id < len && mark_fetched(s, id) != 0)
                return fail(err, MEMTRACE_ENOMEM, i, "out of memory reading the pickle");
        } else if (op == OP_PROTO && (buf[i + 1] < 2 || buf[i + 1] > 5))
            return fail(err, MEMTRACE_EFORMAT, i,
                        "pickle protocol %u at offset %zu: only 2 to 5 are "
                        "read",
                        buf[i + 1], i);
        else if (op == OP_STOP) {
            s->rank = calloc(s->nwords ? s->nwords : 1, sizeof(*s->rank));
            if (!s->rank)
                return fail(err, MEMTRACE_ENOMEM, i, "out of memory reading the pickle");
            for (size_t w = 0; w < s->nwords; w++) {
                s->rank[w] = (uint32_t)s->nslots;
                s->nslots += (size_t)__builtin_popcountll(s->bits[w]);
            }
            /* a table by id spares the rank's popcount on every fetch; it costs 4
             * bytes an id up to the highest fetched, so only while that is small
             * beside the input */
            size_t top = s->nwords * 64;
            while (top > 0 && !(s->bits[(top - 1) >> 6] & 1ull << ((top - 1) & 63)))
                top--;
            if (top * sizeof(uint32_t) <= len / 4 + 4096 && top > 0 &&
                (s->direct = calloc(top, sizeof(uint32_t))) != NULL) {
                size_t slot = 0;
                for (size_t id = 0; id < top; id++)
                    if (s->bits[id >> 6] & 1ull << (id & 63))
                        s->direct[id] = (uint32_t)++slot;
                s->ndirect = top;
            }
            return 0;
        }
        i += 1 + (size_t)a;
    }
    return fail(err, MEMTRACE_EFORMAT, len, "pickle truncated: no STOP opcode before the end");
}

/* Values. */

enum { ROLE_NONE, ROLE_ROOT, ROLE_LISTS, ROLE_STREAM };

static inline int is_box(const struct mt_pv *v)
{
    return v->type == MT_PV_DICT || v->type == MT_PV_LIST;
}

static inline void pv_ref(const struct mt_pv *v)
{
    if (is_box(v))
        v->u.c->refs++;
}

/* Boxes freed while a read runs wait here, items array and all, for the next one:
 * a streamed read makes and frees a few boxes per entry, millions in all. */
#define SPARE_MAX 1024
struct spares {
    size_t n;
    struct mt_pbox *box[SPARE_MAX];
};
/* a pointer only: the library may be loaded by dlopen, where static TLS is scarce */
static _Thread_local struct spares *spares;

static void drain_spares(void)
{
    while (spares && spares->n) {
        struct mt_pbox *b = spares->box[--spares->n];
        free(b->items);
        free(b);
    }
    free(spares);
    spares = NULL;
}

void mt_pv_release(struct mt_pv *v)
{
    if (is_box(v) && --v->u.c->refs == 0) {
        struct mt_pbox *b = v->u.c;
        for (size_t k = 0; k < b->n; k++)
            if (is_box(&b->items[k])) /* the rest go with the items array */
                mt_pv_release(&b->items[k]);
        if (spares && spares->n < SPARE_MAX && b->cap <= 64)
            spares->box[spares->n++] = b;
        else {
            free(b->items);
            free(b);
        }
    }
    v->type = MT_PV_NONE;
}

static struct mt_pbox *new_box(uint8_t kind)
{
    struct mt_pbox *b;
    if (spares && spares->n) {
        b = spares->box[--spares->n];
        struct mt_pv *items = b->items;
        size_t cap = b->cap;
        memset(b, 0, sizeof(*b));
        b->items = items;
        b->cap = cap;
    } else if ((b = calloc(1, sizeof(*b))) == NULL)
        return NULL;
    b->refs = 1;
    b->kind = kind;
    b->height = 1;
    return b;
}

/* Room for one more item. */
static int box_room(struct mt_pbox *b)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 8;
        struct mt_pv *it = realloc(b->items, cap * sizeof(*it));
        if (!it)
            return -1;
        b->items = it;
        b->cap = cap;
    }
    return 0;
}

static int box_add(struct mt_pbox *b, const struct mt_pv *v)
{
    if (box_room(b) != 0)
        return -1;
    b->items[b->n++] = *v;
    return 0;
}

/* The reader. */

struct vm {
    const unsigned char *buf;
    size_t len, off;
    struct mt_pv *stack;
    size_t n, cap;
    size_t *marks;
    size_t nmarks, capmarks;
    struct mt_pv *memo; /* by slot_of() */
    const struct scan *sc;
    uint64_t next_memo;
    struct mt_pickle_error *err;
    const struct mt_pickle_opts *o;
    struct mt_pbox *root, *lists; /* the guesses, each holding a reference */
    size_t streaming, placed;     /* lists that streamed items; those of them put in place */
    int again;
    uint64_t epoch; /* bumped when a memo slot is put again: the runs cached go stale */
    struct runs *runs;
    struct omemo *om; /* the memo of a read in one pass (no scan): by id */
    size_t dropped;   /* the input's pages below it were given back (drop_behind) */
};

static int nomem(struct vm *v)
{
    return fail(v->err, MEMTRACE_ENOMEM, v->off, "out of memory reading the pickle");
}

static int bad(struct vm *v, const char *what)
{
    return fail(v->err, MEMTRACE_EFORMAT, v->off, "corrupt pickle at offset %zu: %s", v->off, what);
}

static int again(struct vm *v)
{
    v->again = 1;
    return MT_PICKLE_AGAIN;
}

/* Pushes x (the stack takes its reference). */
static inline int push(struct vm *v, const struct mt_pv *x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        struct mt_pv *s = realloc(v->stack, cap * sizeof(*s));
        if (!s) {
            struct mt_pv t = *x;
            mt_pv_release(&t);
            return nomem(v);
        }
        v->stack = s;
        v->cap = cap;
    }
    v->stack[v->n++] = *x;
    return 0;
}

static int str_is(const struct mt_pv *v, const char *s)
{
    size_t n = strlen(s);
    return v->type == MT_PV_STR && v->n >= n && memcmp(v->u.s, s, n) == 0 &&
           (v->n == n || v->u.s[n] == '\0');
}

static int is_role(const struct mt_pv *v, uint8_t role)
{
    return is_box(v) && v->u.c->role == role;
}

/* Guesses the place of box b, about to sit at stack position p (see the top). */
static uint8_t role_of(const struct vm *v, uint8_t kind, size_t p, int32_t *index)
{
    if (!v->o || v->again)
        return ROLE_NONE;
    size_t m = v->nmarks ? v->marks[v->nmarks - 1] : SIZE_MAX;
    if (p == 0)
        return kind == MT_PV_DICT && !v->root && v->nmarks == 0 ? ROLE_ROOT : ROLE_NONE;
    if (kind != MT_PV_LIST || !v->root)
        return ROLE_NONE;
    const struct mt_pv *s = v->stack;
    if (!v->lists && str_is(&s[p - 1], v->o->key) &&
        ((m != SIZE_MAX && m >= 1 && m <= p && is_role(&s[m - 1], ROLE_ROOT) && (p - m) % 2) ||
         (p >= 2 && is_role(&s[p - 2], ROLE_ROOT) && (m == SIZE_MAX || m <= p - 2))))
        return ROLE_LISTS;
    if (!v->lists || v->lists->frozen)
        return ROLE_NONE;
    if (m != SIZE_MAX && m >= 1 && m <= p && s[m - 1].type == MT_PV_LIST &&
        s[m - 1].u.c == v->lists) {
        *index = (int32_t)(v->lists->n + (p - m));
        return ROLE_STREAM;
    }
    if (s[p - 1].type == MT_PV_LIST && s[p - 1].u.c == v->lists) {
        *index = (int32_t)v->lists->n;
        return ROLE_STREAM;
    }
    return ROLE_NONE;
}

/* Whether a box about to sit at stack position p is an item of a streamed list. */
static int is_item_at(const struct vm *v, size_t p)
{
    if (p == 0 || v->again)
        return 0;
    size_t m = v->nmarks ? v->marks[v->nmarks - 1] : SIZE_MAX;
    return (m != SIZE_MAX && m >= 1 && m <= p && is_role(&v->stack[m - 1], ROLE_STREAM)) ||
           is_role(&v->stack[p - 1], ROLE_STREAM);
}

static void guess(struct vm *v, struct mt_pbox *b, size_t p)
{
    if (v->om && is_item_at(v, p))
        b->item = 1;
    b->role = role_of(v, b->kind, p, &b->index);
    if (b->role == ROLE_ROOT || b->role == ROLE_LISTS) {
        b->refs++;
        *(b->role == ROLE_ROOT ? &v->root : &v->lists) = b;
    }
}

/* Puts child into parent's bookkeeping: parent must not be frozen, child freezes. key
 * is the child's key in a dict parent. */
static int adopt_role(struct vm *v, struct mt_pbox *p, struct mt_pbox *c, const struct mt_pv *key);

static inline int adopt(struct vm *v, struct mt_pbox *p, const struct mt_pv *child,
                        const struct mt_pv *key)
{
    if (p->frozen || (is_box(child) && child->u.c == p))
        return bad(v, "a container changed after it was put inside another");
    if (!is_box(child))
        return 0;
    struct mt_pbox *c = child->u.c;
    c->frozen = 1;
    uint32_t h = (uint32_t)c->height + 1;
    if (h > p->height) {
        if (h > MT_PICKLE_MAX_DEPTH)
            return fail(v->err, MEMTRACE_EFORMAT, v->off,
                        "pickle nests deeper than %d at offset %zu; refused", MT_PICKLE_MAX_DEPTH,
                        v->off);
        p->height = (uint8_t)h;
    }
    return c->role && !v->again ? adopt_role(v, p, c, key) : 0;
}

/* The checks of a guess when its box is put in place. */
static int adopt_role(struct vm *v, struct mt_pbox *p, struct mt_pbox *c, const struct mt_pv *key)
{
    if (c->adopted++)
        return again(v);
    if (c->role == ROLE_LISTS && (p != v->root || !key || !str_is(key, v->o->key)))
        return again(v);
    if (c->role == ROLE_STREAM) {
        if (p != v->lists || (size_t)c->index != p->n)
            return again(v);
        if (c->streamed)
            v->placed++;
    }
    return 0;
}

static int unshare(struct vm *v, struct mt_pv *a);

/* Appends stack[from..n) to the list at a, or streams them. */
static int append_range(struct vm *v, struct mt_pv *a, size_t from)
{
    if (a->type != MT_PV_LIST)
        return bad(v, "APPEND to something not a list");
    if (a->u.c->run)
        v->epoch++; /* a run list built again would miss what this appends */
    if (a->u.c->shared && unshare(v, a) != 0)
        return nomem(v);
    struct mt_pbox *b = a->u.c;
    if (b->role != ROLE_STREAM && b->cap - b->n < v->n - from) {
        size_t cap = b->n + (v->n - from);
        struct mt_pv *it = realloc(b->items, cap * sizeof(*it));
        if (it) {
            b->items = it;
            b->cap = cap;
        }
    }
    for (size_t k = from; k < v->n; k++) {
        int rc = adopt(v, b, &v->stack[k], NULL);
        if (rc == 0 && b->role == ROLE_STREAM && !v->again) {
            if (b->streamed++ == 0)
                v->streaming++;
            if (v->o->item(v->o->ctx, b->index, b->streamed - 1, &v->stack[k]) != 0)
                rc = again(v);
            mt_pv_release(&v->stack[k]);
        } else if (rc == 0 && box_add(b, &v->stack[k]) != 0)
            rc = nomem(v);
        if (rc) {
            for (size_t j = k; j < v->n; j++)
                mt_pv_release(&v->stack[j]);
            v->n = from;
            return rc;
        }
    }
    v->n = from;
    return 0;
}

static int set_range(struct vm *v, const struct mt_pv *d, size_t from)
{
    if (d->type != MT_PV_DICT)
        return bad(v, "SETITEM on something not a dict");
    if ((v->n - from) % 2)
        return bad(v, "odd number of items for SETITEMS");
    struct mt_pbox *b = d->u.c;
    for (size_t k = from; k < v->n; k += 2) {
        const struct mt_pv *key = &v->stack[k], *val = &v->stack[k + 1];
        int rc = 0;
        if (key->type != MT_PV_STR && key->type != MT_PV_INT && key->type != MT_PV_BIG)
            rc = bad(v, "a dict key that is neither a string nor an integer");
        else if ((rc = adopt(v, b, val, key)) == 0) {
            if (box_add(b, key) != 0)
                rc = nomem(v);
            else if (box_add(b, val) != 0) {
                b->n--;
                rc = nomem(v);
            }
        }
        if (rc) {
            for (size_t j = k; j < v->n; j++)
                mt_pv_release(&v->stack[j]);
            v->n = from;
            return rc;
        }
    }
    v->n = from;
    return 0;
}

static int push_mark(struct vm *v)
{
    if (v->nmarks == v->capmarks) {
        size_t cap = v->capmarks ? v->capmarks * 2 : 64;
        size_t *m = realloc(v->marks, cap * sizeof(*m));
        if (!m)
            return nomem(v);
        v->marks = m;
        v->capmarks = cap;
    }
    v->marks[v->nmarks++] = v->n;
    return 0;
}

static int pop_mark(struct vm *v, size_t *mark)
{
    if (!v->nmarks)
        return bad(v, "no MARK");
    *mark = v->marks[--v->nmarks];
    if (*mark > v->n)
        return bad(v, "MARK above the stack");
    return 0;
}

/* Puts a new box of kind at stack position at, below the items there. */
static int insert_box(struct vm *v, uint8_t kind, size_t at)
{
    struct mt_pbox *b = new_box(kind);
    if (!b)
        return nomem(v);
    guess(v, b, at);
    struct mt_pv x = {.type = kind, .u.c = b};
    int rc = push(v, &x);
    if (rc)
        return rc;
    if (at + 1 < v->n) { /* DICT, LIST: below their items; EMPTY_*: on top, as pushed */
        memmove(v->stack + at + 1, v->stack + at, (v->n - 1 - at) * sizeof(*v->stack));
        v->stack[at] = x;
    }
    return 0;
}

/* A tuple (list) of stack[from..n), replacing them. */
static int make_tuple(struct vm *v, size_t from)
{
    struct mt_pbox *t = new_box(MT_PV_LIST);
    if (!t)
        return nomem(v);
    int rc = 0;
    for (size_t k = from; k < v->n; k++) {
        if (rc == 0)
            rc = adopt(v, t, &v->stack[k], NULL);
        if (rc == 0 && box_add(t, &v->stack[k]) != 0)
            rc = nomem(v);
        if (rc)
            mt_pv_release(&v->stack[k]);
    }
    v->n = from;
    struct mt_pv x = {.type = MT_PV_LIST, .u.c = t};
    if (rc) {
        mt_pv_release(&x);
        return rc;
    }
    return push(v, &x);
}

/* Little-endian two's complement integer of n bytes: INT when it fits int64, else BIG
 * over the bytes themselves. */
static struct mt_pv long_value(const unsigned char *p, size_t n)
{
    struct mt_pv x = {.type = MT_PV_INT};
    if (n == 0)
        return x;
    int neg = p[n - 1] & 0x80;
    if (n <= 8) {
        uint64_t u = le(p, (int)n);
        if (neg && n < 8)
            u |= ~0ull << (8 * n);
        x.u.i = (int64_t)u;
        return x;
    }
    /* Wider: fits int64 after sign extension if the extra bytes are all sign. */
    int fits = 1;
    for (size_t k = 8; k < n; k++)
        if (p[k] != (neg ? 0xff : 0))
            fits = 0;
    if (fits && ((p[7] & 0x80) != 0) == (neg != 0)) {
        x.u.i = (int64_t)le(p, 8);
        return x;
    }
    x.type = MT_PV_BIG;
    x.n = (uint32_t)n;
    x.u.s = (const char *)p;
    return x;
}

void mt_pv_big_text(const struct mt_pv *v, char *buf)
{
    size_t n = v->n;
    const unsigned char *p = (const unsigned char *)v->u.s;
    int neg = n && (p[n - 1] & 0x80);
    /* Decimal digits of the magnitude, by repeated division by 10. */
    unsigned char mag[MT_PICKLE_MAX_LONG];
    memcpy(mag, p, n);
    if (neg) { /* two's complement negate */
        unsigned carry = 1;
        for (size_t k = 0; k < n; k++) {
            unsigned b = (unsigned)(unsigned char)~mag[k] + carry;
            mag[k] = (unsigned char)b;
            carry = b >> 8;
        }
    }
    char digits[MT_PICKLE_MAX_LONG * 3 + 2];
    size_t nd = 0, top = n;
    while (top > 0 && mag[top - 1] == 0)
        top--;
    while (top > 0) {
        unsigned rem = 0;
        for (size_t k = top; k-- > 0;) {
            unsigned cur = rem << 8 | mag[k];
            mag[k] = (unsigned char)(cur / 10);
            rem = cur % 10;
        }
        digits[nd++] = (char)('0' + rem);
        while (top > 0 && mag[top - 1] == 0)
            top--;
    }
    size_t o = 0;
    if (neg)
        buf[o++] = '-';
    if (nd == 0)
        buf[o++] = '0';
    while (nd > 0)
        buf[o++] = digits[--nd];
    buf[o] = '\0';
}

/* UTF-8 as jansson accepts it: no overlong forms, no surrogates, at most U+10FFFF. */
static int utf8_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            cp = c & 0x07;
        } else
            return 0;
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

/* A memo slot nothing was put in yet (a memoized None is a value). */
#define EMPTY 0xff

/* The memo of a read in one pass. No scan tells which ids are fetched, so it keeps
 * every value put but the streamed items (PyTorch's entries: a million of them, never
 * fetched) and the run lists (their frames lists, which run_list remembers by
 * position instead), and the read gives up when a fetch finds nothing. Ids below
 * OM_DIRECT (the strings and frame dicts that PyTorch shares come first) are an
 * array, the rest a table. */
#define OM_DIRECT 65536
#define OM_MAX    ((size_t)1 << 19) /* ids kept past OM_DIRECT (the table: 24 MB at most) */

struct omemo {
    struct mt_pv direct[OM_DIRECT];
    uint64_t *ids; /* table: id + 1, 0 for a free slot */
    struct mt_pv *vals;
    size_t cap, n;
    uint32_t *runpos; /* see runpos_note */
    size_t nrunpos;
    uint64_t runpos_epoch;
};

/* The slot of id, a new EMPTY one when add, NULL when absent, out of memory or at
 * OM_MAX. */
static struct mt_pv *om_slot(struct omemo *m, uint64_t id, int add)
{
    if (id < OM_DIRECT)
        return &m->direct[id];
    if (add && (m->n + 1) * 2 > m->cap) {
        if (m->n >= OM_MAX)
            return NULL;
        size_t cap = m->cap ? m->cap * 2 : 1024;
        uint64_t *ids = calloc(cap, sizeof(*ids));
        struct mt_pv *vals = malloc(cap * sizeof(*vals));
        if (!ids || !vals) {
            free(ids);
            free(vals);
            return NULL;
        }
        for (size_t k = 0; k < m->cap; k++)
            if (m->ids[k]) {
                size_t i = (size_t)((m->ids[k] - 1) * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
                while (ids[i])
                    i = (i + 1) & (cap - 1);
                ids[i] = m->ids[k];
                vals[i] = m->vals[k];
            }
        free(m->ids);
        free(m->vals);
        m->ids = ids;
        m->vals = vals;
        m->cap = cap;
    }
    if (!m->cap)
        return NULL;
    size_t i = (size_t)(id * 0x9e3779b97f4a7c15ull >> 20) & (m->cap - 1);
    while (m->ids[i] && m->ids[i] != id + 1)
        i = (i + 1) & (m->cap - 1);
    if (m->ids[i])
        return &m->vals[i];
    if (!add)
        return NULL;
    m->ids[i] = id + 1;
    m->vals[i].type = EMPTY;
    m->n++;
    return &m->vals[i];
}

static void om_free(struct omemo *m)
{
    if (!m)
        return;
    for (size_t k = 0; k < OM_DIRECT; k++)
        mt_pv_release(&m->direct[k]);
    for (size_t k = 0; k < m->cap; k++)
        if (m->ids[k])
            mt_pv_release(&m->vals[k]);
    free(m->ids);
    free(m->vals);
    free(m->runpos);
    free(m);
}

/* Whether a one-pass read keeps the value x put in the memo: not a streamed item. */
static int om_keeps(const struct mt_pv *x)
{
    return !is_box(x) || !x->u.c->item;
}

/* The memo slot of id, NULL when it holds nothing (the scan saw no fetch of it, or a
 * one-pass read did not keep it). */
static inline struct mt_pv *memo_at(struct vm *v, uint64_t id)
{
    if (v->om) {
        struct mt_pv *m = om_slot(v->om, id, 0);
        return m && m->type != EMPTY ? m : NULL;
    }
    size_t s = slot_of(v->sc, id);
    return s == SIZE_MAX || v->memo[s].type == EMPTY ? NULL : &v->memo[s];
}

/* Puts x in the memo as id (the memo takes its own reference). */
static int memo_put(struct vm *v, uint64_t id, const struct mt_pv *x)
{
    if (id >= v->len)
        return bad(v, "memo id beyond the input's size");
    struct mt_pv *m;
    int keep = 1;
    if (v->om) {
        if (id < v->om->nrunpos)
            v->om->runpos[id] = 0; /* a run list put there before is gone */
        keep = om_keeps(x);
        m = om_slot(v->om, id, keep);
        if (!m)
            return keep ? again(v) : 0;
    } else {
        size_t s = slot_of(v->sc, id);
        if (s == SIZE_MAX)
            return 0; /* never fetched: nothing to keep */
        m = &v->memo[s];
    }
    if (m->type != EMPTY)
        v->epoch++;
    mt_pv_release(m);
    if (!keep) {
        m->type = EMPTY; /* what is put over it is not kept: the id now fetches nothing */
        return 0;
    }
    *m = *x;
    pv_ref(m);
    return 0;
}

static int memo_set(struct vm *v, uint64_t id)
{
    if (!v->n)
        return bad(v, "memo of an empty stack");
    return memo_put(v, id, &v->stack[v->n - 1]);
}

static int run_fetch(struct vm *v, uint64_t id);

static inline int memo_get(struct vm *v, uint64_t id)
{
    struct mt_pv *m = memo_at(v, id);
    if (!m)
        return v->om ? run_fetch(v, id) : bad(v, "memo id not defined");
    pv_ref(m);
    return push(v, m);
}

/* Lists made of a run of memo fetches (PyTorch's frames lists: the same frame dicts,
 * fetched again entry after entry) are read once per distinct run of bytes while no
 * memo slot changes: the box built the first time is handed out again. It is the
 * same tree Python builds, less the copies; a shared box about to change is copied
 * first (unshare), so no reader of the tree can tell. */
#define RUNS_CAP 32768 /* slots; at most half of them used */
#define RUN_MAX  8192  /* bytes of one run */

#define RUNS_NEXT 4096 /* slots of the guesses of the next run */

struct run {
    uint64_t hash;
    const unsigned char *at;
    struct mt_pbox *box;
    uint32_t len; /* 0: a free slot */
};

struct runs {
    struct run slot[RUNS_CAP];
    size_t n, items;
    uint64_t epoch;
    /* The run (slot + 1) that came next the last time after the last run taken, and
     * after the last two (a trace repeats its loop's allocations, stacks and all): a
     * guess that run_shape checks byte by byte before the walk it saves. */
    uint32_t next1[RUNS_NEXT], next2[RUNS_NEXT];
    uint32_t last1, last2;
};

static inline size_t next2_of(const struct runs *r)
{
    return (size_t)((r->last2 * 0x9e3779b97f4a7c15ull + r->last1) >> 52) & (RUNS_NEXT - 1);
}

/* The run taken at slot (SIZE_MAX: one not cached) came after the last ones. */
static void runs_follow(struct runs *r, size_t slot)
{
    uint32_t s = slot == SIZE_MAX ? 0 : (uint32_t)slot + 1;
    r->next2[next2_of(r)] = s;
    r->next1[r->last1 & (RUNS_NEXT - 1)] = s;
    r->last2 = r->last1;
    r->last1 = s;
}

#define RUNS_ITEMS ((size_t)1 << 20) /* items the cached boxes hold at most (16 MiB) */

static void runs_clear(struct runs *r)
{
    for (size_t k = 0; k < RUNS_CAP; k++)
        if (r->slot[k].box) {
            struct mt_pv x = {.type = MT_PV_LIST, .u.c = r->slot[k].box};
            mt_pv_release(&x);
            r->slot[k].box = NULL;
            r->slot[k].len = 0;
        }
    r->n = 0;
    r->items = 0;
}

static int unshare(struct vm *v, struct mt_pv *a)
{
    struct mt_pbox *s = a->u.c, *b = new_box(MT_PV_LIST);
    (void)v;
    if (!b)
        return -1;
    for (size_t k = 0; k < s->n; k++) {
        if (box_add(b, &s->items[k]) != 0) {
            struct mt_pv x = {.type = MT_PV_LIST, .u.c = b};
            mt_pv_release(&x);
            return -1;
        }
        pv_ref(&s->items[k]);
    }
    b->height = s->height;
    mt_pv_release(a);
    a->type = MT_PV_LIST;
    a->u.c = b;
    return 0;
}

/* Whether a list put in the memo as id here may be left out of it: the scan saw no
 * fetch of it, or a read in one pass has nothing there (it remembers where the run
 * is instead, see run_list). */
static int put_lost(struct vm *v, uint64_t id)
{
    if (v->om)
        return !memo_at(v, id);
    return slot_of(v->sc, id) == SIZE_MAX;
}

/* Whether the run cached at slot (slot + 1: 0 is none) lies at r, the walk's
 * answer there (run_shape): the cached bytes are fetches that the walk took once,
 * no more than RUN_MAX of them, so the same bytes at r, an APPENDS after them not
 * followed by a MARK, and room for the walk's bounds (a fetch is read with 5 bytes
 * of room) make the walk stop at the same end with the same hash. */
static int run_is(const struct vm *v, uint32_t slot, size_t r)
{
    const struct run *c = slot ? &v->runs->slot[slot - 1] : NULL;
    const unsigned char *b = v->buf;
    size_t n = c ? c->len : 0;
    return n && n + 3 <= v->len - r && b[r + n] == OP_APPENDS && b[r + n + 1] != OP_MARK &&
           memcmp(c->at, b + r, n) == 0;
}

/* The shape run_list takes, at an EMPTY_LIST at pos: [a memo put] MARK (BINGET |
 * LONG_BINGET)+ APPENDS, not followed by another MARK. 1 with the fetches in
 * buf[*run .. *end) (APPENDS at *end) and the memo put (*memoize: MEMOIZE; *id: the
 * id of a BINPUT or LONG_BINPUT, else UINT64_MAX), or 0. Where guess, the runs that
 * came after the last ones are tried first: *slot is then the run's in the cache,
 * else SIZE_MAX. */
static int run_shape(const struct vm *v, size_t pos, int guess, size_t *run, size_t *end,
                     int *memoize, uint64_t *id, uint64_t *hash, size_t *slot)
{
    const unsigned char *b = v->buf;
    size_t i = pos + 1, len = v->len;
    *memoize = 0;
    *id = UINT64_MAX;
    if (i < len && b[i] == OP_MEMOIZE) {
        *memoize = 1;
        i++;
    } else if (i + 1 < len && (b[i] == OP_BINPUT || b[i] == OP_LONG_BINPUT)) {
        int w = b[i] == OP_BINPUT ? 1 : 4;
        if (i + (size_t)w >= len)
            return 0;
        *id = le(b + i + 1, w);
        if (*id >= len)
            return 0;
        i += 1 + (size_t)w;
    }
    if (i >= len || b[i] != OP_MARK)
        return 0;
    size_t r = ++i;
    *slot = SIZE_MAX;
    const struct runs *rs = v->runs;
    if (guess && rs && rs->epoch == v->epoch) {
        uint32_t s = rs->next2[next2_of(rs)];
        if (run_is(v, s, r) || run_is(v, s = rs->next1[rs->last1 & (RUNS_NEXT - 1)], r)) {
            *slot = s - 1;
            *run = r;
            *end = r + rs->slot[s - 1].len;
            *hash = rs->slot[s - 1].hash;
            return 1;
        }
    }
    /* BINGET and LONG_BINGET told apart without a branch (their mix in a frames list
     * follows no pattern a predictor learns), the hash of the fetches made on the way;
     * a run that ends within 5 bytes of the input's end is left to the opcodes */
    uint64_t h = 0x9e3779b97f4a7c15ull;
    /* two fetches a turn: the second's opcode byte is loaded at both places it may be
     * before the first is known, which halves the chain of loads a turn waits on */
    while (i + 10 <= len && (b[i] | 2) == OP_LONG_BINGET) {
        int wide = b[i] == OP_LONG_BINGET;
        unsigned near = b[i + 2], far = b[i + 5], op2 = wide ? far : near;
        uint32_t w = (uint32_t)le(b + i + 1, 4);
        h = (h ^ ((wide ? w : w & 0xff) * 2ull + (unsigned)wide)) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
        i += wide ? 5 : 2;
        if ((op2 | 2) != OP_LONG_BINGET)
            break;
        wide = op2 == OP_LONG_BINGET;
        w = (uint32_t)le(b + i + 1, 4);
        h = (h ^ ((wide ? w : w & 0xff) * 2ull + (unsigned)wide)) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
        i += wide ? 5 : 2;
    }
    while (i + 5 <= len && (b[i] | 2) == OP_LONG_BINGET) {
        uint32_t w = (uint32_t)le(b + i + 1, 4);
        int wide = b[i] == OP_LONG_BINGET;
        h = (h ^ ((wide ? w : w & 0xff) * 2ull + (unsigned)wide)) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
        i += wide ? 5 : 2;
    }
    if (i >= len || b[i] != OP_APPENDS || i == r || i - r > RUN_MAX ||
        (i + 1 < len && b[i + 1] == OP_MARK))
        return 0;
    *run = r;
    *end = i;
    *hash = h ^ (i - r);
    return 1;
}

/* The list of the fetches in buf[run .. end) of hash h (a new reference), the same
 * box while the memo does not change; NULL when a fetch finds nothing or out of
 * memory. *slot: where run_shape found it in the cache (SIZE_MAX: not known), then
 * where it is cached (SIZE_MAX: not). */
static struct mt_pbox *run_box(struct vm *v, size_t run, size_t end, uint64_t h, size_t *slot)
{
    const unsigned char *b = v->buf;
    if (!v->runs && (v->runs = calloc(1, sizeof(*v->runs))) == NULL)
        return NULL;
    struct runs *r = v->runs;
    if (r->epoch != v->epoch) {
        runs_clear(r);
        r->epoch = v->epoch;
        *slot = SIZE_MAX;
    }
    if (*slot != SIZE_MAX) {
        r->slot[*slot].box->refs++;
        return r->slot[*slot].box;
    }
    size_t n = end - run;
    struct run *c = &r->slot[(size_t)h & (RUNS_CAP - 1)];
    while (c->len && !(c->hash == h && c->len == n && memcmp(c->at, b + run, n) == 0))
        c = c + 1 < r->slot + RUNS_CAP ? c + 1 : r->slot;
    *slot = (size_t)(c - r->slot);
    if (c->len) {
        c->box->refs++;
        return c->box;
    }
    struct mt_pbox *box = new_box(MT_PV_LIST);
    if (!box)
        return NULL;
    box->run = 1;
    struct mt_pv x = {.type = MT_PV_LIST, .u.c = box};
    for (size_t k = run; k < end; k += b[k] == OP_BINGET ? 2 : 5) {
        const struct mt_pv *it = memo_at(v, le(b + k + 1, b[k] == OP_BINGET ? 1 : 4));
        if (!it || (is_box(it) && it->u.c->height + 1 > MT_PICKLE_MAX_DEPTH) ||
            box_add(box, it) != 0) {
            mt_pv_release(&x);
            return NULL;
        }
        pv_ref(it);
        if (is_box(it)) {
            it->u.c->frozen = 1;
            if (it->u.c->height + 1 > box->height)
                box->height = (uint8_t)(it->u.c->height + 1);
        }
    }
    if (r->n < RUNS_CAP / 2 && r->items + box->n <= RUNS_ITEMS) {
        r->items += box->n;
        box->shared = 1;
        box->refs++;
        c->hash = h;
        c->at = b + run;
        c->len = (uint32_t)n;
        c->box = box;
        r->n++;
    } else
        *slot = SIZE_MAX;
    return box;
}

/* A read in one pass remembers where each run list put in the memo starts
 * (position + 1, 0 when unknown), to build it again if it is fetched; valid while
 * the memo does not change (epoch). */
static void runpos_note(struct vm *v, uint64_t id, size_t pos)
{
    struct omemo *m = v->om;
    if (m->runpos_epoch != v->epoch) {
        if (m->nrunpos) /* (none yet: no array, and memset's pointer may not be NULL) */
            memset(m->runpos, 0, m->nrunpos * sizeof(*m->runpos));
        m->runpos_epoch = v->epoch;
    }
    if (id >= m->nrunpos) {
        size_t n = m->nrunpos ? m->nrunpos : 4096;
        while (n <= id)
            n *= 2;
        uint32_t *p = realloc(m->runpos, n * sizeof(*p));
        if (!p)
            return; /* unknown: a fetch of it gives up the read */
        memset(p + m->nrunpos, 0, (n - m->nrunpos) * sizeof(*p));
        m->runpos = p;
        m->nrunpos = n;
    }
    m->runpos[id] = pos < UINT32_MAX - 1 ? (uint32_t)pos + 1 : 0;
}

/* A read in one pass fetches run list id: the list built again (a new reference), or
 * NULL when it cannot be (the read gives up). */
static struct mt_pbox *run_refetch(struct vm *v, uint64_t id)
{
    struct omemo *m = v->om;
    size_t run, end;
    int memoize;
    uint64_t put, h;
    size_t slot;
    if (id >= m->nrunpos || !m->runpos[id] || m->runpos_epoch != v->epoch ||
        !run_shape(v, m->runpos[id] - 1, 0, &run, &end, &memoize, &put, &h, &slot))
        return NULL;
    struct mt_pbox *box = run_box(v, run, end, h, &slot);
    if (!box)
        return NULL;
    /* read again far behind: given back again, as drop_pages would */
    size_t page = (size_t)sysconf(_SC_PAGESIZE), from = run / page * page;
    size_t to = (end + page) / page * page;
    if (to > v->dropped)
        to = v->dropped;
    if (from < to)
        madvise((void *)(uintptr_t)(v->buf + from), to - from, MADV_DONTNEED);
    box->frozen = 1; /* as the list first built was, inside its entry */
    return box;
}

/* A read in one pass fetches run list id: pushes it built again, or gives up. */
static int run_fetch(struct vm *v, uint64_t id)
{
    struct mt_pbox *box = run_refetch(v, id);
    if (!box)
        return again(v);
    struct mt_pv x = {.type = MT_PV_LIST, .u.c = box};
    return push(v, &x);
}

/* At an EMPTY_LIST at pos, a list of the shape of run_shape that the memo need not
 * keep, in a place no guess is about: the list (a new reference) with its memo put
 * done and *next past it, or NULL with nothing done. */
static struct mt_pbox *run_take(struct vm *v, size_t pos, size_t *next)
{
    size_t run, end;
    int memoize;
    uint64_t id, h;
    size_t slot;
    if (!run_shape(v, pos, 1, &run, &end, &memoize, &id, &h, &slot))
        return NULL;
    if (memoize)
        id = v->next_memo;
    if (id != UINT64_MAX && !put_lost(v, id))
        return NULL;
    struct mt_pbox *box = run_box(v, run, end, h, &slot);
    if (!box)
        return NULL;
    runs_follow(v->runs, slot);
    if (v->om && id != UINT64_MAX)
        runpos_note(v, id, pos);
    if (memoize)
        v->next_memo++;
    *next = end + 1;
    return box;
}

/* At an EMPTY_LIST at pos, such a list pushed, with *next past it: 1; 0 leaves
 * everything to the opcodes one by one (which also give any error); -1 out of
 * memory. */
static int run_list(struct vm *v, size_t pos, size_t *next)
{
    int32_t index;
    if (role_of(v, MT_PV_LIST, v->n, &index) != ROLE_NONE)
        return 0;
    struct mt_pbox *box = run_take(v, pos, next);
    if (!box)
        return 0;
    struct mt_pv x = {.type = MT_PV_LIST, .u.c = box};
    return push(v, &x) == 0 ? 1 : -1;
}

/* The items of an entry read so far, from the dict d on top of the stack onto the
 * stack after a MARK, where the opcodes one by one would have put them. */
static int entry_spill(struct vm *v, struct mt_pbox *d)
{
    int rc = push_mark(v);
    if (rc == 0 && v->cap - v->n < d->n) {
        size_t cap = v->cap;
        while (cap - v->n < d->n)
            cap *= 2;
        struct mt_pv *s = realloc(v->stack, cap * sizeof(*s));
        if (!s)
            rc = nomem(v);
        else {
            v->stack = s;
            v->cap = cap;
        }
    }
    if (rc) {
        for (size_t k = 0; k < d->n; k++)
            mt_pv_release(&d->items[k]);
        d->n = 0;
        return rc;
    }
    if (d->n) /* (a dict with no items may have no items array yet) */
        memcpy(v->stack + v->n, d->items, d->n * sizeof(*d->items));
    v->n += d->n;
    d->n = 0;
    return 0;
}

/* The memo put at b[*i], if any (MEMOIZE, BINPUT, LONG_BINPUT), of x: 0 with *i past
 * it, or an error. */
static int entry_put(struct vm *v, size_t *i, const struct mt_pv *x)
{
    const unsigned char *b = v->buf;
    size_t at = *i;
    uint64_t id;
    if (at >= v->len)
        return 0;
    if (b[at] == OP_MEMOIZE) {
        id = v->next_memo++;
        *i = at + 1;
    } else if (b[at] == OP_BINPUT && at + 2 <= v->len) {
        id = b[at + 1];
        *i = at + 2;
    } else if (b[at] == OP_LONG_BINPUT && at + 5 <= v->len) {
        id = le(b + at + 1, 4);
        *i = at + 5;
    } else
        return 0;
    v->off = at;
    return memo_put(v, id, x);
}

/* A dict that is an item of a streamed list (PyTorch's trace entry), read at once
 * from its EMPTY_DICT at *at: the opcodes' dispatch and the stack cost most of a
 * streamed read. It knows the opcodes such an entry is made of (a memo put, MARK, keys
 * and values that are fetches, integers, strings, None, booleans and run lists, then
 * SETITEMS), each with exactly its effects one by one, in the same order (memo puts
 * included), except that the items go straight into the dict. At any other opcode, or
 * at one whose checks fail, it moves the items read so far onto the stack, as they
 * would be there (entry_spill), and leaves the rest to the opcodes one by one, which
 * also give any error. The guesses it relies on: the dict is an item (so nothing is a
 * guess's below it), a fetched box with a role is left to the opcodes, and a key is a
 * string or an integer, never the list of lists, so that a run list in it is no
 * guess's either (role_of). Returns 0 or an error, *at past what it read. */
static int entry_fast(struct vm *v, size_t *at)
{
    const unsigned char *b = v->buf;
    size_t len = v->len, i = *at;
    int rc = insert_box(v, MT_PV_DICT, v->n);
    if (rc)
        return rc;
    struct mt_pbox *d = v->stack[v->n - 1].u.c;
    i++;
    if ((rc = entry_put(v, &i, &v->stack[v->n - 1])) != 0)
        return rc;
    if (i >= len || b[i] != OP_MARK) {
        *at = i;
        return 0;
    }
    i++;
    /* near the end the opcodes one by one check each argument's room */
    while (i + 9 <= len) {
        int key = !(d->n & 1);
        size_t next = i + 1, n;
        /* the item is read in place, not copied in: a copy of a value just made
         * waits on its stores */
        if (box_room(d) != 0)
            return nomem(v);
        struct mt_pv *x = &d->items[d->n];
        x->type = MT_PV_NONE;
        v->off = i;
        switch (b[i]) {
        case OP_SETITEMS:
            if (!key)
                goto spill;
            for (size_t k = 0; k < d->n; k += 2)
                if ((rc = adopt(v, d, &d->items[k + 1], &d->items[k])) != 0) {
                    while (d->n > k) /* as set_range leaves them */
                        mt_pv_release(&d->items[--d->n]);
                    return rc;
                }
            *at = i + 1;
            return 0;
        case OP_BINGET:
        case OP_LONG_BINGET: {
            int wide = b[i] == OP_LONG_BINGET;
            uint64_t id = wide ? le(b + i + 1, 4) : b[i + 1];
            const struct mt_pv *m = memo_at(v, id);
            next = i + (wide ? 5 : 2);
            if (m) {
                *x = *m;
                pv_ref(x);
            } else if (!key && v->om && (x->u.c = run_refetch(v, id)) != NULL)
                x->type = MT_PV_LIST;
            else
                goto spill;
            if (is_box(x) && x->u.c->role != ROLE_NONE) {
                mt_pv_release(x);
                goto spill;
            }
            break;
        }
        case OP_BININT1:
            x->type = MT_PV_INT;
            x->u.i = b[i + 1];
            next = i + 2;
            break;
        case OP_BININT2:
            x->type = MT_PV_INT;
            x->u.i = (int64_t)le(b + i + 1, 2);
            next = i + 3;
            break;
        case OP_BININT:
            x->type = MT_PV_INT;
            x->u.i = (int32_t)(uint32_t)le(b + i + 1, 4);
            next = i + 5;
            break;
        case OP_LONG1:
            n = b[i + 1];
            if (n > len - i - 2)
                goto spill;
            *x = long_value(b + i + 2, n);
            next = i + 2 + n;
            break;
        case OP_SHORT_BINUNICODE:
            n = b[i + 1];
            if (n > len - i - 2 || !utf8_ok(b + i + 2, n))
                goto spill;
            x->type = MT_PV_STR;
            x->n = (uint32_t)n;
            x->u.s = (const char *)b + i + 2;
            next = i + 2 + n;
            break;
        case OP_NONE:
            break;
        case OP_NEWTRUE:
        case OP_NEWFALSE:
            x->type = MT_PV_BOOL;
            x->u.i = b[i] == OP_NEWTRUE;
            break;
        case OP_EMPTY_LIST:
            if (key || (x->u.c = run_take(v, i, &next)) == NULL)
                goto spill;
            x->type = MT_PV_LIST;
            break;
        default:
            goto spill;
        }
        if (key && x->type != MT_PV_STR && x->type != MT_PV_INT && x->type != MT_PV_BIG) {
            mt_pv_release(x);
            goto spill;
        }
        d->n++;
        i = next;
        /* the dict inside itself, or inside a run list just built of the memo: on the
         * stack, as one by one, not a cycle if anything fails before SETITEMS */
        if (is_box(x) && (x->u.c == d || d->frozen))
            goto spill;
        if (i < len && (b[i] == OP_MEMOIZE || b[i] == OP_BINPUT || b[i] == OP_LONG_BINPUT) &&
            (rc = entry_put(v, &i, x)) != 0)
            return rc;
    }
spill:
    *at = i;
    return entry_spill(v, d);
}

static int step(struct vm *v, unsigned op, const unsigned char *a, size_t alen, int *stop)
{
    size_t mark;
    int rc;
    struct mt_pv x = {.type = MT_PV_NONE};
    switch (op) {
    case OP_PROTO:
        /* the scan refused the others; a read in one pass leaves that to it */
        return v->om && (a[0] < 2 || a[0] > 5) ? again(v) : 0;
    case OP_FRAME:
        return 0;
    case OP_STOP:
        *stop = 1;
        return 0;
    case OP_MARK:
        return push_mark(v);
    case OP_POP:
        if (!v->n)
            return bad(v, "POP of an empty stack");
        mt_pv_release(&v->stack[--v->n]);
        return 0;
    case OP_POP_MARK:
        if ((rc = pop_mark(v, &mark)))
            return rc;
        while (v->n > mark)
            mt_pv_release(&v->stack[--v->n]);
        return 0;
    case OP_EMPTY_DICT:
        return insert_box(v, MT_PV_DICT, v->n);
    case OP_EMPTY_LIST:
    case OP_EMPTY_TUPLE:
        return insert_box(v, MT_PV_LIST, v->n);
    case OP_NONE:
        return push(v, &x);
    case OP_NEWTRUE:
    case OP_NEWFALSE:
        x.type = MT_PV_BOOL;
        x.u.i = op == OP_NEWTRUE;
        return push(v, &x);
    case OP_BININT1:
    case OP_BININT2:
        x.type = MT_PV_INT;
        x.u.i = (int64_t)le(a, (int)alen);
        return push(v, &x);
    case OP_BININT:
        x.type = MT_PV_INT;
        x.u.i = (int32_t)(uint32_t)le(a, 4);
        return push(v, &x);
    case OP_BINFLOAT: {
        uint64_t u = 0;
        for (int k = 0; k < 8; k++)
            u = u << 8 | a[k];
        memcpy(&x.u.d, &u, sizeof(x.u.d));
        if (!isfinite(x.u.d))
            return bad(v, "a float that JSON cannot hold (inf or nan)");
        x.type = MT_PV_FLOAT;
        return push(v, &x);
    }
    case OP_LONG1:
    case OP_LONG4: {
        size_t hdr = op == OP_LONG1 ? 1 : 4;
        if (alen - hdr > MT_PICKLE_MAX_LONG)
            return fail(v->err, MEMTRACE_EFORMAT, v->off,
                        "pickle integer of %zu bytes at offset %zu is too wide; refused",
                        alen - hdr, v->off);
        x = long_value(a + hdr, alen - hdr);
        return push(v, &x);
    }
    case OP_SHORT_BINUNICODE:
    case OP_BINUNICODE:
    case OP_BINUNICODE8: {
        size_t hdr = op == OP_SHORT_BINUNICODE ? 1 : op == OP_BINUNICODE ? 4 : 8;
        if (alen - hdr > UINT32_MAX)
            return fail(v->err, MEMTRACE_EFORMAT, v->off,
                        "pickle string of %zu bytes at offset %zu is too long; refused", alen - hdr,
                        v->off);
        if (!utf8_ok(a + hdr, alen - hdr))
            return bad(v, "a string that is not valid UTF-8");
        x.type = MT_PV_STR;
        x.n = (uint32_t)(alen - hdr);
        x.u.s = (const char *)a + hdr;
        return push(v, &x);
    }
    case OP_MEMOIZE:
        return memo_set(v, v->next_memo++);
    case OP_BINPUT:
    case OP_LONG_BINPUT:
        return memo_set(v, le(a, (int)alen));
    case OP_BINGET:
    case OP_LONG_BINGET:
        return memo_get(v, le(a, (int)alen));
    case OP_APPEND:
        if (v->n < 2)
            return bad(v, "APPEND without a list");
        return append_range(v, &v->stack[v->n - 2], v->n - 1);
    case OP_APPENDS:
        if ((rc = pop_mark(v, &mark)))
            return rc;
        if (mark == 0)
            return bad(v, "APPENDS without a list");
        return append_range(v, &v->stack[mark - 1], mark);
    case OP_SETITEM:
        if (v->n < 3)
            return bad(v, "SETITEM without a dict");
        return set_range(v, &v->stack[v->n - 3], v->n - 2);
    case OP_SETITEMS:
        if ((rc = pop_mark(v, &mark)))
            return rc;
        if (mark == 0)
            return bad(v, "SETITEMS without a dict");
        return set_range(v, &v->stack[mark - 1], mark);
    case OP_LIST:
        if ((rc = pop_mark(v, &mark)) || (rc = insert_box(v, MT_PV_LIST, mark)))
            return rc;
        return append_range(v, &v->stack[mark], mark + 1);
    case OP_DICT:
        if ((rc = pop_mark(v, &mark)) || (rc = insert_box(v, MT_PV_DICT, mark)))
            return rc;
        return set_range(v, &v->stack[mark], mark + 1);
    case OP_TUPLE:
        if ((rc = pop_mark(v, &mark)))
            return rc;
        return make_tuple(v, mark);
    case OP_TUPLE1:
    case OP_TUPLE2:
    case OP_TUPLE3: {
        size_t k = op - OP_TUPLE1 + 1;
        if (v->n < k)
            return bad(v, "TUPLE of too few items");
        return make_tuple(v, v->n - k);
    }
    default:
        return bad(v, "unexpected opcode");
    }
}

/* At STOP, after streaming: the guesses all held. */
static int guesses_held(struct vm *v)
{
    if (!v->streaming)
        return 1;
    if (v->stack[0].type != MT_PV_DICT || v->stack[0].u.c != v->root || !v->lists ||
        v->lists->adopted != 1 || v->placed != v->streaming)
        return 0;
    const struct mt_pv *l = mt_pv_get(&v->stack[0], v->o->key);
    return l && l->type == MT_PV_LIST && l->u.c == v->lists;
}

int mt_pickle_read(const unsigned char *buf, size_t len, const struct mt_pickle_opts *opts,
                   struct mt_pv *out, struct mt_pickle_error *err)
{
    out->type = MT_PV_NONE;
    struct scan sc;
    memset(&sc, 0, sizeof(sc));
    int drop = opts && opts->drop_behind;
    int one = opts && opts->one_pass && opts->item && opts->key;
    int rc = one ? 0 : scan(buf, len, drop, &sc, err);
    if (rc) {
        free(sc.bits);
        free(sc.rank);
        return rc;
    }
    struct vm v;
    memset(&v, 0, sizeof(v));
    v.buf = buf;
    v.len = len;
    v.err = err;
    v.sc = &sc;
    v.o = opts && opts->item && opts->key ? opts : NULL;
    if (!spares)
        spares = calloc(1, sizeof(*spares)); /* without it, boxes are simply freed */
    if (one) {
        if ((v.om = calloc(1, sizeof(*v.om))) == NULL) {
            rc = nomem(&v);
            goto out;
        }
        for (size_t k = 0; k < OM_DIRECT; k++)
            v.om->direct[k].type = EMPTY;
    } else {
        v.memo = calloc(sc.nslots ? sc.nslots : 1, sizeof(*v.memo));
        if (!v.memo) {
            rc = nomem(&v);
            goto out;
        }
        for (size_t k = 0; k < sc.nslots; k++)
            v.memo[k].type = EMPTY;
    }
    int stop = 0;
    size_t pos = 0, next_drop = DROP_STEP;
    if (drop)
        drop_pages(buf, len, 0, &v.dropped);
    while (!stop) {
        if (pos >= next_drop) {
            if (drop)
                drop_pages(buf, len, pos, &v.dropped);
            next_drop = pos + DROP_STEP;
        }
        if (pos >= len) { /* no STOP: only a read in one pass, without the scan, gets here */
            rc = again(&v);
            goto out;
        }
        v.off = pos;
        unsigned op = buf[pos];
        if (op == OP_EMPTY_DICT && v.o && is_item_at(&v, v.n)) {
            if ((rc = entry_fast(&v, &pos)) != 0)
                goto out;
            continue;
        }
        if (op == OP_EMPTY_LIST) {
            int taken = run_list(&v, pos, &pos);
            if (taken < 0) {
                rc = MEMTRACE_ENOMEM;
                goto out;
            }
            if (taken)
                continue;
        }
        int64_t a = arg_len(op, buf + pos + 1, len - pos - 1);
        if (a < 0) { /* not ours, or past the end: as above */
            rc = again(&v);
            goto out;
        }
        rc = step(&v, op, buf + pos + 1, (size_t)a, &stop);
        if (rc)
            goto out;
        pos += 1 + (size_t)a;
    }
    if (v.n != 1) {
        rc = bad(&v, "STOP with other than one value on the stack");
        goto out;
    }
    if (!guesses_held(&v)) {
        rc = again(&v);
        goto out;
    }
    *out = v.stack[0];
    v.n = 0;
out:
    if (v.again || (one && rc != 0))
        rc = MT_PICKLE_AGAIN;
    while (v.n)
        mt_pv_release(&v.stack[--v.n]);
    for (size_t k = 0; v.memo && k < sc.nslots; k++)
        mt_pv_release(&v.memo[k]);
    struct mt_pv g = {.type = MT_PV_DICT, .u.c = v.root};
    if (v.root)
        mt_pv_release(&g);
    g.type = MT_PV_LIST;
    g.u.c = v.lists;
    if (v.lists)
        mt_pv_release(&g);
    if (v.runs)
        runs_clear(v.runs);
    free(v.runs);
    om_free(v.om);
    free(v.memo);
    free(v.stack);
    free(v.marks);
    free(sc.bits);
    free(sc.rank);
    free(sc.direct);
    drain_spares();
    return rc;
}

/* Access. */

const char *mt_pv_str(const struct mt_pv *v, size_t *n)
{
    if (!v || v->type != MT_PV_STR)
        return NULL;
    const char *z = memchr(v->u.s, '\0', v->n);
    *n = z ? (size_t)(z - v->u.s) : v->n;
    return v->u.s;
}

const struct mt_pv *mt_pv_get(const struct mt_pv *v, const char *key)
{
    if (!v || v->type != MT_PV_DICT)
        return NULL;
    const struct mt_pbox *b = v->u.c;
    size_t kn = strlen(key);
    for (size_t k = b->n; k >= 2; k -= 2) {
        size_t n;
        const char *s = mt_pv_str(&b->items[k - 2], &n);
        if (s && n == kn && memcmp(s, key, n) == 0)
            return &b->items[k - 1];
    }
    return NULL;
}

size_t mt_pv_len(const struct mt_pv *v)
{
    return v && v->type == MT_PV_LIST ? v->u.c->n : 0;
}

const struct mt_pv *mt_pv_at(const struct mt_pv *v, size_t k)
{
    return k < mt_pv_len(v) ? &v->u.c->items[k] : NULL;
}

static json_t *to_json(const struct mt_pv *v, const char *const *skip);

json_t *mt_pv_to_json(const struct mt_pv *v)
{
    return to_json(v, NULL);
}

json_t *mt_pv_to_json_without(const struct mt_pv *v, const char *const *skip)
{
    return to_json(v, skip);
}

static int skipped(const char *k, const char *const *skip)
{
    for (; skip && *skip; skip++)
        if (strcmp(k, *skip) == 0)
            return 1;
    return 0;
}

static json_t *to_json(const struct mt_pv *v, const char *const *skip)
{
    char text[MT_PICKLE_MAX_LONG * 3 + 3];
    json_t *j = NULL;
    switch (v->type) {
    case MT_PV_NONE:
        return json_null();
    case MT_PV_BOOL:
        return json_boolean(v->u.i);
    case MT_PV_INT:
        return json_integer((json_int_t)v->u.i);
    case MT_PV_FLOAT:
        return json_real(v->u.d);
    case MT_PV_STR:
        return json_stringn(v->u.s, v->n);
    case MT_PV_BIG:
        mt_pv_big_text(v, text);
        return json_string(text);
    case MT_PV_LIST:
        j = json_array();
        for (size_t k = 0; j && k < v->u.c->n; k++)
            if (json_array_append_new(j, mt_pv_to_json(&v->u.c->items[k])) != 0) {
                json_decref(j);
                j = NULL;
            }
        return j;
    case MT_PV_DICT:
        j = json_object();
        for (size_t k = 0; j && k + 1 < v->u.c->n; k += 2) {
            const struct mt_pv *key = &v->u.c->items[k];
            char *ks = NULL;
            if (key->type == MT_PV_INT) {
                snprintf(text, sizeof(text), "%lld", (long long)key->u.i);
                ks = strdup(text);
            } else if (key->type == MT_PV_BIG) {
                mt_pv_big_text(key, text);
                ks = strdup(text);
            } else
                ks = strndup(key->u.s, key->n);
            if (ks && skipped(ks, skip)) {
                free(ks);
                continue;
            }
            if (!ks || json_object_set_new(j, ks, mt_pv_to_json(&v->u.c->items[k + 1])) != 0) {
                json_decref(j);
                j = NULL;
            }
            free(ks);
        }
        return j;
    default:
        return NULL;
    }
}

int mt_pv_from_json(json_t *j, struct mt_pv *out)
{
    memset(out, 0, sizeof(*out));
    switch (json_typeof(j)) {
    case JSON_NULL:
        return 0;
    case JSON_TRUE:
    case JSON_FALSE:
        out->type = MT_PV_BOOL;
        out->u.i = json_is_true(j);
        return 0;
    case JSON_INTEGER:
        out->type = MT_PV_INT;
        out->u.i = (int64_t)json_integer_value(j);
        return 0;
    case JSON_REAL:
        out->type = MT_PV_FLOAT;
        out->u.d = json_real_value(j);
        return 0;
    case JSON_STRING:
        if (json_string_length(j) > UINT32_MAX)
            return MEMTRACE_ENOMEM;
        out->type = MT_PV_STR;
        out->n = (uint32_t)json_string_length(j);
        out->u.s = json_string_value(j);
        return 0;
    case JSON_ARRAY:
    case JSON_OBJECT:
        break;
    }
    int is_obj = json_is_object(j);
    struct mt_pbox *b = new_box(is_obj ? MT_PV_DICT : MT_PV_LIST);
    if (!b)
        return MEMTRACE_ENOMEM;
    out->type = b->kind;
    out->u.c = b;
    struct mt_pv item;
    if (!is_obj) {
        for (size_t k = 0; k < json_array_size(j); k++)
            if (mt_pv_from_json(json_array_get(j, k), &item) != 0 || box_add(b, &item) != 0) {
                mt_pv_release(&item);
                mt_pv_release(out);
                return MEMTRACE_ENOMEM;
            }
        return 0;
    }
    const char *key;
    json_t *val;
    json_object_foreach(j, key, val)
    {
        struct mt_pv k = {.type = MT_PV_STR, .n = (uint32_t)strlen(key), .u.s = key};
        if (box_add(b, &k) != 0 || mt_pv_from_json(val, &item) != 0 || box_add(b, &item) != 0) {
            if (b->n % 2)
                b->n--;
            mt_pv_release(&item);
            mt_pv_release(out);
            return MEMTRACE_ENOMEM;
        }
    }
    return 0;
}

int mt_pickle_load(const unsigned char *buf, size_t len, json_t **out, struct mt_pickle_error *err)
{
    struct mt_pv v;
    *out = NULL;
    int rc = mt_pickle_read(buf, len, NULL, &v, err);
    if (rc)
        return rc;
    *out = mt_pv_to_json(&v);
    mt_pv_release(&v);
    if (!*out)
        return fail(err, MEMTRACE_ENOMEM, 0, "out of memory reading the pickle");
    return 0;
}

/* The writer. */

/* Without the stream's lock: only the writer's thread writes f (pickle.h). */
static void put1(struct mt_pkw *w, unsigned b)
{
    putc_unlocked((int)b, w->f);
}

static void putle(struct mt_pkw *w, uint64_t v, int n)
{
    for (int k = 0; k < n; k++)
        put1(w, (unsigned)(v >> (8 * k)) & 0xff);
}

/* Before one more item of the innermost list: APPENDS in batches of 1000 as Python
 * does. Done before the item, so that a memo put right after a value still finds
 * that value on top of the stack. */
static void item(struct mt_pkw *w)
{
    if (w->depth == 0 || w->depth > 32)
        return;
    int d = w->depth - 1;
    if (w->kind[d] == 'l' && w->items[d]++ == 1000) {
        put1(w, OP_APPENDS);
        put1(w, OP_MARK);
        w->items[d] = 1;
    }
}

void mt_pkw_begin(struct mt_pkw *w, FILE *f)
{
    memset(w, 0, sizeof(*w));
    w->f = f;
    put1(w, OP_PROTO);
    put1(w, 4);
}

static void open_container(struct mt_pkw *w, unsigned char kind)
{
    item(w);
    if (kind == 'd')
        put1(w, OP_EMPTY_DICT);
    else if (kind == 'l')
        put1(w, OP_EMPTY_LIST);
    put1(w, OP_MARK);
    if (w->depth < 32) {
        w->kind[w->depth] = kind;
        w->items[w->depth] = 0;
    }
    w->depth++;
}

void mt_pkw_dict(struct mt_pkw *w)
{
    open_container(w, 'd');
}

void mt_pkw_list(struct mt_pkw *w)
{
    open_container(w, 'l');
}

void mt_pkw_tuple(struct mt_pkw *w)
{
    open_container(w, 't');
}

void mt_pkw_close(struct mt_pkw *w)
{
    if (w->depth == 0 || w->depth > 32)
        return;
    unsigned char kind = w->kind[--w->depth];
    put1(w, kind == 'd' ? OP_SETITEMS : kind == 'l' ? OP_APPENDS : OP_TUPLE);
}

void mt_pkw_uint(struct mt_pkw *w, uint64_t v)
{
    if (v <= INT64_MAX) {
        mt_pkw_int(w, (int64_t)v);
        return;
    }
    item(w);
    put1(w, OP_LONG1); /* 9 bytes: the value and a 0 sign byte */
    put1(w, 9);
    putle(w, v, 8);
    put1(w, 0);
}

void mt_pkw_int(struct mt_pkw *w, int64_t v)
{
    item(w);
    if (v >= 0 && v < 256) {
        put1(w, OP_BININT1);
        put1(w, (unsigned)v);
    } else if (v >= 0 && v < 65536) {
        put1(w, OP_BININT2);
        putle(w, (uint64_t)v, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        put1(w, OP_BININT);
        putle(w, (uint64_t)(uint32_t)(int32_t)v, 4);
    } else {
        /* the shortest two's complement that keeps the sign */
        int n = 8;
        while (n > 1) {
            int64_t lo = -(INT64_C(1) << (8 * (n - 1) - 1));
            int64_t hi = (INT64_C(1) << (8 * (n - 1) - 1)) - 1;
            if (v < lo || v > hi)
                break;
            n--;
        }
        put1(w, OP_LONG1);
        put1(w, (unsigned)n);
        putle(w, (uint64_t)v, n);
    }
}

void mt_pkw_str(struct mt_pkw *w, const char *s)
{
    item(w);
    size_t n = strlen(s);
    if (n < 256) {
        put1(w, OP_SHORT_BINUNICODE);
        put1(w, (unsigned)n);
    } else {
        put1(w, OP_BINUNICODE);
        putle(w, n, 4);
    }
    fwrite(s, 1, n, w->f);
}

void mt_pkw_bool(struct mt_pkw *w, int v)
{
    item(w);
    put1(w, v ? OP_NEWTRUE : OP_NEWFALSE);
}

void mt_pkw_none(struct mt_pkw *w)
{
    item(w);
    put1(w, OP_NONE);
}

void mt_pkw_float(struct mt_pkw *w, double v)
{
    item(w);
    uint64_t u;
    memcpy(&u, &v, sizeof(u));
    put1(w, OP_BINFLOAT);
    for (int k = 7; k >= 0; k--)
        put1(w, (unsigned)(u >> (8 * k)) & 0xff);
}

uint32_t mt_pkw_put(struct mt_pkw *w)
{
    uint32_t id = w->next_memo++;
    if (id < 256) {
        put1(w, OP_BINPUT);
        put1(w, id);
    } else {
        put1(w, OP_LONG_BINPUT);
        putle(w, id, 4);
    }
    return id;
}

void mt_pkw_get(struct mt_pkw *w, uint32_t id)
{
    item(w);
    if (id < 256) {
        put1(w, OP_BINGET);
        put1(w, id);
    } else {
        put1(w, OP_LONG_BINGET);
        putle(w, id, 4);
    }
}

int mt_pkw_end(struct mt_pkw *w)
{
    put1(w, OP_STOP);
    return ferror(w->f) ? MEMTRACE_EIO : 0;
}
