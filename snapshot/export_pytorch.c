/* export_pytorch.c: a .memtrace file as a PyTorch memory snapshot, pickled (protocol
 * 4) or as JSON, in the schema torch.cuda.memory._snapshot() returns and that
 * torch/cuda/_memory_viz.py and MemoryViz read:
 *
 *   {"segments": [{device, address, total_size, allocated_size, active_size,
 *                  requested_size, stream, segment_type, segment_pool_id,
 *                  is_expandable, frames, blocks: [{address, size, requested_size,
 *                  state, frames}]}],
 *    "device_traces": [[{action, addr, size, stream, time_us, frames, ...}], ...],
 *    "external_annotations": [{name, stage, device, time_us}],   (when annotated)
 *    "allocator_settings": {...}, and the keys an import kept}
 *
 * segments come from the file's latest STATE (or, in a file without one, the replay's
 * live segments and blocks at the end); blocks are listed in address order
 * and gaps inside a segment are filled with inactive blocks, because readers place
 * each block at the segment's address plus the sizes before it. Frames are
 * {filename, line, name}, innermost first; in the pickle each distinct frame dict is
 * written once and shared after (memo), as PyTorch's own pickles do.
 *
 * One read finds the devices and the final state, one read per device writes that
 * device's trace, and one more the annotations (when there are any): the output is
 * written as it is read, and memory stays with the state and the frame table. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "export.h"
#include "frames.h"
#include "memtrace.h"
#include "pickle.h"
#include "replay.h"

/* One emitter for both encodings. */
struct em {
    FILE *f;
    int pickle;
    struct mt_pkw pk;
    int depth;
    int after_key;
    uint32_t count[32];
    uint32_t *frame_memo; /* by frame id: memo id + 1 */
    size_t nframe_memo;
    const char *keys[48];
    uint32_t key_memo[48]; /* memo id + 1 */
    int nomem;
};

static void pre(struct em *e)
{
    if (e->pickle)
        return;
    if (e->after_key) {
        e->after_key = 0;
        return;
    }
    if (e->depth > 0 && e->count[e->depth - 1]++ > 0)
        mt_export_byte(e->f, ',');
}

static void em_open(struct em *e, int dict)
{
    pre(e);
    if (e->pickle)
        dict ? mt_pkw_dict(&e->pk) : mt_pkw_list(&e->pk);
    else
        mt_export_byte(e->f, dict ? '{' : '[');
    if (e->depth < 32)
        e->count[e->depth] = 0;
    e->depth++;
}

static void em_close(struct em *e, int dict)
{
    e->depth--;
    if (e->pickle)
        mt_pkw_close(&e->pk);
    else
        mt_export_byte(e->f, dict ? '}' : ']');
}

static void em_str(struct em *e, const char *s)
{
    pre(e);
    if (e->pickle)
        mt_pkw_str(&e->pk, s);
    else
        mt_export_json_str(e->f, s);
}

/* Keys are few and repeated in every entry: in the pickle each is written once. */
static void em_key(struct em *e, const char *k)
{
    pre(e);
    if (e->pickle) {
        int i = 0;
        while (i < 48 && e->keys[i] && e->keys[i] != k)
            i++;
        if (i < 48 && e->keys[i] == k) {
            mt_pkw_get(&e->pk, e->key_memo[i] - 1);
            return;
        }
        mt_pkw_str(&e->pk, k);
        if (i < 48) {
            e->keys[i] = k;
            e->key_memo[i] = mt_pkw_put(&e->pk) + 1;
        }
        return;
    }
    mt_export_json_str(e->f, k);
    mt_export_byte(e->f, ':');
    e->after_key = 1;
}

static void em_u64(struct em *e, uint64_t v)
{
    pre(e);
    if (e->pickle)
        mt_pkw_uint(&e->pk, v);
    else
        fprintf(e->f, "%" PRIu64, v);
}

static void em_i64(struct em *e, int64_t v)
{
    pre(e);
    if (e->pickle)
        mt_pkw_int(&e->pk, v);
    else
        fprintf(e->f, "%" PRId64, v);
}

static void em_bool(struct em *e, int v)
{
    pre(e);
    if (e->pickle)
        mt_pkw_bool(&e->pk, v);
    else
        fputs(v ? "true" : "false", e->f);
}

/* A JSON value from the metadata (allocator settings, kept keys). */
static void em_json(struct em *e, json_t *v)
{
    const char *k;
    json_t *x;
    size_t i;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        em_open(e, 1);
        json_object_foreach(v, k, x)
        {
            pre(e);
            if (e->pickle)
                mt_pkw_str(&e->pk, k);
            else {
                mt_export_json_str(e->f, k);
                mt_export_byte(e->f, ':');
                e->after_key = 1;
            }
            em_json(e, x);
        }
        em_close(e, 1);
        break;
    case JSON_ARRAY:
        em_open(e, 0);
        json_array_foreach(v, i, x) em_json(e, x);
        em_close(e, 0);
        break;
    case JSON_STRING:
        em_str(e, json_string_value(v));
        break;
    case JSON_INTEGER:
        em_i64(e, json_integer_value(v));
        break;
    case JSON_REAL:
        pre(e);
        if (e->pickle)
            mt_pkw_float(&e->pk, json_real_value(v));
        else
            fprintf(e->f, "%.17g", json_real_value(v));
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        em_bool(e, json_is_true(v));
        break;
    default:
        pre(e);
        if (e->pickle)
            mt_pkw_none(&e->pk);
        else
            fputs("null", e->f);
    }
}

static const char K_ACTION[] = "action", K_ADDR[] = "addr", K_SIZE[] = "size",
                  K_STREAM[] = "stream", K_TIME[] = "time_us", K_FRAMES[] = "frames",
                  K_FILENAME[] = "filename", K_LINE[] = "line", K_NAME[] = "name",
                  K_DEVFREE[] = "device_free", K_CC[] = "compile_context", K_ADDRESS[] = "address",
                  K_REQ[] = "requested_size", K_STATE[] = "state";

static void em_frame(struct em *e, struct memtrace_reader *r, uint32_t id)
{
    if (e->pickle && id < e->nframe_memo && e->frame_memo[id]) {
        pre(e);
        mt_pkw_get(&e->pk, e->frame_memo[id] - 1);
        return;
    }
    const struct memtrace_frame *fr = memtrace_reader_frame(r, id);
    char buf[64];
    em_open(e, 1);
    em_key(e, K_FILENAME);
    em_str(e, mt_export_frame_file(fr));
    em_key(e, K_LINE);
    em_u64(e, fr ? fr->line : 0);
    em_key(e, K_NAME);
    em_str(e, mt_export_frame_name(buf, sizeof(buf), fr));
    em_close(e, 1);
    if (!e->pickle)
        return;
    if (id >= e->nframe_memo) {
        size_t n = e->nframe_memo ? e->nframe_memo : 1024;
        while (n <= id)
            n *= 2;
        uint32_t *m = realloc(e->frame_memo, n * sizeof(*m));
        if (!m) {
            e->nomem = 1;
            return;
        }
        memset(m + e->nframe_memo, 0, (n - e->nframe_memo) * sizeof(*m));
        e->frame_memo = m;
        e->nframe_memo = n;
    }
    e->frame_memo[id] = mt_pkw_put(&e->pk) + 1;
}

struct xp {
    const char *path;
    struct em e;
    uint32_t *fbuf;
    int fcap;
    struct mt_wallclock clock;
};

static void em_frames(struct xp *x, struct memtrace_reader *r, uint32_t stack)
{
    int depth = mt_stack_frames(r, stack, &x->fbuf, &x->fcap);
    if (depth < 0) {
        x->e.nomem = 1;
        depth = x->fcap;
    }
    em_open(&x->e, 0);
    for (int k = 0; k < depth; k++)
        em_frame(&x->e, r, x->fbuf[k]);
    em_close(&x->e, 0);
}

static int cmp_block(const void *a, const void *b)
{
    const struct memtrace_block *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static const char *state_name(int s)
{
    return s == MEMTRACE_BLOCK_ACTIVE_ALLOCATED      ? "active_allocated"
           : s == MEMTRACE_BLOCK_ACTIVE_PENDING_FREE ? "active_pending_free"
                                                     : "inactive";
}

static void em_block(struct xp *x, struct memtrace_reader *r, uint64_t addr, uint64_t size,
                     uint64_t req, int state, uint32_t stack)
{
    struct em *e = &x->e;
    em_open(e, 1);
    em_key(e, K_ADDRESS);
    em_u64(e, addr);
    em_key(e, K_SIZE);
    em_u64(e, size);
    em_key(e, K_REQ);
    em_u64(e, req);
    em_key(e, K_STATE);
    em_str(e, state_name(state));
    em_key(e, K_FRAMES);
    em_frames(x, r, stack);
    em_close(e, 1);
}

static void em_segment(struct xp *x, struct memtrace_reader *r, const struct memtrace_segment *s)
{
    struct em *e = &x->e;
    em_open(e, 1);
    em_key(e, "device");
    em_i64(e, s->device);
    em_key(e, K_ADDRESS);
    em_u64(e, s->addr);
    em_key(e, "total_size");
    em_u64(e, s->total_size);
    em_key(e, "allocated_size");
    em_u64(e, s->allocated_size);
    em_key(e, "active_size");
    em_u64(e, s->active_size);
    em_key(e, K_REQ);
    em_u64(e, s->requested_size);
    em_key(e, K_STREAM);
    em_u64(e, s->stream);
    em_key(e, "segment_type");
    em_str(e, s->is_large ? "large" : "small");
    em_key(e, "segment_pool_id"); /* (graph pool, user pool): see import_pytorch.c */
    pre(e);
    if (e->pickle) {
        mt_pkw_tuple(&e->pk);
        mt_pkw_int(&e->pk, s->pool > 0 ? s->pool : 0);
        mt_pkw_int(&e->pk, s->pool < 0 ? -(int64_t)s->pool : 0);
        mt_pkw_close(&e->pk);
    } else
        fprintf(e->f, "[%" PRId64 ",%" PRId64 "]", (int64_t)(s->pool > 0 ? s->pool : 0),
                s->pool < 0 ? -(int64_t)s->pool : 0);
    em_key(e, "is_expandable");
    em_bool(e, s->is_expandable);
    em_key(e, K_FRAMES);
    em_frames(x, r, s->stack);
    em_key(e, "blocks");
    em_open(e, 0);
    struct memtrace_block *b = NULL;
    if (s->nblocks) {
        b = malloc(s->nblocks * sizeof(*b));
        if (!b)
            e->nomem = 1;
    }
    if (b) {
        memcpy(b, s->blocks, s->nblocks * sizeof(*b));
        qsort(b, s->nblocks, sizeof(*b), cmp_block);
    }
    uint64_t at = s->addr, end = s->addr + s->total_size;
    for (size_t k = 0; b && k < s->nblocks; k++) {
        if (b[k].addr > at && b[k].addr <= end)
            em_block(x, r, at, b[k].addr - at, 0, MEMTRACE_BLOCK_INACTIVE, 0);
        em_block(x, r, b[k].addr, b[k].size, b[k].requested_size, b[k].state, b[k].stack);
        if (b[k].addr + b[k].size > at)
            at = b[k].addr + b[k].size;
    }
    if (at < end)
        em_block(x, r, at, end - at, 0, MEMTRACE_BLOCK_INACTIVE, 0);
    free(b);
    em_close(e, 0);
    em_close(e, 1);
}

/* Actions a PyTorch trace holds. */
static int in_trace(int a)
{
    return a <= MEMTRACE_OOM;
}

static void em_entry(struct xp *x, struct memtrace_reader *r, const struct memtrace_event *ev)
{
    struct em *e = &x->e;
    em_open(e, 1);
    em_key(e, K_ACTION);
    em_str(e, memtrace_action_name(ev->action));
    if (ev->action != MEMTRACE_OOM) {
        em_key(e, K_ADDR);
        em_u64(e, ev->addr);
    }
    em_key(e, K_SIZE);
    em_u64(e, ev->size);
    em_key(e, K_STREAM);
    em_u64(e, ev->stream);
    em_key(e, K_TIME);
    em_u64(e, mt_export_wall(&x->clock, ev->time_ns) / 1000);
    if (ev->action == MEMTRACE_OOM) {
        em_key(e, K_DEVFREE);
        em_u64(e, ev->aux);
    }
    if (ev->action != MEMTRACE_SNAPSHOT || ev->stack) {
        em_key(e, K_FRAMES);
        em_frames(x, r, ev->stack);
    }
    if (ev->category) {
        em_key(e, K_CC);
        em_str(e, memtrace_reader_string(r, ev->category));
    }
    em_close(e, 1);
}

static void em_annotation(struct xp *x, struct memtrace_reader *r, const struct memtrace_event *ev,
                          const char *stage)
{
    struct em *e = &x->e;
    em_open(e, 1);
    em_key(e, K_NAME);
    em_str(e, memtrace_reader_string(r, ev->category));
    em_key(e, "stage");
    em_str(e, stage);
    em_key(e, "device");
    em_i64(e, ev->device);
    em_key(e, K_TIME);
    em_u64(e, mt_export_wall(&x->clock, ev->time_ns) / 1000);
    em_close(e, 1);
}

static int cmp_live(const void *a, const void *b)
{
    const struct mt_live *x = a, *y = b;
    return x->head.key < y->head.key ? -1 : x->head.key > y->head.key;
}

/* A file without a STATE chunk: its segments are the replay's live segment pieces at
 * the end, each with the live blocks inside it (memory: a copy of the live tables). */
static void em_live_segments(struct xp *x, const struct mt_replay *rp)
{
    struct mt_live *segs = malloc((rp->segs.n + 1) * sizeof(*segs));
    struct mt_live *bl = malloc((rp->blocks.n + 1) * sizeof(*bl));
    struct memtrace_block *mb = malloc((rp->blocks.n + 1) * sizeof(*mb));
    size_t ns = 0, nb = 0;
    if (!segs || !bl || !mb) {
        x->e.nomem = 1;
        goto out;
    }
    for (size_t i = 0; i < rp->segs.cap; i++) {
        const struct mt_live *l = mt_addrtab_at(&rp->segs, i);
        if (l && l->device >= 0)
            segs[ns++] = *l;
    }
    for (size_t i = 0; i < rp->blocks.cap; i++) {
        const struct mt_live *l = mt_addrtab_at(&rp->blocks, i);
        if (l)
            bl[nb++] = *l;
    }
    qsort(segs, ns, sizeof(*segs), cmp_live);
    qsort(bl, nb, sizeof(*bl), cmp_live);
    size_t j = 0;
    for (size_t i = 0; i < ns; i++) {
        struct memtrace_segment s;
        memset(&s, 0, sizeof(s));
        s.addr = segs[i].head.key;
        s.total_size = segs[i].size;
        s.stream = segs[i].stream;
        s.device = segs[i].device;
        s.pool = segs[i].pool;
        s.is_large = segs[i].pool != 1; /* memtrace's pool 1 is the small pool */
        s.stack = segs[i].stack;
        while (j < nb && bl[j].head.key < s.addr)
            j++;
        size_t k = 0;
        for (; j < nb && bl[j].head.key < s.addr + s.total_size; j++) {
            if (bl[j].device != s.device)
                continue;
            mb[k].addr = bl[j].head.key;
            mb[k].size = bl[j].size;
            mb[k].requested_size = bl[j].requested ? bl[j].requested : bl[j].size;
            mb[k].stack = bl[j].stack;
            mb[k].state = bl[j].pending ? MEMTRACE_BLOCK_ACTIVE_PENDING_FREE
                                        : MEMTRACE_BLOCK_ACTIVE_ALLOCATED;
            s.allocated_size += bl[j].pending ? 0 : mb[k].size;
            s.active_size += mb[k].size;
            s.requested_size += mb[k].requested_size;
            k++;
        }
        s.nblocks = k;
        s.blocks = mb;
        em_segment(x, rp->r, &s);
    }
out:
    free(segs);
    free(bl);
    free(mb);
}

/* The first read: devices, annotations, what is left out, and the segments (from the
 * latest STATE, or from the replay's live tables when the file has none). */
static int scan(struct xp *x, int32_t *maxdev, uint64_t *nannot, struct mt_export_stats *st,
                struct memtrace_errinfo *err, json_t **meta)
{
    struct mt_replay *rp;
    int rc = mt_replay_open(&rp, x->path, NULL, err);
    if (rc)
        return rc;
    mt_export_wallclock(rp->r, &x->clock);
    while ((rc = mt_replay_next(rp)) == 1) {
        const struct memtrace_event *ev = rp->ev;
        if (ev->action == MEMTRACE_ANNOTATE)
            ++*nannot;
        else if (!in_trace(ev->action) || ev->device < 0)
            st->left_out++;
        else if (ev->device > *maxdev)
            *maxdev = ev->device;
    }
    st->events = rp->events;
    if (rc < 0) {
        rc = mt_export_reader_failed(rp->r, x->path, rc, err);
        mt_replay_close(rp);
        return rc;
    }
    st->truncated = mt_replay_truncated(rp);
    st->window_missed = mt_replay_window_missed(rp);
    st->window_closed = rp->window_done;
    struct memtrace_reader *r = rp->r;
    *meta = json_loads(memtrace_reader_meta(r), 0, NULL);
    size_t n = memtrace_reader_segment_count(r);
    for (size_t i = 0; i < n; i++) {
        const struct memtrace_segment *s = memtrace_reader_segment(r, i);
        if (s->device > *maxdev)
            *maxdev = s->device;
    }
    em_key(&x->e, "segments");
    em_open(&x->e, 0);
    for (size_t i = 0; i < n; i++) {
        const struct memtrace_segment *s = memtrace_reader_segment(r, i);
        if (s->device >= 0)
            em_segment(x, r, s);
    }
    if (n == 0)
        em_live_segments(x, rp);
    em_close(&x->e, 0);
    mt_replay_close(rp);
    return 0;
}

/* A second or later read: one device's trace, or the annotations (device < 0). */
static int pass(struct xp *x, int32_t device, struct mt_export_stats *st,
                struct memtrace_errinfo *err)
{
    struct memtrace_reader *r;
    int rc = memtrace_reader_open(&r, x->path, err);
    if (rc)
        return rc;
    struct memtrace_event ev;
    while ((rc = memtrace_reader_next(r, &ev)) == 1) {
        if (device >= 0) {
            if (ev.device == device && in_trace(ev.action)) {
                em_entry(x, r, &ev);
                st->written++;
            }
        } else if (ev.action == MEMTRACE_ANNOTATE) {
            if (ev.aux != MEMTRACE_ANNOTATE_POP)
                em_annotation(x, r, &ev, "START");
            if (ev.aux != MEMTRACE_ANNOTATE_PUSH)
                em_annotation(x, r, &ev, "END");
        }
    }
    if (rc < 0)
        rc = mt_export_reader_failed(r, x->path, rc, err);
    memtrace_reader_close(r);
    return rc < 0 ? rc : 0;
}

int mt_export_pytorch(const char *path, int pickle, FILE *out, struct mt_export_stats *st,
                      struct memtrace_errinfo *err)
{
    struct xp *x = calloc(1, sizeof(*x));
    if (!x) {
        err->code = MEMTRACE_ENOMEM;
        snprintf(err->text, sizeof(err->text), "%s: out of memory", path);
        return MEMTRACE_ENOMEM;
    }
    x->path = path;
    x->e.f = out;
    x->e.pickle = pickle;
    x->fcap = 0;
    if (pickle)
        mt_pkw_begin(&x->e.pk, out);
    em_open(&x->e, 1);
    int32_t maxdev = -1;
    uint64_t nannot = 0;
    json_t *meta = NULL;
    int rc = scan(x, &maxdev, &nannot, st, err, &meta);
    if (rc)
        goto out;
    em_key(&x->e, "device_traces");
    em_open(&x->e, 0);
    for (int32_t d = 0; d <= maxdev; d++) {
        em_open(&x->e, 0);
        if ((rc = pass(x, d, st, err)))
            goto out;
        em_close(&x->e, 0);
    }
    em_close(&x->e, 0);
    if (nannot) {
        em_key(&x->e, "external_annotations");
        em_open(&x->e, 0);
        if ((rc = pass(x, -1, st, err)))
            goto out;
        em_close(&x->e, 0);
    }
    json_t *settings = json_object_get(meta, "allocator_settings");
    if (json_is_object(settings)) {
        em_key(&x->e, "allocator_settings");
        em_json(&x->e, settings);
    }
    const char *k;
    json_t *v;
    json_t *kept = json_object_get(meta, "pytorch_snapshot");
    json_object_foreach(kept, k, v)
    {
        if (strcmp(k, "segments") == 0 || strcmp(k, "device_traces") == 0 ||
            strcmp(k, "allocator_settings") == 0 || strcmp(k, "external_annotations") == 0)
            continue;
        pre(&x->e);
        if (pickle)
            mt_pkw_str(&x->e.pk, k);
        else {
            mt_export_json_str(out, k);
            mt_export_byte(out, ':');
            x->e.after_key = 1;
        }
        em_json(&x->e, v);
    }
    em_close(&x->e, 1);
    if (pickle)
        mt_pkw_end(&x->e.pk);
    else
        mt_export_byte(out, '\n');
    if (x->e.nomem)
        rc = MEMTRACE_ENOMEM;
out:
    json_decref(meta);
    if (rc == MEMTRACE_ENOMEM && !err->code) {
        err->code = rc;
        snprintf(err->text, sizeof(err->text), "%s: out of memory", path);
    }
    free(x->e.frame_memo);
    free(x->fbuf);
    free(x);
    return rc;
}
