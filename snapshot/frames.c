/* frames.c: which frames of a stack the views show by default (see frames.h).
 *
 * The rules look at a frame's symbol and file only, as the snapshot gives them: PyTorch
 * writes "??" for what its symbolizer did not find, and file names without their
 * directories for most native frames. Every rule names what it hides precisely (a
 * whole namespace or a generated file's name), so that a program's own function is
 * never taken for the runtime's; a frame of a Python file is the program's code and
 * always shown. */
#include "config.h"

#include "frames.h"

#include <stdlib.h>
#include <string.h>

static int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int ends(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int known(const char *s)
{
    return s[0] && strcmp(s, "??") != 0;
}

/* Symbols that take the stack, and the allocators that ask for it. */
static const char *const capture_within[] = {"unwind::unwind", "CapturedTraceback::gather",
                                             "gather_with_cpp", NULL};
static const char *const capture_prefix[] = {
    "c10::cuda::CUDACachingAllocator::", "c10::xpu::XPUCachingAllocator::", NULL};

/* The dispatcher's generic layers between an operator's call and its kernel. */
static const char *const dispatch_prefix[] = {"c10::impl::wrap_kernel_functor_unboxed_",
                                              "c10::impl::make_boxed_from_unboxed_functor",
                                              "c10::impl::BoxedKernelWrapper",
                                              "c10::impl::call_functor_with_args_from_stack",
                                              "c10::BoxedKernel::",
                                              "c10::KernelFunction::",
                                              "c10::Dispatcher::",
                                              "c10::OperatorHandle::",
                                              "c10::TypedOperatorHandle",
                                              NULL};

/* CPython's C functions that run Python code, by prefix (besides the Py and _Py API
 * names), and the interpreter's files. */
static const char *const interp_prefix[] = {
    "cfunction_", "method_vectorcall", "vectorcall_method", "slot_tp_", "pymain_",
    "run_mod",    "run_eval_code_obj", "builtin_exec",      NULL};
static const char *const interp_file[] = {
    "Python/ceval.c", "Objects/call.c", "Objects/methodobject.c", "Python/pythonrun.c",
    "Modules/main.c", "pycore_ceval.h", "cpython/abstract.h",     NULL};

/* Below main and a thread's function. */
static const char *const start_exact[] = {"_start",
                                          "start_thread",
                                          "__clone",
                                          "__clone3",
                                          "clone3",
                                          "clone",
                                          "execute_native_thread_routine",
                                          NULL};

static int any_prefix(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (starts(s, *list))
            return 1;
    return 0;
}

/* A name of CPython's C API: Py or _Py, then a capital letter or '_' (PyEval_,
 * _PyObject_MakeTpCall, Py_RunMain). */
static int python_api(const char *s)
{
    if (s[0] == '_')
        s++;
    return s[0] == 'P' && s[1] == 'y' && ((s[2] >= 'A' && s[2] <= 'Z') || s[2] == '_');
}

int mt_frame_is_python(const struct memtrace_frame *fr)
{
    return fr && fr->file && ends(fr->file, ".py");
}

int mt_frame_kind(const struct memtrace_frame *fr)
{
    if (!fr)
        return MT_FRAME_UNKNOWN;
    const char *sym = fr->symbol ? fr->symbol : "", *file = fr->file ? fr->file : "";
    const char *base = base_name(file);
    if (mt_frame_is_python(fr))
        return MT_FRAME_SHOWN;
    if (!known(sym) && !known(file) && !(fr->module && fr->module[0]) && fr->ip == 0)
        return MT_FRAME_UNKNOWN;
    for (const char *const *w = capture_within; *w; w++)
        if (strstr(sym, *w))
            return MT_FRAME_CAPTURE;
    if (any_prefix(sym, capture_prefix))
        return MT_FRAME_CAPTURE;
    if (any_prefix(sym, dispatch_prefix) || strstr(file, "core/boxing/") ||
        (starts(base, "Register") && ends(base, ".cpp")) ||
        (starts(sym, "at::_ops::") && strstr(sym, "::redispatch(")))
        return MT_FRAME_DISPATCH;
    if (python_api(sym) || any_prefix(sym, interp_prefix))
        return MT_FRAME_INTERP;
    for (const char *const *f = interp_file; *f; f++)
        if (strstr(file, *f))
            return MT_FRAME_INTERP;
    for (const char *const *s = start_exact; *s; s++)
        if (strcmp(sym, *s) == 0)
            return MT_FRAME_START;
    if (starts(sym, "__libc_start_"))
        return MT_FRAME_START;
    return MT_FRAME_SHOWN;
}

const char *mt_frame_kind_name(int kind)
{
    static const char *const names[MT_FRAME_KINDS] = {"shown",       "capture", "dispatch",
                                                      "interpreter", "start",   "unknown"};
    return kind >= 0 && kind < MT_FRAME_KINDS ? names[kind] : NULL;
}

int mt_stack_shown(const struct memtrace_reader *r, uint32_t *ids, int n, int *where)
{
    int kept = 0;
    for (int k = 0; k < n; k++)
        if (mt_frame_kind(memtrace_reader_frame(r, ids[k])) == MT_FRAME_SHOWN) {
            if (where)
                where[kept] = k;
            ids[kept++] = ids[k];
        }
    if (kept > 0 || n == 0)
        return kept;
    /* Nothing shown: the ids were only moved over shown ones, so none moved. */
    if (where)
        for (int k = 0; k < n; k++)
            where[k] = k;
    return n;
}

int mt_stack_frames(const struct memtrace_reader *r, uint32_t stack, uint32_t **buf, int *cap)
{
    int depth = memtrace_reader_stack(r, stack, *buf, *cap);
    if (depth > *cap) {
        uint32_t *more = realloc(*buf, (size_t)depth * sizeof(*more));
        if (!more)
            return -1;
        *buf = more;
        *cap = depth;
        depth = memtrace_reader_stack(r, stack, *buf, *cap);
    }
    return depth;
}

uint32_t mt_stack_name_frame(const struct memtrace_reader *r, uint32_t stack)
{
    int n = stack ? memtrace_reader_stack(r, stack, NULL, 0) : 0;
    if (n <= 0)
        return 0;
    uint32_t *ids = malloc((size_t)n * sizeof(*ids));
    if (!ids)
        return 0;
    n = memtrace_reader_stack(r, stack, ids, n);
    uint32_t shown = 0, python = 0;
    for (int k = 0; k < n && !python; k++) {
        const struct memtrace_frame *fr = memtrace_reader_frame(r, ids[k]);
        if (mt_frame_is_python(fr))
            python = ids[k];
        else if (!shown && mt_frame_kind(fr) == MT_FRAME_SHOWN)
            shown = ids[k];
    }
    uint32_t first = n > 0 ? ids[0] : 0;
    free(ids);
    return python ? python : shown ? shown : first;
}
