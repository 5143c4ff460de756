/* fuzz_util.c: the fuzz targets' shared parts (fuzz.h): the in-memory input file and
 * the walk over a .memtrace file that every reading target ends with. */
#include "config.h"

#include "fuzz.h"
#include "import.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* With -close_fd_mask=2 only the sanitizer's report reaches the log. */
extern void __sanitizer_report_error_summary(const char *text) __attribute__((weak));

void fuzz_fail(const char *file, int line, const char *what)
{
    char text[512];
    snprintf(text, sizeof(text), "memtrace fuzz: %s:%d: %s", file, line, what);
    fprintf(stderr, "%s\n", text);
    if (__sanitizer_report_error_summary)
        __sanitizer_report_error_summary(text);
    abort();
}

const char *fuzz_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("memtrace-fuzz", MFD_CLOEXEC);
        if (fd < 0) {
            char tmpl[] = "/tmp/memtrace-fuzz-XXXXXX";
            fd = mkstemp(tmpl);
            FUZZ_CHECK(fd >= 0, "cannot create the input file");
            unlink(tmpl);
        }
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    }
    FUZZ_CHECK(ftruncate(fd, 0) == 0, "cannot truncate the input file");
    for (size_t done = 0; done < size;) {
        ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
        FUZZ_CHECK(n > 0, "cannot write the input file");
        done += (size_t)n;
    }
    return path;
}

static char *scratch;

static void remove_scratch(void)
{
    rmdir(scratch);
}

const char *fuzz_dir(void)
{
    if (scratch == NULL) {
        const char *tmp = getenv("TMPDIR");
        static char tmpl[512];
        snprintf(tmpl, sizeof(tmpl), "%s/memtrace-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        scratch = mkdtemp(tmpl);
        FUZZ_CHECK(scratch != NULL, "cannot create a scratch directory");
        atexit(remove_scratch);
    }
    return scratch;
}

static size_t sink;

/* A stack as `top` and `flamegraph` print it: each frame and its strings. */
static void touch_stack(const struct memtrace_reader *r, uint32_t stack)
{
    uint32_t frames[16];
    int depth = memtrace_reader_stack(r, stack, frames, 16);
    FUZZ_CHECK(depth >= 0, "a stack has a negative depth");
    FUZZ_CHECK(stack != 0 || depth == 0, "stack 0 has frames");
    for (int i = 0; i < depth && i < 16; i++) {
        const struct memtrace_frame *f = memtrace_reader_frame(r, frames[i]);
        if (f == NULL)
            continue;
        sink += strlen(f->module) + strlen(f->symbol) + strlen(f->file) + f->line;
    }
}

static void touch_json(const char *text, int must)
{
    if (text == NULL) {
        FUZZ_CHECK(!must, "the metadata is missing");
        return;
    }
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);
    FUZZ_CHECK(j != NULL && json_is_object(j), "the reader's JSON text is not an object");
    json_decref(j);
}

static void check_level(const struct mt_level *l)
{
    FUZZ_CHECK(l->cur <= l->peak, "a level is above its peak");
}

int fuzz_walk(const char *path, const struct mt_filter *f)
{
    /* One thread: a run the fuzzer can repeat, and coverage it can attribute
     * (tests/snapshot/reader_ahead-t holds the threaded reader to the inline one). */
    setenv("MEMTRACE_READER_THREAD", "0", 0);
    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    memset(&err, 0, sizeof(err));
    int rc = memtrace_reader_open(&r, path, &err);
    if (rc < 0) {
        FUZZ_CHECK(r == NULL && err.code == rc, "a failed open returns its code");
        FUZZ_CHECK(strncmp(err.text, path, strlen(path)) == 0 && err.text[strlen(path)] == ':',
                   "an open error names the file");
        return rc;
    }
    struct mt_replay *rp;
    rc = mt_replay_new(&rp, r, path, f);
    if (rc < 0)
        return rc;
    while ((rc = mt_replay_next(rp)) == 1) {
        const struct memtrace_event *ev = rp->ev;
        touch_stack(r, ev->stack);
        sink += strlen(memtrace_reader_string(r, ev->category));
        sink += strlen(memtrace_reader_string(r, ev->source));
        if (rp->eff.kind == MT_EFF_FREE || rp->eff.kind == MT_EFF_SEG_REMOVE || rp->eff.replaced)
            touch_stack(r, rp->eff.gone.stack);
        if (f == NULL) {
            check_level(&rp->allocated);
            check_level(&rp->reserved);
        }
    }
    if (rc < 0) {
        const struct memtrace_errinfo *e = memtrace_reader_error(r);
        FUZZ_CHECK(rc == MEMTRACE_ENOMEM || (e->code == rc && e->text[0] != 0),
                   "a reading error has its code and text");
        FUZZ_CHECK(rc == MEMTRACE_ENOMEM || strncmp(e->text, path, strlen(path)) == 0,
                   "a reading error names the file");
    }
    touch_json(memtrace_reader_meta(r), 1);
    touch_json(memtrace_reader_end(r), 0);
    for (size_t i = 0; i < memtrace_reader_segment_count(r); i++) {
        const struct memtrace_segment *s = memtrace_reader_segment(r, i);
        FUZZ_CHECK(s != NULL, "a counted segment is missing");
        touch_stack(r, s->stack);
        sink += strlen(memtrace_reader_string(r, s->source));
        for (size_t k = 0; k < s->nblocks; k++)
            touch_stack(r, s->blocks[k].stack);
    }
    uint32_t nstacks = memtrace_reader_stack_count(r);
    for (uint32_t s = 0; s <= nstacks && s < 4096; s++) {
        uint64_t bytes, count;
        mt_tally_at_peak(&rp->block_stacks, &rp->allocated, s, &bytes, &count);
        mt_tally_at_peak(&rp->seg_stacks, &rp->reserved, s, &bytes, &count);
        sink += bytes + count;
    }
    for (size_t k = 0; k < rp->ndev; k++)
        FUZZ_CHECK(mt_replay_device(rp, rp->dev[k].device) != NULL, "a device is lost");
    if (rc == 0)
        sink += (size_t)mt_replay_truncated(rp) + memtrace_reader_offset(r);
    mt_replay_close(rp);
    return rc;
}

int fuzz_import(const uint8_t *data, size_t size)
{
    const char *in = fuzz_file(data, size);
    static char out[600];
    if (out[0] == 0)
        snprintf(out, sizeof(out), "%s/out.memtrace", fuzz_dir());
    struct mt_import_stats st;
    struct memtrace_errinfo err;
    int rc = mt_import_pytorch(in, out, MT_WRITER_OVERWRITE, &st, &err);
    if (rc != 0) {
        FUZZ_CHECK(rc < 0 && err.code == rc, "a failed import returns its code");
        FUZZ_CHECK(strncmp(err.text, in, strlen(in)) == 0 && err.text[strlen(in)] == ':' &&
                       strchr(err.text, '\n') == NULL,
                   "an import error is one line naming the input");
        FUZZ_CHECK(access(out, F_OK) != 0, "a failed import left its output");
        return rc;
    }
    struct memtrace_reader *r;
    FUZZ_CHECK(memtrace_reader_open(&r, out, NULL) == 0, "an imported file does not open");
    struct memtrace_event ev;
    uint64_t events = 0;
    int next;
    while ((next = memtrace_reader_next(r, &ev)) == 1)
        events++;
    FUZZ_CHECK(next == 0 && !memtrace_reader_truncated(r), "an imported file does not read whole");
    FUZZ_CHECK(events == st.events, "an imported file lost events");
    FUZZ_CHECK(memtrace_reader_segment_count(r) == st.segments, "an imported file lost segments");
    memtrace_reader_close(r);
    FUZZ_CHECK(fuzz_walk(out, NULL) == 0, "an imported file does not replay");
    unlink(out);
    return 0;
}
