#include "config.h"

#include "mtx/util.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---- the TSC clock ------------------------------------------------------------
 *
 * clock_gettime costs about twice an rdtsc on the VMs we measured, and every event
 * reads the clock. Where the CPU says its TSC is constant and nonstop and the kernel
 * itself keeps time with it (so it found the TSCs in sync), mtx_now_ns reads the TSC
 * and maps it to CLOCK_MONOTONIC nanoseconds.
 *
 * The map is piecewise linear over segments of 2^seg_shift ticks (about 27 ms at
 * 2.5 GHz). The first thread to reach a segment computes it, once, under a lock: it
 * starts where the previous one ends, so the clock never goes back, across threads
 * too (each tick value has one image, whichever thread reads it), and its slope aims
 * at CLOCK_MONOTONIC at the segment's end, measured against a rate taken over the
 * whole time since start. So the clock stays within one segment's prediction error
 * of CLOCK_MONOTONIC (nanoseconds to a few microseconds) however long it runs, and
 * follows the kernel's own slewing. Segments live in a ring of four slots, each
 * published like a seqlock; a reader whose slot was reused reads the TSC again.
 *
 * "Each tick has one image" is not yet "never goes back across threads": rdtsc is
 * not ordered with loads, and runs as soon as it is decoded, before a lock
 * acquisition in front of it has completed. On the 2-vCPU EPYC VM of the tests, four
 * threads reading the raw TSC in turns under a mutex saw it go back 181 to 1364
 * times in 800000 reads (by up to 40 ticks), always across a change of CPU, and
 * never with an lfence before the rdtsc: the TSCs themselves agree. An lfence (what
 * the kernel's vDSO does) would make the read wait for everything before it, which
 * doubled the inline read's cost (10 to 21 ns in cache_bench); the floor in
 * util.h costs nothing measurable in one thread, and it also covers TSCs that
 * disagree by a few ticks between CPUs, which the kernel's boot check can miss on a
 * VM. */

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_TSC 1
#else
#define HAVE_TSC 0
#endif

#define TSC_SLOTS   4
#define TSC_UNSET   UINT64_MAX
#define TSC_JUMP_NS 1000000ULL /* behind CLOCK_MONOTONIC by more (a suspend): jump */

enum { CLK_UNKNOWN = 0, CLK_TSC, CLK_MONOTONIC };

struct tsc_slot {
    _Atomic uint64_t seg;             /* segment index, TSC_UNSET while written */
    _Atomic uint64_t tsc0, ns0, mult; /* ns = ns0 + (tsc - tsc0) * mult / 2^32 */
};

static struct {
    _Atomic int mode;
    _Atomic int lock;        /* pid of the holder: a forked child steals its parent's */
    _Atomic uint64_t latest; /* newest computed segment */
    unsigned shift;
    uint64_t base_tsc, base_ns; /* start: the rate is measured from here */
    uint64_t end_ns;            /* where the latest segment ends */
    struct tsc_slot slot[TSC_SLOTS];
} C;

struct mtx_clock_fast mtx_clock_fast = {.seq = 1};
struct mtx_clock_floor mtx_clock_floor;

#define RELAXED memory_order_relaxed

static void clk_lock(void)
{
    int self = (int)getpid();
    for (;;) {
        int holder = 0;
        if (atomic_compare_exchange_weak(&C.lock, &holder, self))
            return;
        if (holder != 0 && holder != self && atomic_compare_exchange_weak(&C.lock, &holder, self))
            return; /* held in the parent when this process forked */
        sched_yield();
    }
}

static void clk_unlock(void)
{
    atomic_store(&C.lock, 0);
}

/* One (tsc, CLOCK_MONOTONIC) pair, the TSC read as close to the clock as possible. */
static void tsc_pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 4; i++) {
        uint64_t a = mtx_tsc_read(), n = mono_ns(), b = mtx_tsc_read();
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *ns = n;
        }
    }
}

/* ns per tick in 32.32 fixed point, over the time since start. */
static uint64_t tsc_rate(uint64_t tsc, uint64_t ns)
{
    uint64_t dt = tsc - C.base_tsc;
    if (dt == 0)
        return 1ULL << 32;
    return (uint64_t)(((unsigned __int128)(ns - C.base_ns) << 32) / dt);
}

static void slot_publish(uint64_t seg, uint64_t tsc0, uint64_t ns0, uint64_t mult)
{
    struct tsc_slot *s = &C.slot[seg % TSC_SLOTS];
    atomic_store_explicit(&s->seg, TSC_UNSET, RELAXED);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->tsc0, tsc0, RELAXED);
    atomic_store_explicit(&s->ns0, ns0, RELAXED);
    atomic_store_explicit(&s->mult, mult, RELAXED);
    atomic_store_explicit(&s->seg, seg, memory_order_release);
    atomic_store_explicit(&C.latest, seg, memory_order_release);
    /* The newest segment is also mtx_now_ns's inline map. */
    struct mtx_clock_fast *f = &mtx_clock_fast;
    uint64_t seq = atomic_load_explicit(&f->seq, RELAXED) | 1;
    atomic_store_explicit(&f->seq, seq, RELAXED);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&f->tsc0, tsc0, RELAXED);
    atomic_store_explicit(&f->len, 1ULL << C.shift, RELAXED);
    atomic_store_explicit(&f->ns0, ns0, RELAXED);
    atomic_store_explicit(&f->mult, mult, RELAXED);
    atomic_store_explicit(&f->seq, seq + 1, memory_order_release);
}

/* Computes the segment the TSC is in now (if no thread did); called with C.lock. */
static void tsc_advance(void)
{
    uint64_t tsc, ns;
    tsc_pair(&tsc, &ns);
    uint64_t latest = atomic_load_explicit(&C.latest, RELAXED);
    uint64_t seg = tsc > C.base_tsc ? (tsc - C.base_tsc) >> C.shift : 0;
    if (seg <= latest)
        return;
    uint64_t len = 1ULL << C.shift;
    uint64_t tsc0 = C.base_tsc + seg * len, end = tsc0 + len;
    uint64_t rate = tsc_rate(tsc, ns);
    uint64_t ns0 = C.end_ns;
    uint64_t est0 = ns - (uint64_t)(((unsigned __int128)(tsc - tsc0) * rate) >> 32);
    if (est0 > ns0 && (seg > latest + 1 || est0 - ns0 > TSC_JUMP_NS))
        ns0 = est0; /* no value was read since the last segment ended */
    uint64_t target = ns + (uint64_t)(((unsigned __int128)(end - tsc) * rate) >> 32);
    uint64_t mult =
        target > ns0 ? (uint64_t)(((unsigned __int128)(target - ns0) << 32) >> C.shift) : rate / 2;
    if (mult < rate / 2)
        mult = rate / 2;
    if (mult > rate * 2)
        mult = rate * 2;
    C.end_ns = ns0 + (uint64_t)(((unsigned __int128)len * mult) >> 32);
    slot_publish(seg, tsc0, ns0, mult);
}

/* The TSC segment seg is not (or no longer) in its slot: compute the current one if
 * no thread has, and let the caller read the TSC again. */
static __attribute__((noinline)) void tsc_miss(uint64_t seg)
{
    if (seg > atomic_load_explicit(&C.latest, memory_order_acquire)) {
        clk_lock();
        tsc_advance();
        clk_unlock();
    }
}

static inline uint64_t tsc_now_ns(void)
{
    for (;;) {
        uint64_t t = mtx_tsc_read();
        uint64_t seg = t > C.base_tsc ? (t - C.base_tsc) >> C.shift : 0;
        struct tsc_slot *s = &C.slot[seg % TSC_SLOTS];
        if (MTX_LIKELY(atomic_load_explicit(&s->seg, memory_order_acquire) == seg)) {
            uint64_t tsc0 = atomic_load_explicit(&s->tsc0, RELAXED);
            uint64_t ns0 = atomic_load_explicit(&s->ns0, RELAXED);
            uint64_t mult = atomic_load_explicit(&s->mult, RELAXED);
            atomic_thread_fence(memory_order_acquire);
            if (MTX_LIKELY(atomic_load_explicit(&s->seg, RELAXED) == seg))
                return ns0 + (uint64_t)(((unsigned __int128)(t - tsc0) * mult) >> 32);
            continue;
        }
        tsc_miss(seg);
    }
}

/* Reads "flags" of the first CPU in /proc/cpuinfo and the kernel's clocksource,
 * with plain reads (this may run on an interposed path). */
static int read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n + 1 < size) {
        ssize_t k = read(fd, buf + n, size - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    buf[n] = '\0';
    return 0;
}

static int has_word(const char *line, const char *word)
{
    size_t len = strlen(word);
    for (const char *p = strstr(line, word); p != NULL; p = strstr(p + 1, word))
        if ((p == line || p[-1] == ' ' || p[-1] == '\t') &&
            (p[len] == ' ' || p[len] == '\n' || p[len] == '\0'))
            return 1;
    return 0;
}

static int tsc_usable(void)
{
    if (!HAVE_TSC)
        return 0;
    const char *env = getenv("MEMTRACE_CLOCK");
    if (env != NULL && strcmp(env, "monotonic") == 0)
        return 0;
    char buf[8192];
    if (read_small("/sys/devices/system/clocksource/clocksource0/current_clocksource", buf, 64) !=
            0 ||
        strncmp(buf, "tsc\n", 4) != 0)
        return 0;
    if (read_small("/proc/cpuinfo", buf, sizeof buf) != 0)
        return 0;
    char *flags = strstr(buf, "\nflags");
    if (flags == NULL)
        return 0;
    char *eol = strchr(flags + 1, '\n');
    if (eol == NULL)
        return 0;
    *eol = '\0';
    return has_word(flags, "constant_tsc") && has_word(flags, "nonstop_tsc");
}

/* Starts the TSC clock with segments of 2^shift ticks; the first segment's slope is
 * off by skew_ppm (tests use it to check that later segments correct it). */
static void tsc_start(unsigned shift, int skew_ppm)
{
    uint64_t t1, n1, t2, n2;
    tsc_pair(&t1, &n1);
    do
        tsc_pair(&t2, &n2);
    while (n2 - n1 < 200000);
    C.shift = shift;
    C.base_tsc = t1;
    C.base_ns = n1;
    uint64_t rate = tsc_rate(t2, n2);
    rate = (uint64_t)((int64_t)rate + (int64_t)rate / 1000000 * skew_ppm);
    for (int i = 0; i < TSC_SLOTS; i++)
        atomic_store(&C.slot[i].seg, TSC_UNSET);
    C.end_ns = n1 + (uint64_t)(((unsigned __int128)1 << shift) * rate >> 32);
    slot_publish(0, t1, n1, rate);
}

static __attribute__((noinline)) int clock_init(void)
{
    clk_lock();
    int mode = atomic_load(&C.mode);
    if (mode == CLK_UNKNOWN) {
        mode = tsc_usable() ? CLK_TSC : CLK_MONOTONIC;
        if (mode == CLK_TSC)
            tsc_start(26, 0);
        atomic_store_explicit(&C.mode, mode, memory_order_release);
    }
    clk_unlock();
    return mode;
}

uint64_t mtx_now_ns_slow(void)
{
    int mode = atomic_load_explicit(&C.mode, memory_order_acquire);
    if (MTX_LIKELY(mode == CLK_TSC))
        return tsc_now_ns();
    if (mode == CLK_UNKNOWN && clock_init() == CLK_TSC)
        return tsc_now_ns();
    return mono_ns();
}

int mtx_clock_is_tsc(void)
{
    int mode = atomic_load_explicit(&C.mode, memory_order_acquire);
    if (mode == CLK_UNKNOWN)
        mode = clock_init();
    return mode == CLK_TSC;
}

int mtx_clock_test_restart(unsigned seg_shift, int skew_ppm)
{
    if (!mtx_clock_is_tsc() || seg_shift < 12 || seg_shift > 32)
        return -1;
    clk_lock();
    atomic_store(&C.latest, 0);
    tsc_start(seg_shift, skew_ppm);
    atomic_store(&mtx_clock_floor.ns, 0);
    clk_unlock();
    return 0;
}

uint64_t mtx_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

MTX_TLS uint32_t mtx_tls_tid;

uint32_t mtx_gettid_slow(void)
{
    mtx_tls_tid = (uint32_t)syscall(SYS_gettid);
    return mtx_tls_tid;
}

static size_t put_char(char *buf, size_t size, size_t pos, char c)
{
    if (pos + 1 < size)
        buf[pos] = c;
    return pos + 1;
}

static size_t put_str(char *buf, size_t size, size_t pos, const char *s)
{
    if (s == NULL)
        s = "(null)";
    while (*s)
        pos = put_char(buf, size, pos, *s++);
    return pos;
}

static size_t put_num(char *buf, size_t size, size_t pos, unsigned long long v, int base,
                      int negative)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v % (unsigned)base];
        v /= (unsigned)base;
    } while (v != 0);
    if (negative)
        pos = put_char(buf, size, pos, '-');
    while (n > 0)
        pos = put_char(buf, size, pos, tmp[--n]);
    return pos;
}

size_t mtx_vformat(char *buf, size_t size, const char *fmt, va_list ap)
{
    size_t pos = 0;
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            pos = put_char(buf, size, pos, *p);
            continue;
        }
        p++;
        int longs = 0, sz = 0;
        while (*p == 'l') {
            longs++;
            p++;
        }
        if (*p == 'z') {
            sz = 1;
            p++;
        }
        switch (*p) {
        case 's':
            pos = put_str(buf, size, pos, va_arg(ap, const char *));
            break;
        case 'd': {
            long long v = longs >= 2   ? va_arg(ap, long long)
                          : longs == 1 ? va_arg(ap, long)
                          : sz         ? (long long)va_arg(ap, size_t)
                                       : va_arg(ap, int);
            unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
            pos = put_num(buf, size, pos, u, 10, v < 0);
            break;
        }
        case 'u':
        case 'x': {
            unsigned long long v = longs >= 2   ? va_arg(ap, unsigned long long)
                                   : longs == 1 ? va_arg(ap, unsigned long)
                                   : sz         ? va_arg(ap, size_t)
                                                : va_arg(ap, unsigned);
            pos = put_num(buf, size, pos, v, *p == 'x' ? 16 : 10, 0);
            break;
        }
        case 'p':
            pos = put_str(buf, size, pos, "0x");
            pos = put_num(buf, size, pos, (uintptr_t)va_arg(ap, void *), 16, 0);
            break;
        case '%':
            pos = put_char(buf, size, pos, '%');
            break;
        case '\0':
            p--;
            break;
        default:
            pos = put_char(buf, size, pos, '?');
            break;
        }
    }
    if (size > 0)
        buf[pos < size ? pos : size - 1] = '\0';
    return pos < size ? pos : (size > 0 ? size - 1 : 0);
}

size_t mtx_format(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = mtx_vformat(buf, size, fmt, ap);
    va_end(ap);
    return n;
}

void mtx_log(const char *fmt, ...)
{
    char buf[512];
    size_t n = mtx_format(buf, sizeof buf, "%s", "memtrace: ");
    va_list ap;
    va_start(ap, fmt);
    n += mtx_vformat(buf + n, sizeof buf - n - 1, fmt, ap);
    va_end(ap);
    buf[n++] = '\n';
    int saved = errno;
    (void)mtx_write_all(2, buf, n);
    errno = saved;
}

void *mtx_map(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void mtx_unmap(void *p, size_t size)
{
    if (p != NULL)
        munmap(p, size);
}

void *mtx_arena_alloc(struct mtx_arena *a, size_t size, size_t align)
{
    uintptr_t cur = (uintptr_t)a->cur;
    uintptr_t aligned = (cur + align - 1) & ~(uintptr_t)(align - 1);
    size_t need = size + (aligned - cur);
    if (a->cur == NULL || need > a->left) {
        size_t block = size + align > (1u << 20) ? size + align : (1u << 20);
        char *p = mtx_map(block);
        if (p == NULL)
            return NULL;
        a->cur = p;
        a->left = block;
        cur = (uintptr_t)p;
        aligned = (cur + align - 1) & ~(uintptr_t)(align - 1);
        need = size + (aligned - cur);
    }
    a->cur += need;
    a->left -= need;
    return (void *)aligned;
}

int mtx_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

uint64_t mtx_hash_bytes(const void *p, size_t len)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    return mtx_hash_u64(h);
}
