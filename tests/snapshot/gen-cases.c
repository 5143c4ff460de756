/* gen-cases: writes the data-driven cases under DIR/valid and DIR/invalid (the files
 * are committed; rerun after a format change):  tests/snapshot/gen-cases tests/snapshot */
#include "config.h"

#include "memtrace_snapshot.h"
#include "writer.h"

#include "format.h"
#include "util.h"

#include <errno.h>
#include <zlib.h>

static const char *root;
static char tmp[256];

struct image {
    uint8_t buf[65536];
    size_t len;
};

static void save(const char *kind, const char *name, const struct image *im, const char *expect)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, kind);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/%s/%s", root, kind, name);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/%s/%s/input.memtrace", root, kind, name);
    if (spill(path, im->buf, im->len) < 0) {
        fprintf(stderr, "gen-cases: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/%s/%s/expect", root, kind, name);
    spill(path, expect, strlen(expect));
}

/* Loads the file the writer just made. */
static void load(struct image *im)
{
    size_t len;
    uint8_t *b = slurp(tmp, &len);
    if (b == NULL || len > sizeof(im->buf)) {
        fprintf(stderr, "gen-cases: bad temporary file\n");
        exit(1);
    }
    memcpy(im->buf, b, len);
    im->len = len;
    free(b);
}

static void header(struct image *im, uint16_t major)
{
    memcpy(im->buf, MT_MAGIC, MT_MAGIC_LEN);
    mt_put_u16(im->buf + 8, major);
    mt_put_u16(im->buf + 10, 0);
    mt_put_u32(im->buf + 12, 0);
    im->len = MT_HEADER_LEN;
}

/* Appends a chunk with any payload, framed and checksummed correctly. */
static void chunk(struct image *im, int type, const void *payload, size_t len)
{
    uint8_t *h = im->buf + im->len;
    uLongf clen = (uLongf)(sizeof(im->buf) - im->len - MT_CHUNK_HEADER_LEN);
    compress2(h + MT_CHUNK_HEADER_LEN, &clen, payload, (uLong)len, 6);
    memset(h, 0, MT_CHUNK_HEADER_LEN);
    h[0] = (uint8_t)type;
    mt_put_u32(h + 4, (uint32_t)clen);
    mt_put_u32(h + 8, (uint32_t)len);
    mt_put_u32(h + 12, (uint32_t)crc32(0, h + MT_CHUNK_HEADER_LEN, (uInt)clen));
    mt_put_u32(h + 16, (uint32_t)crc32(0, h, 16));
    im->len += MT_CHUNK_HEADER_LEN + clen;
}

static void end_chunk(struct image *im)
{
    chunk(im, MT_CHUNK_END, "{}", 2);
}

static struct mt_writer *start(void)
{
    struct mt_writer *w;
    if (mt_writer_open(&w, tmp, MT_WRITER_OVERWRITE) != 0) {
        fprintf(stderr, "gen-cases: cannot write %s\n", tmp);
        exit(1);
    }
    return w;
}

static void events(struct mt_writer *w, int n, uint64_t t0)
{
    struct memtrace_event ev[64];
    for (int i = 0; i < n; i++) {
        memset(&ev[i], 0, sizeof(ev[i]));
        ev[i].time_ns = t0 + (uint64_t)i * 1000;
        ev[i].addr = 0x1000 * (uint64_t)(1 + i % 3);
        ev[i].size = 256;
        ev[i].action = (uint8_t)(i % 2 ? MEMTRACE_FREE_COMPLETED : MEMTRACE_ALLOC);
    }
    mt_writer_events(w, ev, (size_t)n);
}

static void valid_cases(void)
{
    struct image im;
    struct mt_writer *w = start();
    mt_writer_end(w, "{\"events\":0}");
    load(&im);
    save("valid", "end-only", &im, "events 0\ntruncated 0\n");

    header(&im, 1);
    save("valid", "header-only", &im, "events 0\ntruncated 1\n");

    w = start();
    mt_writer_meta(w, "{\"pid\":1}");
    events(w, 5, 100);
    mt_writer_abort(w);
    load(&im);
    save("valid", "no-end", &im, "events 5\ntruncated 1\n");

    w = start();
    events(w, 3, 100);
    events(w, 4, 200);
    uint64_t keep = mt_writer_bytes(w);
    events(w, 9, 300);
    uint64_t all = mt_writer_bytes(w);
    mt_writer_abort(w);
    load(&im);
    im.len = (size_t)(keep + (all - keep) / 2);
    save("valid", "partial-last-chunk", &im, "events 7\ntruncated 1\n");

    w = start();
    events(w, 3, 100);
    mt_writer_abort(w);
    load(&im);
    chunk(&im, 200, "future", 6);
    size_t at = im.len;
    w = start();
    events(w, 2, 500);
    mt_writer_end(w, "{}");
    struct image tail;
    load(&tail);
    memcpy(im.buf + at, tail.buf + MT_HEADER_LEN, tail.len - MT_HEADER_LEN);
    im.len = at + tail.len - MT_HEADER_LEN;
    save("valid", "unknown-chunk-kind", &im, "events 5\ntruncated 0\n");

    w = start();
    struct memtrace_event x[4] = {
        {.time_ns = UINT64_MAX, .addr = UINT64_MAX, .size = UINT64_MAX, .device = INT32_MIN},
        {.time_ns = 0, .addr = 0, .device = -1, .pool = INT32_MAX, .action = 255},
        {.time_ns = UINT64_MAX - 1, .tid = UINT32_MAX, .stack = UINT32_MAX, .aux = 1},
        {.time_ns = 5, .stream = UINT64_MAX, .requested_size = 1, .category = 9},
    };
    mt_writer_events(w, x, 4);
    mt_writer_end(w, "{}");
    load(&im);
    save("valid", "extremes", &im, "events 4\ntruncated 0\n");

    w = start();
    struct memtrace_event same[50];
    for (int i = 0; i < 50; i++)
        same[i] = (struct memtrace_event){
            .time_ns = 1000 + (uint64_t)i, .addr = 0x5000, .size = 64, .device = 1};
    mt_writer_events(w, same, 50);
    mt_writer_end(w, "{}");
    load(&im);
    save("valid", "repeated-event", &im, "events 50\ntruncated 0\n");

    /* An older or leaner writer may send fewer columns: the rest read as 0. */
    header(&im, 1);
    uint8_t p[32], *q = p;
    *q++ = 2; /* events */
    *q++ = 3; /* columns: hit, action, time */
    *q++ = MT_COLMODE_CONST;
    *q++ = 0;
    *q++ = MT_COLMODE_VARINT;
    mt_put_u32(q, 2);
    q += 4;
    *q++ = 0;
    *q++ = 1;
    *q++ = MT_COLMODE_VARINT;
    mt_put_u32(q, 2);
    q += 4;
    *q++ = 20; /* +10 */
    *q++ = 9;  /* -5 */
    chunk(&im, MT_CHUNK_EVENTS, p, (size_t)(q - p));
    end_chunk(&im);
    save("valid", "fewer-columns", &im, "events 2\ntruncated 0\n");
}

/* A table chunk of n entries of `entry` bytes each, after first_id and n. */
static void table_bomb(struct image *im, int type, uint32_t first, size_t n, const uint8_t *entry,
                       size_t elen)
{
    uint8_t *p = malloc(20 + n * elen), *q = p;
    q = mt_put_varint(q, first);
    q = mt_put_varint(q, n);
    for (size_t i = 0; i < n; i++, q += elen)
        memcpy(q, entry, elen);
    chunk(im, type, p, (size_t)(q - p));
    free(p);
}

/* Decompression bombs: a few KiB that would cost the reader tens of MiB of tables
 * each (every chunk within the 256 MiB raw limit). */
static void bomb_cases(void)
{
    struct image im;
    static const uint8_t zero[12], node[2] = {1, 0};
    header(&im, 1);
    table_bomb(&im, MT_CHUNK_STRINGS, 1, 8u << 20, zero, 1);
    end_chunk(&im);
    save("invalid", "bomb-strings", &im,
         "code -4\nerror chunk at offset 16: its strings would bring the tables to 72 MiB");

    header(&im, 1);
    table_bomb(&im, MT_CHUNK_FRAMES, 1, 5u << 18, zero, 6);
    end_chunk(&im);
    save("invalid", "bomb-frames", &im,
         "code -4\nerror chunk at offset 16: its frames would bring the tables to");

    header(&im, 1);
    table_bomb(&im, MT_CHUNK_STACKS, 1, 9u << 20, node, 2);
    end_chunk(&im);
    save("invalid", "bomb-stacks", &im,
         "code -4\nerror chunk at offset 16: its stacks would bring the tables to");

    header(&im, 1);
    uint8_t *p = malloc(16 + (1u << 20) * 12), *q = p;
    q = mt_put_varint(q, 1);
    q = mt_put_varint(q, 1u << 20);
    memset(q, 0, (1u << 20) * 12);
    q += (1u << 20) * 12;
    chunk(&im, MT_CHUNK_STATE, p, (size_t)(q - p));
    free(p);
    end_chunk(&im);
    save("invalid", "bomb-state", &im,
         "code -4\nerror chunk at offset 16: its state would bring the tables to");

    /* Each chunk under the floor, together far over what the file justifies. */
    header(&im, 1);
    for (uint32_t i = 0; i < 3; i++)
        table_bomb(&im, MT_CHUNK_STACKS, 1 + i * (4u << 20), 4u << 20, node, 2);
    end_chunk(&im);
    save("invalid", "bomb-chunks", &im, "code -4\nerror its stacks would bring the tables to");
}

static void invalid_cases(void)
{
    struct image im;
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n',
                                  0,    0,   0,   13,  'I',  'H',  'D',  'R'};
    memcpy(im.buf, png, sizeof(png));
    im.len = sizeof(png);
    save("invalid", "png", &im, "code -4\nerror not a memtrace file (bad magic)\n");

    im.len = 0;
    save("invalid", "empty", &im, "code -4\nerror empty file, not a memtrace file\n");

    header(&im, 3);
    end_chunk(&im);
    save("invalid", "newer-version", &im,
         "code -11\nerror format version 3.0 is newer than this reader\n");

    header(&im, 1);
    im.len = 10;
    save("invalid", "short-header", &im,
         "code -5\nerror file ends inside the header (10 of 16 bytes)\n");

    struct mt_writer *w = start();
    events(w, 4, 100);
    events(w, 4, 200);
    mt_writer_end(w, "{}");
    struct image good;
    load(&good);
    im = good;
    im.buf[MT_HEADER_LEN + MT_CHUNK_HEADER_LEN + 2] ^= 0x10;
    save("invalid", "checksum-middle", &im,
         "code -4\nerror chunk at offset 16: checksum mismatch\n");

    im = good;
    im.buf[MT_HEADER_LEN + 6] ^= 0x01;
    save("invalid", "header-middle", &im, "code -4\nerror corrupt chunk header at offset 16\n");

    im = good;
    mt_put_u32(im.buf + MT_HEADER_LEN + 8, 0xfffffff0u);
    mt_put_u32(im.buf + MT_HEADER_LEN + 16, (uint32_t)crc32(0, im.buf + MT_HEADER_LEN, 16));
    save("invalid", "impossible-length", &im,
         "code -4\nerror chunk at offset 16: impossible length\n");

    header(&im, 1);
    uint8_t p[64], *q = p;
    *q++ = 5;
    *q++ = 1;
    memcpy(q, "x", 2);
    q += 2;
    chunk(&im, MT_CHUNK_STRINGS, p, (size_t)(q - p));
    end_chunk(&im);
    save("invalid", "strings-id-gap", &im,
         "code -4\nerror chunk at offset 16: strings start at id 5, expected 1\n");

    header(&im, 1);
    q = p;
    *q++ = 1;
    *q++ = 1;
    *q++ = 0; /* node 1's parent would be node 1 itself */
    *q++ = 1;
    chunk(&im, MT_CHUNK_STACKS, p, (size_t)(q - p));
    end_chunk(&im);
    save("invalid", "stack-self-parent", &im,
         "code -4\nerror malformed stacks (parent is not an earlier node)\n");

    header(&im, 1);
    q = p;
    *q++ = 3;
    *q++ = 3;
    *q++ = MT_COLMODE_CONST;
    *q++ = 0;
    *q++ = MT_COLMODE_CONST;
    *q++ = 0;
    *q++ = MT_COLMODE_VARINT;
    mt_put_u32(q, 2);
    q += 4;
    *q++ = 2;
    *q++ = 2;
    chunk(&im, MT_CHUNK_EVENTS, p, (size_t)(q - p));
    end_chunk(&im);
    save("invalid", "column-short", &im,
         "code -4\nerror malformed events (column does not hold one varint per value)\n");

    header(&im, 1);
    q = p;
    q = mt_put_varint(q, 1u << 21);
    *q++ = 1;
    *q++ = MT_COLMODE_CONST;
    *q++ = 1;
    chunk(&im, MT_CHUNK_EVENTS, p, (size_t)(q - p));
    end_chunk(&im);
    save("invalid", "too-many-events", &im, "code -4\nerror malformed events (too many events)\n");

    header(&im, 1);
    q = p;
    *q++ = 1;
    q = mt_put_varint(q, 100000);
    chunk(&im, MT_CHUNK_STATE, p, (size_t)(q - p));
    end_chunk(&im);
    save("invalid", "state-count", &im,
         "code -4\nerror malformed state (segment count exceeds payload)\n");

    header(&im, 1);
    chunk(&im, MT_CHUNK_META, "[1]", 3);
    end_chunk(&im);
    save("invalid", "meta-not-object", &im,
         "code -4\nerror malformed metadata (not a JSON object)\n");

    header(&im, 1);
    uint8_t *h = im.buf + im.len;
    memset(h, 0, MT_CHUNK_HEADER_LEN);
    h[0] = MT_CHUNK_EVENTS;
    memcpy(h + MT_CHUNK_HEADER_LEN, "notzlib!", 8);
    mt_put_u32(h + 4, 8);
    mt_put_u32(h + 8, 8);
    mt_put_u32(h + 12, (uint32_t)crc32(0, h + MT_CHUNK_HEADER_LEN, 8));
    mt_put_u32(h + 16, (uint32_t)crc32(0, h, 16));
    im.len += MT_CHUNK_HEADER_LEN + 8;
    end_chunk(&im);
    save("invalid", "not-zlib", &im, "code -4\nerror chunk at offset 16: bad compressed data\n");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen-cases DIR (tests/snapshot)\n");
        return 2;
    }
    root = argv[1];
    snprintf(tmp, sizeof(tmp), "/tmp/memtrace-gen-cases-%d.memtrace", (int)getpid());
    valid_cases();
    invalid_cases();
    bomb_cases();
    unlink(tmp);
    return 0;
}
