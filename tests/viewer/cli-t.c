/* cli-t.c: the memtrace command's help, its usage errors (exit 2) and its file errors
 * (exit 1), each a single line on stderr. */
#include "config.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>
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

/* Names from a file reach the terminal escaped, and JSON keeps what is not UTF-8. */
static void check_escapes(void)
{
    const char *path = cli_path("escapes.memtrace");
    static const char *const strs[] = {
        "evil\x1b]0;title\x07name", /* 1: symbol: OSC that sets a terminal's title */
        "caf\xe9.py",               /* 2: file: Latin-1, not UTF-8 */
        "lib\xc2\x9b"
        "2Jx.so",                  /* 3: module: C1 CSI that clears a screen */
        "r\xc3\xa9sum\xc3\xa9.py", /* 4: a UTF-8 file name, kept as it is */
    };
    struct mt_frame_rec fr[2] = {{.ip = 0x1000, .symbol = 1, .file = 2, .line = 7, .module = 3},
                                 {.ip = 0x2000, .module = 3, .offset = 0x40, .file = 4}};
    uint32_t parent[2] = {0, 1}, frame[2] = {2, 1};
    struct memtrace_event ev = {
        .action = MEMTRACE_ALLOC, .time_ns = 5, .addr = 64, .size = 8, .stack = 2};
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_meta(w, "{\"host\": \"h\\u001b[2J\", \"argv\": [\"a\\u009b1m\"]}"),
              "mt_writer_meta");
    cli_check(mt_writer_strings(w, 1, 4, strs), "mt_writer_strings");
    cli_check(mt_writer_frames(w, 1, 2, fr), "mt_writer_frames");
    cli_check(mt_writer_stacks(w, 1, 2, parent, frame), "mt_writer_stacks");
    cli_check(mt_writer_events(w, &ev, 1), "mt_writer_events");
    cli_check(mt_writer_end(w, "{}"), "mt_writer_end");
    for (int k = 0; k < 2; k++) {
        const char *cmd = k ? "summary" : "info";
        struct cli_out o = cli_run((const char *const[]){cmd, path, NULL});
        is_int(0, o.status, "%s of a file with control characters: exit 0", cmd);
        int raw = 0;
        for (const unsigned char *p = (const unsigned char *)o.out; *p; p++)
            raw += (*p < 0x20 && *p != '\n') || *p == 0x7f ||
                   (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0);
        is_int(0, raw, "%s: no control character reaches the terminal", cmd);
        if (k) {
            ok(strstr(o.out, "evil\\x1b]0;title\\x07name at caf\\xe9.py:7") != NULL,
               "summary: the frame shows its escaped symbol and file");
            ok(strstr(o.out, "lib\\xc2\\x9b2Jx.so+0x40 at r\xc3\xa9sum\xc3\xa9.py") != NULL,
               "summary: C1 controls escaped, UTF-8 kept");
        } else {
            ok(strstr(o.out, "h\\x1b[2J") != NULL, "info: the host is shown escaped");
            ok(strstr(o.out, "a\\xc2\\x9b1m") != NULL, "info: argv is shown escaped");
        }
        cli_free(&o);
    }
    struct cli_out o = cli_run((const char *const[]){"summary", "--json", path, NULL});
    json_t *j = cli_json(&o);
    json_t *f0 = json_array_get(cli_get(j, "top.stacks"), 0);
    f0 = json_array_get(json_object_get(f0, "frames"), 0);
    const char *sym = json_string_value(json_object_get(f0, "symbol"));
    const char *file = json_string_value(json_object_get(f0, "file"));
    ok(sym && strcmp(sym, strs[0]) == 0, "JSON: the symbol is kept as it is: %s", sym ? sym : "-");
    ok(file && strcmp(file, "caf\\xe9.py") == 0,
       "JSON: a file name that is not UTF-8 is kept, "
       "escaped: %s",
       file ? file : "(lost)");
    json_decref(j);
    cli_free(&o);
}

/* A FIFO is read in one pass, as a file is: no hang, no "empty file". */
static void check_fifo(void)
{
    const char *src = cli_path("fifo-src.memtrace"), *fifo = cli_path("fifo");
    struct memtrace_event ev[3] = {
        {.action = MEMTRACE_ALLOC, .time_ns = 10, .addr = 4096, .size = 100},
        {.action = MEMTRACE_ALLOC, .time_ns = 20, .addr = 8192, .size = 300},
        {.action = MEMTRACE_FREE_COMPLETED, .time_ns = 30, .addr = 4096},
    };
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, src, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_events(w, ev, 3), "mt_writer_events");
    cli_check(mt_writer_end(w, "{}"), "mt_writer_end");
    if (mkfifo(fifo, 0600) != 0)
        bail_out("mkfifo failed");
    static const char *const cmds[] = {"summary", "info"};
    for (int k = 0; k < 2; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            /* The writer end: copy the file into the FIFO, then go. */
            char buf[4096];
            int in = open(src, O_RDONLY), fd = open(fifo, O_WRONLY);
            ssize_t n;
            while (in >= 0 && fd >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
                if (write(fd, buf, (size_t)n) != n)
                    break;
            _exit(0);
        }
        struct cli_out o = cli_run((const char *const[]){cmds[k], "--json", fifo, NULL});
        waitpid(pid, NULL, 0);
        is_int(0, o.status, "%s of a FIFO: exit 0 (%s)", cmds[k], o.err);
        json_t *j = cli_json(&o);
        is_int(3, cli_int(j, "events"), "%s of a FIFO: the 3 events", cmds[k]);
        if (k == 0)
            is_int(400, cli_int(j, "allocated.peak_bytes"), "summary of a FIFO: the peak");
        json_decref(j);
        cli_free(&o);
    }
}

/* A window that can hold nothing is said so, never shown as an empty result: a --from
 * after --to (both times or both indexes) is a usage error, and a --from the replay
 * never reaches (a misspelt annotation, a time past the end, an index past --to) is
 * one line and exit 1, with no output. */
static void check_empty_window(void)
{
    char src[512], out[512], e[700];
    snprintf(src, sizeof src, "%s", cli_path("fifo-src.memtrace")); /* 3 events, 10-30 ns */
    snprintf(out, sizeof out, "%s", cli_path("window.csv"));
    const char *const usage[][8] = {
        {"leaks", "--from", "20ns", "--to", "10ns", src, NULL},
        {"timeline", "--from", "#2", "--to", "#1", src, NULL},
        {"export", "--format", "csv", "--from", "#2", "--to", "#1", src}};
    for (size_t k = 0; k < sizeof usage / sizeof *usage; k++) {
        const char *const *a = usage[k];
        const char *argv[10] = {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], NULL};
        snprintf(e, sizeof e,
                 "memtrace: --from comes after --to: the window of '%s' would be empty; see "
                 "'memtrace %s --help'\n",
                 a[0], a[0]);
        expect(argv, 2, e, a[0]);
    }
    struct {
        const char *argv[9];
        const char *text;
    } missed[] = {
        {{"leaks", "--from", "nosuch", src}, "'nosuch' is not reached before the end of the file"},
        {{"peak", "--from", "1s", src}, "+1.000 s is not reached before the end of the file"},
        {{"top", "--from", "#2", "--to", "5ns", src}, "event #2 is not reached before --to"},
        {{"export", "--format", "csv", "-o", out, "--from", "nosuch", src},
         "'nosuch' is not reached before the end of the file"},
    };
    for (size_t k = 0; k < sizeof missed / sizeof *missed; k++) {
        snprintf(e, sizeof e, "memtrace: %s: --from %s: the window is empty\n", src,
                 missed[k].text);
        struct cli_out o = cli_run(missed[k].argv);
        is_int(1, o.status, "%s, an empty window: exit 1", missed[k].argv[0]);
        is_string(e, o.err, "%s, an empty window: one line", missed[k].argv[0]);
        is_string("", o.out, "%s, an empty window: no output", missed[k].argv[0]);
        cli_free(&o);
    }
    ok(access(out, F_OK) != 0, "export of an empty window: no output file left");
    struct cli_out o = cli_run(
        (const char *const[]){"diff", src, "--from", "30ns", "--to", "10ns", "--json", NULL});
    is_int(0, o.status, "diff's --from and --to are two points, in either order (%s)", o.err);
    cli_free(&o);
}

/* Runs memtrace args with stdout on out, and with files limited to fsize bytes when
 * fsize > 0 (SIGXFSZ ignored, so a write past it fails with EFBIG): returns the exit
 * status, and stderr in *err. */
static int run_limited(const char *const *args, const char *out, long fsize, char **err)
{
    char *argv[16], e[512];
    int n = 0;
    argv[n++] = (char *)cli_binary();
    for (int k = 0; args[k] && n < 15; k++)
        argv[n++] = (char *)args[k];
    argv[n] = NULL;
    snprintf(e, sizeof e, "%s/.limited-stderr", cli_dir);
    pid_t pid = fork();
    if (pid == 0) {
        int fo = open(out, O_WRONLY);
        int fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0)
            _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        if (fsize > 0) {
            struct rlimit rl = {(rlim_t)fsize, (rlim_t)fsize};
            signal(SIGXFSZ, SIG_IGN);
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
                _exit(125);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    *err = cli_slurp(e);
    unlink(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int run_to_full(const char *const *args, char **err)
{
    return run_limited(args, "/dev/full", 0, err);
}

/* Whether err is one line that ends with reason. */
static int one_line_ending(const char *err, const char *reason)
{
    size_t len = strlen(err), n = strlen(reason);
    return len > n + 1 && strncmp(err + len - n - 1, reason, n) == 0 && cli_lines(err) == 1;
}

/* The names in the scratch directory that begin with prefix. */
static int scratch_count(const char *prefix)
{
    int n = 0;
    DIR *d = opendir(cli_dir);
    for (struct dirent *de; d && (de = readdir(d)) != NULL;)
        n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    int c;
    while (a && b && (c = getc(a)) != EOF)
        putc(c, b);
    if (!a || !b || ferror(a) || fclose(b) != 0)
        bail_out("cannot copy a file");
    fclose(a);
}

/* Whether the files at a and b hold the same bytes. */
static int same_bytes(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb, ca, cb;
    while (same && ((ca = getc(fa)) != EOF) | ((cb = getc(fb)) != EOF))
        same = ca == cb;
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* A write that fails halfway (a full disk, here a file size limit) after --force: the
 * file the output would have replaced is still there, unchanged, and the message names
 * the system's reason. import and merge write a temporary file and rename it at the
 * end; they removed the old file after a failure all the same. export writes in place;
 * after a failure it removed whatever -o named, even a device. */
static void check_failed_output(void)
{
    /* (cli_path's buffers are reused after four calls: the paths are copied) */
    char src[512], json[512], keep[512], same[512], twin[512], orig[512];
    snprintf(src, sizeof src, "%s", cli_path("big.memtrace"));
    snprintf(json, sizeof json, "%s", cli_path("big.json"));
    snprintf(keep, sizeof keep, "%s", cli_path("keep.memtrace"));
    snprintf(same, sizeof same, "%s", cli_path("same.memtrace"));
    snprintf(twin, sizeof twin, "%s", cli_path("twin.memtrace"));
    snprintf(orig, sizeof orig, "%s", cli_path("orig.memtrace"));
    enum { N = 20000 };
    struct memtrace_event *ev = calloc(N, sizeof(*ev));
    if (!ev)
        bail_out("out of memory");
    uint64_t seed = 12345;
    for (int k = 0; k < N; k++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        ev[k].action = MEMTRACE_ALLOC;
        ev[k].time_ns = 1000 * (uint64_t)k + (seed >> 54);
        ev[k].addr = (seed >> 20) << 9;
        ev[k].size = 512;
    }
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, src, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_events(w, ev, N), "mt_writer_events");
    cli_check(mt_writer_end(w, "{}"), "mt_writer_end");
    free(ev);

    /* the same entries as a PyTorch snapshot, in JSON */
    FILE *f = fopen(json, "w");
    if (!f)
        bail_out("cannot write the JSON snapshot");
    fputs("{\"segments\": [], \"device_traces\": [[", f);
    for (int k = 0; k < N; k++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        fprintf(f,
                "%s{\"action\": \"alloc\", \"addr\": %llu, \"size\": 512, \"stream\": 0, "
                "\"time_us\": %d, \"frames\": []}",
                k ? ", " : "", (unsigned long long)((seed >> 20) << 9), k);
    }
    fputs("]]}", f);
    if (fclose(f) != 0)
        bail_out("cannot write the JSON snapshot");

    const char *const cases[][8] = {
        {"merge", "-o", keep, "--force", src, NULL},
        {"import", json, "-o", keep, "--force", NULL},
        {"export", "--format", "csv", "-o", keep, "--force", src, NULL},
        {"export", "--format", "perfetto", "-o", keep, "--force", src, NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        f = fopen(keep, "w");
        if (!f || fputs("the old file\n", f) < 0 || fclose(f) != 0)
            bail_out("cannot write the file to keep");
        char *err;
        int st = run_limited(cases[k], "/dev/null", 4096, &err);
        is_int(1, st, "%s --force, the output past a 4096-byte limit: exit 1", cases[k][0]);
        ok(one_line_ending(err, ": File too large"), "%s: one line with the reason: %s",
           cases[k][0], err);
        free(err);
        char *old = cli_slurp(keep);
        is_string("the old file\n", old, "%s: the file --force would have replaced is unchanged",
                  cases[k][0]);
        free(old);
        is_int(0, scratch_count("keep.memtrace.tmp-"), "%s: no temporary file left", cases[k][0]);
    }

    /* -o naming the input itself: --force would empty it before it is read */
    if (link(src, same) != 0 || link(src, twin) != 0)
        bail_out("link failed");
    copy_file(src, orig);
    const char *const selves[][9] = {
        {"export", "--format", "csv", "-o", same, "--force", same, NULL},
        {"flamegraph", "-o", same, "--force", same, NULL},
        {"html", "-o", twin, "--force", src, same, NULL},
    };
    for (size_t k = 0; k < sizeof selves / sizeof *selves; k++) {
        char *err;
        int st = run_limited(selves[k], "/dev/null", 0, &err);
        ok(st == 1 && one_line_ending(err, ": not replaced") && strstr(err, "is also an input"),
           "%s -o its own input --force: exit 1, one line: %s", selves[k][0], err);
        free(err);
        ok(same_bytes(src, orig), "%s: the input is unchanged", selves[k][0]);
    }

    /* As root, a device of its own: were the export to remove what -o named, it must
     * not be the machine's /dev/full (which others cannot remove) */
    char full[512];
    snprintf(full, sizeof full, "%s", "/dev/full");
    struct stat sb;
    if (geteuid() == 0) {
        snprintf(full, sizeof full, "%s", cli_path("full"));
        if (mknod(full, S_IFCHR | 0666, makedev(1, 7)) != 0) {
            skip(6, "cannot make a full device here (mknod)");
            return;
        }
    }
    if (access(full, W_OK) != 0 || stat(full, &sb) != 0 || !S_ISCHR(sb.st_mode)) {
        skip(6, "no /dev/full");
        return;
    }
    static const char *const formats[] = {"csv", "perfetto", "pytorch-pickle"};
    for (int k = 0; k < 3; k++) {
        char *err;
        int st = run_limited((const char *const[]){"export", "--format", formats[k], "--force",
                                                   "-o", full, src, NULL},
                             "/dev/null", 0, &err);
        ok(st == 1 && one_line_ending(err, ": No space left on device"),
           "export --format %s -o a full device: exit 1, one line with the reason: %s", formats[k],
           err);
        free(err);
        ok(stat(full, &sb) == 0 && S_ISCHR(sb.st_mode),
           "export --format %s: the device is still there", formats[k]);
    }
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
    check_escapes();
    check_fifo();
    check_empty_window();
    check_full_stdout();
    check_failed_output();
    done_testing();
    return exit_status();
}
