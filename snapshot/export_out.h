/* export_out.h: the output of the large exports (Perfetto, CSV): buffers of their
 * own, filled with integers formatted by hand, written by a second thread.
 *
 * These exports are gigabytes of small numbers, where printf's parsing of its format
 * and stdio's locking and small copies were most of the time. Each full buffer is
 * handed to a second thread that fwrites it (stdio passes it to write(2) without a
 * copy), so that the kernel's copy into the page cache, as long as the rest of the
 * export, overlaps the next buffer's replay and formatting. Without a thread, the
 * buffer is written in place. Sixteen buffers of 64 KiB, not four of 1 MiB: the
 * kernel took more than twice as long over the same 2.3 GB in 1 MiB writes (sys
 * 3.2-3.6 s against 0.8-0.9 s, BENCHMARKS.md), and a plain loop of write(2)s showed
 * the same. While it is open, only its thread writes the FILE. */
#ifndef MEMTRACE_EXPORT_OUT_H
#define MEMTRACE_EXPORT_OUT_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MT_OUT_SIZE ((size_t)1 << 16)
#define MT_OUT_NBUF 16

struct mt_out {
    FILE *out;
    char *buf; /* the one being filled: bufs[fill] */
    size_t len;
    char *bufs[MT_OUT_NBUF];
    size_t lens[MT_OUT_NBUF]; /* bytes to write, 0 when free */
    unsigned fill, next;      /* next: the one the thread writes next */
    int threaded, ending;
    int err; /* the errno of the writer thread's first failed write */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

/* Starts writing to out: 0, or -1 out of memory. */
int mt_out_open(struct mt_out *o, FILE *out);
/* Hands the buffer being filled to the writer (writes it, without a thread). */
void mt_out_flush(struct mt_out *o);
/* Writes what is left, ends the thread, frees the buffers. A failed write leaves the
 * FILE's error set and errno at its reason. */
void mt_out_close(struct mt_out *o);
void mt_out_mem_slow(struct mt_out *o, const char *s, size_t n);
void mt_out_u64(struct mt_out *o, uint64_t v); /* decimal */
extern const char mt_out_digits2[200];         /* "00" to "99", each number's two digits */
void mt_out_i64(struct mt_out *o, int64_t v);
void mt_out_hex(struct mt_out *o, uint64_t v); /* lowercase, no prefix */
/* A JSON string literal, escaped as mt_export_json_str does. */
void mt_out_json_str(struct mt_out *o, const char *s);

/* Inline, so that the copy of a literal, whose length is known, is a few moves. */
static inline void mt_out_mem(struct mt_out *o, const char *s, size_t n)
{
    if (MT_OUT_SIZE - o->len < n) {
        mt_out_mem_slow(o, s, n);
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

/* Room for n more bytes (n at most MT_OUT_SIZE). */
static inline char *mt_out_room(struct mt_out *o, size_t n)
{
    if (MT_OUT_SIZE - o->len < n)
        mt_out_flush(o);
    return o->buf + o->len;
}

#define mt_out_lit(o, lit) mt_out_mem((o), lit, sizeof(lit) - 1)

static inline void mt_out_char(struct mt_out *o, char c)
{
    if (o->len == MT_OUT_SIZE)
        mt_out_flush(o);
    o->buf[o->len++] = c;
}

#endif
