/* recorder_state.c: state providers. Owns the registered providers (guarded by the
 * recorder's lock) and collects their segments into the state a file ends with. */
#include "config.h"

#include "recorder_impl.h"

#include "before.h"
#include "memtrace.h"
#include "mtx/util.h"
#include "writer.h"

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PROVIDERS 16

struct provider {
    memtrace_state_fn fn;
    void *ctx;
    int handle;
    unsigned calls; /* collections calling the slot's provider now */
};

/* Guarded by mt_rec.lock. */
static struct provider providers[MAX_PROVIDERS];
static int next_handle = 1;

/* This thread is calling providers: a provider that removes itself must not wait for
 * its own call to end. */
static MTX_TLS int tls_collecting;

struct state_buf {
    struct memtrace_segment *segs;
    size_t n, cap;
    int failed;
};

static void state_sink(void *ctx, const struct memtrace_segment *seg)
{
    struct state_buf *sb = ctx;
    if (sb->failed)
        return;
    if (sb->n == sb->cap) {
        size_t cap = sb->cap ? sb->cap * 2 : 64;
        struct memtrace_segment *n = realloc(sb->segs, cap * sizeof *n);
        if (n == NULL) {
            sb->failed = 1;
            return;
        }
        sb->segs = n;
        sb->cap = cap;
    }
    struct memtrace_segment copy = *seg;
    struct memtrace_block *blocks = NULL;
    if (seg->nblocks > 0) {
        blocks = malloc(seg->nblocks * sizeof *blocks);
        if (blocks == NULL) {
            sb->failed = 1;
            return;
        }
        memcpy(blocks, seg->blocks, seg->nblocks * sizeof *blocks);
    }
    copy.blocks = blocks;
    sb->segs[sb->n++] = copy;
}

static void state_free(struct state_buf *sb)
{
    for (size_t i = 0; i < sb->n; i++)
        free((void *)sb->segs[i].blocks);
    free(sb->segs);
}

/* Collects the state from every provider; must be called without the lock. */
static void state_collect(struct state_buf *sb)
{
    struct provider p[MAX_PROVIDERS];
    mt_rlock();
    memcpy(p, providers, sizeof p);
    for (int i = 0; i < MAX_PROVIDERS; i++)
        if (p[i].fn != NULL)
            providers[i].calls++;
    mt_runlock();
    memset(sb, 0, sizeof *sb);
    int was = tls_collecting;
    tls_collecting = 1;
    for (int i = 0; i < MAX_PROVIDERS; i++) {
        if (p[i].fn == NULL)
            continue;
        p[i].fn(p[i].ctx, state_sink, sb);
        mt_rlock();
        providers[i].calls--;
        mt_runlock();
    }
    tls_collecting = was;
}

int memtrace_state_provider_add(memtrace_state_fn fn, void *ctx)
{
    if (fn == NULL)
        return MEMTRACE_EINVAL;
    int rc = MEMTRACE_ENOMEM;
    mt_rlock();
    for (int i = 0; i < MAX_PROVIDERS; i++) {
        if (providers[i].fn == NULL) {
            providers[i].fn = fn;
            providers[i].ctx = ctx;
            providers[i].handle = rc = next_handle++;
            break;
        }
    }
    mt_runlock();
    return rc;
}

int memtrace_state_provider_remove(int handle)
{
    int rc = MEMTRACE_EINVAL, slot = -1;
    mt_rlock();
    for (int i = 0; i < MAX_PROVIDERS; i++) {
        if (providers[i].fn != NULL && providers[i].handle == handle) {
            providers[i].fn = NULL;
            providers[i].ctx = NULL;
            providers[i].handle = 0;
            slot = i;
            rc = 0;
        }
    }
    /* The owner frees ctx once this returns: wait for the calls under way. */
    while (slot >= 0 && !tls_collecting && providers[slot].calls > 0) {
        mt_runlock();
        sched_yield();
        mt_rlock();
    }
    mt_runlock();
    return rc;
}

void mt_state_atfork_child(void)
{
    for (int i = 0; i < MAX_PROVIDERS; i++)
        providers[i].calls = 0; /* the collecting threads are not in the child */
    tls_collecting = 0;
}

int mt_state_now(struct mt_state_now *s)
{
    struct state_buf sb;
    s->time_ns = mtx_now_ns();
    state_collect(&sb);
    if (sb.failed) {
        state_free(&sb);
        memset(s, 0, sizeof(*s));
        return MEMTRACE_ENOMEM;
    }
    s->segs = sb.segs;
    s->n = sb.n;
    return 0;
}

void mt_state_now_free(struct mt_state_now *s)
{
    struct state_buf sb = {.segs = s->segs, .n = s->n};
    state_free(&sb);
    memset(s, 0, sizeof(*s));
}

int mt_state_write(struct mt_writer *w, struct mt_table_marks *marks)
{
    struct mt_state_now s;
    int rc = mt_state_now(&s);
    if (rc == 0)
        rc = mt_state_now_write(w, marks, &s);
    mt_state_now_free(&s);
    return rc;
}

int mt_state_now_write(struct mt_writer *w, struct mt_table_marks *marks,
                       const struct mt_state_now *s)
{
    int rc = mt_tables_write(w, marks);
    return rc ? rc : mt_writer_state(w, s->time_ns, s->segs, s->n);
}

int mt_state_before_write(struct mt_writer *w, struct mt_table_marks *marks, struct mt_before *b,
                          uint64_t time_ns, const struct mt_state_now *fin)
{
    struct mt_before_state pre = {0};
    int rc = mt_before_state(b, fin->segs, fin->n, &pre);
    if (rc == 0 && pre.nsegs)
        rc = mt_tables_write(w, marks);
    if (rc == 0 && pre.nsegs)
        rc = mt_writer_state(w, time_ns, pre.segs, pre.nsegs);
    mt_before_state_free(&pre);
    return rc;
}
