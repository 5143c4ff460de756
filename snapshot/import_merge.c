/* import_merge.c: several .memtrace files (one per rank or process) into one.
 *
 * A first read of each file finds the devices it uses; the device map follows from
 * them and the files' ranks (see import.h). The second read merges: each file's next
 * event waits in a slot, the earliest goes out, with its stack, category and source
 * re-interned into the output's tables (a map per file, filled as ids appear). The
 * final states of all files become one STATE at the end. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "frames.h"
#include "import.h"
#include "memtrace.h"

struct src {
    const char *path;
    struct memtrace_reader *r;
    json_t *meta;
    int has_rank;
    long long rank;
    int32_t mindev, maxdev; /* maxdev < 0: no device events */
    int32_t offset;         /* new device = old + offset */
    uint64_t wall0, mono0;
    int has_clock;
    struct memtrace_event ev;
    int live; /* ev holds the next event */
    uint64_t t;
    uint32_t *smap, *fmap, *strmap; /* stack, frame, string ids -> output ids + 1 */
    size_t nsmap, nfmap, nstrmap;
    int truncated; /* it ended without its end record: merged up to its cut */
};

struct mg {
    struct src *s;
    size_t n;
    struct mt_intern in;
    struct mt_writer *w;
    struct memtrace_errinfo *err;
    uint32_t *fbuf;
    int fcap;
    int nomem;
};

static int mfail(struct mg *m, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int mfail(struct mg *m, int code, const char *fmt, ...)
{
    if (m->err->code == 0) {
        m->err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->err->text, sizeof(m->err->text), fmt, ap);
        va_end(ap);
    }
    return code;
}

/* *map[id] (output id + 1), growing the map; NULL on exhausted memory. */
static uint32_t *map_slot(struct mg *m, uint32_t **map, size_t *n, uint32_t id)
{
    if (id >= *n) {
        size_t c = *n ? *n : 256;
        while (c <= id)
            c *= 2;
        uint32_t *p = realloc(*map, c * sizeof(*p));
        if (!p) {
            m->nomem = 1;
            return NULL;
        }
        memset(p + *n, 0, (c - *n) * sizeof(*p));
        *map = p;
        *n = c;
    }
    return &(*map)[id];
}

static uint32_t map_string(struct mg *m, struct src *s, uint32_t id)
{
    if (!id)
        return 0;
    uint32_t *slot = map_slot(m, &s->strmap, &s->nstrmap, id);
    if (!slot)
        return 0;
    if (!*slot)
        *slot = mt_intern_string(&m->in, memtrace_reader_string(s->r, id)) + 1;
    return *slot - 1;
}

static uint32_t map_frame(struct mg *m, struct src *s, uint32_t id)
{
    uint32_t *slot = map_slot(m, &s->fmap, &s->nfmap, id);
    if (!slot)
        return 0;
    if (!*slot) {
        const struct memtrace_frame *fr = memtrace_reader_frame(s->r, id);
        struct mt_frame_rec rec;
        memset(&rec, 0, sizeof(rec));
        if (fr) {
            rec.ip = fr->ip;
            rec.offset = fr->offset;
            rec.line = fr->line;
            rec.module = mt_intern_string(&m->in, fr->module);
            rec.symbol = mt_intern_string(&m->in, fr->symbol);
            rec.file = mt_intern_string(&m->in, fr->file);
        }
        *slot = mt_intern_frame(&m->in, &rec) + 1;
    }
    return *slot - 1;
}

static uint32_t map_stack(struct mg *m, struct src *s, uint32_t id)
{
    if (!id)
        return 0;
    uint32_t *slot = map_slot(m, &s->smap, &s->nsmap, id);
    if (!slot)
        return 0;
    if (*slot)
        return *slot - 1;
    int depth = mt_stack_frames(s->r, id, &m->fbuf, &m->fcap);
    if (depth < 0) {
        m->nomem = 1;
        return 0;
    }
    uint32_t parent = 0;
    for (int k = depth - 1; k >= 0; k--)
        parent = mt_intern_stack(&m->in, parent, map_frame(m, s, m->fbuf[k]));
    slot = map_slot(m, &s->smap, &s->nsmap, id); /* the map may have moved */
    if (slot)
        *slot = parent + 1;
    return parent;
}

static int32_t map_device(const struct src *s, int32_t d)
{
    return d < 0 ? d : d + s->offset;
}

static int read_failed(struct mg *m, struct src *s, int rc)
{
    const struct memtrace_errinfo *e = memtrace_reader_error(s->r);
    if (e && e->code) {
        *m->err = *e;
        return e->code;
    }
    return mfail(m, rc, "%s: %s", s->path, memtrace_strerror(rc));
}

/* First read: devices used, rank and clock. */
static int survey(struct mg *m, struct src *s)
{
    int rc = memtrace_reader_open(&s->r, s->path, m->err);
    if (rc)
        return rc;
    s->meta = json_loads(memtrace_reader_meta(s->r), 0, NULL);
    json_t *rank = json_object_get(s->meta, "rank");
    if (json_is_integer(rank)) {
        s->has_rank = 1;
        s->rank = json_integer_value(rank);
    }
    json_t *w = json_object_get(s->meta, "start_time_ns");
    json_t *mo = json_object_get(s->meta, "start_monotonic_ns");
    if (json_is_integer(w) && json_integer_value(w) > 0) {
        s->has_clock = 1;
        s->wall0 = (uint64_t)json_integer_value(w);
        s->mono0 = json_is_integer(mo) ? (uint64_t)json_integer_value(mo) : 0;
    }
    s->mindev = INT32_MAX;
    s->maxdev = -1;
    struct memtrace_event ev;
    while ((rc = memtrace_reader_next(s->r, &ev)) == 1)
        if (ev.device >= 0) {
            s->mindev = ev.device < s->mindev ? ev.device : s->mindev;
            s->maxdev = ev.device > s->maxdev ? ev.device : s->maxdev;
        }
    if (rc < 0)
        return read_failed(m, s, rc);
    s->truncated = memtrace_reader_truncated(s->r);
    for (size_t i = 0; i < memtrace_reader_segment_count(s->r); i++) {
        int32_t d = memtrace_reader_segment(s->r, i)->device;
        if (d >= 0) {
            s->mindev = d < s->mindev ? d : s->mindev;
            s->maxdev = d > s->maxdev ? d : s->maxdev;
        }
    }
    memtrace_reader_close(s->r);
    s->r = NULL;
    return 0;
}

static int by_rank(const void *a, const void *b)
{
    const struct src *x = a, *y = b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static void plan_devices(struct mg *m, struct mt_merge_stats *st)
{
    int ranks = 1;
    for (size_t i = 0; i < m->n; i++)
        ranks &= m->s[i].has_rank;
    if (ranks)
        qsort(m->s, m->n, sizeof(*m->s), by_rank); /* stable enough: ranks are distinct below */
    int keep = ranks;
    for (size_t i = 0; keep && i < m->n; i++)
        for (size_t j = i + 1; keep && j < m->n; j++) {
            const struct src *a = &m->s[i], *b = &m->s[j];
            if (a->rank == b->rank)
                keep = 0;
            else if (a->maxdev >= 0 && b->maxdev >= 0 && a->mindev <= b->maxdev &&
                     b->mindev <= a->maxdev)
                keep = 0;
        }
    int32_t next = 0;
    for (size_t i = 0; i < m->n; i++) {
        m->s[i].offset = keep ? 0 : next;
        if (m->s[i].maxdev >= 0)
            next += m->s[i].maxdev + 1;
    }
    st->renumbered = !keep;
}

static json_t *build_meta(struct mg *m, int aligned, uint64_t t0)
{
    json_t *meta = json_object(), *from = json_array(), *devices = json_array();
    for (size_t i = 0; i < m->n; i++) {
        struct src *s = &m->s[i];
        json_t *o = json_object();
        json_object_set_new(o, "path", json_string(s->path));
        static const char *const keys[] = {"rank", "host", "pid", "argv", "start_time_ns", NULL};
        for (int k = 0; keys[k]; k++)
            if (json_object_get(s->meta, keys[k]))
                json_object_set(o, keys[k], json_object_get(s->meta, keys[k]));
        json_object_set_new(o, "device_offset", json_integer(s->offset));
        if (s->truncated)
            json_object_set_new(o, "truncated", json_true());
        json_array_append_new(from, o);
        size_t k;
        json_t *d;
        json_array_foreach(json_object_get(s->meta, "devices"), k, d)
        {
            json_t *c = json_deep_copy(d);
            json_t *idx = json_object_get(c, "index");
            if (json_is_integer(idx))
                json_object_set_new(c, "index",
                                    json_integer(map_device(s, (int32_t)json_integer_value(idx))));
            json_object_set_new(c, "source", json_integer((json_int_t)i));
            json_array_append_new(devices, c);
        }
        json_t *settings = json_object_get(s->meta, "allocator_settings");
        if (settings && !json_object_get(meta, "allocator_settings"))
            json_object_set(meta, "allocator_settings", settings);
    }
    json_object_set_new(meta, "merged_from", from);
    if (json_array_size(devices))
        json_object_set_new(meta, "devices", devices);
    else
        json_decref(devices);
    if (aligned) {
        json_object_set_new(meta, "start_time_ns", json_integer((json_int_t)t0));
        json_object_set_new(meta, "start_monotonic_ns", json_integer((json_int_t)t0));
    }
    return meta;
}

static int advance(struct mg *m, struct src *s, int aligned)
{
    int rc = memtrace_reader_next(s->r, &s->ev);
    if (rc < 0)
        return read_failed(m, s, rc);
    s->live = rc == 1;
    if (s->live)
        s->t = aligned ? s->wall0 + (s->ev.time_ns - s->mono0) : s->ev.time_ns;
    return 0;
}

/* The sources' states joined into one state chunk at time t: their latest states, or
 * with initial those held before their first events (docs/REPLAY.md, rule 0) by the
 * sources that have events, called once each source has read its first one. */
static int write_state(struct mg *m, uint64_t t, int initial)
{
    size_t total = 0, nb = 0;
    for (size_t i = 0; i < m->n; i++)
        for (size_t k = 0;
             (!initial || m->s[i].live) && k < memtrace_reader_segment_count(m->s[i].r); k++) {
            total++;
            nb += memtrace_reader_segment(m->s[i].r, k)->nblocks;
        }
    if (!total)
        return 0;
    struct memtrace_segment *segs = calloc(total, sizeof(*segs));
    struct memtrace_block *blocks = calloc(nb ? nb : 1, sizeof(*blocks));
    int rc = 0;
    if (!segs || !blocks)
        rc = mfail(m, MEMTRACE_ENOMEM, "out of memory merging the states");
    size_t j = 0, b = 0;
    for (size_t i = 0; rc == 0 && i < m->n; i++) {
        struct src *s = &m->s[i];
        if (initial && !s->live)
            continue;
        for (size_t k = 0; k < memtrace_reader_segment_count(s->r); k++) {
            const struct memtrace_segment *g = memtrace_reader_segment(s->r, k);
            segs[j] = *g;
            segs[j].device = map_device(s, g->device);
            segs[j].stack = map_stack(m, s, g->stack);
            segs[j].source = map_string(m, s, g->source);
            segs[j].blocks = blocks + b;
            for (size_t q = 0; q < g->nblocks; q++) {
                blocks[b] = g->blocks[q];
                blocks[b].stack = map_stack(m, s, g->blocks[q].stack);
                b++;
            }
            j++;
        }
    }
    if (rc == 0 && (rc = mt_intern_flush(&m->in, m->w)) == 0)
        rc = mt_writer_state(m->w, t, segs, total);
    if (rc)
        mfail(m, rc, "cannot write the merged state: %s", mt_writer_strerror(rc));
    free(segs);
    free(blocks);
    return rc;
}

int mt_merge(const char *const *paths, size_t n, const char *out_path, unsigned writer_flags,
             struct mt_merge_stats *st, struct memtrace_errinfo *err)
{
    struct mt_merge_stats s0;
    struct memtrace_errinfo e0;
    if (!st)
        st = &s0;
    if (!err)
        err = &e0;
    memset(st, 0, sizeof(*st));
    memset(err, 0, sizeof(*err));
    struct mg m;
    memset(&m, 0, sizeof(m));
    m.err = err;
    m.n = n;
    mt_intern_init(&m.in);
    m.s = calloc(n ? n : 1, sizeof(*m.s));
    struct memtrace_event *batch = malloc(4096 * sizeof(*batch));
    json_t *meta = NULL;
    char *text = NULL;
    int rc = 0;
    if (!m.s || !batch) {
        rc = mfail(&m, MEMTRACE_ENOMEM, "out of memory");
        goto out;
    }
    int aligned = 1;
    for (size_t i = 0; i < n; i++) {
        m.s[i].path = paths[i];
        if ((rc = survey(&m, &m.s[i])))
            goto out;
        aligned &= m.s[i].has_clock;
        if (m.s[i].truncated && st->truncated++ == 0)
            st->truncated_path = paths[i];
    }
    plan_devices(&m, st);
    st->aligned = aligned;
    uint64_t t0 = UINT64_MAX, tmax = 0;
    for (size_t i = 0; i < n; i++) {
        if ((rc = memtrace_reader_open(&m.s[i].r, m.s[i].path, err)))
            goto out;
        if ((rc = advance(&m, &m.s[i], aligned)))
            goto out;
        if (m.s[i].live && m.s[i].t < t0)
            t0 = m.s[i].t;
    }
    meta = build_meta(&m, aligned, t0 == UINT64_MAX ? 0 : t0);
    text = json_dumps(meta, JSON_COMPACT);
    if (!text) {
        rc = mfail(&m, MEMTRACE_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = mt_writer_open(&m.w, out_path, writer_flags | MT_WRITER_ATOMIC)) ||
        (rc = mt_writer_meta(m.w, text))) {
        rc = mfail(&m, rc, "cannot write %s: %s", out_path, strerror(errno));
        goto out;
    }
    if ((rc = write_state(&m, t0 == UINT64_MAX ? 0 : t0, 1)))
        goto out;
    size_t nb = 0;
    for (;;) {
        struct src *best = NULL;
        for (size_t i = 0; i < n; i++)
            if (m.s[i].live && (!best || m.s[i].t < best->t))
                best = &m.s[i];
        if (!best || nb == 4096) {
            if (nb) {
                if ((rc = mt_intern_flush(&m.in, m.w)) || (rc = mt_writer_events(m.w, batch, nb))) {
                    rc = mfail(&m, rc, "cannot write %s: %s", out_path, mt_writer_strerror(rc));
                    goto out;
                }
                st->events += nb;
                nb = 0;
            }
            if (!best)
                break;
        }
        struct memtrace_event ev = best->ev;
        ev.time_ns = best->t;
        ev.device = map_device(best, ev.device);
        ev.stack = map_stack(&m, best, ev.stack);
        ev.category = map_string(&m, best, ev.category);
        ev.source = map_string(&m, best, ev.source);
        tmax = ev.time_ns > tmax ? ev.time_ns : tmax;
        batch[nb++] = ev;
        if (m.nomem) {
            rc = mfail(&m, MEMTRACE_ENOMEM, "out of memory");
            goto out;
        }
        if ((rc = advance(&m, best, aligned)))
            goto out;
    }
    if ((rc = write_state(&m, tmax, 0)))
        goto out;
    char end[96];
    snprintf(end, sizeof(end), "{\"events\": %llu, \"sources\": %zu}",
             (unsigned long long)st->events, n);
    rc = mt_writer_end(m.w, end);
    m.w = NULL;
    if (rc)
        mfail(&m, rc, "cannot finish %s: %s", out_path, mt_writer_strerror(rc));
out:
    /* An atomic writer never touched out_path: a file there (the one --force would
     * have replaced) stays as it was. */
    if (m.w)
        mt_writer_abort(m.w);
    for (size_t i = 0; m.s && i < n; i++) {
        if (m.s[i].r)
            memtrace_reader_close(m.s[i].r);
        json_decref(m.s[i].meta);
        free(m.s[i].smap);
        free(m.s[i].fmap);
        free(m.s[i].strmap);
    }
    free(m.s);
    free(batch);
    free(m.fbuf);
    free(text);
    json_decref(meta);
    mt_intern_free(&m.in);
    return rc;
}
