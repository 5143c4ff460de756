/* inflate-t: snapshot/inflate.c against zlib. Streams that zlib's deflate writes at
 * every level and strategy, from data that makes each kind of block and match
 * (random bytes, text, varint columns, runs, short periods), decode to the same
 * bytes with the whole stream used; wrong output lengths, every cut, and hand-made
 * bad blocks are refused; and damaged streams are accepted exactly when zlib accepts
 * them, with the same output. */
#include "config.h"

#include "inflate.h"

#include "rng.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static struct mt_inflater z;

/* Raw deflate of data at level and strategy into a malloc'd buffer. */
static uint8_t *deflate_raw(const uint8_t *data, size_t len, int level, int strategy,
                            size_t *out_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (deflateInit2(&zs, level, Z_DEFLATED, -15, 8, strategy) != Z_OK)
        return NULL;
    size_t cap = deflateBound(&zs, (uLong)len) + 16;
    uint8_t *out = malloc(cap);
    zs.next_in = (Bytef *)data;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    int rc = deflate(&zs, Z_FINISH);
    *out_len = zs.total_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

/* zlib's verdict on in[0..in_len) decoding to exactly want bytes: 0 and the bytes
 * in out and the input used, or -1. */
static int zlib_inflate(const uint8_t *in, size_t in_len, uint8_t *out, size_t want, size_t *used)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (inflateInit2(&zs, -15) != Z_OK)
        return -1;
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)in_len;
    zs.next_out = out;
    zs.avail_out = (uInt)want + 1;
    int rc = inflate(&zs, Z_FINISH);
    *used = zs.total_in;
    int ok = rc == Z_STREAM_END && zs.total_out == want;
    inflateEnd(&zs);
    return ok ? 0 : -1;
}

enum { RANDOM, TEXT, VARINTS, RUNS, PERIODS, NKINDS };
static const char *const kind_name[] = {"random bytes", "text", "varint columns", "runs",
                                        "short periods"};

static void fill(uint8_t *p, size_t n, int kind, uint64_t *seed)
{
    static const char *const words[] = {"alloc ",  "free ",   "segment ", "block ",
                                        "stream ", "device ", "0x7f3a ",  "\n"};
    size_t i = 0;
    while (i < n) {
        uint64_t r = test_rand_star(seed);
        switch (kind) {
        case RANDOM:
            p[i++] = (uint8_t)r;
            break;
        case TEXT: {
            const char *w = words[r % 8];
            for (size_t k = 0; w[k] && i < n; k++)
                p[i++] = (uint8_t)w[k];
            break;
        }
        case VARINTS: {
            /* small zigzag deltas with an occasional large one, as an address column */
            uint64_t v = r % 16 == 0 ? r >> 20 : (r >> 8) % 300;
            do {
                p[i++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                v >>= 7;
            } while (v && i < n);
            break;
        }
        case RUNS: {
            size_t run = 1 + (r >> 8) % 700;
            uint8_t b = (uint8_t)(r % 3);
            for (size_t k = 0; k < run && i < n; k++)
                p[i++] = b;
            break;
        }
        default: {
            size_t period = 1 + (r >> 8) % 9, run = 8 + (r >> 16) % 400;
            for (size_t k = 0; k < run && i < n; k++)
                p[i] = i >= period ? p[i - period] : (uint8_t)r, i++;
            break;
        }
        }
    }
}

int main(void)
{
    uint64_t seed = 0x1f2e3d4c5b6a7988ull;
    static const int levels[] = {0, 1, 2, 6, 9};
    static const int strategies[] = {Z_FILTERED, Z_HUFFMAN_ONLY, Z_RLE, Z_FIXED};
    static const size_t sizes[] = {0, 1, 7, 300, 65536, 1u << 20};
    size_t max = 1u << 20;
    uint8_t *data = malloc(max), *out = malloc(max + 64), *ref = malloc(max + 64);

    /* 1. What zlib writes decodes back whole. */
    for (int kind = 0; kind < NKINDS; kind++) {
        int good = 0, tried = 0;
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            size_t n = sizes[si];
            fill(data, n, kind, &seed);
            for (size_t li = 0; li < 9; li++) {
                int level = li < 5 ? levels[li] : 6;
                int strategy = li < 5 ? Z_DEFAULT_STRATEGY : strategies[li - 5];
                size_t slen, used = 0;
                uint8_t *s = deflate_raw(data, n, level, strategy, &slen);
                tried++;
                if (s == NULL)
                    continue;
                if (mt_inflate(&z, s, slen, out, n, &used) == 0 && used == slen &&
                    memcmp(out, data, n) == 0)
                    good++;
                else
                    diag("%s, %zu bytes, level %d, strategy %d: not decoded", kind_name[kind], n,
                         level, strategy);
                free(s);
            }
        }
        is_int(tried, good, "%s: every size, level and strategy decodes back", kind_name[kind]);
    }

    /* 2. The output length must be exact; bytes after the stream are not used. */
    fill(data, 100000, TEXT, &seed);
    size_t slen, used;
    uint8_t *s = deflate_raw(data, 100000, 1, Z_DEFAULT_STRATEGY, &slen);
    is_int(-1, mt_inflate(&z, s, slen, out, 99999, &used), "one byte short of room: refused");
    is_int(-1, mt_inflate(&z, s, slen, out, 100001, &used), "one byte more expected: refused");
    uint8_t *padded = malloc(slen + 4);
    memcpy(padded, s, slen);
    memcpy(padded + slen, "\x01\x02\x03\x04", 4);
    ok(mt_inflate(&z, padded, slen + 4, out, 100000, &used) == 0 && used == slen,
       "a trailer after the stream: decoded, the trailer left unused");

    /* 3. Every cut of a stream is refused. */
    int cut_ok = 1;
    for (size_t k = 0; k < slen; k++)
        if (mt_inflate(&z, s, k, out, 100000, &used) == 0) {
            diag("cut at %zu of %zu decoded", k, slen);
            cut_ok = 0;
        }
    ok(cut_ok, "every one of %zu cuts of a dynamic-block stream is refused", slen);
    free(padded);

    /* 4. Hand-made blocks. */
    static const uint8_t empty_stored[] = {0x01, 0x00, 0x00, 0xff, 0xff};
    ok(mt_inflate(&z, empty_stored, 5, out, 0, &used) == 0 && used == 5,
       "an empty stored final block decodes to nothing");
    static const uint8_t bad_nlen[] = {0x01, 0x00, 0x00, 0x00, 0x00};
    is_int(-1, mt_inflate(&z, bad_nlen, 5, out, 0, &used), "stored lengths that disagree: refused");
    static const uint8_t type3[] = {0x07, 0x00, 0x00, 0x00};
    is_int(-1, mt_inflate(&z, type3, 4, out, 0, &used), "block type 3: refused");
    /* fixed block: literal 'a' then length 3 distance 2 (too far back after one byte) */
    static const uint8_t too_far[] = {0x4b, 0x04, 0x42, 0x00};
    is_int(-1, zlib_inflate(too_far, 4, ref, 4, &used), "zlib refuses a distance past the start");
    is_int(-1, mt_inflate(&z, too_far, 4, out, 4, &used), "a distance past the start: refused");
    is_int(-1, mt_inflate(&z, NULL, 0, out, 0, &used), "no input at all: refused");

    /* 5. Damaged streams: accepted exactly when zlib accepts them, to the same bytes. */
    size_t nmut = 0, agree = 0, accepted = 0;
    static const int mut_kinds[] = {TEXT, VARINTS, PERIODS, RANDOM};
    for (int mk = 0; mk < 4; mk++) {
        size_t n = 3000;
        fill(data, n, mut_kinds[mk], &seed);
        for (int lv = 0; lv < 3; lv++) {
            int strategy = lv == 2 ? Z_FIXED : Z_DEFAULT_STRATEGY;
            uint8_t *src = deflate_raw(data, n, lv == 0 ? 1 : 6, strategy, &slen);
            uint8_t *m = malloc(slen);
            for (int round = 0; round < 2500; round++) {
                memcpy(m, src, slen);
                int flips = 1 + (int)(test_rand_star(&seed) % 3);
                for (int f = 0; f < flips; f++) {
                    uint64_t r = test_rand_star(&seed);
                    /* most damage near the front, where the tables are */
                    size_t at = r % 4 ? (size_t)((r >> 8) % (slen < 80 ? slen : 80))
                                      : (size_t)((r >> 8) % slen);
                    m[at] ^= (uint8_t)(1u << ((r >> 40) % 8));
                }
                size_t zu = 0, mu = 0;
                int zr = zlib_inflate(m, slen, ref, n, &zu);
                int mr = mt_inflate(&z, m, slen, out, n, &mu);
                nmut++;
                if (zr == mr && (zr < 0 || (zu == mu && memcmp(ref, out, n) == 0)))
                    agree++;
                else if (agree + 5 > nmut)
                    diag("disagreement: zlib %d (used %zu), inflate %d (used %zu)", zr, zu, mr, mu);
                accepted += zr == 0;
            }
            free(m);
            free(src);
        }
    }
    is_int((long long)nmut, (long long)agree,
           "%zu damaged streams (%zu of them still valid): the same verdict and bytes as zlib",
           nmut, accepted);

    free(s);
    free(data);
    free(out);
    free(ref);
    done_testing();
    return 0;
}
