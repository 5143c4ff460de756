/* cache_config.c: the caching allocator's settings, PyTorch's "key:value,..." syntax. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_impl.h"
#include "mtx/escape.h"

static const char known_keys[] =
    "max_split_size_mb, roundup_power2_divisions, garbage_collection_threshold, "
    "expandable_segments, release_lock_on_cudamalloc, pinned_use_cuda_host_register, "
    "oom_snapshot";

static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mt_alloc_settings api_settings; /* set_mask 0: nothing given yet */
static _Thread_local char error_text[256];

void mt_alloc_settings_default(struct mt_alloc_settings *s)
{
    memset(s, 0, sizeof(*s));
    s->max_split_size = MT_NO_SPLIT_LIMIT;
}

void mt_alloc_set_error_text(const char *text)
{
    snprintf(error_text, sizeof(error_text), "%s", text);
}

MEMTRACE_API const char *memtrace_alloc_config_error_text(void)
{
    return error_text;
}

static int fail(struct memtrace_alloc_config_error *err, int pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct memtrace_alloc_config_error *err, int pos, const char *fmt, ...)
{
    char text[sizeof(err->text)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (err) {
        err->position = pos;
        memcpy(err->text, text, sizeof(text));
    }
    mt_alloc_set_error_text(text);
    return MEMTRACE_ECONFIG;
}

static int is_pow2(unsigned long long v)
{
    return v && !(v & (v - 1));
}

static unsigned log2u(unsigned long long v)
{
    return 63u - (unsigned)__builtin_clzll(v);
}

/* A non-negative decimal integer filling all of [s, s+n). */
static int parse_uint(const char *s, size_t n, unsigned long long *out)
{
    char tmp[32];
    char *end;
    if (n == 0 || n >= sizeof(tmp) || s[0] == '-' || s[0] == '+')
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    errno = 0;
    *out = strtoull(tmp, &end, 10);
    return (errno || *end) ? -1 : 0;
}

static int parse_bool(const char *v, size_t n, int *out)
{
    if (n == 4 && !memcmp(v, "True", 4))
        *out = 1;
    else if (n == 5 && !memcmp(v, "False", 5))
        *out = 0;
    else
        return -1;
    return 0;
}

/* The list form: [256:1,512:2,1024:4,>:8], sizes in MiB (powers of two) mapping to a
 * number of divisions. The first entry also covers every smaller interval, ">" every
 * larger one; intervals no entry names keep plain rounding. */
static int parse_divisions_list(const char *v, size_t n, int pos, unsigned div[MT_DIV_INTERVALS],
                                struct memtrace_alloc_config_error *err)
{
    size_t i = 1;
    int first = 1;
    unsigned last = 0;
    if (n < 2 || v[n - 1] != ']')
        return fail(err, pos,
                    "MEMTRACE_ALLOC_CONF: bad list for roundup_power2_divisions at %d "
                    "(expected [size_mb:divisions,...,>:divisions])",
                    pos);
    memset(div, 0, sizeof(unsigned) * MT_DIV_INTERVALS);
    while (i < n - 1) {
        size_t k = i, c, e;
        unsigned long long size = 0, d;
        while (k < n - 1 && v[k] != ':')
            k++;
        c = k;
        e = c;
        while (e < n - 1 && v[e] != ',')
            e++;
        if (c >= n - 1 || c == i || c + 1 == e)
            return fail(err, pos + (int)i,
                        "MEMTRACE_ALLOC_CONF: bad entry '%.*s' in roundup_power2_divisions at %d "
                        "(expected size_mb:divisions)",
                        (int)(e - i), v + i, pos + (int)i);
        if (parse_uint(v + c + 1, e - c - 1, &d) || !is_pow2(d) || d > 65536)
            return fail(err, pos + (int)c + 1,
                        "MEMTRACE_ALLOC_CONF: bad value '%.*s' for roundup_power2_divisions at "
                        "%d (expected a power of two)",
                        (int)(e - c - 1), v + c + 1, pos + (int)c + 1);
        if (c - i == 1 && v[i] == '>') {
            for (unsigned j = first ? 0 : last + 1; j < MT_DIV_INTERVALS; j++)
                div[j] = (unsigned)d;
        } else {
            if (parse_uint(v + i, c - i, &size) || !is_pow2(size))
                return fail(err, pos + (int)i,
                            "MEMTRACE_ALLOC_CONF: bad size '%.*s' in roundup_power2_divisions at "
                            "%d (expected a power of two in MiB, or '>')",
                            (int)(c - i), v + i, pos + (int)i);
            last = log2u(size);
            if (last >= MT_DIV_INTERVALS)
                last = MT_DIV_INTERVALS - 1;
            if (first)
                for (unsigned j = 0; j < last; j++)
                    div[j] = (unsigned)d;
            div[last] = (unsigned)d;
        }
        first = 0;
        i = e + (e < n - 1);
    }
    if (first)
        return fail(err, pos, "MEMTRACE_ALLOC_CONF: empty list for roundup_power2_divisions at %d",
                    pos);
    return 0;
}

static int apply(struct mt_alloc_settings *s, const char *key, size_t kn, const char *v, size_t vn,
                 int kpos, int vpos, struct memtrace_alloc_config_error *err)
{
    unsigned long long u;
#define KEY(name) (kn == sizeof(name) - 1 && !memcmp(key, name, kn))
    if (KEY("max_split_size_mb")) {
        if (parse_uint(v, vn, &u) || u <= MT_LARGE_BUFFER / MT_MB || u > (1ull << 40))
            return fail(err, vpos,
                        "MEMTRACE_ALLOC_CONF: bad value '%.*s' for max_split_size_mb at %d "
                        "(expected an integer > %llu)",
                        (int)vn, v, vpos, (unsigned long long)(MT_LARGE_BUFFER / MT_MB));
        s->max_split_size = u * MT_MB;
        s->set_mask |= MT_KEY_MAX_SPLIT;
    } else if (KEY("roundup_power2_divisions")) {
        unsigned div[MT_DIV_INTERVALS];
        if (vn && v[0] == '[') {
            int rc = parse_divisions_list(v, vn, vpos, div, err);
            if (rc)
                return rc;
        } else {
            if (parse_uint(v, vn, &u) || !is_pow2(u) || u > 65536)
                return fail(err, vpos,
                            "MEMTRACE_ALLOC_CONF: bad value '%.*s' for roundup_power2_divisions "
                            "at %d (expected a power of two or a [size_mb:divisions,...] list)",
                            (int)vn, v, vpos);
            for (int j = 0; j < MT_DIV_INTERVALS; j++)
                div[j] = (unsigned)u;
        }
        memcpy(s->divisions, div, sizeof(div));
        s->set_mask |= MT_KEY_ROUNDUP;
    } else if (KEY("garbage_collection_threshold")) {
        char tmp[32], *end;
        double d;
        if (vn == 0 || vn >= sizeof(tmp))
            goto out;
        memcpy(tmp, v, vn);
        tmp[vn] = 0;
        errno = 0;
        d = strtod(tmp, &end);
        if (errno || *end || !(d > 0.0 && d < 1.0))
            goto out;
        s->gc_threshold = d;
        s->set_mask |= MT_KEY_GC;
    } else if (KEY("expandable_segments") || KEY("release_lock_on_cudamalloc") ||
               KEY("pinned_use_cuda_host_register")) {
        int b;
        if (parse_bool(v, vn, &b))
            return fail(err, vpos,
                        "MEMTRACE_ALLOC_CONF: bad value '%.*s' for %.*s at %d (expected True or "
                        "False)",
                        (int)vn, v, (int)kn, key, vpos);
        if (KEY("expandable_segments")) {
            s->expandable = b;
            s->set_mask |= MT_KEY_EXPANDABLE;
        } else if (KEY("release_lock_on_cudamalloc")) {
            s->release_lock_on_cudamalloc = b;
            s->set_mask |= MT_KEY_RELEASE_LOCK;
        } else {
            s->pinned_use_cuda_host_register = b;
            s->set_mask |= MT_KEY_PINNED;
        }
    } else if (KEY("oom_snapshot")) {
        if (vn >= sizeof(s->oom_snapshot))
            return fail(err, vpos,
                        "MEMTRACE_ALLOC_CONF: value for oom_snapshot at %d is too long (at most "
                        "%zu bytes)",
                        vpos, sizeof(s->oom_snapshot) - 1);
        memcpy(s->oom_snapshot, v, vn);
        s->oom_snapshot[vn] = 0;
        s->set_mask |= MT_KEY_OOM_SNAPSHOT;
    } else {
        return fail(err, kpos, "MEMTRACE_ALLOC_CONF: unknown key '%.*s' at %d (known: %s)", (int)kn,
                    key, kpos, known_keys);
    }
#undef KEY
    return 0;
out:
    return fail(err, vpos,
                "MEMTRACE_ALLOC_CONF: bad value '%.*s' for garbage_collection_threshold at %d "
                "(expected a number between 0 and 1, both excluded)",
                (int)vn, v, vpos);
}

int mt_alloc_config_parse(const char *conf, struct mt_alloc_settings *s,
                          struct memtrace_alloc_config_error *err)
{
    struct mt_alloc_settings tmp = *s;
    size_t i = 0, n;
    if (!conf)
        return 0;
    n = strlen(conf);
    while (i < n) {
        size_t k0, k1, v0, v1;
        int rc;
        while (i < n && (conf[i] == ' ' || conf[i] == ','))
            i++;
        if (i >= n)
            break;
        k0 = i;
        while (i < n && conf[i] != ':' && conf[i] != ',')
            i++;
        k1 = i;
        while (k1 > k0 && conf[k1 - 1] == ' ')
            k1--;
        if (i >= n || conf[i] != ':')
            return fail(err, (int)k0, "MEMTRACE_ALLOC_CONF: expected 'key:value' at %d, got '%.*s'",
                        (int)k0, (int)(i - k0), conf + k0);
        i++;
        while (i < n && conf[i] == ' ')
            i++;
        v0 = i;
        if (i < n && conf[i] == '[') {
            while (i < n && conf[i] != ']')
                i++;
            if (i < n)
                i++;
        } else {
            while (i < n && conf[i] != ',')
                i++;
        }
        v1 = i;
        while (v1 > v0 && conf[v1 - 1] == ' ')
            v1--;
        rc = apply(&tmp, conf + k0, k1 - k0, conf + v0, v1 - v0, (int)k0, (int)v0, err);
        if (rc)
            return rc;
        while (i < n && conf[i] == ' ')
            i++;
        if (i < n && conf[i] != ',')
            return fail(err, (int)i, "MEMTRACE_ALLOC_CONF: expected ',' at %d, got '%c'", (int)i,
                        conf[i]);
    }
    *s = tmp;
    return 0;
}

void mt_alloc_settings_merge(struct mt_alloc_settings *dst, const struct mt_alloc_settings *src)
{
    unsigned m = src->set_mask;
    if (m & MT_KEY_MAX_SPLIT)
        dst->max_split_size = src->max_split_size;
    if (m & MT_KEY_ROUNDUP)
        memcpy(dst->divisions, src->divisions, sizeof(dst->divisions));
    if (m & MT_KEY_GC)
        dst->gc_threshold = src->gc_threshold;
    if (m & MT_KEY_EXPANDABLE)
        dst->expandable = src->expandable;
    if (m & MT_KEY_RELEASE_LOCK)
        dst->release_lock_on_cudamalloc = src->release_lock_on_cudamalloc;
    if (m & MT_KEY_PINNED)
        dst->pinned_use_cuda_host_register = src->pinned_use_cuda_host_register;
    if (m & MT_KEY_OOM_SNAPSHOT)
        memcpy(dst->oom_snapshot, src->oom_snapshot, sizeof(dst->oom_snapshot));
    dst->set_mask |= m;
}

struct json_out {
    char *buf;
    size_t size, len;
};

static void json_put(void *ctx, const char *p, size_t n)
{
    struct json_out *o = ctx;
    for (size_t i = 0; i < n; i++) {
        char c = p[i], tmp[8];
        size_t k = 1;
        tmp[0] = c;
        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = c;
            k = 2;
        } else if ((unsigned char)c < 0x20) {
            k = (size_t)snprintf(tmp, sizeof(tmp), "\\u%04x", (unsigned)c);
        }
        for (size_t j = 0; j < k; j++, o->len++)
            if (o->len + 1 < o->size)
                o->buf[o->len] = tmp[j];
    }
}

/* A path is bytes, JSON text is UTF-8: what is not UTF-8 is kept as \xNN text
 * (mtx/escape.h), or jansson would refuse the whole metadata object. */
static size_t json_string(char *buf, size_t size, size_t len, const char *s)
{
    struct json_out o = {buf, size, len};
    mtx_escape(s, 1, json_put, &o);
    if (size)
        buf[o.len < size ? o.len : size - 1] = 0;
    return o.len;
}

size_t mt_alloc_settings_to_json(const struct mt_alloc_settings *s, char *buf, size_t size)
{
    size_t len;
    int n;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, __VA_ARGS__);     \
        len += (size_t)n;                                                                          \
    } while (0)
    len = 0;
    if (size)
        buf[0] = 0;
    if (s->max_split_size == MT_NO_SPLIT_LIMIT)
        ADD("{\"max_split_size_mb\": null");
    else
        ADD("{\"max_split_size_mb\": %llu", (unsigned long long)(s->max_split_size / MT_MB));
    ADD(", \"roundup_power2_divisions\": [");
    for (int i = 0; i < MT_DIV_INTERVALS; i++)
        ADD("%s%u", i ? ", " : "", s->divisions[i]);
    ADD("], \"garbage_collection_threshold\": %.6g", s->gc_threshold);
    ADD(", \"expandable_segments\": %s", s->expandable ? "true" : "false");
    ADD(", \"release_lock_on_cudamalloc\": %s", s->release_lock_on_cudamalloc ? "true" : "false");
    ADD(", \"pinned_use_cuda_host_register\": %s",
        s->pinned_use_cuda_host_register ? "true" : "false");
    if (s->oom_snapshot[0]) {
        ADD(", \"oom_snapshot\": \"");
        len = json_string(buf, size, len, s->oom_snapshot);
        ADD("\"}");
    } else {
        ADD(", \"oom_snapshot\": null}");
    }
#undef ADD
    return len;
}

void mt_alloc_api_settings(struct mt_alloc_settings *out)
{
    pthread_mutex_lock(&api_lock);
    *out = api_settings;
    pthread_mutex_unlock(&api_lock);
}

MEMTRACE_API int memtrace_alloc_config_set_err(const char *conf,
                                               struct memtrace_alloc_config_error *err)
{
    struct mt_alloc_settings s;
    int rc;
    if (!conf)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&api_lock);
    if (!api_settings.set_mask)
        mt_alloc_settings_default(&api_settings);
    s = api_settings;
    s.set_mask = 0;
    rc = mt_alloc_config_parse(conf, &s, err);
    if (rc == 0) {
        s.set_mask |= api_settings.set_mask;
        api_settings = s;
    }
    pthread_mutex_unlock(&api_lock);
    if (rc == 0) {
        mt_alloc_set_error_text("");
        mt_alloc_apply_api_settings(&s);
    }
    return rc;
}

MEMTRACE_API int memtrace_alloc_config_set(const char *conf)
{
    return memtrace_alloc_config_set_err(conf, NULL);
}
