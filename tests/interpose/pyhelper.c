/* pyhelper.c: a pure C thread for tests/interpose/python_prog.py. The thread has no
 * Python thread state: its events must carry native stacks only. It reaches the
 * driver the way a library does, through dlopen and dlsym (so the preload's hook
 * hands it the wrappers). */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef int (*ctx_set_fn)(void *ctx);
typedef int (*alloc_fn)(uint64_t *p, size_t n);
typedef int (*free_fn)(uint64_t p);

struct job {
    void *ctx;
    int n;
    size_t size;
    int done;
};

static void *run(void *arg)
{
    struct job *j = arg;
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h == NULL)
        return NULL;
    ctx_set_fn set = (ctx_set_fn)dlsym(h, "cuCtxSetCurrent");
    alloc_fn a = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    free_fn f = (free_fn)dlsym(h, "cuMemFree_v2");
    if (set == NULL || a == NULL || f == NULL || set(j->ctx) != 0)
        return NULL;
    for (int i = 0; i < j->n; i++) {
        uint64_t p;
        if (a(&p, j->size) == 0 && f(p) == 0)
            j->done++;
    }
    return NULL;
}

/* Allocates and frees size bytes n times on a new C thread with context ctx;
 * returns how many pairs succeeded. */
__attribute__((visibility("default"))) int pyhelper_c_thread(void *ctx, int n, size_t size)
{
    struct job j = {ctx, n, size, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, run, &j) != 0)
        return -1;
    pthread_join(t, NULL);
    return j.done;
}
