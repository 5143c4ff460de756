/* inflate_fuzz: snapshot/inflate.c against zlib on the same bytes. The input is a
 * raw deflate stream; zlib inflates it with room to spare, and the decoder here must
 * agree: where zlib ends the stream, the same bytes from the same input bytes (and a
 * refusal when told to expect one byte fewer); where zlib refuses it or finds it
 * unfinished, a refusal whatever the length expected.
 * Seeds: tests/fuzz/corpus/inflate/, streams that zlib's deflate wrote at several
 * levels and strategies. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz.h"
#include "inflate.h"

#define ROOM (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct mt_inflater z;
    static uint8_t ref[ROOM], out[ROOM];
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    FUZZ_CHECK(inflateInit2(&zs, -15) == Z_OK, "inflateInit2 failed");
    zs.next_in = (Bytef *)data;
    zs.avail_in = (uInt)size;
    zs.next_out = ref;
    zs.avail_out = ROOM;
    int zr = inflate(&zs, Z_FINISH);
    size_t n = zs.total_out, zused = zs.total_in;
    inflateEnd(&zs);
    size_t used = 0;
    if (zr == Z_STREAM_END) {
        int rc = mt_inflate(&z, data, size, out, n, &used);
        FUZZ_CHECK(rc == 0, "zlib decodes the stream, inflate.c refuses it");
        FUZZ_CHECK(used == zused, "the two decoders end the stream at different bytes");
        FUZZ_CHECK(memcmp(out, ref, n) == 0, "the two decoders give different bytes");
        if (n > 0)
            FUZZ_CHECK(mt_inflate(&z, data, size, out, n - 1, &used) < 0,
                       "a stream decoded into less room than it needs");
    } else if (zr != Z_BUF_ERROR || zs.avail_out > 0) {
        /* refused, or cut short (zlib wanted more input): never accepted here */
        FUZZ_CHECK(mt_inflate(&z, data, size, out, n, &used) < 0,
                   "zlib refuses the stream, inflate.c decodes it");
        FUZZ_CHECK(mt_inflate(&z, data, size, out, ROOM, &used) < 0,
                   "zlib refuses the stream, inflate.c decodes it with room to spare");
    }
    return 0;
}
