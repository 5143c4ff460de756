/* recorder_stream-t: libtrace/recorder_stream.c and the files the recorder writes
 * (streams and dumps: never through a link, never over a file, 0600).
 * A stream that reaches RLIMIT_FSIZE must end as a full disk does: one warning line
 * with the reason, recording stops, the file reads up to its last whole chunk, and
 * the program keeps its own exit status (it used to die of SIGXFSZ, status 153). */
#include "config.h"

#include "memtrace.h"
#include "memtrace_snapshot.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/recorder-stream-t-XXXXXX";

static char *slurp(const char *path)
{
    static char buf[8192];
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : 0;
    buf[n > 0 ? n : 0] = '\0';
    if (fd >= 0)
        close(fd);
    return buf;
}

static int lines_of(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Events whose fields change at random, so the stream grows by several bytes per
 * event whatever the compression. */
static void record_random(int n, uint64_t *seed)
{
    for (int i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        struct memtrace_event ev = {
            .action = MEMTRACE_ALLOC,
            .addr = *seed >> 8,
            .size = (*seed >> 40) | 1,
            .stream = *seed >> 50,
        };
        memtrace_record_event(&ev);
    }
}

#define LIMIT (256 << 10)

/* The child: stream under a 256 KiB file size limit, then dump; exits with 7 when
 * it lived through both, and says how the dump went on stdout (a file). */
static void child(const char *stream, const char *dump, const char *err, const char *out)
{
    int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
    struct rlimit rl = {LIMIT, LIMIT};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
        _exit(2);
    struct memtrace_options o;
    memtrace_options_init(&o);
    o.context = MEMTRACE_CONTEXT_NONE;
    o.stream_path = stream;
    o.flush_ms = 10;
    if (memtrace_record_history(&o) != 0)
        _exit(3);
    uint64_t seed = 42;
    for (int round = 0; round < 60; round++) {
        record_random(4000, &seed);
        usleep(15000);
    }
    memtrace_record_history(NULL);
    int rc = memtrace_dump_snapshot(dump);
    int e = errno;
    char line[200];
    int len = snprintf(line, sizeof line, "dump %d %s\n", rc, rc != 0 ? strerror(e) : "-");
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (write(fd, line, (size_t)len) != len)
        _exit(4);
    close(fd);
    _exit(7);
}

static void test_file_size_limit(void)
{
    char stream[300], dump[300], err[300], out[300];
    snprintf(stream, sizeof stream, "%s/fsize.memtrace", tmpdir);
    snprintf(dump, sizeof dump, "%s/fsize-dump.memtrace", tmpdir);
    snprintf(err, sizeof err, "%s/fsize.err", tmpdir);
    snprintf(out, sizeof out, "%s/fsize.out", tmpdir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        child(stream, dump, err, out);
    int st;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st))
        diag("killed by signal %d", WTERMSIG(st));
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 7, "the program keeps its own exit status (7)");
    const char *e = slurp(err);
    ok(lines_of(e) == 1 && strncmp(e, "memtrace: ", 10) == 0 && strstr(e, "File too large") != NULL,
       "one warning line naming the reason");
    if (lines_of(e) != 1 || strstr(e, "File too large") == NULL)
        diag("stderr: %s", e);
    is_string("dump -3 File too large\n", slurp(out),
              "the dump fails with MEMTRACE_EIO and errno EFBIG");
    ok(access(dump, F_OK) != 0, "and leaves no file behind");

    struct stat sb = {0};
    int have = stat(stream, &sb) == 0;
    ok(have && sb.st_size <= LIMIT && sb.st_size > LIMIT / 2,
       "the stream stopped at the limit (%lld bytes)", (long long)sb.st_size);
    struct memtrace_reader *r;
    struct memtrace_errinfo ei;
    if (memtrace_reader_open(&r, stream, &ei) != 0) {
        ok(0, "the stream opens (%s)", ei.text);
        skip(1, "no file");
        return;
    }
    struct memtrace_event ev;
    long long n = 0;
    int rc;
    while ((rc = memtrace_reader_next(r, &ev)) == 1)
        n++;
    if (rc < 0)
        diag("read error: %s", memtrace_reader_error(r)->text);
    ok(rc == 0 && n > 10000 && n < 240000, "it reads back to its last whole chunk: %lld events", n);
    is_int(1, memtrace_reader_truncated(r), "and reads as truncated");
    memtrace_reader_close(r);
    unlink(stream);
    unlink(err);
    unlink(out);
}

static int start_stream(const char *path)
{
    struct memtrace_options o;
    memtrace_options_init(&o);
    o.context = MEMTRACE_CONTEXT_NONE;
    o.stream_path = path;
    return memtrace_record_history(&o);
}

static int temporaries(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp- >/dev/null", tmpdir);
    return system(cmd) == 0;
}

/* The files the recorder creates: never through a link, 0600, never over an existing
 * file unless MEMTRACE_OVERWRITE=1; a dump appears whole or not at all. */
static void test_no_clobber(void)
{
    char file[300], link_path[300], dump[300];
    snprintf(file, sizeof file, "%s/mine.txt", tmpdir);
    snprintf(link_path, sizeof link_path, "%s/link.memtrace", tmpdir);
    snprintf(dump, sizeof dump, "%s/dump.memtrace", tmpdir);
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, "precious\n", 9) != 9 || symlink(file, link_path) != 0)
        bail_out("cannot set up files");
    close(fd);
    unsetenv("MEMTRACE_OVERWRITE");
    mode_t mask = umask(022);

    errno = 0;
    is_int(MEMTRACE_EIO, start_stream(file), "a stream to an existing file is refused");
    is_int(EEXIST, errno, "with EEXIST");
    errno = 0;
    is_int(MEMTRACE_EIO, start_stream(link_path), "a stream through a symbolic link is refused");
    setenv("MEMTRACE_OVERWRITE", "1", 1);
    errno = 0;
    is_int(MEMTRACE_EIO, start_stream(link_path), "even with MEMTRACE_OVERWRITE=1");
    is_int(ELOOP, errno, "with ELOOP");
    is_string("precious\n", slurp(file), "the file and the link's target are untouched");
    unsetenv("MEMTRACE_OVERWRITE");

    struct memtrace_options o;
    memtrace_options_init(&o);
    o.context = MEMTRACE_CONTEXT_NONE;
    memtrace_record_history(&o);
    struct memtrace_event ev = {.action = MEMTRACE_ALLOC, .addr = 4096, .size = 512};
    struct stat sb = {0};
    memtrace_record_event(&ev);
    is_int(0, memtrace_dump_snapshot(dump), "a dump to a new name");
    stat(dump, &sb);
    is_int(0600, sb.st_mode & 0777, "is created 0600");
    errno = 0;
    is_int(MEMTRACE_EIO, memtrace_dump_snapshot(dump), "a second dump to the same name is refused");
    is_int(EEXIST, errno, "with EEXIST");
    errno = 0;
    is_int(MEMTRACE_EIO, memtrace_dump_snapshot(link_path), "a dump over a symbolic link too");
    is_string("precious\n", slurp(file), "whose target is untouched");
    setenv("MEMTRACE_OVERWRITE", "1", 1);
    memtrace_record_event(&ev);
    is_int(0, memtrace_dump_snapshot(dump), "with MEMTRACE_OVERWRITE=1 the dump is replaced");
    unsetenv("MEMTRACE_OVERWRITE");
    struct memtrace_reader *r;
    struct memtrace_errinfo ei;
    long long n = 0;
    if (memtrace_reader_open(&r, dump, &ei) == 0) {
        struct memtrace_event e;
        while (memtrace_reader_next(r, &e) == 1)
            n++;
        memtrace_reader_close(r);
    }
    /* every call records its snapshot event, the refused ones too */
    is_int(6, n, "by the newer one (alloc, 3 snapshots, alloc, snapshot)");
    ok(!temporaries(), "no temporary file is left");
    memtrace_record_history(NULL);
    umask(mask);
    unlink(dump);
    unlink(link_path);
    unlink(file);
}

int main(void)
{
    if (mkdtemp(tmpdir) == NULL)
        bail_out("mkdtemp failed");
    plan(22);
    test_file_size_limit();
    test_no_clobber();
    rmdir(tmpdir);
    return exit_status();
}
