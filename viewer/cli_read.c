/* cli_read.c: opening files and replays for the CLI with one-line errors, the
 * truncation warning, and progress on stderr. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "replay.h"
#include "writer.h"

struct memtrace_reader *cli_open(const char *path)
{
    struct memtrace_reader *r = NULL;
    struct memtrace_errinfo err;
    memset(&err, 0, sizeof(err));
    int rc = memtrace_reader_open(&r, path, &err);
    if (rc < 0 || !r) {
        if (err.text[0])
            cli_error("%s", err.text);
        else
            cli_error("%s: %s", path, memtrace_strerror(rc));
        return NULL;
    }
    return r;
}

int cli_read_failed(struct memtrace_reader *r, const char *path)
{
    const struct memtrace_errinfo *e = memtrace_reader_error(r);
    if (e && e->text[0])
        cli_error("%s", e->text);
    else
        cli_error("%s: %s", path, memtrace_strerror(e ? e->code : MEMTRACE_EFORMAT));
    return CLI_EXIT_FAIL;
}

void cli_warn_if_truncated(struct memtrace_reader *r, const char *path, uint64_t events)
{
    if (!memtrace_reader_truncated(r))
        return;
    char n[32];
    cli_error(
        "warning: %s is truncated (no end record): showing the %s events before byte %" PRIu64,
        path, cli_fmt_count(n, sizeof(n), events), memtrace_reader_offset(r));
}

#define MT_PROGRESS_MIN_BYTES (50u * 1000u * 1000u)

struct mt_replay *cli_replay_open_cli(const char *path, const struct mt_filter *f)
{
    struct memtrace_reader *r = cli_open(path);
    struct mt_replay *rp;
    if (!r)
        return NULL;
    if (mt_replay_new(&rp, r, path, f) < 0) {
        cli_error("out of memory while replaying %s", path);
        return NULL;
    }
    return rp;
}

static int replay_done(struct mt_replay *rp, int rc, int warn)
{
    if (rc == MEMTRACE_ENOMEM && memtrace_reader_error(rp->r)->code == 0) {
        cli_error("out of memory while replaying %s", rp->path);
        return CLI_EXIT_FAIL;
    }
    if (rc < 0)
        return cli_read_failed(rp->r, rp->path);
    if (warn)
        cli_warn_if_truncated(rp->r, rp->path, rp->events);
    return cli_window_missed(rp->path, rp->filter.from, mt_replay_window_missed(rp),
                             rp->window_done)
               ? CLI_EXIT_FAIL
               : CLI_EXIT_OK;
}

int cli_replay_done_cli(struct mt_replay *rp, int rc)
{
    return replay_done(rp, rc, 1);
}

int cli_replay_done_again(struct mt_replay *rp, int rc)
{
    return replay_done(rp, rc, 0);
}

int cli_window_missed(const char *path, struct mt_point from, int missed, int closed)
{
    if (!missed)
        return 0;
    char buf[300];
    cli_error("%s: --from %s is not reached before %s: the window is empty", path,
              cli_point_text(buf, sizeof buf, &from), closed ? "--to" : "the end of the file");
    return 1;
}

int cli_replay_run_cli(struct mt_replay *rp, const char *cmd)
{
    struct cli_progress prog;
    cli_progress_init(&prog, rp->r, cmd, 0);
    int rc;
    while ((rc = mt_replay_next(rp)) == 1)
        cli_progress_update(&prog, rp->events);
    cli_progress_done(&prog);
    return cli_replay_done_cli(rp, rc);
}

void cli_progress_init(struct cli_progress *p, struct memtrace_reader *r, const char *label,
                       uint64_t limit_events)
{
    memset(p, 0, sizeof(*p));
    p->r = r;
    p->label = label;
    p->total = memtrace_reader_file_size(r);
    p->limit_events = limit_events;
    p->last_pct = -1;
    p->enabled = p->total > MT_PROGRESS_MIN_BYTES && isatty(STDERR_FILENO);
}

void cli_progress_update(struct cli_progress *p, uint64_t events)
{
    /* Checked every 64Ki events: cheap enough to leave in the read loops. */
    if (!p->enabled || (events & 0xffff) != 0)
        return;
    int pct;
    if (p->limit_events)
        pct = (int)(events * 100 / p->limit_events);
    else
        pct = p->total ? (int)(memtrace_reader_offset(p->r) * 100 / p->total) : 0;
    if (pct > 100)
        pct = 100;
    if (pct == p->last_pct)
        return;
    p->last_pct = pct;
    fprintf(stderr, "\rmemtrace: %s %3d%%", p->label, pct);
    fflush(stderr);
}

void cli_progress_done(struct cli_progress *p)
{
    if (p->enabled && p->last_pct >= 0)
        fputs("\r\033[K", stderr);
    p->last_pct = -1;
}

int cli_output_allowed(const char *path, int force)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    if (S_ISLNK(st.st_mode)) {
        cli_error("%s is a symbolic link: not followed", path);
        return -1;
    }
    if (!force) {
        cli_error("%s exists: not replaced (--force replaces it)", path);
        return -1;
    }
    return 0;
}

int cli_output_open(struct cli_output *o, const char *path, int force, char *const *inputs,
                    int ninputs)
{
    memset(o, 0, sizeof(*o));
    o->path = path;
    o->force = force;
    struct stat so, si;
    int exists = lstat(path, &so) == 0;
    if (exists && S_ISLNK(so.st_mode)) {
        cli_error("%s is a symbolic link: not followed", path);
        return -1;
    }
    if (exists && !force) {
        cli_error("%s exists: not replaced (--force replaces it)", path);
        return -1;
    }
    for (int k = 0; exists && k < ninputs; k++)
        if (stat(inputs[k], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
            cli_error("%s is also an input (%s): not replaced", path, inputs[k]);
            return -1;
        }
    int fd;
    if (exists && !S_ISREG(so.st_mode)) {
        fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    } else {
        size_t len = strlen(path);
        if (!(o->tmp = malloc(len + sizeof ".tmp-XXXXXX"))) {
            cli_error("out of memory");
            return -1;
        }
        memcpy(o->tmp, path, len);
        memcpy(o->tmp + len, ".tmp-XXXXXX", sizeof ".tmp-XXXXXX");
        fd = mkostemp(o->tmp, O_CLOEXEC); /* mode 0600 */
    }
    if (fd >= 0 && (o->f = fdopen(fd, "wb")) != NULL)
        return 0;
    cli_error("cannot create %s: %s", path, strerror(errno));
    if (fd >= 0) {
        close(fd);
        if (o->tmp)
            unlink(o->tmp);
    }
    free(o->tmp);
    o->tmp = NULL;
    return -1;
}

int cli_output_close(struct cli_output *o, int ok)
{
    /* (a failed write sets the stream's error, which fclose need not report) */
    int failed = ferror(o->f);
    failed |= fclose(o->f) != 0;
    if (failed && ok) {
        cli_error("cannot write %s: %s", o->path, strerror(errno));
        ok = 0;
    }
    o->f = NULL;
    if (o->tmp) {
        int r = ok ? mt_rename_into_place(o->tmp, o->path, o->force) : 0;
        if (r == -EEXIST)
            cli_error("%s exists: not replaced (--force replaces it)", o->path);
        else if (r)
            cli_error("cannot put the output at %s: %s", o->path, strerror(-r));
        if (r || !ok)
            unlink(o->tmp);
        ok &= r == 0;
        free(o->tmp);
        o->tmp = NULL;
    }
    return ok ? 0 : -1;
}
