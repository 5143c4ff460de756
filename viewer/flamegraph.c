/* flamegraph.c: `memtrace flamegraph FILE`: a cost per stack as folded stacks or as
 * a self-contained SVG flame graph.
 *
 * Folded stacks are one line per stack: frame names outermost first joined by ';', a
 * space and the cost as an integer (what flamegraph.pl, speedscope and difffolded.pl
 * read). Names lose what would break that format: ';' becomes ':' and control
 * characters become spaces. The SVG merges stacks by those names into a tree, lays it
 * out with the root at the bottom and children in name order, and carries a short
 * inline script for click-to-zoom and search; every name from the file is escaped for
 * XML (and bytes that are not UTF-8 become '?'). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_rank.h"
#include "frames.h"

static const char *cost_name = "peak", *format = "folded", *out_path;
static int force;
static struct cli_filter_opts fo;

static const struct cli_opt flame_opts[] = {
    CLI_OPTION_STRING(0, "cost", &cost_name, "COST",
                      "peak (bytes alive at the peak, default), leaked (bytes alive at the "
                      "end), allocated (bytes), temporary (temporary allocations) or count "
                      "(allocations)"),
    CLI_OPTION_STRING(0, "format", &format, "FMT", "folded (default) or svg"),
    CLI_OPTION_STRING('o', "output", &out_path, "OUT", "write to OUT instead of standard output"),
    CLI_OPTION_BOOL(0, "force", &force, "replace OUT if it exists (never through a link)"),
    CLI_FRAMES_OPTION,
    CLI_FILTER_OPTIONS(&fo),
    CLI_OPTION_END,
};

static const struct cli_help flame_help = {
    "flamegraph",
    "memtrace flamegraph FILE [--cost peak|leaked|allocated|temporary|count]\n"
    "       [--format folded|svg] [-o OUT [--force]] [--all-frames] [--device N] [--stream S]\n"
    "       [--min-size SIZE] [--category NAME] [--from WHEN] [--to WHEN]",
    "Writes a cost per stack of FILE as folded stacks (one line per stack: frames\n"
    "outermost first joined by ';', a space, the cost), which flamegraph.pl, speedscope\n"
    "and difffolded.pl read, or as a self-contained SVG flame graph (click a frame to\n"
    "zoom, 'Search' to highlight frames matching a regular expression). The costs are\n"
    "those of peak, leaks and top: bytes alive at the peak of allocated memory, bytes\n"
    "still alive at the end (allocated since --from), bytes allocated, the number of\n"
    "temporary allocations, or the number of allocations. Frames of stack capture, the\n"
    "allocator, operator dispatch, the Python interpreter and thread start are left out\n"
    "(as in peak's stacks) unless --all-frames.",
    flame_opts,
    0,
};

enum { COST_PEAK, COST_LEAKED, COST_ALLOCATED, COST_TEMPORARY, COST_COUNT };
static const char *const cost_names[] = {"peak", "leaked", "allocated", "temporary", "count"};
static const char *const cost_units[] = {"bytes", "bytes", "bytes", "temporary allocations",
                                         "allocations"};
static const char *const cost_titles[] = {"Bytes alive at the peak of allocated memory",
                                          "Bytes still alive at the end", "Bytes allocated",
                                          "Temporary allocations", "Allocations"};

#define STACK_MAX    4096
#define NAME_MAX_LEN 1024

/* A frame's name for the folded format, in buf. */
static const char *frame_name(char *buf, size_t size, const struct memtrace_reader *r, uint32_t id)
{
    const struct memtrace_frame *fr = memtrace_reader_frame(r, id);
    if (!fr)
        snprintf(buf, size, "[unknown frame %u]", (unsigned)id);
    else if (fr->symbol && fr->symbol[0])
        snprintf(buf, size, "%s", fr->symbol);
    else if (fr->module && fr->module[0])
        snprintf(buf, size, "%s+0x%" PRIx64, fr->module, fr->offset);
    else
        snprintf(buf, size, "0x%" PRIx64, fr->ip);
    for (char *p = buf; *p; p++) {
        if (*p == ';')
            *p = ':';
        else if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    }
    return buf;
}

static uint64_t row_cost(const struct cli_rank_row *w, int cost)
{
    switch (cost) {
    case COST_TEMPORARY:
        return w->temp_count;
    case COST_COUNT:
        return w->count;
    default:
        return w->bytes;
    }
}

/* The frame ids of stack that show (all with --all-frames), outermost first, into ids;
 * their number. */
static int stack_outer_first(const struct memtrace_reader *r, uint32_t stack, uint32_t *ids)
{
    int n = stack ? memtrace_reader_stack(r, stack, ids, STACK_MAX) : 0;
    if (n > STACK_MAX)
        n = STACK_MAX;
    if (!cli_all_frames)
        n = mt_stack_shown(r, ids, n, NULL);
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        uint32_t t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
    }
    return n;
}

static void write_folded(FILE *f, const struct cli_rank *rk, const struct memtrace_reader *r,
                         int cost)
{
    static uint32_t ids[STACK_MAX];
    char name[NAME_MAX_LEN];
    for (size_t k = 0; k < rk->n; k++) {
        int n = stack_outer_first(r, rk->rows[k].stack, ids);
        if (n == 0)
            fputs("[no stack]", f);
        for (int i = 0; i < n; i++) {
            if (i)
                fputc(';', f);
            fputs(frame_name(name, sizeof(name), r, ids[i]), f);
        }
        fprintf(f, " %" PRIu64 "\n", row_cost(&rk->rows[k], cost));
    }
}

/* The SVG's tree: frames merged by name under their parent. */
struct node {
    char *name;
    uint64_t value;
    uint32_t parent, child, sibling; /* 0: none (node 0 is the root) */
    uint32_t depth;
};

struct tree {
    struct node *n;
    size_t len, cap;
    uint32_t *slots; /* hash of (parent, name) -> node index + 1 */
    size_t nslots;
    uint32_t depth; /* of the deepest node */
};

static uint64_t hash_name(uint32_t parent, const char *s)
{
    uint64_t h = 1469598103934665603ull ^ parent;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h ^ (h >> 29);
}

static int tree_grow_slots(struct tree *t)
{
    size_t ns = t->nslots ? t->nslots * 2 : 1024;
    uint32_t *s = calloc(ns, sizeof(*s));
    if (!s)
        return -1;
    for (size_t k = 1; k < t->len; k++) {
        size_t i = hash_name(t->n[k].parent, t->n[k].name) & (ns - 1);
        while (s[i])
            i = (i + 1) & (ns - 1);
        s[i] = (uint32_t)k + 1;
    }
    free(t->slots);
    t->slots = s;
    t->nslots = ns;
    return 0;
}

/* The child of parent named name, made if new; 0 when out of memory. */
static uint32_t tree_child(struct tree *t, uint32_t parent, const char *name)
{
    if ((t->len + 1) * 2 > t->nslots && tree_grow_slots(t) != 0)
        return 0;
    size_t i = hash_name(parent, name) & (t->nslots - 1);
    for (; t->slots[i]; i = (i + 1) & (t->nslots - 1)) {
        struct node *c = &t->n[t->slots[i] - 1];
        if (c->parent == parent && strcmp(c->name, name) == 0)
            return t->slots[i] - 1;
    }
    if (t->len == t->cap) {
        size_t cap = t->cap * 2;
        struct node *n = realloc(t->n, cap * sizeof(*n));
        if (!n)
            return 0;
        t->n = n;
        t->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return 0;
    uint32_t k = (uint32_t)t->len++;
    t->n[k] = (struct node){copy, 0, parent, 0, t->n[parent].child, t->n[parent].depth + 1};
    t->n[parent].child = k;
    if (t->n[k].depth > t->depth)
        t->depth = t->n[k].depth;
    t->slots[i] = k + 1;
    return k;
}

static void tree_free(struct tree *t)
{
    for (size_t k = 0; k < t->len; k++)
        free(t->n[k].name);
    free(t->n);
    free(t->slots);
}

static int tree_build(struct tree *t, const struct cli_rank *rk, const struct memtrace_reader *r,
                      int cost)
{
    static uint32_t ids[STACK_MAX];
    char name[NAME_MAX_LEN];
    memset(t, 0, sizeof(*t));
    t->cap = 256;
    t->n = malloc(t->cap * sizeof(*t->n));
    char *root = strdup("all");
    if (!t->n || !root) {
        free(root);
        return -1;
    }
    t->n[0] = (struct node){root, 0, 0, 0, 0, 0};
    t->len = 1;
    for (size_t k = 0; k < rk->n; k++) {
        uint64_t v = row_cost(&rk->rows[k], cost);
        int n = stack_outer_first(r, rk->rows[k].stack, ids);
        uint32_t at = 0;
        t->n[0].value += v;
        for (int i = 0; i < (n ? n : 1); i++) {
            at = tree_child(t, at, n ? frame_name(name, sizeof(name), r, ids[i]) : "[no stack]");
            if (at == 0)
                return -1;
            t->n[at].value += v;
        }
    }
    return 0;
}

/* Text for XML: entities for markup, '?' for control characters and for bytes that
 * are not UTF-8. At most max characters (a character is a whole UTF-8 sequence). */
static void xml_put(FILE *f, const char *s, size_t max)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t shown = 0; *p && shown < max; shown++) {
        unsigned c = *p;
        size_t len = c < 0x80             ? 1
                     : (c & 0xe0) == 0xc0 ? 2
                     : (c & 0xf0) == 0xe0 ? 3
                     : (c & 0xf8) == 0xf0 ? 4
                                          : 0;
        int valid = len > 0 && !(c == 0xc0 || c == 0xc1 || c > 0xf4);
        for (size_t k = 1; valid && k < len; k++)
            valid = (p[k] & 0xc0) == 0x80;
        if (valid && len == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
            valid = 0; /* overlong, or a surrogate */
        if (valid && len == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
            valid = 0;
        if (!valid) {
            fputc('?', f);
            p++;
            continue;
        }
        if (len > 1) {
            fwrite(p, 1, len, f);
            p += len;
            continue;
        }
        switch (c) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        default:
            fputc(c < 0x20 || c == 0x7f ? '?' : (int)c, f);
        }
        p++;
    }
}

/* Characters of a name that fit in a frame w pixels wide (12px Verdana: about 7px
 * each), as the script computes them again when zooming. */
static size_t fits(double w)
{
    return w < 21 ? 0 : (size_t)((w - 6) / 7);
}

static size_t utf8_len(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

#define SVG_W      1200.0
#define SVG_PAD    10.0
#define FRAME_H    16.0
#define TOP_PAD    56.0
#define BOTTOM_PAD 34.0
#define MIN_PX     0.1

struct svg {
    FILE *f;
    const struct tree *t;
    double scale; /* pixels per unit of cost */
    double height;
    const char *unit;
    size_t frames;
};

static int name_cmp(const void *a, const void *b)
{
    const struct node *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static int svg_node(struct svg *s, uint32_t k, uint64_t x)
{
    const struct node *nd = &s->t->n[k];
    double w = (double)nd->value * s->scale;
    if (w < MIN_PX)
        return 0;
    double px = SVG_PAD + (double)x * s->scale;
    double py = s->height - BOTTOM_PAD - (nd->depth + 1) * FRAME_H;
    uint64_t root = s->t->n[0].value;
    uint64_t h = hash_name(0, nd->name);
    s->frames++;
    fprintf(s->f, "<g class=\"f\" data-x=\"%.9f\" data-w=\"%.9f\" data-d=\"%u\"><title>",
            root ? (double)x / (double)root : 0.0, root ? (double)nd->value / (double)root : 0.0,
            (unsigned)nd->depth);
    xml_put(s->f, nd->name, SIZE_MAX);
    fprintf(s->f, " (%" PRIu64 " %s, %.2f%%)</title>", nd->value, s->unit,
            root ? 100.0 * (double)nd->value / (double)root : 0.0);
    fprintf(s->f,
            "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"rgb(%u,%u,%u)\" "
            "rx=\"2\" ry=\"2\"/><text x=\"%.2f\" y=\"%.1f\">",
            px, py, w, FRAME_H - 1, 205 + (unsigned)(h % 50), (unsigned)((h >> 8) % 230),
            (unsigned)((h >> 16) % 55), px + 3, py + 11.5);
    size_t room = fits(w), len = utf8_len(nd->name);
    if (len <= room) {
        xml_put(s->f, nd->name, len);
    } else if (room >= 3) {
        xml_put(s->f, nd->name, room - 2);
        fputs("..", s->f);
    }
    fputs("</text></g>\n", s->f);

    size_t nc = 0;
    for (uint32_t c = nd->child; c; c = s->t->n[c].sibling)
        nc++;
    if (nc == 0)
        return 0;
    const struct node **kids = malloc(nc * sizeof(*kids));
    if (!kids)
        return -1;
    nc = 0;
    for (uint32_t c = nd->child; c; c = s->t->n[c].sibling)
        kids[nc++] = &s->t->n[c];
    qsort(kids, nc, sizeof(*kids), name_cmp);
    int rc = 0;
    for (size_t i = 0; i < nc && rc == 0; i++) {
        rc = svg_node(s, (uint32_t)(kids[i] - s->t->n), x);
        x += kids[i]->value;
    }
    free(kids);
    return rc;
}

/* The script: click a frame to zoom to it (its ancestors stretch across, faded),
 * "Reset zoom" to go back, "Search" to highlight frames matching a regular
 * expression and show their share. Names are read back from the frames' titles. */
static const char svg_script[] =
    "var W=1200,P=10,fs=[].slice.call(document.getElementsByTagName('g')).filter(function(g)"
    "{return g.getAttribute('class')=='f';}),det=document.getElementById('details'),"
    "mat=document.getElementById('matched'),cur=null;\n"
    "function a(g,k){return +g.getAttribute('data-'+k);}\n"
    "function nm(g){var t=g.getElementsByTagName('title')[0].textContent;"
    "return t.substring(0,t.lastIndexOf(' ('));}\n"
    "function fit(g,w){var t=g.getElementsByTagName('text')[0],n=nm(g),m=w<21?0:"
    "Math.floor((w-6)/7);t.textContent=n.length<=m?n:(m>=3?n.substring(0,m-2)+'..':'');}\n"
    "function zoom(z){var x0=a(z,'x'),w0=a(z,'w'),d0=a(z,'d'),e=1e-9;cur=z;"
    "fs.forEach(function(g){var x=a(g,'x'),w=a(g,'w'),d=a(g,'d'),r=g.getElementsByTagName"
    "('rect')[0],t=g.getElementsByTagName('text')[0];"
    "var ins=d>=d0&&x>=x0-e&&x+w<=x0+w0+e,up=d<d0&&x<=x0+e&&x+w>=x0+w0-e;"
    "if(!ins&&!up){g.style.display='none';return;}g.style.display='';"
    "g.style.opacity=up?'0.6':'';var nx=up?0:(x-x0)/w0,nw=up?1:w/w0,px=P+nx*(W-2*P),"
    "pw=nw*(W-2*P);r.setAttribute('x',px);r.setAttribute('width',pw);"
    "t.setAttribute('x',px+3);fit(g,pw);});}\n"
    "document.documentElement.addEventListener('click',function(ev){var g=ev.target;"
    "while(g&&g.getAttribute&&g.getAttribute('class')!='f'){if(g.id=='reset'){"
    "if(fs.length)zoom(fs[0]);return;}if(g.id=='search'){search();return;}g=g.parentNode;}"
    "if(g&&g.getAttribute)zoom(g);});\n"
    "document.documentElement.addEventListener('mouseover',function(ev){var g=ev.target;"
    "while(g&&g.getAttribute&&g.getAttribute('class')!='f')g=g.parentNode;"
    "if(g&&g.getAttribute)det.textContent=g.getElementsByTagName('title')[0].textContent;});\n"
    "function search(){var q=prompt('Search frames (regular expression; empty to clear)','');"
    "if(q===null)return;var re=null;try{re=q?new RegExp(q):null;}catch(x){alert(x);return;}"
    "var hit=[];fs.forEach(function(g){var r=g.getElementsByTagName('rect')[0];"
    "if(r.orig===undefined)r.orig=r.getAttribute('fill');"
    "var m=re&&re.test(nm(g));r.setAttribute('fill',m?'rgb(230,0,230)':r.orig);"
    "if(m)hit.push([a(g,'x'),a(g,'w')]);});"
    "hit.sort(function(p,q){return p[0]-q[0]||q[1]-p[1];});var end=-1,sum=0;"
    "hit.forEach(function(h){if(h[0]>=end-1e-9){sum+=h[1];end=h[0]+h[1];}});"
    "mat.textContent=re?'Matched: '+(100*sum).toFixed(2)+'%':'';}\n";

static int write_svg(FILE *f, const struct tree *t, const char *path, int cost)
{
    double height = TOP_PAD + (t->depth + 1) * FRAME_H + BOTTOM_PAD;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
            "<svg version=\"1.1\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "xmlns=\"http://www.w3.org/2000/svg\">\n"
            "<style type=\"text/css\">text{font-family:Verdana,sans-serif;font-size:12px;"
            "fill:#000}g.f:hover rect{stroke:#000;stroke-width:0.5}g.f{cursor:pointer}"
            "#title{font-size:17px}#search,#reset{cursor:pointer;fill:#2060a0}</style>\n"
            "<rect class=\"bg\" x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" "
            "fill=\"#f8f8f0\"/>\n"
            "<text id=\"title\" x=\"%.0f\" y=\"24\" text-anchor=\"middle\">",
            SVG_W, height, SVG_W, height, SVG_W, height, SVG_W / 2);
    fputs(cost_titles[cost], f);
    fputs(" in ", f);
    xml_put(f, path, SIZE_MAX);
    fprintf(f,
            "</text>\n<text x=\"%.0f\" y=\"44\">total %" PRIu64 " %s</text>\n"
            "<text id=\"reset\" x=\"%.0f\" y=\"44\">Reset zoom</text>\n"
            "<text id=\"search\" x=\"%.0f\" y=\"44\" text-anchor=\"end\">Search</text>\n"
            "<text id=\"matched\" x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\"></text>\n"
            "<text id=\"details\" x=\"%.0f\" y=\"%.0f\"> </text>\n",
            SVG_PAD, t->n[0].value, cost_units[cost], SVG_W / 2 - 40, SVG_W - SVG_PAD,
            SVG_W - SVG_PAD, height - 12, SVG_PAD, height - 12);
    struct svg s = {f, t, 0, height, cost_units[cost], 0};
    int rc = 0;
    if (t->n[0].value) {
        s.scale = (SVG_W - 2 * SVG_PAD) / (double)t->n[0].value;
        rc = svg_node(&s, 0, 0);
    } else {
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">Nothing to show</text>\n",
                SVG_W / 2, height / 2);
    }
    /* Last, so that the frames exist when it runs. */
    fprintf(f, "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n</svg>\n", svg_script);
    return rc;
}

int cli_cmd_flamegraph(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    int rc = cli_options_parse(argc, argv, &flame_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (npos != 1)
        return npos == 0
                   ? cli_usage_error("flamegraph", "'flamegraph' needs a FILE argument")
                   : cli_usage_error("flamegraph", "'flamegraph' takes one file, got '%s' and '%s'",
                                     pos[0], pos[1]);
    int cost = -1;
    for (int k = 0; k < (int)(sizeof(cost_names) / sizeof(cost_names[0])); k++)
        if (strcmp(cost_name, cost_names[k]) == 0)
            cost = k;
    if (cost < 0)
        return cli_usage_error("flamegraph",
                               "invalid value '%s' for --cost of 'flamegraph': expected peak, "
                               "leaked, allocated, temporary or count",
                               cost_name);
    int svg = strcmp(format, "svg") == 0;
    if (!svg && strcmp(format, "folded") != 0)
        return cli_usage_error("flamegraph",
                               "invalid value '%s' for --format of 'flamegraph': expected "
                               "folded or svg",
                               format);
    struct mt_filter f;
    if (cli_filter_from_opts("flamegraph", &fo, 1, &f) != 0)
        return CLI_EXIT_USAGE;
    const char *path = pos[0];
    struct mt_replay *rp = cli_replay_open_cli(path, &f);
    if (!rp)
        return CLI_EXIT_FAIL;

    uint64_t since = UINT64_MAX;
    struct cli_progress prog;
    cli_progress_init(&prog, rp->r, "flamegraph", 0);
    while ((rc = mt_replay_next(rp)) == 1) {
        if (rp->in_window && since == UINT64_MAX)
            since = rp->index;
        cli_progress_update(&prog, rp->events);
    }
    cli_progress_done(&prog);
    int status = cli_replay_done_cli(rp, rc);
    struct cli_rank rk = {0};
    struct tree t = {0};
    FILE *out = NULL;
    struct cli_output co = {0};
    int nomem = 0;
    if (status != CLI_EXIT_OK)
        goto out;
    if (cli_rank_init(&rk, rp) != 0) {
        nomem = 1;
        goto out;
    }
    switch (cost) {
    case COST_PEAK:
        cli_rank_at_peak(&rk, &rp->block_stacks, &rp->allocated);
        break;
    case COST_LEAKED:
        cli_rank_live_since(&rk, &rp->blocks, since);
        break;
    default:
        cli_rank_allocated(&rk, &rp->block_stacks);
        break;
    }
    cli_rank_finish(&rk, cost == COST_TEMPORARY ? CLI_RANK_TEMPORARY
                         : cost == COST_COUNT   ? CLI_RANK_COUNT
                                                : CLI_RANK_BYTES);
    if (svg && tree_build(&t, &rk, rp->r, cost) != 0) {
        nomem = 1;
        goto out;
    }
    out = stdout;
    if (out_path) {
        if (cli_output_open(&co, out_path, force, pos, 1) != 0) {
            out = NULL;
            status = CLI_EXIT_FAIL;
            goto out;
        }
        out = co.f;
    }
    if (svg) {
        if (write_svg(out, &t, path, cost) != 0) {
            nomem = 1;
            goto out;
        }
    } else {
        write_folded(out, &rk, rp->r, cost);
    }
    int failed = ferror(out) || (!out_path && fflush(out) != 0);
    if (failed)
        cli_error("cannot write %s: %s", out_path ? out_path : "the output", strerror(errno));
    if (out_path && cli_output_close(&co, !failed) != 0)
        failed = 1;
    out = NULL;
    if (failed)
        status = CLI_EXIT_FAIL;
out:
    if (nomem) {
        cli_error("out of memory while drawing the stacks of %s", path);
        status = CLI_EXIT_FAIL;
    }
    if (co.f)
        cli_output_close(&co, 0); /* (the output of a command that failed: dropped) */
    tree_free(&t);
    cli_rank_free(&rk);
    mt_replay_close(rp);
    return status;
}
