/* export_trace.c: timeline and profile exports over the replay model.
 *
 * perfetto: the Chrome trace event JSON that Perfetto's UI and chrome://tracing open.
 * Each device is a process ("device N"; host memory is "host"), with one counter
 * track "memory" whose series are allocated, reserved (the replay's levels) and used
 * (what the device reported in its latest counter event), sampled after every event
 * that moved one of them; each block is an async slice from its alloc to its
 * free_completed (id: its address, name: its stack's innermost Python frame, else its
 * innermost frame shown, see frames.h), cut at the last event
 * for blocks still live at the end; annotations are B/E slices on their thread (marks
 * are instants), and an oom is an instant. Times are microseconds after the file's
 * first event, with nanosecond digits.
 *
 * speedscope: speedscope's file format, two sampled profiles weighted in bytes: bytes
 * allocated in total per stack, and bytes live at the peak of allocated memory per
 * stack. Frames are the file's frame table; a stack lists those shown (frames.h), or all
 * of them with MT_EXPORT_ALL_FRAMES. */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "export_out.h"
#include "frames.h"
#include "memtrace.h"
#include "replay.h"

/* Microseconds after t0, with nanosecond digits. */
static void ts(struct mt_out *o, uint64_t t, uint64_t t0)
{
    uint64_t d = t >= t0 ? t - t0 : 0;
    mt_out_u64(o, d / 1000);
    unsigned ns = (unsigned)(d % 1000);
    char f[4] = {'.', (char)('0' + ns / 100), mt_out_digits2[2 * (ns % 100)],
                 mt_out_digits2[2 * (ns % 100) + 1]};
    mt_out_mem(o, f, 4);
}

static int pid_of(int32_t device)
{
    return device < 0 ? 0 : device + 1;
}

struct pf {
    struct mt_out o;
    uint64_t t0;
    int first;
    uint8_t *seen; /* devices named so far, by pid */
    size_t nseen;
    uint64_t written;
    char **names; /* block slices' names by stack id, made at first use */
    size_t nnames;
};

/* The name of a block slice of stack: its stack's naming frame (frames.h), a Python
 * frame as "function (file.py:line)"; "block" without one, or out of memory. */
static const char *block_name(struct pf *p, struct memtrace_reader *r, uint32_t stack)
{
    if (stack >= p->nnames) {
        size_t n = p->nnames ? p->nnames : 256;
        while (n <= stack)
            n *= 2;
        char **names = realloc(p->names, n * sizeof(*names));
        if (!names)
            return "block";
        memset(names + p->nnames, 0, (n - p->nnames) * sizeof(*names));
        p->names = names;
        p->nnames = n;
    }
    if (p->names[stack])
        return p->names[stack];
    const struct memtrace_frame *fr = memtrace_reader_frame(r, mt_stack_name_frame(r, stack));
    char buf[1024], sym[64];
    const char *name = mt_export_frame_name(sym, sizeof(sym), fr);
    if (mt_frame_is_python(fr)) {
        const char *base = strrchr(fr->file, '/');
        snprintf(buf, sizeof(buf), "%s (%s:%u)", name[0] ? name : "?", base ? base + 1 : fr->file,
                 (unsigned)fr->line);
        name = buf;
    }
    p->names[stack] = strdup(name[0] ? name : "block");
    return p->names[stack] ? p->names[stack] : "block";
}

static void sep(struct pf *p)
{
    if (p->first)
        mt_out_char(&p->o, '\n');
    else
        mt_out_lit(&p->o, ",\n");
    p->first = 0;
    p->written++;
}

static int name_device(struct pf *p, int32_t device)
{
    size_t pid = (size_t)pid_of(device);
    if (pid < p->nseen && p->seen[pid])
        return 0;
    if (pid >= p->nseen) {
        size_t n = p->nseen ? p->nseen : 16;
        while (n <= pid)
            n *= 2;
        uint8_t *s = realloc(p->seen, n);
        if (!s)
            return -1;
        memset(s + p->nseen, 0, n - p->nseen);
        p->seen = s;
        p->nseen = n;
    }
    p->seen[pid] = 1;
    sep(p);
    if (device < 0)
        mt_out_lit(&p->o, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":"
                          "\"host\"}}");
    else {
        mt_out_lit(&p->o, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":");
        mt_out_u64(&p->o, pid);
        mt_out_lit(&p->o, ",\"args\":{\"name\":\"device ");
        mt_out_i64(&p->o, device);
        mt_out_lit(&p->o, "\"}}");
    }
    return 0;
}

static void slice(struct pf *p, struct memtrace_reader *r, char ph, const struct mt_live *b,
                  uint64_t t)
{
    struct mt_out *o = &p->o;
    sep(p);
    mt_out_lit(o, "{\"ph\":\"");
    mt_out_char(o, ph);
    mt_out_lit(o, "\",\"cat\":\"block\",\"name\":");
    mt_out_json_str(o, block_name(p, r, b->stack));
    mt_out_lit(o, ",\"id\":\"0x");
    mt_out_hex(o, b->head.key);
    mt_out_lit(o, "\",\"pid\":");
    mt_out_i64(o, pid_of(b->device));
    mt_out_lit(o, ",\"tid\":0,\"ts\":");
    ts(o, t, p->t0);
    if (ph == 'b') {
        mt_out_lit(o, ",\"args\":{\"size\":");
        mt_out_u64(o, b->size);
        mt_out_lit(o, ",\"requested_size\":");
        mt_out_u64(o, b->requested);
        mt_out_lit(o, ",\"stream\":");
        mt_out_u64(o, b->stream);
        mt_out_lit(o, ",\"stack\":");
        mt_out_u64(o, b->stack);
        mt_out_char(o, '}');
    }
    mt_out_char(o, '}');
}

static void counter(struct pf *p, const struct mt_replay *rp, int32_t device, uint64_t t)
{
    const struct mt_devlevel *d = mt_replay_device(rp, device);
    struct mt_out *o = &p->o;
    if (!d)
        return;
    sep(p);
    mt_out_lit(o, "{\"ph\":\"C\",\"name\":\"memory\",\"pid\":");
    mt_out_i64(o, pid_of(device));
    mt_out_lit(o, ",\"ts\":");
    ts(o, t, p->t0);
    mt_out_lit(o, ",\"args\":{\"allocated\":");
    mt_out_u64(o, d->allocated.cur);
    mt_out_lit(o, ",\"reserved\":");
    mt_out_u64(o, d->reserved.cur);
    mt_out_lit(o, ",\"used\":");
    mt_out_u64(o, d->used);
    mt_out_lit(o, "}}");
}

/* Begins ('b') or ends ('e') at time t the slices of the counted live blocks but
 * the one at skip (when has_skip), in address order: the table's own order changes
 * with its random key, and the same export must give the same file. Returns how many,
 * or -1 out of memory. */
static long live_slices(struct pf *p, struct mt_replay *rp, char ph, uint64_t t, int has_skip,
                        uint64_t skip)
{
    void **live;
    size_t n;
    long made = 0;
    if (mt_addrtab_sorted(&rp->blocks, &live, &n) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const struct mt_live *b = live[i];
        if (b->counted && !(has_skip && b->head.key == skip) && name_device(p, b->device) == 0) {
            slice(p, rp->r, ph, b, t);
            made++;
        }
    }
    free(live);
    return made;
}

/* At the first event inside the window (the first event when there is none): the
 * slices of the blocks live before it begin there, those of the state before the
 * first event (docs/REPLAY.md, rule 0) and those made before --from; a block this
 * event frees or replaces was live before it too. Blocks the filter leaves out get
 * no slice. 0, or -1 out of memory. */
static int open_window(struct pf *p, struct mt_replay *rp)
{
    const struct memtrace_event *ev = rp->ev;
    int made = rp->eff.kind == MT_EFF_ALLOC;
    long begun = live_slices(p, rp, 'b', ev->time_ns, made, ev->addr);
    if (begun < 0)
        return -1;
    const struct mt_live *g = &rp->eff.gone;
    if ((rp->eff.kind == MT_EFF_FREE || (made && rp->eff.replaced)) && g->counted &&
        name_device(p, g->device) == 0) {
        slice(p, rp->r, 'b', g, ev->time_ns);
        begun++;
    }
    /* the levels where the window starts, unless it starts with the file and nothing
     * was live before (a state before the first event is what was) */
    if (begun || rp->index > 0 || memtrace_reader_segment_count(rp->r) > 0)
        for (size_t k = 0; k < rp->ndev; k++)
            if (name_device(p, rp->dev[k].device) == 0)
                counter(p, rp, rp->dev[k].device, ev->time_ns);
    return 0;
}

int mt_export_perfetto(const char *path, const struct mt_filter *f, FILE *out,
                       struct mt_export_stats *st, struct memtrace_errinfo *err)
{
    struct mt_replay *rp;
    int rc = mt_replay_open(&rp, path, f, err);
    if (rc)
        return rc;
    struct pf p;
    memset(&p, 0, sizeof(p));
    p.first = 1;
    struct mt_out *o = &p.o;
    if (mt_out_open(o, out) != 0) {
        mt_replay_close(rp);
        err->code = MEMTRACE_ENOMEM;
        snprintf(err->text, sizeof(err->text), "out of memory");
        return MEMTRACE_ENOMEM;
    }
    mt_out_lit(o, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"exporter\":\"memtrace\"},"
                  "\"traceEvents\":[");
    uint64_t tlast = 0;
    int opened = 0;
    while ((rc = mt_replay_next(rp)) == 1) {
        const struct memtrace_event *ev = rp->ev;
        if (rp->events == 1)
            p.t0 = ev->time_ns;
        if (!rp->in_window)
            continue;
        tlast = ev->time_ns > tlast ? ev->time_ns : tlast;
        if (name_device(&p, ev->device) != 0) {
            rc = MEMTRACE_ENOMEM;
            break;
        }
        if (!opened) {
            if (open_window(&p, rp) != 0) {
                rc = MEMTRACE_ENOMEM;
                break;
            }
            opened = 1;
        }
        int levels = 0;
        switch (rp->eff.kind) {
        case MT_EFF_ALLOC: {
            if (rp->eff.replaced && rp->eff.gone.counted)
                slice(&p, rp->r, 'e', &rp->eff.gone, ev->time_ns);
            const struct mt_live *b = mt_addrtab_find(&rp->blocks, ev->addr);
            if (b && b->counted)
                slice(&p, rp->r, 'b', b, ev->time_ns);
            levels = 1;
            break;
        }
        case MT_EFF_FREE:
            if (rp->eff.gone.counted)
                slice(&p, rp->r, 'e', &rp->eff.gone, ev->time_ns);
            levels = 1;
            break;
        case MT_EFF_SEG_ADD:
        case MT_EFF_SEG_REMOVE:
            levels = 1;
            break;
        default:
            break;
        }
        if (ev->action == MEMTRACE_COUNTER)
            levels = 1;
        if (levels)
            counter(&p, rp, ev->device, ev->time_ns);
        if (ev->action == MEMTRACE_ANNOTATE) {
            char ph = ev->aux == MEMTRACE_ANNOTATE_PUSH  ? 'B'
                      : ev->aux == MEMTRACE_ANNOTATE_POP ? 'E'
                                                         : 'i';
            sep(&p);
            mt_out_lit(o, "{\"ph\":\"");
            mt_out_char(o, ph);
            mt_out_lit(o, "\",\"cat\":\"annotation\",\"name\":");
            mt_out_json_str(o, memtrace_reader_string(rp->r, ev->category));
            mt_out_lit(o, ",\"pid\":");
            mt_out_i64(o, pid_of(ev->device));
            mt_out_lit(o, ",\"tid\":");
            mt_out_u64(o, ev->tid);
            mt_out_lit(o, ",\"ts\":");
            ts(o, ev->time_ns, p.t0);
            if (ph == 'i')
                mt_out_lit(o, ",\"s\":\"t\"}");
            else
                mt_out_char(o, '}');
        } else if (ev->action == MEMTRACE_OOM) {
            sep(&p);
            mt_out_lit(o, "{\"ph\":\"i\",\"cat\":\"oom\",\"name\":\"oom\",\"s\":\"p\",\"pid\":");
            mt_out_i64(o, pid_of(ev->device));
            mt_out_lit(o, ",\"tid\":");
            mt_out_u64(o, ev->tid);
            mt_out_lit(o, ",\"ts\":");
            ts(o, ev->time_ns, p.t0);
            mt_out_lit(o, ",\"args\":{\"size\":");
            mt_out_u64(o, ev->size);
            mt_out_lit(o, ",\"device_free\":");
            mt_out_u64(o, ev->aux);
            mt_out_lit(o, "}}");
        }
    }
    st->events = rp->events;
    if (rc < 0) {
        rc = mt_export_reader_failed(rp->r, path, rc, err);
        goto out;
    }
    st->truncated = mt_replay_truncated(rp);
    st->window_missed = mt_replay_window_missed(rp);
    st->window_closed = rp->window_done;
    if (opened && live_slices(&p, rp, 'e', tlast, 0, 0) < 0) {
        err->code = rc = MEMTRACE_ENOMEM;
        snprintf(err->text, sizeof(err->text), "%s: out of memory", path);
        goto out;
    }
    mt_out_lit(o, "\n]}\n");
    st->written = p.written;
    rc = 0;
out:
    mt_out_close(o);
    free(p.seen);
    for (size_t k = 0; k < p.nnames; k++)
        free(p.names[k]);
    free(p.names);
    mt_replay_close(rp);
    return rc;
}

/* One sampled profile; 0, or -1 when out of memory. */
static int profile(FILE *out, struct mt_replay *rp, const char *name, int at_peak, unsigned flags,
                   uint32_t nframes, uint32_t **fbuf, int *fcap)
{
    uint64_t total = 0;
    for (size_t s = 0; s < rp->block_stacks.n; s++) {
        uint64_t bytes = rp->block_stacks.t[s].alloc_bytes, count;
        if (at_peak)
            mt_tally_at_peak(&rp->block_stacks, &rp->allocated, (uint32_t)s, &bytes, &count);
        total += bytes;
    }
    fputs("{\"type\":\"sampled\",\"name\":", out);
    mt_export_json_str(out, name);
    fprintf(out, ",\"unit\":\"bytes\",\"startValue\":0,\"endValue\":%" PRIu64 ",\"samples\":[",
            total);
    int first = 1;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            fputs("],\"weights\":[", out);
        first = 1;
        for (size_t s = 0; s < rp->block_stacks.n; s++) {
            uint64_t bytes = rp->block_stacks.t[s].alloc_bytes, count;
            if (at_peak)
                mt_tally_at_peak(&rp->block_stacks, &rp->allocated, (uint32_t)s, &bytes, &count);
            if (!bytes)
                continue;
            fputs(first ? "" : ",", out);
            first = 0;
            if (pass == 1) {
                fprintf(out, "%" PRIu64, bytes);
                continue;
            }
            int depth = mt_export_stack(rp->r, (uint32_t)s, flags, fbuf, fcap);
            if (depth < 0)
                return -1;
            fputc('[', out);
            if (depth == 0)
                fprintf(out, "%" PRIu32, nframes); /* the "[no stack]" frame */
            for (int k = depth - 1; k >= 0; k--)
                fprintf(out, "%" PRIu32 "%s", (*fbuf)[k] - 1, k ? "," : "");
            fputc(']', out);
        }
    }
    fputs("]}", out);
    return 0;
}

int mt_export_speedscope(const char *path, unsigned flags, const struct mt_filter *f, FILE *out,
                         struct mt_export_stats *st, struct memtrace_errinfo *err)
{
    struct mt_replay *rp;
    int rc = mt_replay_open(&rp, path, f, err);
    if (rc)
        return rc;
    rc = mt_replay_run(rp);
    st->events = rp->events;
    if (rc) {
        rc = mt_export_reader_failed(rp->r, path, rc, err);
        mt_replay_close(rp);
        return rc;
    }
    st->truncated = mt_replay_truncated(rp);
    st->window_missed = mt_replay_window_missed(rp);
    st->window_closed = rp->window_done;
    uint32_t nframes = memtrace_reader_frame_count(rp->r);
    fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"name\":", out);
    mt_export_json_str(out, path);
    fputs(",\"exporter\":\"memtrace\",\"activeProfileIndex\":0,\"shared\":{\"frames\":[", out);
    for (uint32_t id = 1; id <= nframes; id++) {
        const struct memtrace_frame *fr = memtrace_reader_frame(rp->r, id);
        char buf[64];
        const char *name = mt_export_frame_name(buf, sizeof(buf), fr);
        fputs(id > 1 ? ",{\"name\":" : "{\"name\":", out);
        mt_export_json_str(out, name[0] ? name : "[unknown]");
        const char *file = mt_export_frame_file(fr);
        if (file[0]) {
            fputs(",\"file\":", out);
            mt_export_json_str(out, file);
        }
        if (fr && fr->line)
            fprintf(out, ",\"line\":%" PRIu32, fr->line);
        fputc('}', out);
    }
    fputs(nframes ? ",{\"name\":\"[no stack]\"}]},\"profiles\":["
                  : "{\"name\":\"[no stack]\"}]},"
                    "\"profiles\":[",
          out);
    uint32_t *fbuf = NULL;
    int fcap = 0;
    rc = profile(out, rp, "bytes allocated", 0, flags, nframes, &fbuf, &fcap);
    if (rc == 0) {
        fputc(',', out);
        rc = profile(out, rp, "bytes live at the peak", 1, flags, nframes, &fbuf, &fcap);
    }
    fputs("]}\n", out);
    free(fbuf);
    mt_replay_close(rp);
    if (rc) {
        err->code = MEMTRACE_ENOMEM;
        snprintf(err->text, sizeof(err->text), "%s: out of memory", path);
        return MEMTRACE_ENOMEM;
    }
    st->written = 2;
    return 0;
}
