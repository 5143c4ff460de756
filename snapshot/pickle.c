/* pickle.c: the safe pickle reader and the protocol 4 writer (see pickle.h).
 *
 * Reading is two passes over the bytes. The scan walks opcode by opcode with each
 * one's argument length, refusing the first opcode that imports or calls and any
 * opcode outside the data-only set; so a hostile file is refused before a single
 * object exists. The build pass then runs a stack machine over the same opcodes:
 * a stack of values, a stack of marks, a memo (ids bounded by the input's size), and
 * beside them a table keyed by each container's address holding its height and
 * whether it sits inside another: a container inside another is frozen, which keeps
 * the result a tree with shared leaves and no cycles, and heights bound the depth.
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

#include "addrtab.h"
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

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; k--)
        v = v << 8 | p[k];
    return v;
}

/* Bytes of op's argument at p (len bytes left after the opcode), or -1 when op is not
 * one of ours, -2 when the argument runs past the end. */
static int64_t arg_len(unsigned op, const unsigned char *p, size_t left)
{
    uint64_t n;
    switch (op) {
    case OP_MARK:
    case OP_STOP:
    case OP_POP:
    case OP_POP_MARK:
    case OP_NONE:
    case OP_APPEND:
    case OP_DICT:
    case OP_APPENDS:
    case OP_LIST:
    case OP_SETITEM:
    case OP_TUPLE:
    case OP_SETITEMS:
    case OP_EMPTY_DICT:
    case OP_EMPTY_LIST:
    case OP_EMPTY_TUPLE:
    case OP_TUPLE1:
    case OP_TUPLE2:
    case OP_TUPLE3:
    case OP_NEWTRUE:
    case OP_NEWFALSE:
    case OP_MEMOIZE:
        return 0;
    case OP_PROTO:
    case OP_BININT1:
    case OP_BINGET:
    case OP_BINPUT:
        return left < 1 ? -2 : 1;
    case OP_BININT2:
        return left < 2 ? -2 : 2;
    case OP_BININT:
    case OP_LONG_BINGET:
    case OP_LONG_BINPUT:
        return left < 4 ? -2 : 4;
    case OP_BINFLOAT:
    case OP_FRAME:
        return left < 8 ? -2 : 8;
    case OP_LONG1:
    case OP_SHORT_BINUNICODE:
        if (left < 1)
            return -2;
        n = p[0];
        return n > left - 1 ? -2 : (int64_t)(1 + n);
    case OP_LONG4:
    case OP_BINUNICODE:
        if (left < 4)
            return -2;
        n = le(p, 4);
        return n > left - 4 ? -2 : (int64_t)(4 + n);
    case OP_BINUNICODE8:
        if (left < 8)
            return -2;
        n = le(p, 8);
        return n > left - 8 ? -2 : (int64_t)(8 + n);
    default:
        return -1;
    }
}

/* The scan: every opcode is ours, every argument is inside the input, a STOP ends it. */
static int scan(const unsigned char *buf, size_t len, struct mt_pickle_error *err)
{
    size_t i = 0;
    while (i < len) {
        unsigned op = buf[i];
        const char *name = code_opcode(op);
        if (name)
            return fail(err, MEMTRACE_EFORMAT, i,
                        "pickle opcode %s at offset %zu would import or call code; refused", name,
                        i);
        int64_t a = arg_len(op, buf + i + 1, len - i - 1);
        if (a == -1)
            return fail(err, MEMTRACE_EFORMAT, i,
                        "unsupported pickle opcode 0x%02x at offset %zu (not a plain-data pickle)",
                        op, i);
        if (a == -2)
            return fail(err, MEMTRACE_EFORMAT, i,
                        "pickle truncated: opcode at offset %zu runs past "
                        "the end",
                        i);
        if (op == OP_PROTO && (buf[i + 1] < 2 || buf[i + 1] > 5))
            return fail(err, MEMTRACE_EFORMAT, i,
                        "pickle protocol %u at offset %zu: only 2 to 5 are "
                        "read",
                        buf[i + 1], i);
        if (op == OP_STOP)
            return 0;
        i += 1 + (size_t)a;
    }
    return fail(err, MEMTRACE_EFORMAT, len, "pickle truncated: no STOP opcode before the end");
}

/* What the build pass keeps per container. */
struct cinfo {
    struct mt_addrtab_head head; /* key: the json_t's address */
    uint32_t height;             /* 1 for an empty container */
    uint32_t frozen;             /* inside another container */
};

struct vm {
    const unsigned char *buf;
    size_t len, off;
    json_t **stack;
    size_t n, cap;
    size_t *marks;
    size_t nmarks, capmarks;
    json_t **memo;
    size_t capmemo;
    uint32_t next_memo;
    struct mt_addrtab info;
    struct mt_pickle_error *err;
};

static int nomem(struct vm *v)
{
    return fail(v->err, MEMTRACE_ENOMEM, v->off, "out of memory reading the pickle");
}

/* Pushes j; a fresh container (just made) starts with height 1, unfrozen, whatever a
 * freed container at the same address left in the table. */
static int push_v(struct vm *v, json_t *j, int fresh)
{
    if (!j)
        return nomem(v);
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        json_t **s = realloc(v->stack, cap * sizeof(*s));
        if (!s) {
            json_decref(j);
            return nomem(v);
        }
        v->stack = s;
        v->cap = cap;
    }
    v->stack[v->n++] = j;
    if (json_is_object(j) || json_is_array(j)) {
        int existed;
        struct cinfo *ci = mt_addrtab_get(&v->info, (uint64_t)(uintptr_t)j, &existed);
        if (!ci)
            return nomem(v);
        if (!existed || fresh) {
            ci->height = 1;
            ci->frozen = 0;
        }
    }
    return 0;
}

static int push(struct vm *v, json_t *j)
{
    return push_v(v, j, 1);
}

static int bad(struct vm *v, const char *what)
{
    return fail(v->err, MEMTRACE_EFORMAT, v->off, "corrupt pickle at offset %zu: %s", v->off, what);
}

/* Puts child into parent's bookkeeping: parent must not be frozen, child freezes. */
static int adopt(struct vm *v, json_t *parent, json_t *child)
{
    struct cinfo *p = mt_addrtab_find(&v->info, (uint64_t)(uintptr_t)parent);
    if (!p)
        return bad(v, "not a container");
    if (p->frozen || parent == child)
        return bad(v, "a container changed after it was put inside another");
    if (json_is_object(child) || json_is_array(child)) {
        struct cinfo *c = mt_addrtab_find(&v->info, (uint64_t)(uintptr_t)child);
        if (!c)
            return bad(v, "unknown container");
        c->frozen = 1;
        uint32_t h = c->height + 1;
        p = mt_addrtab_find(&v->info, (uint64_t)(uintptr_t)parent);
        if (h > p->height)
            p->height = h;
        if (p->height > MT_PICKLE_MAX_DEPTH)
            return fail(v->err, MEMTRACE_EFORMAT, v->off,
                        "pickle nests deeper than %d at offset %zu; refused", MT_PICKLE_MAX_DEPTH,
                        v->off);
    }
    return 0;
}

/* Appends stack[from..n) to the array a (stealing them). */
static int append_range(struct vm *v, json_t *a, size_t from)
{
    if (!json_is_array(a))
        return bad(v, "APPEND to something not a list");
    for (size_t k = from; k < v->n; k++) {
        int rc = adopt(v, a, v->stack[k]);
        if (rc)
            return rc;
        if (json_array_append_new(a, v->stack[k]) != 0) {
            v->n = k + 1;
            return nomem(v);
        }
        v->stack[k] = NULL;
    }
    v->n = from;
    return 0;
}

static int set_range(struct vm *v, json_t *d, size_t from)
{
    if (!json_is_object(d))
        return bad(v, "SETITEM on something not a dict");
    if ((v->n - from) % 2)
        return bad(v, "odd number of items for SETITEMS");
    for (size_t k = from; k < v->n; k += 2) {
        json_t *key = v->stack[k], *val = v->stack[k + 1];
        char kbuf[32];
        const char *ks;
        if (json_is_string(key))
            ks = json_string_value(key);
        else if (json_is_integer(key)) {
            snprintf(kbuf, sizeof(kbuf), "%lld", (long long)json_integer_value(key));
            ks = kbuf;
        } else
            return bad(v, "a dict key that is neither a string nor an integer");
        int rc = adopt(v, d, val);
        if (rc)
            return rc;
        if (json_object_set(d, ks, val) != 0)
            return nomem(v);
    }
    for (size_t k = from; k < v->n; k++) {
        json_decref(v->stack[k]);
        v->stack[k] = NULL;
    }
    v->n = from;
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

/* A tuple (array) of stack[from..n), replacing them. */
static int make_tuple(struct vm *v, size_t from)
{
    json_t *t = json_array();
    if (!t)
        return nomem(v);
    int existed;
    struct cinfo *ci = mt_addrtab_get(&v->info, (uint64_t)(uintptr_t)t, &existed);
    if (!ci) {
        json_decref(t);
        return nomem(v);
    }
    ci->height = 1;
    ci->frozen = 0;
    int rc = 0;
    for (size_t k = from; k < v->n; k++) {
        if (rc == 0)
            rc = adopt(v, t, v->stack[k]);
        if (rc == 0 && json_array_append(t, v->stack[k]) != 0)
            rc = nomem(v);
        json_decref(v->stack[k]);
    }
    v->n = from;
    if (rc) {
        json_decref(t);
        return rc;
    }
    return push_v(v, t, 0);
}

/* Little-endian two's complement integer of n bytes. */
static json_t *long_value(const unsigned char *p, size_t n)
{
    if (n == 0)
        return json_integer(0);
    int neg = p[n - 1] & 0x80;
    if (n <= 8) {
        uint64_t u = le(p, (int)n);
        if (neg && n < 8)
            u |= ~0ull << (8 * n);
        return json_integer((json_int_t)(int64_t)u);
    }
    /* Wider: fits int64 after sign extension if the extra bytes are all sign. */
    int fits = 1;
    for (size_t k = 8; k < n; k++)
        if (p[k] != (neg ? 0xff : 0))
            fits = 0;
    if (fits && ((p[7] & 0x80) != 0) == (neg != 0))
        return json_integer((json_int_t)(int64_t)le(p, 8));
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
    char out[sizeof(digits) + 1];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    while (nd > 0)
        out[o++] = digits[--nd];
    out[o] = '\0';
    return json_string(out);
}

static int memo_set(struct vm *v, uint64_t id)
{
    if (!v->n)
        return bad(v, "memo of an empty stack");
    if (id >= v->len)
        return bad(v, "memo id beyond the input's size");
    if (id >= v->capmemo) {
        size_t cap = v->capmemo ? v->capmemo : 256;
        while (cap <= id)
            cap *= 2;
        json_t **m = realloc(v->memo, cap * sizeof(*m));
        if (!m)
            return nomem(v);
        memset(m + v->capmemo, 0, (cap - v->capmemo) * sizeof(*m));
        v->memo = m;
        v->capmemo = cap;
    }
    json_decref(v->memo[id]);
    v->memo[id] = json_incref(v->stack[v->n - 1]);
    return 0;
}

static int memo_get(struct vm *v, uint64_t id)
{
    if (id >= v->capmemo || !v->memo[id])
        return bad(v, "memo id not defined");
    return push_v(v, json_incref(v->memo[id]), 0);
}

static int step(struct vm *v, unsigned op, const unsigned char *a, size_t alen, int *stop)
{
    size_t mark;
    int rc;
    json_t *x;
    switch (op) {
    case OP_PROTO:
    case OP_FRAME:
        return 0;
    case OP_STOP:
        *stop = 1;
        return 0;
    case OP_MARK:
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
    case OP_POP:
        if (!v->n)
            return bad(v, "POP of an empty stack");
        json_decref(v->stack[--v->n]);
        return 0;
    case OP_POP_MARK:
        if ((rc = pop_mark(v, &mark)))
            return rc;
        while (v->n > mark)
            json_decref(v->stack[--v->n]);
        return 0;
    case OP_EMPTY_DICT:
        return push(v, json_object());
    case OP_EMPTY_LIST:
    case OP_EMPTY_TUPLE:
        return push(v, json_array());
    case OP_NONE:
        return push(v, json_null());
    case OP_NEWTRUE:
        return push(v, json_true());
    case OP_NEWFALSE:
        return push(v, json_false());
    case OP_BININT1:
    case OP_BININT2:
        return push(v, json_integer((json_int_t)le(a, (int)alen)));
    case OP_BININT:
        return push(v, json_integer((json_int_t)(int32_t)(uint32_t)le(a, 4)));
    case OP_BINFLOAT: {
        uint64_t u = 0;
        for (int k = 0; k < 8; k++)
            u = u << 8 | a[k];
        double d;
        memcpy(&d, &u, sizeof(d));
        if (!isfinite(d))
            return bad(v, "a float that JSON cannot hold (inf or nan)");
        return push(v, json_real(d));
    }
    case OP_LONG1:
    case OP_LONG4: {
        size_t hdr = op == OP_LONG1 ? 1 : 4;
        if (alen - hdr > MT_PICKLE_MAX_LONG)
            return fail(v->err, MEMTRACE_EFORMAT, v->off,
                        "pickle integer of %zu bytes at offset %zu is too wide; refused",
                        alen - hdr, v->off);
        return push(v, long_value(a + hdr, alen - hdr));
    }
    case OP_SHORT_BINUNICODE:
    case OP_BINUNICODE:
    case OP_BINUNICODE8: {
        size_t hdr = op == OP_SHORT_BINUNICODE ? 1 : op == OP_BINUNICODE ? 4 : 8;
        x = json_stringn((const char *)a + hdr, alen - hdr);
        if (!x)
            return bad(v, "a string that is not valid UTF-8");
        return push(v, x);
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
        return append_range(v, v->stack[v->n - 2], v->n - 1);
    case OP_APPENDS:
        if ((rc = pop_mark(v, &mark)))
            return rc;
        if (mark == 0)
            return bad(v, "APPENDS without a list");
        return append_range(v, v->stack[mark - 1], mark);
    case OP_SETITEM:
        if (v->n < 3)
            return bad(v, "SETITEM without a dict");
        return set_range(v, v->stack[v->n - 3], v->n - 2);
    case OP_SETITEMS:
        if ((rc = pop_mark(v, &mark)))
            return rc;
        if (mark == 0)
            return bad(v, "SETITEMS without a dict");
        return set_range(v, v->stack[mark - 1], mark);
    case OP_LIST:
        if ((rc = pop_mark(v, &mark)))
            return rc;
        if ((rc = push(v, json_array())))
            return rc;
        /* move the new list under its items, then append them */
        x = v->stack[v->n - 1];
        memmove(v->stack + mark + 1, v->stack + mark, (v->n - 1 - mark) * sizeof(*v->stack));
        v->stack[mark] = x;
        return append_range(v, x, mark + 1);
    case OP_DICT:
        if ((rc = pop_mark(v, &mark)))
            return rc;
        if ((rc = push(v, json_object())))
            return rc;
        x = v->stack[v->n - 1];
        memmove(v->stack + mark + 1, v->stack + mark, (v->n - 1 - mark) * sizeof(*v->stack));
        v->stack[mark] = x;
        return set_range(v, x, mark + 1);
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

int mt_pickle_load(const unsigned char *buf, size_t len, json_t **out, struct mt_pickle_error *err)
{
    *out = NULL;
    int rc = scan(buf, len, err);
    if (rc)
        return rc;
    struct vm v;
    memset(&v, 0, sizeof(v));
    v.buf = buf;
    v.len = len;
    v.err = err;
    mt_addrtab_init(&v.info, sizeof(struct cinfo));
    int stop = 0;
    size_t pos = 0;
    while (!stop) {
        v.off = pos;
        unsigned op = buf[pos];
        int64_t a = arg_len(op, buf + pos + 1, len - pos - 1); /* checked by the scan */
        rc = step(&v, op, buf + pos + 1, (size_t)a, &stop);
        if (rc)
            goto out;
        pos += 1 + (size_t)a;
    }
    if (v.n != 1) {
        rc = bad(&v, "STOP with other than one value on the stack");
        goto out;
    }
    *out = v.stack[0];
    v.n = 0;
out:
    while (v.n)
        json_decref(v.stack[--v.n]);
    for (size_t k = 0; k < v.capmemo; k++)
        json_decref(v.memo[k]);
    free(v.memo);
    free(v.stack);
    free(v.marks);
    mt_addrtab_free(&v.info);
    return rc;
}

/* The writer. */

static void put1(struct mt_pkw *w, unsigned b)
{
    fputc((int)b, w->f);
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
