/* gen-web: writes the files the browser tests load, with the internal writer, so the
 * tests know every address, size, stack and annotation in them:
 *   gen-web DIR
 * DIR/basic.memtrace     a small training loop (the figures are in web-t.mjs)
 * DIR/hostile.memtrace   markup in frame, file, category, annotation and meta strings
 * DIR/streams.memtrace   two streams, bytes rounded up from those requested, and an
 *                        annotation range and a mark (figures in streams-t.mjs)
 * DIR/devices.memtrace   two devices, counters and an out-of-memory event
 * DIR/rules.memtrace     every replay rule once: replaced and unmatched frees,
 *                        segment pieces unmapped across pieces and in part
 * DIR/random.memtrace    random events with edge values, and DIR/random.txt the same
 *                        events as text, one per line, for the decoder test */
#include "config.h"

#include "writer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/util.h"

#define MIB  (1024ULL * 1024ULL)
#define BASE 0x7f0000000000ULL
#define T0   1000000000ULL

struct evbuf {
    struct memtrace_event *ev;
    size_t n, cap;
};

static struct memtrace_event *push(struct evbuf *b, uint8_t action, uint64_t t, uint64_t addr,
                                   uint64_t size)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 1024;
        b->ev = realloc(b->ev, b->cap * sizeof(*b->ev));
        if (b->ev == NULL) {
            fprintf(stderr, "gen-web: out of memory\n");
            exit(1);
        }
    }
    struct memtrace_event *e = &b->ev[b->n++];
    memset(e, 0, sizeof(*e));
    e->action = action;
    e->time_ns = t;
    e->addr = addr;
    e->size = size;
    e->stream = 7;
    e->tid = 4242;
    return e;
}

static struct mt_writer *open_or_die(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    struct mt_writer *w;
    if (mt_writer_open(&w, path, MT_WRITER_OVERWRITE) != 0) {
        fprintf(stderr, "gen-web: cannot write %s\n", path);
        exit(1);
    }
    return w;
}

/* Tables shared by basic and hostile: strings 1..14 are given by the caller. Frames:
 * 1 alloc_weights (model.c:12), 2 train_step (train.c:40), 3 main (train.c:100),
 * 4 alloc_activations (layers.c:77), 5 small_tensor (tensors.c:5). Stacks: 3 is
 * main > train_step > alloc_weights, 4 ... > alloc_activations, 5 ... > small_tensor. */
static void tables(struct mt_writer *w, const char *const *s)
{
    mt_writer_strings(w, 1, 14, s);
    const struct mt_frame_rec f[5] = {
        {0x401000, 0x1000, 1, 2, 3, 12},  {0x402000, 0x2000, 1, 4, 5, 40},
        {0x403000, 0x3000, 1, 6, 5, 100}, {0x404000, 0x4000, 1, 7, 8, 77},
        {0x405000, 0x5000, 1, 13, 14, 5},
    };
    mt_writer_frames(w, 1, 5, f);
    const uint32_t parent[5] = {0, 1, 2, 2, 2}, frame[5] = {3, 2, 1, 4, 5};
    mt_writer_stacks(w, 1, 5, parent, frame);
}

/* The training loop: a 256 MiB segment, 64 MiB of weights live to the end, then 10
 * steps of 10 ms, each with 32 MiB of activations and 200 blocks of 4 KiB, all freed
 * 8 ms into the step. Strings 9, 10: categories; 11: annotation; 12: source. */
static void loop(struct mt_writer *w)
{
    struct evbuf b = {0};
    struct memtrace_event *e = push(&b, MEMTRACE_SEGMENT_ALLOC, T0, BASE, 256 * MIB);
    e->source = 12;
    e = push(&b, MEMTRACE_ANNOTATE, T0 + 500000, 0, 0);
    e->category = 11;
    e->aux = MEMTRACE_ANNOTATE_PUSH;
    e = push(&b, MEMTRACE_ALLOC, T0 + 1000000, BASE, 64 * MIB);
    e->stack = 3;
    e->category = 9;
    for (uint64_t k = 0; k < 10; k++) {
        uint64_t t = T0 + 2000000 + k * 10000000;
        e = push(&b, MEMTRACE_ALLOC, t, BASE + 64 * MIB, 32 * MIB);
        e->stack = 4;
        e->category = 10;
        for (uint64_t j = 0; j < 200; j++) {
            e = push(&b, MEMTRACE_ALLOC, t + 1000 + j * 1000, BASE + 96 * MIB + j * 4096, 4096);
            e->stack = 5;
            e->category = 10;
        }
        uint64_t tf = t + 8000000;
        push(&b, MEMTRACE_FREE_REQUESTED, tf, BASE + 64 * MIB, 32 * MIB)->stack = 4;
        push(&b, MEMTRACE_FREE_COMPLETED, tf + 500, BASE + 64 * MIB, 32 * MIB);
        for (uint64_t j = 0; j < 200; j++)
            push(&b, MEMTRACE_FREE_COMPLETED, tf + 1000 + j * 100, BASE + 96 * MIB + j * 4096,
                 4096);
    }
    e = push(&b, MEMTRACE_ANNOTATE, T0 + 102000000, 0, 0);
    e->category = 11;
    e->aux = MEMTRACE_ANNOTATE_POP;
    mt_writer_events(w, b.ev, b.n);
    free(b.ev);
}

static void basic(const char *dir)
{
    struct mt_writer *w = open_or_die(dir, "basic.memtrace");
    mt_writer_meta(w, "{\"host\":\"testhost\",\"pid\":1234,\"argv\":[\"train\",\"--steps\",\"10\"],"
                      "\"devices\":[{\"index\":0,\"name\":\"Test GPU\",\"total_memory\":"
                      "17179869184,\"backend\":\"host\"}]}");
    const char *s[14] = {"libtrain.so",  "alloc_weights", "model.c",           "train_step",
                         "train.c",      "main",          "alloc_activations", "layers.c",
                         "weights",      "activations",   "epoch 1",           "cudaMalloc",
                         "small_tensor", "tensors.c"};
    tables(w, s);
    loop(w);
    mt_writer_end(w, "{\"events\":4034,\"dropped\":0,\"overflowed\":0}");
}

/* Every string a page shows carries markup that would run if it were parsed as HTML;
 * each sets a different window.__hostile value. */
static void hostile(const char *dir, const char *name)
{
    struct mt_writer *w = open_or_die(dir, name);
    mt_writer_meta(w, "{\"host\":\"<img src=x onerror=\\\"window.__hostile=1\\\">\","
                      "\"argv\":[\"<script>window.__hostile=2</script>\"]}");
    const char *s[14] = {"<img src=x onerror=\"window.__hostile=3\">lib.so",
                         "<script>window.__hostile=4</script>alloc_weights",
                         "<img src=x onerror=\"window.__hostile=5\">model.c",
                         "<b onmouseover=\"window.__hostile=6\">train_step</b>",
                         "train.c",
                         "main",
                         "<svg onload=\"window.__hostile=7\">alloc_activations",
                         "layers.c",
                         "<img src=x onerror=\"window.__hostile=8\">weights",
                         "<script>window.__hostile=9</script>activations",
                         "<img src=x onerror=\"window.__hostile=10\">epoch",
                         "<iframe src=\"javascript:window.__hostile=11\"></iframe>",
                         "small_tensor",
                         "tensors.c"};
    tables(w, s);
    loop(w);
    mt_writer_end(w, "{\"events\":4034}");
}

/* Stream 1: a 32 MiB segment from the start holding A 10 MiB (512 bytes of rounding)
 * at 1 ms and B 6 MiB at 2 ms freed at 5 ms; stream 2: a 16 MiB segment from 3 ms
 * holding C 8 MiB (4 KiB of rounding) at 3 ms freed at 7 ms and D 4 MiB at 6 ms freed
 * at 8 ms. Peaks: 24 MiB in all at 3 ms (event 5), 16 MiB on stream 1 (event 3),
 * 12 MiB on stream 2 (event 8); reserved 48, 32 and 16 MiB. "phase A" runs from 1.5 ms
 * to 4 ms, "checkpoint" marks 6.5 ms. */
static void streams(const char *dir)
{
    struct mt_writer *w = open_or_die(dir, "streams.memtrace");
    const char *s[14] = {"libtrain.so",  "alloc_weights", "model.c",           "train_step",
                         "train.c",      "main",          "alloc_activations", "layers.c",
                         "weights",      "activations",   "phase A",           "checkpoint",
                         "small_tensor", "tensors.c"};
    tables(w, s);
    struct evbuf b = {0};
    const uint64_t ms = 1000000;
    struct memtrace_event *e = push(&b, MEMTRACE_SEGMENT_ALLOC, T0, BASE, 32 * MIB);
    e->stream = 1;
    e = push(&b, MEMTRACE_ALLOC, T0 + 1 * ms, BASE, 10 * MIB);
    e->stream = 1;
    e->stack = 3;
    e->requested_size = 10 * MIB - 512;
    e = push(&b, MEMTRACE_ANNOTATE, T0 + 3 * ms / 2, 0, 0);
    e->category = 11;
    e->aux = MEMTRACE_ANNOTATE_PUSH;
    e = push(&b, MEMTRACE_ALLOC, T0 + 2 * ms, BASE + 16 * MIB, 6 * MIB);
    e->stream = 1;
    e->stack = 4;
    push(&b, MEMTRACE_SEGMENT_ALLOC, T0 + 3 * ms, BASE + 32 * MIB, 16 * MIB)->stream = 2;
    e = push(&b, MEMTRACE_ALLOC, T0 + 3 * ms, BASE + 32 * MIB, 8 * MIB);
    e->stream = 2;
    e->stack = 5;
    e->requested_size = 8 * MIB - 4096;
    e = push(&b, MEMTRACE_ANNOTATE, T0 + 4 * ms, 0, 0);
    e->category = 11;
    e->aux = MEMTRACE_ANNOTATE_POP;
    push(&b, MEMTRACE_FREE_COMPLETED, T0 + 5 * ms, BASE + 16 * MIB, 6 * MIB)->stream = 1;
    e = push(&b, MEMTRACE_ALLOC, T0 + 6 * ms, BASE + 40 * MIB, 4 * MIB);
    e->stream = 2;
    e->stack = 4;
    e = push(&b, MEMTRACE_ANNOTATE, T0 + 13 * ms / 2, 0, 0);
    e->category = 12;
    e->aux = MEMTRACE_ANNOTATE_MARK;
    push(&b, MEMTRACE_FREE_COMPLETED, T0 + 7 * ms, BASE + 32 * MIB, 8 * MIB)->stream = 2;
    push(&b, MEMTRACE_FREE_COMPLETED, T0 + 8 * ms, BASE + 40 * MIB, 4 * MIB)->stream = 2;
    mt_writer_events(w, b.ev, b.n);
    free(b.ev);
    mt_writer_end(w, "{}");
}

/* Two devices with the sampler's counters and an out-of-memory event. Device 0: a
 * 32 MiB segment from the start, 8 MiB at 1 ms and 4 MiB at 2 ms, both freed at 5 ms;
 * device 1: a 16 MiB segment at 0.5 ms, 2 MiB at 1.5 ms. Counters every ms from 1 to
 * 4 ms: device 0 reports 40 MiB used, device 1 20 MiB, RSS 100, 110, 120, 130 MiB
 * (the same in both devices' samples). Device 0 runs out of memory at 3.5 ms asking
 * for 1 GiB. */
static void devices(const char *dir)
{
    struct mt_writer *w = open_or_die(dir, "devices.memtrace");
    const char *s[14] = {
        "libtrain.so",       "alloc_weights", "model.c", "train_step",  "train.c", "main",
        "alloc_activations", "layers.c",      "weights", "activations", "step",    "done",
        "small_tensor",      "tensors.c"};
    tables(w, s);
    struct evbuf b = {0};
    const uint64_t ms = 1000000;
    push(&b, MEMTRACE_SEGMENT_ALLOC, T0, BASE, 32 * MIB);
    struct memtrace_event *e =
        push(&b, MEMTRACE_SEGMENT_ALLOC, T0 + ms / 2, BASE + 64 * MIB, 16 * MIB);
    e->device = 1;
    e = push(&b, MEMTRACE_ALLOC, T0 + 1 * ms, BASE, 8 * MIB);
    e->stack = 3;
    e = push(&b, MEMTRACE_ALLOC, T0 + 3 * ms / 2, BASE + 64 * MIB, 2 * MIB);
    e->stack = 4;
    e->device = 1;
    e = push(&b, MEMTRACE_ALLOC, T0 + 2 * ms, BASE + 8 * MIB, 4 * MIB);
    e->stack = 5;
    for (int k = 1; k <= 4; k++) {
        for (int d = 0; d < 2; d++) {
            e = push(&b, MEMTRACE_COUNTER, T0 + (uint64_t)k * ms + (uint64_t)d,
                     d ? 20 * MIB : 40 * MIB, 80 * 1024 * MIB);
            e->requested_size = (uint64_t)(90 + 10 * k) * MIB;
            e->device = d;
        }
        if (k == 3) {
            e = push(&b, MEMTRACE_OOM, T0 + 7 * ms / 2, 0, 1024 * MIB);
            e->aux = 8 * MIB;
            e->stack = 4;
        }
    }
    push(&b, MEMTRACE_FREE_COMPLETED, T0 + 5 * ms, BASE, 8 * MIB);
    push(&b, MEMTRACE_FREE_COMPLETED, T0 + 5 * ms, BASE + 8 * MIB, 4 * MIB);
    mt_writer_events(w, b.ev, b.n);
    free(b.ev);
    mt_writer_end(w, "{}");
}

static void rules(const char *dir)
{
    struct mt_writer *w = open_or_die(dir, "rules.memtrace");
    struct evbuf b = {0};
    uint64_t t = T0;
    push(&b, MEMTRACE_ALLOC, t += 10, 0x1000, 100);
    push(&b, MEMTRACE_ALLOC, t += 10, 0x1000, 300);          /* replaces the 100 */
    push(&b, MEMTRACE_FREE_REQUESTED, t += 10, 0x1000, 300); /* no change */
    push(&b, MEMTRACE_FREE_COMPLETED, t += 10, 0x2000, 50);  /* unmatched */
    push(&b, MEMTRACE_ALLOC, t += 10, 0x2000, 700);
    push(&b, MEMTRACE_FREE_COMPLETED, t += 10, 0x1000, 0);
    push(&b, MEMTRACE_SEGMENT_MAP, t += 10, 0x100000, 0x1000);
    push(&b, MEMTRACE_SEGMENT_MAP, t += 10, 0x101000, 0x1000);
    push(&b, MEMTRACE_SEGMENT_MAP, t += 10, 0x102000, 0x2000);
    push(&b, MEMTRACE_SEGMENT_UNMAP, t += 10, 0x100000, 0x2800); /* 2 pieces and a half */
    push(&b, MEMTRACE_SEGMENT_UNMAP, t += 10, 0x100000, 0x1000); /* unmatched */
    push(&b, MEMTRACE_SEGMENT_ALLOC, t += 10, 0x200000, 0x10000);
    push(&b, MEMTRACE_SEGMENT_ALLOC, t += 10, 0x200000, 0x20000); /* replaces */
    push(&b, MEMTRACE_SEGMENT_FREE, t += 10, 0x300000, 0x1000);   /* unmatched */
    push(&b, MEMTRACE_SEGMENT_FREE, t += 10, 0x200000, 0);
    push(&b, MEMTRACE_OOM, t += 10, 0, 1 << 30)->aux = 4096;
    push(&b, MEMTRACE_ANNOTATE, t += 10, 0, 0)->aux = MEMTRACE_ANNOTATE_MARK;
    mt_writer_events(w, b.ev, b.n);
    free(b.ev);
    mt_writer_end(w, "{}");
}

/* Random events whose fields take edge values (0, UINT64_MAX, ...), written and
 * dumped as text: the decoder must give back exactly these. */
static void random_events(const char *dir)
{
    struct mt_writer *w = open_or_die(dir, "random.memtrace");
    char path[1024];
    snprintf(path, sizeof(path), "%s/random.txt", dir);
    FILE *out = fopen(path, "w");
    if (out == NULL) {
        fprintf(stderr, "gen-web: cannot write %s\n", path);
        exit(1);
    }
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    struct memtrace_event ev[3000];
    for (size_t i = 0; i < 3000; i++) {
        struct memtrace_event *e = &ev[i];
        memset(e, 0, sizeof(*e));
        if (i > 0 && rnd_next(&seed) % 3 == 0) {
            /* Repeats of an earlier event (hits of the prediction table). */
            *e = ev[rnd_next(&seed) % i];
            e->time_ns = ev[i - 1].time_ns + rnd_next(&seed) % 1000;
            continue;
        }
        e->time_ns = i % 7 == 3 ? rnd_value(&seed) : 1000000 + i * 1000;
        e->addr = i % 2 ? rnd_value(&seed) : 0x7f0000000000ULL + (rnd_next(&seed) % 64) * 4096;
        e->size = rnd_value(&seed);
        e->requested_size = rnd_value(&seed);
        e->stream = rnd_value(&seed);
        e->aux = rnd_value(&seed);
        e->device = (int32_t)(uint32_t)rnd_value(&seed);
        e->pool = (int32_t)(uint32_t)rnd_value(&seed);
        e->tid = (uint32_t)rnd_value(&seed);
        e->stack = (uint32_t)(rnd_next(&seed) % 4);
        e->category = (uint32_t)rnd_value(&seed);
        e->source = (uint32_t)(rnd_next(&seed) % 3);
        e->action = (uint8_t)(rnd_next(&seed) % 12);
    }
    /* Two chunks: the prediction table and the deltas restart in the second. */
    mt_writer_events(w, ev, 1700);
    mt_writer_events(w, ev + 1700, 1300);
    for (size_t i = 0; i < 3000; i++) {
        const struct memtrace_event *e = &ev[i];
        fprintf(out,
                "%u %" PRIu64 " %u %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                " %d %d %u %u %u\n",
                e->action, e->time_ns, e->tid, e->addr, e->size, e->requested_size, e->stream,
                e->aux, e->device, e->pool, e->stack, e->category, e->source);
    }
    fclose(out);
    mt_writer_end(w, "{\"events\":3000}");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen-web DIR\n");
        return 2;
    }
    basic(argv[1]);
    hostile(argv[1], "hostile.memtrace");
    hostile(argv[1], "<img src=x onerror=\"window.__hostile=12\">.memtrace");
    streams(argv[1]);
    devices(argv[1]);
    rules(argv[1]);
    random_events(argv[1]);
    return 0;
}
