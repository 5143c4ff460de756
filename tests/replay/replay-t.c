/* replay-t: the replay model (snapshot/replay.c) on the committed cases in
 * tests/replay/<case>/: input.memtrace (made from events.json by gen-replay-cases)
 * and expected.json, the outcome docs/REPLAY.md's rules give, written by hand. Every
 * key of expected.json must equal the model's figure of that name; the web viewer's
 * replay passes the same cases with the same names. */
#include "config.h"

#include "replay.h"

#include "tap.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MT_SRCDIR
#define MT_SRCDIR "."
#endif

static json_t *count_json(const struct mt_count *c)
{
    return json_pack("[II]", (json_int_t)c->count, (json_int_t)c->bytes);
}

static json_t *level_json(const struct mt_level *l)
{
    return json_pack("{s:I,s:I,s:o}", "current", (json_int_t)l->cur, "peak", (json_int_t)l->peak,
                     "peak_event", l->peak ? json_integer((json_int_t)l->peak_index) : json_null());
}

static int by_addr(const void *a, const void *b)
{
    const struct mt_live *x = *(const struct mt_live *const *)a;
    const struct mt_live *y = *(const struct mt_live *const *)b;
    return x->head.key < y->head.key ? -1 : x->head.key > y->head.key;
}

/* [[addr, size, stack, pending], ...] by address. Stacks are given as the case's
 * own numbering: the index of the stack's innermost frame name list in events.json
 * is not kept in the file, so the trie node id stands in, and cases name it. */
static json_t *live_json(const struct mt_addrtab *t, int with_pending)
{
    const struct mt_live **v = calloc(t->n ? t->n : 1, sizeof(*v));
    size_t n = 0;
    for (size_t i = 0; i < t->cap; i++) {
        const struct mt_live *e = mt_addrtab_at(t, i);
        if (e)
            v[n++] = e;
    }
    qsort(v, n, sizeof(*v), by_addr);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *row = json_pack("[II]", (json_int_t)v[i]->head.key, (json_int_t)v[i]->size);
        if (with_pending)
            json_array_append_new(row, json_boolean(v[i]->pending));
        json_array_append_new(arr, row);
    }
    free(v);
    return arr;
}

/* The innermost frame's symbol of a stack, which names it in expected.json. */
static const char *stack_name(const struct mt_replay *rp, uint32_t stack)
{
    uint32_t fr[1];
    if (stack == 0 || memtrace_reader_stack(rp->r, stack, fr, 1) < 1)
        return "";
    const struct memtrace_frame *f = memtrace_reader_frame(rp->r, fr[0]);
    return f ? f->symbol : "";
}

/* {name: [bytes, count]} for every stack with a count, by pick. */
static json_t *stacks_json(const struct mt_replay *rp, int pick)
{
    json_t *o = json_object();
    const struct mt_tallies *ts = &rp->block_stacks;
    for (size_t k = 0; k < ts->n; k++) {
        uint64_t bytes = 0, count = 0;
        const struct mt_tally *t = &ts->t[k];
        if (pick == 0)
            mt_tally_at_peak(ts, &rp->allocated, (uint32_t)k, &bytes, &count);
        else if (pick == 1)
            bytes = t->alloc_bytes, count = t->alloc_count;
        else
            bytes = t->temp_bytes, count = t->temp_count;
        if (count)
            json_object_set_new(o, stack_name(rp, (uint32_t)k),
                                json_pack("[II]", (json_int_t)bytes, (json_int_t)count));
    }
    return o;
}

static json_t *outcome(const struct mt_replay *rp)
{
    json_t *o = json_object();
    json_object_set_new(o, "events", json_integer((json_int_t)rp->events));
    json_object_set_new(o, "truncated", json_boolean(mt_replay_truncated(rp)));
    json_object_set_new(o, "allocated", level_json(&rp->allocated));
    json_object_set_new(o, "reserved", level_json(&rp->reserved));
    json_object_set_new(o, "allocs", count_json(&rp->allocs));
    json_object_set_new(o, "frees", count_json(&rp->frees));
    json_object_set_new(o, "free_requests", count_json(&rp->free_requests));
    json_object_set_new(o, "unmatched_frees", count_json(&rp->unmatched_frees));
    json_object_set_new(o, "replaced_allocs", count_json(&rp->replaced_allocs));
    json_object_set_new(o, "segment_allocs", count_json(&rp->seg_allocs));
    json_object_set_new(o, "segment_frees", count_json(&rp->seg_frees));
    json_object_set_new(o, "unmatched_segment_frees", count_json(&rp->unmatched_seg_frees));
    json_object_set_new(o, "replaced_segments", count_json(&rp->replaced_segs));
    json_object_set_new(o, "live_blocks", live_json(&rp->blocks, 1));
    json_object_set_new(o, "live_segments", live_json(&rp->segs, 0));
    json_object_set_new(o, "stacks_at_peak", stacks_json(rp, 0));
    json_object_set_new(o, "stacks_allocated", stacks_json(rp, 1));
    json_object_set_new(o, "temporaries", stacks_json(rp, 2));
    return o;
}

static int is_case(const struct dirent *d)
{
    return d->d_name[0] != '.';
}

int main(void)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/tests/replay", MT_SRCDIR);
    struct dirent **names;
    int n = scandir(dir, &names, is_case, alphasort);
    if (n < 0)
        bail_out("cannot list tests/replay");
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        char input[1024], exp_path[1024];
        snprintf(input, sizeof(input), "%s/%s/input.memtrace", dir, name);
        snprintf(exp_path, sizeof(exp_path), "%s/%s/expected.json", dir, name);
        json_error_t jerr;
        json_t *expected = json_load_file(exp_path, 0, &jerr);
        if (!expected) {
            free(names[i]);
            continue; /* not a case directory */
        }
        struct mt_replay *rp = NULL;
        struct memtrace_errinfo err;
        memset(&err, 0, sizeof(err));
        int rc = mt_replay_open(&rp, input, NULL, &err);
        if (rc == 0)
            rc = mt_replay_run(rp);
        if (!ok(rc == 0, "%s: replays", name)) {
            diag("%s", rp ? memtrace_reader_error(rp->r)->text : err.text);
        } else {
            json_t *got = outcome(rp);
            const char *key;
            json_t *want;
            json_object_foreach(expected, key, want)
            {
                if (key[0] == '_')
                    continue; /* a comment */
                json_t *have = json_object_get(got, key);
                if (!ok(have && json_equal(have, want), "%s: %s", name, key)) {
                    char *a = json_dumps(want, JSON_COMPACT), *b = json_dumps(have, JSON_COMPACT);
                    diag("wanted: %s", a ? a : "?");
                    diag("   got: %s", b ? b : "(none)");
                    free(a);
                    free(b);
                }
            }
            /* A lean view (no per-stack, no per-device levels) gets every other figure alike. */
            struct mt_replay *lean = NULL;
            int same = mt_replay_open(&lean, input, NULL, &err) == 0;
            if (same) {
                lean->lean = 1;
                same = mt_replay_run(lean) == 0;
            }
            if (same) {
                json_t *lg = outcome(lean);
                static const char *const stacks[] = {"stacks_at_peak", "stacks_allocated",
                                                     "temporaries"};
                for (size_t k = 0; k < sizeof stacks / sizeof *stacks; k++) {
                    same = same && json_object_size(json_object_get(lg, stacks[k])) == 0;
                    json_object_del(lg, stacks[k]);
                    json_object_del(got, stacks[k]);
                }
                same = same && json_equal(lg, got);
                json_decref(lg);
            }
            ok(same, "%s: without stack tallies, the same figures and no stacks", name);
            mt_replay_close(lean);
            json_decref(got);
        }
        mt_replay_close(rp);
        json_decref(expected);
        free(names[i]);
    }
    free(names);
    done_testing();
    return exit_status();
}
