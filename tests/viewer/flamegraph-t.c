/* flamegraph-t.c: `memtrace flamegraph` on a recording with known contents
 * (rank-util.h). The folded output is read back by a parser of the format written
 * here (sum of the costs per stack) and compared with the reference for every cost;
 * the SVG must be well-formed XML (xmllint when present, and a structural check
 * here), hold one frame per distinct name path, and show names only escaped. */
#include "config.h"

#include "rank-util.h"

static const char *path;

#define MAXLINES 64

struct folded {
    char *stack[MAXLINES];
    unsigned long long cost[MAXLINES];
    int n;
    int bad; /* lines that do not parse */
};

/* Parses folded stacks: "frame;frame;... COST" per line, costs summed per stack. */
static void parse_folded(const char *text, struct folded *f)
{
    memset(f, 0, sizeof(*f));
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        if (!nl) {
            f->bad++;
            break;
        }
        const char *sp = nl;
        while (sp > p && sp[-1] != ' ')
            sp--;
        const char *d = sp;
        while (d < nl && *d >= '0' && *d <= '9')
            d++;
        if (sp == p || sp - 1 == p || d != nl || sp == nl) {
            f->bad++;
            p = nl + 1;
            continue;
        }
        unsigned long long c = strtoull(sp, NULL, 10);
        size_t len = (size_t)(sp - 1 - p);
        int k;
        for (k = 0; k < f->n; k++)
            if (strlen(f->stack[k]) == len && memcmp(f->stack[k], p, len) == 0)
                break;
        if (k == f->n && f->n < MAXLINES) {
            f->stack[f->n] = strndup(p, len);
            f->cost[f->n++] = 0;
        }
        if (k < MAXLINES)
            f->cost[k] += c;
        p = nl + 1;
    }
}

static void free_folded(struct folded *f)
{
    for (int k = 0; k < f->n; k++)
        free(f->stack[k]);
}

/* The folded name path of stack s. */
static void path_of(uint32_t s, char *buf, size_t size)
{
    const char *names[RK_NST + 1];
    int n = rk_frames_of(s, names);
    buf[0] = '\0';
    if (n == 0)
        snprintf(buf, size, "[no stack]");
    for (int k = n - 1; k >= 0; k--) {
        strncat(buf, names[k], size - strlen(buf) - 1);
        if (k)
            strncat(buf, ";", size - strlen(buf) - 1);
    }
}

/* Compares folded output with the reference costs per stack (cost[s], 0: absent). */
static void check_folded(const char *out, const uint64_t *cost, const char *what)
{
    struct folded f;
    parse_folded(out, &f);
    is_int(0, f.bad, "%s: every line parses", what);
    int want = 0, same = 1;
    for (uint32_t s = 0; s <= RK_NST; s++) {
        if (!cost[s])
            continue;
        want++;
        char p[512];
        path_of(s, p, sizeof(p));
        int k;
        for (k = 0; k < f.n; k++)
            if (strcmp(f.stack[k], p) == 0)
                break;
        if (k == f.n || f.cost[k] != cost[s]) {
            diag("%s: stack %u (%s): want %llu, got %llu", what, s, p, (unsigned long long)cost[s],
                 k == f.n ? 0ull : f.cost[k]);
            same = 0;
        }
    }
    is_int(want, f.n, "%s: %d stacks", what, want);
    ok(same, "%s: the cost of each stack", what);
    free_folded(&f);
}

static void run_folded(const char *const *args, struct rk_filter flt, int kind, const char *what)
{
    const char *argv[32] = {"flamegraph", path};
    int n = 2;
    for (int k = 0; args[k]; k++)
        argv[n++] = args[k];
    argv[n] = NULL;
    struct rk_ref r = rk_reference(flt);
    uint64_t cost[RK_NST + 1];
    for (int s = 0; s <= RK_NST; s++) {
        switch (kind) {
        case 0:
            cost[s] = r.at_peak[s].bytes;
            break;
        case 1:
            cost[s] = r.since[s].bytes;
            break;
        case 2:
            cost[s] = r.alloc[s].bytes;
            break;
        case 3:
            cost[s] = r.temp[s].count;
            break;
        default:
            cost[s] = r.alloc[s].count;
        }
    }
    struct cli_out o = cli_run(argv);
    is_int(0, o.status, "%s: exit 0", what);
    is_string("", o.err, "%s: nothing on stderr", what);
    check_folded(o.out, cost, what);
    cli_free(&o);
}

static void check_costs(void)
{
    struct rk_filter f = rk_all();
    run_folded((const char *const[]){NULL}, f, 0, "peak (the default)");
    run_folded((const char *const[]){"--cost", "leaked", NULL}, f, 1, "leaked");
    run_folded((const char *const[]){"--cost", "allocated", NULL}, f, 2, "allocated");
    run_folded((const char *const[]){"--cost", "temporary", NULL}, f, 3, "temporary");
    run_folded((const char *const[]){"--cost", "count", NULL}, f, 4, "count");
    f.from = 9;
    run_folded((const char *const[]){"--cost", "leaked", "--from", "step2", NULL}, f, 1,
               "leaked --from step2");
    f = rk_all();
    f.device = 1;
    run_folded((const char *const[]){"--device", "1", "--format", "folded", NULL}, f, 0,
               "peak --device 1");

    struct cli_out o = cli_run((const char *const[]){"flamegraph", path, NULL});
    char line[512];
    cli_line(o.out, "main;<", line, sizeof(line));
    is_string("main;<script>x:y z&\"'</script> 4096", line,
              "';' and the newline of a name are replaced, the line stays one line");
    cli_line(o.out, "main;train_step;optimizer_step;", line, sizeof(line));
    is_string("main;train_step;optimizer_step;/usr/lib/libtorch.so+0x1234 300", line,
              "a frame without a symbol is module+offset");
    char *stdout_text = strdup(o.out);
    cli_free(&o);
    o = cli_run((const char *const[]){"flamegraph", "--cost", "temporary", path, NULL});
    ok(strstr(o.out, "main;0xdeadbeef 1\n") != NULL, "a frame with only an address is the ip");
    cli_free(&o);

    const char *out = cli_path("out.folded");
    o = cli_run((const char *const[]){"flamegraph", path, "-o", out, NULL});
    is_int(0, o.status, "-o: exit 0");
    is_string("", o.out, "-o: nothing on stdout");
    char *written = cli_slurp(out);
    is_string(stdout_text, written, "-o writes what stdout had");
    free(written);
    free(stdout_text);
    cli_free(&o);
    o = cli_run(
        (const char *const[]){"flamegraph", path, "-o", "/nonexistent-dir/x/out.folded", NULL});
    is_int(1, o.status, "an unwritable -o: exit 1");
    ok(strncmp(o.err, "memtrace: cannot create /nonexistent-dir/x/out.folded: ", 55) == 0 &&
           cli_lines(o.err) == 1,
       "one line: %s", o.err);
    cli_free(&o);
}

/* Well-formedness without a library: tags balance (skipping the declaration,
 * comments and CDATA), attributes are quoted, '&' starts an entity and '<' a tag. */
static int xml_structure_ok(const char *s)
{
    const char *stack[256];
    size_t lens[256];
    int depth = 0, elements = 0;
    while (*s) {
        if (*s == '&') {
            static const char *const ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
            int okent = 0;
            for (int k = 0; k < 5; k++)
                okent |= strncmp(s, ents[k], strlen(ents[k])) == 0;
            if (!okent)
                return diag("a bare '&': %.30s", s), 0;
            s++;
            continue;
        }
        if (*s != '<') {
            s++;
            continue;
        }
        if (strncmp(s, "<?", 2) == 0) {
            s = strstr(s, "?>");
            if (!s)
                return 0;
            s += 2;
        } else if (strncmp(s, "<!--", 4) == 0) {
            s = strstr(s, "-->");
            if (!s)
                return 0;
            s += 3;
        } else if (strncmp(s, "<![CDATA[", 9) == 0) {
            s = strstr(s, "]]>");
            if (!s)
                return 0;
            s += 3;
        } else if (s[1] == '/') {
            const char *name = s + 2;
            size_t len = strcspn(name, ">");
            if (depth == 0 || lens[depth - 1] != len || strncmp(stack[depth - 1], name, len) != 0)
                return diag("unbalanced </%.*s>", (int)len, name), 0;
            depth--;
            s = name + len + 1;
        } else {
            const char *name = s + 1;
            size_t len = strcspn(name, " />");
            if (len == 0)
                return diag("a bare '<': %.30s", s), 0;
            const char *p = name + len;
            while (*p && *p != '>' && !(p[0] == '/' && p[1] == '>')) {
                if (*p == '"') {
                    const char *q = strchr(p + 1, '"');
                    if (!q || memchr(p + 1, '<', (size_t)(q - p - 1)))
                        return diag("a bad attribute in <%.*s>", (int)len, name), 0;
                    p = q + 1;
                } else if (*p == '\'' || *p == '<') {
                    return diag("a bad attribute in <%.*s>", (int)len, name), 0;
                } else {
                    p++;
                }
            }
            if (!*p)
                return 0;
            elements++;
            if (*p == '/') {
                s = p + 2;
            } else {
                if (depth == 256)
                    return 0;
                stack[depth] = name;
                lens[depth++] = len;
                s = p + 1;
            }
        }
    }
    return depth == 0 && elements > 0;
}

static int count_of(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

/* The distinct name paths (prefixes of the stacks with a cost) and the root. */
static int frames_expected(const uint64_t *cost)
{
    char seen[64][512];
    int n = 0;
    for (uint32_t s = 0; s <= RK_NST; s++) {
        if (!cost[s])
            continue;
        char p[512];
        path_of(s, p, sizeof(p));
        for (char *c = p;; c++) {
            if (*c != ';' && *c != '\0')
                continue;
            char prefix[512];
            snprintf(prefix, sizeof(prefix), "%.*s", (int)(c - p), p);
            int k;
            for (k = 0; k < n; k++)
                if (strcmp(seen[k], prefix) == 0)
                    break;
            if (k == n && n < 64)
                snprintf(seen[n++], 512, "%s", prefix);
            if (*c == '\0')
                break;
        }
    }
    return n + 1;
}

static void check_svg(const char *cost_name, const uint64_t *cost, const char *evil_title)
{
    const char *out = cli_path("out.svg");
    struct cli_out o = cli_run((const char *const[]){
        "flamegraph", path, "--format", "svg", "--cost", cost_name, "-o", out, "--force", NULL});
    is_int(0, o.status, "svg %s: exit 0", cost_name);
    char *svg = cli_slurp(out);
    ok(strncmp(svg, "<?xml ", 6) == 0 && strstr(svg, "</svg>\n") != NULL, "svg %s: an XML document",
       cost_name);
    ok(xml_structure_ok(svg), "svg %s: well-formed (structural check)", cost_name);
    if (access("/usr/bin/xmllint", X_OK) == 0 || access("/usr/local/bin/xmllint", X_OK) == 0) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), "xmllint --noout '%s' 2>&1", out);
        ok(system(cmd) == 0, "svg %s: xmllint finds it well-formed", cost_name);
    } else {
        skip(1, "no xmllint");
    }
    int want = frames_expected(cost);
    is_int(want, count_of(svg, "<g class=\"f\""), "svg %s: %d frames", cost_name, want);
    is_int(want + 1, count_of(svg, "<rect "), "svg %s: a rectangle each, and the background",
           cost_name);
    is_int(1, count_of(svg, "<script"), "svg %s: '<script' only for the script itself", cost_name);
    ok(!strstr(svg, "http:") || count_of(svg, "http:") == 1,
       "svg %s: no link but the SVG namespace", cost_name);
    if (evil_title)
        ok(strstr(svg, evil_title) != NULL, "svg %s: the name with markup, escaped", cost_name);
    free(svg);
    cli_free(&o);
}

static void check_svgs(void)
{
    struct rk_ref r = rk_reference(rk_all());
    uint64_t cost[RK_NST + 1];
    for (int s = 0; s <= RK_NST; s++)
        cost[s] = r.at_peak[s].bytes;
    /* By hand: all, [no stack], main, and under main the markup frame, train_step,
     * backward, alloc_tensor, optimizer_step and libtorch+0x1234. */
    is_int(9, frames_expected(cost), "reference: 9 frames at the peak");
    check_svg("peak", cost,
              "<title>&lt;script&gt;x:y z&amp;&quot;&apos;&lt;/script&gt; (4096 bytes, 35.63%)"
              "</title>");
    for (int s = 0; s <= RK_NST; s++)
        cost[s] = r.alloc[s].count;
    check_svg("count", cost,
              "<title>&lt;script&gt;x:y z&amp;&quot;&apos;&lt;/script&gt; (1 allocations, "
              "9.09%)</title>");
    for (int s = 0; s <= RK_NST; s++)
        cost[s] = r.temp[s].count;
    check_svg("temporary", cost, NULL);
}

static void check_errors(void)
{
    struct cli_out o = cli_run((const char *const[]){"flamegraph", path, "--cost", "rss", NULL});
    is_int(2, o.status, "--cost rss: exit 2");
    ok(strstr(o.err, "expected peak, leaked, allocated, temporary or count") &&
           cli_lines(o.err) == 1,
       "one line names the costs");
    cli_free(&o);
    o = cli_run((const char *const[]){"flamegraph", path, "--format", "png", NULL});
    is_int(2, o.status, "--format png: exit 2");
    cli_free(&o);
    o = cli_run((const char *const[]){"flamegraph", cli_path("missing.memtrace"), NULL});
    is_int(1, o.status, "a missing file: exit 1");
    cli_free(&o);
    o = cli_run((const char *const[]){"flamegraph", "--help", NULL});
    is_int(0, o.status, "--help: exit 0");
    ok(strstr(o.out, "--cost COST") && strstr(o.out, "--format FMT"), "--help lists the flags");
    cli_free(&o);
}

int main(void)
{
    cli_scratch();
    static char rank_path[512];
    /* A copy: cli_path() reuses its buffers. */
    snprintf(rank_path, sizeof(rank_path), "%s", cli_path("rank.memtrace"));
    path = rank_path;
    rk_write(path, 1);
    check_costs();
    check_svgs();
    check_errors();
    done_testing();
    return exit_status();
}
