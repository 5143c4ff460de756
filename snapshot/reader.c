/* reader.c: reading .memtrace files as a stream (docs/FORMAT.md).
 *
 * Two stages. The source reads a chunk, checks its CRCs, inflates it and decodes
 * its events into batches of BATCH events; the reader takes those batches and the
 * other chunks (tables, state, metadata) in file order, absorbing the other chunks
 * itself, so what a caller sees of the tables always matches the event it was just
 * given. By default the source runs ahead on a thread of its own with a queue of
 * NSLOT batches (MEMTRACE_READER_THREAD=0 runs it inline instead): memory stays a
 * few batches and one chunk, never the number of events. The source stops at each
 * non-event chunk until the reader has absorbed it, which is also what lets it read
 * the tables' cost for the bomb bound before inflating the next one. Every length
 * and count read from the file is checked against the bytes that are really there
 * before it is used. */
#include "config.h"

#include "memtrace_snapshot.h"

#include "format.h"
#include "inflate.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define FRAME_BLOCK_SHIFT 12
#define FRAME_BLOCK       (1u << FRAME_BLOCK_SHIFT)

/* What the tables and the state may cost, unless MEMTRACE_TABLE_LIMIT_MB says: the
 * larger of a floor and a multiple of the file's bytes read so far. A real file's
 * tables cost at most about 12 bytes per byte on disk (a frame: 72 bytes in memory
 * from at least 6 compressed bytes); a decompression bomb costs thousands. */
#define TABLE_FLOOR (64ull << 20)
#define TABLE_RATIO 64u
#define TABLE_ENV   "MEMTRACE_TABLE_LIMIT_MB"
#define THREAD_ENV  "MEMTRACE_READER_THREAD"

/* Events per batch, and batches in the queue: about 3.9 MB in all, and few enough
 * hand-overs (one per 4096 events) that they cost nothing measurable. The queue holds
 * about a millisecond of replay: the source works in bursts (a chunk's inflating
 * takes about half a millisecond, during which it hands out nothing), and with 4
 * batches the reader ran dry in each of them and waited (summary of the bench's
 * 15M-event file: 0.42 s with 4 batches, 0.31 s with 12, 0.31 s with 16). */
#define BATCH 4096
#define NSLOT 12
/* Polls of the queue before a stage sleeps on it: tens of microseconds. */
#define SPIN 4096

struct rframe {
    struct memtrace_frame pub;
    uint32_t module, symbol, file;
};

struct kept {
    struct kept *next;
    char data[];
};

/* A prediction table entry of a chunk of the common shape: only the fields that vary
 * there (the others are the chunk's constants). filled is 0 until an event is stored:
 * a hit on an empty entry gives the all-zero event, as the format says. */
struct slim {
    uint64_t addr, size, requested;
    uint32_t stack;
    uint8_t action, filled;
};

struct column {
    int konst;
    uint64_t value;
    const uint8_t *p, *end;
};

enum { RUNNING, AT_END, FAILED };

/* How reading went, as far as one stage knows. */
struct outcome {
    int status;
    int truncated;
    struct memtrace_errinfo err;
};

/* The producing stage: the file, the inflater, the chunk buffers and the state of
 * the EVENTS chunk being decoded. */
struct source {
    int fd;
    uint64_t offset;    /* of the next chunk */
    uint64_t file_size; /* as last seen */
    uint64_t chunk_off; /* of the chunk in raw */
    struct mt_inflater *inf;
    uint8_t *stored;
    size_t stored_cap;
    uint8_t *raw;
    size_t raw_cap;
    int type;   /* of the chunk in raw */
    size_t len; /* its payload bytes */
    size_t ev_left, ev_index;
    uint32_t key;
    struct memtrace_event *predict; /* MT_PREDICT_SIZE entries */
    struct slim *slim;              /* MT_PREDICT_SIZE entries, for a chunk of common shape */
    int common;                     /* the chunk has the common shape (common_shape) */
    struct column cols[MT_COL_COUNT];
    struct memtrace_event prev;
    struct outcome out;
};

/* What the source hands the reader. */
enum { ITEM_EVENTS, ITEM_CHUNK, ITEM_END };

struct item {
    int kind;
    int type;           /* ITEM_CHUNK: the chunk's kind */
    size_t n;           /* ITEM_EVENTS: events in ev; ITEM_CHUNK: payload bytes */
    const uint8_t *raw; /* ITEM_CHUNK: the payload, in the source's buffer */
    uint64_t chunk_off; /* ITEM_CHUNK */
    uint64_t offset;    /* bytes of the file consumed once this item is taken */
    uint64_t file_size;
    struct outcome out;        /* ITEM_END */
    struct memtrace_event *ev; /* BATCH entries */
};

/* The read-ahead thread and its queue: slot[head] .. slot[head + count - 1] are
 * filled, the first of them held by the reader while it hands out its events. */
struct ahead {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t to_reader, to_source;
    struct item slot[NSLOT];
    unsigned head, count;
    int holding;    /* the reader holds slot[head] */
    int chunk_open; /* the reader has not yet absorbed the chunk last handed over */
    int stop;
    int spin; /* polls before sleeping: 0 on one CPU, where the other stage cannot run */
};

struct memtrace_reader {
    char *path;
    uint64_t file_size;
    uint64_t offset;
    unsigned major, minor;
    int status;
    int truncated;
    struct memtrace_errinfo err;

    struct source src;   /* the source's own, once it runs on its thread */
    struct ahead *ahead; /* NULL: the source runs inline, into one */
    struct item one;

    const struct memtrace_event *ev; /* the batch being handed out */
    struct memtrace_event last;      /* the last event handed out, once its batch is gone */
    size_t ev_n, ev_cur;

    const uint8_t *raw; /* the payload being absorbed */
    uint64_t chunk_off; /* and its chunk's offset */

    char **str;
    uint32_t nstr;
    size_t str_cap;
    struct kept *kept;

    struct rframe **fblocks;
    uint32_t nframes;
    size_t fblocks_cap;

    uint32_t *st_parent, *st_frame, *st_depth;
    uint32_t nstacks;
    size_t st_cap;

    json_t *meta;
    char *meta_text;
    char *end_text;

    struct memtrace_segment *segs;
    size_t nsegs;
    struct memtrace_block *blocks;
    uint64_t state_time;

    /* Written by the reader while it absorbs a chunk, read by the source only while
     * no chunk is being absorbed (it waits for each one). */
    uint64_t cost;       /* bytes held by the tables and the state */
    uint64_t state_cost; /* the state's part of it */
    uint64_t cost_limit; /* from MEMTRACE_TABLE_LIMIT_MB; 0: by the file's size */
};

static int vfail(const char *path, struct memtrace_errinfo *err, int *status, int code,
                 uint64_t off, const char *fmt, va_list ap)
{
    char msg[200];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    err->code = code;
    err->offset = off;
    snprintf(err->text, sizeof(err->text), "%s: %s", path, msg);
    *status = FAILED;
    return code;
}

static int failf(const char *path, struct memtrace_errinfo *err, int *status, int code,
                 uint64_t off, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int failf(const char *path, struct memtrace_errinfo *err, int *status, int code,
                 uint64_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(path, err, status, code, off, fmt, ap);
    va_end(ap);
    return code;
}

static int fail(struct memtrace_reader *r, int code, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(struct memtrace_reader *r, int code, uint64_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(r->path, &r->err, &r->status, code, off, fmt, ap);
    va_end(ap);
    return code;
}

/* The source's failures wait in its outcome until the reader reaches them. */
static int src_fail(const struct memtrace_reader *r, struct source *s, int code, uint64_t off,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int src_fail(const struct memtrace_reader *r, struct source *s, int code, uint64_t off,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(r->path, &s->out.err, &s->out.status, code, off, fmt, ap);
    va_end(ap);
    return code;
}

static int bad_payload(struct memtrace_reader *r, const char *kind, const char *why)
{
    return fail(r, MEMTRACE_EFORMAT, r->chunk_off, "chunk at offset %llu: malformed %s (%s)",
                (unsigned long long)r->chunk_off, kind, why);
}

static int src_bad_payload(const struct memtrace_reader *r, struct source *s, const char *kind,
                           const char *why)
{
    return src_fail(r, s, MEMTRACE_EFORMAT, s->chunk_off, "chunk at offset %llu: malformed %s (%s)",
                    (unsigned long long)s->chunk_off, kind, why);
}

static int grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    void *p = realloc(*buf, n * elem);
    if (p == NULL)
        return MEMTRACE_ENOMEM;
    *buf = p;
    *cap = n;
    return 0;
}

/* The three stack columns share one capacity. */
static int grow_stacks(struct memtrace_reader *r, size_t need)
{
    if (need <= r->st_cap)
        return 0;
    size_t n = r->st_cap ? r->st_cap : 16;
    while (n < need)
        n *= 2;
    uint32_t **cols[] = {&r->st_parent, &r->st_frame, &r->st_depth};
    for (size_t i = 0; i < sizeof cols / sizeof *cols; i++) {
        uint32_t *a = realloc(*cols[i], n * sizeof(uint32_t));
        if (a == NULL)
            return MEMTRACE_ENOMEM;
        *cols[i] = a;
    }
    r->st_cap = n;
    return 0;
}

static uint64_t cost_limit(const struct memtrace_reader *r, uint64_t read)
{
    if (r->cost_limit)
        return r->cost_limit;
    return read > TABLE_FLOOR / TABLE_RATIO ? read * TABLE_RATIO : TABLE_FLOOR;
}

static int over_limit(const struct memtrace_reader *r, struct memtrace_errinfo *err, int *status,
                      uint64_t off, const char *what, uint64_t total, uint64_t limit)
{
    const char *why = r->cost_limit ? TABLE_ENV : "64 MiB, or 64 bytes per byte of the file";
    return failf(r->path, err, status, MEMTRACE_EFORMAT, off,
                 "chunk at offset %llu: its %s would bring the tables to %llu MiB, over the %llu "
                 "MiB this file may use (%s; set %s=N to allow N MiB)",
                 (unsigned long long)off, what, (unsigned long long)(total >> 20),
                 (unsigned long long)(limit >> 20), why, TABLE_ENV);
}

/* Counts bytes the current chunk's tables are about to take, or fails. */
static int charge(struct memtrace_reader *r, const char *what, uint64_t bytes)
{
    uint64_t limit = cost_limit(r, r->offset);
    if (bytes > limit || r->cost > limit - bytes)
        return over_limit(r, &r->err, &r->status, r->chunk_off, what, r->cost + bytes, limit);
    r->cost += bytes;
    return 0;
}

/* Reads up to len bytes; returns the count read (short only at end of file) or -1. */
static ssize_t read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static uint64_t current_size(struct source *s)
{
    struct stat st;
    if (fstat(s->fd, &st) == 0)
        s->file_size = (uint64_t)st.st_size;
    return s->file_size;
}

/* Inflates the zlib stream of stored_len bytes in s->stored into len bytes of s->raw.
 * The chunk's CRC-32 already covers every stored byte, so the stream is inflated raw
 * (past its 2-byte header, by inflate.c, a whole buffer at a time) and its Adler-32
 * is not computed a second time; the header must still be a valid zlib header and
 * the 4-byte trailer must be there, so what is accepted is still one complete zlib
 * stream. */
static int inflate_chunk(struct source *s, uint32_t stored_len, uint32_t len)
{
    if (stored_len < 2 + 4)
        return -1;
    unsigned cmf = s->stored[0], flg = s->stored[1];
    if ((cmf & 0x0f) != Z_DEFLATED || (cmf >> 4) > 7 || ((cmf << 8) | flg) % 31 != 0 ||
        (flg & 0x20) != 0)
        return -1;
    size_t used;
    if (mt_inflate(s->inf, s->stored + 2, stored_len - 2, s->raw, len, &used) < 0 ||
        used != stored_len - 2 - 4)
        return -1;
    return 0;
}

/* Reads the next chunk into s->raw. 1: a chunk; 0: end of data (s->out.truncated set
 * when it ended inside a chunk); < 0: error (s->out set). */
static int read_chunk(const struct memtrace_reader *r, struct source *s)
{
    uint64_t off = s->offset;
    uint8_t h[MT_CHUNK_HEADER_LEN];
    ssize_t got = read_full(s->fd, h, sizeof(h));
    if (got < 0)
        return src_fail(r, s, MEMTRACE_EIO, off, "read error at offset %llu: %s",
                        (unsigned long long)off, strerror(errno));
    if (got == 0)
        return 0;
    if ((size_t)got < sizeof(h)) {
        s->out.truncated = 1;
        return 0;
    }
    uint32_t stored_len = mt_get_u32(h + 4);
    uint32_t len = mt_get_u32(h + 8);
    if (mt_get_u32(h + 16) != (uint32_t)crc32(0, h, 16)) {
        /* A damaged header whose length still lands on the end of the file is a
         * damaged last chunk; anywhere else the rest cannot be trusted. */
        if (off + MT_CHUNK_HEADER_LEN + stored_len == current_size(s)) {
            s->out.truncated = 1;
            return 0;
        }
        return src_fail(r, s, MEMTRACE_EFORMAT, off, "corrupt chunk header at offset %llu",
                        (unsigned long long)off);
    }
    if (stored_len > MT_CHUNK_MAX || len > MT_CHUNK_MAX)
        return src_fail(r, s, MEMTRACE_EFORMAT, off,
                        "chunk at offset %llu: impossible length (%u stored, %u raw)",
                        (unsigned long long)off, stored_len, len);
    if (grow((void **)&s->stored, &s->stored_cap, stored_len + 1, 1) < 0 ||
        grow((void **)&s->raw, &s->raw_cap, (size_t)len + 1, 1) < 0)
        return src_fail(r, s, MEMTRACE_ENOMEM, off, "out of memory");
    got = read_full(s->fd, s->stored, stored_len);
    if (got < 0)
        return src_fail(r, s, MEMTRACE_EIO, off, "read error at offset %llu: %s",
                        (unsigned long long)off, strerror(errno));
    if ((size_t)got < stored_len) {
        s->out.truncated = 1;
        return 0;
    }
    uint64_t end = off + MT_CHUNK_HEADER_LEN + stored_len;
    if (mt_get_u32(h + 12) != (uint32_t)crc32(0, s->stored, stored_len)) {
        if (end >= current_size(s)) {
            s->out.truncated = 1;
            return 0;
        }
        return src_fail(r, s, MEMTRACE_EFORMAT, off, "chunk at offset %llu: checksum mismatch",
                        (unsigned long long)off);
    }
    /* A table holds at least its raw bytes: refuse a bomb before inflating it. No
     * chunk is being absorbed now (see struct memtrace_reader), so the costs hold. */
    static const char *const kinds[] = {[MT_CHUNK_STRINGS] = "strings",
                                        [MT_CHUNK_FRAMES] = "frames",
                                        [MT_CHUNK_STACKS] = "stacks",
                                        [MT_CHUNK_STATE] = "state"};
    if (h[0] < sizeof kinds / sizeof *kinds && kinds[h[0]] != NULL) {
        uint64_t limit = cost_limit(r, end);
        uint64_t kept = h[0] == MT_CHUNK_STATE ? r->cost - r->state_cost : r->cost;
        if (len > limit || kept > limit - len)
            return over_limit(r, &s->out.err, &s->out.status, off, kinds[h[0]], kept + len, limit);
    }
    if (inflate_chunk(s, stored_len, len) < 0)
        return src_fail(r, s, MEMTRACE_EFORMAT, off, "chunk at offset %llu: bad compressed data",
                        (unsigned long long)off);
    s->raw[len] = 0;
    s->offset = end;
    s->chunk_off = off;
    s->type = h[0];
    s->len = len;
    return 1;
}

static int table_head(struct memtrace_reader *r, const uint8_t **p, const uint8_t *end,
                      const char *kind, uint32_t have, uint64_t *n)
{
    uint64_t first;
    if (mt_get_varint(p, end, &first) < 0 || mt_get_varint(p, end, n) < 0)
        return bad_payload(r, kind, "short header");
    if (first != (uint64_t)have + 1)
        return fail(r, MEMTRACE_EFORMAT, r->chunk_off,
                    "chunk at offset %llu: %s start at id %llu, expected %llu",
                    (unsigned long long)r->chunk_off, kind, (unsigned long long)first,
                    (unsigned long long)have + 1);
    if (*n > UINT32_MAX - have)
        return bad_payload(r, kind, "too many ids");
    return 0;
}

static int absorb_strings(struct memtrace_reader *r, size_t len)
{
    const uint8_t *p = r->raw, *end = r->raw + len;
    uint64_t n;
    int rc = table_head(r, &p, end, "strings", r->nstr, &n);
    if (rc < 0)
        return rc;
    size_t body = (size_t)(end - p);
    if (n > body)
        return bad_payload(r, "strings", "count exceeds payload");
    if (charge(r, "strings", sizeof(struct kept) + body + 1 + n * sizeof(char *)) < 0)
        return r->err.code;
    struct kept *k = malloc(sizeof(*k) + body + 1);
    if (k == NULL ||
        grow((void **)&r->str, &r->str_cap, (size_t)r->nstr + n + 1, sizeof(char *)) < 0) {
        free(k);
        return fail(r, MEMTRACE_ENOMEM, r->chunk_off, "out of memory");
    }
    memcpy(k->data, p, body);
    k->data[body] = 0;
    k->next = r->kept;
    r->kept = k;
    char *s = k->data, *e = k->data + body;
    for (uint64_t i = 0; i < n; i++) {
        char *z = memchr(s, 0, (size_t)(e - s));
        if (z == NULL)
            return bad_payload(r, "strings", "unterminated string");
        r->str[r->nstr + 1 + i] = s;
        s = z + 1;
    }
    if (s != e)
        return bad_payload(r, "strings", "trailing bytes");
    r->nstr += (uint32_t)n;
    return 0;
}

static struct rframe *frame_at(const struct memtrace_reader *r, uint32_t id)
{
    if (id == 0 || id > r->nframes)
        return NULL;
    uint32_t i = id - 1;
    return &r->fblocks[i >> FRAME_BLOCK_SHIFT][i & (FRAME_BLOCK - 1)];
}

static int absorb_frames(struct memtrace_reader *r, size_t len)
{
    const uint8_t *p = r->raw, *end = r->raw + len;
    uint64_t n;
    int rc = table_head(r, &p, end, "frames", r->nframes, &n);
    if (rc < 0)
        return rc;
    if (n > (uint64_t)(end - p) / 6)
        return bad_payload(r, "frames", "count exceeds payload");
    if (charge(r, "frames", n * sizeof(struct rframe)) < 0)
        return r->err.code;
    uint64_t prev_ip = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v[6];
        for (int k = 0; k < 6; k++)
            if (mt_get_varint(&p, end, &v[k]) < 0)
                return bad_payload(r, "frames", "short frame");
        uint32_t idx = r->nframes;
        if ((idx & (FRAME_BLOCK - 1)) == 0) {
            uint32_t b = idx >> FRAME_BLOCK_SHIFT;
            if (grow((void **)&r->fblocks, &r->fblocks_cap, b + 1, sizeof(struct rframe *)) < 0 ||
                (r->fblocks[b] = calloc(FRAME_BLOCK, sizeof(struct rframe))) == NULL)
                return fail(r, MEMTRACE_ENOMEM, r->chunk_off, "out of memory");
        }
        r->nframes++;
        struct rframe *f = frame_at(r, r->nframes);
        prev_ip += (uint64_t)mt_unzigzag(v[0]);
        f->pub.ip = prev_ip;
        f->pub.offset = v[1];
        f->module = v[2] > UINT32_MAX ? 0 : (uint32_t)v[2];
        f->symbol = v[3] > UINT32_MAX ? 0 : (uint32_t)v[3];
        f->file = v[4] > UINT32_MAX ? 0 : (uint32_t)v[4];
        f->pub.line = v[5] > UINT32_MAX ? 0 : (uint32_t)v[5];
    }
    if (p != end)
        return bad_payload(r, "frames", "trailing bytes");
    return 0;
}

static int absorb_stacks(struct memtrace_reader *r, size_t len)
{
    const uint8_t *p = r->raw, *end = r->raw + len;
    uint64_t n;
    int rc = table_head(r, &p, end, "stacks", r->nstacks, &n);
    if (rc < 0)
        return rc;
    if (n > (uint64_t)(end - p) / 2)
        return bad_payload(r, "stacks", "count exceeds payload");
    if (charge(r, "stacks", n * 3 * sizeof(uint32_t)) < 0)
        return r->err.code;
    if (grow_stacks(r, (size_t)r->nstacks + n + 1) < 0)
        return fail(r, MEMTRACE_ENOMEM, r->chunk_off, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        uint64_t up, frame;
        if (mt_get_varint(&p, end, &up) < 0 || mt_get_varint(&p, end, &frame) < 0)
            return bad_payload(r, "stacks", "short node");
        uint64_t id = (uint64_t)r->nstacks + 1;
        if (up == 0 || up > id)
            return bad_payload(r, "stacks", "parent is not an earlier node");
        uint32_t parent = (uint32_t)(id - up);
        r->st_parent[id] = parent;
        r->st_frame[id] = frame > UINT32_MAX ? 0 : (uint32_t)frame;
        /* Parents come first, so the depth is known now: asking for it is O(1). */
        r->st_depth[id] = parent ? r->st_depth[parent] + 1 : 1;
        r->nstacks++;
    }
    if (p != end)
        return bad_payload(r, "stacks", "trailing bytes");
    return 0;
}

static int absorb_json(struct memtrace_reader *r, size_t len, int is_end)
{
    json_error_t je;
    json_t *obj = json_loadb((const char *)r->raw, len, 0, &je);
    if (obj == NULL || !json_is_object(obj)) {
        json_decref(obj);
        return bad_payload(r, is_end ? "end record" : "metadata", "not a JSON object");
    }
    char *text;
    if (is_end) {
        text = json_dumps(obj, JSON_COMPACT);
        json_decref(obj);
    } else {
        json_object_update(r->meta, obj);
        json_decref(obj);
        text = json_dumps(r->meta, JSON_COMPACT);
    }
    if (text == NULL)
        return fail(r, MEMTRACE_ENOMEM, r->chunk_off, "out of memory");
    char **slot = is_end ? &r->end_text : &r->meta_text;
    free(*slot);
    *slot = text;
    return 0;
}

static int absorb_state(struct memtrace_reader *r, size_t len)
{
    const uint8_t *p = r->raw, *end = r->raw + len;
    uint64_t t, n;
    if (mt_get_varint(&p, end, &t) < 0 || mt_get_varint(&p, end, &n) < 0)
        return bad_payload(r, "state", "short header");
    if (n > (uint64_t)(end - p) / 12)
        return bad_payload(r, "state", "segment count exceeds payload");
    /* The new state replaces the old one: count it in the old one's place. */
    uint64_t cost_before = r->cost;
    r->cost -= r->state_cost;
    if (charge(r, "state", n * (sizeof(struct memtrace_segment) + sizeof(size_t))) < 0) {
        r->cost = cost_before;
        return r->err.code;
    }
    struct memtrace_segment *segs = calloc(n ? n : 1, sizeof(*segs));
    size_t *first = calloc(n ? n : 1, sizeof(size_t));
    struct memtrace_block *blocks = NULL;
    size_t nblocks = 0, bcap = 0;
    int rc = 0;
    if (segs == NULL || first == NULL) {
        rc = fail(r, MEMTRACE_ENOMEM, r->chunk_off, "out of memory");
        goto out;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v[12];
        for (int k = 0; k < 12; k++)
            if (mt_get_varint(&p, end, &v[k]) < 0) {
                rc = bad_payload(r, "state", "short segment");
                goto out;
            }
        struct memtrace_segment *s = &segs[i];
        s->addr = v[0];
        s->total_size = v[1];
        s->allocated_size = v[2];
        s->active_size = v[3];
        s->requested_size = v[4];
        s->stream = v[5];
        s->device = (int32_t)mt_unzigzag(v[6]);
        s->pool = (int32_t)mt_unzigzag(v[7]);
        s->is_large = (int)(v[8] & 1);
        s->is_expandable = (int)((v[8] >> 1) & 1);
        s->stack = v[9] > UINT32_MAX ? 0 : (uint32_t)v[9];
        s->source = v[10] > UINT32_MAX ? 0 : (uint32_t)v[10];
        if (v[11] > (uint64_t)(end - p) / 5) {
            rc = bad_payload(r, "state", "block count exceeds payload");
            goto out;
        }
        s->nblocks = (size_t)v[11];
        first[i] = nblocks;
        if (charge(r, "state", s->nblocks * sizeof(*blocks)) < 0) {
            rc = r->err.code;
            goto out;
        }
        if (grow((void **)&blocks, &bcap, nblocks + s->nblocks, sizeof(*blocks)) < 0) {
            rc = fail(r, MEMTRACE_ENOMEM, r->chunk_off, "out of memory");
            goto out;
        }
        uint64_t expect = s->addr;
        for (size_t b = 0; b < s->nblocks; b++) {
            uint64_t w[5];
            for (int k = 0; k < 5; k++)
                if (mt_get_varint(&p, end, &w[k]) < 0) {
                    rc = bad_payload(r, "state", "short block");
                    goto out;
                }
            struct memtrace_block *k = &blocks[nblocks++];
            k->addr = expect + (uint64_t)mt_unzigzag(w[0]);
            k->size = w[1];
            k->requested_size = w[2];
            k->stack = w[3] > UINT32_MAX ? 0 : (uint32_t)w[3];
            int64_t st = mt_unzigzag(w[4]);
            k->state = st < INT_MIN || st > INT_MAX ? 0 : (int)st;
            expect = k->addr + k->size;
        }
    }
    if (p != end) {
        rc = bad_payload(r, "state", "trailing bytes");
        goto out;
    }
    for (uint64_t i = 0; i < n; i++)
        segs[i].blocks = segs[i].nblocks ? &blocks[first[i]] : NULL;
    free(r->segs);
    free(r->blocks);
    r->segs = segs;
    r->blocks = blocks;
    r->nsegs = (size_t)n;
    r->state_time = t;
    r->state_cost = r->cost - (cost_before - r->state_cost);
    cost_before = r->cost;
    segs = NULL;
    blocks = NULL;
out:
    r->cost = cost_before;
    free(segs);
    free(blocks);
    free(first);
    return rc;
}

/* Checks that a varint column holds exactly n well-formed varints, each at most 10
 * bytes, the last byte ending one. Eight bytes at a time: t has the top bit of each
 * byte that ends a varint. A run of 10 continuation bytes cannot lie inside one
 * word, so only the run carried across word boundaries needs counting. */
static int count_varints(const uint8_t *p, const uint8_t *end, uint64_t n)
{
    uint64_t count = 0;
    unsigned run = 0;
    for (; end - p >= 8; p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t t = ~w & 0x8080808080808080ull;
        if (t == 0) {
            run += 8;
            if (run > 9)
                return -1;
            continue;
        }
        if (run + (unsigned)(__builtin_ctzll(t) >> 3) > 9)
            return -1;
        count += ((t >> 7) * 0x0101010101010101ull) >> 56; /* one bit per byte: sum them */
        run = (unsigned)__builtin_clzll(t) >> 3;
    }
    for (; p < end; p++) {
        if (*p & 0x80) {
            if (++run > 9)
                return -1;
        } else {
            count++;
            run = 0;
        }
    }
    return count == n && run == 0 ? 0 : -1;
}

/* Set bits among the first n bits of bits[]. */
static uint64_t count_hits(const uint8_t *bits, uint64_t n)
{
    uint64_t hits = 0, i = 0;
    for (; i + 64 <= n; i += 64) {
        uint64_t w;
        memcpy(&w, bits + i / 8, 8);
        w -= (w >> 1) & 0x5555555555555555ull;
        w = (w & 0x3333333333333333ull) + ((w >> 2) & 0x3333333333333333ull);
        w = (w + (w >> 4)) & 0x0f0f0f0f0f0f0f0full;
        hits += (w * 0x0101010101010101ull) >> 56;
    }
    for (; i < n; i++)
        hits += (bits[i >> 3] >> (i & 7)) & 1;
    return hits;
}

/* The next varint at *pp, advancing it. Unchecked: absorb_events has counted one
 * well-formed varint per value the decoder takes, the last one ending the column. */
static inline uint64_t take_varint(const uint8_t **pp)
{
    const uint8_t *p = *pp;
    uint64_t v = *p++;
    if (v >= 0x80) {
        v &= 0x7f;
        unsigned shift = 7;
        uint64_t b;
        do {
            b = *p++;
            v |= (b & 0x7f) << shift;
            shift += 7;
        } while (b >= 0x80);
    }
    *pp = p;
    return v;
}

/* Set by mt_reader_general_only (tests): every chunk takes the general decoder. */
static int general_only;

void mt_reader_general_only(int on)
{
    general_only = on;
}

/* Whether a chunk has the shape of one thread, device, pool and stream: the columns
 * that vary are the hits, action, time, addr, size, requested size and stack, and
 * every other one is constant. Such a chunk is decoded by decode_common. */
static int common_shape(const struct column *c)
{
    static const int varying[] = {MT_COL_ACTION, MT_COL_TIME,      MT_COL_ADDR,
                                  MT_COL_SIZE,   MT_COL_REQUESTED, MT_COL_STACK};
    static const int fixed[] = {MT_COL_TID,  MT_COL_STREAM,   MT_COL_AUX,   MT_COL_DEVICE,
                                MT_COL_POOL, MT_COL_CATEGORY, MT_COL_SOURCE};
    for (size_t k = 0; k < sizeof varying / sizeof *varying; k++)
        if (c[varying[k]].konst)
            return 0;
    for (size_t k = 0; k < sizeof fixed / sizeof *fixed; k++)
        if (!c[fixed[k]].konst)
            return 0;
    return 1;
}

static int absorb_events(const struct memtrace_reader *r, struct source *s)
{
    const uint8_t *p = s->raw, *end = s->raw + s->len;
    uint64_t n;
    if (mt_get_varint(&p, end, &n) < 0 || p >= end)
        return src_bad_payload(r, s, "events", "short header");
    if (n > MT_CHUNK_MAX_EVENTS)
        return src_bad_payload(r, s, "events", "too many events");
    unsigned ncols = *p++;
    if (ncols < 3)
        return src_bad_payload(r, s, "events", "too few columns");
    memset(s->cols, 0, sizeof(s->cols));
    uint64_t misses = n;
    for (unsigned c = 0; c < ncols; c++) {
        if (p >= end)
            return src_bad_payload(r, s, "events", "short column");
        uint8_t mode = *p++;
        struct column col = {0};
        if (mode == MT_COLMODE_CONST) {
            col.konst = 1;
            if (mt_get_varint(&p, end, &col.value) < 0)
                return src_bad_payload(r, s, "events", "short constant");
        } else if (mode == MT_COLMODE_VARINT || mode == MT_COLMODE_BITS) {
            if (end - p < 4)
                return src_bad_payload(r, s, "events", "short column");
            uint32_t clen = mt_get_u32(p);
            p += 4;
            if (clen > (size_t)(end - p))
                return src_bad_payload(r, s, "events", "column exceeds payload");
            col.p = p;
            col.end = p + clen;
            p += clen;
        } else {
            return src_bad_payload(r, s, "events", "unknown column mode");
        }
        if (c == MT_COL_HIT) {
            if (mode == MT_COLMODE_VARINT || (mode == MT_COLMODE_CONST && col.value > 1))
                return src_bad_payload(r, s, "events", "bad hit column");
            if (mode == MT_COLMODE_CONST) {
                misses = col.value ? 0 : n;
            } else {
                if ((uint64_t)(col.end - col.p) != (n + 7) / 8)
                    return src_bad_payload(r, s, "events", "hit column length");
                misses = n - count_hits(col.p, n);
            }
        } else if (mode == MT_COLMODE_BITS) {
            return src_bad_payload(r, s, "events", "bit column where values are expected");
        } else if (mode == MT_COLMODE_VARINT && c < MT_COL_COUNT &&
                   count_varints(col.p, col.end, c == MT_COL_TIME ? n : misses) < 0) {
            return src_bad_payload(r, s, "events", "column does not hold one varint per value");
        }
        if (c < MT_COL_COUNT)
            s->cols[c] = col;
    }
    /* Columns a writer did not send read as constant 0. */
    for (unsigned c = ncols; c < MT_COL_COUNT; c++)
        s->cols[c].konst = 1;
    if (p != end)
        return src_bad_payload(r, s, "events", "trailing bytes");
    s->common = !general_only && common_shape(s->cols);
    if (s->common) {
        if (s->slim == NULL && (s->slim = malloc(MT_PREDICT_SIZE * sizeof(*s->slim))) == NULL)
            return src_fail(r, s, MEMTRACE_ENOMEM, s->chunk_off, "out of memory");
        memset(s->slim, 0, MT_PREDICT_SIZE * sizeof(*s->slim));
    } else {
        if (s->predict == NULL &&
            (s->predict = malloc(MT_PREDICT_SIZE * sizeof(*s->predict))) == NULL)
            return src_fail(r, s, MEMTRACE_ENOMEM, s->chunk_off, "out of memory");
        memset(s->predict, 0, MT_PREDICT_SIZE * sizeof(*s->predict));
    }
    memset(&s->prev, 0, sizeof(s->prev));
    s->key = mt_predict_key(0, 0);
    s->ev_index = 0;
    s->ev_left = (size_t)n;
    return 0;
}

/* The next value of a column. */
static inline uint64_t col_next(struct column *c)
{
    return c->konst ? c->value : take_varint(&c->p);
}

/* Where a decoding loop stopped, for its next call: m events decoded, up to event i
 * of the chunk, the last one at time and addr, the next key. Returns m. */
static size_t decoded(struct source *s, uint64_t time, uint64_t addr, uint32_t key, size_t i,
                      size_t m)
{
    s->prev.time_ns = time;
    s->prev.addr = addr;
    s->key = key;
    s->ev_index = i;
    s->ev_left -= m;
    return m;
}

/* decode() for a chunk of the common shape: the varying columns' positions stay in
 * locals (in registers, where decode() reads and writes each column's position in
 * memory once per value) and the constant fields are stored as they are. */
static size_t decode_common(struct source *s, struct memtrace_event *out, size_t max)
{
    size_t m = s->ev_left < max ? s->ev_left : max;
    struct column *c = s->cols;
    const uint8_t *hits = c[MT_COL_HIT].konst ? NULL : c[MT_COL_HIT].p;
    int all_hit = c[MT_COL_HIT].konst && c[MT_COL_HIT].value;
    const uint8_t *pa = c[MT_COL_ACTION].p, *pt = c[MT_COL_TIME].p, *pd = c[MT_COL_ADDR].p;
    const uint8_t *pz = c[MT_COL_SIZE].p, *pr = c[MT_COL_REQUESTED].p, *ps = c[MT_COL_STACK].p;
    const uint32_t tid = (uint32_t)c[MT_COL_TID].value;
    const uint64_t stream = c[MT_COL_STREAM].value, aux = c[MT_COL_AUX].value;
    const int32_t device = (int32_t)mt_unzigzag(c[MT_COL_DEVICE].value);
    const int32_t pool = (int32_t)mt_unzigzag(c[MT_COL_POOL].value);
    const uint32_t category = (uint32_t)c[MT_COL_CATEGORY].value;
    const uint32_t source = (uint32_t)c[MT_COL_SOURCE].value;
    struct slim *table = s->slim;
    uint64_t time = s->prev.time_ns, addr = s->prev.addr;
    uint32_t key = s->key;
    size_t i = s->ev_index;
    for (size_t k = 0; k < m; k++, i++) {
        struct slim *slot = &table[key];
        struct memtrace_event *o = &out[k];
        int hit = hits ? (hits[i >> 3] >> (i & 7)) & 1 : all_hit;
        uint8_t action;
        if (hit) {
            /* An empty entry is all zero here, and its constants are zeroed below. */
            action = slot->action;
            addr = slot->addr;
            o->size = slot->size;
            o->requested_size = slot->requested;
            o->stack = slot->stack;
        } else {
            action = (uint8_t)take_varint(&pa);
            addr += (uint64_t)mt_unzigzag(take_varint(&pd));
            uint64_t size = take_varint(&pz);
            uint64_t requested = size + (uint64_t)mt_unzigzag(take_varint(&pr));
            uint32_t stack = (uint32_t)take_varint(&ps);
            slot->addr = addr;
            o->size = slot->size = size;
            o->requested_size = slot->requested = requested;
            o->stack = slot->stack = stack;
            slot->action = action;
            slot->filled = 1;
        }
        o->addr = addr;
        o->action = action;
        o->stream = stream;
        o->aux = aux;
        o->device = device;
        o->pool = pool;
        o->tid = tid;
        o->category = category;
        o->source = source;
        if (__builtin_expect(hit && !slot->filled, 0))
            memset(o, 0, sizeof(*o));
        time += (uint64_t)mt_unzigzag(take_varint(&pt));
        o->time_ns = time;
        key = mt_predict_key(addr, action);
    }
    c[MT_COL_ACTION].p = pa;
    c[MT_COL_TIME].p = pt;
    c[MT_COL_ADDR].p = pd;
    c[MT_COL_SIZE].p = pz;
    c[MT_COL_REQUESTED].p = pr;
    c[MT_COL_STACK].p = ps;
    /* The rest of prev is the chunk's constants: only this loop reads this chunk. */
    return decoded(s, time, addr, key, i, m);
}

/* Decodes up to max events of the current EVENTS chunk into out; returns how many.
 * The fields a miss needs from the previous event stay in locals, and each field is
 * stored once into the table and once into out: a struct built on the stack and
 * copied whole costs a stalled store forward per 16 bytes. */
static size_t decode(struct source *s, struct memtrace_event *out, size_t max)
{
    size_t m = s->ev_left < max ? s->ev_left : max;
    struct column *c = s->cols;
    const uint8_t *hits = c[MT_COL_HIT].konst ? NULL : c[MT_COL_HIT].p;
    int all_hit = c[MT_COL_HIT].konst && c[MT_COL_HIT].value;
    struct column *tc = &c[MT_COL_TIME];
    struct memtrace_event *table = s->predict;
    uint64_t time = s->prev.time_ns, addr = s->prev.addr, stream = s->prev.stream;
    uint32_t tid = s->prev.tid;
    int32_t device = s->prev.device, pool = s->prev.pool;
    uint32_t key = s->key;
    size_t i = s->ev_index;
    for (size_t k = 0; k < m; k++, i++) {
        struct memtrace_event *slot = &table[key], *o = &out[k];
        int hit = hits ? (hits[i >> 3] >> (i & 7)) & 1 : all_hit;
        uint8_t action;
        if (hit) {
            *o = *slot;
            action = slot->action;
            addr = slot->addr;
            stream = slot->stream;
            tid = slot->tid;
            device = slot->device;
            pool = slot->pool;
        } else {
            action = (uint8_t)col_next(&c[MT_COL_ACTION]);
            if (c[MT_COL_TID].konst)
                tid = (uint32_t)c[MT_COL_TID].value;
            else
                tid += (uint32_t)mt_unzigzag(col_next(&c[MT_COL_TID]));
            if (c[MT_COL_ADDR].konst)
                addr = c[MT_COL_ADDR].value;
            else
                addr += (uint64_t)mt_unzigzag(col_next(&c[MT_COL_ADDR]));
            uint64_t size = col_next(&c[MT_COL_SIZE]);
            uint64_t requested;
            if (c[MT_COL_REQUESTED].konst)
                requested = c[MT_COL_REQUESTED].value;
            else
                requested = size + (uint64_t)mt_unzigzag(col_next(&c[MT_COL_REQUESTED]));
            if (c[MT_COL_STREAM].konst)
                stream = c[MT_COL_STREAM].value;
            else
                stream += (uint64_t)mt_unzigzag(col_next(&c[MT_COL_STREAM]));
            uint64_t aux = col_next(&c[MT_COL_AUX]);
            if (c[MT_COL_DEVICE].konst)
                device = (int32_t)mt_unzigzag(c[MT_COL_DEVICE].value);
            else
                device = (int32_t)((uint32_t)device +
                                   (uint32_t)mt_unzigzag(col_next(&c[MT_COL_DEVICE])));
            if (c[MT_COL_POOL].konst)
                pool = (int32_t)mt_unzigzag(c[MT_COL_POOL].value);
            else
                pool = (int32_t)((uint32_t)pool + (uint32_t)mt_unzigzag(col_next(&c[MT_COL_POOL])));
            uint32_t stack = (uint32_t)col_next(&c[MT_COL_STACK]);
            uint32_t category = (uint32_t)col_next(&c[MT_COL_CATEGORY]);
            uint32_t source = (uint32_t)col_next(&c[MT_COL_SOURCE]);
            o->addr = slot->addr = addr;
            o->size = slot->size = size;
            o->requested_size = slot->requested_size = requested;
            o->stream = slot->stream = stream;
            o->aux = slot->aux = aux;
            o->device = slot->device = device;
            o->pool = slot->pool = pool;
            o->tid = slot->tid = tid;
            o->stack = slot->stack = stack;
            o->category = slot->category = category;
            o->source = slot->source = source;
            o->action = slot->action = action;
        }
        time += (uint64_t)mt_unzigzag(col_next(tc));
        o->time_ns = slot->time_ns = time;
        key = mt_predict_key(addr, action);
    }
    s->prev.stream = stream;
    s->prev.tid = tid;
    s->prev.device = device;
    s->prev.pool = pool;
    return decoded(s, time, addr, key, i, m);
}

/* Fills it with what comes next: a batch of events, a chunk for the reader to absorb
 * (the source must wait for that before it reads on), or the end of what the source
 * can give, with its outcome. */
static void produce(const struct memtrace_reader *r, struct source *s, struct item *it)
{
    while (s->ev_left == 0) {
        if (s->out.status != RUNNING) {
            it->kind = ITEM_END;
            it->out = s->out;
            it->offset = s->offset;
            it->file_size = s->file_size;
            return;
        }
        int rc = read_chunk(r, s);
        if (rc < 0)
            continue;
        if (rc == 0) {
            s->out.truncated = 1;
            s->out.status = AT_END;
            continue;
        }
        if (s->type == MT_CHUNK_EVENTS) {
            absorb_events(r, s);
            continue;
        }
        if (s->type < MT_CHUNK_META || s->type > MT_CHUNK_END)
            continue; /* newer minor versions may add kinds that are safe to skip */
        /* Nothing is read past the end record. */
        if (s->type == MT_CHUNK_END)
            s->out.status = AT_END;
        it->kind = ITEM_CHUNK;
        it->type = s->type;
        it->n = s->len;
        it->raw = s->raw;
        it->chunk_off = s->chunk_off;
        it->offset = s->offset;
        it->file_size = s->file_size;
        return;
    }
    it->kind = ITEM_EVENTS;
    it->n = s->common ? decode_common(s, it->ev, BATCH) : decode(s, it->ev, BATCH);
    it->offset = s->offset;
    it->file_size = s->file_size;
}

/* ---- the read-ahead thread ---------------------------------------------------- */

/* The queue's count is changed and read under the lock, but also read without it
 * while a stage waits (spin_while), so its stores are atomic. */
static void set_count(struct ahead *a, unsigned n)
{
    __atomic_store_n(&a->count, n, __ATOMIC_RELAXED);
}

/* Before a stage sleeps on the queue it watches the count for tens of microseconds:
 * the other stage usually changes it by then, and a sleep and a wake-up cost more
 * (on the bench's 15M-event file the sleeps fell from about 1,500 to about 400). A
 * hint only: the caller takes the lock and checks again. */
static void spin_while(const struct ahead *a, unsigned value)
{
    for (int k = 0; k < a->spin && __atomic_load_n(&a->count, __ATOMIC_RELAXED) == value; k++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

static void *ahead_main(void *arg)
{
    struct memtrace_reader *r = arg;
    struct ahead *a = r->ahead;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        if (a->count == NSLOT && !a->stop) {
            pthread_mutex_unlock(&a->mu);
            spin_while(a, NSLOT);
            pthread_mutex_lock(&a->mu);
        }
        while (a->count == NSLOT && !a->stop)
            pthread_cond_wait(&a->to_source, &a->mu);
        if (a->stop)
            break;
        struct item *it = &a->slot[(a->head + a->count) % NSLOT];
        pthread_mutex_unlock(&a->mu);
        produce(r, &r->src, it);
        pthread_mutex_lock(&a->mu);
        set_count(a, a->count + 1);
        pthread_cond_signal(&a->to_reader);
        if (it->kind == ITEM_END)
            break;
        if (it->kind == ITEM_CHUNK) {
            /* Its payload lives in the source's buffer, and the next table chunk's
             * bomb check needs the costs that absorbing this one changes. */
            a->chunk_open = 1;
            while (a->chunk_open && !a->stop)
                pthread_cond_wait(&a->to_source, &a->mu);
        }
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* Starts the read-ahead thread, unless MEMTRACE_READER_THREAD=0. 0, or -1 when it
 * could not start (the source then runs inline). */
static int ahead_start(struct memtrace_reader *r)
{
    struct ahead *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return -1;
    a->spin = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? SPIN : 0;
    int made = 0;
    for (; made < NSLOT; made++)
        if ((a->slot[made].ev = calloc(BATCH, sizeof(struct memtrace_event))) == NULL)
            goto out;
    if (pthread_mutex_init(&a->mu, NULL) != 0)
        goto out;
    if (pthread_cond_init(&a->to_reader, NULL) != 0) {
        pthread_mutex_destroy(&a->mu);
        goto out;
    }
    if (pthread_cond_init(&a->to_source, NULL) != 0) {
        pthread_cond_destroy(&a->to_reader);
        pthread_mutex_destroy(&a->mu);
        goto out;
    }
    r->ahead = a;
    /* Signals stay with the caller's threads: the source has none to handle. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&a->thread, NULL, ahead_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        return 0;
    r->ahead = NULL;
    pthread_cond_destroy(&a->to_source);
    pthread_cond_destroy(&a->to_reader);
    pthread_mutex_destroy(&a->mu);
out:
    while (made > 0)
        free(a->slot[--made].ev);
    free(a);
    return -1;
}

/* Stops the thread wherever it is (the reader may stop reading at any point). */
static void ahead_stop(struct memtrace_reader *r)
{
    struct ahead *a = r->ahead;
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->mu);
    a->stop = 1;
    pthread_cond_signal(&a->to_source);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    pthread_cond_destroy(&a->to_source);
    pthread_cond_destroy(&a->to_reader);
    pthread_mutex_destroy(&a->mu);
    for (int k = 0; k < NSLOT; k++)
        free(a->slot[k].ev);
    free(a);
    r->ahead = NULL;
}

/* The next item, once the reader is done with the one before. */
static const struct item *take(struct memtrace_reader *r)
{
    struct ahead *a = r->ahead;
    if (a == NULL) {
        produce(r, &r->src, &r->one);
        return &r->one;
    }
    pthread_mutex_lock(&a->mu);
    if (a->holding) {
        a->head = (a->head + 1) % NSLOT;
        set_count(a, a->count - 1);
        a->holding = 0;
        pthread_cond_signal(&a->to_source);
    }
    if (a->count == 0) {
        pthread_mutex_unlock(&a->mu);
        spin_while(a, 0);
        pthread_mutex_lock(&a->mu);
    }
    while (a->count == 0)
        pthread_cond_wait(&a->to_reader, &a->mu);
    a->holding = 1;
    const struct item *it = &a->slot[a->head];
    pthread_mutex_unlock(&a->mu);
    return it;
}

/* The reader has absorbed the chunk it took: the source may read on. */
static void chunk_done(struct memtrace_reader *r)
{
    struct ahead *a = r->ahead;
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->mu);
    a->chunk_open = 0;
    pthread_cond_signal(&a->to_source);
    pthread_mutex_unlock(&a->mu);
}

static int absorb(struct memtrace_reader *r, int type, size_t len)
{
    switch (type) {
    case MT_CHUNK_META:
        return absorb_json(r, len, 0);
    case MT_CHUNK_STRINGS:
        return absorb_strings(r, len);
    case MT_CHUNK_FRAMES:
        return absorb_frames(r, len);
    case MT_CHUNK_STACKS:
        return absorb_stacks(r, len);
    case MT_CHUNK_STATE:
        return absorb_state(r, len);
    case MT_CHUNK_END: {
        int rc = absorb_json(r, len, 1);
        if (rc == 0)
            r->status = AT_END;
        return rc;
    }
    default:
        return 0;
    }
}

/* Takes items until events are available, the file ends, or an error. */
static int advance(struct memtrace_reader *r)
{
    while (r->ev_cur == r->ev_n) {
        if (r->status == FAILED)
            return r->err.code;
        if (r->status == AT_END)
            return 0;
        const struct item *it = take(r);
        r->offset = it->offset;
        r->file_size = it->file_size;
        if (it->kind == ITEM_EVENTS) {
            r->ev = it->ev;
            r->ev_n = it->n;
            r->ev_cur = 0;
        } else if (it->kind == ITEM_END) {
            r->status = it->out.status;
            r->truncated = it->out.truncated;
            r->err = it->out.err;
        } else {
            r->raw = it->raw;
            r->chunk_off = it->chunk_off;
            int rc = absorb(r, it->type, it->n);
            chunk_done(r);
            if (rc < 0)
                return rc;
        }
    }
    return 1;
}

/* MEMTRACE_READER_THREAD: 1 if unset or "1", 0 for "0", -1 otherwise. */
static int thread_wanted(void)
{
    const char *v = getenv(THREAD_ENV);
    if (v == NULL || *v == '\0' || strcmp(v, "1") == 0)
        return 1;
    return strcmp(v, "0") == 0 ? 0 : -1;
}

int memtrace_reader_open(struct memtrace_reader **readerp, const char *path,
                         struct memtrace_errinfo *err)
{
    *readerp = NULL;
    struct memtrace_reader *r = calloc(1, sizeof(*r));
    int rc;
    if (r == NULL) {
        rc = MEMTRACE_ENOMEM;
        if (err) {
            err->code = rc;
            err->offset = 0;
            snprintf(err->text, sizeof(err->text), "%s: out of memory", path);
        }
        return rc;
    }
    r->src.fd = -1;
    if (path == NULL)
        path = "";
    r->path = strdup(path);
    r->meta = json_object();
    r->src.inf = calloc(1, sizeof(*r->src.inf));
    if (r->path == NULL || r->meta == NULL || r->src.inf == NULL) {
        free(r->src.inf);
        free(r->path);
        r->path = NULL;
        json_decref(r->meta);
        r->meta = NULL;
        free(r);
        if (err) {
            err->code = MEMTRACE_ENOMEM;
            err->offset = 0;
            snprintf(err->text, sizeof(err->text), "%s: out of memory", path);
        }
        return MEMTRACE_ENOMEM;
    }
    const char *lim = getenv(TABLE_ENV);
    if (lim != NULL && *lim != '\0') {
        char *e;
        errno = 0;
        unsigned long long mb = strtoull(lim, &e, 10);
        if (*e != '\0' || errno != 0 || mb == 0 || mb > (1ull << 30) || lim[0] == '-') {
            rc = fail(r, MEMTRACE_EINVAL, 0, "%s=%s is not valid (MiB, 1 to %llu)", TABLE_ENV, lim,
                      1ull << 30);
            goto out;
        }
        r->cost_limit = mb << 20;
    }
    int threaded = thread_wanted();
    if (threaded < 0) {
        rc = fail(r, MEMTRACE_EINVAL, 0, "%s=%s is not valid (0 or 1)", THREAD_ENV,
                  getenv(THREAD_ENV));
        goto out;
    }
    r->src.fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->src.fd < 0) {
        rc = fail(r, MEMTRACE_EIO, 0, "cannot open: %s", strerror(errno));
        goto out;
    }
    struct stat st;
    if (fstat(r->src.fd, &st) < 0) {
        rc = fail(r, MEMTRACE_EIO, 0, "cannot stat: %s", strerror(errno));
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        rc = fail(r, MEMTRACE_EIO, 0, "is a directory, not a memtrace file");
        goto out;
    }
    r->file_size = r->src.file_size = (uint64_t)st.st_size;
    uint8_t h[MT_HEADER_LEN];
    ssize_t got = read_full(r->src.fd, h, sizeof(h));
    if (got < 0) {
        rc = fail(r, MEMTRACE_EIO, 0, "read error: %s", strerror(errno));
        goto out;
    }
    if (got == 0) {
        rc = fail(r, MEMTRACE_EFORMAT, 0, "empty file, not a memtrace file");
        goto out;
    }
    size_t cmp = (size_t)got < MT_MAGIC_LEN ? (size_t)got : MT_MAGIC_LEN;
    if (memcmp(h, MT_MAGIC, cmp) != 0) {
        rc = fail(r, MEMTRACE_EFORMAT, 0, "not a memtrace file (bad magic)");
        goto out;
    }
    if ((size_t)got < sizeof(h)) {
        rc = fail(r, MEMTRACE_ETRUNC, (uint64_t)got,
                  "file ends inside the header (%zd of %d bytes)", got, MT_HEADER_LEN);
        goto out;
    }
    r->major = mt_get_u16(h + 8);
    r->minor = mt_get_u16(h + 10);
    if (r->major > MT_VERSION_MAJOR) {
        rc = fail(r, MEMTRACE_EVERSION, 8, "format version %u.%u is newer than this reader (%d.%d)",
                  r->major, r->minor, MT_VERSION_MAJOR, MT_VERSION_MINOR);
        goto out;
    }
    if (r->major == 0) {
        rc = fail(r, MEMTRACE_EFORMAT, 8, "unsupported format version %u.%u", r->major, r->minor);
        goto out;
    }
    r->offset = r->src.offset = MT_HEADER_LEN;
    if (!threaded || ahead_start(r) < 0) {
        r->one.ev = calloc(BATCH, sizeof(struct memtrace_event));
        if (r->one.ev == NULL) {
            rc = fail(r, MEMTRACE_ENOMEM, 0, "out of memory");
            goto out;
        }
    }
    rc = advance(r);
    if (rc < 0)
        goto out;
    *readerp = r;
    return 0;
out:
    if (err)
        *err = r->err;
    memtrace_reader_close(r);
    return rc;
}

int memtrace_reader_next_ref(struct memtrace_reader *r, const struct memtrace_event **ev)
{
    if (r->ev_cur == r->ev_n) {
        /* The batch goes back to the source: what the caller holds must outlive it,
         * so the reader's own copy of it becomes the batch until the next one. */
        if (r->ev_n > 0) {
            if (r->ev != &r->last) {
                r->last = r->ev[r->ev_n - 1];
                r->ev = &r->last;
                r->ev_n = r->ev_cur = 1;
            }
            *ev = &r->last;
        }
        int rc = advance(r);
        if (rc <= 0)
            return rc;
    }
    *ev = &r->ev[r->ev_cur++];
    return 1;
}

int memtrace_reader_next(struct memtrace_reader *r, struct memtrace_event *ev)
{
    const struct memtrace_event *e;
    int rc = memtrace_reader_next_ref(r, &e);
    if (rc == 1)
        *ev = *e;
    return rc;
}

const struct memtrace_errinfo *memtrace_reader_error(const struct memtrace_reader *r)
{
    return &r->err;
}

int memtrace_reader_truncated(const struct memtrace_reader *r)
{
    return r->status == AT_END && r->truncated && r->end_text == NULL;
}

const char *memtrace_reader_meta(const struct memtrace_reader *r)
{
    return r->meta_text ? r->meta_text : "{}";
}

const char *memtrace_reader_end(const struct memtrace_reader *r)
{
    return r->end_text;
}

unsigned memtrace_reader_version(const struct memtrace_reader *r)
{
    return r->major;
}

const char *memtrace_reader_string(const struct memtrace_reader *r, uint32_t id)
{
    if (id == 0 || id > r->nstr)
        return "";
    return r->str[id];
}

int memtrace_reader_stack(const struct memtrace_reader *r, uint32_t stack, uint32_t *frames,
                          int max)
{
    uint32_t id = stack <= r->nstacks ? stack : 0;
    if (id == 0)
        return 0;
    uint32_t depth = r->st_depth[id];
    uint32_t n = frames == NULL || max <= 0 ? 0 : depth < (uint32_t)max ? depth : (uint32_t)max;
    for (uint32_t k = 0; k < n; k++) {
        frames[k] = r->st_frame[id];
        id = r->st_parent[id];
    }
    return depth > INT_MAX ? INT_MAX : (int)depth;
}

const struct memtrace_frame *memtrace_reader_frame(const struct memtrace_reader *r, uint32_t id)
{
    struct rframe *f = frame_at(r, id);
    if (f == NULL)
        return NULL;
    /* Resolved on each call: a frame may name strings that arrived after it. */
    f->pub.module = memtrace_reader_string(r, f->module);
    f->pub.symbol = memtrace_reader_string(r, f->symbol);
    f->pub.file = memtrace_reader_string(r, f->file);
    return &f->pub;
}

uint32_t memtrace_reader_stack_count(const struct memtrace_reader *r)
{
    return r->nstacks;
}

uint32_t memtrace_reader_frame_count(const struct memtrace_reader *r)
{
    return r->nframes;
}

size_t memtrace_reader_segment_count(const struct memtrace_reader *r)
{
    return r->nsegs;
}

const struct memtrace_segment *memtrace_reader_segment(const struct memtrace_reader *r, size_t i)
{
    return i < r->nsegs ? &r->segs[i] : NULL;
}

uint64_t memtrace_reader_state_time(const struct memtrace_reader *r)
{
    return r->state_time;
}

uint64_t memtrace_reader_offset(const struct memtrace_reader *r)
{
    return r->offset;
}

uint64_t memtrace_reader_file_size(const struct memtrace_reader *r)
{
    return r->file_size;
}

void memtrace_reader_close(struct memtrace_reader *r)
{
    if (r == NULL)
        return;
    ahead_stop(r);
    if (r->src.fd >= 0)
        close(r->src.fd);
    free(r->src.inf);
    free(r->src.stored);
    free(r->src.raw);
    free(r->src.predict);
    free(r->src.slim);
    free(r->one.ev);
    free(r->path);
    free(r->str);
    while (r->kept) {
        struct kept *k = r->kept;
        r->kept = k->next;
        free(k);
    }
    for (uint32_t i = 0; i < r->nframes; i += FRAME_BLOCK)
        free(r->fblocks[i >> FRAME_BLOCK_SHIFT]);
    free(r->fblocks);
    free(r->st_parent);
    free(r->st_frame);
    free(r->st_depth);
    json_decref(r->meta);
    free(r->meta_text);
    free(r->end_text);
    free(r->segs);
    free(r->blocks);
    free(r);
}
