/* stacks-t.c: the frames that the commands show of a stack (snapshot/frames.c), on a
 * recording shaped like a PyTorch snapshot's stacks: two allocations whose stacks run
 * from the unwinder and the caching allocator through a kernel, the dispatcher's
 * wrappers, CPython's evaluation loop and two Python lines, down to _start; and one
 * stack of capture frames only. peak, leaks, top, diff and flamegraph, folded and
 * speedscope exports leave the hidden frames out and say how many, --all-frames shows
 * them, the Perfetto slices are named by the Python line, and the PyTorch export
 * keeps every frame. */
#include "config.h"

#include "cli-util.h"

#define NSTR 19
static const char *const strs[NSTR] = {
    "torch::unwind::unwind()",                                                 /* 1 */
    "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", /* 2 */
    "at::native::empty_cuda(c10::ArrayRef<long>)",                             /* 3 */
    "RegisterCUDA.cpp",                                                        /* 4 */
    "at::(anonymous namespace)::wrapper_CUDA_memory_format_empty",             /* 5 */
    "c10::impl::wrap_kernel_functor_unboxed_<F>::call",                        /* 6 */
    "at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>)",         /* 7 */
    "_PyEval_EvalFrameDefault",                                                /* 8 */
    "forward",                                                                 /* 9 */
    "/home/user/model.py",                                                     /* 10 */
    "train",                                                                   /* 11 */
    "/home/user/train.py",                                                     /* 12 */
    "Py_RunMain",                                                              /* 13 */
    "_start",                                                                  /* 14 */
    "??",                                                                      /* 15 */
    "torch::CapturedTraceback::gather(bool, bool, bool)",                      /* 16 */
    "at::native::zeros_like(at::Tensor const&)",                               /* 17 */
    "libtorch_cuda.so",                                                        /* 18 */
    "memory_snapshot.cpp",                                                     /* 19 */
};

/* Frames, innermost first as in the stack A: ip, offset, module, symbol, file, line. */
#define NFR 13
static const struct mt_frame_rec frames[NFR] = {
    {0, 0, 0, 1, 15, 0},                 /* 1 capture: unwind */
    {0, 0, 0, 16, 15, 0},                /* 2 capture: gather */
    {0, 0, 0, 2, 0, 0},                  /* 3 capture: allocator */
    {0x7f0001000, 0x1000, 18, 3, 15, 0}, /* 4 shown: the kernel */
    {0, 0, 0, 5, 4, 0},                  /* 5 dispatch: RegisterCUDA.cpp */
    {0, 0, 0, 6, 4, 0},                  /* 6 dispatch: boxing wrapper */
    {0, 0, 0, 7, 15, 0},                 /* 7 shown: the operator's entry */
    {0, 0, 0, 8, 15, 0},                 /* 8 interpreter */
    {0, 0, 0, 9, 10, 42},                /* 9 Python: forward at model.py:42 */
    {0, 0, 0, 8, 15, 0},                 /* 10 interpreter again (another frame record) */
    {0, 0, 0, 11, 12, 7},                /* 11 Python: train at train.py:7 */
    {0, 0, 0, 13, 15, 0},                /* 12 interpreter: Py_RunMain */
    {0, 0, 0, 14, 15, 0},                /* 13 start */
};
/* Stack A: frames 1..13 (nodes 1..13, node 13 innermost). Stack B: the kernel
 * zeros_like in place of empty_cuda (a frame 14 added below) over the same outer
 * frames. Stack C: capture frames only. */

static const char *path, *path2;

static void write_file(const char *p, int variant)
{
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, p, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_meta(w, "{\"pid\": 1}"), "mt_writer_meta");
    cli_check(mt_writer_strings(w, 1, NSTR, strs), "mt_writer_strings");
    cli_check(mt_writer_frames(w, 1, NFR, frames), "mt_writer_frames");
    struct mt_frame_rec zeros = {0x7f0002000, 0x2000, 18, 17, 15, 0};
    cli_check(mt_writer_frames(w, NFR + 1, 1, &zeros), "mt_writer_frames");
    uint32_t parent[NFR + 7], frame[NFR + 7];
    /* A: node k (1..13) holds frame 14 - k: node 1 is the outermost (_start) */
    for (uint32_t k = 1; k <= NFR; k++) {
        parent[k - 1] = k - 1;
        frame[k - 1] = NFR + 1 - k;
    }
    /* B: nodes 14..17 over node 6 (frame 8 .. outward): 7 (op entry), 6, 5, then 14
     * (zeros_like), 3, 2, 1 */
    uint32_t b_frames[] = {7, 6, 5, 14, 3, 2, 1};
    for (uint32_t k = 0; k < 7; k++) {
        parent[NFR + k] = k ? NFR + k : 6;
        frame[NFR + k] = b_frames[k];
    }
    cli_check(mt_writer_stacks(w, 1, NFR + 7, parent, frame), "mt_writer_stacks");
    /* C: capture frames only: nodes 21..22 (gather over unwind... innermost unwind) */
    uint32_t cp[2] = {0, 21}, cf[2] = {2, 1};
    cli_check(mt_writer_stacks(w, 21, 2, cp, cf), "mt_writer_stacks");
    struct memtrace_event ev[4];
    memset(ev, 0, sizeof(ev));
    uint64_t a_size = variant ? 8192 : 4096;
    ev[0] = (struct memtrace_event){
        .time_ns = 1000, .addr = 0x10000, .size = a_size, .stack = NFR, .action = MEMTRACE_ALLOC};
    ev[1] = (struct memtrace_event){
        .time_ns = 2000, .addr = 0x20000, .size = 1024, .stack = NFR + 7, .action = MEMTRACE_ALLOC};
    ev[2] = (struct memtrace_event){
        .time_ns = 3000, .addr = 0x30000, .size = 512, .stack = 22, .action = MEMTRACE_ALLOC};
    cli_check(mt_writer_events(w, ev, 3), "mt_writer_events");
    cli_check(mt_writer_end(w, "{\"dropped\": 0, \"overflowed\": false}"), "mt_writer_end");
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

static void text_commands(void)
{
    const char *cmds[][8] = {
        {"peak", NULL},
        {"leaks", NULL},
        {"top", NULL},
        {"summary", NULL},
    };
    for (size_t c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++) {
        const char *args[8] = {cmds[c][0], path, NULL};
        struct cli_out r = cli_run(args);
        is_int(0, r.status, "%s exits 0", cmds[c][0]);
        /* A: 13 frames, 4 shown (kernel #3, op entry #6, forward #8, train #10), 9 hidden */
        ok(strstr(r.out, "#3  at::native::empty_cuda(c10::ArrayRef<long>) at libtorch_cuda.so") ==
                   NULL &&
               strstr(r.out, "#3  at::native::empty_cuda(c10::ArrayRef<long>)\n") != NULL,
           "%s: the kernel shows, numbered by its place in the stack", cmds[c][0]);
        ok(strstr(r.out, "#8  forward at /home/user/model.py:42\n") &&
               strstr(r.out, "#10 train at /home/user/train.py:7\n"),
           "%s: the Python lines show", cmds[c][0]);
        is_int(0, count(r.out, "torch::unwind::unwind()") - 1,
               "%s: the unwinder shows only in the stack of nothing else", cmds[c][0]);
        is_int(0,
               count(r.out, "_PyEval_EvalFrameDefault") + count(r.out, "_start") +
                   count(r.out, "wrap_kernel_functor") + count(r.out, "CUDACachingAllocator"),
               "%s: no interpreter, start, dispatch or allocator frame", cmds[c][0]);
        ok(strstr(r.out, "(9 frames hidden: 3 capture, 2 dispatch, 3 interpreter, 1 start; "
                         "--all-frames shows them)") != NULL,
           "%s: says how many frames of each kind it hid", cmds[c][0]);
        cli_free(&r);

        const char *all[8] = {cmds[c][0], "--all-frames", path, NULL};
        r = cli_run(all);
        is_int(0, r.status, "%s --all-frames exits 0", cmds[c][0]);
        ok(strstr(r.out, "#0  torch::unwind::unwind()\n") && strstr(r.out, "#12 _start\n") &&
               !strstr(r.out, "hidden"),
           "%s --all-frames: every frame, none said hidden", cmds[c][0]);
        cli_free(&r);
    }

    /* --depth counts frames shown, and Python frames past it still show */
    const char *d1[] = {"peak", "--depth", "1", path, NULL};
    struct cli_out r = cli_run(d1);
    const char *want = "      #3  at::native::empty_cuda(c10::ArrayRef<long>)\n"
                       "      ... 1 more frame\n"
                       "      #8  forward at /home/user/model.py:42\n"
                       "      ... 1 more frame\n"
                       "      (9 frames hidden: 3 capture, 2 dispatch, 3 interpreter, 1 start; "
                       "--all-frames shows them)\n";
    ok(strstr(r.out, want) != NULL, "peak --depth 1: one frame, then one Python line");
    if (!strstr(r.out, want))
        diag("%s", r.out);
    cli_free(&r);

    const char *js[] = {"peak", "--json", path, NULL};
    r = cli_run(js);
    json_t *j = cli_json(&r);
    json_t *st = NULL;
    for (size_t k = 0; k < json_array_size(cli_get(j, "stacks")); k++)
        if (json_integer_value(json_object_get(json_array_get(cli_get(j, "stacks"), k), "stack")) ==
            NFR)
            st = json_array_get(cli_get(j, "stacks"), k);
    is_int(13, st ? json_integer_value(json_object_get(st, "depth")) : -1, "peak --json: depth");
    is_int(9, st ? json_integer_value(json_object_get(st, "hidden_frames")) : -1,
           "peak --json: hidden_frames");
    json_t *fr = st ? json_object_get(st, "frames") : NULL;
    is_int(4, (long long)json_array_size(fr), "peak --json: the 4 frames shown");
    long long idx[4] = {-1, -1, -1, -1};
    for (size_t k = 0; k < 4 && k < json_array_size(fr); k++)
        idx[k] = json_integer_value(json_object_get(json_array_get(fr, k), "index"));
    ok(idx[0] == 3 && idx[1] == 6 && idx[2] == 8 && idx[3] == 10,
       "peak --json: each with its index in the stack");
    json_decref(j);
    cli_free(&r);
}

static void exports(void)
{
    const char *fo[] = {"export", "--format", "folded", path, NULL};
    struct cli_out r = cli_run(fo);
    is_string("train;forward;at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>);"
              "at::native::empty_cuda(c10::ArrayRef<long>) 4096\n"
              "train;forward;at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>);"
              "at::native::zeros_like(at::Tensor const&) 1024\n"
              "torch::CapturedTraceback::gather(bool, bool, bool);torch::unwind::unwind() 512\n",
              r.out, "folded: the frames shown, outermost first");
    cli_free(&r);
    const char *foa[] = {"export", "--format", "folded", "--all-frames", path, NULL};
    r = cli_run(foa);
    const char *outer = "_start;Py_RunMain;train;_PyEval_EvalFrameDefault;forward;";
    if (!ok(strncmp(r.out, outer, strlen(outer)) == 0 &&
                count(r.out, ";torch::unwind::unwind() ") == 3 &&
                strstr(r.out, "\ntorch::CapturedTraceback::gather(bool, bool, bool);"
                              "torch::unwind::unwind() 512\n"),
            "folded --all-frames: every frame"))
        diag("%s", r.out);
    cli_free(&r);

    const char *fl[] = {"flamegraph", "--cost", "allocated", path, NULL};
    r = cli_run(fl);
    ok(strstr(r.out,
              "train;forward;at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>);"
              "at::native::empty_cuda(c10::ArrayRef<long>) 4096\n") &&
           !strstr(r.out, "_PyEval"),
       "flamegraph: the frames shown");
    cli_free(&r);
    const char *fla[] = {"flamegraph", "--cost", "allocated", "--all-frames", path, NULL};
    r = cli_run(fla);
    ok(count(r.out, "_start;Py_RunMain;") == 2 &&
           strstr(r.out, "torch::CapturedTraceback::gather(bool, bool, bool);"
                         "torch::unwind::unwind() 512\n"),
       "flamegraph --all-frames: every frame");
    cli_free(&r);

    const char *pf[] = {"export", "--format", "perfetto", path, NULL};
    r = cli_run(pf);
    json_t *j = cli_json(&r);
    json_t *evs = cli_get(j, "traceEvents");
    int fwd = 0, gather = 0;
    for (size_t k = 0; k < json_array_size(evs); k++) {
        json_t *e = json_array_get(evs, k);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!ph || strcmp(ph, "b") != 0 || !name)
            continue;
        fwd += strcmp(name, "forward (model.py:42)") == 0;
        gather += strcmp(name, "torch::unwind::unwind()") == 0;
    }
    is_int(2, fwd, "perfetto: both Python stacks' slices are named by their Python line");
    is_int(1, gather, "perfetto: a stack with nothing shown by its innermost frame");
    json_decref(j);
    cli_free(&r);

    const char *ss[] = {"export", "--format", "speedscope", path, NULL};
    r = cli_run(ss);
    j = cli_json(&r);
    json_t *sample = json_array_get(
        json_object_get(json_array_get(json_object_get(j, "profiles"), 0), "samples"), 0);
    is_int(4, (long long)json_array_size(sample), "speedscope: the 4 frames shown");
    json_decref(j);
    cli_free(&r);
    const char *ssa[] = {"export", "--format", "speedscope", "--all-frames", path, NULL};
    r = cli_run(ssa);
    j = cli_json(&r);
    sample = json_array_get(
        json_object_get(json_array_get(json_object_get(j, "profiles"), 0), "samples"), 0);
    is_int(13, (long long)json_array_size(sample), "speedscope --all-frames: all 13");
    json_decref(j);
    cli_free(&r);

    const char *pj[] = {"export", "--format", "pytorch-json", path, NULL};
    r = cli_run(pj);
    j = cli_json(&r);
    json_t *tr = json_array_get(json_object_get(j, "device_traces"), 0);
    json_t *first = json_object_get(json_array_get(tr, 0), "frames");
    is_int(13, (long long)json_array_size(first), "pytorch-json: every frame kept");
    json_decref(j);
    cli_free(&r);
}

static void diff(void)
{
    const char *args[] = {"diff", path, path2, NULL};
    struct cli_out r = cli_run(args);
    is_int(0, r.status, "diff exits 0");
    ok(strstr(r.out, "#8  forward at /home/user/model.py:42\n") &&
           !strstr(r.out, "_PyEval_EvalFrameDefault") &&
           strstr(r.out, "(9 frames hidden: 3 capture, 2 dispatch, 3 interpreter, 1 start;"),
       "diff: the frames shown");
    cli_free(&r);
    const char *all[] = {"diff", "--all-frames", path, path2, NULL};
    r = cli_run(all);
    ok(strstr(r.out, "#4  at::(anonymous namespace)::wrapper_CUDA_memory_format_empty at "
                     "RegisterCUDA.cpp\n") != NULL,
       "diff --all-frames: every frame");
    cli_free(&r);
}

int main(void)
{
    plan(4 * 8 + 5 + 9 + 3);
    cli_scratch();
    path = cli_path("stacks.memtrace");
    path2 = cli_path("stacks2.memtrace");
    write_file(path, 0);
    write_file(path2, 1);
    text_commands();
    exports();
    diff();
    return exit_status();
}
