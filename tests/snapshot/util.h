/* util.h: helpers shared by the snapshot tests. */
#ifndef MEMTRACE_TEST_SNAPSHOT_UTIL_H
#define MEMTRACE_TEST_SNAPSHOT_UTIL_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memtrace.h"
#include "rng.h"

static inline uint64_t rnd_next(uint64_t *s)
{
    return test_rand_star(s);
}

/* 1 if every field of a and b is equal (padding ignored). */
static inline int event_equal(const struct memtrace_event *a, const struct memtrace_event *b)
{
    return a->time_ns == b->time_ns && a->addr == b->addr && a->size == b->size &&
           a->requested_size == b->requested_size && a->stream == b->stream && a->aux == b->aux &&
           a->device == b->device && a->pool == b->pool && a->tid == b->tid &&
           a->stack == b->stack && a->category == b->category && a->source == b->source &&
           a->action == b->action;
}

/* A value drawn to hit edge cases often: 0, 1, small, huge, all ones. */
static inline uint64_t rnd_value(uint64_t *s)
{
    uint64_t r = rnd_next(s);
    switch (r % 8) {
    case 0:
        return 0;
    case 1:
        return UINT64_MAX;
    case 2:
        return r >> 56;
    case 3:
        return UINT64_MAX - (r >> 60);
    case 4:
        return rnd_next(s);
    default:
        return (r >> 20) & 0xffffffffULL;
    }
}

/* Reads a whole file into a malloc'd buffer. */
static inline uint8_t *slurp(const char *path, size_t *len)
{
    *len = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    struct stat st;
    fstat(fd, &st);
    uint8_t *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    *len = got;
    return buf;
}

static inline int spill(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    ssize_t n = len ? write(fd, buf, len) : 0;
    close(fd);
    return n == (ssize_t)len ? 0 : -1;
}

#endif
