/* cache_threads-t: threads allocating and freeing on their own streams at once. */
#include <pthread.h>

#include "cache_impl.h"
#include "tests/tap.h"

#define THREADS 4
#define ROUNDS  20000

static struct memtrace_allocator *a;
static struct memtrace_device *d;
static int failures[THREADS];

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    struct memtrace_stream *s = NULL;
    uint64_t held[16] = {0};
    uint64_t x = (uint64_t)t * 7919 + 1;
    if (t > 0 && memtrace_stream_create(d, &s))
        failures[t]++;
    for (int i = 0; i < ROUNDS; i++) {
        int slot = i % 16;
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        if (held[slot] && memtrace_alloc_free(a, held[slot]))
            failures[t]++;
        held[slot] = 0;
        if (memtrace_alloc_malloc(a, (x >> 33) % (t == 0 ? 4 << 20 : 256 << 10) + 1, s,
                                  &held[slot]))
            failures[t]++;
    }
    for (int i = 0; i < 16; i++)
        if (held[i] && memtrace_alloc_free(a, held[i]))
            failures[t]++;
    if (s)
        memtrace_stream_destroy(s);
    return NULL;
}

int main(void)
{
    pthread_t th[THREADS];
    struct memtrace_alloc_stats st;
    if (memtrace_device_open_host(&d, 8ull << 30) || memtrace_alloc_create(&a, d))
        skip_all("no host device");
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++)
        is_int(0, failures[i], "thread %d: no failure", i);
    memtrace_alloc_get_stats(a, &st);
    is_int(0, st.allocation[0].current, "no allocation left");
    is_int(0, st.allocated_bytes[0].current, "no bytes allocated");
    is_int(0, st.active_bytes[0].current, "no bytes active");
    is_int((int64_t)THREADS * ROUNDS, st.allocation[0].allocated, "every malloc counted");
    is_int((int64_t)THREADS * ROUNDS, st.allocation[0].freed, "every free counted");
    is_int(st.allocated_bytes[0].allocated, st.allocated_bytes[0].freed, "bytes balance");
    memtrace_alloc_empty_cache(a);
    memtrace_alloc_get_stats(a, &st);
    is_int(0, st.reserved_bytes[0].current, "all segments returned");
    memtrace_alloc_destroy(a);
    memtrace_device_close(d);
    done_testing();
    return exit_status();
}
