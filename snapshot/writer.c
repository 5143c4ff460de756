/* writer.c: writing .memtrace files.
 *
 * Layout. A 16-byte header (magic "MEMTRACE", major and minor version, flags) is
 * followed by chunks and nothing else:
 *
 *   [type u8][flags u8][reserved u16][stored_len u32][raw_len u32][crc u32][hcrc u32]
 *   [stored_len bytes: zlib stream of the raw_len-byte payload]
 *
 * Every chunk stands alone: its own zlib stream, its own delta bases, its own CRCs
 * (one over the stored payload, one over the header itself, so that a damaged length
 * is told apart from a short file). Each mt_writer_* call ends in one write(2) of
 * whole chunks, so a process killed at any moment leaves a prefix of whole chunks
 * plus at most one partial chunk, which readers drop and report as truncation.
 *
 * Tables (strings, frames, stack trie nodes) are appended in chunks whose ids
 * continue where the previous chunk of the same kind stopped; events refer to them
 * by id, so a stack costs its bytes once per file, not once per event.
 *
 * Events are stored column by column (all actions, then all time deltas, then all
 * addresses, ...) after a one-bit-per-event "hit" column. A hit means the event
 * equals, time aside, the event that followed the last event with the same action
 * and address: a training loop replays the same allocations at the same addresses
 * every iteration, so nearly all its events become one bit plus a time delta, and
 * only misses fill the other columns. Those are zigzag deltas against the previous
 * event (time, address, stream, tid, device, pool) or plain varints (sizes and ids,
 * whose repetition is positional, not local), and a column holding one value for the
 * whole chunk shrinks to a single varint. zlib then squeezes what repeats; the time
 * column, mostly clock jitter, goes into stored deflate blocks: compressing it would
 * save about 15% of the file and halve the encoding speed. The byte-level rules are
 * in docs/FORMAT.md. */
#include "config.h"

#include "writer.h"

#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* write(2) until all of buf is in the kernel; 0 or -errno. */
static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Level 1 deflates several times faster than the default and, on columns that
 * repeat, compresses within a few percent of it. */
#define MT_ZLIB_LEVEL 1
/* The EVENTS time column is stored (level 0): see write_chunk. */
#define MT_TIME_LEVEL 0
/* Strings chunks are split near this many payload bytes. */
#define MT_STRINGS_SPLIT (16u << 20)

struct mt_writer {
    int fd;
    uint8_t *mem; /* a memory writer's chunks (fd -1) */
    size_t mem_len, mem_cap;
    unsigned flags;
    char *path; /* atomic: where the file goes at the end */
    char *tmp;  /* atomic: where it is written */
    int failed; /* the errno of the first failure that stopped it, 0 none */
    int meta_done;
    uint64_t bytes;
    uint32_t nstrings;
    uint32_t nframes;
    uint32_t nstacks;
    z_stream zs;
    uint8_t *raw;
    size_t raw_cap;
    uint8_t *out;
    size_t out_cap;
    const struct memtrace_event **predict; /* MT_PREDICT_SIZE entries */
    uint32_t *miss;
    uint8_t *bits;
    uint8_t *tbuf; /* the time column, built in the prediction pass */
    size_t scratch_cap;
};

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    uint8_t *p = realloc(*buf, n);
    if (p == NULL)
        return MEMTRACE_ENOMEM;
    *buf = p;
    *cap = n;
    return 0;
}

/* Compresses w->raw[0..len) into one chunk and writes it with one write(2);
 * raw[time_from..time_to) (the time column) goes into stored blocks. */
static int write_chunk(struct mt_writer *w, int type, size_t len, size_t time_from, size_t time_to)
{
    if (w->failed) {
        errno = w->failed;
        return MEMTRACE_EIO;
    }
    if (len > MT_CHUNK_MAX)
        return MEMTRACE_EINVAL;
    /* slack for the blocks that the level switches close early */
    size_t bound = deflateBound(&w->zs, (uLong)len) + 256;
    if (grow(&w->out, &w->out_cap, MT_CHUNK_HEADER_LEN + bound) < 0)
        return MEMTRACE_ENOMEM;
    if (deflateReset(&w->zs) != Z_OK)
        return MEMTRACE_ENOMEM;
    w->zs.next_out = w->out + MT_CHUNK_HEADER_LEN;
    w->zs.avail_out = (uInt)bound;
    /* Time deltas are mostly clock jitter: deflate gains little on them (about 15%
     * of the file) and spends most of its time there, so that part is stored. */
    size_t cut[3] = {time_from, time_to, len};
    int level[2] = {MT_TIME_LEVEL, MT_ZLIB_LEVEL};
    size_t from = 0;
    int zr = Z_OK;
    for (int part = 0; part < 3; part++) {
        if (cut[part] > from) {
            w->zs.next_in = w->raw + from;
            w->zs.avail_in = (uInt)(cut[part] - from);
            zr = deflate(&w->zs, part == 2 ? Z_FINISH : Z_NO_FLUSH);
            if (zr != Z_OK && zr != Z_STREAM_END)
                return MEMTRACE_ENOMEM;
            from = cut[part];
        }
        if (part < 2 && time_to > time_from &&
            deflateParams(&w->zs, level[part], Z_DEFAULT_STRATEGY) != Z_OK)
            return MEMTRACE_ENOMEM;
    }
    if (zr != Z_STREAM_END && deflate(&w->zs, Z_FINISH) != Z_STREAM_END)
        return MEMTRACE_ENOMEM;
    size_t stored = w->zs.total_out;
    if (stored > MT_CHUNK_MAX)
        return MEMTRACE_EINVAL;

    uint8_t *h = w->out;
    h[0] = (uint8_t)type;
    h[1] = 0;
    mt_put_u16(h + 2, 0);
    mt_put_u32(h + 4, (uint32_t)stored);
    mt_put_u32(h + 8, (uint32_t)len);
    mt_put_u32(h + 12, (uint32_t)crc32(0, h + MT_CHUNK_HEADER_LEN, (uInt)stored));
    mt_put_u32(h + 16, (uint32_t)crc32(0, h, 16));
    if (w->fd < 0) {
        if (grow(&w->mem, &w->mem_cap, w->mem_len + MT_CHUNK_HEADER_LEN + stored) < 0) {
            w->failed = ENOMEM;
            return MEMTRACE_ENOMEM;
        }
        memcpy(w->mem + w->mem_len, w->out, MT_CHUNK_HEADER_LEN + stored);
        w->mem_len += MT_CHUNK_HEADER_LEN + stored;
        w->bytes += MT_CHUNK_HEADER_LEN + stored;
        return 0;
    }
    int rc = write_all(w->fd, w->out, MT_CHUNK_HEADER_LEN + stored);
    if (rc < 0) {
        /* A partial chunk may be on disk: anything after it would read as a corrupt
         * middle, so the writer stops here and the file reads as truncated. */
        w->failed = -rc;
        errno = -rc;
        return MEMTRACE_EIO;
    }
    w->bytes += MT_CHUNK_HEADER_LEN + stored;
    return 0;
}

/* Frees w, closing its file and removing an atomic writer's temporary file, if
 * any are left; keeps errno. */
static void writer_free(struct mt_writer *w)
{
    int e = errno;
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmp != NULL)
        unlink(w->tmp);
    free(w->tmp);
    free(w->path);
    deflateEnd(&w->zs);
    free(w->predict);
    free(w->miss);
    free(w->bits);
    free(w->tbuf);
    free(w->raw);
    free(w->out);
    free(w->mem);
    free(w);
    errno = e;
}

/* Opens w->fd for path under flags (see writer.h); 0 or -errno. */
static int create_file(struct mt_writer *w, const char *path, unsigned flags)
{
    struct stat sb;
    if (flags & MT_WRITER_ATOMIC) {
        /* Checked now so that a dump is not built for nothing; the rename at the
         * end checks again. */
        if (lstat(path, &sb) == 0)
            return (flags & MT_WRITER_OVERWRITE) && !S_ISLNK(sb.st_mode) ? 0 : -EEXIST;
        if (errno != ENOENT)
            return -errno;
        return 0;
    }
    int oflags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
    oflags |= flags & MT_WRITER_OVERWRITE ? O_TRUNC : O_EXCL;
    w->fd = open(path, oflags, 0600);
    return w->fd < 0 ? -errno : 0;
}

int mt_writer_open(struct mt_writer **out, const char *path, unsigned flags)
{
    *out = NULL;
    struct mt_writer *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return MEMTRACE_ENOMEM;
    w->fd = -1;
    w->flags = flags;
    if (deflateInit(&w->zs, MT_ZLIB_LEVEL) != Z_OK) {
        free(w);
        return MEMTRACE_ENOMEM;
    }
    int rc = create_file(w, path, flags);
    if (rc == 0 && (flags & MT_WRITER_ATOMIC)) {
        size_t len = strlen(path);
        w->path = strdup(path);
        w->tmp = malloc(len + sizeof ".tmp-XXXXXX");
        if (w->path == NULL || w->tmp == NULL) {
            writer_free(w);
            return MEMTRACE_ENOMEM;
        }
        memcpy(w->tmp, path, len);
        memcpy(w->tmp + len, ".tmp-XXXXXX", sizeof ".tmp-XXXXXX");
        w->fd = mkostemp(w->tmp, O_CLOEXEC); /* O_EXCL, mode 0600 */
        rc = w->fd < 0 ? -errno : 0;
        if (rc != 0) {
            free(w->tmp);
            w->tmp = NULL;
        }
    }
    if (rc != 0) {
        writer_free(w);
        errno = -rc;
        return MEMTRACE_EIO;
    }
    uint8_t h[MT_HEADER_LEN];
    memcpy(h, MT_MAGIC, MT_MAGIC_LEN);
    mt_put_u16(h + 8, MT_VERSION_MAJOR);
    mt_put_u16(h + 10, MT_VERSION_MINOR);
    mt_put_u32(h + 12, 0);
    rc = write_all(w->fd, h, sizeof(h));
    if (rc < 0) {
        writer_free(w);
        errno = -rc;
        return MEMTRACE_EIO;
    }
    w->bytes = sizeof(h);
    *out = w;
    return 0;
}

int mt_writer_open_mem(struct mt_writer **out)
{
    struct mt_writer *w = calloc(1, sizeof(*w));
    *out = NULL;
    if (w == NULL)
        return MEMTRACE_ENOMEM;
    w->fd = -1;
    if (deflateInit(&w->zs, MT_ZLIB_LEVEL) != Z_OK) {
        free(w);
        return MEMTRACE_ENOMEM;
    }
    *out = w;
    return 0;
}

int mt_writer_take(struct mt_writer *w, struct mt_writer *mem)
{
    int rc = 0;
    int w_tables = w->nstrings || w->nframes || w->nstacks;
    int mem_tables = mem->nstrings || mem->nframes || mem->nstacks;
    if (w->fd < 0 || mem->fd >= 0 || (w_tables && mem_tables))
        rc = MEMTRACE_EINVAL;
    else if (mem->failed || w->failed) {
        errno = mem->failed ? mem->failed : w->failed;
        rc = MEMTRACE_EIO;
    } else if ((rc = write_all(w->fd, mem->mem, mem->mem_len)) < 0) {
        w->failed = -rc;
        errno = -rc;
        rc = MEMTRACE_EIO;
    } else {
        w->bytes += mem->mem_len;
        if (mem_tables) {
            w->nstrings = mem->nstrings;
            w->nframes = mem->nframes;
            w->nstacks = mem->nstacks;
        }
    }
    writer_free(mem);
    return rc;
}

/* Writes a JSON object chunk; the first META chunk gets "format_version". */
static int write_json(struct mt_writer *w, int type, const char *json)
{
    if (json == NULL)
        return MEMTRACE_EINVAL;
    json_t *obj = json_loads(json, 0, NULL);
    if (obj == NULL || !json_is_object(obj)) {
        json_decref(obj);
        return MEMTRACE_EINVAL;
    }
    if (type == MT_CHUNK_META && !w->meta_done && json_object_get(obj, "format_version") == NULL)
        json_object_set_new(obj, "format_version", json_integer(MT_VERSION_MAJOR));
    char *text = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (text == NULL)
        return MEMTRACE_ENOMEM;
    size_t len = strlen(text);
    int rc = grow(&w->raw, &w->raw_cap, len);
    if (rc == 0) {
        memcpy(w->raw, text, len);
        rc = write_chunk(w, type, len, 0, 0);
    }
    free(text);
    if (rc == 0 && type == MT_CHUNK_META)
        w->meta_done = 1;
    return rc;
}

int mt_writer_meta(struct mt_writer *w, const char *json)
{
    return write_json(w, MT_CHUNK_META, json);
}

/* Common prefix of table chunks: first id and count. */
static uint8_t *put_table_head(uint8_t *p, uint32_t first_id, size_t n)
{
    p = mt_put_varint(p, first_id);
    return mt_put_varint(p, n);
}

int mt_writer_strings(struct mt_writer *w, uint32_t first_id, size_t n, const char *const *s)
{
    if (first_id != w->nstrings + 1 || n > UINT32_MAX - w->nstrings || (n > 0 && s == NULL))
        return MEMTRACE_EINVAL;
    size_t i = 0;
    while (i < n) {
        size_t j = i, bytes = 0;
        while (j < n && j - i < MT_CHUNK_MAX_ENTRIES && bytes < MT_STRINGS_SPLIT) {
            size_t l = s[j] ? strlen(s[j]) : 0;
            if (l >= MT_CHUNK_MAX / 2)
                return MEMTRACE_EINVAL;
            bytes += l + 1;
            j++;
        }
        if (grow(&w->raw, &w->raw_cap, 20 + bytes) < 0)
            return MEMTRACE_ENOMEM;
        uint8_t *p = put_table_head(w->raw, w->nstrings + 1, j - i);
        for (size_t k = i; k < j; k++) {
            size_t l = s[k] ? strlen(s[k]) : 0;
            memcpy(p, s[k] ? s[k] : "", l + 1);
            p += l + 1;
        }
        int rc = write_chunk(w, MT_CHUNK_STRINGS, (size_t)(p - w->raw), 0, 0);
        if (rc < 0)
            return rc;
        w->nstrings += (uint32_t)(j - i);
        i = j;
    }
    return 0;
}

int mt_writer_frames(struct mt_writer *w, uint32_t first_id, size_t n, const struct mt_frame_rec *f)
{
    if (first_id != w->nframes + 1 || n > UINT32_MAX - w->nframes || (n > 0 && f == NULL))
        return MEMTRACE_EINVAL;
    for (size_t i = 0; i < n;) {
        size_t m = n - i < MT_CHUNK_MAX_ENTRIES ? n - i : MT_CHUNK_MAX_ENTRIES;
        if (grow(&w->raw, &w->raw_cap, 20 + m * 60) < 0)
            return MEMTRACE_ENOMEM;
        uint8_t *p = put_table_head(w->raw, w->nframes + 1, m);
        uint64_t prev_ip = 0;
        for (size_t k = i; k < i + m; k++) {
            p = mt_put_varint(p, mt_zigzag((int64_t)(f[k].ip - prev_ip)));
            prev_ip = f[k].ip;
            p = mt_put_varint(p, f[k].offset);
            p = mt_put_varint(p, f[k].module);
            p = mt_put_varint(p, f[k].symbol);
            p = mt_put_varint(p, f[k].file);
            p = mt_put_varint(p, f[k].line);
        }
        int rc = write_chunk(w, MT_CHUNK_FRAMES, (size_t)(p - w->raw), 0, 0);
        if (rc < 0)
            return rc;
        w->nframes += (uint32_t)m;
        i += m;
    }
    return 0;
}

int mt_writer_stacks(struct mt_writer *w, uint32_t first_id, size_t n, const uint32_t *parent,
                     const uint32_t *frame)
{
    if (first_id != w->nstacks + 1 || n > UINT32_MAX - w->nstacks ||
        (n > 0 && (parent == NULL || frame == NULL)))
        return MEMTRACE_EINVAL;
    /* The trie must point backwards: that is what makes it acyclic for readers. */
    for (size_t i = 0; i < n; i++)
        if (parent[i] >= first_id + i)
            return MEMTRACE_EINVAL;
    for (size_t i = 0; i < n;) {
        size_t m = n - i < MT_CHUNK_MAX_ENTRIES ? n - i : MT_CHUNK_MAX_ENTRIES;
        if (grow(&w->raw, &w->raw_cap, 20 + m * 10) < 0)
            return MEMTRACE_ENOMEM;
        uint8_t *p = put_table_head(w->raw, w->nstacks + 1, m);
        for (size_t k = i; k < i + m; k++) {
            uint32_t id = first_id + (uint32_t)k;
            p = mt_put_varint(p, id - parent[k]);
            p = mt_put_varint(p, frame[k]);
        }
        int rc = write_chunk(w, MT_CHUNK_STACKS, (size_t)(p - w->raw), 0, 0);
        if (rc < 0)
            return rc;
        w->nstacks += (uint32_t)m;
        i += m;
    }
    return 0;
}

typedef struct memtrace_event mt_ev;

/* The delta base of a chunk's first event. */
static const mt_ev zero_event;

static inline uint64_t sdelta64(uint64_t a, uint64_t b)
{
    return mt_zigzag((int64_t)(a - b));
}

static inline uint64_t sdelta32(int32_t a, int32_t b)
{
    return mt_zigzag((int64_t)a - (int64_t)b);
}

static inline int same_but_time(const mt_ev *a, const mt_ev *b)
{
    return a->addr == b->addr && a->size == b->size && a->requested_size == b->requested_size &&
           a->action == b->action && a->stack == b->stack && a->tid == b->tid &&
           a->stream == b->stream && a->aux == b->aux && a->device == b->device &&
           a->pool == b->pool && a->category == b->category && a->source == b->source;
}

/* FIELD: the value stored for a constant column; CODE: the varint of one event
 * given the previous one (the all-zero event before the first). */
#define F_ACTION(e)    ((uint64_t)(e)->action)
#define C_ACTION(e, q) ((uint64_t)(e)->action)
#define F_TID(e)       ((uint64_t)(e)->tid)
#define C_TID(e, q)    mt_zigzag((int64_t)(int32_t)((e)->tid - (q)->tid))
#define F_ADDR(e)      ((e)->addr)
#define C_ADDR(e, q)   sdelta64((e)->addr, (q)->addr)
#define F_SIZE(e)      ((e)->size)
#define C_SIZE(e, q)   ((e)->size)
#define F_REQ(e)       ((e)->requested_size)
#define C_REQ(e, q)    sdelta64((e)->requested_size, (e)->size)
#define F_STREAM(e)    ((e)->stream)
#define C_STREAM(e, q) sdelta64((e)->stream, (q)->stream)
#define F_AUX(e)       ((e)->aux)
#define C_AUX(e, q)    ((e)->aux)
#define F_DEVICE(e)    mt_zigzag((e)->device)
#define C_DEVICE(e, q) sdelta32((e)->device, (q)->device)
#define F_POOL(e)      mt_zigzag((e)->pool)
#define C_POOL(e, q)   sdelta32((e)->pool, (q)->pool)
#define F_STACK(e)     ((uint64_t)(e)->stack)
#define C_STACK(e, q)  ((uint64_t)(e)->stack)
#define F_CAT(e)       ((uint64_t)(e)->category)
#define C_CAT(e, q)    ((uint64_t)(e)->category)
#define F_SOURCE(e)    ((uint64_t)(e)->source)
#define C_SOURCE(e, q) ((uint64_t)(e)->source)

/* One column over the missed events miss[0..m): constant, or one varint each. */
#define DEFINE_COLUMN(name, FIELD, CODE)                                                           \
    static uint8_t *enc_##name(uint8_t *p, const mt_ev *ev, const uint32_t *miss, size_t m)        \
    {                                                                                              \
        uint64_t first = m ? FIELD(&ev[miss[0]]) : 0;                                              \
        size_t i = 1;                                                                              \
        while (i < m && FIELD(&ev[miss[i]]) == first)                                              \
            i++;                                                                                   \
        if (i >= m) {                                                                              \
            *p++ = MT_COLMODE_CONST;                                                               \
            return mt_put_varint(p, first);                                                        \
        }                                                                                          \
        *p++ = MT_COLMODE_VARINT;                                                                  \
        uint8_t *lenp = p;                                                                         \
        p += 4;                                                                                    \
        uint8_t *start = p;                                                                        \
        for (i = 0; i < m; i++) {                                                                  \
            uint32_t k = miss[i];                                                                  \
            p = mt_put_varint(p, CODE(&ev[k], k ? &ev[k - 1] : &zero_event));                      \
        }                                                                                          \
        mt_put_u32(lenp, (uint32_t)(p - start));                                                   \
        return p;                                                                                  \
    }

DEFINE_COLUMN(action, F_ACTION, C_ACTION)
DEFINE_COLUMN(tid, F_TID, C_TID)
DEFINE_COLUMN(addr, F_ADDR, C_ADDR)
DEFINE_COLUMN(size, F_SIZE, C_SIZE)
DEFINE_COLUMN(req, F_REQ, C_REQ)
DEFINE_COLUMN(stream, F_STREAM, C_STREAM)
DEFINE_COLUMN(aux, F_AUX, C_AUX)
DEFINE_COLUMN(device, F_DEVICE, C_DEVICE)
DEFINE_COLUMN(pool, F_POOL, C_POOL)
DEFINE_COLUMN(stack, F_STACK, C_STACK)
DEFINE_COLUMN(cat, F_CAT, C_CAT)
DEFINE_COLUMN(source, F_SOURCE, C_SOURCE)

/* Encodes one EVENTS payload of m events into w->raw; returns its length and where
 * the time column lies. */
static size_t encode_events(struct mt_writer *w, const mt_ev *e, size_t m, size_t *time_from,
                            size_t *time_to)
{
    uint8_t *bits = w->bits;
    uint32_t *miss = w->miss;
    const mt_ev **table = w->predict;
    size_t nmiss = 0;
    memset(bits, 0, (m + 7) / 8);
    for (size_t i = 0; i < MT_PREDICT_SIZE; i++)
        table[i] = &zero_event;
    uint32_t key = mt_predict_key(0, 0);
    /* One pass over the events for prediction and time, while they are in cache. */
    uint8_t *t = w->tbuf;
    uint64_t prev = 0;
    for (size_t i = 0; i < m; i++) {
        if (same_but_time(&e[i], table[key]))
            bits[i >> 3] |= (uint8_t)(1u << (i & 7));
        else
            miss[nmiss++] = (uint32_t)i;
        table[key] = &e[i];
        key = mt_predict_key(e[i].addr, e[i].action);
        t = mt_put_varint(t, sdelta64(e[i].time_ns, prev));
        prev = e[i].time_ns;
    }

    uint8_t *p = mt_put_varint(w->raw, m);
    *p++ = MT_COL_COUNT;
    if (nmiss == 0 || nmiss == m) {
        *p++ = MT_COLMODE_CONST;
        *p++ = nmiss == 0;
    } else {
        *p++ = MT_COLMODE_BITS;
        mt_put_u32(p, (uint32_t)((m + 7) / 8));
        memcpy(p + 4, bits, (m + 7) / 8);
        p += 4 + (m + 7) / 8;
    }
    p = enc_action(p, e, miss, nmiss);
    /* time: every event, zigzag delta from the previous one */
    *p++ = MT_COLMODE_VARINT;
    mt_put_u32(p, (uint32_t)(t - w->tbuf));
    p += 4;
    *time_from = (size_t)(p - w->raw);
    memcpy(p, w->tbuf, (size_t)(t - w->tbuf));
    p += t - w->tbuf;
    *time_to = (size_t)(p - w->raw);
    p = enc_tid(p, e, miss, nmiss);
    p = enc_addr(p, e, miss, nmiss);
    p = enc_size(p, e, miss, nmiss);
    p = enc_req(p, e, miss, nmiss);
    p = enc_stream(p, e, miss, nmiss);
    p = enc_aux(p, e, miss, nmiss);
    p = enc_device(p, e, miss, nmiss);
    p = enc_pool(p, e, miss, nmiss);
    p = enc_stack(p, e, miss, nmiss);
    p = enc_cat(p, e, miss, nmiss);
    p = enc_source(p, e, miss, nmiss);
    return (size_t)(p - w->raw);
}

int mt_writer_events(struct mt_writer *w, const struct memtrace_event *ev, size_t n)
{
    if (n > 0 && ev == NULL)
        return MEMTRACE_EINVAL;
    if (w->predict == NULL) {
        w->predict = malloc(MT_PREDICT_SIZE * sizeof(*w->predict));
        if (w->predict == NULL)
            return MEMTRACE_ENOMEM;
    }
    for (size_t i = 0; i < n;) {
        size_t m = n - i < MT_CHUNK_MAX_EVENTS ? n - i : MT_CHUNK_MAX_EVENTS;
        if (m > w->scratch_cap) {
            uint32_t *miss = realloc(w->miss, m * sizeof(uint32_t));
            if (miss == NULL)
                return MEMTRACE_ENOMEM;
            w->miss = miss;
            uint8_t *bits = realloc(w->bits, (m + 7) / 8);
            if (bits == NULL)
                return MEMTRACE_ENOMEM;
            w->bits = bits;
            uint8_t *tbuf = realloc(w->tbuf, m * 10);
            if (tbuf == NULL)
                return MEMTRACE_ENOMEM;
            w->tbuf = tbuf;
            w->scratch_cap = m;
        }
        if (grow(&w->raw, &w->raw_cap, 32 + (m + 7) / 8 + MT_COL_COUNT * (5 + 10 * m)) < 0)
            return MEMTRACE_ENOMEM;
        size_t tf, tt;
        size_t len = encode_events(w, ev + i, m, &tf, &tt);
        int rc = write_chunk(w, MT_CHUNK_EVENTS, len, tf, tt);
        if (rc < 0)
            return rc;
        i += m;
    }
    return 0;
}

int mt_writer_state(struct mt_writer *w, uint64_t time_ns, const struct memtrace_segment *segs,
                    size_t n)
{
    if (n > 0 && segs == NULL)
        return MEMTRACE_EINVAL;
    size_t need = 32;
    for (size_t i = 0; i < n; i++) {
        if (segs[i].nblocks > 0 && segs[i].blocks == NULL)
            return MEMTRACE_EINVAL;
        need += 12 * 10 + segs[i].nblocks * 50;
        if (need > 2 * (size_t)MT_CHUNK_MAX)
            return MEMTRACE_EINVAL;
    }
    if (grow(&w->raw, &w->raw_cap, need) < 0)
        return MEMTRACE_ENOMEM;
    uint8_t *p = mt_put_varint(w->raw, time_ns);
    p = mt_put_varint(p, n);
    for (size_t i = 0; i < n; i++) {
        const struct memtrace_segment *s = &segs[i];
        p = mt_put_varint(p, s->addr);
        p = mt_put_varint(p, s->total_size);
        p = mt_put_varint(p, s->allocated_size);
        p = mt_put_varint(p, s->active_size);
        p = mt_put_varint(p, s->requested_size);
        p = mt_put_varint(p, s->stream);
        p = mt_put_varint(p, mt_zigzag(s->device));
        p = mt_put_varint(p, mt_zigzag(s->pool));
        p = mt_put_varint(p, (s->is_large ? 1u : 0u) | (s->is_expandable ? 2u : 0u));
        p = mt_put_varint(p, s->stack);
        p = mt_put_varint(p, s->source);
        p = mt_put_varint(p, s->nblocks);
        uint64_t expect = s->addr;
        for (size_t b = 0; b < s->nblocks; b++) {
            const struct memtrace_block *k = &s->blocks[b];
            p = mt_put_varint(p, sdelta64(k->addr, expect));
            p = mt_put_varint(p, k->size);
            p = mt_put_varint(p, k->requested_size);
            p = mt_put_varint(p, k->stack);
            p = mt_put_varint(p, mt_zigzag(k->state));
            expect = k->addr + k->size;
        }
    }
    return write_chunk(w, MT_CHUNK_STATE, (size_t)(p - w->raw), 0, 0);
}

int mt_rename_into_place(const char *tmp, const char *path, int overwrite)
{
    struct stat sb;
    if (overwrite) {
        if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode))
            return -ELOOP;
        return rename(tmp, path) == 0 ? 0 : -errno;
    }
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -errno;
    /* A file system without RENAME_NOREPLACE: link() does not replace either. */
    if (link(tmp, path) != 0)
        return -errno;
    unlink(tmp);
    return 0;
}

int mt_writer_end(struct mt_writer *w, const char *json)
{
    int rc = write_json(w, MT_CHUNK_END, json ? json : "{}");
    int e = errno;
    if (rc == 0 && w->tmp != NULL && fsync(w->fd) != 0) {
        e = errno;
        rc = MEMTRACE_EIO;
    }
    if (close(w->fd) < 0 && rc == 0) {
        e = errno;
        rc = MEMTRACE_EIO;
    }
    w->fd = -1;
    if (rc == 0 && w->tmp != NULL) {
        int r = mt_rename_into_place(w->tmp, w->path, (w->flags & MT_WRITER_OVERWRITE) != 0);
        if (r == 0) {
            free(w->tmp);
            w->tmp = NULL; /* nothing left to remove */
        } else {
            e = -r;
            rc = MEMTRACE_EIO;
        }
    }
    writer_free(w);
    errno = e;
    return rc;
}

void mt_writer_abort(struct mt_writer *w)
{
    if (w == NULL)
        return;
    writer_free(w);
}

uint64_t mt_writer_bytes(const struct mt_writer *w)
{
    return w->bytes;
}

const char *mt_writer_strerror(int rc)
{
    return rc == MEMTRACE_EIO && errno != 0 ? strerror(errno) : memtrace_strerror(rc);
}

void mt_remove_output(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode))
        unlink(path);
}
