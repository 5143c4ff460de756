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
#include "frames.h"
#include "memtrace.h"
#include "replay.h"

/* The perfetto output goes through buffers of its own, with integers formatted by
 * hand: it is gigabytes of small numbers, where printf's parsing of its format and
 * stdio's locking and small copies were most of the time. Each full buffer is
 * handed to a second thread that fwrites it (stdio passes it to write(2) without a
 * copy), so that the kernel's copy into the page cache, as long as the rest of the
 * export, overlaps the next buffer's replay and formatting. Without a thread, the
 * buffer is written in place. Sixteen buffers of 64 KiB, not four of 1 MiB: the
 * kernel took more than twice as long over the same 2.3 GB in 1 MiB writes (sys
 * 3.2-3.6 s against 0.8-0.9 s, BENCHMARKS.md), and a plain loop of write(2)s showed
 * the same. */
#define OB_SIZE ((size_t)1 << 16)
#define OB_NBUF 16

struct obuf {
    FILE *out;
    char *buf; /* the one being filled: bufs[fill] */
    size_t len;
    char *bufs[OB_NBUF];
    size_t lens[OB_NBUF]; /* bytes to write, 0 when free */
    unsigned fill, next;  /* next: the one the thread writes next */
    int threaded, ending;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

static void *ob_writer(void *arg)
{
    struct obuf *o = arg;
    pthread_mutex_lock(&o->lock);
    for (;;) {
        while (!o->lens[o->next] && !o->ending)
            pthread_cond_wait(&o->cond, &o->lock);
        size_t n = o->lens[o->next];
        if (!n)
            break;
        char *b = o->bufs[o->next];
        pthread_mutex_unlock(&o->lock);
        fwrite(b, 1, n, o->out); /* errors stick to out: out_failed() */
        pthread_mutex_lock(&o->lock);
        o->lens[o->next] = 0;
        o->next = (o->next + 1) % OB_NBUF;
        pthread_cond_broadcast(&o->cond);
    }
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

/* 0, or -1 out of memory. */
static int ob_open(struct obuf *o, FILE *out)
{
    memset(o, 0, sizeof(*o));
    o->out = out;
    int n = 0;
    while (n < OB_NBUF && (o->bufs[n] = malloc(OB_SIZE)) != NULL)
        n++;
    if (n < OB_NBUF) {
        while (n > 0)
            free(o->bufs[--n]);
        return -1;
    }
    o->buf = o->bufs[0];
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->cond, NULL);
    o->threaded = pthread_create(&o->thread, NULL, ob_writer, o) == 0;
    return 0;
}

static void ob_flush(struct obuf *o)
{
    if (!o->len)
        return;
    if (!o->threaded) {
        fwrite(o->buf, 1, o->len, o->out);
        o->len = 0;
        return;
    }
    pthread_mutex_lock(&o->lock);
    o->lens[o->fill] = o->len;
    o->fill = (o->fill + 1) % OB_NBUF;
    pthread_cond_broadcast(&o->cond);
    while (o->lens[o->fill])
        pthread_cond_wait(&o->cond, &o->lock);
    pthread_mutex_unlock(&o->lock);
    o->buf = o->bufs[o->fill];
    o->len = 0;
}

/* Writes what is left, ends the thread, frees the buffers. */
static void ob_close(struct obuf *o)
{
    ob_flush(o);
    if (o->threaded) {
        pthread_mutex_lock(&o->lock);
        o->ending = 1;
        pthread_cond_broadcast(&o->cond);
        pthread_mutex_unlock(&o->lock);
        pthread_join(o->thread, NULL);
    }
    pthread_cond_destroy(&o->cond);
    pthread_mutex_destroy(&o->lock);
    for (int k = 0; k < OB_NBUF; k++)
        free(o->bufs[k]);
}

static void ob_mem_slow(struct obuf *o, const char *s, size_t n)
{
    while (n) {
        if (o->len == OB_SIZE)
            ob_flush(o);
        size_t k = OB_SIZE - o->len < n ? OB_SIZE - o->len : n;
        memcpy(o->buf + o->len, s, k);
        o->len += k;
        s += k;
        n -= k;
    }
}

/* Inline, so that the copy of a literal, whose length is known, is a few moves. */
static inline void ob_mem(struct obuf *o, const char *s, size_t n)
{
    if (OB_SIZE - o->len < n) {
        ob_mem_slow(o, s, n);
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

/* Room for n more bytes (n at most OB_SIZE). */
static inline char *ob_room(struct obuf *o, size_t n)
{
    if (OB_SIZE - o->len < n)
        ob_flush(o);
    return o->buf + o->len;
}

#define ob_lit(o, lit) ob_mem((o), lit, sizeof(lit) - 1)

static inline void ob_char(struct obuf *o, char c)
{
    if (o->len == OB_SIZE)
        ob_flush(o);
    o->buf[o->len++] = c;
}

static const char digits2[] = "00010203040506070809101112131415161718192021222324252627282930313233"
                              "34353637383940414243444546474849505152535455565758596061626364656667"
                              "6869707172737475767778798081828384858687888990919293949596979899";

static inline unsigned ndigits(uint64_t v)
{
    unsigned n = 1;
    while (v >= 10000) {
        v /= 10000;
        n += 4;
    }
    return n + (v >= 10) + (v >= 100) + (v >= 1000);
}

/* Decimal digits, written from the last straight into the buffer. */
static void ob_u64(struct obuf *o, uint64_t v)
{
    unsigned n = ndigits(v);
    char *d = ob_room(o, 20), *p = d + n;
    while (v >= 100) {
        p -= 2;
        memcpy(p, digits2 + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10) {
        p -= 2;
        memcpy(p, digits2 + 2 * v, 2);
    } else
        *--p = (char)('0' + v);
    o->len += n;
}

static void ob_i64(struct obuf *o, int64_t v)
{
    if (v < 0) {
        ob_char(o, '-');
        ob_u64(o, (uint64_t)0 - (uint64_t)v);
    } else
        ob_u64(o, (uint64_t)v);
}

static void ob_hex(struct obuf *o, uint64_t v)
{
    char t[16];
    char *p = t + sizeof(t);
    do {
        *--p = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    ob_mem(o, p, (size_t)(t + sizeof(t) - p));
}

/* A JSON string, escaped as mt_export_json_str does. */
static void ob_json_str(struct obuf *o, const char *s)
{
    ob_char(o, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const unsigned char *q = p;
        while (*q >= 0x20 && *q != '"' && *q != '\\')
            q++;
        if (q > p) { /* a run that needs no escape, in one copy */
            ob_mem(o, (const char *)p, (size_t)(q - p));
            p = q;
            if (!*p)
                break;
        }
        switch (*p) {
        case '"':
            ob_lit(o, "\\\"");
            break;
        case '\\':
            ob_lit(o, "\\\\");
            break;
        case '\n':
            ob_lit(o, "\\n");
            break;
        case '\r':
            ob_lit(o, "\\r");
            break;
        case '\t':
            ob_lit(o, "\\t");
            break;
        default:
            if (*p < 0x20) {
                ob_lit(o, "\\u00");
                ob_char(o, "0123456789abcdef"[*p >> 4]);
                ob_char(o, "0123456789abcdef"[*p & 15]);
            } else
                ob_char(o, (char)*p);
        }
    }
    ob_char(o, '"');
}

/* Microseconds after t0, with nanosecond digits. */
static void ts(struct obuf *o, uint64_t t, uint64_t t0)
{
    uint64_t d = t >= t0 ? t - t0 : 0;
    ob_u64(o, d / 1000);
    unsigned ns = (unsigned)(d % 1000);
    char f[4] = {'.', (char)('0' + ns / 100), digits2[2 * (ns % 100)], digits2[2 * (ns % 100) + 1]};
    ob_mem(o, f, 4);
}

static int pid_of(int32_t device)
{
    return device < 0 ? 0 : device + 1;
}

struct pf {
    struct obuf o;
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
        ob_char(&p->o, '\n');
    else
        ob_lit(&p->o, ",\n");
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
        ob_lit(&p->o, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":"
                      "\"host\"}}");
    else {
        ob_lit(&p->o, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":");
        ob_u64(&p->o, pid);
        ob_lit(&p->o, ",\"args\":{\"name\":\"device ");
        ob_i64(&p->o, device);
        ob_lit(&p->o, "\"}}");
    }
    return 0;
}

static void slice(struct pf *p, struct memtrace_reader *r, char ph, const struct mt_live *b,
                  uint64_t t)
{
    struct obuf *o = &p->o;
    sep(p);
    ob_lit(o, "{\"ph\":\"");
    ob_char(o, ph);
    ob_lit(o, "\",\"cat\":\"block\",\"name\":");
    ob_json_str(o, block_name(p, r, b->stack));
    ob_lit(o, ",\"id\":\"0x");
    ob_hex(o, b->head.key);
    ob_lit(o, "\",\"pid\":");
    ob_i64(o, pid_of(b->device));
    ob_lit(o, ",\"tid\":0,\"ts\":");
    ts(o, t, p->t0);
    if (ph == 'b') {
        ob_lit(o, ",\"args\":{\"size\":");
        ob_u64(o, b->size);
        ob_lit(o, ",\"requested_size\":");
        ob_u64(o, b->requested);
        ob_lit(o, ",\"stream\":");
        ob_u64(o, b->stream);
        ob_lit(o, ",\"stack\":");
        ob_u64(o, b->stack);
        ob_char(o, '}');
    }
    ob_char(o, '}');
}

static void counter(struct pf *p, const struct mt_replay *rp, int32_t device, uint64_t t)
{
    const struct mt_devlevel *d = mt_replay_device(rp, device);
    struct obuf *o = &p->o;
    if (!d)
        return;
    sep(p);
    ob_lit(o, "{\"ph\":\"C\",\"name\":\"memory\",\"pid\":");
    ob_i64(o, pid_of(device));
    ob_lit(o, ",\"ts\":");
    ts(o, t, p->t0);
    ob_lit(o, ",\"args\":{\"allocated\":");
    ob_u64(o, d->allocated.cur);
    ob_lit(o, ",\"reserved\":");
    ob_u64(o, d->reserved.cur);
    ob_lit(o, ",\"used\":");
    ob_u64(o, d->used);
    ob_lit(o, "}}");
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
    struct obuf *o = &p.o;
    if (ob_open(o, out) != 0) {
        mt_replay_close(rp);
        err->code = MEMTRACE_ENOMEM;
        snprintf(err->text, sizeof(err->text), "out of memory");
        return MEMTRACE_ENOMEM;
    }
    ob_lit(o, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"exporter\":\"memtrace\"},"
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
            ob_lit(o, "{\"ph\":\"");
            ob_char(o, ph);
            ob_lit(o, "\",\"cat\":\"annotation\",\"name\":");
            ob_json_str(o, memtrace_reader_string(rp->r, ev->category));
            ob_lit(o, ",\"pid\":");
            ob_i64(o, pid_of(ev->device));
            ob_lit(o, ",\"tid\":");
            ob_u64(o, ev->tid);
            ob_lit(o, ",\"ts\":");
            ts(o, ev->time_ns, p.t0);
            if (ph == 'i')
                ob_lit(o, ",\"s\":\"t\"}");
            else
                ob_char(o, '}');
        } else if (ev->action == MEMTRACE_OOM) {
            sep(&p);
            ob_lit(o, "{\"ph\":\"i\",\"cat\":\"oom\",\"name\":\"oom\",\"s\":\"p\",\"pid\":");
            ob_i64(o, pid_of(ev->device));
            ob_lit(o, ",\"tid\":");
            ob_u64(o, ev->tid);
            ob_lit(o, ",\"ts\":");
            ts(o, ev->time_ns, p.t0);
            ob_lit(o, ",\"args\":{\"size\":");
            ob_u64(o, ev->size);
            ob_lit(o, ",\"device_free\":");
            ob_u64(o, ev->aux);
            ob_lit(o, "}}");
        }
    }
    st->events = rp->events;
    if (rc < 0) {
        rc = mt_export_reader_failed(rp->r, path, rc, err);
        goto out;
    }
    st->truncated = mt_replay_truncated(rp);
    if (opened && live_slices(&p, rp, 'e', tlast, 0, 0) < 0) {
        err->code = rc = MEMTRACE_ENOMEM;
        snprintf(err->text, sizeof(err->text), "%s: out of memory", path);
        goto out;
    }
    ob_lit(o, "\n]}\n");
    st->written = p.written;
    rc = 0;
out:
    ob_close(o);
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
