/* reader_ahead-t: the reader's read-ahead thread against its inline source. Each
 * file (whole, cut, damaged) is read both ways, and everything a caller can see must
 * be the same: the events, the tables as they stand at each event (a stack table
 * chunk sits between event chunks), the error and its text, truncation, the end
 * record. A reader closed early, anywhere in a batch, must stop its thread. */
#include "config.h"

#include "memtrace_snapshot.h"
#include "writer.h"

#include "format.h"
#include "tap.h"
#include "util.h"

#include <unistd.h>

/* Chunks of 9000 events: more than the queue's 4 batches of 4096 between tables. */
#define PER   9000
#define NEV   (3 * PER + 5)
#define NSTOP 9

static char dir[64];
static struct memtrace_event events[NEV];

static void path_of(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

/* Addresses from a small set repeat, so that both hits and misses are decoded. */
static void make_file(const char *path)
{
    uint64_t s = 7;
    for (int i = 0; i < NEV; i++) {
        struct memtrace_event *e = &events[i];
        memset(e, 0, sizeof(*e));
        e->time_ns = 5000 + (uint64_t)i * 700 + rnd_next(&s) % 300;
        e->addr = 0x7f0000000000ull + (rnd_next(&s) % 64) * 512;
        e->size = 512 * (1 + i % 3);
        e->requested_size = e->size - (uint64_t)(i % 5);
        e->tid = 40 + (uint32_t)(i % 3 == 0);
        e->stack = i < PER ? 1 + (uint32_t)(i % 2) : 1 + (uint32_t)(i % 4);
        e->source = 1;
        e->action = (uint8_t)(i % 3 == 2 ? MEMTRACE_FREE_COMPLETED : MEMTRACE_ALLOC);
    }
    struct mt_writer *w;
    if (mt_writer_open(&w, path, MT_WRITER_OVERWRITE) != 0)
        bail_out("cannot write test file");
    mt_writer_meta(w, "{\"pid\":11}");
    const char *strs[2] = {"caching_allocator", "main"};
    mt_writer_strings(w, 1, 2, strs);
    struct mt_frame_rec f = {0x401000, 0x1000, 0, 2, 0, 0};
    mt_writer_frames(w, 1, 1, &f);
    uint32_t parent[4] = {0, 1, 2, 3}, frame[4] = {1, 1, 1, 1};
    mt_writer_stacks(w, 1, 2, parent, frame);
    mt_writer_events(w, events, PER);
    mt_writer_stacks(w, 3, 2, parent + 2, frame + 2);
    mt_writer_events(w, events + PER, PER);
    struct memtrace_segment seg = {.addr = 0x7f0000000000ull, .total_size = 2 << 20};
    mt_writer_state(w, 77777, &seg, 1);
    mt_writer_events(w, events + 2 * PER, PER);
    mt_writer_events(w, events + 3 * PER, 5);
    mt_writer_end(w, "{\"events\":27005}");
}

/* What a caller sees of one read. */
struct seen {
    int open_rc, last_rc, truncated;
    int count;
    int events_ok;          /* equal to events[0..count) */
    uint32_t stacks[NEV];   /* memtrace_reader_stack_count() after each event */
    uint32_t segments[NEV]; /* memtrace_reader_segment_count() after each event */
    struct memtrace_errinfo err;
    char end[64];
    uint64_t offset;
};

static struct seen seen_a, seen_b;

static void read_file(const char *path, const char *thread, int stop, struct seen *out)
{
    memset(out, 0, sizeof(*out));
    out->events_ok = 1;
    setenv("MEMTRACE_READER_THREAD", thread, 1);
    struct memtrace_reader *r;
    out->open_rc = memtrace_reader_open(&r, path, &out->err);
    if (out->open_rc != 0)
        return;
    struct memtrace_event e;
    while (out->count < stop && (out->last_rc = memtrace_reader_next(r, &e)) == 1) {
        if (out->count >= NEV || !event_equal(&e, &events[out->count])) {
            out->events_ok = 0;
            break;
        }
        out->stacks[out->count] = memtrace_reader_stack_count(r);
        out->segments[out->count] = (uint32_t)memtrace_reader_segment_count(r);
        out->count++;
    }
    out->truncated = memtrace_reader_truncated(r);
    out->err = *memtrace_reader_error(r);
    const char *end = memtrace_reader_end(r);
    snprintf(out->end, sizeof(out->end), "%s", end ? end : "(none)");
    out->offset = memtrace_reader_offset(r);
    memtrace_reader_close(r);
}

static int same(const struct seen *a, const struct seen *b)
{
    return a->open_rc == b->open_rc && a->last_rc == b->last_rc && a->truncated == b->truncated &&
           a->count == b->count && a->events_ok && b->events_ok &&
           memcmp(a->stacks, b->stacks, sizeof(a->stacks)) == 0 &&
           memcmp(a->segments, b->segments, sizeof(a->segments)) == 0 &&
           a->err.code == b->err.code && a->err.offset == b->err.offset &&
           strcmp(a->err.text, b->err.text) == 0 && strcmp(a->end, b->end) == 0 &&
           a->offset == b->offset;
}

/* Reads path both ways and checks they agree; returns the threaded read. */
static const struct seen *both(const char *name, const char *path)
{
    read_file(path, "0", NEV + 1, &seen_a);
    read_file(path, "1", NEV + 1, &seen_b);
    ok(same(&seen_a, &seen_b),
       "%s: inline and read-ahead agree (%d and %d events, rc %d and %d, %s)", name, seen_a.count,
       seen_b.count, seen_a.last_rc, seen_b.last_rc, seen_b.err.text);
    return &seen_b;
}

/* Chunk offsets of a file image. */
static int chunk_offsets(const uint8_t *buf, size_t len, size_t *offs, int max)
{
    int n = 0;
    for (size_t off = MT_HEADER_LEN; off + MT_CHUNK_HEADER_LEN <= len && n < max;) {
        offs[n++] = off;
        off += MT_CHUNK_HEADER_LEN + mt_get_u32(buf + off + 4);
    }
    return n;
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/memtrace-ahead-t-XXXXXX");
    if (mkdtemp(dir) == NULL)
        bail_out("mkdtemp failed");
    char path[128], cut[128];
    path_of(path, sizeof(path), "whole.memtrace");
    path_of(cut, sizeof(cut), "cut.memtrace");
    make_file(path);
    size_t len = 0;
    uint8_t *buf = slurp(path, &len);
    size_t offs[16];
    int n = chunk_offsets(buf, len, offs, 16);
    /* meta, strings, frames, stacks, events, stacks, events, state, events x2, end */
    if (n != 11)
        bail_out("the test file does not have 11 chunks");
    alarm(300);

    const struct seen *s = both("whole file", path);
    ok(s->count == NEV && s->last_rc == 0 && !s->truncated &&
           strcmp(s->end, "{\"events\":27005}") == 0,
       "whole file: %d events, the end record, not truncated", s->count);
    ok(s->stacks[PER - 1] == 2 && s->stacks[PER] == 4 && s->segments[2 * PER - 1] == 0 &&
           s->segments[2 * PER] == 1,
       "the tables grow at the event they come before (stacks %u then %u, segments %u then %u)",
       s->stacks[PER - 1], s->stacks[PER], s->segments[2 * PER - 1], s->segments[2 * PER]);

    /* Cut inside each event chunk and inside the stack chunk between them. */
    size_t cuts[] = {offs[4] + 100, offs[5] + 30, offs[6] + 300,
                     offs[8] + 50,  offs[9] + 10, len - 3};
    for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
        spill(cut, buf, cuts[k]);
        char name[64];
        snprintf(name, sizeof(name), "cut at byte %zu", cuts[k]);
        s = both(name, cut);
        ok(s->truncated && s->last_rc == 0 && s->err.code == 0, "%s: truncated, no error", name);
    }

    /* A damaged chunk in the middle: its events' chunk, then the stack chunk. */
    uint8_t *copy = malloc(len);
    size_t bad[] = {offs[6], offs[5]};
    int before[] = {PER, PER};
    for (size_t k = 0; k < 2; k++) {
        memcpy(copy, buf, len);
        copy[bad[k] + MT_CHUNK_HEADER_LEN + 5] ^= 0x20;
        spill(cut, copy, len);
        char name[64], text[200];
        snprintf(name, sizeof(name), "damage at chunk %zu", bad[k]);
        s = both(name, cut);
        snprintf(text, sizeof(text), "%s: chunk at offset %zu: checksum mismatch", cut, bad[k]);
        ok(s->count == before[k] && s->last_rc == MEMTRACE_EFORMAT &&
               strcmp(s->err.text, text) == 0,
           "%s: %d events, then the error in order: %s", name, s->count, s->err.text);
    }
    free(copy);

    /* A consumer that stops: before the first event, inside and at the edges of a
     * batch, inside a chunk, with the source waiting on a table chunk. */
    int stops[NSTOP] = {0, 1, 4095, 4096, 4097, PER, PER + 1, 2 * PER + 7, NEV - 1};
    int wrong = 0;
    for (int k = 0; k < NSTOP; k++) {
        read_file(path, "1", stops[k], &seen_b);
        if (seen_b.open_rc != 0 || seen_b.count != stops[k] || !seen_b.events_ok) {
            diag("stop at %d: open %d, %d events", stops[k], seen_b.open_rc, seen_b.count);
            wrong++;
        }
    }
    is_int(0, wrong, "closing after 0 to %d events stops the thread and the events were right",
           NEV - 1);

    setenv("MEMTRACE_READER_THREAD", "2", 1);
    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    int rc = memtrace_reader_open(&r, path, &err);
    char want[256];
    snprintf(want, sizeof(want), "%s: MEMTRACE_READER_THREAD=2 is not valid (0 or 1)", path);
    ok(rc == MEMTRACE_EINVAL && strcmp(err.text, want) == 0 && r == NULL,
       "MEMTRACE_READER_THREAD=2 is refused: %s", err.text);
    unsetenv("MEMTRACE_READER_THREAD");

    alarm(0);
    unlink(cut);
    unlink(path);
    rmdir(dir);
    free(buf);
    done_testing();
    return exit_status();
}
