/* gen_trace: writes a .memtrace file of N events shaped like a training loop, for the
 * web viewer's scale benchmarks (bench/web_bench.mjs):
 *     bench/gen_trace N OUT.memtrace
 * Each step allocates the activations of 48 layers (forward), temporaries that live a
 * few events, then frees the activations in reverse (backward) while gradients come
 * and go; weights and optimizer state stay live. 320 stacks of 8 to 20 frames over
 * 120 functions; addresses repeat from step to step as a caching allocator's do,
 * while half the activation sizes and every temporary's address and size vary. */

#include "config.h"

#include "writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSTACKS   320
#define NFUNCS    120
#define LAYERS    48
#define CHUNK     65536
#define SEG_BYTES (2ULL << 30)

static uint64_t rng = 0x2545f4914f6cdd1dULL;

static uint64_t next(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}

struct out {
    struct mt_writer *w;
    struct memtrace_event buf[CHUNK];
    size_t n;
    uint64_t total, limit, t;
};

static void emit(struct out *o, uint8_t action, uint64_t addr, uint64_t size, uint32_t stack)
{
    if (o->total >= o->limit)
        return;
    struct memtrace_event *e = &o->buf[o->n++];
    memset(e, 0, sizeof(*e));
    o->t += 1000 + next() % 4000;
    e->time_ns = o->t;
    e->action = action;
    e->addr = addr;
    e->size = size;
    e->stack = stack;
    e->stream = 0x5000;
    e->tid = 100;
    e->category = 1 + stack % 4;
    o->total++;
    if (o->n == CHUNK) {
        mt_writer_events(o->w, o->buf, o->n);
        o->n = 0;
    }
}

static void tables(struct mt_writer *w)
{
    static char names[NFUNCS][48];
    const char *s[NFUNCS + 8];
    const char *cats[4] = {"activations", "gradients", "temporaries", "optimizer"};
    const char *kinds[6] = {"forward", "backward", "matmul", "conv2d", "relu", "step"};
    for (int i = 0; i < 4; i++)
        s[i] = cats[i];
    s[4] = "libtorch_cuda.so";
    s[5] = "model.py";
    s[6] = "train.py";
    s[7] = "cudaMalloc";
    for (int i = 0; i < NFUNCS; i++) {
        snprintf(names[i], sizeof(names[i]), "layer%d_%s", i / 6, kinds[i % 6]);
        s[8 + i] = names[i];
    }
    mt_writer_strings(w, 1, NFUNCS + 8, s);
    struct mt_frame_rec f[NFUNCS];
    for (int i = 0; i < NFUNCS; i++)
        f[i] = (struct mt_frame_rec){0x7f1000000000ULL + (uint64_t)i * 0x140,
                                     (uint64_t)i * 0x140,
                                     5,
                                     (uint32_t)(9 + i),
                                     (uint32_t)(i % 3 ? 6 : 7),
                                     (uint32_t)(10 + i * 3)};
    mt_writer_frames(w, 1, NFUNCS, f);
    /* Each stack is a path of its own of 8 to 20 nodes: simple, and the trie is as
     * large as a real one with this many stacks. */
    static uint32_t parent[NSTACKS * 20], frame[NSTACKS * 20];
    uint32_t n = 0;
    for (int k = 0; k < NSTACKS; k++) {
        int depth = 8 + (int)(next() % 13);
        for (int d = 0; d < depth; d++) {
            parent[n] = d == 0 ? 0 : n; /* ids are n + 1: the previous node is id n */
            frame[n] = (uint32_t)(1 + next() % NFUNCS);
            n++;
        }
    }
    mt_writer_stacks(w, 1, n, parent, frame);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: gen_trace N OUT.memtrace\n");
        return 2;
    }
    char *end;
    unsigned long long n = strtoull(argv[1], &end, 10);
    if (*end || n == 0) {
        fprintf(stderr, "memtrace: gen_trace: N must be a positive count, got '%s'\n", argv[1]);
        return 2;
    }
    static struct out o;
    if (mt_writer_open(&o.w, argv[2], MT_WRITER_OVERWRITE) != 0) {
        fprintf(stderr, "memtrace: gen_trace: cannot write %s\n", argv[2]);
        return 1;
    }
    o.limit = n;
    o.t = 1000000000ULL;
    mt_writer_meta(o.w, "{\"host\":\"bench\",\"devices\":[{\"index\":0,\"name\":\"bench device\","
                        "\"total_memory\":85899345920,\"backend\":\"host\"}]}");
    tables(o.w);
    /* Stack ids: the innermost node of stack k. Recompute as tables() laid them. */
    uint32_t stack_of[NSTACKS];
    rng = 0x2545f4914f6cdd1dULL;
    uint32_t id = 0;
    for (int k = 0; k < NSTACKS; k++) {
        int depth = 8 + (int)(next() % 13);
        for (int d = 0; d < depth; d++)
            next();
        id += (uint32_t)depth;
        stack_of[k] = id;
    }
    const uint64_t base = 0x7f0000000000ULL;
    emit(&o, MEMTRACE_SEGMENT_ALLOC, base, SEG_BYTES, 0);
    /* Weights and optimizer state: live to the end. */
    uint64_t top = base;
    for (int i = 0; i < 64; i++) {
        uint64_t sz = (1 + next() % 16) << 20;
        emit(&o, MEMTRACE_ALLOC, top, sz, stack_of[i % 16]);
        top += sz;
    }
    uint64_t act_addr[LAYERS], act_size[LAYERS];
    for (int step = 0; o.total < o.limit; step++) {
        uint64_t a = top;
        for (int l = 0; l < LAYERS; l++) {
            act_size[l] = ((uint64_t)(l % 7 + 1) << 20) + (next() % 2 ? (next() % 4096) * 512 : 0);
            act_addr[l] = a;
            a += 16 << 20;
            emit(&o, MEMTRACE_ALLOC, act_addr[l], act_size[l], stack_of[16 + l * 2]);
            /* Temporaries: a few small blocks that live a couple of events. */
            for (int k = 0; k < 3; k++) {
                uint64_t ta = a + (next() % 4096) * 512, tsz = 512 * (1 + next() % 64);
                emit(&o, MEMTRACE_ALLOC, ta, tsz, stack_of[120 + (l * 3 + k) % 100]);
                emit(&o, MEMTRACE_FREE_REQUESTED, ta, tsz, 0);
                emit(&o, MEMTRACE_FREE_COMPLETED, ta, tsz, 0);
            }
        }
        for (int l = LAYERS - 1; l >= 0; l--) {
            uint64_t ga = a + (uint64_t)l * 4096 * 64;
            emit(&o, MEMTRACE_ALLOC, ga, act_size[l] / 2, stack_of[220 + l]);
            emit(&o, MEMTRACE_FREE_REQUESTED, act_addr[l], act_size[l], 0);
            emit(&o, MEMTRACE_FREE_COMPLETED, act_addr[l], act_size[l], 0);
            emit(&o, MEMTRACE_FREE_COMPLETED, ga, act_size[l] / 2, 0);
        }
        (void)step;
    }
    if (o.n)
        mt_writer_events(o.w, o.buf, o.n);
    char endrec[64];
    snprintf(endrec, sizeof(endrec), "{\"events\":%llu}", (unsigned long long)o.total);
    if (mt_writer_end(o.w, endrec) != 0) {
        fprintf(stderr, "memtrace: gen_trace: cannot finish %s\n", argv[2]);
        return 1;
    }
    return 0;
}
