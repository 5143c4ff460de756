/* python-t: Python frames in the preload's stacks, with the real interpreters of
 * this machine (the Debian python3 and every pyenv 3.x found). python_prog.py
 * allocates through the fake driver from nested functions in the main thread and
 * in a second Python thread while a third holds the GIL in a busy loop, and from a
 * pure C thread; then a forked child allocates. Each thread's events must carry
 * its own Python frames, at the lines the script marks, with native frames around
 * them; the C thread's native frames only; one stack id per call site; no
 * deadlock (an alarm bounds the run). A Python process that never touches a device
 * writes no file; an interpreter older than 3.9 records native stacks and says so
 * once. */
#include "config.h"

#include "harness.h"

#include <glob.h>

#define PROG  SRCDIR "/tests/interpose/python_prog.py"
#define ITERS 200

enum { MAIN_SIZE = 4096, WORKER_SIZE = 8192, C_SIZE = 12288 };

/* The line of PROG marked "# L:mark". */
static unsigned line_of(const char *mark)
{
    char *text = h_slurp_file(PROG);
    char key[64];
    snprintf(key, sizeof key, "# L:%s\n", mark);
    unsigned line = 1;
    const char *hit = strstr(text, key);
    for (const char *p = text; hit != NULL && p < hit; p++)
        line += *p == '\n';
    free(text);
    return hit ? line : 0;
}

struct stack {
    uint32_t ids[MEMTRACE_MAX_FRAMES * 2];
    int n;
};

static void stack_get(const struct h_file *f, uint32_t id, struct stack *s)
{
    s->n = f->r != NULL
               ? memtrace_reader_stack(f->r, id, s->ids, (int)(sizeof s->ids / sizeof s->ids[0]))
               : 0;
    if (s->n < 0)
        s->n = 0;
}

static int is_py(const struct h_file *f, uint32_t frame)
{
    const struct memtrace_frame *fr = memtrace_reader_frame(f->r, frame);
    return fr != NULL && strcmp(fr->module, "python") == 0;
}

static int py_count(const struct h_file *f, const struct stack *s)
{
    int n = 0;
    for (int i = 0; i < s->n; i++)
        n += is_py(f, s->ids[i]);
    return n;
}

/* The index of the Python frame function at PROG:line in s, from index from; -1. */
static int find(const struct h_file *f, const struct stack *s, int from, const char *function,
                unsigned line)
{
    for (int i = from < 0 ? 0 : from; i < s->n; i++) {
        const struct memtrace_frame *fr = memtrace_reader_frame(f->r, s->ids[i]);
        if (fr != NULL && strcmp(fr->module, "python") == 0 && strcmp(fr->symbol, function) == 0 &&
            strcmp(fr->file, PROG) == 0 && fr->line == line)
            return i;
    }
    return -1;
}

/* The one stack id of the segment_alloc events of size, and how many there are
 * (*n); 0 when they have more than one id. */
static uint32_t one_stack(const struct h_file *f, uint64_t size, size_t *n, uint32_t *tid)
{
    uint32_t id = 0;
    int same = 1;
    *n = 0;
    for (size_t i = 0; i < f->n; i++) {
        const struct memtrace_event *e = &f->ev[i];
        if (e->action != MEMTRACE_SEGMENT_ALLOC || e->size != size)
            continue;
        if (*n == 0) {
            id = e->stack;
            *tid = e->tid;
        }
        same &= e->stack == id && e->tid == *tid;
        (*n)++;
    }
    return same ? id : 0;
}

/* Files in the temporary folder, at most 4 paths into paths; returns the count. */
static int files(char paths[][600])
{
    DIR *d = opendir(h_tmpdir);
    struct dirent *e;
    int n = 0;
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n < 4)
            snprintf(paths[n], 600, "%s/%s", h_tmpdir, e->d_name);
        n++;
    }
    if (d != NULL)
        closedir(d);
    return n;
}

static void clear_dir(void)
{
    char paths[4][600];
    int n = files(paths);
    for (int i = 0; i < n && i < 4; i++)
        unlink(paths[i]);
}

static char child_path[600]; /* the forked child's file of the last run */

/* Runs PROG threads under python with MEMTRACE_STACKS=kind; *parent and *child get
 * the two files read (the parent's has more events). Returns 0 when the run and
 * its files are as expected in shape. The parent's file path goes to parent_path. */
static int run_threads(const char *python, const char *kind, struct h_file *parent,
                       struct h_file *child, char *err_path, char *parent_path)
{
    char out_pattern[400], files_found[4][600];
    memset(parent, 0, sizeof *parent); /* a run that wrote no file leaves them empty */
    memset(child, 0, sizeof *child);
    clear_dir();
    snprintf(out_pattern, sizeof out_pattern, "%s/py-%%p.memtrace", h_tmpdir);
    setenv("MEMTRACE_OUTPUT", out_pattern, 1);
    setenv("MEMTRACE_STACKS", kind, 1);
    char *argv[] = {(char *)python, PROG, "threads", NULL};
    char *out;
    snprintf(err_path, 600, "%s.err", h_tmpdir);
    int st = h_run(argv, 1, &out, err_path);
    int good = WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "C 200\n") &&
               strstr(out, "F 0\n") && strstr(out, "T 200\n");
    if (!good)
        diag("%s exited with status %d, printed: %s", python, st, out);
    free(out);
    int n = files(files_found);
    if (n != 2) {
        diag("%d files written, not 2", n);
        return -1;
    }
    h_read(parent, files_found[0]);
    h_read(child, files_found[1]);
    int first = parent->n >= child->n;
    if (!first) {
        struct h_file t = *parent;
        *parent = *child;
        *child = t;
    }
    snprintf(parent_path, 600, "%s", files_found[first ? 0 : 1]);
    snprintf(child_path, sizeof child_path, "%s", files_found[first ? 1 : 0]);
    return good && parent->rc == 0 && child->rc == 0 ? 0 : -1;
}

/* The checks of one interpreter with the default stacks (all). */
static void check_all(const char *python, const char *label)
{
    struct h_file p, c;
    char err[600], path[600];
    int rc = run_threads(python, "all", &p, &c, err, path);
    ok(rc == 0, "%s: runs to the end with 3 threads and a fork, 2 files", label);
    if (rc != 0) {
        skip(6, "the run failed");
        return;
    }
    size_t nm, nw, nc;
    uint32_t tm = 0, tw = 0, tc = 0;
    uint32_t sm = one_stack(&p, MAIN_SIZE, &nm, &tm), sw = one_stack(&p, WORKER_SIZE, &nw, &tw),
             sc = one_stack(&p, C_SIZE, &nc, &tc);
    ok(nm == ITERS && nw == ITERS && nc == ITERS && sm && sw && sc && tm != tw && tw != tc,
       "%s: 200 allocations per thread, one stack id each (interned): %zu %zu %zu", label, nm, nw,
       nc);

    struct stack s;
    stack_get(&p, sm, &s);
    int a = find(&p, &s, 0, "alloc_free", line_of("alloc"));
    int l = find(&p, &s, a + 1, "main_leaf", line_of("main_leaf"));
    int m = find(&p, &s, l + 1, "main_mid", line_of("main_mid"));
    int o = find(&p, &s, m + 1, "main_outer", line_of("main_outer"));
    int g = find(&p, &s, o + 1, "<module>", line_of("module"));
    ok(a > 0 && l > a && m > l && o > m && g > o && !is_py(&p, s.ids[0]) &&
           !is_py(&p, s.ids[s.n - 1]) && py_count(&p, &s) == 5,
       "%s: main thread: native, alloc_free, main_leaf, main_mid, main_outer, <module>, "
       "native (at %d %d %d %d %d of %d)",
       label, a, l, m, o, g, s.n);

    stack_get(&p, sw, &s);
    a = find(&p, &s, 0, "alloc_free", line_of("alloc"));
    l = find(&p, &s, a + 1, "worker_leaf", line_of("worker_leaf"));
    o = find(&p, &s, l + 1, "worker_outer", line_of("worker_outer"));
    ok(a > 0 && l > a && o > l && !is_py(&p, s.ids[0]) &&
           find(&p, &s, 0, "main_outer", line_of("main_outer")) < 0,
       "%s: second thread: its own frames, alloc_free, worker_leaf, worker_outer, in order", label);

    stack_get(&p, sc, &s);
    ok(s.n > 0 && py_count(&p, &s) == 0, "%s: C thread: %d native frames, no Python frame", label,
       s.n);

    size_t nk;
    uint32_t tk;
    uint32_t sk = one_stack(&c, MAIN_SIZE, &nk, &tk);
    stack_get(&c, sk, &s);
    ok(nk == 3 && find(&c, &s, 0, "main_outer", line_of("main_outer")) > 0,
       "%s: the forked child records its own 3 allocations, with Python frames", label);
    char *e = h_slurp_file(err);
    ok(strstr(e, "not supported") == NULL, "%s: nothing said about the interpreter", label);
    free(e);
    h_close(&p);
    h_close(&c);
}

int main(void)
{
    h_setup();
    h_skip_under_tsan("the preloaded TSan runtime would watch an interpreter not built with it, "
                      "which also forks with threads");
    alarm(300);
    setenv("PYPROG_HELPER", PROG_DIR "/libpyhelper.so", 1);
    /* A sanitizer build's allocator (GCC 12's libasan) has no fork handlers: the
     * child of a fork made while a joined Python thread still ends in the C library
     * inherits the allocator's lock held and hangs. Not memtrace's to fix: the
     * program forks once those threads are gone (python_prog.py says how). */
    if (MEMTRACE_SANITIZERS)
        setenv("PYPROG_WAIT_THREADS", "1", 1);
    setenv("PYTHONDONTWRITEBYTECODE", "1", 1);

    /* The Debian interpreter (linked into the executable), then pyenv's (shared). */
    const char *pythons[16];
    char labels[16][32];
    int np = 0;
    if (access("/usr/bin/python3.11", X_OK) == 0)
        pythons[np++] = "/usr/bin/python3.11";
    glob_t gl;
    char pat[512];
    const char *root = getenv("PYENV_ROOT");
    snprintf(pat, sizeof pat, "%s/versions/3.*/bin/python3", root ? root : "/root/.pyenv");
    const char *old = NULL;
    int globbed = glob(pat, 0, NULL, &gl) == 0;
    if (globbed) {
        for (size_t i = 0; i < gl.gl_pathc && np < 15; i++) {
            const char *v = strstr(gl.gl_pathv[i], "/versions/3.") + 10;
            int minor = atoi(v + 2);
            if (minor >= 9)
                pythons[np++] = gl.gl_pathv[i];
            else if (minor == 8)
                old = gl.gl_pathv[i];
        }
    }
    if (np == 0)
        skip_all("no python3 (3.9 or later) on this machine");
    plan(7 * np + 4 + (old ? 2 : 0));
    for (int i = 0; i < np; i++) {
        const char *v = strstr(pythons[i], "/versions/");
        snprintf(labels[i], sizeof labels[i], "%s", v ? v + 10 : "debian 3.11");
        if (v != NULL)
            *strchr(labels[i], '/') = '\0';
        check_all(pythons[i], labels[i]);
    }

    /* Python frames alone; the C thread keeps its native stack. */
    struct h_file p, c;
    char err[600], path[600] = "";
    int rc = run_threads(pythons[0], "python", &p, &c, err, path);
    size_t nm, nc;
    uint32_t tm, tc;
    struct stack s;
    stack_get(&p, rc == 0 ? one_stack(&p, MAIN_SIZE, &nm, &tm) : 0, &s);
    ok(rc == 0 && s.n == 5 && py_count(&p, &s) == 5 &&
           find(&p, &s, 0, "alloc_free", line_of("alloc")) == 0,
       "--stacks python: the main thread's 5 Python frames and nothing else (%d)", s.n);
    stack_get(&p, rc == 0 ? one_stack(&p, C_SIZE, &nc, &tc) : 0, &s);
    ok(rc == 0 && s.n > 0 && py_count(&p, &s) == 0,
       "--stacks python: the C thread keeps its native stack (%d frames)", s.n);

    /* The CLI prints Python frames as function at file:line (the child's file: its
     * peak is one of main_outer's allocations, whatever the threads' timing). */
    char *argv_sum[] = {BUILDDIR "/memtrace", "summary", "--depth", "0", NULL, NULL};
    argv_sum[4] = child_path;
    char *out;
    h_run(argv_sum, 0, &out, NULL);
    char want[700];
    snprintf(want, sizeof want, "alloc_free at %s:%u\n", PROG, line_of("alloc"));
    ok(strstr(out, want) != NULL, "memtrace summary prints '%.*s'", (int)strlen(want) - 1, want);
    free(out);
    h_close(&p);
    h_close(&c);

    /* No device, no file. */
    clear_dir();
    char *argv_nd[] = {(char *)pythons[0], PROG, "nodevice", NULL};
    char paths[4][600];
    int st = h_run(argv_nd, 1, &out, NULL);
    ok(st == 0 && strstr(out, "S ") != NULL && files(paths) == 0,
       "a Python process that never touches a device writes no file");
    free(out);

    if (old != NULL) {
        struct h_file po, co;
        rc = run_threads(old, "all", &po, &co, err, path);
        stack_get(&po, rc == 0 ? one_stack(&po, MAIN_SIZE, &nm, &tm) : 0, &s);
        ok(rc == 0 && s.n > 0 && py_count(&po, &s) == 0, "Python 3.8: native stacks (%d frames)",
           s.n);
        char *e = h_slurp_file(err);
        static const char said[] = "memtrace: Python 3.8 is not supported";
        const char *first = strstr(e, said);
        ok(first != NULL && strstr(first + sizeof said, "is not supported") == NULL,
           "Python 3.8: said once");
        free(e);
        h_close(&po);
        h_close(&co);
    }
    unlink(err);
    if (globbed)
        globfree(&gl);
    h_cleanup();
    return exit_status();
}
