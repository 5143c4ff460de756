/* export.h: .memtrace files into other tools' formats (internal).
 *
 * Every export streams: it reads the file as events come (through the replay model
 * where it needs levels or per-stack figures) and writes as it goes, keeping memory in
 * proportion to live blocks, distinct stacks and frames, never to events. The PyTorch
 * exports read the file once per device plus twice (a device trace is one list in
 * the output, and events of several devices interleave in the file). */
#ifndef MEMTRACE_EXPORT_H
#define MEMTRACE_EXPORT_H

#include <stdint.h>
#include <stdio.h>

#include "memtrace_snapshot.h"

enum mt_export_format {
    MT_EXPORT_PYTORCH_PICKLE,
    MT_EXPORT_PYTORCH_JSON,
    MT_EXPORT_PERFETTO,
    MT_EXPORT_SPEEDSCOPE,
    MT_EXPORT_FOLDED,
    MT_EXPORT_CSV,
    MT_EXPORT_COUNT
};

/* The format named name ("pytorch-pickle", "pytorch-json", "perfetto", "speedscope",
 * "folded", "csv"), or -1. */
int mt_export_format_from_name(const char *name);
const char *mt_export_format_name(int format);

struct mt_export_stats {
    uint64_t events;   /* events read */
    uint64_t written;  /* entries written (trace entries, trace events, lines) */
    uint64_t left_out; /* events the format has no place for (host memory in a PyTorch
                          snapshot, counters, ...) */
    int truncated;     /* the input ended without its end record */
    int window_missed; /* a --from point that was never reached: nothing in the window */
    int window_closed; /* the window's --to was reached */
};

/* Flags of mt_export. */
#define MT_EXPORT_ALL_FRAMES                                                                       \
    1u /* folded, speedscope: every frame, not only those shown                                    \
          (frames.h); the other formats carry them all anyway */

struct mt_filter;

/* Exports the .memtrace file at path to out in format. A filter f (NULL: none) keeps
 * the allocations it chooses and the window it bounds, as the analysis commands do
 * (docs/memtrace.1); the PyTorch formats take none (MEMTRACE_EINVAL). Returns 0, or a
 * negative MEMTRACE_E* code with err->text one line naming the file and the problem
 * (MEMTRACE_EIO: out could not be written). */
int mt_export(const char *path, int format, unsigned flags, const struct mt_filter *f, FILE *out,
              struct mt_export_stats *st, struct memtrace_errinfo *err);

/* Parts shared by the exporters (export.c). */
int mt_export_pytorch(const char *path, int pickle, FILE *out, struct mt_export_stats *st,
                      struct memtrace_errinfo *err);
int mt_export_perfetto(const char *path, const struct mt_filter *f, FILE *out,
                       struct mt_export_stats *st, struct memtrace_errinfo *err);
int mt_export_speedscope(const char *path, unsigned flags, const struct mt_filter *f, FILE *out,
                         struct mt_export_stats *st, struct memtrace_errinfo *err);
/* A frame's name and file as the exports show them: the symbol, else
 * "module+0xOFFSET", else "0xIP" when the frame has an address, else ""; the file,
 * else the module. */
const char *mt_export_frame_name(char *buf, size_t size, const struct memtrace_frame *fr);
const char *mt_export_frame_file(const struct memtrace_frame *fr);
/* The frame ids of stack, innermost first, into *buf (grown as needed; NULL and 0 to
 * start): those frames.h shows, or all with MT_EXPORT_ALL_FRAMES in flags. Their
 * number, or -1 when out of memory. */
int mt_export_stack(const struct memtrace_reader *r, uint32_t stack, unsigned flags, uint32_t **buf,
                    int *cap);
/* Writes s as a JSON string literal. */
void mt_export_json_str(FILE *out, const char *s);
/* One byte of an export. Only the exporting thread writes its FILE (the Perfetto
 * writer's thread writes only whole buffers, never through this), so the byte goes
 * in without the stream's lock: once the reader's thread exists, fputc takes that
 * lock, an atomic pair, for every byte, which was three quarters of a PyTorch
 * export's time. */
static inline void mt_export_byte(FILE *out, int c)
{
    putc_unlocked(c, out);
}
/* Copies the reader's error (or a generic one) into err and returns its code. */
int mt_export_reader_failed(struct memtrace_reader *r, const char *path, int rc,
                            struct memtrace_errinfo *err);
/* Wall-clock ns of an event's monotonic time, from the metadata's clock pair (the
 * time itself when the metadata has none). */
struct mt_wallclock {
    uint64_t wall0, mono0;
    int have;
};
void mt_export_wallclock(struct memtrace_reader *r, struct mt_wallclock *c);
static inline uint64_t mt_export_wall(const struct mt_wallclock *c, uint64_t t)
{
    return c->have ? c->wall0 + (t - c->mono0) : t;
}

#endif
