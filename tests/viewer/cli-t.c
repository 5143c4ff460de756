/* cli-t.c: the memtrace command's help, its usage errors (exit 2) and its file errors
 * (exit 1), each a single line on stderr. */
#include "config.h"

#include <sys/stat.h>

#include "cli-util.h"

static void expect(const char *const *args, int status, const char *err, const char *what)
{
    struct cli_out o = cli_run(args);
    is_int(status, o.status, "%s: exit %d", what, status);
    is_string(err, o.err, "%s: stderr", what);
    cli_free(&o);
}

static void check_help(void)
{
    struct cli_out o = cli_run((const char *const[]){"--help", NULL});
    is_int(0, o.status, "--help exits 0");
    ok(strstr(o.out, "\n  info ") && strstr(o.out, "\n  summary "), "--help lists the commands");
    cli_free(&o);

    o = cli_run((const char *const[]){NULL});
    is_int(2, o.status, "no command: exit 2");
    ok(strncmp(o.err, "usage: memtrace COMMAND", 23) == 0, "no command: usage on stderr");
    cli_free(&o);

    o = cli_run((const char *const[]){"--version", NULL});
    is_int(0, o.status, "--version exits 0");
    is_string("memtrace " PACKAGE_VERSION " (libmemtrace " PACKAGE_VERSION ")\n", o.out,
              "--version names both versions");
    cli_free(&o);

    static const char *const cmds[] = {"info", "summary"};
    static const char *const flags[][4] = {{"--json", NULL}, {"--json", "--top", "--depth", NULL}};
    for (int c = 0; c < 2; c++) {
        o = cli_run((const char *const[]){cmds[c], "--help", NULL});
        is_int(0, o.status, "%s --help exits 0", cmds[c]);
        int all = strstr(o.out, "--help") != NULL;
        for (int f = 0; flags[c][f]; f++)
            all &= strstr(o.out, flags[c][f]) != NULL;
        ok(all, "%s --help mentions each of its flags", cmds[c]);
        char usage[64];
        snprintf(usage, sizeof(usage), "usage: memtrace %s FILE", cmds[c]);
        ok(strncmp(o.out, usage, strlen(usage)) == 0, "%s --help starts with its usage", cmds[c]);
        struct cli_out h = cli_run((const char *const[]){"help", cmds[c], NULL});
        is_int(0, h.status, "help %s exits 0", cmds[c]);
        is_string(o.out, h.out, "help %s prints the same as %s --help", cmds[c], cmds[c]);
        cli_free(&h);
        h = cli_run((const char *const[]){cmds[c], "-h", NULL});
        is_string(o.out, h.out, "%s -h prints the same", cmds[c]);
        cli_free(&h);
        cli_free(&o);
    }
}

static void check_usage_errors(const char *file)
{
    expect((const char *const[]){"frobnicate", NULL}, 2,
           "memtrace: unknown command 'frobnicate'; see 'memtrace --help'\n", "unknown command");
    expect((const char *const[]){"help", "frobnicate", NULL}, 2,
           "memtrace: unknown command 'frobnicate'; see 'memtrace --help'\n",
           "help of an unknown command");
    expect((const char *const[]){"--frob", NULL}, 2,
           "memtrace: unknown option '--frob'; see 'memtrace --help'\n", "unknown global option");
    expect((const char *const[]){"summary", "--x", file, NULL}, 2,
           "memtrace: unknown option '--x' for 'summary'; see 'memtrace summary --help'\n",
           "unknown flag");
    expect((const char *const[]){"summary", file, "--x=3", NULL}, 2,
           "memtrace: unknown option '--x' for 'summary'; see 'memtrace summary --help'\n",
           "unknown flag with a value");
    expect((const char *const[]){"info", "-z", file, NULL}, 2,
           "memtrace: unknown option '-z' for 'info'; see 'memtrace info --help'\n",
           "unknown short flag");
    expect((const char *const[]){"info", "--json=yes", file, NULL}, 2,
           "memtrace: option '--json' of 'info' takes no value; see 'memtrace info --help'\n",
           "a value for a switch");
    expect((const char *const[]){"summary", NULL}, 2,
           "memtrace: 'summary' needs a FILE argument; see 'memtrace summary --help'\n",
           "summary without a file");
    expect((const char *const[]){"info", "--json", NULL}, 2,
           "memtrace: 'info' needs a FILE argument; see 'memtrace info --help'\n",
           "info without a file");
    char two[1024];
    snprintf(two, sizeof(two),
             "memtrace: 'info' takes one file, got '%s' and '%s'; see 'memtrace info --help'\n",
             file, file);
    expect((const char *const[]){"info", file, file, NULL}, 2, two, "two files");
    expect((const char *const[]){"summary", file, "--top", "ten", NULL}, 2,
           "memtrace: invalid value 'ten' for --top of 'summary': expected an integer from 0 to "
           "1000000000; see 'memtrace summary --help'\n",
           "a --top that is not a number");
    expect((const char *const[]){"summary", file, "--depth", "-1", NULL}, 2,
           "memtrace: invalid value '-1' for --depth of 'summary': expected an integer from 0 to "
           "4096; see 'memtrace summary --help'\n",
           "a negative --depth");
    expect((const char *const[]){"summary", file, "--top", NULL}, 2,
           "memtrace: option '--top' of 'summary' needs a value (N); see 'memtrace summary "
           "--help'\n",
           "--top without its value");
}

static void check_file_errors(void)
{
    static const char *const cmds[] = {"info", "summary"};
    char want[1024];
    const char *missing = cli_path("missing.memtrace");
    const char *dir = cli_path("adir");
    const char *empty = cli_path("empty.memtrace");
    const char *text = cli_path("notes.txt");
    mkdir(dir, 0755);
    FILE *f = fopen(empty, "w");
    fclose(f);
    f = fopen(text, "w");
    fputs("These are notes about a training run, not a memtrace recording.\n"
          "They are long enough to hold a whole file header.\n",
          f);
    fclose(f);
    for (int c = 0; c < 2; c++) {
        snprintf(want, sizeof(want), "memtrace: %s: cannot open: No such file or directory\n",
                 missing);
        expect((const char *const[]){cmds[c], missing, NULL}, 1, want, "missing file");
        snprintf(want, sizeof(want), "memtrace: %s: is a directory, not a memtrace file\n", dir);
        expect((const char *const[]){cmds[c], dir, NULL}, 1, want, "directory");
        snprintf(want, sizeof(want), "memtrace: %s: empty file, not a memtrace file\n", empty);
        expect((const char *const[]){cmds[c], empty, NULL}, 1, want, "empty file");
        snprintf(want, sizeof(want), "memtrace: %s: not a memtrace file (bad magic)\n", text);
        expect((const char *const[]){cmds[c], "--json", text, NULL}, 1, want, "a text file");
    }
}

/* A damaged chunk in the middle of a file is an error (exit 1), not a truncation. */
static void check_corrupt(void)
{
    const char *path = cli_path("corrupt.memtrace");
    struct memtrace_event ev[100];
    memset(ev, 0, sizeof(ev));
    for (int k = 0; k < 100; k++) {
        ev[k].action = MEMTRACE_ALLOC;
        ev[k].time_ns = 1000 + (uint64_t)k * 10;
        ev[k].addr = 0x1000 * (uint64_t)(k + 1);
        ev[k].size = 64;
    }
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_meta(w, "{\"host\": \"h\"}"), "mt_writer_meta");
    uint64_t before = mt_writer_bytes(w);
    cli_check(mt_writer_events(w, ev, 100), "mt_writer_events");
    uint64_t after = mt_writer_bytes(w);
    cli_check(mt_writer_events(w, ev, 100), "mt_writer_events");
    cli_check(mt_writer_end(w, "{}"), "mt_writer_end");
    /* Flip a byte of the first events chunk's payload. */
    FILE *f = fopen(path, "r+b");
    long at = (long)(after - 4);
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
    for (int k = 0; k < 2; k++) {
        struct cli_out o = cli_run((const char *const[]){k ? "summary" : "info", path, NULL});
        is_int(1, o.status, "%s of a corrupt file: exit 1", k ? "summary" : "info");
        char prefix[600];
        snprintf(prefix, sizeof(prefix), "memtrace: %s: ", path);
        ok(strncmp(o.err, prefix, strlen(prefix)) == 0 && cli_lines(o.err) == 1 &&
               strstr(o.err, "offset") != NULL,
           "one line naming the file and the offset: %s", o.err);
        diag("chunk at %llu..%llu", (unsigned long long)before, (unsigned long long)after);
        cli_free(&o);
    }
}

/* Runs memtrace args with stdout on /dev/full: returns the exit status, and
 * stderr in *err. */
static int run_to_full(const char *const *args, char **err)
{
    char *argv[16], e[512];
    int n = 0;
    argv[n++] = (char *)cli_binary();
    for (int k = 0; args[k] && n < 15; k++)
        argv[n++] = (char *)args[k];
    argv[n] = NULL;
    snprintf(e, sizeof e, "%s/.full-stderr", cli_dir);
    pid_t pid = fork();
    if (pid == 0) {
        int fo = open("/dev/full", O_WRONLY);
        int fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0)
            _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    *err = cli_slurp(e);
    unlink(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A full stdout is an error every command reports: one line, exit 1. */
static void check_full_stdout(void)
{
    char file[512];
    snprintf(file, sizeof file, "%s", cli_path("ok.memtrace"));
    if (access("/dev/full", W_OK) != 0) {
        skip(8, "no /dev/full");
        return;
    }
    const char *const cases[][4] = {{"info", file, NULL},
                                    {"info", "--json", file, NULL},
                                    {"summary", file, NULL},
                                    {"--help", NULL}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char *err;
        int st = run_to_full(cases[k], &err);
        is_int(1, st, "memtrace %s %s >/dev/full: exit 1", cases[k][0],
               cases[k][1] && cases[k][1][0] == '-' ? cases[k][1] : "");
        size_t len = strlen(err);
        ok(strncmp(err, "memtrace: cannot write the ", 27) == 0 && len > 26 &&
               strcmp(err + len - 26, ": No space left on device\n") == 0 && cli_lines(err) == 1,
           "one line naming the error: %s", err);
        free(err);
    }
}

int main(void)
{
    cli_scratch();
    const char *file = cli_path("ok.memtrace");
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, file, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_end(w, "{}"), "mt_writer_end");
    check_help();
    check_usage_errors(file);
    check_file_errors();
    check_corrupt();
    check_full_stdout();
    done_testing();
    return exit_status();
}
