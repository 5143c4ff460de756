/* view.c: `memtrace view FILE...`: serves the web viewer and the FILEs on
 * 127.0.0.1 until SIGINT or SIGTERM.
 *
 * A deliberately small HTTP/1.1 server: GET and HEAD only, one connection at a
 * time, each answered and closed (Connection: close), with time limits on reading
 * and writing. What it serves is a fixed table: the viewer's files by name and each
 * FILE at /files/N/NAME; every other path is 404, so no request reaches any other
 * file, whatever it spells. Requests must name this server in Host (127.0.0.1 or
 * localhost with its port), so that a page elsewhere cannot reach it through a DNS
 * name that points here. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "cli.h"
#include "web.h"

static long long port_opt;

static const struct cli_opt view_opts[] = {
    CLI_OPTION_INT('p', "port", &port_opt, "N", 0, 65535,
                   "listen on port N of 127.0.0.1 (default 0: a free port)"),
    CLI_OPTION_END,
};

static const struct cli_help view_help = {
    "view",
    "memtrace view FILE... [--port N]",
    "Serves the web viewer and the FILEs (.memtrace files, or PyTorch memory\n"
    "snapshots) on 127.0.0.1 and prints the URL to open; Ctrl-C stops it. Only the\n"
    "viewer's own files and the FILEs named here are served, to this machine only.",
    view_opts,
    0,
};

enum { REQ_MAX = 16384, IO_TIMEOUT_S = 10 };

struct served {
    const char *path;  /* on disk */
    char url[512];     /* "/files/N/NAME", percent-encoded */
    char decoded[512]; /* the same, decoded: what requests are matched against */
};

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    stop_signal = sig;
}

static int send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void respond_status(int fd, int code, const char *reason, const char *extra)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n%s\r\n%d %s\n",
                     code, reason, strlen(reason) + 5, extra ? extra : "", code, reason);
    if (n > 0 && (size_t)n < sizeof buf)
        send_all(fd, buf, (size_t)n);
}

static void respond_file(int fd, const char *path, const char *type, int head)
{
    int in = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (in < 0 || fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
        respond_status(fd, 404, "Not Found", NULL);
        if (in >= 0)
            close(in);
        return;
    }
    char buf[65536];
    int n = snprintf(buf, sizeof buf,
                     "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %lld\r\n"
                     "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                     "Connection: close\r\n\r\n",
                     type, (long long)st.st_size);
    if (send_all(fd, buf, (size_t)n) == 0 && !head) {
        ssize_t got;
        while ((got = read(in, buf, sizeof buf)) > 0)
            if (send_all(fd, buf, (size_t)got) != 0)
                break;
    }
    close(in);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes %XX in place; -1 for a malformed escape or a NUL byte. */
static int percent_decode(char *s)
{
    char *o = s;
    for (const char *p = s; *p; p++) {
        if (*p != '%') {
            *o++ = *p;
            continue;
        }
        int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
        if (lo < 0 || (hi == 0 && lo == 0))
            return -1;
        *o++ = (char)(hi << 4 | lo);
        p += 2;
    }
    *o = '\0';
    return 0;
}

static void percent_encode(const char *s, char *out, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (; *s && o + 4 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
}

/* The value of header name in the header block hdrs (lines after the request
 * line), copied into out; 0 if found. */
static int header_value(const char *hdrs, const char *name, char *out, size_t size)
{
    size_t nl = strlen(name);
    for (const char *p = hdrs; p && *p; p = strstr(p, "\r\n") ? strstr(p, "\r\n") + 2 : NULL) {
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t len = strcspn(v, "\r\n");
            while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
                len--;
            if (len >= size)
                return -1;
            memcpy(out, v, len);
            out[len] = '\0';
            return 0;
        }
    }
    return -1;
}

/* Reads the request head (up to the blank line) into req; 0, or an HTTP status to
 * answer with (0 answers nothing: the client went away or was too slow). */
static int read_head(int fd, char *req, size_t size, int *status)
{
    size_t n = 0;
    *status = 0;
    while (n + 1 < size) {
        ssize_t got = recv(fd, req + n, size - 1 - n, 0);
        if (got < 0 && errno == EINTR && !stop_signal)
            continue;
        if (got <= 0)
            return -1;
        n += (size_t)got;
        req[n] = '\0';
        if (strstr(req, "\r\n\r\n"))
            return 0;
    }
    *status = 431;
    return -1;
}

static void serve_one(int fd, int port, const char *webdir, const struct served *files, int nfiles,
                      const char *index_url)
{
    char req[REQ_MAX], host[256], target[REQ_MAX], path[4096];
    int status;
    if (read_head(fd, req, sizeof req, &status) != 0) {
        if (status == 431)
            respond_status(fd, 431, "Request Header Fields Too Large", NULL);
        return;
    }
    char method[16], version[16];
    const char *sp1 = strchr(req, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    const char *eol = strstr(req, "\r\n");
    if (!sp1 || !sp2 || sp2 > eol || (size_t)(sp1 - req) >= sizeof method ||
        (size_t)(eol - sp2 - 1) >= sizeof version) {
        respond_status(fd, 400, "Bad Request", NULL);
        return;
    }
    memcpy(method, req, (size_t)(sp1 - req));
    method[sp1 - req] = '\0';
    memcpy(target, sp1 + 1, (size_t)(sp2 - sp1 - 1));
    target[sp2 - sp1 - 1] = '\0';
    memcpy(version, sp2 + 1, (size_t)(eol - sp2 - 1));
    version[eol - sp2 - 1] = '\0';
    if (strncmp(version, "HTTP/1.", 7) != 0) {
        respond_status(fd, 505, "HTTP Version Not Supported", NULL);
        return;
    }
    int head = strcmp(method, "HEAD") == 0;
    if (!head && strcmp(method, "GET") != 0) {
        respond_status(fd, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n");
        return;
    }
    char want1[64], want2[64];
    snprintf(want1, sizeof want1, "127.0.0.1:%d", port);
    snprintf(want2, sizeof want2, "localhost:%d", port);
    if (header_value(eol + 2, "Host", host, sizeof host) != 0) {
        respond_status(fd, 400, "Bad Request", NULL);
        return;
    }
    if (strcasecmp(host, want1) != 0 && strcasecmp(host, want2) != 0) {
        respond_status(fd, 403, "Forbidden", NULL);
        return;
    }
    target[strcspn(target, "?#")] = '\0';
    if (target[0] != '/' || percent_decode(target) != 0) {
        respond_status(fd, 404, "Not Found", NULL);
        return;
    }
    if (strcmp(target, "/") == 0) {
        char loc[8192];
        int n = snprintf(loc, sizeof loc, "Location: %s\r\n", index_url);
        if (n > 0 && (size_t)n < sizeof loc)
            respond_status(fd, 302, "Found", loc);
        else
            respond_status(fd, 500, "Internal Server Error", NULL);
        return;
    }
    for (int i = 0; i < nfiles; i++)
        if (strcmp(target, files[i].decoded) == 0) {
            respond_file(fd, files[i].path, "application/octet-stream", head);
            return;
        }
    if (!strchr(target + 1, '/') && cli_web_known(target + 1) &&
        cli_web_path(path, sizeof path, webdir, target + 1) == 0) {
        respond_file(fd, path, cli_web_type(target + 1), head);
        return;
    }
    respond_status(fd, 404, "Not Found", NULL);
}

/* Closing with unread bytes from the client would reset the connection and could
 * lose the answer on its way: read what is left (a little, briefly) first. */
static void linger_close(int fd)
{
    char buf[4096];
    struct timeval tv = {.tv_sec = 1};
    shutdown(fd, SHUT_WR);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (int i = 0; i < 16 && recv(fd, buf, sizeof buf, 0) > 0; i++)
        ;
    close(fd);
}

static int listen_local(int port, int *bound)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        cli_error("cannot create a socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        cli_error("cannot listen on 127.0.0.1:%d: %s", port, strerror(errno));
        close(fd);
        return -1;
    }
    *bound = ntohs(a.sin_port);
    return fd;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

int cli_cmd_view(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos, ret = CLI_EXIT_FAIL, lfd = -1, port = 0;
    port_opt = 0;
    int rc = cli_options_parse(argc, argv, &view_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (npos == 0)
        return cli_usage_error("view", "'view' needs at least one FILE");
    char webdir[4096];
    if (cli_web_dir(webdir, sizeof webdir) != 0 || cli_web_check_files(pos, npos) != 0)
        return CLI_EXIT_FAIL;
    struct served *files = calloc((size_t)npos, sizeof *files);
    size_t urlcap = 64 + (size_t)npos * 1610;
    char *index_url = malloc(urlcap);
    if (!files || !index_url) {
        cli_error("out of memory");
        goto out;
    }
    snprintf(index_url, urlcap, "/index.html");
    for (int i = 0; i < npos; i++) {
        char enc[400];
        files[i].path = pos[i];
        percent_encode(base_name(pos[i]), enc, sizeof enc);
        snprintf(files[i].url, sizeof files[i].url, "/files/%d/%s", i, enc);
        snprintf(files[i].decoded, sizeof files[i].decoded, "%s", files[i].url);
        percent_decode(files[i].decoded);
        /* The query holds the path as the page will fetch it, encoded once more. */
        char query[1600];
        percent_encode(files[i].url, query, sizeof query);
        size_t used = strlen(index_url);
        snprintf(index_url + used, urlcap - used, "%sfile=%s", i ? "&" : "?", query);
    }

    /* SIGINT and SIGTERM are blocked but while waiting in ppoll(), so a signal
     * always ends the wait and is never lost between a check and the wait. */
    sigset_t block, orig;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &orig);
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    stop_signal = 0;

    if ((lfd = listen_local((int)port_opt, &port)) < 0)
        goto out;
    printf("http://127.0.0.1:%d/\n", port);
    fflush(stdout);
    cli_error("serving %d file%s and the viewer; open the URL above, Ctrl-C stops", npos,
              npos == 1 ? "" : "s");
    while (!stop_signal) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        int n = ppoll(&p, 1, NULL, &orig);
        if (n < 0 && errno != EINTR) {
            cli_error("waiting for a connection: %s", strerror(errno));
            goto out;
        }
        if (n <= 0 || stop_signal)
            continue;
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0)
            continue;
        struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
        setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        serve_one(cfd, port, webdir, files, npos, index_url);
        linger_close(cfd);
    }
    cli_error("stopped");
    ret = CLI_EXIT_OK;
out:
    if (lfd >= 0)
        close(lfd);
    free(files);
    free(index_url);
    return ret;
}
