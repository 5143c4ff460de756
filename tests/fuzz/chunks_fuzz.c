/* chunks_fuzz: the .memtrace reader past its framing. The input describes a file and
 * this target writes it with a valid header, compressed chunks and correct checksums
 * (docs/FORMAT.md), so that mutations land in the payloads:
 *
 *   input   := control:u8 version:u8 record*
 *   record  := type:u8 len:u16le payload[len]     (a short last record is cut)
 *
 * control bit 0 appends an END chunk, bit 1 cuts the file inside its last chunk,
 * bit 2 damages the last chunk's checksum, bits 3-5 pick a replay filter (by device,
 * by size, a window of events), so that the filtered passes of `summary`, `peak` and
 * `timeline` run too; every file is also read twice, with and without the decoding
 * loop for chunks of one thread and device, and the two must agree. version 0 writes 1.0, 0xff
 * major 0 and 0xfe major 2 (both refused), any other v writes 1.(v-1). Seeds:
 * tests/fuzz/corpus/chunks/, made from the reader's seeds by tests/fuzz/chunks-seed.py. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "format.h"
#include "fuzz.h"

struct out {
    uint8_t *p;
    size_t n, cap;
};

static void put(struct out *o, const void *p, size_t n)
{
    if (o->n + n > o->cap) {
        size_t cap = (o->n + n) * 2;
        o->p = realloc(o->p, cap);
        FUZZ_CHECK(o->p != NULL, "out of memory");
        o->cap = cap;
    }
    memcpy(o->p + o->n, p, n);
    o->n += n;
}

static void chunk(struct out *o, uint8_t type, const uint8_t *raw, size_t len, int bad_crc)
{
    uLongf stored_len = compressBound((uLong)len);
    uint8_t *stored = malloc(stored_len ? stored_len : 1);
    FUZZ_CHECK(stored != NULL, "out of memory");
    FUZZ_CHECK(compress2(stored, &stored_len, raw, (uLong)len, 1) == Z_OK, "compress2 failed");
    uint8_t h[MT_CHUNK_HEADER_LEN] = {type};
    mt_put_u32(h + 4, (uint32_t)stored_len);
    mt_put_u32(h + 8, (uint32_t)len);
    uint32_t crc = (uint32_t)crc32(0, stored, (uInt)stored_len);
    mt_put_u32(h + 12, bad_crc ? ~crc : crc);
    mt_put_u32(h + 16, (uint32_t)crc32(0, h, 16));
    put(o, h, sizeof(h));
    put(o, stored, stored_len);
    free(stored);
}

/* Reads up to max events of path into ev; how many, or -1 if it cannot be opened. An
 * error or the end stops it: what came before is what both decoders must agree on. */
static long read_events(const char *path, struct memtrace_event *ev, long max, int *rc)
{
    struct memtrace_reader *r;
    *rc = 0;
    if (memtrace_reader_open(&r, path, NULL) != 0)
        return -1;
    long n = 0;
    while (n < max && (*rc = memtrace_reader_next(r, &ev[n])) == 1)
        n++;
    memtrace_reader_close(r);
    return n;
}

/* The loop for chunks of one thread and device and the general decoder give the same
 * events, and stop at the same error. */
static void same_both_ways(const char *path)
{
    enum { MAX = 1 << 16 };
    static struct memtrace_event a[MAX], b[MAX];
    int rca, rcb;
    long na = read_events(path, a, MAX, &rca);
    mt_reader_general_only(1);
    long nb = read_events(path, b, MAX, &rcb);
    mt_reader_general_only(0);
    FUZZ_CHECK(na == nb && rca == rcb, "the two decoders read different counts");
    for (long i = 0; i < na; i++)
        FUZZ_CHECK(a[i].time_ns == b[i].time_ns && a[i].addr == b[i].addr &&
                       a[i].size == b[i].size && a[i].requested_size == b[i].requested_size &&
                       a[i].stream == b[i].stream && a[i].aux == b[i].aux &&
                       a[i].device == b[i].device && a[i].pool == b[i].pool &&
                       a[i].tid == b[i].tid && a[i].stack == b[i].stack &&
                       a[i].category == b[i].category && a[i].source == b[i].source &&
                       a[i].action == b[i].action,
                   "the two decoders read different events");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t control = data[0], version = data[1];
    struct out o = {0};
    uint8_t h[MT_HEADER_LEN];
    memcpy(h, MT_MAGIC, MT_MAGIC_LEN);
    mt_put_u16(h + 8, version == 0 ? 1 : version == 0xff ? 0 : version == 0xfe ? 2 : 1);
    mt_put_u16(h + 10, version == 0 ? 0 : (uint16_t)(version - 1));
    mt_put_u32(h + 12, 0);
    put(&o, h, sizeof(h));
    size_t last = o.n;
    const uint8_t *p = data + 2, *end = data + size;
    while (end - p >= 3) {
        size_t len = (size_t)(p[1] | (p[2] << 8));
        uint8_t type = p[0];
        p += 3;
        if (len > (size_t)(end - p))
            len = (size_t)(end - p);
        last = o.n;
        chunk(&o, type, p, len, (control & 4) && p + len == end && !(control & 1));
        p += len;
    }
    if (control & 1) {
        static const char totals[] = "{\"events\": 0}";
        last = o.n;
        chunk(&o, MT_CHUNK_END, (const uint8_t *)totals, sizeof(totals) - 1, 0);
    }
    if ((control & 2) && o.n > last + 1)
        o.n = last + (o.n - last) / 2;

    struct mt_filter filter;
    memset(&filter, 0, sizeof(filter));
    switch ((control >> 3) & 7) {
    case 1:
        filter.has_device = 1;
        filter.device = 0;
        break;
    case 2:
        filter.min_size = 4096;
        break;
    case 3:
        filter.from.kind = MT_POINT_EVENT;
        filter.from.value = 2;
        filter.to.kind = MT_POINT_EVENT;
        filter.to.value = 20;
        break;
    case 4:
        filter.from.kind = MT_POINT_TIME;
        filter.from.value = 1000;
        break;
    case 5:
        filter.from.kind = MT_POINT_ANNOTATION;
        filter.from.name = "step";
        filter.to.kind = MT_POINT_ANNOTATION;
        filter.to.name = "step";
        break;
    case 6:
        filter.category = "activation";
        filter.has_stream = 1;
        filter.stream = 0;
        break;
    }
    const char *path = fuzz_file(o.p, o.n);
    fuzz_walk(path, ((control >> 3) & 7) ? &filter : NULL);
    same_both_ways(path);
    free(o.p);
    return 0;
}
