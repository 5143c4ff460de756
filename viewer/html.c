/* html.c: `memtrace html FILE... [-o OUT]`: one self-contained HTML page, the web
 * viewer with its scripts and style sheet inlined and the files embedded in base64,
 * that opens from file:// with no network and no other file. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "web.h"

static const char *output;
static int force;

static const struct cli_opt html_opts[] = {
    CLI_OPTION_STRING('o', "output", &output, "OUT",
                      "write the page to OUT instead of standard output"),
    CLI_OPTION_BOOL(0, "force", &force, "replace OUT if it exists (never through a link)"),
    CLI_OPTION_END,
};

static const struct cli_help html_help = {
    "html",
    "memtrace html FILE... [-o OUT.html [--force]]",
    "Writes one HTML file that holds the web viewer and the FILEs (.memtrace files,\n"
    "or PyTorch memory snapshots as pickle or JSON), which opens in a browser from\n"
    "file:// without a network or any other file: send it, archive it, attach it.\n"
    "Several FILEs (runs, or the ranks of one job) open together, with the compare\n"
    "view. The files are embedded whole, a third larger in base64.",
    html_opts,
    0,
};

/* Content-Security-Policy of the page: inline scripts and style, the decoding
 * worker from a blob, and no network at all. */
static const char report_csp[] =
    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
    "script-src 'unsafe-inline' blob:; worker-src blob:; style-src 'unsafe-inline'; "
    "img-src data: blob:; connect-src blob: data:\">\n";

static void put_escaped_attr(const char *s, FILE *out)
{
    for (; *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&#39;", out);
            break;
        default:
            fputc(*s, out);
        }
    }
}

/* A script's text inside <script>: "</script" would end the element and "<!--"
 * would change how the parser reads it; both mean the same to JavaScript with a
 * backslash after the '<' (they only occur in strings and comments). */
static void put_script(const char *s, size_t len, FILE *out)
{
    for (size_t i = 0; i < len; i++) {
        fputc(s[i], out);
        if (s[i] == '<' && i + 1 < len &&
            (strncasecmp(s + i + 1, "/script", len - i - 1 < 7 ? len - i - 1 : 7) == 0 ||
             strncmp(s + i + 1, "!--", len - i - 1 < 3 ? len - i - 1 : 3) == 0))
            fputc('\\', out);
    }
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

static int embed(const char *path, FILE *out)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    enum { CHUNK = 3 * 16384 };
    int ret = -1;
    unsigned char *in = malloc(CHUNK);
    char *enc = malloc(CHUNK / 3 * 4);
    FILE *f = fopen(path, "rb");
    if (!in || !enc) {
        cli_error("%s: out of memory", path);
        goto out;
    }
    if (!f) {
        cli_error("cannot open %s: %s", path, strerror(errno));
        goto out;
    }
    if (cli_web_check_kind(path, f) != 0)
        goto out;
    fputs("<script type=\"application/x-memtrace-base64\" data-name=\"", out);
    put_escaped_attr(base_name(path), out);
    fputs("\">", out);
    for (;;) {
        size_t n = 0, got;
        while (n < CHUNK && (got = fread(in + n, 1, CHUNK - n, f)) > 0)
            n += got;
        if (ferror(f)) {
            cli_error("cannot read %s: %s", path, strerror(errno));
            goto out;
        }
        size_t o = 0;
        for (size_t i = 0; i < n; i += 3) {
            unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                         (i + 2 < n ? in[i + 2] : 0);
            enc[o++] = b64[v >> 18 & 63];
            enc[o++] = b64[v >> 12 & 63];
            enc[o++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
            enc[o++] = i + 2 < n ? b64[v & 63] : '=';
        }
        fwrite(enc, 1, o, out);
        if (n < CHUNK)
            break;
    }
    fputs("</script>\n", out);
    ret = 0;
out:
    if (f)
        fclose(f);
    free(in);
    free(enc);
    return ret;
}

/* name from a line `<tag attr="name">` of index.html, checked against the
 * viewer's list. */
static int ref_name(const char *line, const char *prefix, const char *suffix, char *name,
                    size_t size)
{
    while (*line == ' ' || *line == '\t')
        line++;
    size_t lp = strlen(prefix), ls = strlen(suffix), len = strcspn(line, "\r\n");
    if (len < lp + ls || strncmp(line, prefix, lp) != 0 ||
        strncmp(line + len - ls, suffix, ls) != 0 || len - lp - ls >= size)
        return 0;
    memcpy(name, line + lp, len - lp - ls);
    name[len - lp - ls] = '\0';
    return 1;
}

static int inline_file(const char *dir, const char *name, int script, FILE *out)
{
    char path[4096];
    char *data;
    size_t len;
    if (!cli_web_known(name) || strcmp(name, "index.html") == 0) {
        cli_error("%s/index.html refers to '%s', which is not one of the viewer's files", dir,
                  name);
        return -1;
    }
    if (cli_web_path(path, sizeof path, dir, name) != 0 || cli_read_all(path, &data, &len) != 0)
        return -1;
    fputs(script ? "<script>\n" : "<style>\n", out);
    if (script)
        put_script(data, len, out);
    else
        fwrite(data, 1, len, out);
    fputs(script ? "</script>\n" : "</style>\n", out);
    free(data);
    return 0;
}

static int write_page(const char *dir, char **files, int n, FILE *out)
{
    char path[4096], name[256];
    char *page = NULL;
    size_t len;
    int ret = -1, embedded = 0;
    if (cli_web_path(path, sizeof path, dir, "index.html") != 0 ||
        cli_read_all(path, &page, &len) != 0)
        return -1;
    for (char *line = page, *next; *line; line = next) {
        next = line + strcspn(line, "\n");
        if (*next)
            next++;
        const char *csp = strstr(line, "http-equiv=\"Content-Security-Policy\"");
        if (csp && csp < next) {
            fputs(report_csp, out);
        } else if (ref_name(line, "<link rel=\"stylesheet\" href=\"", "\">", name, sizeof name)) {
            if (inline_file(dir, name, 0, out) != 0)
                goto out;
        } else if (ref_name(line, "<title>", "</title>", name, sizeof name)) {
            fputs("<title>memtrace: ", out);
            for (int i = 0; i < n; i++) {
                put_escaped_attr(base_name(files[i]), out);
                fputs(i + 1 < n ? ", " : "", out);
            }
            fputs("</title>\n", out);
        } else if (ref_name(line, "<script src=\"", "\"></script>", name, sizeof name)) {
            /* The data goes before the first script, so that app.js finds it. */
            for (int i = 0; !embedded && i < n; i++)
                if (embed(files[i], out) != 0)
                    goto out;
            embedded = 1;
            if (inline_file(dir, name, 1, out) != 0)
                goto out;
        } else {
            fwrite(line, 1, (size_t)(next - line), out);
        }
    }
    ret = 0;
out:
    free(page);
    return ret;
}

int cli_cmd_html(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    output = NULL;
    force = 0;
    int rc = cli_options_parse(argc, argv, &html_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (npos == 0)
        return cli_usage_error("html", "'html' needs at least one FILE");
    char dir[4096];
    if (cli_web_dir(dir, sizeof dir) != 0 || cli_web_check_files(pos, npos) != 0)
        return CLI_EXIT_FAIL;
    FILE *out = stdout;
    struct cli_output co;
    int to_file = output && strcmp(output, "-") != 0;
    if (to_file) {
        if (cli_output_open(&co, output, force, pos, npos) != 0)
            return CLI_EXIT_FAIL;
        out = co.f;
    }
    rc = write_page(dir, pos, npos, out) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    if (to_file && cli_output_close(&co, rc == CLI_EXIT_OK) != 0)
        rc = CLI_EXIT_FAIL;
    return rc;
}
