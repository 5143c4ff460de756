/* frames-t: which frames the views show (snapshot/frames.c), on the cases of
 * tests/snapshot/frames-cases.json that the web viewer's copy passes too, then on
 * stacks of a written file: the frames kept and their places, a stack with no frame
 * shown, and the frame that names a stack. */
#include "config.h"

#include "frames.h"
#include "writer.h"

#include "tap.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef MT_SRCDIR
#define MT_SRCDIR "."
#endif

#define MAXF 64

static void bail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void bail(const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    bail_out(text);
}

static const char *str_of(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static int kind_of(const char *name)
{
    for (int k = 0; k < MT_FRAME_KINDS; k++)
        if (strcmp(mt_frame_kind_name(k), name) == 0)
            return k;
    return -1;
}

/* A stack of frames ids[0 .. n) (innermost first) as n trie nodes after *next; its id. */
static uint32_t put_stack(struct mt_writer *w, uint32_t *next, const uint32_t *ids, size_t n)
{
    uint32_t parent[MAXF], frame[MAXF];
    for (size_t k = 0; k < n; k++) {
        parent[k] = k ? *next + (uint32_t)k - 1 : 0;
        frame[k] = ids[n - 1 - k];
    }
    if (mt_writer_stacks(w, *next, n, parent, frame) != 0)
        return 0;
    *next += (uint32_t)n;
    return *next - 1;
}

int main(void)
{
    json_error_t jerr;
    json_t *doc = json_load_file(MT_SRCDIR "/tests/snapshot/frames-cases.json", 0, &jerr);
    if (!doc)
        bail("frames-cases.json: %s", jerr.text);
    json_t *cases = json_object_get(doc, "cases");
    size_t n = json_array_size(cases);
    if (n == 0 || n > MAXF)
        bail("frames-cases.json: %zu cases", n);
    plan((int)n + 13);

    /* Every case, as a frame in memory. */
    size_t nshown = 0;
    int shown_at[MAXF], python_at = -1;
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(cases, i);
        struct memtrace_frame fr = {
            .ip = (uint64_t)json_integer_value(json_object_get(c, "ip")),
            .module = str_of(c, "module"),
            .symbol = str_of(c, "symbol"),
            .file = str_of(c, "file"),
            .line = (uint32_t)json_integer_value(json_object_get(c, "line")),
        };
        int want = kind_of(str_of(c, "kind")), got = mt_frame_kind(&fr);
        is_int(want, got, "'%s' in '%s' is %s (%s)", fr.symbol, fr.file, str_of(c, "kind"),
               got >= 0 ? mt_frame_kind_name(got) : "?");
        if (want == MT_FRAME_SHOWN)
            shown_at[nshown++] = (int)i;
        size_t fl = strlen(fr.file);
        if (python_at < 0 && fl > 3 && strcmp(fr.file + fl - 3, ".py") == 0)
            python_at = (int)i;
    }
    ok(python_at >= 0 && nshown > 2, "the cases hold a Python frame and shown frames");

    /* The same frames in a file: strings, one frame per case, three stacks. */
    char path[] = "/tmp/memtrace-frames-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        bail("mkstemp");
    close(fd);
    struct mt_writer *w;
    if (mt_writer_open(&w, path, MT_WRITER_OVERWRITE) != 0 || mt_writer_meta(w, "{}") != 0)
        bail("cannot write %s", path);
    const char *strs[3 * MAXF];
    struct mt_frame_rec recs[MAXF];
    uint32_t ids[MAXF];
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(cases, i);
        strs[3 * i] = str_of(c, "module");
        strs[3 * i + 1] = str_of(c, "symbol");
        strs[3 * i + 2] = str_of(c, "file");
        recs[i] = (struct mt_frame_rec){
            .ip = (uint64_t)json_integer_value(json_object_get(c, "ip")),
            .module = (uint32_t)(3 * i + 1),
            .symbol = (uint32_t)(3 * i + 2),
            .file = (uint32_t)(3 * i + 3),
            .line = (uint32_t)json_integer_value(json_object_get(c, "line")),
        };
        ids[i] = (uint32_t)i + 1;
    }
    uint32_t next = 1;
    /* all cases; the hidden ones only (capture..unknown); a native stack: shown case,
     * hidden case, shown case */
    uint32_t hidden[MAXF], native[3];
    size_t nhidden = 0, nnative = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(str_of(json_array_get(cases, i), "kind"), "shown") != 0)
            hidden[nhidden++] = (uint32_t)i + 1;
    native[nnative++] = hidden[0];
    for (size_t k = 0; k < nshown && nnative < 3; k++)
        if (shown_at[k] < python_at) {
            native[nnative++] = (uint32_t)shown_at[k] + 1;
            if (nnative == 2)
                native[nnative++] = hidden[1];
        }
    if (mt_writer_strings(w, 1, 3 * n, strs) != 0 || mt_writer_frames(w, 1, n, recs) != 0)
        bail("cannot write the tables");
    uint32_t s_all = put_stack(w, &next, ids, n);
    uint32_t s_hidden = put_stack(w, &next, hidden, nhidden);
    uint32_t s_native = put_stack(w, &next, native, nnative);
    struct memtrace_event ev = {
        .time_ns = 1, .addr = 4096, .size = 64, .stack = s_all, .action = MEMTRACE_ALLOC};
    if (!s_all || !s_hidden || !s_native || mt_writer_events(w, &ev, 1) != 0 ||
        mt_writer_end(w, "{}") != 0)
        bail("cannot write %s", path);

    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    if (memtrace_reader_open(&r, path, &err) != 0)
        bail("%s", err.text);
    while (memtrace_reader_next(r, &ev) == 1)
        ;

    uint32_t got[MAXF];
    int where[MAXF];
    int depth = memtrace_reader_stack(r, s_all, got, MAXF);
    is_int((int)n, depth, "the stack of every case has them all");
    int kept = mt_stack_shown(r, got, depth, where);
    is_int((int)nshown, kept, "the shown cases are kept");
    int same = 1;
    for (int k = 0; k < kept && k < (int)nshown; k++)
        same &= where[k] == shown_at[k] && got[k] == (uint32_t)shown_at[k] + 1;
    ok(same, "in order, each with its place in the whole stack");

    depth = memtrace_reader_stack(r, s_hidden, got, MAXF);
    kept = mt_stack_shown(r, got, depth, where);
    is_int((int)nhidden, kept, "a stack with nothing shown keeps every frame");
    ok(where[0] == 0 && where[kept - 1] == kept - 1 && got[0] == hidden[0] &&
           got[kept - 1] == hidden[nhidden - 1],
       "unmoved");

    depth = memtrace_reader_stack(r, s_native, got, MAXF);
    kept = mt_stack_shown(r, got, depth, NULL);
    is_int(1, kept, "a native stack keeps its one shown frame, without places asked for");
    is_int((int)native[1], (int)got[0], "the shown one");

    is_int(python_at + 1, (int)mt_stack_name_frame(r, s_all),
           "a stack with Python frames is named by its innermost one");
    is_int((int)native[1], (int)mt_stack_name_frame(r, s_native),
           "a native stack by its innermost shown frame");
    is_int((int)hidden[0], (int)mt_stack_name_frame(r, s_hidden),
           "a stack with nothing shown by its innermost frame");
    is_int(0, (int)mt_stack_name_frame(r, 0), "stack 0 by none");
    is_int(0, mt_stack_shown(r, got, 0, where), "no frames: none");

    memtrace_reader_close(r);
    unlink(path);
    json_decref(doc);
    return exit_status();
}
