/* pickle-t: snapshot/pickle.c's streaming read in one pass against the read with
 * the scan, on pickles that Python's own pickler writes: frames lists fetched again
 * thousands of entries later (built again from their bytes), an entry fetched again
 * (the one-pass read gives up, the read whole does not), and a pickle that would
 * call code (refused by the scan; the one-pass read gives up before building it). */
#include "config.h"

#include "pickle.h"

#include "tap.h"
#include "util.h"

#include <jansson.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];

static const char gen_py[] =
    "import pickle, sys\n"
    "d = sys.argv[1]\n"
    "fr = [{'name': 'f%d' % i, 'filename': 'x.py', 'line': i} for i in range(40)]\n"
    "trace = []\n"
    "for k in range(5000):\n"
    "    trace.append({'action': 'alloc', 'addr': 4096 * k, 'size': 512 + k,\n"
    "                  'frames': [fr[(k + j) % 40] for j in range(3 + k % 20)]})\n"
    "    if k >= 3000:\n"
    "        a = trace[2 * (k - 3000)]\n"
    "        trace.append({'action': 'free_requested', 'addr': a['addr'],\n"
    "                      'frames': a['frames']})\n"
    "snap = {'segments': [], 'device_traces': [trace], 'allocator_settings': {'x': 1}}\n"
    "pickle.dump(snap, open(d + '/shared.pickle', 'wb'), protocol=4)\n"
    "e = trace[0]\n"
    "snap['device_traces'] = [[e, trace[1], e]]\n"
    "pickle.dump(snap, open(d + '/again.pickle', 'wb'), protocol=4)\n"
    "trace = []\n"
    "for k in range(150000):\n"
    "    trace.append({'action': 'alloc', 'addr': 4096 * k, 'size': 512 + k,\n"
    "                  'frames': [fr[(k + j) % 40] for j in range(3 + k % 20)]})\n"
    "    if k >= 100000:\n"
    "        a = trace[2 * (k - 100000)]\n"
    "        trace.append({'action': 'free_requested', 'addr': a['addr'],\n"
    "                      'frames': a['frames']})\n"
    "snap['device_traces'] = [trace]\n"
    "pickle.dump(snap, open(d + '/far.pickle', 'wb'), protocol=4)\n"
    "sh = []\n"
    "for k in range(3000):\n"
    "    b = 1 << (32 + k % 31)\n"
    "    e = {'action': ['alloc', 'free_requested', 'oom'][k % 3], 'addr': (k % 5 << 60) + k,\n"
    "         'size': [0, 200, 70000, 300][k % 4], 'time_us': [b, -b, b + k][k % 3]}\n"
    "    r = k % 12\n"
    "    if r == 0: e['frames'] = []\n"
    "    elif r == 1: e['frames'] = [fr[k % 40]]\n"
    "    elif r == 2: e['compile_context'] = 'ctx %d \\u00e9' % (k % 7)\n"
    "    elif r == 3: e.update(device_free=None, yes=True, no=False)\n"
    "    elif r == 4: e['size'] = 2.5 * k\n"
    "    elif r == 5: e.update({7: 'an int key', -300: 1 << 70})\n"
    "    elif r == 6: e['frames'] = tuple(fr[:3])\n"
    "    elif r == 7: e['nested'] = {'a': [1, 2]}\n"
    "    elif r == 8: e['frames'] = [{'name': 'n%d' % k, 'filename': 'y.py', 'line': k}] + fr[:2]\n"
    "    elif r == 9: e['frames'] = sh[-2].get('frames', [])\n"
    "    else: e['frames'] = [fr[(k + j) % 40] for j in range(2 + k % 30)]\n"
    "    sh.append(e)\n"
    "snap['device_traces'] = [sh]\n"
    "pickle.dump(snap, open(d + '/shapes.pickle', 'wb'), protocol=4)\n"
    "pickle.dump(snap, open(d + '/shapes2.pickle', 'wb'), protocol=2)\n"
    "a, b, c = fr[:2], fr[2:5], [fr[0]] * 1000\n"
    "order = [a, b, a, b, a, b + [fr[5]], a, c, a, c, a, c + [fr[0]], a, b[:2]]\n"
    "t = [{'action': 'alloc', 'addr': k, 'frames': list(f)} for k, f in enumerate(order * 3)]\n"
    "t.append({'action': 'free_requested', 'addr': 11, 'frames': t[11]['frames']})\n"
    "snap['device_traces'] = [t]\n"
    "pickle.dump(snap, open(d + '/guess.pickle', 'wb'), protocol=4)\n"
    "snap['device_traces'] = [[{'frames': list(f)} for f in [a, b, a, b, a, b]]]\n"
    "p = pickle.dumps(snap, protocol=4)\n"
    "open(d + '/cut.pickle', 'wb').write(p[:p.rindex(b']\\x94(') + 6])\n";

/* What the callback saw: each item as compact JSON, one a line. */
struct seen {
    char *text;
    size_t len, items, frames_max;
};

static int item(void *ctx, int32_t list, size_t k, const struct mt_pv *v)
{
    struct seen *s = ctx;
    json_t *j = mt_pv_to_json(v);
    char *t = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    size_t n = t ? strlen(t) : 0;
    char *g = t && list == 0 && k == s->items ? realloc(s->text, s->len + n + 2) : NULL;
    if (!g) {
        free(t);
        return 1;
    }
    s->text = g;
    memcpy(s->text + s->len, t, n);
    s->len += n;
    s->text[s->len++] = '\n';
    s->text[s->len] = 0;
    free(t);
    size_t nf = mt_pv_len(mt_pv_get(v, "frames"));
    if (nf > s->frames_max)
        s->frames_max = nf;
    s->items++;
    return 0;
}

/* Reads path streaming, in one pass or with the scan; rc, and what was seen. */
static int read_streaming(const char *path, int one_pass, struct seen *s, struct mt_pv *root,
                          struct mt_pickle_error *err)
{
    size_t len;
    uint8_t *buf = slurp(path, &len);
    if (!buf)
        bail_out("cannot read a pickle written by python3");
    memset(s, 0, sizeof(*s));
    struct mt_pickle_opts o = {
        .key = "device_traces", .item = item, .ctx = s, .one_pass = one_pass};
    int rc = mt_pickle_read(buf, len, &o, root, err);
    if (rc == 0)
        mt_pv_release(root);
    free(buf);
    return rc;
}

static void shared_frames(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/shared.pickle", dir);
    struct seen one, two;
    struct mt_pv root;
    struct mt_pickle_error err;
    int rc1 = read_streaming(path, 1, &one, &root, &err);
    int rc2 = read_streaming(path, 0, &two, &root, &err);
    is_int(0, rc1, "shared frames lists: the one-pass read stands");
    is_int(0, rc2, "shared frames lists: the read with the scan stands");
    is_int(7000, (long long)one.items, "one pass: 7000 entries streamed");
    ok(one.text && two.text && strcmp(one.text, two.text) == 0,
       "one pass: every entry as the read with the scan has it (frames fetched "
       "again included)");
    is_int(22, (long long)one.frames_max, "one pass: the longest frames list has 22 frames");
    /* the first free fetches the frames list of the first alloc, 3000 entries back */
    const char *free0 = one.text ? strstr(one.text, "\"action\":\"free_requested\"") : NULL;
    ok(free0 && strstr(free0, "\"addr\":0,") &&
           strstr(free0, "{\"filename\":\"x.py\",\"line\":2,\"name\":\"f2\"}]"),
       "one pass: the first free has its alloc's three frames");
    free(one.text);
    free(two.text);
}

/* A digest of a value's whole tree, cheaper than its JSON for 200000 entries. */
static uint64_t digest(const struct mt_pv *v)
{
    uint64_t h = 0x9e3779b97f4a7c15ull * (v->type + 1);
    size_t n;
    const char *str = mt_pv_str(v, &n);
    if (str)
        for (size_t k = 0; k < n; k++)
            h = (h ^ (unsigned char)str[k]) * 0x100000001b3ull;
    else if (v->type == MT_PV_INT)
        h ^= (uint64_t)v->u.i * 0xff51afd7ed558ccdull;
    else if (v->type == MT_PV_LIST || v->type == MT_PV_DICT)
        for (size_t k = 0; k < v->u.c->n; k++)
            h = (h ^ digest(&v->u.c->items[k])) * 0xc4ceb9fe1a85ec53ull + k;
    return h;
}

struct digests {
    uint64_t sum;
    size_t items;
};

static int item_digest(void *ctx, int32_t list, size_t k, const struct mt_pv *v)
{
    struct digests *d = ctx;
    if (list != 0 || k != d->items)
        return 1;
    d->sum = (d->sum ^ digest(v)) * 0x100000001b3ull;
    d->items++;
    return 0;
}

/* The same on a mapping whose pages the reads give back (drop_behind): the frees at
 * the end fetch frames lists whose bytes lie megabytes behind. */
static void far_fetches(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/far.pickle", dir);
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0)
        bail_out("cannot open far.pickle");
    size_t len = (size_t)sb.st_size;
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        bail_out("cannot map far.pickle");
    struct digests s[2];
    int rc[2];
    for (int one = 0; one < 2; one++) {
        struct mt_pv root;
        struct mt_pickle_error err;
        memset(&s[one], 0, sizeof(s[one]));
        struct mt_pickle_opts o = {.key = "device_traces",
                                   .item = item_digest,
                                   .ctx = &s[one],
                                   .drop_behind = 1,
                                   .one_pass = one};
        rc[one] = mt_pickle_read(map, len, &o, &root, &err);
        if (rc[one] == 0)
            mt_pv_release(&root);
    }
    ok(len > (8u << 20) && rc[0] == 0 && rc[1] == 0 && s[1].items == 200000,
       "far fetches: %zu bytes mapped, given back as read: both reads stand, 200000 "
       "entries",
       len);
    ok(s[0].items == s[1].items && s[0].sum == s[1].sum,
       "far fetches: every entry as the read with the scan has it (digest %016llx)",
       (unsigned long long)s[1].sum);
    munmap(map, len);
}

/* A pickle cut short inside a frames list whose run is guessed (the one after the
 * runs before): the guess is checked against the input's end, and the one-pass read
 * gives up there. */
static void cut_guess(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/cut.pickle", dir);
    struct seen s;
    struct mt_pv root;
    struct mt_pickle_error err;
    is_int(MT_PICKLE_AGAIN, read_streaming(path, 1, &s, &root, &err),
           "a frames list cut short where its run is guessed: the one-pass read gives up");
    free(s.text);
}

static void entry_again(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/again.pickle", dir);
    struct seen s;
    struct mt_pv root;
    struct mt_pickle_error err;
    int rc = read_streaming(path, 1, &s, &root, &err);
    is_int(MT_PICKLE_AGAIN, rc, "an entry fetched again: the one-pass read gives up");
    free(s.text);
    size_t len;
    uint8_t *buf = slurp(path, &len);
    rc = buf ? mt_pickle_read(buf, len, NULL, &root, &err) : -1;
    const struct mt_pv *t = rc == 0 ? mt_pv_at(mt_pv_get(&root, "device_traces"), 0) : NULL;
    ok(t && mt_pv_len(t) == 3 && mt_pv_at(t, 0)->u.c == mt_pv_at(t, 2)->u.c,
       "an entry fetched again: read whole, the trace has it twice, shared");
    if (rc == 0)
        mt_pv_release(&root);
    free(buf);
}

/* Each item of device_traces[0] read whole (no streaming), as item() sees them. */
static int read_whole(const char *path, struct seen *s)
{
    size_t len;
    uint8_t *buf = slurp(path, &len);
    struct mt_pv root;
    struct mt_pickle_error err;
    memset(s, 0, sizeof(*s));
    int rc = buf ? mt_pickle_read(buf, len, NULL, &root, &err) : -1;
    if (rc == 0) {
        const struct mt_pv *t = mt_pv_at(mt_pv_get(&root, "device_traces"), 0);
        for (size_t k = 0; rc == 0 && k < mt_pv_len(t); k++)
            rc = item(s, 0, k, mt_pv_at(t, k));
        mt_pv_release(&root);
    }
    free(buf);
    return rc;
}

/* Entries of every shape: the streamed reads read each one at once (entry_fast) where
 * it knows the opcodes, and go on one by one from the first it does not (a float, a
 * nested dict, a tuple, a new frame dict, BINPUT in protocol 2 ...). And frames lists
 * whose run is guessed from the runs before it (run_shape) and is not that one: the
 * guess is the start of the list (b, then b and one frame more), or is the list's
 * first batch of 1000 (APPENDS MARK, then the 1001st: a list that the one-pass read
 * keeps, since it is no run, and that the last entry fetches), or is longer than the
 * list. */
static void entry_shapes(void)
{
    static const char *const name[3] = {"shapes.pickle", "shapes2.pickle", "guess.pickle"};
    static const size_t items[3] = {3000, 3000, 43};
    for (int p = 0; p < 3; p++) {
        char path[128];
        snprintf(path, sizeof(path), "%s/%s", dir, name[p]);
        struct seen whole, one, two;
        struct mt_pv root;
        struct mt_pickle_error err;
        int rc0 = read_whole(path, &whole);
        int rc1 = read_streaming(path, 1, &one, &root, &err);
        int rc2 = read_streaming(path, 0, &two, &root, &err);
        ok(rc0 == 0 && rc1 == 0 && rc2 == 0 && whole.items == items[p] && one.text && two.text &&
               strcmp(whole.text, one.text) == 0 && strcmp(whole.text, two.text) == 0,
           "%s: both streamed reads see each of the %zu entries as the read whole has it", name[p],
           items[p]);
        free(whole.text);
        free(one.text);
        free(two.text);
    }
}

/* A snapshot of one entry whose bytes (its EMPTY_DICT MEMOIZE MARK, then e) are
 * broken inside: the streamed read with the scan reports what the read whole does, at
 * the same offset. */
static void entry_errors(void)
{
    static const struct {
        const char *what, *bytes;
        size_t n;
    } cases[] = {
#define CASE(w, b) {w, b, sizeof(b) - 1}
        /* (a literal ends after \xNN where a hex digit follows) */
        CASE("an odd number of items", "\x8c\x01"
                                       "aK\x01\x8c\x01"
                                       "bu"),
        CASE("a key that is None", "NK\x01u"),
        CASE("a key fetched that is a list", "h\x03K\x01u"),
        CASE("a string that is not UTF-8", "\x8c\x01"
                                           "a\x8c\x01\xffu"),
        CASE("a float that is inf", "\x8c\x01"
                                    "aG\x7f\xf0\x00\x00\x00\x00\x00\x00u"),
        CASE("a memo id past the end", "\x8c\x01"
                                       "ar\xff\xff\xff\x7fK\x01u"),
        CASE("a fetch of an id never put", "\x8c\x01"
                                           "ah\x63u"),
        CASE("a fetch of the entry itself", "\x8c\x01"
                                            "ah\x04u"),
        CASE("the entry itself, then a bad memo id", "\x8c\x01"
                                                     "ah\x04r\xff\xff\xff\x7fu"),
        CASE("an APPEND to an integer", "\x8c\x01"
                                        "aK\x01K\x02"
                                        "au"),
#undef CASE
    };
    static const char head[] = "\x80\x04}\x94\x8c\x0d"
                               "device_traces\x94]\x94]\x94(}\x94(";
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        unsigned char buf[256];
        size_t n = sizeof(head) - 1;
        memcpy(buf, head, n);
        memcpy(buf + n, cases[c].bytes, cases[c].n);
        n += cases[c].n;
        memcpy(buf + n, "eas.", 4);
        n += 4;
        struct seen s = {0};
        struct mt_pickle_opts o = {.key = "device_traces", .item = item, .ctx = &s};
        struct mt_pv root;
        struct mt_pickle_error e1, e2;
        memset(&e1, 0, sizeof(e1));
        memset(&e2, 0, sizeof(e2));
        int rc1 = mt_pickle_read(buf, n, &o, &root, &e1);
        if (rc1 == 0)
            mt_pv_release(&root);
        int rc2 = mt_pickle_read(buf, n, NULL, &root, &e2);
        if (rc2 == 0)
            mt_pv_release(&root);
        ok(rc1 == MEMTRACE_EFORMAT && rc2 == rc1 && strcmp(e1.text, e2.text) == 0,
           "%s in an entry: streamed, the error read whole: %s", cases[c].what, e1.text);
        free(s.text);
    }
}

static void hostile(void)
{
    /* protocol 2: GLOBAL posix system, a command, TUPLE1, REDUCE, STOP */
    static const char evil[] = "\x80\x02"
                               "cposix\nsystem\n"
                               "X\x05\x00\x00\x00touch"
                               "\x85R.";
    struct seen s = {0};
    struct mt_pickle_opts o = {.key = "device_traces", .item = item, .ctx = &s, .one_pass = 1};
    struct mt_pv root;
    struct mt_pickle_error err;
    memset(&err, 0, sizeof(err));
    int rc = mt_pickle_read((const unsigned char *)evil, sizeof(evil) - 1, &o, &root, &err);
    is_int(MT_PICKLE_AGAIN, rc, "GLOBAL: the one-pass read gives up");
    o.one_pass = 0;
    rc = mt_pickle_read((const unsigned char *)evil, sizeof(evil) - 1, &o, &root, &err);
    ok(rc == MEMTRACE_EFORMAT && strstr(err.text, "GLOBAL at offset 2") && s.items == 0,
       "GLOBAL: the read with the scan refuses it, naming it: %s", err.text);
    free(s.text);
}

int main(void)
{
    if (system("command -v python3 >/dev/null 2>&1") != 0)
        skip_all("python3 is not installed");
    snprintf(dir, sizeof(dir), "/tmp/pickle-t.XXXXXX");
    if (!mkdtemp(dir))
        bail_out("cannot make a scratch folder");
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "cat > %s/gen.py && python3 %s/gen.py %s", dir, dir, dir);
    FILE *p = popen(cmd, "w");
    if (!p || fwrite(gen_py, 1, sizeof(gen_py) - 1, p) != sizeof(gen_py) - 1 || pclose(p) != 0)
        bail_out("python3 could not write the pickles");
    plan(26);
    shared_frames();
    far_fetches();
    entry_again();
    entry_shapes();
    cut_guess();
    entry_errors();
    hostile();
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return exit_status();
}
