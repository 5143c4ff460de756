/* workload: one allocation pattern, run either through memtrace's caching allocator
 * with recording and streaming on, or through malloc and free (to be run under
 * heaptrack), so that both tools' analysis commands can be timed on the same work.
 *
 *   workload training|churn OPS --memtrace OUT.memtrace
 *   workload training|churn OPS --malloc
 *
 * OPS counts allocations and frees together. Calls go through functions that call
 * each other (none inlined, none a tail call), so the unwinder sees distinct stacks:
 *
 *   training  per step, activations allocated layer by layer in forward and freed in
 *             reverse in backward, a gradient per layer held until the optimizer step,
 *             a workspace per layer freed at once; the optimizer's state is allocated
 *             in the first step and lives to the end.
 *   churn     random sizes (16 B to 16 KiB, log-uniform) and random lifetimes over a
 *             pool of 8192 slots (about half of them live), allocated from 2,720 call paths (1 to 4
 * levels of 4 functions, then one of 8 leaf sites); the allocator reuses freed addresses as it
 * does.
 *
 * What is live at the end is left allocated: both tools then have leaks to report. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memtrace.h"
#include "memtrace_alloc.h"
#include "memtrace_device.h"

/* clang has no noclone (it does not clone functions the way GCC does). */
#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif
/* After a call, so that it is never a tail call and its frame stays on the stack. */
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

static struct memtrace_allocator *alloc;
static uint64_t ops, max_ops;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "workload: %s: %s\n", what, memtrace_strerror(rc));
    exit(1);
}

/* The one place that allocates: the device's caching allocator, or malloc. */
static NOINLINE uintptr_t dev_alloc(size_t size)
{
    ops++;
    if (!alloc) {
        void *p = malloc(size);
        if (!p)
            die("malloc", MEMTRACE_ENOMEM);
        KEEP(p);
        return (uintptr_t)p;
    }
    uint64_t addr;
    int rc = memtrace_alloc_malloc(alloc, size, NULL, &addr);
    if (rc)
        die("memtrace_alloc_malloc", rc);
    return (uintptr_t)addr;
}

static NOINLINE void dev_free(uintptr_t p)
{
    ops++;
    if (!alloc)
        free((void *)p);
    else
        memtrace_alloc_free(alloc, p);
}

/* ---- training ---- */

enum { LAYERS = 8 };

static size_t act_size(int l)
{
    return 4096 * (size_t)(l + 1) + 512 * (size_t)(rnd() % 4);
}

static NOINLINE uintptr_t alloc_activation(int l)
{
    uintptr_t p = dev_alloc(act_size(l));
    KEEP(p);
    return p;
}

static NOINLINE uintptr_t linear_forward(int l)
{
    uintptr_t p = alloc_activation(l);
    KEEP(p);
    return p;
}

static NOINLINE uintptr_t relu_forward(int l)
{
    uintptr_t p = alloc_activation(l);
    KEEP(p);
    return p;
}

static NOINLINE uintptr_t norm_forward(int l)
{
    uintptr_t p = alloc_activation(l);
    KEEP(p);
    return p;
}

static NOINLINE void forward(uintptr_t *acts)
{
    for (int l = 0; l < LAYERS; l++) {
        acts[l] = l % 3 == 0 ? linear_forward(l) : l % 3 == 1 ? relu_forward(l) : norm_forward(l);
        KEEP(acts[l]);
    }
}

static NOINLINE uintptr_t alloc_grad(int l)
{
    uintptr_t p = dev_alloc(2048 * (size_t)(l + 1));
    KEEP(p);
    return p;
}

static NOINLINE void workspace(int l)
{
    uintptr_t w = dev_alloc(1024 + 256 * (size_t)l);
    KEEP(w);
    dev_free(w);
}

static NOINLINE void layer_backward(int l, uintptr_t *acts, uintptr_t *grads)
{
    grads[l] = alloc_grad(l);
    workspace(l);
    dev_free(acts[l]);
    KEEP(grads[l]);
}

static NOINLINE void backward(uintptr_t *acts, uintptr_t *grads)
{
    for (int l = LAYERS - 1; l >= 0; l--) {
        layer_backward(l, acts, grads);
        KEEP(grads);
    }
}

static NOINLINE uintptr_t alloc_state(int l)
{
    uintptr_t p = dev_alloc(8192 * (size_t)(l + 1));
    KEEP(p);
    return p;
}

static NOINLINE void optimizer_init(uintptr_t *state)
{
    for (int l = 0; l < 2 * LAYERS; l++) {
        state[l] = alloc_state(l / 2);
        KEEP(state[l]);
    }
}

static NOINLINE void optimizer_step(uintptr_t *grads)
{
    for (int l = 0; l < LAYERS; l++)
        dev_free(grads[l]);
    KEEP(grads);
}

static NOINLINE void train_step(uintptr_t *acts, uintptr_t *grads)
{
    forward(acts);
    backward(acts, grads);
    optimizer_step(grads);
    KEEP(acts);
}

static NOINLINE void run_training(void)
{
    uintptr_t acts[LAYERS], grads[LAYERS], state[2 * LAYERS];
    optimizer_init(state);
    while (ops < max_ops)
        train_step(acts, grads);
    KEEP(state);
}

/* ---- churn ---- */

enum { SLOTS = 8192 };

typedef uintptr_t (*site_fn)(size_t size);
typedef uintptr_t (*mid_fn)(int depth, unsigned sel, size_t size);

#define SITE(n)                                                                                    \
    static NOINLINE uintptr_t site_##n(size_t size)                                                \
    {                                                                                              \
        uintptr_t p = dev_alloc(size + (n));                                                       \
        KEEP(p);                                                                                   \
        return p;                                                                                  \
    }
SITE(0)
SITE(1)
SITE(2)
SITE(3)
SITE(4)
SITE(5)
SITE(6)
SITE(7)
static const site_fn sites[8] = {site_0, site_1, site_2, site_3, site_4, site_5, site_6, site_7};

static const mid_fn mids[4];

#define MID(name)                                                                                  \
    static NOINLINE uintptr_t name(int depth, unsigned sel, size_t size)                           \
    {                                                                                              \
        uintptr_t p = depth > 0 ? mids[sel & 3](depth - 1, sel >> 2, size) : sites[sel & 7](size); \
        KEEP(p);                                                                                   \
        return p;                                                                                  \
    }
MID(parse_input)
MID(build_graph)
MID(run_kernel)
MID(cache_lookup)
static const mid_fn mids[4] = {parse_input, build_graph, run_kernel, cache_lookup};

static NOINLINE void churn_op(uintptr_t *slot, size_t *live, size_t *nlive, size_t *where)
{
    /* Allocate with probability 1 - live/SLOTS: the live set hovers around half the
     * pool, and a block lives for about SLOTS operations, some for far longer. */
    if (rnd() % SLOTS >= *nlive) {
        size_t size = (size_t)16 << (rnd() % 10);
        size += rnd() % size;
        unsigned sel = (unsigned)rnd();
        int depth = (int)(rnd() % 4);
        size_t s = live[*nlive];
        slot[s] = mids[sel & 3](depth, sel >> 2, size);
        where[s] = (*nlive)++;
    } else {
        size_t k = rnd() % *nlive;
        size_t s = live[k];
        dev_free(slot[s]);
        slot[s] = 0;
        /* Swap the freed slot out of the live part of the list. */
        size_t last = live[--*nlive];
        live[k] = last;
        where[last] = k;
        live[*nlive] = s;
        where[s] = *nlive;
    }
}

static NOINLINE void run_churn(void)
{
    static uintptr_t slot[SLOTS];
    static size_t live[SLOTS], where[SLOTS];
    size_t nlive = 0;
    for (size_t k = 0; k < SLOTS; k++)
        live[k] = where[k] = k;
    while (ops < max_ops)
        churn_op(slot, live, &nlive, where);
    KEEP(slot);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int usage(FILE *f, int status)
{
    fputs("usage: workload training|churn OPS --memtrace OUT.memtrace\n"
          "       workload training|churn OPS --malloc\n"
          "Runs OPS allocations and frees of a training-loop or a churn pattern, through\n"
          "memtrace's caching allocator on the host device with recording streamed to\n"
          "OUT.memtrace, or through malloc and free (run it under heaptrack).\n",
          f);
    return status;
}

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
        return usage(stdout, 0);
    if (argc < 4 || (strcmp(argv[1], "training") != 0 && strcmp(argv[1], "churn") != 0))
        return usage(stderr, 2);
    char *end;
    unsigned long long n = strtoull(argv[2], &end, 10);
    if (!argv[2][0] || *end || n == 0 || n > 10000000000ull) {
        fprintf(stderr, "workload: OPS must be a whole number from 1 to 10000000000, not '%s'\n",
                argv[2]);
        return 2;
    }
    max_ops = n;
    int training = strcmp(argv[1], "training") == 0;
    const char *out = NULL;
    if (strcmp(argv[3], "--memtrace") == 0 && argc == 5)
        out = argv[4];
    else if (strcmp(argv[3], "--malloc") != 0 || argc != 4)
        return usage(stderr, 2);

    struct memtrace_device *dev = NULL;
    int rc;
    if (out) {
        struct memtrace_options o;
        memtrace_options_init(&o);
        o.stream_path = out;
        if ((rc = memtrace_record_history(&o)))
            die("memtrace_record_history", rc);
        if ((rc = memtrace_device_open_host(&dev, 64ull << 30)))
            die("memtrace_device_open_host", rc);
        if ((rc = memtrace_alloc_create(&alloc, dev)))
            die("memtrace_alloc_create", rc);
    }
    double t0 = now_s();
    if (training)
        run_training();
    else
        run_churn();
    double t = now_s() - t0;
    if (out) {
        struct memtrace_counts c;
        memtrace_get_counts(&c);
        if ((rc = memtrace_record_history(NULL)))
            die("memtrace_record_history", rc);
        fprintf(stderr, "workload: %s, %llu operations, %llu events recorded in %.2f s\n", argv[1],
                (unsigned long long)ops, (unsigned long long)c.recorded, t);
        memtrace_alloc_destroy(alloc);
        memtrace_device_close(dev);
    } else {
        fprintf(stderr, "workload: %s, %llu operations through malloc in %.2f s\n", argv[1],
                (unsigned long long)ops, t);
    }
    return 0;
}
