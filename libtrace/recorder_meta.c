/* recorder_meta.c: the JSON metadata of a recording, off the hot path (jansson).
 * Owns what memtrace_meta_set and memtrace_device_register add, the time recording
 * started, and the generation the stream writer compares to know when to write the
 * metadata again. Host, pid, argv, rank and the options are read when the metadata
 * is dumped. */
#include "config.h"

#include "recorder_impl.h"
#include "stack_py.h"

#include "memtrace.h"
#include "mtx/escape.h"
#include "mtx/rank.h"
#include "mtx/util.h"

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t meta_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *meta_extra;   /* keys set by memtrace_meta_set */
static json_t *meta_devices; /* array */
static uint64_t meta_gen;    /* bumped on every change */
static uint64_t start_wall_ns, start_mono_ns;

/* A JSON string of s as the program gave it; bytes that are not UTF-8 (a Latin-1
 * file name in argv, say), which jansson refuses, are kept as \xNN text
 * (mtx/escape.h) instead of losing the string. */
static json_t *kept(const char *s)
{
    json_t *j = json_string(s);
    if (j != NULL)
        return j;
    char *e = mtx_escape_dup(s, 1);
    j = json_string(e != NULL ? e : "");
    free(e);
    return j;
}

static json_t *argv_json(void)
{
    json_t *arr = json_array();
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (f == NULL)
        return arr;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        json_array_append_new(arr, kept(buf + i));
    return arr;
}

/* The rank that the preload's %r also names (mtx/rank.h). */
static json_t *rank_json(void)
{
    long r = mtx_rank();
    return r >= 0 ? json_integer(r) : json_null();
}

static const char *context_name(int c)
{
    static const char *const names[] = {"none", "state", "alloc", "all"};
    return c >= 0 && c < 4 ? names[c] : "all";
}

char *mt_meta_dump(uint64_t *gen)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    json_t *m = json_object();
    json_object_set_new(m, "format_version", json_integer(1));
    json_object_set_new(m, "memtrace_version", json_string(PACKAGE_VERSION));
    json_object_set_new(m, "host", kept(host));
    json_object_set_new(m, "pid", json_integer(getpid()));
    json_object_set_new(m, "argv", argv_json());
    json_object_set_new(m, "rank", rank_json());
    mt_rlock();
    static const char *const kinds[] = {"all", "native", "python"};
    json_t *opts =
        json_pack("{s:s, s:I, s:I, s:i, s:s, s:I}", "context", context_name(mt_rec.context),
                  "max_entries", (json_int_t)mt_rec.max_entries, "skip_actions",
                  (json_int_t)mt_rec.skip_actions, "stack_depth", mt_rec.stack_depth, "stacks",
                  kinds[mt_rec.stack_kind], "flush_ms", (json_int_t)mt_rec.flush_ms);
    mt_runlock();
    json_object_set_new(m, "options", opts);
    /* The interpreter whose frames the stacks may hold, and whether they do. */
    unsigned long pyver;
    int pyframes = mt_py_status(&pyver);
    if (pyver != 0) {
        char v[48];
        snprintf(v, sizeof v, "%lu.%lu.%lu", pyver >> 24 & 0xff, pyver >> 16 & 0xff,
                 pyver >> 8 & 0xff);
        json_object_set_new(m, "python", json_pack("{s:s, s:b}", "version", v, "frames", pyframes));
    }
    pthread_mutex_lock(&meta_lock);
    json_object_set_new(m, "start_time_ns", json_integer((json_int_t)start_wall_ns));
    json_object_set_new(m, "start_monotonic_ns", json_integer((json_int_t)start_mono_ns));
    json_object_set_new(m, "devices", meta_devices ? json_deep_copy(meta_devices) : json_array());
    if (meta_extra != NULL)
        json_object_update(m, meta_extra);
    if (gen != NULL)
        *gen = meta_gen;
    pthread_mutex_unlock(&meta_lock);
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    return text;
}

uint64_t mt_meta_gen(void)
{
    pthread_mutex_lock(&meta_lock);
    uint64_t gen = meta_gen;
    pthread_mutex_unlock(&meta_lock);
    return gen;
}

void mt_meta_start(void)
{
    pthread_mutex_lock(&meta_lock);
    start_wall_ns = mtx_wall_ns();
    start_mono_ns = mtx_now_ns();
    pthread_mutex_unlock(&meta_lock);
}

char *mt_meta_end_json(void)
{
    struct memtrace_counts c;
    memtrace_get_counts(&c);
    json_t *e = json_pack("{s:I, s:I, s:b}", "events", (json_int_t)c.recorded, "dropped",
                          (json_int_t)c.dropped, "overflowed", c.overflowed);
    char *text = json_dumps(e, JSON_COMPACT);
    json_decref(e);
    return text;
}

void mt_meta_lock(void)
{
    pthread_mutex_lock(&meta_lock);
}

void mt_meta_unlock(void)
{
    pthread_mutex_unlock(&meta_lock);
}

void mt_meta_atfork_child(void)
{
    pthread_mutex_init(&meta_lock, NULL);
}

int memtrace_meta_set(const char *key, const char *json)
{
    if (key == NULL || *key == '\0' || json == NULL)
        return MEMTRACE_EINVAL;
    json_error_t err;
    json_t *v = json_loads(json, JSON_DECODE_ANY, &err);
    if (v == NULL)
        return MEMTRACE_EINVAL;
    pthread_mutex_lock(&meta_lock);
    if (meta_extra == NULL)
        meta_extra = json_object();
    json_object_set_new(meta_extra, key, v);
    meta_gen++;
    pthread_mutex_unlock(&meta_lock);
    return 0;
}

int memtrace_device_register(int index, const char *name, uint64_t total_bytes, const char *backend)
{
    if (index < -1 || name == NULL || backend == NULL)
        return MEMTRACE_EINVAL;
    json_t *d = json_pack("{s:i, s:o, s:I, s:o}", "index", index, "name", kept(name),
                          "total_memory", (json_int_t)total_bytes, "backend", kept(backend));
    if (d == NULL)
        return MEMTRACE_ENOMEM;
    pthread_mutex_lock(&meta_lock);
    if (meta_devices == NULL)
        meta_devices = json_array();
    size_t i;
    json_t *old;
    json_array_foreach(meta_devices, i, old)
    {
        if (json_integer_value(json_object_get(old, "index")) == index &&
            strcmp(json_string_value(json_object_get(old, "backend")), backend) == 0)
            break;
    }
    if (i < json_array_size(meta_devices))
        json_array_set_new(meta_devices, i, d);
    else
        json_array_append_new(meta_devices, d);
    meta_gen++;
    pthread_mutex_unlock(&meta_lock);
    return 0;
}
