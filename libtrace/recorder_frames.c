/* recorder_frames.c: the tables a file needs before the events that refer to them.
 * Owns the symbolized frames (one record per frame id, symbolized once, when a
 * writer first needs it) and writes the strings, frames and stack nodes interned
 * since a writer's marks. Stacks and strings themselves live in stack.c and
 * strtab.c. */
#include "config.h"

#include "recorder_impl.h"

#include "memtrace.h"
#include "stack.h"
#include "stack_py.h"
#include "strtab.h"
#include "symbolize.h"
#include "writer.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mt_frame_rec *frame_recs; /* index = frame id */
static uint32_t nframe_recs;            /* symbolized: ids 1..nframe_recs */
static uint32_t frame_recs_cap;

/* Symbolizes frames up to the current frame count; returns that count. */
uint32_t mt_frames_symbolize(void)
{
    pthread_mutex_lock(&sym_lock);
    uint32_t nf = mt_frame_count();
    if (nf + 1 > frame_recs_cap) {
        uint32_t cap = frame_recs_cap ? frame_recs_cap : 1024;
        while (cap < nf + 1)
            cap *= 2;
        struct mt_frame_rec *n = realloc(frame_recs, cap * sizeof *n);
        if (n == NULL) {
            nf = nframe_recs;
            goto out;
        }
        frame_recs = n;
        frame_recs_cap = cap;
    }
    for (uint32_t id = nframe_recs + 1; id <= nf; id++) {
        struct mt_symbol sym;
        uintptr_t ip = mt_frame_ip(id);
        uint32_t function, file, line;
        if (mt_py_frame(ip, &function, &file, &line) == 0) {
            /* A Python frame: no address; its module is the marker docs/FORMAT.md
             * names. */
            frame_recs[id] = (struct mt_frame_rec){
                .module = mt_strings_intern(MT_PY_MODULE),
                .symbol = function,
                .file = file,
                .line = line,
            };
            continue;
        }
        mt_symbolize(ip, &sym);
        frame_recs[id] = (struct mt_frame_rec){
            .ip = ip,
            .offset = sym.offset,
            .module = mt_strings_intern(sym.module),
            .symbol = mt_strings_intern(sym.function),
            .file = mt_strings_intern(sym.file),
            .line = sym.line,
        };
    }
    nframe_recs = nf;
out:
    pthread_mutex_unlock(&sym_lock);
    return nf;
}

int mt_tables_write(struct mt_writer *w, struct mt_table_marks *marks)
{
    int rc = 0;
    uint32_t ns = mt_stack_node_count();
    uint32_t nf = mt_frames_symbolize();
    uint32_t nstr = mt_strings_count();
    if (nstr > marks->strings) {
        size_t n = nstr - marks->strings;
        const char **s = malloc(n * sizeof *s);
        if (s == NULL)
            return MEMTRACE_ENOMEM;
        for (size_t i = 0; i < n; i++)
            s[i] = mt_strings_get(marks->strings + 1 + (uint32_t)i);
        rc = mt_writer_strings(w, marks->strings + 1, n, s);
        free(s);
        if (rc != 0)
            return rc;
        marks->strings = nstr;
    }
    if (nf > marks->frames) {
        pthread_mutex_lock(&sym_lock);
        rc = mt_writer_frames(w, marks->frames + 1, nf - marks->frames,
                              frame_recs + marks->frames + 1);
        pthread_mutex_unlock(&sym_lock);
        if (rc != 0)
            return rc;
        marks->frames = nf;
    }
    if (ns > marks->stacks) {
        size_t n = ns - marks->stacks;
        uint32_t *parent = malloc(n * sizeof *parent);
        uint32_t *frame = malloc(n * sizeof *frame);
        if (parent == NULL || frame == NULL) {
            free(parent);
            free(frame);
            return MEMTRACE_ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
            mt_stack_node(marks->stacks + 1 + (uint32_t)i, &parent[i], &frame[i]);
        rc = mt_writer_stacks(w, marks->stacks + 1, n, parent, frame);
        free(parent);
        free(frame);
        if (rc != 0)
            return rc;
        marks->stacks = ns;
    }
    return 0;
}

void mt_frames_lock(void)
{
    pthread_mutex_lock(&sym_lock);
}

void mt_frames_unlock(void)
{
    pthread_mutex_unlock(&sym_lock);
}

void mt_frames_atfork_child(void)
{
    pthread_mutex_init(&sym_lock, NULL);
}
