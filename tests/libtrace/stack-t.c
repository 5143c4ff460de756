/* stack-t: native capture through libunwind and the stack trie. */
#include "config.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "memtrace.h"
#include "stack.h"
#include "symbolize.h"
#include "tests/tap.h"

/* Keep each helper a real frame of its own under its own name: no inlining, no
 * clones, no tail calls. */
#if defined(__clang__)
#define FRAME __attribute__((noinline))
#else
#define FRAME __attribute__((noipa))
#endif
#define NO_TAIL() __asm__ volatile("" ::: "memory")

FRAME static int chain_c(uintptr_t *ips, int max, int skip)
{
    int n = mt_stack_capture(ips, max, skip);
    NO_TAIL();
    return n;
}

FRAME static int chain_b(uintptr_t *ips, int max, int skip)
{
    int n = chain_c(ips, max, skip);
    NO_TAIL();
    return n;
}

FRAME static int chain_a(uintptr_t *ips, int max, int skip)
{
    int n = chain_b(ips, max, skip);
    NO_TAIL();
    return n;
}

FRAME static int deep(int depth, uintptr_t *ips, int max)
{
    int n = depth > 0 ? deep(depth - 1, ips, max) : mt_stack_capture(ips, max, 0);
    NO_TAIL();
    return n;
}

/* Follows node parents from id to the root, collecting frame ips. */
static int reconstruct(uint32_t id, uintptr_t *out, int max)
{
    int n = 0;
    while (id != 0 && n < max) {
        uint32_t parent, frame;
        mt_stack_node(id, &parent, &frame);
        out[n++] = mt_frame_ip(frame);
        id = parent;
    }
    return id == 0 ? n : -1;
}

static bool same_ips(const uintptr_t *a, const uintptr_t *b, int n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

static void test_capture(void)
{
    uintptr_t ips[2][16];
    int n[2];
    /* A volatile counter keeps one call site: both captures share the outer frames. */
    for (volatile int skip = 0; skip < 2; skip++)
        n[skip] = chain_a(ips[skip], 16, skip);
    ok(n[0] >= 4, "capture through a -> b -> c gets %d frames", n[0]);

    static const char *const want[] = {"chain_c", "chain_b", "chain_a", "test_capture"};
    for (int i = 0; i < 4; i++) {
        struct mt_symbol sym;
        mt_symbolize(ips[0][i], &sym);
        is_string(want[i], sym.function, "frame %d is %s", i, want[i]);
    }
    is_int(n[0] - 1, n[1], "skip=1 captures one frame fewer");
    ok(same_ips(ips[0] + 1, ips[1], n[1]), "skip=1 drops exactly the innermost frame");

    uintptr_t two[2];
    is_int(2, chain_a(two, 2, 0), "max=2 captures 2");
    ok(same_ips(ips[0], two, 2), "max=2 keeps the innermost two");
    is_int(0, mt_stack_capture(two, 0, 0), "max=0 captures nothing");

    uintptr_t big[MEMTRACE_MAX_FRAMES];
    is_int(MEMTRACE_MAX_FRAMES, deep(MEMTRACE_MAX_FRAMES + 8, big, MEMTRACE_MAX_FRAMES),
           "a %d-deep recursion fills MEMTRACE_MAX_FRAMES", MEMTRACE_MAX_FRAMES + 8);
    int same = 0;
    for (int i = 2; i < MEMTRACE_MAX_FRAMES; i++)
        same += big[i] == big[1];
    is_int(MEMTRACE_MAX_FRAMES - 2, same, "every recursive frame returns to one address");

    uint32_t nodes = mt_stack_node_count();
    uint32_t id = mt_stack_intern(big, MEMTRACE_MAX_FRAMES);
    ok(id != 0, "a MEMTRACE_MAX_FRAMES stack interns");
    uintptr_t back[MEMTRACE_MAX_FRAMES + 1];
    is_int(MEMTRACE_MAX_FRAMES, reconstruct(id, back, MEMTRACE_MAX_FRAMES + 1),
           "it reconstructs to %d frames", MEMTRACE_MAX_FRAMES);
    ok(same_ips(big, back, MEMTRACE_MAX_FRAMES), "with the captured ips");
    is_int(nodes + MEMTRACE_MAX_FRAMES, mt_stack_node_count(), "one node per frame");
}

static void test_trie(void)
{
    uintptr_t s[8] = {0x5000, 0x5001, 0x5002, 0x5003, 0x5004, 0x5005, 0x5006, 0x5007};
    uint32_t nodes = mt_stack_node_count(), frames = mt_frame_count();

    is_int(0, mt_stack_intern(s, 0), "an empty stack is id 0");
    uint32_t id = mt_stack_intern(s, 8);
    ok(id != 0, "8-frame stack interns");
    is_int(nodes + 8, mt_stack_node_count(), "8 new nodes");
    is_int(frames + 8, mt_frame_count(), "8 new frames");
    is_int(id, mt_stack_intern(s, 8), "interning it again gives the same id");
    is_int(nodes + 8, mt_stack_node_count(), "and adds no node");

    uintptr_t t[8];
    memcpy(t, s, sizeof t);
    t[0] = 0x6000;
    uint32_t id2 = mt_stack_intern(t, 8);
    ok(id2 != id && id2 != 0, "differing innermost frame gives a new id");
    is_int(nodes + 9, mt_stack_node_count(), "exactly one new node");
    uint32_t p1, p2, f1, f2;
    mt_stack_node(id, &p1, &f1);
    mt_stack_node(id2, &p2, &f2);
    is_int(p1, p2, "both share the parent path");
    is_int(0x6000, (long long)mt_frame_ip(f2), "the new node's frame is the new ip");

    is_int(p1, mt_stack_intern(s + 1, 7), "the parent node is the stack s[1..]");
    is_int(nodes + 9, mt_stack_node_count(), "a suffix of a seen stack adds no node");
    uint32_t pp;
    mt_stack_node(p1, &pp, NULL);
    is_int(mt_stack_intern(s + 2, 6), pp, "grandparent is the stack s[2..]");

    uintptr_t back[9];
    is_int(8, reconstruct(id2, back, 9), "reconstruction has 8 frames");
    ok(same_ips(t, back, 8), "and the ips of the stack");

    uint32_t one = mt_stack_intern(s + 7, 1);
    uint32_t parent = 99;
    mt_stack_node(one, &parent, NULL);
    is_int(0, parent, "depth 1: the outermost frame's node has no parent");
    is_int(nodes + 9, mt_stack_node_count(), "depth 1 of a seen root adds no node");
    uintptr_t lone = 0x7000;
    uint32_t lone_id = mt_stack_intern(&lone, 1);
    is_int(lone_id, mt_stack_intern(&lone, 1), "a new depth-1 stack is stable");
    is_int(nodes + 10, mt_stack_node_count(), "and costs one node");

    uintptr_t rec[3] = {0x8000, 0x8000, 0x8000};
    uint32_t fr = mt_frame_count();
    uint32_t rid = mt_stack_intern(rec, 3);
    is_int(nodes + 13, mt_stack_node_count(), "recursion: 3 nodes");
    is_int(fr + 1, mt_frame_count(), "recursion: 1 frame");
    is_int(3, reconstruct(rid, back, 9), "recursion reconstructs to 3 frames");

    mt_stack_node(0, &p1, &f1);
    is_int(0, p1 + f1, "node 0 reads as empty");
    is_int(0, (long long)mt_frame_ip(0), "frame 0 is ip 0");
    is_int(0, (long long)mt_frame_ip(mt_frame_count() + 1), "a frame beyond the count is 0");
}

/* 64 stacks in a tree: one 8-frame root, 8 branches of 8 frames each, and for
 * stack k a leaf of k / 8 + 1 frames. All ips distinct: 360 nodes, 360 frames. */
#define NSTACKS     64
#define EXPECT_NEW  360
#define NTHREADS    8
#define PER_THREAD  10000
#define STACK_DEPTH (8 + 8 + 8)

static uintptr_t mix[NSTACKS][STACK_DEPTH];
static int mix_n[NSTACKS];
static uint32_t seen[NTHREADS][NSTACKS];
static atomic_int running;
static atomic_int reader_errors;

static void build_mix(void)
{
    const uintptr_t base = 0x7e0000000000;
    for (int k = 0; k < NSTACKS; k++) {
        int leaf = k / 8 + 1, n = 0;
        for (int i = 0; i < leaf; i++)
            mix[k][n++] = base + 0x100000 + (uintptr_t)k * 0x100 + (uintptr_t)(leaf - 1 - i);
        for (int i = 7; i >= 0; i--)
            mix[k][n++] = base + 0x10000 + (uintptr_t)(k % 8) * 0x100 + (uintptr_t)i;
        for (int i = 7; i >= 0; i--)
            mix[k][n++] = base + (uintptr_t)i;
        mix_n[k] = n;
    }
}

static void *intern_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    bool consistent = true;
    for (int j = 0; j < PER_THREAD; j++) {
        int k = (j * 13 + t * 7) % NSTACKS;
        uint32_t id = mt_stack_intern(mix[k], mix_n[k]);
        if (seen[t][k] == 0)
            seen[t][k] = id;
        else if (seen[t][k] != id)
            consistent = false;
    }
    return (void *)(intptr_t)consistent;
}

/* Walks published nodes while others intern: parents are always older nodes and
 * frames always published. */
static void *reader_thread(void *arg)
{
    (void)arg;
    while (atomic_load(&running)) {
        uint32_t n = mt_stack_node_count(), frames = mt_frame_count();
        for (uint32_t id = n > 64 ? n - 64 : 1; id <= n; id++) {
            uint32_t parent, frame;
            mt_stack_node(id, &parent, &frame);
            if (parent >= id || frame == 0 || mt_frame_ip(frame) == 0 || frame > mt_frame_count() ||
                frames > mt_frame_count())
                atomic_fetch_add(&reader_errors, 1);
        }
    }
    return NULL;
}

static void test_threads(void)
{
    build_mix();
    uint32_t nodes = mt_stack_node_count(), frames = mt_frame_count();
    pthread_t th[NTHREADS], reader;
    atomic_store(&running, 1);
    pthread_create(&reader, NULL, reader_thread, NULL);
    for (int t = 0; t < NTHREADS; t++)
        pthread_create(&th[t], NULL, intern_thread, (void *)(intptr_t)t);
    int consistent = 0;
    for (int t = 0; t < NTHREADS; t++) {
        void *r;
        pthread_join(th[t], &r);
        consistent += (int)(intptr_t)r;
    }
    atomic_store(&running, 0);
    pthread_join(reader, NULL);

    is_int(NTHREADS, consistent, "each thread saw one id per stack over %d interns", PER_THREAD);
    int agree = 0, distinct = 0, exact = 0;
    for (int k = 0; k < NSTACKS; k++) {
        bool all = seen[0][k] != 0;
        for (int t = 1; t < NTHREADS; t++)
            all = all && seen[t][k] == seen[0][k];
        agree += all;
        bool unique = true;
        for (int k2 = 0; k2 < k; k2++)
            unique = unique && seen[0][k2] != seen[0][k];
        distinct += unique;
        uintptr_t back[STACK_DEPTH + 1];
        exact += reconstruct(seen[0][k], back, STACK_DEPTH + 1) == mix_n[k] &&
                 same_ips(mix[k], back, mix_n[k]);
    }
    is_int(NSTACKS, agree, "all %d threads agree on every stack's id", NTHREADS);
    is_int(NSTACKS, distinct, "the %d stacks have distinct ids", NSTACKS);
    is_int(NSTACKS, exact, "every id reconstructs its stack exactly");
    is_int(nodes + EXPECT_NEW, mt_stack_node_count(), "exactly %d new nodes", EXPECT_NEW);
    is_int(frames + EXPECT_NEW, mt_frame_count(), "exactly %d new frames", EXPECT_NEW);
    is_int(0, atomic_load(&reader_errors), "concurrent readers saw only whole nodes");
}

/* Runs first, so that libunwind's and the trie's lazy set-up is inside the window. */
static void test_no_malloc(void)
{
    uintptr_t ips[32];
    struct mallinfo2 before = mallinfo2();
    int n = chain_a(ips, 32, 0);
    uint32_t id = mt_stack_intern(ips, n);
    id += mt_stack_intern(ips, n);
    struct mallinfo2 after = mallinfo2();
    ok(n > 0 && id != 0, "first capture and intern work");
    if (MEMTRACE_SANITIZERS) {
        skip(1, "the sanitizer's allocator does not report through mallinfo2");
        return;
    }
    is_int((long long)(before.uordblks + before.hblkhd), (long long)(after.uordblks + after.hblkhd),
           "first capture and intern keep no libc heap");
}

int main(void)
{
    test_no_malloc();
    test_capture();
    test_trie();
    test_threads();
    done_testing();
    return exit_status();
}
