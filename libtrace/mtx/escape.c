/* escape.c: strings from a recorded program or a file, made safe to show and to put
 * in JSON (mtx/escape.h). */
#include "config.h"

#include "mtx/escape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void mtx_escape(const char *s, int json, void (*put)(void *, const char *, size_t), void *ctx)
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

char *mtx_escape_dup(const char *s, int json)
{
    struct sbuf b = {0};
    put_buf(&b, "", 0);
    mtx_escape(s ? s : "", json, put_buf, &b);
    return b.p;
}
