/* symbolize-t: return addresses to module, offset, function, file and line. */
#include "config.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stack.h"
#include "symbolize.h"
#include "tests/tap.h"

#if defined(__clang__)
#define FRAME __attribute__((noinline))
#else
#define FRAME __attribute__((noipa))
#endif
#define NO_TAIL() __asm__ volatile("" ::: "memory")

static int marked_line;

FRAME static uintptr_t static_target(void)
{
    uintptr_t ip = 0;
    marked_line = __LINE__ + 1;
    mt_stack_capture(&ip, 1, 0);
    NO_TAIL();
    return ip;
}

/* The callback's callers: libc's sort, behind a sanitizer's interceptor if any. */
static uintptr_t callback_ips[8];
static int callback_n;

static int compare_ints(const void *a, const void *b)
{
    if (callback_n == 0)
        callback_n = mt_stack_capture(callback_ips, 8, 0);
    return *(const int *)a - *(const int *)b;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void check_empty(const struct mt_symbol *s, const char *what)
{
    ok(s->module[0] == '\0' && s->function[0] == '\0' && s->file[0] == '\0' && s->line == 0 &&
           s->offset == 0,
       "%s: every field empty", what);
}

static void test_static_function(void)
{
    uintptr_t ip = static_target();
    struct mt_symbol s;
    is_int(0, mt_symbolize(ip, &s), "a return address in the test resolves");
    is_string("static_target", s.function, "static function by name (no -rdynamic)");
    is_string("symbolize-t", base_name(s.module), "module is the test binary");
    char exe[MT_SYM_PATH_MAX] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    is_string(exe, s.module, "module path is /proc/self/exe's");
    Dl_info info;
    ok(dladdr((void *)ip, &info) != 0, "dladdr knows the test binary");
    is_int((long long)(ip - (uintptr_t)info.dli_fbase), (long long)s.offset,
           "offset is ip minus the load bias");

    if (MEMTRACE_HAVE_LIBDW) {
        ok(ends_with(s.file, "symbolize-t.c"), "file is symbolize-t.c (%s)", s.file);
        is_int(marked_line, s.line, "line is the marked call's");
    } else {
        skip(2, "built without libdw");
    }

    struct mt_symbol again;
    mt_symbolize_reset();
    is_int(0, mt_symbolize(ip, &again), "resolves again after reset");
    ok(memcmp(&s, &again, sizeof s) == 0, "with the same answer");
}

static void test_libc(void)
{
    void *fn = dlsym(RTLD_DEFAULT, "getpid");
    ok(fn != NULL, "getpid found");
    Dl_info info;
    dladdr(fn, &info);
    struct mt_symbol s;
    uintptr_t ip = (uintptr_t)fn + 1;
    is_int(0, mt_symbolize(ip, &s), "&getpid + 1 resolves");
    is_string("getpid", s.function, "to getpid");
    ok(strncmp(base_name(s.module), "libc.so", 7) == 0, "in libc (%s)", s.module);
    is_string(info.dli_fname, s.module, "module path as the loader has it");
    is_int((long long)(ip - (uintptr_t)info.dli_fbase), (long long)s.offset,
           "offset is ip minus libc's bias");

    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (i * 37) % 64;
    qsort(v, 64, sizeof v[0], compare_ints);
    ok(callback_n >= 2, "qsort callback captured its callers");
    int in_libc = -1;
    for (int i = 1; i < callback_n && in_libc < 0; i++)
        if (mt_symbolize(callback_ips[i], &s) == 0 &&
            strncmp(base_name(s.module), "libc.so", 7) == 0)
            in_libc = i;
    ok(in_libc > 0, "a return address into libc's sort resolves to libc");
    diag("qsort's caller of the callback: %s+%#llx %s", s.function[0] ? s.function : "?",
         (unsigned long long)s.offset, s.module);
}

static void test_unmapped(void)
{
    struct mt_symbol s;
    memset(&s, 'x', sizeof s);
    is_int(-1, mt_symbolize(0x10, &s), "address 0x10 is in no module");
    check_empty(&s, "0x10");

    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *anon = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(&s, 'x', sizeof s);
    is_int(-1, mt_symbolize((uintptr_t)anon + 8, &s), "anonymous memory is in no module");
    check_empty(&s, "anonymous page");
    munmap(anon, page);

    memset(&s, 'x', sizeof s);
    is_int(-1, mt_symbolize(0, &s), "ip 0 is in no module");
    check_empty(&s, "ip 0");
}

int main(void)
{
    test_static_function();
    test_libc();
    test_unmapped();
    done_testing();
    return exit_status();
}
