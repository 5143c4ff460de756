/* tap.h: a small Test Anything Protocol writer for memtrace's tests.
 *
 *   plan(3); ok(x == 1, "x is one"); is_int(2, y, "y"); is_string("a", s, "s");
 *   skip_all("no CUDA device");  -- prints "1..0 # skip ..." and exits 0
 *   return exit_status();         -- 0 when every planned test passed
 */
#ifndef MEMTRACE_TAP_H
#define MEMTRACE_TAP_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_planned = -1;
static int tap_run;
static int tap_failed;

/* The path to execute this test program again: argv[0] where it names a path, since
 * under valgrind /proc/self/exe is valgrind's own tool. */
static inline const char *tap_self(const char *argv0)
{
    return strchr(argv0, '/') != NULL ? argv0 : "/proc/self/exe";
}

static inline void plan(int n)
{
    tap_planned = n;
    printf("1..%d\n", n);
    fflush(stdout);
}

/* For tests whose count is known only at the end: call done_testing() last. */
static inline void done_testing(void)
{
    tap_planned = tap_run;
    printf("1..%d\n", tap_run);
    fflush(stdout);
}

static inline void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("# ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fflush(stdout);
}

static inline int okv(int pass, const char *fmt, va_list ap)
{
    tap_run++;
    if (!pass)
        tap_failed++;
    printf("%sok %d - ", pass ? "" : "not ", tap_run);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    fflush(stdout);
    return pass;
}

static inline int ok(int pass, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int ok(int pass, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    okv(pass, fmt, ap);
    va_end(ap);
    return pass;
}

static inline int is_int(long long want, long long got, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int is_int(long long want, long long got, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int pass = okv(want == got, fmt, ap);
    va_end(ap);
    if (!pass)
        diag("  wanted: %lld\n#      got: %lld", want, got);
    return pass;
}

static inline int is_string(const char *want, const char *got, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int is_string(const char *want, const char *got, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int pass = okv(want != NULL && got != NULL && strcmp(want, got) == 0, fmt, ap);
    va_end(ap);
    if (!pass)
        diag("  wanted: \"%s\"\n#      got: \"%s\"", want ? want : "(null)", got ? got : "(null)");
    return pass;
}

static inline void skip(int n, const char *reason)
{
    for (int i = 0; i < n; i++) {
        tap_run++;
        printf("ok %d # skip %s\n", tap_run, reason);
    }
    fflush(stdout);
}

static inline void skip_all(const char *reason) __attribute__((noreturn));
static inline void skip_all(const char *reason)
{
    printf("1..0 # skip %s\n", reason);
    fflush(stdout);
    /* Automake's TAP driver reads the skip from the plan line and counts any non-zero
     * exit as an error (exit 77 means skip only to its plain test driver). */
    exit(0);
}

static inline void bail_out(const char *reason) __attribute__((noreturn));
static inline void bail_out(const char *reason)
{
    printf("Bail out! %s\n", reason);
    fflush(stdout);
    exit(255);
}

static inline int exit_status(void)
{
    if (tap_planned >= 0 && tap_run != tap_planned) {
        diag("planned %d tests but ran %d", tap_planned, tap_run);
        return 1;
    }
    return tap_failed ? 1 : 0;
}

#endif
