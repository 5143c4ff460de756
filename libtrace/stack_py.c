/* stack_py.c: the calling thread's CPython frames, without the GIL.
 *
 * Only the thread that owns a frame chain changes it, and a thread that is inside
 * an allocation is not running Python, so a thread may read its own chain whether
 * it holds the GIL or released it before calling into C (ctypes, PyTorch's
 * operators): no lock is taken, so no GIL holder, fork or shutdown can make this
 * wait. The frames pin their code objects, and the code objects their name and
 * file strings, for as long as the thread stays inside the call.
 *
 * The chain and the objects are read through a layout: offsets generated from each
 * version's headers for 3.9 to 3.12, and from the _Py_DebugOffsets the interpreter
 * publishes at the start of _PyRuntime for 3.13 and later. Every object is checked
 * against its type (PyCode_Type, PyUnicode_Type, PyFrame_Type) before it is read
 * further, so a layout that does not fit gives no frames rather than wrong ones.
 *
 * A frame is found again without the lock: (code object, instruction offset) in a
 * table of immutable entries gives its token, after checking that the code object
 * at that address still has the name, file and first line the entry saw (code
 * objects are freed and their addresses reused). A miss takes the lock, asks the
 * interpreter for the line (PyCode_Addr2Line and PyFrame_GetLineNumber read the
 * line table, allocate nothing and need no GIL), copies the two strings as UTF-8
 * into the string table, and interns (function, file, line) as one record. */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "stack_py.h"
#include "strtab.h"
#include "mtx/util.h"

enum model {
    MODEL_FRAMEOBJ = 1, /* 3.9, 3.10: tstate->frame, PyFrameObject.f_back */
    MODEL_CFRAME,       /* 3.11, 3.12: tstate->cframe->current_frame, _PyInterpreterFrame */
    MODEL_IFRAME,       /* 3.13+: tstate->current_frame, offsets from _Py_DebugOffsets */
};

struct layout {
    unsigned long version; /* major << 8 | minor */
    int model;
    size_t ts_frame;   /* tstate: frame (3.9/3.10), cframe (3.11/3.12), current_frame */
    size_t cf_current; /* _PyCFrame.current_frame */
    size_t f_back, f_code, f_instr;
    size_t f_owner;     /* 0: none */
    size_t f_is_entry;  /* 3.11 only */
    int owner_cstack;   /* 3.12: owner of the C stack's shim frame */
    uintptr_t ref_mask; /* 3.14 tags f_executable's low bits */
    size_t co_name, co_file, co_firstlineno, co_code;
    size_t u_state, u_length, u_ascii, u_compact;
};

/* From each version's headers (offsetof on x86_64 and aarch64, built with
 * Py_BUILD_CORE); docs/python.md gives the program that prints them. */
static const struct layout layouts[] = {
    {.version = 0x309,
     .model = MODEL_FRAMEOBJ,
     .ts_frame = 24,
     .f_back = 24,
     .f_code = 32,
     .f_instr = 104,
     .co_name = 112,
     .co_file = 104,
     .co_firstlineno = 40,
     .u_state = 32,
     .u_length = 16,
     .u_ascii = 48,
     .u_compact = 72},
    {.version = 0x30a,
     .model = MODEL_FRAMEOBJ,
     .ts_frame = 24,
     .f_back = 24,
     .f_code = 32,
     .f_instr = 96,
     .co_name = 112,
     .co_file = 104,
     .co_firstlineno = 40,
     .u_state = 32,
     .u_length = 16,
     .u_ascii = 48,
     .u_compact = 72},
    {.version = 0x30b,
     .model = MODEL_CFRAME,
     .ts_frame = 56,
     .cf_current = 8,
     .f_back = 48,
     .f_code = 32,
     .f_instr = 56,
     .f_is_entry = 68,
     .co_name = 120,
     .co_file = 112,
     .co_firstlineno = 72,
     .co_code = 184,
     .u_state = 32,
     .u_length = 16,
     .u_ascii = 48,
     .u_compact = 72},
    {.version = 0x30c,
     .model = MODEL_CFRAME,
     .ts_frame = 56,
     .cf_current = 0,
     .f_back = 8,
     .f_code = 0,
     .f_instr = 56,
     .f_owner = 70,
     .owner_cstack = 3,
     .co_name = 120,
     .co_file = 112,
     .co_firstlineno = 68,
     .co_code = 192,
     .u_state = 32,
     .u_length = 16,
     .u_ascii = 40,
     .u_compact = 56},
};

typedef int (*int_fn)(void);
typedef void *(*ptr_fn)(void);
typedef int (*addr2line_fn)(void *code, int addr);
typedef int (*frameline_fn)(void *frame);

static struct {
    struct layout l;
    int_fn is_initialized, is_finalizing;
    ptr_fn this_tstate;
    addr2line_fn addr2line;
    frameline_fn frame_line;
    const void *code_type, *unicode_type, *frame_type;
    uintptr_t eval_lo, eval_hi; /* _PyEval_EvalFrameDefault's code */
    unsigned long hexversion;
} py;

static pthread_once_t py_once = PTHREAD_ONCE_INIT;
static atomic_int py_ready; /* 1: frames can be read */

/* ---- finding the interpreter ------------------------------------------------ */

static void *sym(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

/* _Py_DebugOffsets as 3.13 and 3.14 lay it out: uint64_t fields in sections that
 * each open with the size of the structure they describe. The index of each field
 * that memtrace reads, per version. */
struct dbg_index {
    unsigned long version;
    int finalizing, ts, ts_frame, f, f_back, f_code, f_instr, f_owner, co, co_file, co_name,
        co_firstlineno, co_code, u, u_state, u_length, u_ascii;
};
static const struct dbg_index dbg_indices[] = {
    {0x30d, 4, 19, 23, 28, 29, 30, 31, 33, 34, 35, 36, 39, 43, 67, 68, 69, 70},
    {0x30e, 4, 22, 26, 31, 32, 33, 34, 36, 39, 40, 41, 44, 48, 77, 78, 79, 80},
};

static bool dbg_field_ok(const uint64_t *d, int section, int field)
{
    return d[section] >= 16 && d[section] <= (1u << 20) && d[field] < d[section];
}

static bool layout_from_debug_offsets(unsigned long hex)
{
    const uint64_t *d = sym("_PyRuntime");
    if (d == NULL || memcmp(d, "xdebugpy", 8) != 0 || d[2] != 0) /* d[2]: free-threaded */
        return false;
    if ((d[1] >> 16) != (hex >> 16))
        return false;
    const struct dbg_index *x = NULL;
    for (size_t i = 0; i < MTX_ARRAY_SIZE(dbg_indices); i++)
        if (dbg_indices[i].version == hex >> 16)
            x = &dbg_indices[i];
    if (x == NULL)
        return false;
    if (!dbg_field_ok(d, x->ts, x->ts_frame) || !dbg_field_ok(d, x->f, x->f_back) ||
        !dbg_field_ok(d, x->f, x->f_code) || !dbg_field_ok(d, x->f, x->f_instr) ||
        !dbg_field_ok(d, x->f, x->f_owner) || !dbg_field_ok(d, x->co, x->co_file) ||
        !dbg_field_ok(d, x->co, x->co_name) || !dbg_field_ok(d, x->co, x->co_firstlineno) ||
        !dbg_field_ok(d, x->co, x->co_code) || !dbg_field_ok(d, x->u, x->u_state) ||
        !dbg_field_ok(d, x->u, x->u_length) || (d[x->u_ascii] != 40 && d[x->u_ascii] != 48))
        return false;
    py.l = (struct layout){
        .version = hex >> 16,
        .model = MODEL_IFRAME,
        .ts_frame = d[x->ts_frame],
        .f_back = d[x->f_back],
        .f_code = d[x->f_code],
        .f_instr = d[x->f_instr],
        .f_owner = d[x->f_owner],
        .ref_mask = hex >> 16 >= 0x30e ? ~(uintptr_t)3 : ~(uintptr_t)0,
        .co_name = d[x->co_name],
        .co_file = d[x->co_file],
        .co_firstlineno = d[x->co_firstlineno],
        .co_code = d[x->co_code],
        .u_state = d[x->u_state],
        .u_length = d[x->u_length],
        .u_ascii = d[x->u_ascii],
        .u_compact = d[x->u_ascii] + 16,
    };
    return true;
}

/* PY_VERSION_HEX from Py_Version (3.11+), else from Py_GetVersion()'s text. */
static unsigned long find_version(void)
{
    const unsigned long *v = sym("Py_Version");
    if (v != NULL)
        return *v;
    const char *(*get)(void) = (const char *(*)(void))sym("Py_GetVersion");
    if (get == NULL)
        return 0;
    const char *s = get();
    unsigned long major = 0, minor = 0;
    while (*s >= '0' && *s <= '9')
        major = major * 10 + (unsigned long)(*s++ - '0');
    if (*s++ != '.')
        return 0;
    while (*s >= '0' && *s <= '9')
        minor = minor * 10 + (unsigned long)(*s++ - '0');
    return major << 24 | minor << 16;
}

static void py_init(void)
{
    py.is_initialized = (int_fn)sym("Py_IsInitialized");
    py.this_tstate = (ptr_fn)sym("PyGILState_GetThisThreadState");
    if (py.is_initialized == NULL || py.this_tstate == NULL)
        return; /* no interpreter in this process: nothing to say */
    py.hexversion = find_version();
    unsigned long mm = py.hexversion >> 16;
    bool found = false;
    for (size_t i = 0; i < MTX_ARRAY_SIZE(layouts); i++) {
        if (layouts[i].version == mm) {
            py.l = layouts[i];
            found = true;
        }
    }
    if (!found && mm >= 0x30d)
        found = layout_from_debug_offsets(py.hexversion);
    py.is_finalizing = (int_fn)sym("Py_IsFinalizing");
    if (py.is_finalizing == NULL)
        py.is_finalizing = (int_fn)sym("_Py_IsFinalizing");
    py.addr2line = (addr2line_fn)sym("PyCode_Addr2Line");
    py.frame_line = (frameline_fn)sym("PyFrame_GetLineNumber");
    py.code_type = sym("PyCode_Type");
    py.unicode_type = sym("PyUnicode_Type");
    py.frame_type = sym("PyFrame_Type");
    void *eval = sym("_PyEval_EvalFrameDefault");
    Dl_info info;
    const ElfW(Sym) *es = NULL;
    if (eval != NULL && dladdr1(eval, &info, (void **)&es, RTLD_DL_SYMENT) != 0 && es != NULL) {
        py.eval_lo = (uintptr_t)eval;
        py.eval_hi = (uintptr_t)eval + es->st_size;
    }
    if (found &&
        (py.is_finalizing == NULL || py.addr2line == NULL || py.code_type == NULL ||
         py.unicode_type == NULL ||
         (py.l.model == MODEL_FRAMEOBJ && (py.frame_line == NULL || py.frame_type == NULL))))
        found = false;
    if (!found) {
        mtx_log("Python %lu.%lu is not supported: its stacks are native only", mm >> 8, mm & 0xff);
        return;
    }
    atomic_store_explicit(&py_ready, 1, memory_order_release);
}

int mt_py_status(unsigned long *version)
{
    pthread_once(&py_once, py_init);
    if (version != NULL)
        *version = py.is_initialized != NULL ? py.hexversion : 0;
    return atomic_load_explicit(&py_ready, memory_order_acquire);
}

/* ---- reading objects -------------------------------------------------------- */

static inline uintptr_t rd_ptr(uintptr_t base, size_t off)
{
    return *(const uintptr_t *)(base + off);
}

static inline bool is_type(uintptr_t obj, const void *type)
{
    return obj != 0 && (obj & 7) == 0 && rd_ptr(obj, 8) == (uintptr_t)type;
}

static size_t put_utf8(char *out, size_t at, size_t cap, uint32_t c)
{
    char b[4];
    size_t n;
    if (c < 0x80) {
        b[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        b[0] = (char)(0xc0 | c >> 6);
        b[1] = (char)(0x80 | (c & 0x3f));
        n = 2;
    } else if (c < 0x10000) {
        b[0] = (char)(0xe0 | c >> 12);
        b[1] = (char)(0x80 | (c >> 6 & 0x3f));
        b[2] = (char)(0x80 | (c & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | c >> 18);
        b[1] = (char)(0x80 | (c >> 12 & 0x3f));
        b[2] = (char)(0x80 | (c >> 6 & 0x3f));
        b[3] = (char)(0x80 | (c & 0x3f));
        n = 4;
    }
    if (at + n >= cap)
        return at;
    memcpy(out + at, b, n);
    return at + n;
}

/* A str object's text as UTF-8 into out (cap bytes, NUL-terminated), "?" when it is
 * no compact string. */
static void read_str(uintptr_t s, char *out, size_t cap)
{
    strcpy(out, "?");
    if (!is_type(s, py.unicode_type))
        return;
    uint32_t state = *(const uint32_t *)(s + py.l.u_state);
    unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
    if (!compact || (kind != 1 && kind != 2 && kind != 4))
        return;
    size_t len = *(const size_t *)(s + py.l.u_length);
    const unsigned char *data = (const unsigned char *)s + (ascii ? py.l.u_ascii : py.l.u_compact);
    size_t at = 0;
    for (size_t i = 0; i < len && at + 1 < cap; i++) {
        uint32_t c = kind == 1   ? data[i]
                     : kind == 2 ? ((const uint16_t *)(const void *)data)[i]
                                 : ((const uint32_t *)(const void *)data)[i];
        size_t next = put_utf8(out, at, cap, c);
        if (next == at)
            break;
        at = next;
    }
    out[at] = '\0';
}

/* ---- interning -------------------------------------------------------------- */

/* A (code, offset) seen before; immutable once published. */
struct pc_entry {
    uintptr_t code, name, file;
    int32_t off, firstlineno;
    uintptr_t token;
};
struct pc_table {
    size_t mask, used;
    _Atomic(struct pc_entry *) slot[];
};

/* One Python frame as files show it; the token's low bits index these. */
struct pyframe {
    uint32_t function, file, line;
};

#define MT_PY_NAME_MAX 512

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct pc_table *) pcs;
static struct mtx_arena arena; /* pc entries; the lock holder only */
static size_t pc_bytes;
#define PC_MAX_BYTES ((size_t)16 << 20)
static struct pyframe *frames; /* index id - 1; the lock holder only */
static uint32_t nframes, frames_cap;
static uint32_t *frame_slots; /* open addressing: frame ids by (function, file, line) */
static uint32_t frame_slots_mask;

static inline uint64_t pc_hash(uintptr_t code, int32_t off)
{
    return mtx_hash_u64((uint64_t)code ^ (uint64_t)(uint32_t)off << 48 ^ (uint64_t)off);
}

static inline uint64_t frame_hash(const struct pyframe *f)
{
    return mtx_hash_u64((uint64_t)f->function << 32 ^ f->file ^ (uint64_t)f->line << 17);
}

/* Lock held. */
static bool frame_slots_grow(void)
{
    uint32_t cap = frame_slots ? (frame_slots_mask + 1) * 2 : 1024;
    uint32_t *s = mtx_map(cap * sizeof *s);
    if (s == NULL)
        return false;
    for (uint32_t id = 1; id <= nframes; id++) {
        size_t j = frame_hash(&frames[id - 1]) & (cap - 1);
        while (s[j] != 0)
            j = (j + 1) & (cap - 1);
        s[j] = id;
    }
    if (frame_slots)
        mtx_unmap(frame_slots, (frame_slots_mask + 1) * sizeof *s);
    frame_slots = s;
    frame_slots_mask = cap - 1;
    return true;
}

/* Lock held: the id of f, interned. 0 when memory is exhausted. */
static uint32_t frame_intern(const struct pyframe *f)
{
    if ((nframes + 1) * 2 > (frame_slots ? frame_slots_mask + 1 : 0) && !frame_slots_grow())
        return 0;
    size_t j = frame_hash(f) & frame_slots_mask;
    for (; frame_slots[j] != 0; j = (j + 1) & frame_slots_mask) {
        const struct pyframe *g = &frames[frame_slots[j] - 1];
        if (g->function == f->function && g->file == f->file && g->line == f->line)
            return frame_slots[j];
    }
    if (nframes == frames_cap) {
        uint32_t cap = frames_cap ? frames_cap * 2 : 1024;
        struct pyframe *n = mtx_map(cap * sizeof *n);
        if (n == NULL)
            return 0;
        if (frames != NULL) {
            memcpy(n, frames, nframes * sizeof *n);
            mtx_unmap(frames, frames_cap * sizeof *n);
        }
        frames = n;
        frames_cap = cap;
    }
    frames[nframes++] = *f;
    frame_slots[j] = nframes;
    return nframes;
}

static void pc_put(struct pc_table *t, struct pc_entry *e)
{
    size_t j = pc_hash(e->code, e->off) & t->mask;
    for (;; j = (j + 1) & t->mask) {
        struct pc_entry *o = atomic_load_explicit(&t->slot[j], memory_order_relaxed);
        if (o == NULL) {
            t->used++;
            break;
        }
        if (o->code == e->code && o->off == e->off)
            break; /* a stale entry for a reused address: replaced */
    }
    atomic_store_explicit(&t->slot[j], e, memory_order_release);
}

/* Lock held. Old tables stay mapped: a lock-free reader may still be probing one. */
static void pc_insert(const struct pc_entry *proto)
{
    if (pc_bytes + sizeof *proto > PC_MAX_BYTES)
        return;
    struct pc_table *t = atomic_load_explicit(&pcs, memory_order_relaxed);
    if (t == NULL || (t->used + 1) * 2 > t->mask + 1) {
        size_t cap = t ? (t->mask + 1) * 2 : 1024;
        struct pc_table *nt = mtx_map(sizeof *nt + cap * sizeof nt->slot[0]);
        if (nt == NULL)
            return;
        nt->mask = cap - 1;
        for (size_t i = 0; t && i <= t->mask; i++) {
            struct pc_entry *old = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
            if (old != NULL)
                pc_put(nt, old);
        }
        atomic_store_explicit(&pcs, nt, memory_order_release);
        t = nt;
    }
    struct pc_entry *e = mtx_arena_alloc(&arena, sizeof *e, _Alignof(struct pc_entry));
    if (e == NULL)
        return;
    pc_bytes += sizeof *e;
    *e = *proto;
    pc_put(t, e);
}

/* The frame's token, interning it on a miss. frame is the frame object (3.9/3.10),
 * for the line; 0 when the frame cannot be named. */
static uintptr_t token_of(uintptr_t code, int32_t off, uintptr_t frame)
{
    uintptr_t name = rd_ptr(code, py.l.co_name), file = rd_ptr(code, py.l.co_file);
    int32_t first = *(const int32_t *)(code + py.l.co_firstlineno);
    uint64_t h = pc_hash(code, off);
    struct pc_table *t = atomic_load_explicit(&pcs, memory_order_acquire);
    for (size_t j = t ? h & t->mask : 0; t != NULL; j = (j + 1) & t->mask) {
        const struct pc_entry *e = atomic_load_explicit(&t->slot[j], memory_order_acquire);
        if (e == NULL)
            break;
        if (e->code == code && e->off == off) {
            if (MTX_LIKELY(e->name == name && e->file == file && e->firstlineno == first))
                return e->token;
            break;
        }
    }

    /* A miss: name it outside the lock (this thread's own objects), intern inside. */
    char text[2][MT_PY_NAME_MAX];
    read_str(name, text[0], sizeof text[0]);
    read_str(file, text[1], sizeof text[1]);
    int line = py.l.model == MODEL_FRAMEOBJ ? py.frame_line((void *)frame)
                                            : py.addr2line((void *)code, off);
    struct pyframe f = {
        .function = mt_strings_intern(text[0]),
        .file = mt_strings_intern(text[1]),
        .line = line > 0 ? (uint32_t)line : 0,
    };
    if (f.function == 0 || f.file == 0)
        return 0;
    pthread_mutex_lock(&lock);
    uint32_t id = frame_intern(&f);
    uintptr_t token = id ? MT_PY_TAG | id : 0;
    if (token != 0) {
        struct pc_entry e = {.code = code,
                             .name = name,
                             .file = file,
                             .off = off,
                             .firstlineno = first,
                             .token = token};
        pc_insert(&e);
    }
    pthread_mutex_unlock(&lock);
    return token;
}

/* ---- capture ---------------------------------------------------------------- */

#define MAX_WALK 1024 /* frames visited, skipped ones included: a bound on a bad chain */

static inline void push(struct mt_py_stack *st, uintptr_t tok)
{
    if (tok != 0 && st->n < (int)MTX_ARRAY_SIZE(st->tok)) {
        st->tok[st->n] = tok;
        st->end[st->n] = 0;
        st->n++;
    }
}

static inline void end_group(struct mt_py_stack *st)
{
    if (st->n > 0)
        st->end[st->n - 1] = 1;
}

static void walk_frame_objects(uintptr_t f, struct mt_py_stack *st)
{
    for (int k = 0; f != 0 && k < MAX_WALK && st->n < (int)MTX_ARRAY_SIZE(st->tok); k++) {
        if (!is_type(f, py.frame_type))
            return;
        uintptr_t code = rd_ptr(f, py.l.f_code);
        if (!is_type(code, py.code_type))
            return;
        int32_t lasti = *(const int32_t *)(f + py.l.f_instr);
        push(st, token_of(code, lasti, f));
        end_group(st); /* one activation of the loop per frame */
        f = rd_ptr(f, py.l.f_back);
    }
}

static void walk_interpreter_frames(uintptr_t f, struct mt_py_stack *st)
{
    const struct layout *l = &py.l;
    for (int k = 0; f != 0 && k < MAX_WALK && st->n < (int)MTX_ARRAY_SIZE(st->tok); k++) {
        if ((f & 7) != 0)
            return;
        uintptr_t code = rd_ptr(f, l->f_code) & (l->ref_mask ? l->ref_mask : ~(uintptr_t)0);
        int owner = l->f_owner ? *(const uint8_t *)(f + l->f_owner) : 0;
        bool shim = (l->owner_cstack != 0 && owner == l->owner_cstack) ||
                    (l->model == MODEL_IFRAME && !is_type(code, py.code_type));
        if (shim) {
            end_group(st); /* a C call entered the loop here */
        } else {
            if (!is_type(code, py.code_type))
                return;
            uintptr_t instr = rd_ptr(f, l->f_instr);
            intptr_t off = (intptr_t)(instr - (code + l->co_code));
            if (off < -2 || off > (intptr_t)1 << 30)
                off = -2;
            push(st, token_of(code, (int32_t)off, 0));
            if (l->f_is_entry && *(const uint8_t *)(f + l->f_is_entry))
                end_group(st);
        }
        f = rd_ptr(f, l->f_back);
    }
}

int mt_py_capture(struct mt_py_stack *st)
{
    st->n = 0;
    if (MTX_UNLIKELY(!atomic_load_explicit(&py_ready, memory_order_acquire))) {
        pthread_once(&py_once, py_init);
        if (!atomic_load_explicit(&py_ready, memory_order_acquire))
            return 0;
    }
    if (!py.is_initialized() || py.is_finalizing())
        return 0;
    uintptr_t ts = (uintptr_t)py.this_tstate();
    if (ts == 0)
        return 0; /* a thread the interpreter does not know: native frames only */
    uintptr_t f = rd_ptr(ts, py.l.ts_frame);
    if (py.l.model == MODEL_FRAMEOBJ) {
        walk_frame_objects(f, st);
    } else {
        if (py.l.model == MODEL_CFRAME)
            f = f != 0 ? rd_ptr(f, py.l.cf_current) : 0;
        walk_interpreter_frames(f, st);
    }
    end_group(st);
    return st->n;
}

int mt_py_splice(const uintptr_t *native, int n, const struct mt_py_stack *py_st, uintptr_t *out,
                 int max)
{
    int k = 0, p = 0;
    for (int i = 0; i < n && k < max; i++) {
        uintptr_t ip = native[i];
        if (ip - 1 >= py.eval_lo && ip - 1 < py.eval_hi && p < py_st->n) {
            do
                out[k++] = py_st->tok[p];
            while (!py_st->end[p++] && p < py_st->n && k < max);
        } else {
            out[k++] = ip;
        }
    }
    while (p < py_st->n && k < max)
        out[k++] = py_st->tok[p++];
    return k;
}

int mt_py_frame(uintptr_t token, uint32_t *function, uint32_t *file, uint32_t *line)
{
    if (!mt_py_is_token(token))
        return -1;
    uint32_t id = (uint32_t)(token & ~MT_PY_TAG);
    int rc = -1;
    pthread_mutex_lock(&lock);
    if (id != 0 && id <= nframes) {
        *function = frames[id - 1].function;
        *file = frames[id - 1].file;
        *line = frames[id - 1].line;
        rc = 0;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

void mt_py_atfork_child(void)
{
    pthread_mutex_init(&lock, NULL);
}
