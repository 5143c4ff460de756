/* inflate_bench: the reader's inflater (snapshot/inflate.c) against zlib's inflate on
 * the EVENTS chunks of a .memtrace file, the work `memtrace summary` and the other
 * replay commands spend on decompression.
 *
 *   bench/inflate_bench FILE [ROUNDS]
 *
 * Each round inflates every EVENTS chunk once with each decoder (zlib raw, as the
 * reader did before, then inflate.c) and checks that both give the chunk's raw
 * length; it prints the CPU time of each per round, best of ROUNDS (default 5). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "format.h"
#include "inflate.h"

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fputs("usage: inflate_bench FILE [ROUNDS]\n", stderr);
        return 2;
    }
    int rounds = argc == 3 ? atoi(argv[2]) : 5;
    if (rounds < 1) {
        fprintf(stderr, "inflate_bench: ROUNDS must be a positive number, not '%s'\n", argv[2]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL) {
        perror(argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf == NULL || n < MT_HEADER_LEN || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "inflate_bench: %s: cannot read it whole\n", argv[1]);
        return 1;
    }
    fclose(f);
    uint8_t *out = malloc(MT_CHUNK_MAX + 1);
    static struct mt_inflater mi;
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (out == NULL || inflateInit2(&zs, -15) != Z_OK)
        return 1;
    double best_z = 1e9, best_m = 1e9;
    size_t chunks = 0, raw = 0;
    for (int round = 0; round < rounds; round++) {
        double tz = 0, tm = 0;
        chunks = raw = 0;
        for (size_t off = MT_HEADER_LEN; off + MT_CHUNK_HEADER_LEN <= (size_t)n;) {
            const uint8_t *h = buf + off;
            uint32_t stored = mt_get_u32(h + 4), len = mt_get_u32(h + 8);
            if (stored > (size_t)n - off - MT_CHUNK_HEADER_LEN || len > MT_CHUNK_MAX || stored < 6)
                break;
            if (h[0] == MT_CHUNK_EVENTS) {
                const uint8_t *s = h + MT_CHUNK_HEADER_LEN + 2; /* past the zlib header */
                double t0 = cpu_s();
                inflateReset(&zs);
                zs.next_in = (Bytef *)s;
                zs.avail_in = stored - 2;
                zs.next_out = out;
                zs.avail_out = len + 1;
                int zr = inflate(&zs, Z_FINISH);
                double t1 = cpu_s();
                size_t used;
                int mr = mt_inflate(&mi, s, stored - 2, out, len, &used);
                double t2 = cpu_s();
                if (zr != Z_STREAM_END || zs.total_out != len || mr != 0 || used != stored - 6) {
                    fprintf(stderr, "inflate_bench: chunk at offset %zu does not inflate\n", off);
                    return 1;
                }
                tz += t1 - t0;
                tm += t2 - t1;
                chunks++;
                raw += len;
            }
            off += MT_CHUNK_HEADER_LEN + stored;
        }
        if (tz < best_z)
            best_z = tz;
        if (tm < best_m)
            best_m = tm;
    }
    printf("%zu EVENTS chunks, %zu raw bytes; CPU s per pass, best of %d: zlib %.3f, "
           "inflate.c %.3f (%.2fx)\n",
           chunks, raw, rounds, best_z, best_m, best_m > 0 ? best_z / best_m : 0.0);
    inflateEnd(&zs);
    free(out);
    free(buf);
    return 0;
}
