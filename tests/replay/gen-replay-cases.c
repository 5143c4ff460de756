/* gen-replay-cases: writes tests/replay/<case>/input.memtrace from the case's
 * events.json, the readable source of each replay case (docs/REPLAY.md):
 *
 *   {"stacks": [["inner", "outer"], ...],     stack i+1, frames innermost first
 *    "state": [{"addr": 4096, "size": 8192, "stream": 0, "device": 0,
 *               "blocks": [{"size": 512, "requested": 500, "stack": 1,
 *                           "state": "active_allocated"}, ...]}, ...],
 *    "events": [{"action": "alloc", "addr": 4096, "size": 512, "stack": 1, ...}],
 *    "end": true}                             false: no end record (truncated)
 *
 * "state", when present, is written before the events (what was live before them);
 * a segment's blocks follow each other from its address.
 * An event's fields default to 0 but its time, which defaults to 1000 ns times its
 * position, so that event order and time order agree. Annotation names go in
 * "name". Run as: gen-replay-cases $(top_srcdir)/tests/replay */
#include "config.h"

#include "memtrace.h"
#include "writer.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct names {
    const char **s;
    size_t n;
};

/* The id of s in the string table being built (1-based). */
static uint32_t intern(struct names *t, const char *s)
{
    for (size_t k = 0; k < t->n; k++)
        if (strcmp(t->s[k], s) == 0)
            return (uint32_t)k + 1;
    t->s = realloc(t->s, (t->n + 1) * sizeof(*t->s));
    t->s[t->n] = s;
    return (uint32_t)++t->n;
}

static uint64_t u64(json_t *o, const char *key, uint64_t dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (uint64_t)json_integer_value(v) : dflt;
}

static int block_state(const char *s)
{
    if (s && strcmp(s, "active_allocated") == 0)
        return MEMTRACE_BLOCK_ACTIVE_ALLOCATED;
    if (s && strcmp(s, "active_pending_free") == 0)
        return MEMTRACE_BLOCK_ACTIVE_PENDING_FREE;
    return MEMTRACE_BLOCK_INACTIVE;
}

/* The case's "state" as one state chunk at time t. */
static int write_state(struct mt_writer *w, json_t *state, json_t *stacks, const uint32_t *stack_of,
                       uint64_t t)
{
    size_t n = json_array_size(state), nb = 0;
    for (size_t i = 0; i < n; i++)
        nb += json_array_size(json_object_get(json_array_get(state, i), "blocks"));
    struct memtrace_segment *segs = calloc(n, sizeof(*segs));
    struct memtrace_block *blocks = calloc(nb ? nb : 1, sizeof(*blocks));
    size_t b = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *g = json_array_get(state, i), *bl = json_object_get(g, "blocks");
        struct memtrace_segment *sg = &segs[i];
        sg->addr = u64(g, "addr", 0);
        sg->total_size = u64(g, "size", 0);
        sg->stream = u64(g, "stream", 0);
        sg->device = (int32_t)u64(g, "device", 0);
        sg->blocks = blocks + b;
        sg->nblocks = json_array_size(bl);
        uint64_t at = sg->addr;
        for (size_t k = 0; k < sg->nblocks; k++, b++) {
            json_t *x = json_array_get(bl, k);
            struct memtrace_block *bk = &blocks[b];
            bk->addr = at;
            bk->size = u64(x, "size", 0);
            bk->requested_size = u64(x, "requested", bk->size);
            uint64_t st = u64(x, "stack", 0);
            bk->stack = st && st <= json_array_size(stacks) ? stack_of[st] : 0;
            bk->state = block_state(json_string_value(json_object_get(x, "state")));
            at += bk->size;
            if (bk->state != MEMTRACE_BLOCK_INACTIVE) {
                sg->allocated_size += bk->size;
                sg->active_size += bk->size;
                sg->requested_size += bk->requested_size;
            }
        }
    }
    int rc = mt_writer_state(w, t, segs, n);
    free(segs);
    free(blocks);
    return rc;
}

static int gen_case(const char *dir)
{
    char src[1100], out[1100];
    snprintf(src, sizeof(src), "%s/events.json", dir);
    snprintf(out, sizeof(out), "%s/input.memtrace", dir);
    json_error_t jerr;
    json_t *root = json_load_file(src, 0, &jerr);
    if (!root) {
        fprintf(stderr, "gen-replay-cases: %s:%d: %s\n", src, jerr.line, jerr.text);
        return -1;
    }
    struct names strings = {0};
    json_t *stacks = json_object_get(root, "stacks");
    /* One frame per distinct name, one trie node per (parent, frame). */
    struct names frames = {0};
    size_t nnodes = 0, cap = 64;
    uint32_t *parent = calloc(cap, sizeof(*parent)), *frame = calloc(cap, sizeof(*frame));
    uint32_t *stack_of = calloc(json_array_size(stacks) + 1, sizeof(*stack_of));
    for (size_t i = 0; i < json_array_size(stacks); i++) {
        json_t *fr = json_array_get(stacks, i);
        uint32_t node = 0;
        for (size_t d = json_array_size(fr); d-- > 0;) {
            uint32_t f = intern(&frames, json_string_value(json_array_get(fr, d)));
            uint32_t found = 0;
            for (size_t k = 0; k < nnodes; k++)
                if (parent[k] == node && frame[k] == f)
                    found = (uint32_t)k + 1;
            if (!found) {
                if (nnodes == cap) {
                    cap *= 2;
                    parent = realloc(parent, cap * sizeof(*parent));
                    frame = realloc(frame, cap * sizeof(*frame));
                }
                parent[nnodes] = node;
                frame[nnodes] = f;
                found = (uint32_t)++nnodes;
            }
            node = found;
        }
        stack_of[i + 1] = node;
    }
    json_t *events = json_object_get(root, "events");
    size_t nev = json_array_size(events);
    struct memtrace_event *ev = calloc(nev ? nev : 1, sizeof(*ev));
    for (size_t i = 0; i < nev; i++) {
        json_t *e = json_array_get(events, i);
        int action = memtrace_action_from_name(json_string_value(json_object_get(e, "action")));
        if (action < 0) {
            fprintf(stderr, "gen-replay-cases: %s: event %zu: unknown action\n", src, i);
            return -1;
        }
        ev[i].action = (uint8_t)action;
        ev[i].time_ns = u64(e, "time", 1000 * (i + 1));
        ev[i].addr = u64(e, "addr", 0);
        ev[i].size = u64(e, "size", 0);
        ev[i].requested_size = u64(e, "requested", 0);
        ev[i].stream = u64(e, "stream", 0);
        ev[i].aux = u64(e, "aux", 0);
        ev[i].device = (int32_t)u64(e, "device", 0);
        ev[i].tid = (uint32_t)u64(e, "tid", 1);
        uint64_t st = u64(e, "stack", 0);
        ev[i].stack = st && st <= json_array_size(stacks) ? stack_of[st] : 0;
        json_t *name = json_object_get(e, "name");
        if (json_is_string(name))
            ev[i].category = intern(&strings, json_string_value(name));
    }
    /* Frame names go into the string table after the annotation names. */
    struct mt_frame_rec *recs = calloc(frames.n ? frames.n : 1, sizeof(*recs));
    for (size_t k = 0; k < frames.n; k++) {
        recs[k].ip = 0x1000 + 16 * k;
        recs[k].symbol = intern(&strings, frames.s[k]);
    }
    struct mt_writer *w;
    int rc = mt_writer_open(&w, out, MT_WRITER_OVERWRITE);
    if (rc == 0)
        rc = mt_writer_meta(w, "{\"generator\": \"gen-replay-cases\"}");
    if (rc == 0 && strings.n)
        rc = mt_writer_strings(w, 1, strings.n, strings.s);
    if (rc == 0 && frames.n)
        rc = mt_writer_frames(w, 1, frames.n, recs);
    if (rc == 0 && nnodes)
        rc = mt_writer_stacks(w, 1, nnodes, parent, frame);
    json_t *state = json_object_get(root, "state");
    if (rc == 0 && json_array_size(state))
        rc = write_state(w, state, stacks, stack_of, nev ? ev[0].time_ns : 0);
    if (rc == 0 && nev)
        rc = mt_writer_events(w, ev, nev);
    if (rc == 0) {
        if (json_is_false(json_object_get(root, "end")))
            mt_writer_abort(w);
        else
            rc = mt_writer_end(w, "{}");
    }
    if (rc != 0)
        fprintf(stderr, "gen-replay-cases: %s: %s\n", out, memtrace_strerror(rc));
    free(recs);
    free(ev);
    free(stack_of);
    free(parent);
    free(frame);
    free(frames.s);
    free(strings.s);
    json_decref(root);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen-replay-cases TESTS_REPLAY_DIR\n");
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 1;
    }
    struct dirent *de;
    int bad = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char dir[1024], src[1100];
        snprintf(dir, sizeof(dir), "%s/%s", argv[1], de->d_name);
        snprintf(src, sizeof(src), "%s/events.json", dir);
        FILE *f = fopen(src, "r");
        if (!f)
            continue;
        fclose(f);
        bad |= gen_case(dir) != 0;
    }
    closedir(d);
    return bad;
}
