/* export_trace.c: timeline and profile exports over the replay model.
 *
 * perfetto: the Chrome trace event JSON that Perfetto's UI and chrome://tracing open.
 * Each device is a process ("device N"; host memory is "host"), with one counter
 * track "memory" whose series are allocated, reserved (the replay's levels) and used
 * (what the device reported in its latest counter event), sampled after every event
 * that moved one of them; each block is an async slice from its alloc to its
 * free_completed (id: its address, name: its innermost frame), cut at the last event
 * for blocks still live at the end; annotations are B/E slices on their thread (marks
 * are instants), and an oom is an instant. Times are microseconds after the file's
 * first event, with nanosecond digits.
 *
 * speedscope: speedscope's file format, two sampled profiles weighted in bytes: bytes
 * allocated in total per stack, and bytes live at the peak of allocated memory per
 * stack. Frames are the file's frame table. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "memtrace.h"
#include "replay.h"

static void ts(FILE *out, uint64_t t, uint64_t t0)
{
    uint64_t d = t >= t0 ? t - t0 : 0;
    fprintf(out, "%" PRIu64 ".%03" PRIu64, d / 1000, d % 1000);
}

static int pid_of(int32_t device)
{
    return device < 0 ? 0 : device + 1;
}

static const char *block_name(struct memtrace_reader *r, uint32_t stack, char *buf, size_t size)
{
    uint32_t f;
    if (memtrace_reader_stack(r, stack, &f, 1) > 0) {
        const char *n = mt_export_frame_name(buf, size, memtrace_reader_frame(r, f));
        if (n[0])
            return n;
    }
    return "block";
}

struct pf {
    FILE *out;
    uint64_t t0;
    int first;
    uint8_t *seen; /* devices named so far, by pid */
    size_t nseen;
    uint64_t written;
};

static void sep(struct pf *p)
{
    fputs(p->first ? "\n" : ",\n", p->out);
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
        fprintf(p->out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":"
                        "\"host\"}}");
    else
        fprintf(p->out,
                "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%zu,\"args\":{\"name\":"
                "\"device %" PRId32 "\"}}",
                pid, device);
    return 0;
}

static void slice(struct pf *p, struct memtrace_reader *r, const char *ph, const struct mt_live *b,
                  uint64_t t)
{
    char buf[64];
    sep(p);
    fprintf(p->out, "{\"ph\":\"%s\",\"cat\":\"block\",\"name\":", ph);
    mt_export_json_str(p->out, block_name(r, b->stack, buf, sizeof(buf)));
    fprintf(p->out, ",\"id\":\"0x%" PRIx64 "\",\"pid\":%d,\"tid\":0,\"ts\":", b->head.key,
            pid_of(b->device));
    ts(p->out, t, p->t0);
    if (ph[0] == 'b')
        fprintf(p->out,
                ",\"args\":{\"size\":%" PRIu64 ",\"requested_size\":%" PRIu64 ",\"stream\":%" PRIu64
                ",\"stack\":%" PRIu32 "}",
                b->size, b->requested, b->stream, b->stack);
    fputc('}', p->out);
}

static void counter(struct pf *p, const struct mt_replay *rp, int32_t device, uint64_t t)
{
    const struct mt_devlevel *d = mt_replay_device(rp, device);
    if (!d)
        return;
    sep(p);
    fprintf(p->out, "{\"ph\":\"C\",\"name\":\"memory\",\"pid\":%d,\"ts\":", pid_of(device));
    ts(p->out, t, p->t0);
    fprintf(p->out,
            ",\"args\":{\"allocated\":%" PRIu64 ",\"reserved\":%" PRIu64 ",\"used\":%" PRIu64 "}}",
            d->allocated.cur, d->reserved.cur, d->used);
}

int mt_export_perfetto(const char *path, FILE *out, struct mt_export_stats *st,
                       struct memtrace_errinfo *err)
{
    struct mt_replay *rp;
    int rc = mt_replay_open(&rp, path, NULL, err);
    if (rc)
        return rc;
    struct pf p = {out, 0, 1, NULL, 0, 0};
    fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"exporter\":\"memtrace\"},"
          "\"traceEvents\":[",
          out);
    uint64_t tlast = 0;
    while ((rc = mt_replay_next(rp)) == 1) {
        const struct memtrace_event *ev = &rp->ev;
        if (rp->events == 1)
            p.t0 = ev->time_ns;
        tlast = ev->time_ns > tlast ? ev->time_ns : tlast;
        if (name_device(&p, ev->device) != 0) {
            rc = MEMTRACE_ENOMEM;
            break;
        }
        int levels = 0;
        switch (rp->eff.kind) {
        case MT_EFF_ALLOC: {
            if (rp->eff.replaced)
                slice(&p, rp->r, "e", &rp->eff.gone, ev->time_ns);
            const struct mt_live *b = mt_addrtab_find(&rp->blocks, ev->addr);
            if (b)
                slice(&p, rp->r, "b", b, ev->time_ns);
            levels = 1;
            break;
        }
        case MT_EFF_FREE:
            slice(&p, rp->r, "e", &rp->eff.gone, ev->time_ns);
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
            const char *ph = ev->aux == MEMTRACE_ANNOTATE_PUSH  ? "B"
                             : ev->aux == MEMTRACE_ANNOTATE_POP ? "E"
                                                                : "i";
            sep(&p);
            fprintf(out, "{\"ph\":\"%s\",\"cat\":\"annotation\",\"name\":", ph);
            mt_export_json_str(out, memtrace_reader_string(rp->r, ev->category));
            fprintf(out, ",\"pid\":%d,\"tid\":%" PRIu32 ",\"ts\":", pid_of(ev->device), ev->tid);
            ts(out, ev->time_ns, p.t0);
            fputs(ph[0] == 'i' ? ",\"s\":\"t\"}" : "}", out);
        } else if (ev->action == MEMTRACE_OOM) {
            sep(&p);
            fprintf(out,
                    "{\"ph\":\"i\",\"cat\":\"oom\",\"name\":\"oom\",\"s\":\"p\",\"pid\":%d,"
                    "\"tid\":%" PRIu32 ",\"ts\":",
                    pid_of(ev->device), ev->tid);
            ts(out, ev->time_ns, p.t0);
            fprintf(out, ",\"args\":{\"size\":%" PRIu64 ",\"device_free\":%" PRIu64 "}}", ev->size,
                    ev->aux);
        }
    }
    st->events = rp->events;
    if (rc < 0) {
        rc = mt_export_reader_failed(rp->r, path, rc, err);
        goto out;
    }
    st->truncated = mt_replay_truncated(rp);
    for (size_t i = 0; i < rp->blocks.cap; i++) {
        const struct mt_live *b = mt_addrtab_at(&rp->blocks, i);
        if (b)
            slice(&p, rp->r, "e", b, tlast);
    }
    fputs("\n]}\n", out);
    st->written = p.written;
    rc = 0;
out:
    free(p.seen);
    mt_replay_close(rp);
    return rc;
}

static void profile(FILE *out, struct mt_replay *rp, const char *name, int at_peak,
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
            int depth = memtrace_reader_stack(rp->r, (uint32_t)s, *fbuf, *fcap);
            if (depth > *fcap) {
                uint32_t *f = realloc(*fbuf, (size_t)depth * sizeof(*f));
                if (f) {
                    *fbuf = f;
                    *fcap = depth;
                }
                depth = memtrace_reader_stack(rp->r, (uint32_t)s, *fbuf, *fcap);
            }
            fputc('[', out);
            if (depth == 0)
                fprintf(out, "%" PRIu32, nframes); /* the "[no stack]" frame */
            for (int k = depth - 1; k >= 0; k--)
                fprintf(out, "%" PRIu32 "%s", (*fbuf)[k] - 1, k ? "," : "");
            fputc(']', out);
        }
    }
    fputs("]}", out);
}

int mt_export_speedscope(const char *path, FILE *out, struct mt_export_stats *st,
                         struct memtrace_errinfo *err)
{
    struct mt_replay *rp;
    int rc = mt_replay_open(&rp, path, NULL, err);
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
    profile(out, rp, "bytes allocated", 0, nframes, &fbuf, &fcap);
    fputc(',', out);
    profile(out, rp, "bytes live at the peak", 1, nframes, &fbuf, &fcap);
    fputs("]}\n", out);
    free(fbuf);
    st->written = 2;
    mt_replay_close(rp);
    return 0;
}
