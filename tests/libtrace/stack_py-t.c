/* stack_py-t: libtrace/stack_py.c in a C program that loads CPython itself.
 *
 * The program links no libpython: it captures first with no interpreter in the
 * process (native only), then dlopens the system's libpython3, starts it and runs a
 * snippet whose innermost function calls back into C through ctypes. Inside the
 * callback the interpreter is found only at the next look (one capture in 1024 per
 * thread), and from then on the thread's Python frames come in order, with their
 * names, file and lines; a C thread started there has none. */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memtrace.h"
#include "stack.h"
#include "stack_py.h"
#include "strtab.h"
#include "tap.h"

#define LOOK_EVERY 1024 /* stack_py.c's PY_LOOK_EVERY */

static const char *const libs[][2] = {
    {"libpython3.11.so.1.0", "3.11"}, {"libpython3.11.so.1", "3.11"},
    {"libpython3.12.so.1.0", "3.12"}, {"libpython3.13.so.1.0", "3.13"},
    {"libpython3.10.so.1.0", "3.10"}, {"libpython3.9.so.1.0", "3.9"},
};

/* What the callback saw. */
static int captures_until_found = -1;
static struct mt_py_stack found;
static uintptr_t mixed[MEMTRACE_MAX_FRAMES];
static int nmixed;
static int status_inside = -1;
static unsigned long version_inside;
static int thread_py = -1, thread_tokens = -1, thread_native = -1;

static void *c_thread(void *arg)
{
    (void)arg;
    struct mt_py_stack st;
    thread_py = mt_py_capture(&st);
    uintptr_t ips[MEMTRACE_MAX_FRAMES];
    int n = mt_stack_capture_as(ips, 32, 0, MEMTRACE_STACKS_ALL);
    thread_native = n;
    thread_tokens = 0;
    for (int i = 0; i < n; i++)
        thread_tokens += mt_py_is_token(ips[i]);
    return NULL;
}

/* Called from Python: counts the captures it takes until the interpreter is found. */
static int probe(void)
{
    for (int i = 1; i <= 2 * LOOK_EVERY; i++) {
        if (mt_py_capture(&found) > 0) {
            captures_until_found = i;
            break;
        }
    }
    nmixed = mt_stack_capture_as(mixed, 64, 0, MEMTRACE_STACKS_ALL);
    status_inside = mt_py_status(&version_inside);
    pthread_t t;
    if (pthread_create(&t, NULL, c_thread, NULL) == 0)
        pthread_join(t, NULL);
    return 7;
}

static void check_frame(uintptr_t tok, const char *name, unsigned line, int at)
{
    uint32_t fn = 0, file = 0, ln = 0;
    int rc = mt_py_frame(tok, &fn, &file, &ln);
    is_int(0, rc, "Python frame %d is a token of this process", at);
    is_string(name, rc == 0 ? mt_strings_get(fn) : NULL, "Python frame %d is %s", at, name);
    is_string("<string>", rc == 0 ? mt_strings_get(file) : NULL, "%s's file is <string>", name);
    is_int(line, ln, "%s is at line %u", name, line);
}

int main(void)
{
    /* Before any interpreter: native only, nothing found, and no crash. */
    unsigned long version = 1;
    int status = mt_py_status(&version);
    struct mt_py_stack st;
    int before = mt_py_capture(&st); /* this thread's first capture: a look */
    uintptr_t ips[MEMTRACE_MAX_FRAMES];
    int nnative = mt_stack_capture_as(ips, 32, 0, MEMTRACE_STACKS_ALL);
    int tokens = 0;
    for (int i = 0; i < nnative; i++)
        tokens += mt_py_is_token(ips[i]);

    void *h = NULL;
    const char *which = NULL;
    for (size_t i = 0; i < sizeof libs / sizeof libs[0] && h == NULL; i++) {
        h = dlopen(libs[i][0], RTLD_NOW | RTLD_GLOBAL);
        which = libs[i][1];
    }
    if (h == NULL)
        skip_all("no libpython3.x.so (3.9 to 3.13) to dlopen");
    void (*init)(void) = (void (*)(void))dlsym(h, "Py_InitializeEx");
    int (*run)(const char *) = (int (*)(const char *))dlsym(h, "PyRun_SimpleString");
    int (*fini)(void) = (int (*)(void))dlsym(h, "Py_FinalizeEx");
    if (init == NULL || run == NULL || fini == NULL)
        skip_all("libpython without Py_InitializeEx, PyRun_SimpleString, Py_FinalizeEx");

    plan(34);
    is_int(0, status, "no interpreter: frames cannot be read");
    is_int(0, (long long)version, "no interpreter: no version");
    is_int(0, before, "no interpreter: no Python frames");
    ok(nnative > 2, "no interpreter: a native stack (%d frames)", nnative);
    is_int(0, tokens, "no interpreter: no token in it");

    ((void (*)(int))(void (*)(void))init)(0);
    char code[1024];
    snprintf(code, sizeof code,
             "import ctypes\n"                                 /* 1 */
             "probe = ctypes.CFUNCTYPE(ctypes.c_int)(%#llx)\n" /* 2 */
             "def leaf():\n"                                   /* 3 */
             "    return probe()\n"                            /* 4 */
             "def mid():\n"                                    /* 5 */
             "    return leaf() + 1\n"                         /* 6 */
             "def outer():\n"                                  /* 7 */
             "    x = 1\n"                                     /* 8 */
             "    return mid() * x\n"                          /* 9 */
             "assert outer() == 8\n",                          /* 10 */
             (unsigned long long)(uintptr_t)probe);
    int rc = run(code);
    is_int(0, rc, "the snippet ran and the callback returned");

    /* The look at the first capture above counted; the next one is LOOK_EVERY
     * captures of this thread later. */
    is_int(LOOK_EVERY - 1, captures_until_found,
           "the interpreter loaded later is found at this thread's next look");
    is_int(1, status_inside, "frames can be read");
    unsigned long want = 0x300 | (unsigned long)atoi(which + 2);
    is_int((long long)want, (long long)(version_inside >> 16), "the version is %s's", which);

    static const struct {
        const char *name;
        unsigned line;
    } want_frames[] = {{"leaf", 4}, {"mid", 6}, {"outer", 9}, {"<module>", 10}};
    is_int(4, found.n, "4 Python frames, ctypes' call adds none");
    for (int i = 0; i < 4; i++)
        check_frame(i < found.n ? found.tok[i] : 0, want_frames[i].name, want_frames[i].line, i);

    int first = -1, ntok = 0, in_order = 1, native_after = 0;
    for (int i = 0; i < nmixed; i++) {
        if (!mt_py_is_token(mixed[i])) {
            native_after += first >= 0;
            continue;
        }
        if (first < 0)
            first = i;
        in_order &= i == first + ntok && ntok < found.n && mixed[i] == found.tok[ntok];
        ntok++;
    }
    ok(nmixed > 0 && !mt_py_is_token(mixed[0]), "the mixed stack starts at the callback (native)");
    ok(first > 0 && ntok == 4 && in_order, "its 4 Python frames in order, in one run (at %d, %d)",
       first, ntok);
    ok(native_after > 0, "native frames follow them, down to main (%d)", native_after);

    is_int(0, thread_py, "a C thread: no Python frames");
    ok(thread_native > 0, "a C thread: a native stack (%d frames)", thread_native);
    is_int(0, thread_tokens, "a C thread: no token in it");

    is_int(0, fini(), "the interpreter finalises");
    is_int(0, mt_py_capture(&st), "after finalising: no Python frames");
    return exit_status();
}
