/* export.c: the export dispatcher, what the exporters share, and the two line
 * formats: folded stacks and CSV.
 *
 * Folded stacks are flamegraph.pl's input: one line per stack, its frames outermost
 * first joined by ';', a space, and the stack's cost (bytes allocated in total, from
 * the replay's per-stack tallies). Frame names lose ';' and line breaks (each becomes
 * ':' or ' ') since those separate frames and lines. CSV is one line per event in
 * file order, with a header line, as RFC 4180 (strings quoted when they hold a comma,
 * a quote or a line break). */
#include "config.h"

#include "export.h"
#include "export_out.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "frames.h"
#include "memtrace.h"
#include "replay.h"

static const char *const format_names[MT_EXPORT_COUNT] = {
    "pytorch-pickle", "pytorch-json", "perfetto", "speedscope", "folded", "csv",
};

int mt_export_format_from_name(const char *name)
{
    for (int k = 0; k < MT_EXPORT_COUNT; k++)
        if (strcmp(name, format_names[k]) == 0)
            return k;
    return -1;
}

const char *mt_export_format_name(int format)
{
    return format >= 0 && format < MT_EXPORT_COUNT ? format_names[format] : NULL;
}

const char *mt_export_frame_name(char *buf, size_t size, const struct memtrace_frame *fr)
{
    if (!fr)
        return "";
    if (fr->symbol[0])
        return fr->symbol;
    if (fr->module[0])
        snprintf(buf, size, "%s+0x%" PRIx64, fr->module, fr->offset);
    else if (fr->ip)
        snprintf(buf, size, "0x%" PRIx64, fr->ip);
    else
        return "";
    return buf;
}

const char *mt_export_frame_file(const struct memtrace_frame *fr)
{
    if (!fr)
        return "";
    return fr->file[0] ? fr->file : fr->module;
}

void mt_export_json_str(FILE *out, const char *s)
{
    mt_export_byte(out, '"');
    for (const unsigned char *p = (const unsigned char *)s;;) {
        /* the run of bytes that need no escape goes out in one write */
        const unsigned char *q = p;
        while (*q >= 0x20 && *q != '"' && *q != '\\')
            q++;
        if (q > p)
            fwrite(p, 1, (size_t)(q - p), out);
        if (!*q)
            break;
        switch (*q) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\r':
            fputs("\\r", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        default:
            fprintf(out, "\\u%04x", *q);
        }
        p = q + 1;
    }
    mt_export_byte(out, '"');
}

int mt_export_reader_failed(struct memtrace_reader *r, const char *path, int rc,
                            struct memtrace_errinfo *err)
{
    const struct memtrace_errinfo *re = r ? memtrace_reader_error(r) : NULL;
    if (re && re->code) {
        *err = *re;
        return re->code;
    }
    err->code = rc;
    snprintf(err->text, sizeof(err->text), "%s: %s", path, memtrace_strerror(rc));
    return rc;
}

void mt_export_wallclock(struct memtrace_reader *r, struct mt_wallclock *c)
{
    memset(c, 0, sizeof(*c));
    json_t *meta = json_loads(memtrace_reader_meta(r), 0, NULL);
    json_t *w = json_object_get(meta, "start_time_ns");
    json_t *m = json_object_get(meta, "start_monotonic_ns");
    if (json_is_integer(w) && json_integer_value(w) > 0) {
        c->have = 1;
        c->wall0 = (uint64_t)json_integer_value(w);
        c->mono0 = json_is_integer(m) ? (uint64_t)json_integer_value(m) : 0;
    }
    json_decref(meta);
}

static int out_failed(FILE *out, const char *path, struct memtrace_errinfo *err)
{
    if (fflush(out) == 0 && !ferror(out))
        return 0;
    err->code = MEMTRACE_EIO;
    snprintf(err->text, sizeof(err->text), "cannot write the export of %s: %s", path,
             strerror(errno));
    return MEMTRACE_EIO;
}

/* A frame name fit for a folded line. */
static void folded_frame(FILE *out, const char *s)
{
    for (; *s; s++)
        mt_export_byte(out, *s == ';' ? ':' : (*s == '\n' || *s == '\r') ? ' ' : *s);
}

static int export_folded(const char *path, unsigned flags, const struct mt_filter *f, FILE *out,
                         struct mt_export_stats *st, struct memtrace_errinfo *err)
{
    struct mt_replay *rp;
    int rc = mt_replay_open(&rp, path, f, err);
    if (rc)
        return rc;
    rc = mt_replay_run(rp);
    st->events = rp->events;
    st->truncated = mt_replay_truncated(rp);
    st->window_missed = mt_replay_window_missed(rp);
    st->window_closed = rp->window_done;
    if (rc) {
        rc = mt_export_reader_failed(rp->r, path, rc, err);
        mt_replay_close(rp);
        return rc;
    }
    uint32_t *frames = NULL;
    int cap = 0, nomem = 0;
    for (size_t s = 0; s < rp->block_stacks.n; s++) {
        const struct mt_tally *t = &rp->block_stacks.t[s];
        if (t->alloc_bytes == 0)
            continue;
        int depth = mt_export_stack(rp->r, (uint32_t)s, flags, &frames, &cap);
        if (depth < 0) {
            nomem = 1;
            break;
        }
        if (depth == 0)
            fputs("[no stack]", out);
        for (int k = depth - 1; k >= 0; k--) {
            char buf[64];
            const char *name =
                mt_export_frame_name(buf, sizeof(buf), memtrace_reader_frame(rp->r, frames[k]));
            folded_frame(out, name[0] ? name : "[unknown]");
            if (k)
                mt_export_byte(out, ';');
        }
        fprintf(out, " %" PRIu64 "\n", t->alloc_bytes);
        st->written++;
    }
    free(frames);
    mt_replay_close(rp);
    if (nomem) {
        err->code = MEMTRACE_ENOMEM;
        snprintf(err->text, sizeof(err->text), "%s: out of memory", path);
        return MEMTRACE_ENOMEM;
    }
    return out_failed(out, path, err);
}

int mt_export_stack(const struct memtrace_reader *r, uint32_t stack, unsigned flags, uint32_t **buf,
                    int *cap)
{
    int depth = mt_stack_frames(r, stack, buf, cap);
    if (depth < 0)
        return -1;
    return flags & MT_EXPORT_ALL_FRAMES ? depth : mt_stack_shown(r, *buf, depth, NULL);
}

static void csv_str(struct mt_out *o, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        mt_out_mem(o, s, strlen(s));
        return;
    }
    mt_out_char(o, '"');
    for (; *s; s++) {
        if (*s == '"')
            mt_out_char(o, '"');
        mt_out_char(o, *s);
    }
    mt_out_char(o, '"');
}

/* Whether the event just replayed goes in a filtered CSV: inside the window; an
 * event of a block or segment when its allocation counts under the filter (none
 * when nothing was live at its address); any other on the filter's device, if it
 * has one. */
static int csv_keeps(const struct mt_replay *rp)
{
    if (!rp->in_window)
        return 0;
    const struct memtrace_event *ev = rp->ev;
    const struct mt_live *e;
    switch (rp->eff.kind) {
    case MT_EFF_ALLOC:
    case MT_EFF_PENDING:
        e = mt_addrtab_find(&rp->blocks, ev->addr);
        return e && e->counted;
    case MT_EFF_SEG_ADD:
        e = mt_addrtab_find(&rp->segs, ev->addr);
        return e && e->counted;
    case MT_EFF_FREE:
    case MT_EFF_SEG_REMOVE:
        return rp->eff.gone.counted;
    default:
        break;
    }
    switch (ev->action) {
    case MEMTRACE_ALLOC:
    case MEMTRACE_FREE_REQUESTED:
    case MEMTRACE_FREE_COMPLETED:
    case MEMTRACE_SEGMENT_ALLOC:
    case MEMTRACE_SEGMENT_FREE:
    case MEMTRACE_SEGMENT_MAP:
    case MEMTRACE_SEGMENT_UNMAP:
        return 0;
    default:
        return !rp->filter.has_device || ev->device == rp->filter.device;
    }
}

/* Hundreds of bytes an event for millions of events: through the hand-formatted
 * buffers of export_out.h, as the Perfetto export, not fprintf. */
static int export_csv(const char *path, const struct mt_filter *f, FILE *out,
                      struct mt_export_stats *st, struct memtrace_errinfo *err)
{
    struct mt_replay *rp;
    int rc = mt_replay_open(&rp, path, f, err);
    if (rc)
        return rc;
    struct mt_out o;
    if (mt_out_open(&o, out) != 0) {
        mt_replay_close(rp);
        err->code = MEMTRACE_ENOMEM;
        snprintf(err->text, sizeof(err->text), "out of memory");
        return MEMTRACE_ENOMEM;
    }
    mt_out_lit(&o, "index,time_ns,action,device,stream,addr,size,requested_size,pool,tid,stack,"
                   "category,source,aux\n");
    while ((rc = mt_replay_next(rp)) == 1) {
        const struct memtrace_event *ev = rp->ev;
        if (f && !csv_keeps(rp))
            continue;
        mt_out_u64(&o, rp->index);
        mt_out_char(&o, ',');
        mt_out_u64(&o, ev->time_ns);
        mt_out_char(&o, ',');
        const char *a = memtrace_action_name(ev->action);
        if (a)
            mt_out_mem(&o, a, strlen(a));
        else
            mt_out_u64(&o, ev->action);
        mt_out_char(&o, ',');
        mt_out_i64(&o, ev->device);
        mt_out_char(&o, ',');
        mt_out_u64(&o, ev->stream);
        mt_out_lit(&o, ",0x");
        mt_out_hex(&o, ev->addr);
        mt_out_char(&o, ',');
        mt_out_u64(&o, ev->size);
        mt_out_char(&o, ',');
        mt_out_u64(&o, ev->requested_size);
        mt_out_char(&o, ',');
        mt_out_i64(&o, ev->pool);
        mt_out_char(&o, ',');
        mt_out_u64(&o, ev->tid);
        mt_out_char(&o, ',');
        mt_out_u64(&o, ev->stack);
        mt_out_char(&o, ',');
        csv_str(&o, memtrace_reader_string(rp->r, ev->category));
        mt_out_char(&o, ',');
        csv_str(&o, memtrace_reader_string(rp->r, ev->source));
        mt_out_char(&o, ',');
        mt_out_u64(&o, ev->aux);
        mt_out_char(&o, '\n');
        st->written++;
    }
    mt_out_close(&o);
    st->events = rp->events;
    if (rc < 0) {
        rc = mt_export_reader_failed(rp->r, path, rc, err);
        mt_replay_close(rp);
        return rc;
    }
    st->truncated = mt_replay_truncated(rp);
    st->window_missed = mt_replay_window_missed(rp);
    st->window_closed = rp->window_done;
    mt_replay_close(rp);
    return out_failed(out, path, err);
}

int mt_export(const char *path, int format, unsigned flags, const struct mt_filter *f, FILE *out,
              struct mt_export_stats *st, struct memtrace_errinfo *err)
{
    struct mt_export_stats s0;
    struct memtrace_errinfo e0;
    if (!st)
        st = &s0;
    if (!err)
        err = &e0;
    memset(st, 0, sizeof(*st));
    memset(err, 0, sizeof(*err));
    int rc;
    switch (format) {
    case MT_EXPORT_PYTORCH_PICKLE:
    case MT_EXPORT_PYTORCH_JSON:
        if (f) {
            err->code = rc = MEMTRACE_EINVAL;
            snprintf(err->text, sizeof(err->text),
                     "a PyTorch snapshot is exported whole: no filter or window");
            break;
        }
        rc = mt_export_pytorch(path, format == MT_EXPORT_PYTORCH_PICKLE, out, st, err);
        break;
    case MT_EXPORT_PERFETTO:
        rc = mt_export_perfetto(path, f, out, st, err);
        break;
    case MT_EXPORT_SPEEDSCOPE:
        rc = mt_export_speedscope(path, flags, f, out, st, err);
        break;
    case MT_EXPORT_FOLDED:
        rc = export_folded(path, flags, f, out, st, err);
        break;
    case MT_EXPORT_CSV:
        rc = export_csv(path, f, out, st, err);
        break;
    default:
        err->code = rc = MEMTRACE_EINVAL;
        snprintf(err->text, sizeof(err->text), "unknown export format %d", format);
    }
    if (rc == 0)
        rc = out_failed(out, path, err);
    return rc;
}
