/* cli_fmt.c: human units for the CLI: bytes, durations, counts, UTC times. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "mtx/escape.h"

int cli_exact_bytes;

const char *cli_fmt_bytes(char *buf, size_t size, uint64_t bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024 || cli_exact_bytes) {
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

const char *cli_fmt_duration(char *buf, size_t size, uint64_t ns)
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

const char *cli_fmt_count(char *buf, size_t size, uint64_t n)
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

const char *cli_fmt_utc(char *buf, size_t size, uint64_t epoch_ns)
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

static void put_file(void *ctx, const char *s, size_t n)
{
    fwrite(s, 1, n, ctx);
}

void cli_fputs_safe(const char *s, FILE *f)
{
    mtx_escape(s ? s : "", 0, put_file, f);
}

char *cli_escape(const char *s, int json)
{
    return mtx_escape_dup(s, json);
}

const char *cli_point_text(char *buf, size_t size, const struct mt_point *p)
{
    char d[48];
    switch (p->kind) {
    case MT_POINT_EVENT:
        snprintf(buf, size, "event #%" PRIu64, p->value);
        return buf;
    case MT_POINT_TIME:
        snprintf(buf, size, "+%s", cli_fmt_duration(d, sizeof(d), p->value));
        return buf;
    case MT_POINT_ANNOTATION:
        snprintf(buf, size, "'%s'", p->name);
        return buf;
    default:
        return NULL;
    }
}
