/* inflate.h: a whole-buffer decoder of raw deflate streams (RFC 1951).
 *
 * The reader knows each chunk's stored and raw lengths before it inflates, so it
 * needs none of zlib's streaming: the input and the output are whole buffers, and
 * the decoder can refill its bit buffer eight bytes at a time and copy matches eight
 * bytes at a time. It accepts what zlib's inflate accepts from such a stream and
 * refuses the rest (tests/snapshot/inflate-t and tests/fuzz/inflate_fuzz compare
 * the two). */
#ifndef MEMTRACE_SNAPSHOT_INFLATE_H
#define MEMTRACE_SNAPSHOT_INFLATE_H

#include <stddef.h>
#include <stdint.h>

/* Decoding tables: a 2^11-entry first level for literals and lengths, 2^8 for
 * distances, each followed by room for every second-level table a code can need
 * (288 or 32 codes, each longer than the first level opening at most one table
 * of at most 2^(15 - first level bits) entries). */
#define MT_INFLATE_LITLEN_BITS 11
#define MT_INFLATE_DIST_BITS   8
#define MT_INFLATE_LITLEN_SIZE                                                                     \
    ((1u << MT_INFLATE_LITLEN_BITS) + 288u * (1u << (15 - MT_INFLATE_LITLEN_BITS)))
#define MT_INFLATE_DIST_SIZE                                                                       \
    ((1u << MT_INFLATE_DIST_BITS) + 32u * (1u << (15 - MT_INFLATE_DIST_BITS)))

/* What a decoder keeps between calls: its tables (about 44 KB); no other state. */
struct mt_inflater {
    uint32_t litlen[MT_INFLATE_LITLEN_SIZE];
    uint32_t dist[MT_INFLATE_DIST_SIZE];
    uint32_t pre[1u << 7];
    int fixed; /* litlen and dist hold the fixed codes */
};

/* Decodes the raw deflate stream at in[0..in_len) into exactly out_len bytes at out.
 * 0 on success, with *in_used set to the bytes up to the end of the final block (its
 * last byte included); -1 if the stream is malformed, ends early, or decodes to more
 * or fewer than out_len bytes. Never reads past in + in_len or writes past
 * out + out_len. z needs no setup but fixed = 0 before its first use. */
int mt_inflate(struct mt_inflater *z, const uint8_t *in, size_t in_len, uint8_t *out,
               size_t out_len, size_t *in_used);

#endif
