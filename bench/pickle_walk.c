/* pickle_walk: how long merely reading a PyTorch snapshot pickle's bytes takes, the
 * least that `memtrace import` could spend on its reading thread.
 *
 *   bench/pickle_walk FILE [ROUNDS]
 *
 * Two passes over the mapped file, each building nothing (a sum of what was fetched,
 * checked, keeps the compiler from dropping the loads), best of ROUNDS (default 5):
 *   every opcode   each opcode and its argument, one after the other;
 *   runs guessed   the same, but a frames list (EMPTY_LIST MEMOIZE MARK, memo
 *                  fetches, APPENDS) is first compared with the list that followed
 *                  the same two lists last time, as the importer guesses it
 *                  (docs/PYTORCH.md), and skipped in one memcmp when it matches.
 * Only the opcodes of plain data are known (the importer's); any other stops it. */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* 1 + the argument's fixed width, by opcode; 0 for the length-prefixed ones and for
 * those that are not plain data. */
static unsigned char fixed[256];

static void fixed_init(void)
{
    const char *one = "(.01Nadelstu})]\x85\x86\x87\x88\x89\x94";
    for (const char *c = one; *c; c++)
        fixed[(unsigned char)*c] = 1;
    fixed['K'] = fixed['h'] = fixed['q'] = fixed[0x80] = 2;
    fixed['M'] = 3;
    fixed['J'] = fixed['j'] = fixed['r'] = 5;
    fixed['G'] = fixed[0x95] = 9;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint32_t le32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The length of the opcode at p, with its argument; 0 where it is none of ours or
 * runs past end. */
static size_t op_len(const unsigned char *p, const unsigned char *end)
{
    size_t n = fixed[*p];
    if (n == 0) {
        if ((*p == 0x8a || *p == 0x8c) && end - p >= 2)
            n = 2 + (size_t)p[1];
        else if ((*p == 'X' || *p == 0x8b) && end - p >= 5)
            n = 5 + (size_t)le32(p + 1);
    }
    return n <= (size_t)(end - p) ? n : 0;
}

/* The frames lists seen: where each one's fetches are, found by hashing its bytes. */
struct run {
    const unsigned char *at;
    size_t len;
};

struct runs {
    struct run *r;
    size_t n, cap;
    uint32_t *hash; /* run + 1 by the hash of its bytes; 0 empty */
    size_t hcap;
    uint32_t *next; /* the run that followed runs (a, b), at a * 1024 + b */
};

/* The id (1-based) of the run of len bytes at p, added when new; 0 when out of room. */
static uint32_t run_id(struct runs *rs, const unsigned char *p, size_t len)
{
    uint64_t h = 14695981039346656037u;
    for (size_t k = 0; k < len; k++)
        h = (h ^ p[k]) * 1099511628211u;
    size_t s = h & (rs->hcap - 1);
    while (rs->hash[s]) {
        const struct run *r = &rs->r[rs->hash[s] - 1];
        if (r->len == len && memcmp(r->at, p, len) == 0)
            return rs->hash[s];
        s = (s + 1) & (rs->hcap - 1);
    }
    if (rs->n == rs->cap || rs->n * 2 >= rs->hcap)
        return 0;
    rs->r[rs->n] = (struct run){p, len};
    rs->hash[s] = (uint32_t)++rs->n;
    return rs->hash[s];
}

/* One pass; guess: skip the frames lists guessed right. Returns the sum of the ids
 * fetched, or -1 at an opcode it does not know. */
static int64_t walk(const unsigned char *buf, size_t len, struct runs *rs, int guess,
                    size_t *guessed)
{
    const unsigned char *p = buf, *end = buf + len;
    uint64_t sum = 0;
    uint32_t a = 0, b = 0; /* the last two runs' ids, 0 none */
    *guessed = 0;
    if (guess) {
        rs->n = 0;
        memset(rs->hash, 0, rs->hcap * sizeof(*rs->hash));
        memset(rs->next, 0, 1024 * 1024 * sizeof(*rs->next));
    }
    while (p < end && *p != '.') {
        if (guess && *p == ']' && end - p > 3 && p[1] == 0x94 && p[2] == '(') {
            const unsigned char *r = p + 3, *q = r;
            uint32_t g = rs->next[(a & 1023) * 1024 + (b & 1023)];
            if (g) {
                const struct run *gr = &rs->r[g - 1];
                if ((size_t)(end - r) > gr->len && memcmp(r, gr->at, gr->len) == 0 &&
                    r[gr->len] == 'e') {
                    (*guessed)++;
                    sum += g;
                    a = b;
                    b = g;
                    p = r + gr->len + 1;
                    continue;
                }
            }
            while (q < end && (*q == 'h' || *q == 'j') && op_len(q, end))
                q += *q == 'h' ? 2 : 5;
            if (q < end && *q == 'e') {
                uint32_t id = run_id(rs, r, (size_t)(q - r));
                if (id) {
                    rs->next[(a & 1023) * 1024 + (b & 1023)] = id;
                    a = b;
                    b = id;
                }
                for (const unsigned char *f = r; f < q; f += *f == 'h' ? 2 : 5)
                    sum += *f == 'h' ? f[1] : le32(f + 1);
                p = q + 1;
                continue;
            }
        }
        size_t n = op_len(p, end);
        if (n == 0)
            return -1;
        if (*p == 'h')
            sum += p[1];
        else if (*p == 'j')
            sum += le32(p + 1);
        p += n;
    }
    return (int64_t)(sum & INT64_MAX);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fputs("usage: pickle_walk FILE [ROUNDS]\n", stderr);
        return 2;
    }
    int rounds = argc == 3 ? atoi(argv[2]) : 5;
    if (rounds < 1) {
        fprintf(stderr, "pickle_walk: ROUNDS must be a positive number, not '%s'\n", argv[2]);
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 2) {
        perror(argv[1]);
        return 1;
    }
    size_t len = (size_t)st.st_size;
    const unsigned char *buf = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (buf == MAP_FAILED) {
        perror(argv[1]);
        return 1;
    }
    fixed_init();
    struct runs rs = {.cap = 1 << 20, .hcap = 1 << 21};
    rs.r = malloc(rs.cap * sizeof(*rs.r));
    rs.hash = malloc(rs.hcap * sizeof(*rs.hash));
    rs.next = malloc(1024 * 1024 * sizeof(*rs.next));
    if (!rs.r || !rs.hash || !rs.next) {
        fputs("pickle_walk: out of memory\n", stderr);
        return 1;
    }
    static const char *const name[2] = {"every opcode", "runs guessed"};
    for (int guess = 0; guess < 2; guess++) {
        double best = 0;
        size_t guessed = 0;
        int64_t sum = 0;
        for (int k = 0; k < rounds; k++) {
            double t0 = now();
            sum = walk(buf, len, &rs, guess, &guessed);
            double t = now() - t0;
            if (sum < 0) {
                fprintf(stderr, "pickle_walk: %s: an opcode that is not plain data\n", argv[1]);
                return 1;
            }
            if (k == 0 || t < best)
                best = t;
        }
        printf("%s: %.3f s", name[guess], best);
        if (guess)
            printf(" (%zu lists guessed right, %zu distinct)", guessed, rs.n);
        putchar('\n');
    }
    return 0;
}
