/* args.h: the command lines of the examples and benches: a few operands (file
 * names, counts), and -h or --help for the usage text. */
#ifndef MEMTRACE_ARGS_H
#define MEMTRACE_ARGS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline const char *args_name(char **argv)
{
    const char *slash = argv[0] != NULL ? strrchr(argv[0], '/') : NULL;
    return slash != NULL ? slash + 1 : argv[0] != NULL ? argv[0] : "memtrace";
}

/* Returns -1 when the program should go on; otherwise the status to exit with,
 * after printing the usage (to stdout when asked for) or one line saying what was
 * wrong (to stderr). */
static inline int args_check(int argc, char **argv, int max_operands, const char *usage)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "%s: unknown option %s (try --help)\n", args_name(argv), argv[i]);
            return 2;
        }
    }
    if (argc - 1 > max_operands) {
        fprintf(stderr, "%s: too many arguments (try --help)\n", args_name(argv));
        return 2;
    }
    return -1;
}

/* Parses arg as a whole number from min to max into *out. Returns 0, or 2 after one
 * line naming what, and arg, on stderr. */
static inline int args_count(char **argv, const char *what, const char *arg, long long min,
                             long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (*arg == '\0' || *end != '\0' || errno != 0 || v < min || v > max) {
        fprintf(stderr, "%s: %s must be a whole number from %lld to %lld, not '%s'\n",
                args_name(argv), what, min, max, arg);
        return 2;
    }
    *out = v;
    return 0;
}

#endif
