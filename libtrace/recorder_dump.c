/* recorder_dump.c: memtrace_dump_snapshot, the history written to a file at once.
 * Owns no state: it reads the ring, the metadata, the tables and the providers'
 * state through their modules. */
#include "config.h"

#include "recorder_impl.h"

#include "before.h"
#include "memtrace.h"
#include "writer.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#define DUMP_CHUNK_EVENTS 65536u

int memtrace_dump_snapshot(const char *path)
{
    if (path == NULL || *path == '\0')
        return MEMTRACE_EINVAL;
    struct memtrace_event snap = {.action = MEMTRACE_SNAPSHOT, .device = -1};
    memtrace_record_event(&snap);

    int saved_busy = mt_ring_set_busy(1);
    struct mt_xfsz x;
    mt_xfsz_hold(&x);
    struct mt_writer *w = NULL;
    struct memtrace_event *ev = NULL;
    size_t n = 0;
    struct mt_table_marks marks = {0};
    struct mt_state_now fin = {0};
    char *m = NULL, *end = NULL;
    int rc = mt_writer_open(&w, path, MT_WRITER_ATOMIC | mt_output_flags());
    if (rc != 0)
        goto out;
    m = mt_meta_dump(NULL);
    rc = m ? mt_writer_meta(w, m) : MEMTRACE_ENOMEM;
    if (rc != 0)
        goto out;
    /* The state first: a block it holds that the history does not show allocated was
     * live before the history's first event (docs/REPLAY.md, rule 0). */
    if ((rc = mt_state_now(&fin)) != 0)
        goto out;
    mt_rlock();
    ev = mt_ring_copy(&n);
    mt_runlock();
    if (ev == NULL) {
        rc = MEMTRACE_ENOMEM;
        goto out;
    }
    rc = mt_tables_write(w, &marks);
    if (rc == 0 && n > 0) {
        struct mt_before *b = mt_before_new();
        rc = b ? 0 : MEMTRACE_ENOMEM;
        for (size_t i = 0; rc == 0 && i < n; i++)
            rc = mt_before_event(b, &ev[i]);
        if (rc == 0)
            rc = mt_state_before_write(w, &marks, b, ev[0].time_ns, &fin);
        mt_before_free(b);
    }
    for (size_t i = 0; rc == 0 && i < n; i += DUMP_CHUNK_EVENTS)
        rc = mt_writer_events(w, ev + i, n - i < DUMP_CHUNK_EVENTS ? n - i : DUMP_CHUNK_EVENTS);
    if (rc == 0)
        rc = mt_state_now_write(w, &marks, &fin);
    end = mt_meta_end_json();
    if (rc == 0 && end == NULL)
        rc = MEMTRACE_ENOMEM;
    if (rc == 0)
        rc = mt_writer_end(w, end);
    else
        mt_writer_abort(w);
    w = NULL;
out:
    if (w != NULL)
        mt_writer_abort(w);
    int e = errno;
    mt_state_now_free(&fin);
    free(ev);
    free(m);
    free(end);
    mt_xfsz_release(&x);
    mt_ring_set_busy(saved_busy);
    errno = e;
    return rc;
}
