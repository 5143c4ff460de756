/* writer_thread.c: a memory writer fed on a thread of its own (see writer.h).
 *
 * The caller's thread only copies each call's arguments into a job and queues it;
 * the thread runs the jobs in order on a memory writer, where the encoding and
 * zlib's deflate, the costly part of writing events, happen. The queue holds at
 * most QUEUE_MAX jobs, so a caller faster than deflate waits instead of piling up
 * copies. The first error is kept and the jobs after it are dropped. */
#include "config.h"

#include "writer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define QUEUE_MAX 8

enum { J_STRINGS, J_FRAMES, J_STACKS, J_EVENTS };

struct job {
    struct job *next;
    int kind;
    uint32_t first_id;
    size_t n;
    void *a, *b; /* copies: the pointers, frames, parents or events; the stack frames */
};

struct mt_wthread {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* a job queued, one done, or the end asked */
    struct job *head, *tail;
    size_t queued;
    int ending;
    int rc;
    struct mt_writer *mem;
};

static void job_free(struct job *j)
{
    free(j->a);
    free(j->b);
    free(j);
}

static int job_run(struct mt_writer *w, const struct job *j)
{
    switch (j->kind) {
    case J_STRINGS:
        return mt_writer_strings(w, j->first_id, j->n, j->a);
    case J_FRAMES:
        return mt_writer_frames(w, j->first_id, j->n, j->a);
    case J_STACKS:
        return mt_writer_stacks(w, j->first_id, j->n, j->a, j->b);
    default:
        return mt_writer_events(w, j->a, j->n);
    }
}

static void *worker(void *arg)
{
    struct mt_wthread *t = arg;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        while (!t->head && !t->ending)
            pthread_cond_wait(&t->cond, &t->lock);
        struct job *j = t->head;
        if (!j)
            break;
        t->head = j->next;
        if (!t->head)
            t->tail = NULL;
        int failed = t->rc;
        pthread_mutex_unlock(&t->lock);
        int rc = failed ? 0 : job_run(t->mem, j);
        job_free(j);
        pthread_mutex_lock(&t->lock);
        if (rc && !t->rc)
            t->rc = rc;
        t->queued--;
        pthread_cond_broadcast(&t->cond);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

int mt_wthread_start(struct mt_wthread **out)
{
    struct mt_wthread *t = calloc(1, sizeof(*t));
    *out = NULL;
    if (!t)
        return MEMTRACE_ENOMEM;
    if (mt_writer_open_mem(&t->mem) != 0) {
        free(t);
        return MEMTRACE_ENOMEM;
    }
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cond, NULL);
    if (pthread_create(&t->thread, NULL, worker, t) != 0) {
        pthread_cond_destroy(&t->cond);
        pthread_mutex_destroy(&t->lock);
        mt_writer_abort(t->mem);
        free(t);
        return MEMTRACE_ENOMEM;
    }
    *out = t;
    return 0;
}

/* Queues a job of kind over copies of a (n items of asize bytes) and b (bsize). */
static int queue(struct mt_wthread *t, int kind, uint32_t first_id, size_t n, const void *a,
                 size_t asize, const void *b, size_t bsize)
{
    struct job *j = calloc(1, sizeof(*j));
    if (j) {
        j->a = malloc(n * asize + 1);
        j->b = b ? malloc(n * bsize + 1) : NULL;
    }
    if (!j || !j->a || (b && !j->b)) {
        if (j)
            job_free(j);
        pthread_mutex_lock(&t->lock);
        if (!t->rc)
            t->rc = MEMTRACE_ENOMEM;
        pthread_mutex_unlock(&t->lock);
        return MEMTRACE_ENOMEM;
    }
    memcpy(j->a, a, n * asize);
    if (b)
        memcpy(j->b, b, n * bsize);
    j->kind = kind;
    j->first_id = first_id;
    j->n = n;
    pthread_mutex_lock(&t->lock);
    while (t->queued >= QUEUE_MAX)
        pthread_cond_wait(&t->cond, &t->lock);
    if (t->tail)
        t->tail->next = j;
    else
        t->head = j;
    t->tail = j;
    t->queued++;
    int rc = t->rc;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int mt_wthread_strings(struct mt_wthread *t, uint32_t first_id, size_t n, const char *const *s)
{
    return n ? queue(t, J_STRINGS, first_id, n, s, sizeof(*s), NULL, 0) : 0;
}

int mt_wthread_frames(struct mt_wthread *t, uint32_t first_id, size_t n,
                      const struct mt_frame_rec *f)
{
    return n ? queue(t, J_FRAMES, first_id, n, f, sizeof(*f), NULL, 0) : 0;
}

int mt_wthread_stacks(struct mt_wthread *t, uint32_t first_id, size_t n, const uint32_t *parent,
                      const uint32_t *frame)
{
    return n ? queue(t, J_STACKS, first_id, n, parent, sizeof(*parent), frame, sizeof(*frame)) : 0;
}

int mt_wthread_events(struct mt_wthread *t, const struct memtrace_event *ev, size_t n)
{
    return n ? queue(t, J_EVENTS, 0, n, ev, sizeof(*ev), NULL, 0) : 0;
}

/* Stops the thread once the queue is empty; the first error. */
static int stop(struct mt_wthread *t)
{
    pthread_mutex_lock(&t->lock);
    t->ending = 1;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->lock);
    return t->rc;
}

int mt_wthread_finish(struct mt_wthread *t, struct mt_writer **mem)
{
    int rc = stop(t);
    *mem = NULL;
    if (rc == 0)
        *mem = t->mem;
    else
        mt_writer_abort(t->mem);
    free(t);
    return rc;
}

void mt_wthread_cancel(struct mt_wthread *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->lock);
    if (!t->rc)
        t->rc = MEMTRACE_EINVAL; /* the jobs left are dropped, not run */
    pthread_mutex_unlock(&t->lock);
    stop(t);
    mt_writer_abort(t->mem);
    free(t);
}
