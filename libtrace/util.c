#include "config.h"

#include "util.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

uint64_t mt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t mt_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static MT_TLS uint32_t tls_tid;

uint32_t mt_gettid(void)
{
    if (MT_UNLIKELY(tls_tid == 0))
        tls_tid = (uint32_t)syscall(SYS_gettid);
    return tls_tid;
}

static size_t put_char(char *buf, size_t size, size_t pos, char c)
{
    if (pos + 1 < size)
        buf[pos] = c;
    return pos + 1;
}

static size_t put_str(char *buf, size_t size, size_t pos, const char *s)
{
    if (s == NULL)
        s = "(null)";
    while (*s)
        pos = put_char(buf, size, pos, *s++);
    return pos;
}

static size_t put_num(char *buf, size_t size, size_t pos, unsigned long long v, int base,
                      int negative)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v % (unsigned)base];
        v /= (unsigned)base;
    } while (v != 0);
    if (negative)
        pos = put_char(buf, size, pos, '-');
    while (n > 0)
        pos = put_char(buf, size, pos, tmp[--n]);
    return pos;
}

size_t mt_vformat(char *buf, size_t size, const char *fmt, va_list ap)
{
    size_t pos = 0;
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            pos = put_char(buf, size, pos, *p);
            continue;
        }
        p++;
        int longs = 0, sz = 0;
        while (*p == 'l') {
            longs++;
            p++;
        }
        if (*p == 'z') {
            sz = 1;
            p++;
        }
        switch (*p) {
        case 's':
            pos = put_str(buf, size, pos, va_arg(ap, const char *));
            break;
        case 'd': {
            long long v = longs >= 2   ? va_arg(ap, long long)
                          : longs == 1 ? va_arg(ap, long)
                          : sz         ? (long long)va_arg(ap, size_t)
                                       : va_arg(ap, int);
            unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
            pos = put_num(buf, size, pos, u, 10, v < 0);
            break;
        }
        case 'u':
        case 'x': {
            unsigned long long v = longs >= 2   ? va_arg(ap, unsigned long long)
                                   : longs == 1 ? va_arg(ap, unsigned long)
                                   : sz         ? va_arg(ap, size_t)
                                                : va_arg(ap, unsigned);
            pos = put_num(buf, size, pos, v, *p == 'x' ? 16 : 10, 0);
            break;
        }
        case 'p':
            pos = put_str(buf, size, pos, "0x");
            pos = put_num(buf, size, pos, (uintptr_t)va_arg(ap, void *), 16, 0);
            break;
        case '%':
            pos = put_char(buf, size, pos, '%');
            break;
        case '\0':
            p--;
            break;
        default:
            pos = put_char(buf, size, pos, '?');
            break;
        }
    }
    if (size > 0)
        buf[pos < size ? pos : size - 1] = '\0';
    return pos < size ? pos : (size > 0 ? size - 1 : 0);
}

size_t mt_format(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = mt_vformat(buf, size, fmt, ap);
    va_end(ap);
    return n;
}

void mt_log(const char *fmt, ...)
{
    char buf[512];
    size_t n = mt_format(buf, sizeof buf, "%s", "memtrace: ");
    va_list ap;
    va_start(ap, fmt);
    n += mt_vformat(buf + n, sizeof buf - n - 1, fmt, ap);
    va_end(ap);
    buf[n++] = '\n';
    int saved = errno;
    (void)mt_write_all(2, buf, n);
    errno = saved;
}

void *mt_map(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void mt_unmap(void *p, size_t size)
{
    if (p != NULL)
        munmap(p, size);
}

void *mt_arena_alloc(struct mt_arena *a, size_t size, size_t align)
{
    uintptr_t cur = (uintptr_t)a->cur;
    uintptr_t aligned = (cur + align - 1) & ~(uintptr_t)(align - 1);
    size_t need = size + (aligned - cur);
    if (a->cur == NULL || need > a->left) {
        size_t block = size + align > (1u << 20) ? size + align : (1u << 20);
        char *p = mt_map(block);
        if (p == NULL)
            return NULL;
        a->cur = p;
        a->left = block;
        cur = (uintptr_t)p;
        aligned = (cur + align - 1) & ~(uintptr_t)(align - 1);
        need = size + (aligned - cur);
    }
    a->cur += need;
    a->left -= need;
    return (void *)aligned;
}

int mt_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

uint64_t mt_hash_bytes(const void *p, size_t len)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    return mt_hash_u64(h);
}
