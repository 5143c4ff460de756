/* reader-t: snapshot/reader.c on truncated, corrupt and foreign files. */
#include "config.h"

#include "memtrace_snapshot.h"
#include "writer.h"

#include "format.h"
#include "tap.h"
#include "util.h"

#include <unistd.h>
#include <zlib.h>

#define NEV 60

static char dir[64];
static struct memtrace_event events[NEV];

static void path_of(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

/* A small valid file: tables, three EVENTS chunks, a state, the end. */
static void make_valid(const char *path)
{
    uint64_t s = 99;
    for (int i = 0; i < NEV; i++) {
        struct memtrace_event *e = &events[i];
        memset(e, 0, sizeof(*e));
        e->time_ns = 1000 + (uint64_t)i * 1500 - (i % 7 == 3 ? 4000 : 0);
        e->addr = 0x7f0000000000ULL + (rnd_next(&s) % 8) * 4096;
        e->size = 4096;
        e->requested_size = 4000 + (uint64_t)i;
        e->device = i % 5 == 0 ? -1 : 0;
        e->tid = 100 + (uint32_t)(i % 2);
        e->stack = 1 + (uint32_t)(i % 2);
        e->source = 1;
        e->action = (uint8_t)(i % 2 ? MEMTRACE_FREE_COMPLETED : MEMTRACE_ALLOC);
    }
    events[NEV - 1].addr = UINT64_MAX;
    events[NEV - 1].time_ns = UINT64_MAX;
    struct mt_writer *w;
    if (mt_writer_open(&w, path, MT_WRITER_OVERWRITE) != 0)
        bail_out("cannot write test file");
    mt_writer_meta(w, "{\"pid\":7}");
    const char *strs[2] = {"caching_allocator", "main"};
    mt_writer_strings(w, 1, 2, strs);
    struct mt_frame_rec f = {0x401000, 0x1000, 0, 2, 0, 0};
    mt_writer_frames(w, 1, 1, &f);
    uint32_t parent[2] = {0, 1}, frame[2] = {1, 1};
    mt_writer_stacks(w, 1, 2, parent, frame);
    mt_writer_events(w, events, 20);
    mt_writer_events(w, events + 20, 20);
    mt_writer_events(w, events + 40, 20);
    struct memtrace_segment seg = {.addr = 0x7f0000000000ULL, .total_size = 2 << 20};
    mt_writer_state(w, 99999, &seg, 1);
    mt_writer_end(w, "{\"events\":60}");
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

struct result {
    int open_rc;
    int next_rc; /* last return of next() */
    int count;
    int prefix_ok; /* events equal to the original's first ones */
    int truncated;
    struct memtrace_errinfo err;
};

static struct result read_all(const char *path)
{
    struct result res;
    memset(&res, 0, sizeof(res));
    res.prefix_ok = 1;
    struct memtrace_reader *r;
    res.open_rc = memtrace_reader_open(&r, path, &res.err);
    if (res.open_rc != 0)
        return res;
    struct memtrace_event e;
    while ((res.next_rc = memtrace_reader_next(r, &e)) == 1) {
        if (res.count >= NEV || !event_equal(&e, &events[res.count]))
            res.prefix_ok = 0;
        res.count++;
    }
    res.truncated = memtrace_reader_truncated(r);
    if (res.next_rc < 0)
        res.err = *memtrace_reader_error(r);
    memtrace_reader_close(r);
    return res;
}

static void every_cut(const uint8_t *buf, size_t len, const size_t *offs, int nchunks)
{
    char path[128];
    path_of(path, sizeof(path), "cut.memtrace");
    int bad_header = 0, bad_body = 0, not_monotonic = 0, prev = 0;
    int at_boundary[8] = {0};
    for (size_t cut = 0; cut < len; cut++) {
        spill(path, buf, cut);
        struct result res = read_all(path);
        if (cut < MT_HEADER_LEN) {
            int want = cut == 0 ? MEMTRACE_EFORMAT : MEMTRACE_ETRUNC;
            const char *text = cut == 0 ? "empty file" : "file ends inside the header";
            if (res.open_rc != want || strstr(res.err.text, text) == NULL) {
                bad_header++;
                diag("cut %zu: %d %s", cut, res.open_rc, res.err.text);
            }
            continue;
        }
        if (res.open_rc != 0 || res.next_rc != 0 || !res.prefix_ok || res.count > NEV ||
            res.truncated != 1) {
            bad_body++;
            diag("cut %zu: open %d next %d count %d prefix %d truncated %d: %s", cut, res.open_rc,
                 res.next_rc, res.count, res.prefix_ok, res.truncated, res.err.text);
        }
        if (res.count < prev)
            not_monotonic++;
        prev = res.count;
        for (int c = 0; c < nchunks && c < 8; c++)
            if (offs[c] == cut)
                at_boundary[c] = res.count;
    }
    is_int(0, bad_header, "cuts inside the header are clean errors (%d cuts)", MT_HEADER_LEN);
    is_int(0, bad_body, "every later cut (%zu) reads a prefix and reports truncation",
           len - MT_HEADER_LEN);
    is_int(0, not_monotonic, "later cuts never yield fewer events");
    /* chunks: meta, strings, frames, stacks, events x3, state, end */
    ok(at_boundary[4] == 0 && at_boundary[5] == 20 && at_boundary[6] == 40 &&
           at_boundary[7] == NEV && at_boundary[8 - 1] == NEV,
       "cut at chunk boundaries: 0, 20, 40, 60 events (got %d %d %d %d)", at_boundary[4],
       at_boundary[5], at_boundary[6], at_boundary[7]);
    unlink(path);
}

static void expect_error(const char *name, const void *data, size_t len, int code, const char *text)
{
    char path[128];
    path_of(path, sizeof(path), name);
    spill(path, data, len);
    struct result res = read_all(path);
    int rc = res.open_rc ? res.open_rc : res.next_rc;
    is_int(code, rc, "%s: code %d", name, code);
    char want[256];
    snprintf(want, sizeof(want), "%s: %s", path, text);
    is_string(want, res.err.text, "%s: message", name);
    unlink(path);
}

static void foreign_files(const uint8_t *buf, size_t len)
{
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0,
                                  0,    13,  'I', 'H', 'D',  'R',  0,    0,    1, 0};
    expect_error("image.png", png, sizeof(png), MEMTRACE_EFORMAT,
                 "not a memtrace file (bad magic)");
    expect_error("x.bin", "MEMTRACX\1\0\0\0\0\0\0\0", 16, MEMTRACE_EFORMAT,
                 "not a memtrace file (bad magic)");
    const char *txt = "hello, this is a text file\n";
    expect_error("notes.txt", txt, strlen(txt), MEMTRACE_EFORMAT,
                 "not a memtrace file (bad magic)");
    expect_error("empty.memtrace", "", 0, MEMTRACE_EFORMAT, "empty file, not a memtrace file");

    uint8_t *copy = malloc(len);
    memcpy(copy, buf, len);
    mt_put_u16(copy + 8, 2);
    expect_error("newer.memtrace", copy, len, MEMTRACE_EVERSION,
                 "format version 2.0 is newer than this reader (1.0)");
    mt_put_u16(copy + 8, 0);
    expect_error("zero.memtrace", copy, len, MEMTRACE_EFORMAT, "unsupported format version 0.0");
    free(copy);

    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    int rc = memtrace_reader_open(&r, dir, &err);
    is_int(MEMTRACE_EIO, rc, "a directory: MEMTRACE_EIO");
    char want[256];
    snprintf(want, sizeof(want), "%s: is a directory, not a memtrace file", dir);
    is_string(want, err.text, "a directory: message");
    char missing[128];
    path_of(missing, sizeof(missing), "missing.memtrace");
    rc = memtrace_reader_open(&r, missing, &err);
    is_int(MEMTRACE_EIO, rc, "a missing file: MEMTRACE_EIO");
    snprintf(want, sizeof(want), "%s: cannot open: No such file or directory", missing);
    is_string(want, err.text, "a missing file: message");
    ok(r == NULL, "failed open sets *out to NULL");
}

static void corruption(const uint8_t *buf, size_t len, const size_t *offs, int nchunks)
{
    uint8_t *copy = malloc(len + 64);
    char text[160];
    /* a payload byte of the middle EVENTS chunk */
    memcpy(copy, buf, len);
    size_t mid = offs[5];
    copy[mid + MT_CHUNK_HEADER_LEN + 3] ^= 0x40;
    snprintf(text, sizeof(text), "chunk at offset %zu: checksum mismatch", mid);
    expect_error("flip-payload.memtrace", copy, len, MEMTRACE_EFORMAT, text);
    char path[128];
    path_of(path, sizeof(path), "flip.memtrace");
    spill(path, copy, len);
    struct result res = read_all(path);
    ok(res.count == 20 && res.prefix_ok && res.err.offset == mid,
       "events before the damage are read (%d), error offset %llu", res.count,
       (unsigned long long)res.err.offset);

    /* a length byte of the same chunk's header */
    memcpy(copy, buf, len);
    copy[mid + 5] ^= 0x01;
    snprintf(text, sizeof(text), "corrupt chunk header at offset %zu", mid);
    expect_error("flip-header.memtrace", copy, len, MEMTRACE_EFORMAT, text);

    /* an impossible length with a consistent header */
    memcpy(copy, buf, len);
    mt_put_u32(copy + mid + 4, 0x7fffffffu);
    mt_put_u32(copy + mid + 16, (uint32_t)crc32(0, copy + mid, 16));
    snprintf(text, sizeof(text),
             "chunk at offset %zu: impossible length (2147483647 stored, %u raw)", mid,
             mt_get_u32(buf + mid + 8));
    expect_error("huge-length.memtrace", copy, len, MEMTRACE_EFORMAT, text);

    /* damage in the last chunk (END) is truncation, not an error */
    memcpy(copy, buf, len);
    copy[len - 2] ^= 0xff;
    spill(path, copy, len);
    res = read_all(path);
    ok(res.open_rc == 0 && res.next_rc == 0 && res.count == NEV && res.truncated == 1,
       "a damaged last chunk reads all events and reports truncation");

    /* a chunk of an unknown kind is skipped (newer minor versions may add some) */
    size_t at = offs[5];
    memcpy(copy, buf, at);
    uint8_t *h = copy + at;
    memset(h, 0, MT_CHUNK_HEADER_LEN);
    uLongf clen = 32;
    uint8_t payload[4] = {1, 2, 3, 4};
    compress2(h + MT_CHUNK_HEADER_LEN, &clen, payload, 4, 1);
    h[0] = 200;
    mt_put_u32(h + 4, (uint32_t)clen);
    mt_put_u32(h + 8, 4);
    mt_put_u32(h + 12, (uint32_t)crc32(0, h + MT_CHUNK_HEADER_LEN, (uInt)clen));
    mt_put_u32(h + 16, (uint32_t)crc32(0, h, 16));
    size_t extra = MT_CHUNK_HEADER_LEN + clen;
    memcpy(copy + at + extra, buf + at, len - at);
    spill(path, copy, len + extra);
    res = read_all(path);
    ok(res.open_rc == 0 && res.next_rc == 0 && res.count == NEV && res.prefix_ok &&
           res.truncated == 0,
       "an unknown chunk kind is skipped");
    unlink(path);
    free(copy);
    (void)nchunks;
}

/* Every single-byte flip: never a crash, only a prefix of the events or an error. */
static void every_flip(const uint8_t *buf, size_t len)
{
    char path[128];
    path_of(path, sizeof(path), "flipped.memtrace");
    uint8_t *copy = malloc(len);
    int wrong = 0, errors = 0;
    for (size_t at = 0; at < len; at++) {
        memcpy(copy, buf, len);
        copy[at] ^= (uint8_t)(1u << (at % 8));
        spill(path, copy, len);
        struct result res = read_all(path);
        errors += res.open_rc != 0 || res.next_rc != 0;
        if (!res.prefix_ok || res.count > NEV ||
            (res.open_rc == 0 && res.next_rc == 0 && res.count < NEV && !res.truncated))
            wrong++;
    }
    is_int(0, wrong, "%zu single-bit flips: each reads a prefix or fails cleanly (%d errors)", len,
           errors);
    unlink(path);
    free(copy);
}

static void tables_and_unknown_ids(const char *path)
{
    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    is_int(0, memtrace_reader_open(&r, path, &err), "valid file opens");
    is_string("{\"pid\":7,\"format_version\":1}", memtrace_reader_meta(r), "META is read by open");
    is_int(1, memtrace_reader_version(r), "version 1");
    ok(memtrace_reader_end(r) == NULL, "no END before the events are read");
    is_string("main", memtrace_reader_string(r, 2), "string 2");
    is_string("", memtrace_reader_string(r, 3), "unknown string id is empty");
    const struct memtrace_frame *f = memtrace_reader_frame(r, 1);
    ok(f && f->ip == 0x401000 && f->offset == 0x1000 && strcmp(f->symbol, "main") == 0 &&
           strcmp(f->module, "") == 0,
       "frame 1");
    ok(memtrace_reader_frame(r, 2) == NULL && memtrace_reader_frame(r, 0) == NULL,
       "unknown frame ids are NULL");
    uint32_t fr[4];
    is_int(2, memtrace_reader_stack(r, 2, fr, 4), "stack 2 has depth 2");
    is_int(0, memtrace_reader_stack(r, 77, fr, 4), "unknown stack id has depth 0");
    fr[1] = 12345;
    ok(memtrace_reader_stack(r, 2, fr, 1) == 2 && fr[0] == 1 && fr[1] == 12345,
       "max bounds the frames written, not the depth returned");
    ok(memtrace_reader_offset(r) < memtrace_reader_file_size(r), "offset is inside the file");
    struct memtrace_event e;
    int n = 0;
    while (memtrace_reader_next(r, &e) == 1)
        n++;
    is_int(NEV, n, "all events");
    is_int(0, memtrace_reader_next(r, &e), "next keeps returning 0 at the end");
    is_string("{\"events\":60}", memtrace_reader_end(r), "END read");
    is_int(0, memtrace_reader_truncated(r), "not truncated");
    is_int(1, (long long)memtrace_reader_segment_count(r), "STATE after the events read");
    ok(memtrace_reader_offset(r) == memtrace_reader_file_size(r), "offset reaches the file size");
    is_int(0, memtrace_reader_error(r)->code, "no error");
    memtrace_reader_close(r);
}

#define CHAIN  100000u
#define LEAVES 1000u

/* A 100,000-deep chain (frames 1 and 2 alternating) with 1,000 leaves (frame 3)
 * under its end: asking a leaf for 16 frames must cost 16 steps, not 100,001. The
 * run is bounded: walking whole chains it would take minutes (1e11 steps). */
static void deep_stacks(void)
{
    char path[128];
    path_of(path, sizeof(path), "deep.memtrace");
    uint32_t n = CHAIN + LEAVES;
    uint32_t *parent = malloc(n * sizeof(uint32_t)), *frame = malloc(n * sizeof(uint32_t));
    for (uint32_t i = 0; i < CHAIN; i++) {
        parent[i] = i; /* node i + 1 under node i; node 1 at the root */
        frame[i] = 1 + i % 2;
    }
    for (uint32_t i = CHAIN; i < n; i++) {
        parent[i] = CHAIN;
        frame[i] = 3;
    }
    struct mt_frame_rec f[3] = {
        {0x1000, 0, 0, 0, 0, 0}, {0x2000, 0, 0, 0, 0, 0}, {0x3000, 0, 0, 0, 0, 0}};
    struct mt_writer *w;
    if (mt_writer_open(&w, path, MT_WRITER_OVERWRITE) != 0)
        bail_out("cannot write test file");
    mt_writer_frames(w, 1, 3, f);
    mt_writer_stacks(w, 1, n, parent, frame);
    mt_writer_end(w, "{}");
    free(parent);
    free(frame);

    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    if (memtrace_reader_open(&r, path, &err) != 0)
        bail_out("cannot read the deep file");
    alarm(120);
    uint32_t ids[16];
    long long wrong = 0;
    for (int round = 0; round < 1000; round++)
        for (uint32_t leaf = CHAIN + 1; leaf <= n; leaf++) {
            int d = memtrace_reader_stack(r, leaf, ids, 16);
            wrong += d != (int)CHAIN + 1 || ids[0] != 3 || ids[1] != 1 + (CHAIN - 1) % 2 ||
                     ids[15] != 1 + (CHAIN - 15) % 2;
        }
    alarm(0);
    is_int(0, wrong, "a million 16-frame copies from 100,001-deep stacks: depth and frames right");
    is_int(CHAIN, memtrace_reader_stack(r, CHAIN, NULL, 0), "the chain's end has depth %u", CHAIN);
    is_int(1, memtrace_reader_stack(r, 1, ids, 16), "its root depth 1");
    is_int(1, ids[0], "with frame 1");
    is_int(0, memtrace_reader_stack(r, n + 1, ids, 16), "an unknown id: depth 0");
    memtrace_reader_close(r);
    unlink(path);
}

/* Writes n events and reads them back: how many differ, and how many were read. */
static int round_trip(const char *path, const struct memtrace_event *ev, size_t n, size_t *read)
{
    struct mt_writer *w;
    if (mt_writer_open(&w, path, MT_WRITER_OVERWRITE) != 0)
        bail_out("cannot write test file");
    for (size_t done = 0; done < n; done += 30000)
        mt_writer_events(w, ev + done, n - done < 30000 ? n - done : 30000);
    mt_writer_end(w, "{}");
    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    if (memtrace_reader_open(&r, path, &err) != 0)
        bail_out(err.text);
    struct memtrace_event e;
    int wrong = 0;
    *read = 0;
    while (memtrace_reader_next(r, &e) == 1) {
        if (*read >= n || !event_equal(&e, &ev[*read]))
            wrong++;
        ++*read;
    }
    memtrace_reader_close(r);
    return wrong;
}

/* The reader decodes chunks of one thread, device, pool and stream (every field but
 * action, time, addr, sizes and stack constant) on a path of their own; both paths
 * must give what was written, hits, misses and chunk and batch ends included. */
static void decode_shapes(void)
{
    enum { N = 100000 };
    char path[128];
    path_of(path, sizeof(path), "shapes.memtrace");
    struct memtrace_event *ev = calloc(N, sizeof(*ev));
    if (ev == NULL)
        bail_out("out of memory");
    uint64_t s = 7, t = 5000;
    for (size_t i = 0; i < N; i += 2) {
        /* A loop of 16 allocations whose sizes sometimes change, each freed at once:
         * most events repeat an earlier one (hits), the rest do not (misses). */
        uint64_t size = 512 * (1 + i / 2 % 16) + (rnd_next(&s) % 4 == 0 ? 512 : 0);
        uint64_t addr = 0x7f0000000000ULL + (i / 2 % 16) * 65536 + (size > 4096 ? 4096 : 0);
        for (int k = 0; k < 2; k++) {
            struct memtrace_event *e = &ev[i + (size_t)k];
            e->time_ns = t += 1 + rnd_next(&s) % 300;
            e->addr = addr;
            e->size = size;
            e->requested_size = size - 7;
            e->stream = 3;
            e->aux = 0;
            e->device = 2;
            e->pool = 1;
            e->tid = 4242;
            e->stack = 1 + (uint32_t)(i / 2 % 5);
            e->category = 6;
            e->source = 1;
            e->action = (uint8_t)(k ? MEMTRACE_FREE_COMPLETED : MEMTRACE_ALLOC);
        }
    }
    size_t read;
    int wrong = round_trip(path, ev, N, &read);
    is_int(N, (long long)read, "one thread, device and stream: %d events read", N);
    is_int(0, wrong, "each equal to the one written");
    /* Without the copy: each event stays as it was while the caller holds it (the
     * source runs ahead meanwhile: a pause every 1,000 events lets it fill the
     * queue), and at the end the pointer shows the last one. */
    struct memtrace_reader *rr;
    struct memtrace_errinfo rerr;
    if (memtrace_reader_open(&rr, path, &rerr) != 0)
        bail_out(rerr.text);
    const struct memtrace_event *cur = NULL;
    size_t nref = 0;
    int kept = 1, rc;
    while ((rc = memtrace_reader_next_ref(rr, &cur)) == 1) {
        if (nref % 1000 == 999)
            usleep(200);
        if (nref >= N || !event_equal(cur, &ev[nref]))
            kept = 0;
        nref++;
    }
    is_int(N, (long long)nref, "by reference: %d events", N);
    ok(kept, "each one right while it is held, over %d batches", N / 4096 + 1);
    ok(rc == 0 && cur != NULL && event_equal(cur, &ev[N - 1]),
       "at the end the pointer shows the last event");
    const struct memtrace_event *again = NULL;
    rc = memtrace_reader_next_ref(rr, &again);
    ok(rc == 0 && again != NULL && event_equal(again, &ev[N - 1]),
       "and so does another call after the end");
    memtrace_reader_close(rr);
    /* The same with a second thread: every chunk takes the general path. */
    for (size_t i = 0; i < N; i += 7)
        ev[i].tid = 4243;
    wrong = round_trip(path, ev, N, &read);
    is_int(N, (long long)read, "two threads: %d events read", N);
    is_int(0, wrong, "each equal to the one written");
    free(ev);

    /* By hand, a chunk of that shape: a miss (the chunk's constants, entry key(0, 0)),
     * a hit on an entry no event has filled (key(16, alloc)): the all-zero event, its
     * time aside, not the constants; then a hit on the first entry (the event before
     * was all zero), which copies the constants. */
    struct image {
        uint8_t b[256];
        size_t n;
    } im = {{0}, 0};
    memcpy(im.b, MT_MAGIC, MT_MAGIC_LEN);
    mt_put_u16(im.b + 8, 1);
    im.n = MT_HEADER_LEN;
    uint8_t p[128], *q = p;
    *q++ = 3;  /* events */
    *q++ = 14; /* columns */
    *q++ = MT_COLMODE_BITS;
    mt_put_u32(q, 1);
    q += 4;
    *q++ = 0x6; /* miss, hit, hit */
    /* Columns 1 to 13: the varying ones hold the miss's value (time one per event),
     * the others are constants. */
    const int varint[MT_COL_COUNT] = {
        [MT_COL_ACTION] = 1, [MT_COL_TIME] = 1,      [MT_COL_ADDR] = 1,
        [MT_COL_SIZE] = 1,   [MT_COL_REQUESTED] = 1, [MT_COL_STACK] = 1};
    const uint8_t value[MT_COL_COUNT] = {[MT_COL_ACTION] = MEMTRACE_ALLOC,
                                         [MT_COL_TID] = 9,
                                         [MT_COL_ADDR] = 0x20 /* +16 */,
                                         [MT_COL_SIZE] = 64,
                                         [MT_COL_REQUESTED] = 0,
                                         [MT_COL_STREAM] = 5,
                                         [MT_COL_AUX] = 1,
                                         [MT_COL_DEVICE] = 6 /* 3 */,
                                         [MT_COL_POOL] = 2 /* 1 */,
                                         [MT_COL_STACK] = 2,
                                         [MT_COL_CATEGORY] = 3,
                                         [MT_COL_SOURCE] = 4};
    for (int c = 1; c < MT_COL_COUNT; c++) {
        if (c == MT_COL_TIME) {
            *q++ = MT_COLMODE_VARINT;
            mt_put_u32(q, 3);
            q += 4;
            *q++ = 20; /* +10 each */
            *q++ = 20;
            *q++ = 20;
        } else if (varint[c]) {
            *q++ = MT_COLMODE_VARINT;
            mt_put_u32(q, 1);
            q += 4;
            *q++ = value[c];
        } else {
            *q++ = MT_COLMODE_CONST;
            *q++ = value[c];
        }
    }
    uLongf clen = sizeof(im.b) - im.n - MT_CHUNK_HEADER_LEN;
    uint8_t *h = im.b + im.n;
    compress2(h + MT_CHUNK_HEADER_LEN, &clen, p, (uLong)(q - p), 6);
    h[0] = MT_CHUNK_EVENTS;
    mt_put_u32(h + 4, (uint32_t)clen);
    mt_put_u32(h + 8, (uint32_t)(q - p));
    mt_put_u32(h + 12, (uint32_t)crc32(0, h + MT_CHUNK_HEADER_LEN, (uInt)clen));
    mt_put_u32(h + 16, (uint32_t)crc32(0, h, 16));
    im.n += MT_CHUNK_HEADER_LEN + clen;
    path_of(path, sizeof(path), "empty-entry.memtrace");
    if (spill(path, im.b, im.n) < 0)
        bail_out("cannot write the hand-made file");
    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    if (memtrace_reader_open(&r, path, &err) != 0)
        bail_out(err.text);
    struct memtrace_event e[4], zero = {.time_ns = 20};
    struct memtrace_event full = {.time_ns = 10,
                                  .addr = 16,
                                  .size = 64,
                                  .requested_size = 64,
                                  .stream = 5,
                                  .aux = 1,
                                  .device = 3,
                                  .pool = 1,
                                  .tid = 9,
                                  .stack = 2,
                                  .category = 3,
                                  .source = 4,
                                  .action = MEMTRACE_ALLOC};
    int got = 0;
    while (got < 4 && memtrace_reader_next(r, &e[got]) == 1)
        got++;
    is_int(3, got, "hand-made chunk: 3 events");
    ok(got > 0 && event_equal(&e[0], &full), "a miss has the chunk's constants");
    ok(got > 1 && event_equal(&e[1], &zero), "a hit on an empty entry is the all-zero event");
    full.time_ns = 30;
    ok(got > 2 && event_equal(&e[2], &full), "a hit on it copies them");
    memtrace_reader_close(r);
    unlink(path);
    path_of(path, sizeof(path), "shapes.memtrace");
    unlink(path);
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/memtrace-reader-t-XXXXXX");
    if (mkdtemp(dir) == NULL)
        bail_out("mkdtemp failed");
    char path[128];
    path_of(path, sizeof(path), "valid.memtrace");
    make_valid(path);
    size_t len = 0;
    uint8_t *buf = slurp(path, &len);
    size_t offs[16];
    int nchunks = chunk_offsets(buf, len, offs, 16);
    is_int(9, nchunks, "valid file has 9 chunks");
    diag("valid file: %zu bytes", len);

    tables_and_unknown_ids(path);
    every_cut(buf, len, offs, nchunks);
    foreign_files(buf, len);
    corruption(buf, len, offs, nchunks);
    every_flip(buf, len);
    deep_stacks();
    decode_shapes();

    unlink(path);
    free(buf);
    rmdir(dir);
    done_testing();
    return exit_status();
}
