/* writer-t: snapshot/writer.c, read back through snapshot/reader.c. */
#include "config.h"

#include "memtrace_snapshot.h"
#include "writer.h"

#include "tap.h"
#include "training.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static void random_event(uint64_t *s, struct memtrace_event *e, const struct memtrace_event *prev,
                         uint32_t nstacks, uint32_t nstrings)
{
    uint64_t r = rnd_next(s);
    if (prev && r % 4 == 0) {
        /* a repeat with a new time: the case prediction codes as a hit */
        *e = *prev;
        e->time_ns = prev->time_ns + (rnd_next(s) % 100000);
        return;
    }
    memset(e, 0, sizeof(*e));
    e->time_ns = prev && r % 3 ? prev->time_ns - 5000 + rnd_next(s) % 60000 : rnd_value(s);
    e->addr = rnd_value(s);
    e->size = rnd_value(s);
    e->requested_size = r % 5 == 0 ? rnd_value(s) : e->size - (rnd_next(s) % 512);
    e->stream = rnd_value(s);
    e->aux = rnd_value(s);
    e->device = (int32_t)(rnd_next(s) % 7) - 2;
    if (r % 11 == 0)
        e->device = (r % 2) ? INT32_MIN : INT32_MAX;
    e->pool = (int32_t)(uint32_t)rnd_value(s);
    e->tid = (uint32_t)rnd_value(s);
    e->stack = nstacks ? (uint32_t)(rnd_next(s) % (nstacks + 1)) : 0;
    e->category = (uint32_t)(rnd_next(s) % (nstrings + 1));
    e->source = (uint32_t)(rnd_next(s) % (nstrings + 1));
    e->action = (uint8_t)(r % 29 == 0 ? 255 : rnd_next(s) % MEMTRACE_ACTION_COUNT);
}

/* Writes a random file for seed and reads it back; returns events that differ. */
/* round_trip's writer: the file's, or (in memory) a memory writer whose chunks the
 * file's takes at the end. */
struct sink {
    struct mt_writer *w;
    struct mt_writer *mem;
};

static struct mt_writer *sink_of(struct sink *k)
{
    return k->mem ? k->mem : k->w;
}

static int sink_strings(struct sink *k, uint32_t first, size_t n, const char *const *s)
{
    return mt_writer_strings(sink_of(k), first, n, s);
}

static int sink_frames(struct sink *k, uint32_t first, size_t n, const struct mt_frame_rec *f)
{
    return mt_writer_frames(sink_of(k), first, n, f);
}

static int sink_stacks(struct sink *k, uint32_t first, size_t n, const uint32_t *parent,
                       const uint32_t *frame)
{
    return mt_writer_stacks(sink_of(k), first, n, parent, frame);
}

static int sink_events(struct sink *k, const struct memtrace_event *ev, size_t n)
{
    return mt_writer_events(sink_of(k), ev, n);
}

/* The memory writer's chunks into the file, after its META. */
static int sink_take(struct sink *k)
{
    if (!k->mem)
        return 0;
    int rc = mt_writer_take(k->w, k->mem);
    k->mem = NULL;
    return rc;
}

static void round_trip(uint64_t seed, int in_memory)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/random-%llu.memtrace", dir, (unsigned long long)seed);
    if (in_memory)
        seed += 100;
    uint64_t s = seed * 7919 + 3;
    size_t total = 3000 + rnd_next(&s) % 5000;
    struct memtrace_event *ev = calloc(total, sizeof(*ev));
    char **strs = calloc(400, sizeof(char *));
    struct mt_frame_rec *frames = calloc(200, sizeof(*frames));
    uint32_t *parent = calloc(300, sizeof(uint32_t)), *frame = calloc(300, sizeof(uint32_t));
    uint32_t nstr = 0, nfr = 0, nst = 0;
    int chunks = 0, bad_calls = 0;

    struct sink sk = {NULL, NULL};
    if (mt_writer_open(&sk.w, path, 0) != 0 || (in_memory && mt_writer_open_mem(&sk.mem) != 0))
        bail_out("cannot create test file");
    struct mt_writer *w = sk.w;
    bad_calls += mt_writer_meta(w, "{\"pid\": 42, \"host\": \"a\"}") != 0;
    for (size_t done = 0; done < total;) {
        /* a table chunk of each kind now and then, before the events that use it */
        if (nstr < 390 && rnd_next(&s) % 2) {
            uint32_t k = 1 + (uint32_t)(rnd_next(&s) % 10);
            for (uint32_t i = 0; i < k; i++) {
                strs[nstr + i] = malloc(40);
                snprintf(strs[nstr + i], 40, "s%llu-%u", (unsigned long long)seed, nstr + i + 1);
            }
            bad_calls += sink_strings(&sk, nstr + 1, k, (const char *const *)strs + nstr) != 0;
            nstr += k;
            chunks++;
        }
        if (nfr < 190 && nstr > 0 && rnd_next(&s) % 2) {
            uint32_t k = 1 + (uint32_t)(rnd_next(&s) % 10);
            for (uint32_t i = 0; i < k; i++) {
                struct mt_frame_rec *f = &frames[nfr + i];
                f->ip = rnd_value(&s);
                f->offset = rnd_value(&s);
                f->module = (uint32_t)(rnd_next(&s) % (nstr + 1));
                f->symbol = (uint32_t)(rnd_next(&s) % (nstr + 1));
                f->file = (uint32_t)(rnd_next(&s) % (nstr + 1));
                f->line = (uint32_t)rnd_value(&s);
            }
            bad_calls += sink_frames(&sk, nfr + 1, k, frames + nfr) != 0;
            nfr += k;
            chunks++;
        }
        if (nst < 290 && nfr > 0 && rnd_next(&s) % 2) {
            uint32_t k = 1 + (uint32_t)(rnd_next(&s) % 10);
            for (uint32_t i = 0; i < k; i++) {
                parent[nst + i] = (uint32_t)(rnd_next(&s) % (nst + i + 1));
                frame[nst + i] = 1 + (uint32_t)(rnd_next(&s) % nfr);
            }
            bad_calls += sink_stacks(&sk, nst + 1, k, parent + nst, frame + nst) != 0;
            nst += k;
            chunks++;
        }
        size_t n = 1 + rnd_next(&s) % 1500;
        if (n > total - done)
            n = total - done;
        for (size_t i = 0; i < n; i++)
            random_event(&s, &ev[done + i], done + i ? &ev[done + i - 1] : NULL, nst, nstr);
        bad_calls += sink_events(&sk, ev + done, n) != 0;
        done += n;
        chunks++;
    }
    bad_calls += sink_take(&sk) != 0;
    bad_calls += mt_writer_meta(w, "{\"host\": \"b\", \"rank\": 3}") != 0;
    bad_calls += mt_writer_end(w, "{\"events\": 1, \"dropped\": 0, \"overflowed\": 0}") != 0;
    is_int(0, bad_calls, "seed %llu: %d writer calls succeed%s", (unsigned long long)seed, chunks,
           in_memory ? " (tables and events into memory, taken after META)" : "");

    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    int rc = memtrace_reader_open(&r, path, &err);
    is_int(0, rc, "seed %llu: opens", (unsigned long long)seed);
    if (rc != 0) {
        diag("%s", err.text);
        return;
    }
    size_t got = 0, differ = 0;
    struct memtrace_event e;
    while ((rc = memtrace_reader_next(r, &e)) == 1) {
        if (got < total && !event_equal(&e, &ev[got]))
            differ++;
        got++;
    }
    is_int(0, rc, "seed %llu: reads to the end", (unsigned long long)seed);
    is_int((long long)total, (long long)got, "seed %llu: %zu events", (unsigned long long)seed,
           total);
    is_int(0, (long long)differ, "seed %llu: every field of every event equal",
           (unsigned long long)seed);
    is_int(0, memtrace_reader_truncated(r), "seed %llu: not truncated", (unsigned long long)seed);

    size_t sdiff = 0;
    for (uint32_t i = 0; i < nstr; i++)
        sdiff += strcmp(strs[i], memtrace_reader_string(r, i + 1)) != 0;
    ok(sdiff == 0 && strcmp(memtrace_reader_string(r, 0), "") == 0 &&
           strcmp(memtrace_reader_string(r, nstr + 1), "") == 0,
       "seed %llu: %u strings equal", (unsigned long long)seed, nstr);
    size_t fdiff = 0;
    for (uint32_t i = 0; i < nfr; i++) {
        const struct memtrace_frame *f = memtrace_reader_frame(r, i + 1);
        const struct mt_frame_rec *g = &frames[i];
        const char *mod = g->module ? strs[g->module - 1] : "";
        const char *sym = g->symbol ? strs[g->symbol - 1] : "";
        const char *file = g->file ? strs[g->file - 1] : "";
        fdiff += f == NULL || f->ip != g->ip || f->offset != g->offset || f->line != g->line ||
                 strcmp(f->module, mod) || strcmp(f->symbol, sym) || strcmp(f->file, file);
    }
    ok(fdiff == 0 && memtrace_reader_frame_count(r) == nfr &&
           memtrace_reader_frame(r, nfr + 1) == NULL,
       "seed %llu: %u frames equal", (unsigned long long)seed, nfr);
    size_t stdiff = 0;
    for (uint32_t i = 0; i < nst; i++) {
        uint32_t want[400], got_frames[400];
        int depth = 0;
        for (uint32_t id = i + 1; id; id = parent[id - 1])
            want[depth++] = frame[id - 1];
        int d = memtrace_reader_stack(r, i + 1, got_frames, 400);
        stdiff += d != depth || memcmp(want, got_frames, (size_t)depth * 4) != 0;
    }
    ok(stdiff == 0 && memtrace_reader_stack_count(r) == nst &&
           memtrace_reader_stack(r, nst + 1, NULL, 0) == 0,
       "seed %llu: %u stack nodes walk to the same frames", (unsigned long long)seed, nst);
    is_string("{\"pid\":42,\"host\":\"b\",\"format_version\":1,\"rank\":3}",
              memtrace_reader_meta(r), "seed %llu: META chunks merge, later keys win",
              (unsigned long long)seed);
    is_string("{\"events\":1,\"dropped\":0,\"overflowed\":0}", memtrace_reader_end(r),
              "seed %llu: END record", (unsigned long long)seed);
    memtrace_reader_close(r);
    unlink(path);
    for (uint32_t i = 0; i < nstr; i++)
        free(strs[i]);
    free(strs);
    free(frames);
    free(parent);
    free(frame);
    free(ev);
}

/* mt_writer_take wants a file writer and a memory writer, not both with tables; the
 * memory writer is freed either way. A memory writer without tables goes after a
 * file writer's tables, and its events use their ids. */
static void take_rules(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/take.memtrace", dir);
    struct mt_writer *w, *mem[4];
    const char *s[] = {"a"}, *s2[] = {"b"};
    if (mt_writer_open(&w, path, 0) != 0 || mt_writer_open_mem(&mem[0]) != 0 ||
        mt_writer_open_mem(&mem[1]) != 0 || mt_writer_open_mem(&mem[2]) != 0 ||
        mt_writer_open_mem(&mem[3]) != 0)
        bail_out("cannot open writers");
    int rc = mt_writer_strings(w, 1, 1, s);
    rc = rc ? rc : mt_writer_strings(mem[0], 1, 1, s2);
    is_int(MEMTRACE_EINVAL, mt_writer_take(w, mem[0]), "take: refused when both have tables");
    is_int(MEMTRACE_EINVAL, mt_writer_take(mem[1], mem[2]), "take: refused into a memory writer");
    struct memtrace_event ev = {
        .time_ns = 5, .addr = 4096, .size = 64, .category = 1, .action = MEMTRACE_ALLOC};
    rc = rc ? rc : mt_writer_events(mem[3], &ev, 1);
    is_int(0, rc ? rc : mt_writer_take(w, mem[3]), "take: events without tables after a table");
    rc = rc ? rc : mt_writer_end(w, NULL);
    is_int(0, rc, "take: the file writer still ends");
    struct memtrace_reader *r;
    struct memtrace_event got = {0};
    if (memtrace_reader_open(&r, path, NULL) == 0) {
        int n = memtrace_reader_next(r, &got);
        ok(n == 1 && got.addr == 4096 && strcmp(memtrace_reader_string(r, got.category), "a") == 0,
           "take: the event reads, with the file writer's string");
        memtrace_reader_close(r);
    } else {
        ok(0, "take: the file reads");
    }
    mt_writer_abort(mem[1]);
    unlink(path);
}

static void state_round_trip(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/state.memtrace", dir);
    struct memtrace_block b1[3] = {
        {0x7f0000000000, 512, 500, 7, MEMTRACE_BLOCK_ACTIVE_ALLOCATED},
        {0x7f0000000200, 1024, 0, 0, MEMTRACE_BLOCK_INACTIVE},
        {0x7f0000001000, UINT64_MAX / 2, UINT64_MAX, UINT32_MAX,
         MEMTRACE_BLOCK_ACTIVE_PENDING_FREE},
    };
    struct memtrace_segment segs[2] = {
        {0x7f0000000000, 2 << 20, 1536, 1536, 500, 0xdead, 0, 1, 0, 0, 3, 2, 3, b1},
        {UINT64_MAX - 4095, UINT64_MAX, 0, 0, 0, UINT64_MAX, -1, -7, 1, 1, 0, 0, 0, NULL},
    };
    struct memtrace_event ev = {.time_ns = 5, .action = MEMTRACE_SNAPSHOT};
    struct mt_writer *w;
    mt_writer_open(&w, path, 0);
    mt_writer_state(w, 100, segs, 1);
    mt_writer_events(w, &ev, 1);
    mt_writer_state(w, UINT64_MAX, segs, 2);
    mt_writer_end(w, "{}");

    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    memtrace_reader_open(&r, path, &err);
    is_int(1, (long long)memtrace_reader_segment_count(r), "first STATE: 1 segment");
    is_int(100, (long long)memtrace_reader_state_time(r), "first STATE at time 100");
    struct memtrace_event e;
    int rc1 = memtrace_reader_next(r, &e);
    int rc2 = memtrace_reader_next(r, &e);
    ok(rc1 == 1 && rc2 == 0, "one event, then the end");
    is_int(2, (long long)memtrace_reader_segment_count(r), "second STATE replaces the first");
    ok(memtrace_reader_state_time(r) == UINT64_MAX, "second STATE at time UINT64_MAX");
    int same = 1;
    for (size_t i = 0; i < 2; i++) {
        const struct memtrace_segment *a = &segs[i], *g = memtrace_reader_segment(r, i);
        same &= g != NULL && a->addr == g->addr && a->total_size == g->total_size &&
                a->allocated_size == g->allocated_size && a->active_size == g->active_size &&
                a->requested_size == g->requested_size && a->stream == g->stream &&
                a->device == g->device && a->pool == g->pool && a->is_large == g->is_large &&
                a->is_expandable == g->is_expandable && a->stack == g->stack &&
                a->source == g->source && a->nblocks == g->nblocks;
        for (size_t k = 0; same && k < a->nblocks; k++) {
            const struct memtrace_block *x = &a->blocks[k], *y = &g->blocks[k];
            same &= x->addr == y->addr && x->size == y->size &&
                    x->requested_size == y->requested_size && x->stack == y->stack &&
                    x->state == y->state;
        }
    }
    ok(same, "every segment and block field round-trips");
    ok(memtrace_reader_segment(r, 2) == NULL, "segment past the count is NULL");
    memtrace_reader_close(r);
    unlink(path);
}

static void contract_errors(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/contract.memtrace", dir);
    struct mt_writer *w;
    is_int(0, mt_writer_open(&w, path, 0), "writer opens");
    const char *s[2] = {"a", "b"};
    is_int(MEMTRACE_EINVAL, mt_writer_strings(w, 2, 2, s), "strings must start at id 1");
    is_int(0, mt_writer_strings(w, 1, 2, s), "strings 1..2");
    is_int(MEMTRACE_EINVAL, mt_writer_strings(w, 2, 1, s), "strings cannot restart at 2");
    is_int(0, mt_writer_strings(w, 3, 1, s), "strings continue at 3");
    struct mt_frame_rec f = {0x1000, 0x10, 1, 2, 0, 12};
    is_int(MEMTRACE_EINVAL, mt_writer_frames(w, 0, 1, &f), "frame ids start at 1");
    is_int(0, mt_writer_frames(w, 1, 1, &f), "frame 1");
    uint32_t parent[2] = {0, 2}, frame[2] = {1, 1};
    is_int(MEMTRACE_EINVAL, mt_writer_stacks(w, 1, 2, parent, frame),
           "a stack node's parent must come before it");
    parent[1] = 1;
    is_int(0, mt_writer_stacks(w, 1, 2, parent, frame), "stack nodes 1..2");
    is_int(MEMTRACE_EINVAL, mt_writer_meta(w, "[1,2]"), "META must be an object");
    is_int(MEMTRACE_EINVAL, mt_writer_meta(w, "{oops"), "META must parse");

    /* each call is on disk when it returns: a reader sees it before the end */
    struct memtrace_event ev[3] = {{.time_ns = 1, .addr = 0x10, .size = 16},
                                   {.time_ns = 2, .addr = 0x10, .size = 16, .action = 2},
                                   {.time_ns = 3, .device = -1, .action = MEMTRACE_COUNTER}};
    mt_writer_events(w, ev, 3);
    struct stat st;
    stat(path, &st);
    is_int((long long)st.st_size, (long long)mt_writer_bytes(w),
           "mt_writer_bytes is the file size");
    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    int rc = memtrace_reader_open(&r, path, &err);
    int n = 0;
    struct memtrace_event e;
    while (rc == 0 && memtrace_reader_next(r, &e) == 1)
        n++;
    is_int(3, n, "a file still being written reads up to its last chunk");
    is_int(1, rc == 0 ? memtrace_reader_truncated(r) : -1, "and reports itself truncated");
    is_int(2, rc == 0 ? (long long)memtrace_reader_stack(r, 2, NULL, 0) : -1,
           "stack 2 has depth 2");
    if (rc == 0)
        memtrace_reader_close(r);
    mt_writer_abort(w);
    unlink(path);
    is_int(MEMTRACE_EIO, mt_writer_open(&w, "/nonexistent-dir/x.memtrace", 0),
           "an uncreatable path is MEMTRACE_EIO");
}

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

static char *slurp_text(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    return buf;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

/* Files in dir whose name starts with prefix. */
static int count_prefix(const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

/* How files are created: never through a symbolic link, 0600, an existing file
 * refused unless asked, and atomic files visible only once complete. */
static void create_rules(void)
{
    char path[128], link_path[128], target[128];
    struct mt_writer *w;
    struct stat sb;
    mode_t mask = umask(022);
    snprintf(path, sizeof path, "%s/new.memtrace", dir);
    snprintf(link_path, sizeof link_path, "%s/link.memtrace", dir);
    snprintf(target, sizeof target, "%s/target", dir);

    is_int(0, mt_writer_open(&w, path, 0), "a new file opens");
    mt_writer_end(w, NULL);
    memset(&sb, 0, sizeof sb);
    stat(path, &sb);
    ok((sb.st_mode & 0777) == 0600, "created 0600 (mode %o)", (unsigned)(sb.st_mode & 0777));
    errno = 0;
    is_int(MEMTRACE_EIO, mt_writer_open(&w, path, 0), "an existing file is refused");
    is_int(EEXIST, errno, "with EEXIST");
    is_int(0, mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "unless MT_WRITER_OVERWRITE");
    mt_writer_abort(w);
    memset(&sb, 0, sizeof sb);
    stat(path, &sb);
    ok(sb.st_size == 16, "which truncates it (%lld bytes)", (long long)sb.st_size);
    unlink(path);

    put(target, "precious\n");
    if (symlink(target, link_path) != 0)
        bail_out("symlink failed");
    errno = 0;
    is_int(MEMTRACE_EIO, mt_writer_open(&w, link_path, 0), "a symbolic link to a file is refused");
    is_int(EEXIST, errno, "with EEXIST");
    errno = 0;
    is_int(MEMTRACE_EIO, mt_writer_open(&w, link_path, MT_WRITER_OVERWRITE),
           "and not followed with MT_WRITER_OVERWRITE");
    is_int(ELOOP, errno, "with ELOOP");
    is_string("precious\n", slurp_text(target), "its target is untouched");
    unlink(target);
    is_int(MEMTRACE_EIO, mt_writer_open(&w, link_path, 0), "a dangling symbolic link is refused");
    ok(!exists(target), "and its target not created");
    is_int(MEMTRACE_EIO, mt_writer_open(&w, link_path, MT_WRITER_OVERWRITE | MT_WRITER_ATOMIC),
           "atomic with overwrite, through a link: refused too");
    ok(!exists(target) && count_prefix("link.memtrace.") == 0, "nothing created, no temporary");
    unlink(link_path);

    /* Atomic: a reader sees no file, then the whole file. */
    is_int(0, mt_writer_open(&w, path, MT_WRITER_ATOMIC), "atomic open");
    is_int(0, mt_writer_meta(w, "{\"pid\": 1}"), "a chunk written");
    ok(!exists(path) && count_prefix("new.memtrace.") == 1,
       "until the end, only a temporary name exists");
    is_int(0, mt_writer_end(w, "{}"), "atomic end");
    ok(exists(path) && count_prefix("new.memtrace.") == 0, "then the file, and no temporary");
    ok(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600, "created 0600");
    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    ok(memtrace_reader_open(&r, path, &err) == 0 && memtrace_reader_end(r) != NULL,
       "and it is complete");
    memtrace_reader_close(r);

    errno = 0;
    is_int(MEMTRACE_EIO, mt_writer_open(&w, path, MT_WRITER_ATOMIC),
           "atomic over an existing file: refused at open");
    is_int(EEXIST, errno, "with EEXIST");
    unlink(path);
    is_int(0, mt_writer_open(&w, path, MT_WRITER_ATOMIC), "atomic open");
    put(path, "theirs\n");
    errno = 0;
    is_int(MEMTRACE_EIO, mt_writer_end(w, "{}"), "a file that appeared meanwhile is not replaced");
    is_int(EEXIST, errno, "with EEXIST");
    ok(strcmp(slurp_text(path), "theirs\n") == 0 && count_prefix("new.memtrace.") == 0,
       "it is untouched, and the temporary removed");
    is_int(0, mt_writer_open(&w, path, MT_WRITER_ATOMIC | MT_WRITER_OVERWRITE),
           "atomic with overwrite");
    is_int(0, mt_writer_end(w, "{}"), "replaces it at the end");
    ok(memtrace_reader_open(&r, path, &err) == 0, "with a memtrace file");
    memtrace_reader_close(r);
    is_int(0, mt_writer_open(&w, path, MT_WRITER_ATOMIC | MT_WRITER_OVERWRITE), "atomic again");
    mt_writer_abort(w);
    ok(memtrace_reader_open(&r, path, &err) == 0 && count_prefix("new.memtrace.") == 0,
       "an abort leaves the old file, and no temporary");
    memtrace_reader_close(r);
    unlink(path);
    umask(mask);
}

/* 1M events of the training loop: the figure the format is designed for. */
static void size_check(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/training.memtrace", dir);
    const size_t total = 1000000, chunk = 65536;
    static struct mt_training t, t2;
    struct memtrace_event *ev = malloc(chunk * sizeof(*ev));
    mt_training_init(&t, 1);
    struct mt_writer *w;
    mt_writer_open(&w, path, 0);
    uint64_t before = mt_writer_bytes(w);
    for (size_t done = 0; done < total; done += chunk) {
        size_t n = total - done < chunk ? total - done : chunk;
        mt_training_next(&t, ev, n);
        mt_writer_events(w, ev, n);
    }
    double bpe = (double)(mt_writer_bytes(w) - before) / (double)total;
    mt_writer_end(w, "{\"events\":1000000}");
    diag("training loop: %.3f bytes/event on disk (%zu events)", bpe, total);
    ok(bpe < 4.0, "training loop encodes under 4 bytes/event (%.3f)", bpe);

    struct memtrace_reader *r;
    struct memtrace_errinfo err;
    memtrace_reader_open(&r, path, &err);
    mt_training_init(&t2, 1);
    size_t got = 0, differ = 0;
    struct memtrace_event e;
    while (memtrace_reader_next(r, &e) == 1) {
        if (got % chunk == 0)
            mt_training_next(&t2, ev, chunk);
        differ += !event_equal(&e, &ev[got % chunk]);
        got++;
    }
    is_int((long long)total, (long long)got, "all training events read back");
    is_int(0, (long long)differ, "training events equal");
    memtrace_reader_close(r);
    unlink(path);
    free(ev);
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/memtrace-writer-t-XXXXXX");
    if (mkdtemp(dir) == NULL)
        bail_out("mkdtemp failed");
    for (uint64_t seed = 1; seed <= 6; seed++)
        round_trip(seed, 0);
    for (uint64_t seed = 1; seed <= 3; seed++)
        round_trip(seed, 1);
    take_rules();
    state_round_trip();
    contract_errors();
    create_rules();
    size_check();
    rmdir(dir);
    done_testing();
    return exit_status();
}
