/* format.h: constants and coding helpers of the .memtrace format, shared by the
 * writer and the reader (internal). docs/FORMAT.md is the specification. */
#ifndef MEMTRACE_FORMAT_H
#define MEMTRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MT_MAGIC         "MEMTRACE"
#define MT_MAGIC_LEN     8
#define MT_VERSION_MAJOR 1
#define MT_VERSION_MINOR 0
#define MT_HEADER_LEN    16 /* magic, u16 major, u16 minor, u32 flags */

/* Chunk header: u8 type, u8 flags, u16 reserved, u32 stored_len, u32 raw_len,
 * u32 crc32(stored payload), u32 crc32(header bytes 0..15). */
#define MT_CHUNK_HEADER_LEN 20
/* Neither length may exceed this: a reader never allocates more for one chunk. */
#define MT_CHUNK_MAX (256u << 20)
/* Events per EVENTS chunk at most; the writer splits larger batches. */
#define MT_CHUNK_MAX_EVENTS (1u << 20)
/* Table entries per chunk at most (the writer splits). */
#define MT_CHUNK_MAX_ENTRIES (1u << 20)

enum mt_chunk_type {
    MT_CHUNK_META = 1,
    MT_CHUNK_STRINGS = 2,
    MT_CHUNK_FRAMES = 3,
    MT_CHUNK_STACKS = 4,
    MT_CHUNK_EVENTS = 5,
    MT_CHUNK_STATE = 6,
    MT_CHUNK_END = 7,
};

/* EVENTS columns, in payload order. HIT holds one flag per event; TIME one value
 * per event; every other column one value per missed (not predicted) event. */
enum mt_column {
    MT_COL_HIT,
    MT_COL_ACTION,
    MT_COL_TIME,      /* zigzag delta */
    MT_COL_TID,       /* zigzag delta */
    MT_COL_ADDR,      /* zigzag delta */
    MT_COL_SIZE,      /* plain */
    MT_COL_REQUESTED, /* zigzag(requested_size - size) */
    MT_COL_STREAM,    /* zigzag delta */
    MT_COL_AUX,       /* plain */
    MT_COL_DEVICE,    /* zigzag delta of the signed value */
    MT_COL_POOL,      /* zigzag delta of the signed value */
    MT_COL_STACK,     /* plain */
    MT_COL_CATEGORY,  /* plain */
    MT_COL_SOURCE,    /* plain */
    MT_COL_COUNT
};

enum mt_column_mode {
    MT_COLMODE_CONST = 0,  /* one varint: the field value of every event */
    MT_COLMODE_VARINT = 1, /* u32 byte length, then one varint per value */
    MT_COLMODE_BITS = 2,   /* u32 byte length, then one bit per value, LSB first */
};

/* Prediction: a table of MT_PREDICT_SIZE events, all zero at the start of each EVENTS
 * chunk. Event i is predicted by the entry selected by event i-1's action and
 * address; after event i, that entry becomes event i. A hit means every field but
 * time_ns equals the prediction. */
#define MT_PREDICT_BITS 12
#define MT_PREDICT_SIZE (1u << MT_PREDICT_BITS)

static inline uint32_t mt_predict_key(uint64_t addr, uint8_t action)
{
    return (uint32_t)(((addr + action) * 0x9E3779B97F4A7C15ULL) >> (64 - MT_PREDICT_BITS));
}

static inline uint64_t mt_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t mt_unzigzag(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* Writes v as a LEB128 varint at p (room for 10 bytes needed); returns the end. */
static inline uint8_t *mt_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Reads a varint from [*pp, end): 0 on success, -1 if it runs past end or is longer
 * than 10 bytes. */
static inline int mt_get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (p >= end)
            return -1;
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return -1;
}

static inline void mt_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void mt_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* reader.c decodes most EVENTS chunks by a loop of their own (one thread, device,
 * pool and stream); with on != 0, readers opened after the call decode every chunk
 * the general way, so that tests can check that both give the same events. */
void mt_reader_general_only(int on);

static inline uint16_t mt_get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t mt_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

#endif
