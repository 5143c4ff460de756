/* training.h: a deterministic synthetic event stream shaped like a training loop,
 * shared by the format's size test and bench/format_bench.c.
 *
 * Each iteration runs the same program: a forward pass allocates activations (and
 * frees short-lived temporaries), a backward pass frees activations in reverse
 * order and allocates gradients, an optimizer step frees the gradients. A caching
 * allocator hands out the same addresses every iteration. Each free is a
 * free_requested followed by a free_completed. Time advances 1-50 us per event
 * (fixed per program step) plus up to +-12.5% random jitter; a second thread
 * (a data loader) records now and then, with its clock a little behind. */
#ifndef MEMTRACE_TEST_TRAINING_H
#define MEMTRACE_TEST_TRAINING_H

#include <stdint.h>
#include <string.h>

#include "memtrace.h"
#include "rng.h"

#define MT_TRAIN_TENSORS 96
#define MT_TRAIN_OPS     (6 * MT_TRAIN_TENSORS)

struct mt_train_op {
    uint8_t action;
    uint16_t tensor;
    uint32_t base_delta_ns;
};

struct mt_training {
    uint64_t rng;
    uint64_t now;
    size_t pos, nops;
    uint64_t addr[MT_TRAIN_TENSORS];
    uint64_t size[MT_TRAIN_TENSORS];
    uint64_t requested[MT_TRAIN_TENSORS];
    uint32_t stack[MT_TRAIN_TENSORS];
    struct mt_train_op ops[MT_TRAIN_OPS];
};

static inline uint64_t mt_train_rand(struct mt_training *t)
{
    return test_rand_star(&t->rng);
}

static inline void mt_train_push(struct mt_training *t, uint8_t action, int tensor)
{
    struct mt_train_op *op = &t->ops[t->nops++];
    op->action = action;
    op->tensor = (uint16_t)tensor;
    op->base_delta_ns = (uint32_t)(1000 + mt_train_rand(t) % 49000);
}

static inline void mt_training_init(struct mt_training *t, uint64_t seed)
{
    memset(t, 0, sizeof(*t));
    t->rng = seed * 0x9E3779B97F4A7C15ULL + 1;
    t->now = 1000000000ULL + seed;
    uint64_t small = 0x7f0000000000ULL, large = 0x7f4000000000ULL;
    for (int i = 0; i < MT_TRAIN_TENSORS; i++) {
        uint64_t req = (mt_train_rand(t) % 4 == 0) ? 512 + mt_train_rand(t) % (1 << 20)
                                                   : (1 << 20) + mt_train_rand(t) % (64 << 20);
        uint64_t sz = (req + 511) & ~511ULL;
        t->requested[i] = req;
        t->size[i] = sz;
        if (sz <= (1 << 20)) {
            t->addr[i] = small;
            small += sz;
        } else {
            t->addr[i] = large;
            large += (sz + (2 << 20) - 1) & ~((2ULL << 20) - 1);
        }
        t->stack[i] = 1 + (uint32_t)(mt_train_rand(t) % 4000);
    }
    int half = MT_TRAIN_TENSORS / 2;
    /* forward: activations 0..half-1, each with a temporary from the second half */
    for (int i = 0; i < half; i++) {
        mt_train_push(t, MEMTRACE_ALLOC, i);
        if (i % 3 == 0) {
            mt_train_push(t, MEMTRACE_ALLOC, half + i);
            mt_train_push(t, MEMTRACE_FREE_REQUESTED, half + i);
            mt_train_push(t, MEMTRACE_FREE_COMPLETED, half + i);
        }
    }
    /* backward: free activations in reverse, allocate gradients */
    for (int i = half - 1; i >= 0; i--) {
        mt_train_push(t, MEMTRACE_FREE_REQUESTED, i);
        mt_train_push(t, MEMTRACE_FREE_COMPLETED, i);
        if (i % 3 != 0)
            mt_train_push(t, MEMTRACE_ALLOC, half + i);
    }
    /* optimizer step: free gradients */
    for (int i = 0; i < half; i++) {
        if (i % 3 != 0) {
            mt_train_push(t, MEMTRACE_FREE_REQUESTED, half + i);
            mt_train_push(t, MEMTRACE_FREE_COMPLETED, half + i);
        }
    }
}

/* Fills ev[0..n) with the next n events of the stream. */
static inline void mt_training_next(struct mt_training *t, struct memtrace_event *ev, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        const struct mt_train_op *op = &t->ops[t->pos];
        t->pos = (t->pos + 1) % t->nops;
        uint64_t r = mt_train_rand(t);
        uint32_t jitter = op->base_delta_ns / 4;
        t->now += op->base_delta_ns - jitter / 2 + r % (jitter + 1);
        struct memtrace_event *e = &ev[k];
        memset(e, 0, sizeof(*e));
        int loader = (r >> 32) % 64 == 0;
        e->time_ns = loader ? t->now - 20000 : t->now;
        e->tid = loader ? 4243 : 4242;
        e->action = op->action;
        e->addr = t->addr[op->tensor];
        e->size = t->size[op->tensor];
        e->requested_size = t->requested[op->tensor];
        e->stream = 0x5555a0001000ULL;
        e->device = 0;
        e->pool = e->size <= (1 << 20) ? 1 : 2;
        e->stack = op->action == MEMTRACE_ALLOC ? t->stack[op->tensor] : 0;
        e->source = 1;
    }
}

#endif
