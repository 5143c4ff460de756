/* cli_fmt.c: human units for the CLI: bytes, durations, counts, UTC times. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

int mt_exact_bytes;

const char *mt_fmt_bytes(char *buf, size_t size, uint64_t bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024 || mt_exact_bytes) {
        snprintf(buf, size, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    /* Switch units where the rounded figure would read 1024.0. */
    while (v >= 1023.95 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

const char *mt_fmt_duration(char *buf, size_t size, uint64_t ns)
{
    if (ns < 1000)
        snprintf(buf, size, "%" PRIu64 " ns", ns);
    else if (ns < 1000000)
        snprintf(buf, size, "%.1f us", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, size, "%.1f ms", (double)ns / 1e6);
    else
        snprintf(buf, size, "%.3f s", (double)ns / 1e9);
    return buf;
}

const char *mt_fmt_count(char *buf, size_t size, uint64_t n)
{
    char digits[32];
    int len = snprintf(digits, sizeof(digits), "%" PRIu64, n);
    size_t o = 0;
    for (int k = 0; k < len && o + 1 < size; k++) {
        if (k > 0 && (len - k) % 3 == 0 && o + 2 < size)
            buf[o++] = ',';
        buf[o++] = digits[k];
    }
    if (size)
        buf[o < size ? o : size - 1] = '\0';
    return buf;
}

const char *mt_fmt_utc(char *buf, size_t size, uint64_t epoch_ns)
{
    time_t secs = (time_t)(epoch_ns / 1000000000u);
    struct tm tm;
    if (!gmtime_r(&secs, &tm)) {
        snprintf(buf, size, "?");
        return buf;
    }
    char day[40];
    strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%s.%03uZ", day, (unsigned)(epoch_ns % 1000000000u / 1000000u));
    return buf;
}

/* Length of the valid UTF-8 sequence at s (1 to 4), or 0 when s[0] starts none. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, min = 0x10000;
    else
        return 0;
    unsigned cp = c & (0x3f >> (n - 1));
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* Calls put(ctx, piece, len) for s in pieces, with every byte that could act on a
 * terminal or is not UTF-8 (C0 and C1 controls, DEL, stray bytes) as the text \xNN and
 * a backslash as \\, so that what is shown is what the file holds. */
static void escape(const char *s, int json, void (*put)(void *, const char *, size_t), void *ctx)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = utf8_len(p);
        int c1 = n == 2 && p[0] == 0xc2 && p[1] < 0xa0;
        if (n == 0 || (!json && (c1 || *p < 0x20 || *p == 0x7f || *p == '\\'))) {
            char hex[8];
            if (*p == '\\')
                put(ctx, "\\\\", 2);
            else
                put(ctx, hex, (size_t)snprintf(hex, sizeof(hex), "\\x%02x", *p));
            p++;
            continue;
        }
        put(ctx, (const char *)p, n);
        p += n;
    }
}

static void put_file(void *ctx, const char *s, size_t n)
{
    fwrite(s, 1, n, ctx);
}

void mt_fputs_safe(const char *s, FILE *f)
{
    escape(s ? s : "", 0, put_file, f);
}

struct sbuf {
    char *p;
    size_t len, cap;
};

static void put_buf(void *ctx, const char *s, size_t n)
{
    struct sbuf *b = ctx;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

char *mt_escape(const char *s, int json)
{
    struct sbuf b = {0};
    put_buf(&b, "", 0);
    escape(s ? s : "", json, put_buf, &b);
    return b.p;
}
