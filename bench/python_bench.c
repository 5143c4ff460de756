/* python_bench: the cost of a mixed stack (native frames with CPython's frames in
 * place of the evaluation loop's) against a native-only capture of the same depth,
 * from inside a real interpreter: the program loads libpython (argv[1], default
 * libpython3.11.so.1.0) with dlopen, runs a Python function nested DEPTH deep that
 * calls bench_run through ctypes (which releases the GIL, the common case), and
 * bench_run times each kind of capture and its interning, best of 3 runs, in the
 * thread's CPU time. Usage: python_bench [LIBPYTHON] [PY_DEPTH] [ITERATIONS] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "memtrace.h"
#include "stack.h"

static long iterations = 200000;

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void one(const char *name, int kind, int depth)
{
    uintptr_t ips[MEMTRACE_MAX_FRAMES];
    double best = 0;
    int n = 0, npy = 0;
    for (int round = 0; round < 3; round++) {
        double t0 = cpu_ns();
        for (long i = 0; i < iterations; i++) {
            n = mt_stack_capture_as(ips, depth, 0, kind);
            if (mt_stack_intern(ips, n) == 0)
                abort();
        }
        double per = (cpu_ns() - t0) / (double)iterations;
        if (round == 0 || per < best)
            best = per;
    }
    npy = 0;
    for (int i = 0; i < n; i++)
        npy += (ips[i] >> (sizeof(uintptr_t) * 8 - 1)) != 0;
    printf("| %s | %d | %d | %.0f |\n", name, n - npy, npy, best);
}

/* pad more native frames below the captures: a native stack as deep as the mixed
 * one is long. */
static __attribute__((noinline)) int padded(int pad)
{
    if (pad > 0) {
        int r = padded(pad - 1);
        __asm__ volatile("" ::: "memory"); /* no tail call: the frame stays */
        return r;
    }
    one("native", MEMTRACE_STACKS_NATIVE, 32);
    one("mixed (all)", MEMTRACE_STACKS_ALL, 32);
    one("python", MEMTRACE_STACKS_PYTHON, 32);
    return 0;
}

int bench_run(int pad);

/* Called from Python through ctypes, with the GIL released. */
__attribute__((visibility("default"), noinline)) int bench_run(int pad)
{
    printf("| capture, depth 32 | native frames | Python frames | CPU ns per event |\n");
    printf("|---|---|---|---|\n");
    padded(0);
    padded(pad);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && argv[1][0] == '-') {
        printf("usage: python_bench [LIBPYTHON] [PY_DEPTH] [ITERATIONS]\n");
        return argv[1][1] == 'h' ? 0 : 2;
    }
    const char *libpython = argc > 1 ? argv[1] : "libpython3.11.so.1.0";
    int py_depth = argc > 2 ? atoi(argv[2]) : 16;
    int pad = 14; /* with 3.11's 18 native frames under nest(): 32 */
    if (argc > 3)
        iterations = atol(argv[3]);
    if (py_depth < 1 || py_depth > 100 || iterations < 1) {
        fprintf(stderr, "python_bench: PY_DEPTH is 1 to 100, ITERATIONS at least 1\n");
        return 2;
    }
    void *h = dlopen(libpython, RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        fprintf(stderr, "python_bench: cannot load %s: %s\n", libpython, dlerror());
        return 1;
    }
    void (*init)(void) = (void (*)(void))dlsym(h, "Py_Initialize");
    int (*run)(const char *) = (int (*)(const char *))dlsym(h, "PyRun_SimpleString");
    if (init == NULL || run == NULL) {
        fprintf(stderr, "python_bench: %s is no libpython\n", libpython);
        return 1;
    }
    init();
    char code[512];
    snprintf(code, sizeof code,
             "import ctypes\n"
             "run = ctypes.CDLL(None).bench_run\n"
             "def nest(n):\n"
             "    return nest(n - 1) if n > 1 else run(%d)\n"
             "nest(%d)\n",
             pad, py_depth - 1);
    return run(code) == 0 ? 0 : 1;
}
