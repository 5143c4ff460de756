/* reader.c: reading .memtrace files as a stream (docs/FORMAT.md).
 *
 * The reader holds the tables, the latest state and one chunk: events are decoded
 * lazily from the current EVENTS chunk's columns, one per call, so memory never
 * grows with the number of events. Every length and count read from the file is
 * checked against the bytes that are really there before it is used. */
#include "config.h"

#include "memtrace_snapshot.h"

#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
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

struct rframe {
    struct memtrace_frame pub;
    uint32_t module, symbol, file;
};

struct kept {
    struct kept *next;
    char data[];
};

struct column {
    int konst;
    uint64_t value;
    const uint8_t *p, *end;
};

enum { RUNNING, AT_END, FAILED };

struct memtrace_reader {
    int fd;
    char *path;
    uint64_t file_size;
    uint64_t offset;
    unsigned major, minor;
    int status;
    int truncated;
    struct memtrace_errinfo err;
    z_stream zs;

    uint8_t *stored;
    size_t stored_cap;
    uint8_t *raw;
    size_t raw_cap;
    uint64_t chunk_off;

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

    uint64_t cost;       /* bytes held by the tables and the state */
    uint64_t state_cost; /* the state's part of it */
    uint64_t cost_limit; /* from MEMTRACE_TABLE_LIMIT_MB; 0: by the file's size */

    size_t ev_left, ev_index;
    uint32_t key;
    struct memtrace_event *predict; /* MT_PREDICT_SIZE entries */
    struct column cols[MT_COL_COUNT];
    struct memtrace_event prev;
};

static int fail(struct memtrace_reader *r, int code, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(struct memtrace_reader *r, int code, uint64_t off, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    r->err.code = code;
    r->err.offset = off;
    snprintf(r->err.text, sizeof(r->err.text), "%s: %s", r->path, msg);
    r->status = FAILED;
    return code;
}

static int bad_payload(struct memtrace_reader *r, const char *kind, const char *why)
{
    return fail(r, MEMTRACE_EFORMAT, r->chunk_off, "chunk at offset %llu: malformed %s (%s)",
                (unsigned long long)r->chunk_off, kind, why);
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

static int over_limit(struct memtrace_reader *r, uint64_t off, const char *what, uint64_t total,
                      uint64_t limit)
{
    return fail(
        r, MEMTRACE_EFORMAT, off,
        "chunk at offset %llu: its %s would bring the tables to %llu MiB, over the %llu MiB "
        "this file may use (%s; set %s=N to allow N MiB)",
        (unsigned long long)off, what, (unsigned long long)(total >> 20),
        (unsigned long long)(limit >> 20),
        r->cost_limit ? TABLE_ENV : "64 MiB, or 64 bytes per byte of the file", TABLE_ENV);
}

/* Counts bytes the current chunk's tables are about to take, or fails. */
static int charge(struct memtrace_reader *r, const char *what, uint64_t bytes)
{
    uint64_t limit = cost_limit(r, r->offset);
    if (bytes > limit || r->cost > limit - bytes)
        return over_limit(r, r->chunk_off, what, r->cost + bytes, limit);
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

static uint64_t current_size(struct memtrace_reader *r)
{
    struct stat st;
    if (fstat(r->fd, &st) == 0)
        r->file_size = (uint64_t)st.st_size;
    return r->file_size;
}

/* Reads the next chunk into r->raw. 1: a chunk; 0: end of data (r->truncated set
 * when it ended inside a chunk); < 0: error (r->err set). */
static int read_chunk(struct memtrace_reader *r, int *type, size_t *raw_len)
{
    uint64_t off = r->offset;
    uint8_t h[MT_CHUNK_HEADER_LEN];
    ssize_t got = read_full(r->fd, h, sizeof(h));
    if (got < 0)
        return fail(r, MEMTRACE_EIO, off, "read error at offset %llu: %s", (unsigned long long)off,
                    strerror(errno));
    if (got == 0)
        return 0;
    if ((size_t)got < sizeof(h)) {
        r->truncated = 1;
        return 0;
    }
    uint32_t stored_len = mt_get_u32(h + 4);
    uint32_t len = mt_get_u32(h + 8);
    if (mt_get_u32(h + 16) != (uint32_t)crc32(0, h, 16)) {
        /* A damaged header whose length still lands on the end of the file is a
         * damaged last chunk; anywhere else the rest cannot be trusted. */
        if (off + MT_CHUNK_HEADER_LEN + stored_len == current_size(r)) {
            r->truncated = 1;
            return 0;
        }
        return fail(r, MEMTRACE_EFORMAT, off, "corrupt chunk header at offset %llu",
                    (unsigned long long)off);
    }
    if (stored_len > MT_CHUNK_MAX || len > MT_CHUNK_MAX)
        return fail(r, MEMTRACE_EFORMAT, off,
                    "chunk at offset %llu: impossible length (%u stored, %u raw)",
                    (unsigned long long)off, stored_len, len);
    if (grow((void **)&r->stored, &r->stored_cap, stored_len + 1, 1) < 0 ||
        grow((void **)&r->raw, &r->raw_cap, (size_t)len + 1, 1) < 0)
        return fail(r, MEMTRACE_ENOMEM, off, "out of memory");
    got = read_full(r->fd, r->stored, stored_len);
    if (got < 0)
        return fail(r, MEMTRACE_EIO, off, "read error at offset %llu: %s", (unsigned long long)off,
                    strerror(errno));
    if ((size_t)got < stored_len) {
        r->truncated = 1;
        return 0;
    }
    uint64_t end = off + MT_CHUNK_HEADER_LEN + stored_len;
    if (mt_get_u32(h + 12) != (uint32_t)crc32(0, r->stored, stored_len)) {
        if (end >= current_size(r)) {
            r->truncated = 1;
            return 0;
        }
        return fail(r, MEMTRACE_EFORMAT, off, "chunk at offset %llu: checksum mismatch",
                    (unsigned long long)off);
    }
    /* A table holds at least its raw bytes: refuse a bomb before inflating it. */
    static const char *const kinds[] = {[MT_CHUNK_STRINGS] = "strings",
                                        [MT_CHUNK_FRAMES] = "frames",
                                        [MT_CHUNK_STACKS] = "stacks",
                                        [MT_CHUNK_STATE] = "state"};
    if (h[0] < sizeof kinds / sizeof *kinds && kinds[h[0]] != NULL) {
        uint64_t limit = cost_limit(r, end);
        uint64_t kept = h[0] == MT_CHUNK_STATE ? r->cost - r->state_cost : r->cost;
        if (len > limit || kept > limit - len)
            return over_limit(r, off, kinds[h[0]], kept + len, limit);
    }
    if (inflateReset(&r->zs) != Z_OK)
        return fail(r, MEMTRACE_ENOMEM, off, "out of memory");
    r->zs.next_in = r->stored;
    r->zs.avail_in = stored_len;
    r->zs.next_out = r->raw;
    r->zs.avail_out = len + 1;
    int zr = inflate(&r->zs, Z_FINISH);
    if (zr != Z_STREAM_END || r->zs.total_out != len || r->zs.avail_in != 0)
        return fail(r, MEMTRACE_EFORMAT, off, "chunk at offset %llu: bad compressed data",
                    (unsigned long long)off);
    r->raw[len] = 0;
    r->offset = end;
    r->chunk_off = off;
    *type = h[0];
    *raw_len = len;
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

/* Checks that a varint column holds exactly n well-formed varints. */
static int count_varints(const uint8_t *p, const uint8_t *end, uint64_t n)
{
    uint64_t count = 0;
    int run = 0;
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

static int absorb_events(struct memtrace_reader *r, size_t len)
{
    const uint8_t *p = r->raw, *end = r->raw + len;
    uint64_t n;
    if (mt_get_varint(&p, end, &n) < 0 || p >= end)
        return bad_payload(r, "events", "short header");
    if (n > MT_CHUNK_MAX_EVENTS)
        return bad_payload(r, "events", "too many events");
    unsigned ncols = *p++;
    if (ncols < 3)
        return bad_payload(r, "events", "too few columns");
    memset(r->cols, 0, sizeof(r->cols));
    uint64_t misses = n;
    for (unsigned c = 0; c < ncols; c++) {
        if (p >= end)
            return bad_payload(r, "events", "short column");
        uint8_t mode = *p++;
        struct column col = {0};
        if (mode == MT_COLMODE_CONST) {
            col.konst = 1;
            if (mt_get_varint(&p, end, &col.value) < 0)
                return bad_payload(r, "events", "short constant");
        } else if (mode == MT_COLMODE_VARINT || mode == MT_COLMODE_BITS) {
            if (end - p < 4)
                return bad_payload(r, "events", "short column");
            uint32_t clen = mt_get_u32(p);
            p += 4;
            if (clen > (size_t)(end - p))
                return bad_payload(r, "events", "column exceeds payload");
            col.p = p;
            col.end = p + clen;
            p += clen;
        } else {
            return bad_payload(r, "events", "unknown column mode");
        }
        if (c == MT_COL_HIT) {
            if (mode == MT_COLMODE_VARINT || (mode == MT_COLMODE_CONST && col.value > 1))
                return bad_payload(r, "events", "bad hit column");
            if (mode == MT_COLMODE_CONST) {
                misses = col.value ? 0 : n;
            } else {
                if ((uint64_t)(col.end - col.p) != (n + 7) / 8)
                    return bad_payload(r, "events", "hit column length");
                uint64_t hits = 0;
                for (uint64_t i = 0; i < n; i++)
                    hits += (col.p[i >> 3] >> (i & 7)) & 1;
                misses = n - hits;
            }
        } else if (mode == MT_COLMODE_BITS) {
            return bad_payload(r, "events", "bit column where values are expected");
        } else if (mode == MT_COLMODE_VARINT && c < MT_COL_COUNT &&
                   count_varints(col.p, col.end, c == MT_COL_TIME ? n : misses) < 0) {
            return bad_payload(r, "events", "column does not hold one varint per value");
        }
        if (c < MT_COL_COUNT)
            r->cols[c] = col;
    }
    /* Columns a writer did not send read as constant 0. */
    for (unsigned c = ncols; c < MT_COL_COUNT; c++)
        r->cols[c].konst = 1;
    if (p != end)
        return bad_payload(r, "events", "trailing bytes");
    if (r->predict == NULL && (r->predict = malloc(MT_PREDICT_SIZE * sizeof(*r->predict))) == NULL)
        return fail(r, MEMTRACE_ENOMEM, r->chunk_off, "out of memory");
    memset(r->predict, 0, MT_PREDICT_SIZE * sizeof(*r->predict));
    memset(&r->prev, 0, sizeof(r->prev));
    r->key = mt_predict_key(0, 0);
    r->ev_index = 0;
    r->ev_left = (size_t)n;
    return 0;
}

/* Reads chunks until events are available, the file ends, or an error. */
static int advance(struct memtrace_reader *r)
{
    while (r->ev_left == 0) {
        if (r->status == FAILED)
            return r->err.code;
        if (r->status == AT_END)
            return 0;
        int type = 0;
        size_t len = 0;
        int rc = read_chunk(r, &type, &len);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            r->truncated = 1;
            r->status = AT_END;
            return 0;
        }
        switch (type) {
        case MT_CHUNK_META:
            rc = absorb_json(r, len, 0);
            break;
        case MT_CHUNK_STRINGS:
            rc = absorb_strings(r, len);
            break;
        case MT_CHUNK_FRAMES:
            rc = absorb_frames(r, len);
            break;
        case MT_CHUNK_STACKS:
            rc = absorb_stacks(r, len);
            break;
        case MT_CHUNK_EVENTS:
            rc = absorb_events(r, len);
            break;
        case MT_CHUNK_STATE:
            rc = absorb_state(r, len);
            break;
        case MT_CHUNK_END:
            rc = absorb_json(r, len, 1);
            if (rc == 0)
                r->status = AT_END;
            break;
        default:
            break; /* newer minor versions may add kinds that are safe to skip */
        }
        if (rc < 0)
            return rc;
    }
    return 1;
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
    r->fd = -1;
    if (path == NULL)
        path = "";
    r->path = strdup(path);
    r->meta = json_object();
    if (r->path == NULL || r->meta == NULL || inflateInit(&r->zs) != Z_OK) {
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
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        rc = fail(r, MEMTRACE_EIO, 0, "cannot open: %s", strerror(errno));
        goto out;
    }
    struct stat st;
    if (fstat(r->fd, &st) < 0) {
        rc = fail(r, MEMTRACE_EIO, 0, "cannot stat: %s", strerror(errno));
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        rc = fail(r, MEMTRACE_EIO, 0, "is a directory, not a memtrace file");
        goto out;
    }
    r->file_size = (uint64_t)st.st_size;
    uint8_t h[MT_HEADER_LEN];
    ssize_t got = read_full(r->fd, h, sizeof(h));
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
    r->offset = MT_HEADER_LEN;
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

static inline uint64_t col_next(struct column *c)
{
    if (c->konst)
        return c->value;
    uint64_t v;
    /* Cannot fail: absorb_events counted one varint per event. */
    if (mt_get_varint(&c->p, c->end, &v) < 0)
        return 0;
    return v;
}

int memtrace_reader_next(struct memtrace_reader *r, struct memtrace_event *ev)
{
    if (r->ev_left == 0) {
        int rc = advance(r);
        if (rc <= 0)
            return rc;
    }
    struct column *c = r->cols;
    const struct memtrace_event *q = &r->prev;
    struct memtrace_event *slot = &r->predict[r->key];
    size_t i = r->ev_index++;
    int hit =
        c[MT_COL_HIT].konst ? (int)c[MT_COL_HIT].value : (c[MT_COL_HIT].p[i >> 3] >> (i & 7)) & 1;
    struct memtrace_event e;
    if (hit) {
        e = *slot;
    } else {
        memset(&e, 0, sizeof(e));
        e.action = (uint8_t)col_next(&c[MT_COL_ACTION]);
        if (c[MT_COL_TID].konst)
            e.tid = (uint32_t)c[MT_COL_TID].value;
        else
            e.tid = q->tid + (uint32_t)mt_unzigzag(col_next(&c[MT_COL_TID]));
        if (c[MT_COL_ADDR].konst)
            e.addr = c[MT_COL_ADDR].value;
        else
            e.addr = q->addr + (uint64_t)mt_unzigzag(col_next(&c[MT_COL_ADDR]));
        e.size = col_next(&c[MT_COL_SIZE]);
        if (c[MT_COL_REQUESTED].konst)
            e.requested_size = c[MT_COL_REQUESTED].value;
        else
            e.requested_size = e.size + (uint64_t)mt_unzigzag(col_next(&c[MT_COL_REQUESTED]));
        if (c[MT_COL_STREAM].konst)
            e.stream = c[MT_COL_STREAM].value;
        else
            e.stream = q->stream + (uint64_t)mt_unzigzag(col_next(&c[MT_COL_STREAM]));
        e.aux = col_next(&c[MT_COL_AUX]);
        if (c[MT_COL_DEVICE].konst)
            e.device = (int32_t)mt_unzigzag(c[MT_COL_DEVICE].value);
        else
            e.device =
                (int32_t)((uint32_t)q->device + (uint32_t)mt_unzigzag(col_next(&c[MT_COL_DEVICE])));
        if (c[MT_COL_POOL].konst)
            e.pool = (int32_t)mt_unzigzag(c[MT_COL_POOL].value);
        else
            e.pool =
                (int32_t)((uint32_t)q->pool + (uint32_t)mt_unzigzag(col_next(&c[MT_COL_POOL])));
        e.stack = (uint32_t)col_next(&c[MT_COL_STACK]);
        e.category = (uint32_t)col_next(&c[MT_COL_CATEGORY]);
        e.source = (uint32_t)col_next(&c[MT_COL_SOURCE]);
    }
    e.time_ns = q->time_ns + (uint64_t)mt_unzigzag(col_next(&c[MT_COL_TIME]));
    *slot = e;
    r->prev = e;
    r->key = mt_predict_key(e.addr, e.action);
    r->ev_left--;
    *ev = e;
    return 1;
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
    if (r->fd >= 0)
        close(r->fd);
    inflateEnd(&r->zs);
    free(r->path);
    free(r->stored);
    free(r->raw);
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
    free(r->predict);
    free(r);
}
