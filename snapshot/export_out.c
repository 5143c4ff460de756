/* export_out.c: the large exports' buffers and their writer thread (export_out.h). */
#include "config.h"

#include "export_out.h"

#include <errno.h>
#include <stdlib.h>

static void *out_writer(void *arg)
{
    struct mt_out *o = arg;
    pthread_mutex_lock(&o->lock);
    for (;;) {
        while (!o->lens[o->next] && !o->ending)
            pthread_cond_wait(&o->cond, &o->lock);
        size_t n = o->lens[o->next];
        if (!n)
            break;
        char *b = o->bufs[o->next];
        pthread_mutex_unlock(&o->lock);
        /* errors stick to out (out_failed()); their reason is this thread's errno */
        if (fwrite(b, 1, n, o->out) != n && !o->err)
            o->err = errno ? errno : EIO;
        pthread_mutex_lock(&o->lock);
        o->lens[o->next] = 0;
        o->next = (o->next + 1) % MT_OUT_NBUF;
        pthread_cond_broadcast(&o->cond);
    }
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

int mt_out_open(struct mt_out *o, FILE *out)
{
    memset(o, 0, sizeof(*o));
    o->out = out;
    int n = 0;
    while (n < MT_OUT_NBUF && (o->bufs[n] = malloc(MT_OUT_SIZE)) != NULL)
        n++;
    if (n < MT_OUT_NBUF) {
        while (n > 0)
            free(o->bufs[--n]);
        return -1;
    }
    o->buf = o->bufs[0];
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->cond, NULL);
    o->threaded = pthread_create(&o->thread, NULL, out_writer, o) == 0;
    return 0;
}

void mt_out_flush(struct mt_out *o)
{
    if (!o->len)
        return;
    if (!o->threaded) {
        fwrite(o->buf, 1, o->len, o->out);
        o->len = 0;
        return;
    }
    pthread_mutex_lock(&o->lock);
    o->lens[o->fill] = o->len;
    o->fill = (o->fill + 1) % MT_OUT_NBUF;
    pthread_cond_broadcast(&o->cond);
    while (o->lens[o->fill])
        pthread_cond_wait(&o->cond, &o->lock);
    pthread_mutex_unlock(&o->lock);
    o->buf = o->bufs[o->fill];
    o->len = 0;
}

void mt_out_close(struct mt_out *o)
{
    mt_out_flush(o);
    if (o->threaded) {
        pthread_mutex_lock(&o->lock);
        o->ending = 1;
        pthread_cond_broadcast(&o->cond);
        pthread_mutex_unlock(&o->lock);
        pthread_join(o->thread, NULL);
        if (o->err)
            errno = o->err;
    }
    pthread_cond_destroy(&o->cond);
    pthread_mutex_destroy(&o->lock);
    for (int k = 0; k < MT_OUT_NBUF; k++)
        free(o->bufs[k]);
}

void mt_out_mem_slow(struct mt_out *o, const char *s, size_t n)
{
    while (n) {
        if (o->len == MT_OUT_SIZE)
            mt_out_flush(o);
        size_t k = MT_OUT_SIZE - o->len < n ? MT_OUT_SIZE - o->len : n;
        memcpy(o->buf + o->len, s, k);
        o->len += k;
        s += k;
        n -= k;
    }
}

const char mt_out_digits2[200] =
    "00010203040506070809101112131415161718192021222324252627282930313233"
    "34353637383940414243444546474849505152535455565758596061626364656667"
    "6869707172737475767778798081828384858687888990919293949596979899";

static inline unsigned ndigits(uint64_t v)
{
    unsigned n = 1;
    while (v >= 10000) {
        v /= 10000;
        n += 4;
    }
    return n + (v >= 10) + (v >= 100) + (v >= 1000);
}

/* Decimal digits, written from the last straight into the buffer. */
void mt_out_u64(struct mt_out *o, uint64_t v)
{
    unsigned n = ndigits(v);
    char *d = mt_out_room(o, 20), *p = d + n;
    while (v >= 100) {
        p -= 2;
        memcpy(p, mt_out_digits2 + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10) {
        p -= 2;
        memcpy(p, mt_out_digits2 + 2 * v, 2);
    } else
        *--p = (char)('0' + v);
    o->len += n;
}

void mt_out_i64(struct mt_out *o, int64_t v)
{
    if (v < 0) {
        mt_out_char(o, '-');
        mt_out_u64(o, (uint64_t)0 - (uint64_t)v);
    } else
        mt_out_u64(o, (uint64_t)v);
}

void mt_out_hex(struct mt_out *o, uint64_t v)
{
    char t[16];
    char *p = t + sizeof(t);
    do {
        *--p = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    mt_out_mem(o, p, (size_t)(t + sizeof(t) - p));
}

void mt_out_json_str(struct mt_out *o, const char *s)
{
    mt_out_char(o, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const unsigned char *q = p;
        while (*q >= 0x20 && *q != '"' && *q != '\\')
            q++;
        if (q > p) { /* a run that needs no escape, in one copy */
            mt_out_mem(o, (const char *)p, (size_t)(q - p));
            p = q;
            if (!*p)
                break;
        }
        switch (*p) {
        case '"':
            mt_out_lit(o, "\\\"");
            break;
        case '\\':
            mt_out_lit(o, "\\\\");
            break;
        case '\n':
            mt_out_lit(o, "\\n");
            break;
        case '\r':
            mt_out_lit(o, "\\r");
            break;
        case '\t':
            mt_out_lit(o, "\\t");
            break;
        default:
            if (*p < 0x20) {
                mt_out_lit(o, "\\u00");
                mt_out_char(o, "0123456789abcdef"[*p >> 4]);
                mt_out_char(o, "0123456789abcdef"[*p & 15]);
            } else
                mt_out_char(o, (char)*p);
        }
    }
    mt_out_char(o, '"');
}
