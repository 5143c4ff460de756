/* train_mlp: a 784-256-128-10 MLP trained with Adam on memtrace's host device.
 *
 * Every tensor lives in device memory from memtrace's caching allocator, tagged with
 * a category (parameters, activations, gradients, optimizer); each step is annotated
 * ("step N", "forward", "backward", "optimizer"); the matrix kernels are plain C
 * functions launched on a stream. The history is recorded and written at the end:
 *
 *   train_mlp [out.memtrace] [steps]      (default train.memtrace, 24 steps)
 *   memtrace summary train.memtrace
 *
 * The data are synthetic (a fixed seed): inputs in [-1, 1] labelled by a random
 * linear teacher, so the loss really goes down. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "memtrace.h"
#include "memtrace_alloc.h"
#include "memtrace_device.h"

enum { BATCH = 64, IN = 784, H1 = 256, H2 = 128, OUT = 10, NBATCH = 8 };

static struct memtrace_device *dev;
static struct memtrace_allocator *alloc;
static struct memtrace_stream *stream;

struct tensor {
    uint64_t addr;
    float *p;
    size_t n;
};

static void die(const char *what, int rc)
{
    fprintf(stderr, "train_mlp: %s: %s\n", what, memtrace_strerror(rc));
    exit(1);
}

static struct tensor tensor_new(size_t n)
{
    struct tensor t = {0, NULL, n};
    int rc = memtrace_alloc_malloc(alloc, n * sizeof(float), stream, &t.addr);
    if (rc)
        die("allocation", rc);
    t.p = memtrace_device_ptr(dev, t.addr);
    return t;
}

static void tensor_free(struct tensor *t)
{
    if (t->addr)
        memtrace_alloc_free(alloc, t->addr);
    t->addr = 0;
    t->p = NULL;
}

/* ---- kernels: one argument block, run on the stream's worker ---- */

struct kargs {
    const float *a, *b, *c;
    float *y, *y2;
    int m, k, n;
    float f1, f2, f3;
    int step;
};

static struct kargs *kargs_new(struct kargs v)
{
    struct kargs *k = malloc(sizeof(*k));
    *k = v;
    return k;
}

static void launch(memtrace_kernel_fn fn, struct kargs v)
{
    int rc = memtrace_stream_launch(dev, stream, fn, kargs_new(v));
    if (rc)
        die("launch", rc);
}

/* y[m,n] = a[m,k] b[k,n] + c[n] */
static void k_linear(void *p)
{
    struct kargs *x = p;
    for (int i = 0; i < x->m; i++) {
        float *row = x->y + (size_t)i * x->n;
        for (int j = 0; j < x->n; j++)
            row[j] = x->c[j];
        for (int l = 0; l < x->k; l++) {
            float av = x->a[(size_t)i * x->k + l];
            const float *brow = x->b + (size_t)l * x->n;
            for (int j = 0; j < x->n; j++)
                row[j] += av * brow[j];
        }
    }
    free(x);
}

/* y = max(a, 0) over m values */
static void k_relu(void *p)
{
    struct kargs *x = p;
    for (int i = 0; i < x->m; i++)
        x->y[i] = x->a[i] > 0 ? x->a[i] : 0;
    free(x);
}

/* softmax cross-entropy of logits a[m,n] against labels b (as floats): mean loss
 * into y2[0], d(loss)/d(logits) into y. */
static void k_softmax_xent(void *p)
{
    struct kargs *x = p;
    double loss = 0;
    for (int i = 0; i < x->m; i++) {
        const float *z = x->a + (size_t)i * x->n;
        float *g = x->y + (size_t)i * x->n;
        float mx = z[0];
        for (int j = 1; j < x->n; j++)
            mx = z[j] > mx ? z[j] : mx;
        double sum = 0;
        for (int j = 0; j < x->n; j++)
            sum += exp(z[j] - mx);
        int label = (int)x->b[i];
        for (int j = 0; j < x->n; j++) {
            double pj = exp(z[j] - mx) / sum;
            g[j] = (float)((pj - (j == label)) / x->m);
        }
        loss += -(z[label] - mx - log(sum));
    }
    x->y2[0] = (float)(loss / x->m);
    free(x);
}

/* Backward of y = a b + c with dy: gradient of b (y), of c (y2), and of a (c is
 * reused as the da output when not NULL is passed in .y2's place; see below). */
static void k_linear_grad_w(void *p)
{
    struct kargs *x = p; /* a[m,k] input, b[m,n] dy -> y[k,n] dW, y2[n] db */
    memset(x->y, 0, (size_t)x->k * x->n * sizeof(float));
    memset(x->y2, 0, (size_t)x->n * sizeof(float));
    for (int i = 0; i < x->m; i++) {
        const float *dy = x->b + (size_t)i * x->n;
        for (int l = 0; l < x->k; l++) {
            float av = x->a[(size_t)i * x->k + l];
            float *dw = x->y + (size_t)l * x->n;
            for (int j = 0; j < x->n; j++)
                dw[j] += av * dy[j];
        }
        for (int j = 0; j < x->n; j++)
            x->y2[j] += dy[j];
    }
    free(x);
}

/* da[m,k] = dy[m,n] W[k,n]^T, masked by relu'(pre) when c (the pre-activation) is
 * given. a = dy, b = W, c = pre, y = da. */
static void k_linear_grad_x(void *p)
{
    struct kargs *x = p;
    for (int i = 0; i < x->m; i++)
        for (int l = 0; l < x->k; l++) {
            const float *w = x->b + (size_t)l * x->n;
            const float *dy = x->a + (size_t)i * x->n;
            float s = 0;
            for (int j = 0; j < x->n; j++)
                s += dy[j] * w[j];
            size_t at = (size_t)i * x->k + l;
            x->y[at] = x->c && x->c[at] <= 0 ? 0 : s;
        }
    free(x);
}

/* Adam: y = params, a = grad, y2 = m, c = v (as writable), f1 = lr. */
static void k_adam(void *p)
{
    struct kargs *x = p;
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    float *m = x->y2, *v = (float *)x->c;
    float c1 = 1 - powf(b1, (float)x->step), c2 = 1 - powf(b2, (float)x->step);
    for (int i = 0; i < x->m; i++) {
        float g = x->a[i];
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        x->y[i] -= x->f1 * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
    }
    free(x);
}

/* ---- the model ---- */

struct layer {
    int in, out;
    struct tensor w, b;           /* parameters */
    struct tensor gw, gb;         /* gradients */
    struct tensor mw, mb, vw, vb; /* Adam state */
};

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static float frand(void) /* uniform in [-1, 1) */
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) / (double)(1 << 24)) * 2 - 1;
}

static void layer_init(struct layer *L, int in, int out)
{
    memset(L, 0, sizeof(*L));
    L->in = in;
    L->out = out;
    L->w = tensor_new((size_t)in * out);
    L->b = tensor_new((size_t)out);
    memtrace_device_sync(dev);
    float scale = sqrtf(6.0f / (float)(in + out));
    for (size_t i = 0; i < L->w.n; i++)
        L->w.p[i] = frand() * scale;
    memset(L->b.p, 0, L->b.n * sizeof(float));
}

static void zeros(struct tensor *t, size_t n)
{
    *t = tensor_new(n);
    memset(t->p, 0, n * sizeof(float));
}

int main(int argc, char **argv)
{
    int rc = args_check(argc, argv, 2,
                        "usage: train_mlp [OUT.memtrace [STEPS]]\n"
                        "Trains a 784-256-128-10 MLP on memtrace's host device, recording every\n"
                        "allocation, and writes the history to OUT.memtrace (default\n"
                        "train.memtrace) after STEPS steps (default 24, at most 100000).\n");
    if (rc >= 0)
        return rc;
    const char *out = argc > 1 ? argv[1] : "train.memtrace";
    long long steps = 24;
    if (argc > 2 && args_count(argv, "steps", argv[2], 1, 100000, &steps) != 0)
        return 2;
    struct memtrace_options o;
    memtrace_options_init(&o);
    if ((rc = memtrace_record_history(&o)))
        die("record_history", rc);
    if ((rc = memtrace_device_open(&dev, NULL, 0)))
        die("device_open", rc);
    if ((rc = memtrace_alloc_create(&alloc, dev)))
        die("alloc_create", rc);
    if ((rc = memtrace_stream_create(dev, &stream)))
        die("stream_create", rc);
    printf("train_mlp: %d-%d-%d-%d MLP, batch %d, Adam, %lld steps on %s device \"%s\"\n", IN, H1,
           H2, OUT, BATCH, steps, memtrace_device_backend(dev), memtrace_device_name(dev));

    struct layer L[3];
    memtrace_category_push("parameters");
    layer_init(&L[0], IN, H1);
    layer_init(&L[1], H1, H2);
    layer_init(&L[2], H2, OUT);
    memtrace_category_pop();

    /* A random linear teacher labels the inputs. */
    static float teacher[IN * OUT];
    for (int i = 0; i < IN * OUT; i++)
        teacher[i] = frand();
    memtrace_category_push("data");
    struct tensor xs[NBATCH], ys[NBATCH];
    for (int bi = 0; bi < NBATCH; bi++) {
        xs[bi] = tensor_new((size_t)BATCH * IN);
        ys[bi] = tensor_new(BATCH);
        for (int i = 0; i < BATCH; i++) {
            float *x = xs[bi].p + (size_t)i * IN;
            for (int k = 0; k < IN; k++)
                x[k] = frand();
            int best = 0;
            float bestv = -1e30f;
            for (int j = 0; j < OUT; j++) {
                float s = 0;
                for (int k = 0; k < IN; k++)
                    s += x[k] * teacher[k * OUT + j];
                if (s > bestv) {
                    bestv = s;
                    best = j;
                }
            }
            ys[bi].p[i] = (float)best;
        }
    }
    memtrace_category_pop();

    float first = 0, last = 0;
    for (int step = 1; step <= steps; step++) {
        char name[32];
        snprintf(name, sizeof(name), "step %d", step);
        memtrace_annotate_push(name);
        struct tensor *x = &xs[(step - 1) % NBATCH], *y = &ys[(step - 1) % NBATCH];

        memtrace_annotate_push("forward");
        memtrace_category_push("activations");
        struct tensor z1 = tensor_new((size_t)BATCH * H1), h1 = tensor_new((size_t)BATCH * H1);
        struct tensor z2 = tensor_new((size_t)BATCH * H2), h2 = tensor_new((size_t)BATCH * H2);
        struct tensor logits = tensor_new((size_t)BATCH * OUT), loss = tensor_new(1);
        launch(
            k_linear,
            (struct kargs){
                .a = x->p, .b = L[0].w.p, .c = L[0].b.p, .y = z1.p, .m = BATCH, .k = IN, .n = H1});
        launch(k_relu, (struct kargs){.a = z1.p, .y = h1.p, .m = BATCH * H1});
        launch(
            k_linear,
            (struct kargs){
                .a = h1.p, .b = L[1].w.p, .c = L[1].b.p, .y = z2.p, .m = BATCH, .k = H1, .n = H2});
        launch(k_relu, (struct kargs){.a = z2.p, .y = h2.p, .m = BATCH * H2});
        launch(k_linear, (struct kargs){.a = h2.p,
                                        .b = L[2].w.p,
                                        .c = L[2].b.p,
                                        .y = logits.p,
                                        .m = BATCH,
                                        .k = H2,
                                        .n = OUT});
        memtrace_category_pop();
        memtrace_annotate_pop();

        memtrace_annotate_push("backward");
        memtrace_category_push("gradients");
        for (int l = 0; l < 3; l++) {
            L[l].gw = tensor_new(L[l].w.n);
            L[l].gb = tensor_new(L[l].b.n);
        }
        struct tensor dlogits = tensor_new((size_t)BATCH * OUT);
        struct tensor dh2 = tensor_new((size_t)BATCH * H2), dh1 = tensor_new((size_t)BATCH * H1);
        launch(k_softmax_xent,
               (struct kargs){
                   .a = logits.p, .b = y->p, .y = dlogits.p, .y2 = loss.p, .m = BATCH, .n = OUT});
        launch(k_linear_grad_w, (struct kargs){.a = h2.p,
                                               .b = dlogits.p,
                                               .y = L[2].gw.p,
                                               .y2 = L[2].gb.p,
                                               .m = BATCH,
                                               .k = H2,
                                               .n = OUT});
        launch(k_linear_grad_x, (struct kargs){.a = dlogits.p,
                                               .b = L[2].w.p,
                                               .c = z2.p,
                                               .y = dh2.p,
                                               .m = BATCH,
                                               .k = H2,
                                               .n = OUT});
        launch(k_linear_grad_w, (struct kargs){.a = h1.p,
                                               .b = dh2.p,
                                               .y = L[1].gw.p,
                                               .y2 = L[1].gb.p,
                                               .m = BATCH,
                                               .k = H1,
                                               .n = H2});
        launch(k_linear_grad_x,
               (struct kargs){
                   .a = dh2.p, .b = L[1].w.p, .c = z1.p, .y = dh1.p, .m = BATCH, .k = H1, .n = H2});
        launch(k_linear_grad_w, (struct kargs){.a = x->p,
                                               .b = dh1.p,
                                               .y = L[0].gw.p,
                                               .y2 = L[0].gb.p,
                                               .m = BATCH,
                                               .k = IN,
                                               .n = H1});
        memtrace_category_pop();
        /* Activations die as soon as backward no longer needs them; the stream
         * orders their reuse after the kernels already queued. */
        tensor_free(&z1);
        tensor_free(&h1);
        tensor_free(&z2);
        tensor_free(&h2);
        tensor_free(&logits);
        tensor_free(&dlogits);
        tensor_free(&dh2);
        tensor_free(&dh1);
        memtrace_annotate_pop();

        memtrace_annotate_push("optimizer");
        if (step == 1) { /* Adam state appears at the first step, as in PyTorch */
            memtrace_category_push("optimizer");
            memtrace_device_sync(dev);
            for (int l = 0; l < 3; l++) {
                zeros(&L[l].mw, L[l].w.n);
                zeros(&L[l].vw, L[l].w.n);
                zeros(&L[l].mb, L[l].b.n);
                zeros(&L[l].vb, L[l].b.n);
            }
            memtrace_category_pop();
        }
        for (int l = 0; l < 3; l++) {
            launch(k_adam, (struct kargs){.a = L[l].gw.p,
                                          .y = L[l].w.p,
                                          .y2 = L[l].mw.p,
                                          .c = L[l].vw.p,
                                          .m = (int)L[l].w.n,
                                          .f1 = 2e-3f,
                                          .step = step});
            launch(k_adam, (struct kargs){.a = L[l].gb.p,
                                          .y = L[l].b.p,
                                          .y2 = L[l].mb.p,
                                          .c = L[l].vb.p,
                                          .m = (int)L[l].b.n,
                                          .f1 = 2e-3f,
                                          .step = step});
            tensor_free(&L[l].gw); /* zero_grad(set_to_none=True) */
            tensor_free(&L[l].gb);
        }
        memtrace_annotate_pop();

        memtrace_stream_sync(dev, stream);
        float lv = loss.p[0];
        tensor_free(&loss);
        if (step == 1)
            first = lv;
        last = lv;
        struct memtrace_alloc_stats st;
        memtrace_alloc_get_stats(alloc, &st);
        printf("step %2d  loss %.4f  allocated %6.2f MiB  reserved %6.2f MiB\n", step, lv,
               st.allocated_bytes[MEMTRACE_STAT_ALL].current / 1048576.0,
               st.reserved_bytes[MEMTRACE_STAT_ALL].current / 1048576.0);
        memtrace_annotate_pop();
    }
    printf("loss %.4f -> %.4f (%s)\n", first, last, last < first ? "decreasing" : "NOT decreasing");

    struct memtrace_alloc_stats st;
    memtrace_alloc_get_stats(alloc, &st);
    printf("peak allocated %.2f MiB, peak reserved %.2f MiB, %lld device allocations\n",
           st.allocated_bytes[MEMTRACE_STAT_ALL].peak / 1048576.0,
           st.reserved_bytes[MEMTRACE_STAT_ALL].peak / 1048576.0, (long long)st.num_device_alloc);
    if ((rc = memtrace_dump_snapshot(out)))
        die("dump_snapshot", rc);
    struct memtrace_counts c;
    memtrace_get_counts(&c);
    printf("wrote %s: %llu events\n", out, (unsigned long long)c.recorded);

    for (int bi = 0; bi < NBATCH; bi++) {
        tensor_free(&xs[bi]);
        tensor_free(&ys[bi]);
    }
    for (int l = 0; l < 3; l++) {
        struct tensor *ts[] = {&L[l].w, &L[l].b, &L[l].mw, &L[l].mb, &L[l].vw, &L[l].vb};
        for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++)
            tensor_free(ts[i]);
    }
    memtrace_record_history(NULL);
    memtrace_alloc_destroy(alloc);
    memtrace_stream_destroy(stream);
    memtrace_device_close(dev);
    return last < first ? 0 : 1;
}
