/* rng.h: a small deterministic generator for randomized tests (xorshift64), so a
 * failing sequence replays from its seed. The state must not be 0. */
#ifndef MEMTRACE_TEST_RNG_H
#define MEMTRACE_TEST_RNG_H

#include <stdint.h>

static inline uint64_t test_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* xorshift64*: the generator the format's tests and benches were built on (their
 * committed cases come from its sequences). The state must not be 0. */
static inline uint64_t test_rand_star(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 0x2545F4914F6CDD1DULL;
}

#endif
