/* inflate.c: a whole-buffer decoder of raw deflate streams (RFC 1951).
 *
 * Why not zlib's inflate: the reader's chunks are whole buffers of known lengths,
 * and zlib, written for streams, refills its bit buffer a byte or two at a time,
 * checks its buffers at every symbol and copies matches byte by byte. Here the bit
 * buffer is refilled eight bytes at once (while eight input bytes remain; past that
 * a byte at a time, then with zero bytes whose use is an error), a table lookup
 * decodes most codes in one step, and matches are copied a word at a time when the
 * output has room to spare. On the analysis bench's event chunks this takes 0.11 s
 * where zlib takes 0.26 (bench/inflate_bench, BENCHMARKS.md).
 *
 * What it accepts is what zlib's inflate accepts: block types 0 to 2, stored
 * lengths that match their complement, at most 286 literal/length and 30 distance
 * codes, code lengths that are neither over-subscribed nor incomplete (except a
 * single one-bit code, which zlib allows too, never for the code-length code), an
 * end-of-block code, no repeat of a length before the first, and no distance past
 * the start of the output. */
#include "config.h"

#include "inflate.h"

#include <string.h>

/* A table entry, 32 bits:
 *   bits 0-4    bits of the code this entry decodes (a link: the first level's bits)
 *   bit 5       a literal   bit 6  end of block   bit 7  an invalid code
 *   bits 8-12   bits of the code and of the extra bits after it, which are taken
 *               together (a link: the second level's bits)
 *   bit 15      a link to a second-level table
 *   bits 16-31  the literal, the length or distance base, or the linked table's start */
#define E_LIT  0x0020u
#define E_END  0x0040u
#define E_BAD  0x0080u
#define E_LINK 0x8000u

enum { LITLEN, DIST, PRE };

static const uint16_t len_base[29] = {3,  4,  5,  6,   7,   8,   9,   10,  11, 13,
                                      15, 17, 19, 23,  27,  31,  35,  43,  51, 59,
                                      67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t dist_base[30] = {
    1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
/* The order in which a dynamic block sends the code-length code's lengths. */
static const uint8_t pre_order[19] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                      11, 4,  12, 3, 13, 2, 14, 1, 15};

static uint32_t value(int kind, unsigned s)
{
    switch (kind) {
    case LITLEN:
        if (s < 256)
            return E_LIT | (uint32_t)s << 16;
        if (s == 256)
            return E_END;
        if (s < 286)
            return (uint32_t)len_base[s - 257] << 16 | (uint32_t)len_extra[s - 257] << 8;
        return E_BAD;
    case DIST:
        if (s < 30)
            return (uint32_t)dist_base[s] << 16 | (uint32_t)dist_extra[s] << 8;
        return E_BAD;
    default:
        return (uint32_t)s << 16;
    }
}

/* Builds into t the table of the canonical code whose lengths are lens[0..n), with
 * a first level of tb bits. 0, or -1 if the lengths are over-subscribed, or
 * incomplete where that is refused: always for the code-length code, otherwise
 * unless the code is a single one-bit code. No code at all builds a table of invalid
 * entries. */
static int build(uint32_t *t, unsigned tb, const uint8_t *lens, unsigned n, int kind)
{
    unsigned count[16] = {0};
    for (unsigned s = 0; s < n; s++)
        count[lens[s]]++;
    count[0] = 0;
    unsigned max = 15;
    while (max > 0 && count[max] == 0)
        max--;
    if (max == 0) {
        for (unsigned i = 0; i < 1u << tb; i++)
            t[i] = E_BAD;
        return 0;
    }
    int left = 1;
    for (unsigned len = 1; len <= 15; len++) {
        left = 2 * left - (int)count[len];
        if (left < 0)
            return -1;
    }
    if (left > 0 && (kind == PRE || max != 1))
        return -1;
    if (left > 0)
        for (unsigned i = 0; i < 1u << tb; i++)
            t[i] = E_BAD;

    /* Symbols sorted by length, then by value: the canonical order of their codes. */
    uint16_t offs[16], sorted[288];
    offs[1] = 0;
    for (unsigned len = 1; len < 15; len++)
        offs[len + 1] = (uint16_t)(offs[len] + count[len]);
    for (unsigned s = 0; s < n; s++)
        if (lens[s] != 0)
            sorted[offs[lens[s]]++] = (uint16_t)s;

    /* code is the next code with its bits reversed, as the stream sends them least
     * significant first; a code longer than tb goes into the second-level table of
     * its first tb bits, sized for the codes that share them. */
    const unsigned mask = (1u << tb) - 1;
    unsigned code = 0, next = 1u << tb, prefix = ~0u, sub = 0, subbits = 0, i = 0;
    for (unsigned len = 1; len <= max; len++) {
        for (unsigned k = count[len]; k > 0; k--, i++) {
            uint32_t e = value(kind, sorted[i]);
            if (len <= tb) {
                e += (uint32_t)len << 8 | len;
                for (unsigned j = code; j <= mask; j += 1u << len)
                    t[j] = e;
            } else {
                if ((code & mask) != prefix) {
                    prefix = code & mask;
                    unsigned bits = len - tb;
                    int room = 1 << bits;
                    while (bits + tb < max) {
                        room -= (int)count[bits + tb];
                        if (room <= 0)
                            break;
                        bits++;
                        room <<= 1;
                    }
                    sub = next;
                    subbits = bits;
                    next += 1u << bits;
                    t[prefix] = E_LINK | (uint32_t)sub << 16 | (uint32_t)bits << 8 | tb;
                }
                e += (uint32_t)(len - tb) << 8 | (len - tb);
                for (unsigned j = code >> tb; j < 1u << subbits; j += 1u << (len - tb))
                    t[sub + j] = e;
            }
            /* Counts left of each length size the second-level tables still to come. */
            count[len]--;
            unsigned inc = 1u << (len - 1);
            while (code & inc)
                inc >>= 1;
            code = inc ? (code & (inc - 1)) + inc : 0;
        }
    }
    return 0;
}

static uint64_t load_le64(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
#else
    uint64_t w = 0;
    for (int k = 7; k >= 0; k--)
        w = w << 8 | p[k];
    return w;
#endif
}

/* The bit buffer: bb holds bl bits, the stream's next bit lowest. Bits above bl may
 * hold the next input bytes already; a refill ORs the same bytes into them. Past the
 * end of the input, refills add zero bytes, counted in over: using one is an error,
 * found at the latest when the stream ends (over > 8 stops a runaway decode early). */
#define BITS(n) ((unsigned)(bb & ((1ull << (n)) - 1)))
#define DROP(n) (bb >>= (n), bl -= (n))
#define REFILL()                                                                                   \
    do {                                                                                           \
        if (in_end - in >= 8) {                                                                    \
            bb |= load_le64(in) << bl;                                                             \
            in += (63 - bl) >> 3;                                                                  \
            bl |= 56;                                                                              \
        } else {                                                                                   \
            while (bl < 56) {                                                                      \
                if (in < in_end)                                                                   \
                    bb |= (uint64_t)*in++ << bl;                                                   \
                else                                                                               \
                    over++;                                                                        \
                bl += 8;                                                                           \
            }                                                                                      \
            if (over > 8)                                                                          \
                return -1;                                                                         \
        }                                                                                          \
    } while (0)

static inline __attribute__((always_inline)) int
dynamic_tables(struct mt_inflater *z, const uint8_t **inp, const uint8_t *in_end, uint64_t *bbp,
               unsigned *blp, size_t *overp)
{
    const uint8_t *in = *inp;
    uint64_t bb = *bbp;
    unsigned bl = *blp;
    size_t over = *overp;
    REFILL();
    unsigned nlit = BITS(5) + 257;
    DROP(5);
    unsigned ndist = BITS(5) + 1;
    DROP(5);
    unsigned npre = BITS(4) + 4;
    DROP(4);
    if (nlit > 286 || ndist > 30)
        return -1;
    uint8_t pre[19] = {0};
    for (unsigned i = 0; i < npre; i++) {
        REFILL();
        pre[pre_order[i]] = (uint8_t)BITS(3);
        DROP(3);
    }
    if (build(z->pre, 7, pre, 19, PRE) < 0)
        return -1;
    uint8_t lens[286 + 30];
    unsigned n = nlit + ndist;
    for (unsigned i = 0; i < n;) {
        REFILL();
        uint32_t e = z->pre[BITS(7)];
        if (e & E_BAD)
            return -1;
        DROP(e & 31);
        unsigned sym = e >> 16, rep;
        uint8_t v = 0;
        if (sym < 16) {
            lens[i++] = (uint8_t)sym;
            continue;
        }
        if (sym == 16) {
            if (i == 0)
                return -1;
            v = lens[i - 1];
            rep = 3 + BITS(2);
            DROP(2);
        } else if (sym == 17) {
            rep = 3 + BITS(3);
            DROP(3);
        } else {
            rep = 11 + BITS(7);
            DROP(7);
        }
        if (rep > n - i)
            return -1;
        memset(lens + i, v, rep);
        i += rep;
    }
    if (lens[256] == 0)
        return -1;
    z->fixed = 0;
    if (build(z->litlen, MT_INFLATE_LITLEN_BITS, lens, nlit, LITLEN) < 0 ||
        build(z->dist, MT_INFLATE_DIST_BITS, lens + nlit, ndist, DIST) < 0)
        return -1;
    *inp = in;
    *bbp = bb;
    *blp = bl;
    *overp = over;
    return 0;
}

static void fixed_tables(struct mt_inflater *z)
{
    uint8_t lens[288 + 32];
    unsigned s = 0;
    for (; s < 144; s++)
        lens[s] = 8;
    for (; s < 256; s++)
        lens[s] = 9;
    for (; s < 280; s++)
        lens[s] = 7;
    for (; s < 288; s++)
        lens[s] = 8;
    for (; s < 288 + 32; s++)
        lens[s] = 5;
    /* Complete codes of valid lengths: these cannot fail. */
    build(z->litlen, MT_INFLATE_LITLEN_BITS, lens, 288, LITLEN);
    build(z->dist, MT_INFLATE_DIST_BITS, lens + 288, 32, DIST);
    z->fixed = 1;
}

int mt_inflate(struct mt_inflater *z, const uint8_t *in, size_t in_len, uint8_t *out,
               size_t out_len, size_t *in_used)
{
    static const uint8_t none[8];
    if (in == NULL || out == NULL) { /* only with nothing to read or write */
        if ((in == NULL && in_len > 0) || (out == NULL && out_len > 0))
            return -1;
        in = in ? in : none;
        out = out ? out : (uint8_t *)none;
    }
    const uint8_t *const in_start = in, *const in_end = in + in_len;
    uint8_t *const out_start = out, *const out_end = out + out_len;
    uint64_t bb = 0;
    unsigned bl = 0;
    size_t over = 0;
    const uint32_t *ll = z->litlen, *dt = z->dist;
    unsigned final;
    do {
        REFILL();
        final = BITS(1);
        unsigned type = BITS(3) >> 1;
        DROP(3);
        if (type == 0) {
            /* Stored: from the next byte boundary, LEN, ~LEN and LEN bytes. */
            DROP(bl & 7);
            size_t pos = (size_t)(in - in_start) + over - bl / 8;
            if (pos > in_len || in_len - pos < 4)
                return -1;
            size_t len = (size_t)in_start[pos] | (size_t)in_start[pos + 1] << 8;
            size_t nlen = (size_t)in_start[pos + 2] | (size_t)in_start[pos + 3] << 8;
            pos += 4;
            if (len != (~nlen & 0xffff) || len > in_len - pos || len > (size_t)(out_end - out))
                return -1;
            memcpy(out, in_start + pos, len);
            out += len;
            in = in_start + pos + len;
            bb = 0;
            bl = 0;
            over = 0;
            continue;
        }
        if (type == 1) {
            if (!z->fixed)
                fixed_tables(z);
        } else if (type == 2) {
            if (dynamic_tables(z, &in, in_end, &bb, &bl, &over) < 0)
                return -1;
        } else {
            return -1;
        }
        /* The next code's entry is looked up before a match is copied, so that the
         * lookup's latency overlaps the copy. */
        REFILL();
        uint32_t e = ll[BITS(MT_INFLATE_LITLEN_BITS)];
        for (;;) {
            if (e & E_LINK) {
                DROP(MT_INFLATE_LITLEN_BITS);
                e = ll[(e >> 16) + BITS((e >> 8) & 31)];
            }
            if (e & E_LIT) {
                DROP(e & 31);
                if (out == out_end)
                    return -1;
                *out++ = (uint8_t)(e >> 16);
                /* Up to two more literals fit in what the last refill brought. */
                for (int k = 0; k < 2 && bl >= 15; k++) {
                    uint32_t e2 = ll[BITS(MT_INFLATE_LITLEN_BITS)];
                    if ((e2 & E_LIT) == 0 || out == out_end)
                        break;
                    DROP(e2 & 31);
                    *out++ = (uint8_t)(e2 >> 16);
                }
                REFILL();
                e = ll[BITS(MT_INFLATE_LITLEN_BITS)];
                continue;
            }
            if (e & (E_END | E_BAD)) {
                if (e & E_BAD)
                    return -1;
                DROP(e & 31);
                break;
            }
            /* a length: its base, then the extra bits past the code */
            size_t len = (e >> 16) + (BITS((e >> 8) & 31) >> (e & 31));
            DROP((e >> 8) & 31);
            e = dt[BITS(MT_INFLATE_DIST_BITS)];
            if (e & E_LINK) {
                DROP(MT_INFLATE_DIST_BITS);
                e = dt[(e >> 16) + BITS((e >> 8) & 31)];
            }
            if (e & E_BAD)
                return -1;
            size_t dist = (e >> 16) + (BITS((e >> 8) & 31) >> (e & 31));
            DROP((e >> 8) & 31);
            if (dist > (size_t)(out - out_start) || len > (size_t)(out_end - out))
                return -1;
            REFILL();
            e = ll[BITS(MT_INFLATE_LITLEN_BITS)];
            uint8_t *dst = out;
            const uint8_t *src = out - dist;
            out += len;
            if (dist >= 8 && out_end - out >= 40) {
                /* Whole words, five of them whatever the length (most matches are
                 * shorter than 40 bytes), then more while the match lasts: up to 39
                 * bytes past its end, which later output overwrites. With dist >= 8
                 * each word read lies wholly before the one written. */
                uint64_t w;
                for (int k = 0; k < 5; k++) {
                    memcpy(&w, src + 8 * k, 8);
                    memcpy(dst + 8 * k, &w, 8);
                }
                src += 40;
                dst += 40;
                while (dst < out) {
                    memcpy(&w, src, 8);
                    memcpy(dst, &w, 8);
                    src += 8;
                    dst += 8;
                }
            } else if (dist >= 8 && out_end - out >= 8) {
                uint64_t w;
                do {
                    memcpy(&w, src, 8);
                    memcpy(dst, &w, 8);
                    src += 8;
                    dst += 8;
                } while (dst < out);
            } else if (dist == 1) {
                memset(dst, src[0], len);
            } else {
                while (dst < out)
                    *dst++ = *src++;
            }
        }
    } while (!final);
    size_t used = (size_t)(in - in_start) + over - bl / 8;
    if (used > in_len || out != out_end)
        return -1;
    *in_used = used;
    return 0;
}
