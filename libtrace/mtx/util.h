/* util.h: small helpers safe on hot and interposed paths: no stdio, no libc malloc. */
#ifndef MEMTRACE_UTIL_H
#define MEMTRACE_UTIL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define MTX_HIDDEN __attribute__((visibility("hidden")))
/* Thread-locals on hot paths: initial-exec avoids a __tls_get_addr call per access
 * in a shared library. Keep them few and small: a dlopen'd library takes them from
 * the static TLS surplus. */
#define MTX_TLS           __thread __attribute__((tls_model("initial-exec")))
#define MTX_LIKELY(x)     __builtin_expect(!!(x), 1)
#define MTX_UNLIKELY(x)   __builtin_expect(!!(x), 0)
#define MTX_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* CLOCK_MONOTONIC in nanoseconds: from a TSC clock that follows it (util.c) where
 * the TSC is constant, nonstop and the kernel's clocksource, unless MEMTRACE_CLOCK is
 * "monotonic"; else from clock_gettime. Never goes back, across threads too.
 *
 * Every event reads it, so the common case is inline: the newest TSC segment's map,
 * published like a seqlock, is loaded before the TSC is read, so that those loads run
 * beside the rdtsc instead of after it. A tick outside that segment, or any clock
 * other than the TSC, takes mtx_now_ns_slow.
 *
 * rdtsc is not ordered with the caller's memory accesses: the CPU may run it before
 * a lock acquisition that precedes it, so a thread that takes a lock right after
 * another thread read the clock can read an earlier tick. Every value therefore
 * passes through a floor, the largest value returned so far, which is what makes
 * "across threads" true. It costs a load and, while time advances, a compare-and-swap
 * that depends on the rdtsc's result and runs in its shadow (util.c). */
struct mtx_clock_fast {
    _Atomic uint64_t seq;                  /* odd while written, or before any segment */
    _Atomic uint64_t tsc0, len, ns0, mult; /* ns = ns0 + (tsc - tsc0) * mult / 2^32 */
};
extern struct mtx_clock_fast mtx_clock_fast;
/* Written by every read that moves the clock on: a cache line of its own, so that
 * the fast map stays shared and clean in every reader's cache. */
struct mtx_clock_floor {
    _Alignas(64) _Atomic uint64_t ns;
    char pad[64 - sizeof(uint64_t)];
};
extern struct mtx_clock_floor mtx_clock_floor;
uint64_t mtx_now_ns_slow(void);

static inline uint64_t mtx_tsc_read(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#else
    return 0;
#endif
}

/* The clock's value before the floor: monotonic within one thread. */
static inline uint64_t mtx_now_ns_unfloored(void)
{
    struct mtx_clock_fast *f = &mtx_clock_fast;
    uint64_t seq = atomic_load_explicit(&f->seq, memory_order_acquire);
    uint64_t tsc0 = atomic_load_explicit(&f->tsc0, memory_order_relaxed);
    uint64_t len = atomic_load_explicit(&f->len, memory_order_relaxed);
    uint64_t ns0 = atomic_load_explicit(&f->ns0, memory_order_relaxed);
    uint64_t mult = atomic_load_explicit(&f->mult, memory_order_relaxed);
    uint64_t t = mtx_tsc_read();
    atomic_thread_fence(memory_order_acquire);
    if (MTX_LIKELY(t - tsc0 < len && !(seq & 1) &&
                  atomic_load_explicit(&f->seq, memory_order_relaxed) == seq))
        return ns0 + (uint64_t)(((unsigned __int128)(t - tsc0) * mult) >> 32);
    return mtx_now_ns_slow();
}

static inline uint64_t mtx_now_ns(void)
{
    uint64_t v = mtx_now_ns_unfloored();
    /* A read that happened before this one (through any lock or atomic of the
     * caller's) left at least its value here; the max is kept with a CAS so that two
     * racing readers cannot lower it. Relaxed is enough: the caller's own
     * synchronization orders the floor's store before this load. */
    uint64_t floor = atomic_load_explicit(&mtx_clock_floor.ns, memory_order_relaxed);
    while (v > floor)
        if (atomic_compare_exchange_weak_explicit(&mtx_clock_floor.ns, &floor, v,
                                                  memory_order_relaxed, memory_order_relaxed))
            return v;
    return floor;
}
/* 1 when mtx_now_ns reads the TSC. */
int mtx_clock_is_tsc(void);
/* Tests only, with no other thread reading the clock: restarts the TSC clock with
 * segments of 2^seg_shift ticks and a first slope off by skew_ppm, and clears the
 * floor (so the clock may go back across a restart). 0, or -1 when the TSC clock is
 * not in use or seg_shift is outside 12..32. */
int mtx_clock_test_restart(unsigned seg_shift, int skew_ppm);
/* CLOCK_REALTIME in nanoseconds. */
uint64_t mtx_wall_ns(void);
/* Kernel thread id of the caller, cached per thread (inline: every event asks). */
extern MTX_TLS uint32_t mtx_tls_tid;
uint32_t mtx_gettid_slow(void);
static inline uint32_t mtx_gettid(void)
{
    uint32_t tid = mtx_tls_tid;
    return MTX_LIKELY(tid != 0) ? tid : mtx_gettid_slow();
}

/* Formats into buf like snprintf for %s %d %u %ld %lu %lld %llu %zu %x %lx %llx %p %%
 * only, with no locale and no malloc. Always NUL-terminates (if size > 0); returns
 * the length written. */
size_t mtx_vformat(char *buf, size_t size, const char *fmt, va_list ap);
size_t mtx_format(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes "memtrace: <message>\n" to stderr with write(2). */
void mtx_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Anonymous memory straight from mmap, zeroed; NULL on failure. Sizes are rounded
 * to pages. */
void *mtx_map(size_t size);
void mtx_unmap(void *p, size_t size);

/* A bump arena over mmap'd blocks, for tables that only grow (strings, stacks).
 * Not thread-safe: callers hold their own lock. */
struct mtx_arena {
    char *cur;
    size_t left;
};
void *mtx_arena_alloc(struct mtx_arena *a, size_t size, size_t align);

/* Writes all of buf to fd, retrying on EINTR and short writes. 0 or -errno. */
int mtx_write_all(int fd, const void *buf, size_t len);

/* 64-bit hash (FNV-1a folded with a mixer) of len bytes. */
uint64_t mtx_hash_bytes(const void *p, size_t len);
static inline uint64_t mtx_hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

#endif
