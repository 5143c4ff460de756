/* import_pytorch.c: a PyTorch memory snapshot into a .memtrace file.
 *
 * The snapshot is one dict (or, from the oldest PyTorch, a bare list of segments):
 * `segments` become the STATE chunk written after all events (they describe the
 * allocator when the snapshot was taken), `device_traces[d]` become events of device
 * d, merged across devices by time so that each device keeps its own order, and
 * `external_annotations` become annotate events in the same merge. Every frames list
 * (innermost first) becomes a stack of frames (filename -> file, line, name ->
 * symbol). allocator_settings goes to the metadata under its own key; every other
 * top-level key is kept in the metadata under "pytorch_snapshot". docs/PYTORCH.md
 * has the whole mapping. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "import.h"
#include "memtrace.h"
#include "pickle.h"

struct imp {
    const char *path;
    struct memtrace_errinfo *err;
    struct mt_intern in;
    struct mt_writer *w;
    struct memtrace_event batch[4096];
    size_t nbatch;
    struct mt_import_stats *st;
};

static int ifail(struct imp *im, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The error is one line: control characters that came from the snapshot (a block
 * state, a JSON token) become \xNN text, so they can neither end the line nor act on
 * a terminal. */
static int ifail(struct imp *im, int code, const char *fmt, ...)
{
    if (im->err && im->err->code == 0) {
        char raw[sizeof(im->err->text)];
        im->err->code = code;
        int n = snprintf(raw, sizeof(raw), "%s: ", im->path);
        if (n < 0 || (size_t)n >= sizeof(raw))
            n = 0;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw + n, sizeof(raw) - (size_t)n, fmt, ap);
        va_end(ap);
        char *t = im->err->text, *end = t + sizeof(im->err->text) - 1;
        for (const unsigned char *p = (const unsigned char *)raw; *p && t < end; p++) {
            if (*p >= 0x20 && *p != 0x7f) {
                *t++ = (char)*p;
            } else if (end - t >= 4) {
                snprintf(t, 5, "\\x%02x", *p);
                t += 4;
            } else {
                break;
            }
        }
        *t = 0;
    }
    return code;
}

/* An unsigned field: a JSON integer >= 0, or the decimal string the pickle reader
 * makes of integers wider than int64 (kept if it fits 64 bits). Absent: *out = dflt.
 * Returns 0 or MEMTRACE_EFORMAT with the error named after what. */
static int get_u64(struct imp *im, json_t *o, const char *key, uint64_t dflt, uint64_t *out,
                   const char *what)
{
    json_t *v = json_object_get(o, key);
    *out = dflt;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return ifail(im, MEMTRACE_EFORMAT, "%s: '%s' is negative", what, key);
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        uint64_t u = 0;
        if (!*s || *s == '-')
            return ifail(im, MEMTRACE_EFORMAT, "%s: '%s' is not a non-negative integer", what, key);
        for (; *s; s++) {
            if (*s < '0' || *s > '9')
                return ifail(im, MEMTRACE_EFORMAT, "%s: '%s' is not an integer", what, key);
            unsigned d = (unsigned)(*s - '0');
            if (u > (UINT64_MAX - d) / 10)
                return ifail(im, MEMTRACE_EFORMAT,
                             "%s: '%s' is wider than 64 bits, which memtrace cannot hold", what,
                             key);
            u = u * 10 + d;
        }
        *out = u;
        return 0;
    }
    if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) < 1.8e19) {
        *out = (uint64_t)json_real_value(v);
        return 0;
    }
    return ifail(im, MEMTRACE_EFORMAT, "%s: '%s' is not an integer", what, key);
}

static int get_i32(struct imp *im, json_t *o, const char *key, int32_t *out, const char *what)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN ||
        json_integer_value(v) > INT32_MAX)
        return ifail(im, MEMTRACE_EFORMAT, "%s: '%s' is not a small integer", what, key);
    *out = (int32_t)json_integer_value(v);
    return 0;
}

static const char *get_str(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* The stack of a frames list (innermost first), 0 for none. */
static uint32_t stack_of(struct imp *im, json_t *frames)
{
    if (!json_is_array(frames))
        return 0;
    uint32_t parent = 0;
    for (size_t k = json_array_size(frames); k-- > 0;) {
        json_t *f = json_array_get(frames, k);
        if (!json_is_object(f))
            continue;
        struct mt_frame_rec rec;
        memset(&rec, 0, sizeof(rec));
        rec.symbol = mt_intern_string(&im->in, get_str(f, "name"));
        rec.file = mt_intern_string(&im->in, get_str(f, "filename"));
        json_t *line = json_object_get(f, "line");
        if (json_is_integer(line) && json_integer_value(line) > 0 &&
            json_integer_value(line) <= UINT32_MAX)
            rec.line = (uint32_t)json_integer_value(line);
        parent = mt_intern_stack(&im->in, parent, mt_intern_frame(&im->in, &rec));
    }
    return parent;
}

static int flush_events(struct imp *im)
{
    if (!im->nbatch)
        return 0;
    int rc = mt_intern_flush(&im->in, im->w);
    if (rc == 0)
        rc = mt_writer_events(im->w, im->batch, im->nbatch);
    if (rc)
        return ifail(im, rc, "cannot write the output: %s", memtrace_strerror(rc));
    im->st->events += im->nbatch;
    im->nbatch = 0;
    return 0;
}

static int add_event(struct imp *im, const struct memtrace_event *ev)
{
    im->batch[im->nbatch++] = *ev;
    return im->nbatch == sizeof(im->batch) / sizeof(im->batch[0]) ? flush_events(im) : 0;
}

/* A trace entry of device d into an event; *skip set for actions memtrace lacks. */
static int trace_event(struct imp *im, json_t *e, int32_t d, size_t k, struct memtrace_event *ev,
                       int *skip)
{
    char what[96];
    snprintf(what, sizeof(what), "device_traces[%d][%zu]", (int)d, k);
    memset(ev, 0, sizeof(*ev));
    *skip = 0;
    if (!json_is_object(e))
        return ifail(im, MEMTRACE_EFORMAT, "%s is not a dict", what);
    int a = memtrace_action_from_name(get_str(e, "action"));
    if (a < 0 || a == MEMTRACE_COUNTER) {
        *skip = 1;
        return 0;
    }
    uint64_t t_us;
    int rc;
    if ((rc = get_u64(im, e, "time_us", 0, &t_us, what)) ||
        (rc = get_u64(im, e, "addr", 0, &ev->addr, what)) ||
        (rc = get_u64(im, e, "size", 0, &ev->size, what)) ||
        (rc = get_u64(im, e, "requested_size", 0, &ev->requested_size, what)) ||
        (rc = get_u64(im, e, "stream", 0, &ev->stream, what)) ||
        (rc = get_u64(im, e, "device_free", 0, &ev->aux, what)))
        return rc;
    ev->time_ns = t_us * 1000;
    ev->action = (uint8_t)a;
    ev->device = d;
    ev->stack = stack_of(im, json_object_get(e, "frames"));
    const char *cc = json_string_value(json_object_get(e, "compile_context"));
    if (cc)
        ev->category = mt_intern_string(&im->in, cc);
    return 0;
}

static int annotation_event(struct imp *im, json_t *e, size_t k, struct memtrace_event *ev,
                            int *skip)
{
    char what[64];
    snprintf(what, sizeof(what), "external_annotations[%zu]", k);
    memset(ev, 0, sizeof(*ev));
    *skip = !json_is_object(e) || !json_object_get(e, "time_us");
    if (*skip)
        return 0;
    uint64_t t_us;
    int rc = get_u64(im, e, "time_us", 0, &t_us, what);
    if (rc == 0)
        rc = get_i32(im, e, "device", &ev->device, what);
    if (rc)
        return rc;
    const char *stage = get_str(e, "stage");
    ev->action = MEMTRACE_ANNOTATE;
    ev->time_ns = t_us * 1000;
    ev->aux = strcmp(stage, "START") == 0 ? MEMTRACE_ANNOTATE_PUSH
              : strcmp(stage, "END") == 0 ? MEMTRACE_ANNOTATE_POP
                                          : MEMTRACE_ANNOTATE_MARK;
    ev->category = mt_intern_string(&im->in, get_str(e, "name"));
    return 0;
}

/* The entry's time in us for the merge (entries without one sort as 0). */
static uint64_t entry_time(json_t *e)
{
    json_t *t = json_object_get(e, "time_us");
    return json_is_integer(t) && json_integer_value(t) > 0 ? (uint64_t)json_integer_value(t) : 0;
}

/* Every device trace and the annotations, merged by time; a list keeps its order. */
static int write_events(struct imp *im, json_t *traces, json_t *annots)
{
    size_t nlists = json_array_size(traces) + 1;
    size_t *pos = calloc(nlists, sizeof(*pos));
    if (!pos)
        return ifail(im, MEMTRACE_ENOMEM, "out of memory");
    int rc = 0;
    for (;;) {
        size_t best = nlists;
        uint64_t bt = 0;
        for (size_t l = 0; l < nlists; l++) {
            json_t *list = l + 1 < nlists ? json_array_get(traces, l) : annots;
            if (pos[l] >= json_array_size(list))
                continue;
            uint64_t t = entry_time(json_array_get(list, pos[l]));
            if (best == nlists || t < bt) {
                best = l;
                bt = t;
            }
        }
        if (best == nlists)
            break;
        size_t k = pos[best]++;
        struct memtrace_event ev;
        int skip;
        if (best + 1 < nlists)
            rc = trace_event(im, json_array_get(json_array_get(traces, best), k), (int32_t)best, k,
                             &ev, &skip);
        else
            rc = annotation_event(im, json_array_get(annots, k), k, &ev, &skip);
        if (rc)
            break;
        if (skip) {
            im->st->skipped++;
            continue;
        }
        if ((rc = add_event(im, &ev)))
            break;
    }
    free(pos);
    return rc ? rc : flush_events(im);
}

static int block_state(const char *s)
{
    if (strcmp(s, "active_allocated") == 0)
        return MEMTRACE_BLOCK_ACTIVE_ALLOCATED;
    if (strcmp(s, "active_pending_free") == 0)
        return MEMTRACE_BLOCK_ACTIVE_PENDING_FREE;
    if (strcmp(s, "inactive") == 0)
        return MEMTRACE_BLOCK_INACTIVE;
    return -1;
}

static int read_segment(struct imp *im, json_t *s, size_t i, struct memtrace_segment *seg,
                        struct memtrace_block **blocks)
{
    char what[64];
    snprintf(what, sizeof(what), "segments[%zu]", i);
    memset(seg, 0, sizeof(*seg));
    *blocks = NULL;
    if (!json_is_object(s))
        return ifail(im, MEMTRACE_EFORMAT, "%s is not a dict", what);
    int rc;
    if ((rc = get_u64(im, s, "address", 0, &seg->addr, what)) ||
        (rc = get_u64(im, s, "total_size", 0, &seg->total_size, what)) ||
        (rc = get_u64(im, s, "allocated_size", 0, &seg->allocated_size, what)) ||
        (rc = get_u64(im, s, "active_size", 0, &seg->active_size, what)) ||
        (rc = get_u64(im, s, "requested_size", 0, &seg->requested_size, what)) ||
        (rc = get_u64(im, s, "stream", 0, &seg->stream, what)) ||
        (rc = get_i32(im, s, "device", &seg->device, what)))
        return rc;
    seg->is_large = strcmp(get_str(s, "segment_type"), "small") != 0;
    seg->is_expandable = json_is_true(json_object_get(s, "is_expandable"));
    json_t *pool = json_object_get(s, "segment_pool_id");
    if (json_is_array(pool) && json_array_size(pool) == 2) {
        /* (graph pool id, 0) -> id; (0, user pool id) -> -id */
        json_int_t a = json_integer_value(json_array_get(pool, 0));
        json_int_t b = json_integer_value(json_array_get(pool, 1));
        json_int_t p = a != 0 ? a : -b;
        seg->pool = p > INT32_MAX ? INT32_MAX : p < -INT32_MAX ? -INT32_MAX : (int32_t)p;
    } else if (json_is_integer(pool))
        rc = get_i32(im, s, "segment_pool_id", &seg->pool, what);
    if (rc)
        return rc;
    seg->stack = stack_of(im, json_object_get(s, "frames"));
    json_t *bl = json_object_get(s, "blocks");
    size_t nb = json_array_size(bl);
    if (nb == 0)
        return 0;
    *blocks = calloc(nb, sizeof(**blocks));
    if (!*blocks)
        return ifail(im, MEMTRACE_ENOMEM, "out of memory");
    uint64_t addr = seg->addr;
    for (size_t k = 0; k < nb; k++) {
        json_t *b = json_array_get(bl, k);
        struct memtrace_block *mb = &(*blocks)[k];
        snprintf(what, sizeof(what), "segments[%zu].blocks[%zu]", i, k);
        if (!json_is_object(b))
            return ifail(im, MEMTRACE_EFORMAT, "%s is not a dict", what);
        json_t *hist = json_array_get(json_object_get(b, "history"), 0);
        uint64_t real = 0;
        if ((rc = get_u64(im, b, "address", addr, &mb->addr, what)) ||
            (rc = get_u64(im, b, "size", 0, &mb->size, what)) ||
            (hist && (rc = get_u64(im, hist, "real_size", mb->size, &real, what))) ||
            (rc = get_u64(im, b, "requested_size", hist ? real : mb->size, &mb->requested_size,
                          what)))
            return rc;
        int st = block_state(get_str(b, "state"));
        if (st < 0)
            return ifail(im, MEMTRACE_EFORMAT, "%s: unknown state '%s'", what, get_str(b, "state"));
        mb->state = st;
        json_t *frames = json_object_get(b, "frames");
        mb->stack = stack_of(im, frames ? frames : json_object_get(hist, "frames"));
        addr = mb->addr + mb->size;
    }
    seg->nblocks = nb;
    seg->blocks = *blocks;
    im->st->blocks += nb;
    return 0;
}

static int write_state(struct imp *im, json_t *segs, uint64_t time_ns)
{
    size_t n = json_array_size(segs);
    struct memtrace_segment *sv = calloc(n ? n : 1, sizeof(*sv));
    struct memtrace_block **bv = calloc(n ? n : 1, sizeof(*bv));
    int rc = 0;
    if (!sv || !bv)
        rc = ifail(im, MEMTRACE_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = read_segment(im, json_array_get(segs, i), i, &sv[i], &bv[i]);
    if (rc == 0 && (rc = mt_intern_flush(&im->in, im->w)) == 0)
        rc = mt_writer_state(im->w, time_ns, sv, n);
    if (rc && im->err->code == 0)
        ifail(im, rc, "cannot write the output: %s", memtrace_strerror(rc));
    im->st->segments = n;
    for (size_t i = 0; bv && i < n; i++)
        free(bv[i]);
    free(bv);
    free(sv);
    return rc;
}

static int read_whole(struct imp *im, unsigned char **buf, size_t *len)
{
    FILE *f = fopen(im->path, "rb");
    if (!f)
        return ifail(im, MEMTRACE_EIO, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return ifail(im, MEMTRACE_EIO, "not a regular file");
    }
    *len = (size_t)sb.st_size;
    *buf = malloc(*len ? *len : 1);
    if (!*buf) {
        fclose(f);
        return ifail(im, MEMTRACE_ENOMEM, "out of memory for %zu bytes", *len);
    }
    size_t got = fread(*buf, 1, *len, f);
    fclose(f);
    if (got != *len)
        return ifail(im, MEMTRACE_EIO, "read error");
    return 0;
}

static int parse(struct imp *im, json_t **root)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = read_whole(im, &buf, &len);
    if (rc)
        return rc;
    size_t i = 0;
    while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r'))
        i++;
    if (i < len && (buf[i] == '{' || buf[i] == '[')) {
        json_error_t jerr;
        *root = json_loadb((const char *)buf, len, 0, &jerr);
        if (!*root)
            rc = ifail(im, MEMTRACE_EFORMAT, "bad JSON at line %d, column %d: %s", jerr.line,
                       jerr.column, jerr.text);
    } else if (len > 0 && buf[0] == 0x80) {
        struct mt_pickle_error perr;
        im->st->pickle = 1;
        rc = mt_pickle_load(buf, len, root, &perr);
        if (rc)
            ifail(im, rc, "%s", perr.text);
    } else
        rc = ifail(im, MEMTRACE_EFORMAT,
                   "not a PyTorch memory snapshot (neither a pickle nor JSON)");
    free(buf);
    return rc;
}

static json_t *build_meta(struct imp *im, json_t *root, uint64_t t0)
{
    json_t *meta = json_object();
    json_object_set_new(meta, "imported_from", json_string(im->path));
    json_object_set_new(meta, "source_format",
                        json_string(im->st->pickle ? "pytorch-pickle" : "pytorch-json"));
    /* time_us is wall-clock: make wall time = time_ns */
    json_object_set_new(meta, "start_time_ns", json_integer((json_int_t)t0));
    json_object_set_new(meta, "start_monotonic_ns", json_integer((json_int_t)t0));
    if (!json_is_object(root))
        return meta;
    json_t *kept = json_object();
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "segments") == 0 || strcmp(key, "device_traces") == 0)
            continue;
        if (strcmp(key, "allocator_settings") == 0)
            json_object_set(meta, key, v);
        else
            json_object_set(kept, key, v);
    }
    if (json_object_size(kept))
        json_object_set(meta, "pytorch_snapshot", kept);
    json_decref(kept);
    return meta;
}

int mt_import_pytorch(const char *in_path, const char *out_path, unsigned writer_flags,
                      struct mt_import_stats *st, struct memtrace_errinfo *err)
{
    struct memtrace_errinfo e0;
    struct mt_import_stats s0;
    struct imp *im = calloc(1, sizeof(*im));
    if (!err)
        err = &e0;
    if (!st)
        st = &s0;
    memset(err, 0, sizeof(*err));
    memset(st, 0, sizeof(*st));
    if (!im) {
        err->code = MEMTRACE_ENOMEM;
        snprintf(err->text, sizeof(err->text), "%s: out of memory", in_path);
        return MEMTRACE_ENOMEM;
    }
    im->path = in_path;
    im->err = err;
    im->st = st;
    mt_intern_init(&im->in);
    json_t *root = NULL, *meta = NULL;
    char *text = NULL;
    int rc = parse(im, &root);
    if (rc)
        goto out;
    json_t *segs = json_is_array(root) ? root : json_object_get(root, "segments");
    json_t *traces = json_object_get(root, "device_traces");
    json_t *annots = json_object_get(root, "external_annotations");
    if (!json_is_array(root) && !json_is_object(root)) {
        rc = ifail(im, MEMTRACE_EFORMAT, "not a PyTorch memory snapshot (no segments)");
        goto out;
    }
    if (json_is_object(root) && !segs && !traces) {
        rc = ifail(im, MEMTRACE_EFORMAT,
                   "not a PyTorch memory snapshot (neither 'segments' nor 'device_traces')");
        goto out;
    }
    if ((segs && !json_is_array(segs)) || (traces && !json_is_array(traces))) {
        rc = ifail(im, MEMTRACE_EFORMAT, "'segments' and 'device_traces' must be lists");
        goto out;
    }
    if (!json_is_array(annots))
        annots = NULL;
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (size_t d = 0; d < json_array_size(traces); d++) {
        json_t *list = json_array_get(traces, d);
        if (!json_is_array(list)) {
            rc = ifail(im, MEMTRACE_EFORMAT, "device_traces[%zu] is not a list", d);
            goto out;
        }
        for (size_t k = 0; k < json_array_size(list); k++) {
            uint64_t t = entry_time(json_array_get(list, k)) * 1000;
            t0 = t < t0 ? t : t0;
            t1 = t > t1 ? t : t1;
        }
    }
    if (t0 == UINT64_MAX)
        t0 = 0;
    st->devices = json_array_size(traces);
    meta = build_meta(im, root, t0);
    text = json_dumps(meta, JSON_COMPACT);
    if (!text) {
        rc = ifail(im, MEMTRACE_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = mt_writer_open(&im->w, out_path, writer_flags | MT_WRITER_ATOMIC)) != 0) {
        rc = ifail(im, rc, "cannot create %s: %s", out_path, strerror(errno));
        goto out;
    }
    if ((rc = mt_writer_meta(im->w, text)) != 0) {
        rc = ifail(im, rc, "cannot write %s", out_path);
        goto out;
    }
    if ((rc = write_events(im, traces, annots)) != 0 || (rc = write_state(im, segs, t1)) != 0)
        goto out;
    char end[160];
    snprintf(end, sizeof(end), "{\"events\": %llu, \"skipped_entries\": %llu}",
             (unsigned long long)st->events, (unsigned long long)st->skipped);
    rc = mt_writer_end(im->w, end);
    im->w = NULL;
    if (rc)
        ifail(im, rc, "cannot finish %s", out_path);
out:
    if (im->w) {
        mt_writer_abort(im->w);
        remove(out_path);
    }
    free(text);
    json_decref(meta);
    json_decref(root);
    mt_intern_free(&im->in);
    free(im);
    return rc;
}
