/* files-t: peak, leaks and timeline given several files (viewer/cli_files.c): each
 * file's own figures, the rank of its metadata, and the totals. */
#include "config.h"

#include <inttypes.h>

#include "cli-util.h"

enum { NF = 3 };

/* File k (rank 10 + k): blocks of 1000 * (k + 1) bytes at 8 addresses, then the
 * first 5 freed: peak 8 blocks, 3 left alive. */
static void write_rank_file(const char *path, int k)
{
    struct memtrace_event ev[13];
    memset(ev, 0, sizeof(ev));
    for (int i = 0; i < 8; i++)
        ev[i] = (struct memtrace_event){.action = MEMTRACE_ALLOC,
                                        .time_ns = 1000 + 10 * (uint64_t)i,
                                        .addr = 0x10000 * (uint64_t)(i + 1),
                                        .size = 1000 * (uint64_t)(k + 1)};
    for (int i = 0; i < 5; i++)
        ev[8 + i] = (struct memtrace_event){.action = MEMTRACE_FREE_COMPLETED,
                                            .time_ns = 2000 + 10 * (uint64_t)i,
                                            .addr = 0x10000 * (uint64_t)(i + 1)};
    char meta[64];
    snprintf(meta, sizeof(meta), "{\"rank\": %d}", 10 + k);
    struct mt_writer *w;
    cli_check(mt_writer_open(&w, path, MT_WRITER_OVERWRITE), "mt_writer_open");
    cli_check(mt_writer_meta(w, meta), "mt_writer_meta");
    cli_check(mt_writer_events(w, ev, 13), "mt_writer_events");
    cli_check(mt_writer_end(w, "{}"), "mt_writer_end");
}

int main(void)
{
    cli_scratch();
    static char paths[NF][512];
    for (int k = 0; k < NF; k++) {
        char name[32];
        snprintf(name, sizeof(name), "rank%d.memtrace", k);
        snprintf(paths[k], sizeof(paths[k]), "%s", cli_path(name));
        write_rank_file(paths[k], k);
    }
    static const char *const cmds[] = {"peak", "leaks", "timeline"};
    for (int c = 0; c < 3; c++) {
        const char *args[] = {cmds[c], "--json", paths[0], paths[1], paths[2], NULL};
        struct cli_out o = cli_run(args);
        is_int(0, o.status, "%s of %d files: exit 0", cmds[c], NF);
        json_t *j = cli_json(&o);
        json_t *files = cli_get(j, "files");
        is_int(NF, (long long)json_array_size(files), "%s: one object per file", cmds[c]);
        long long want_total = 0;
        int ranks = 0, bytes = 0;
        for (int k = 0; k < NF; k++) {
            json_t *f = json_array_get(files, (size_t)k);
            ranks += cli_int(f, "rank") == 10 + k;
            /* peak: 8 blocks; leaks: the 3 left; timeline: its peak of allocated. */
            long long want = (c == 1 ? 3 : 8) * 1000LL * (k + 1);
            long long got = c == 0 ? cli_int(f, "bytes")
                            : c == 1
                                ? cli_int(f, "bytes")
                                : cli_int(json_array_get(cli_get(f, "series"), 0), "peak_bytes");
            bytes += got == want;
            want_total += want;
        }
        is_int(NF, ranks, "%s: each file's object carries the rank of its metadata", cmds[c]);
        is_int(NF, bytes, "%s: each file's own figure", cmds[c]);
        is_int(want_total, cli_int(j, "total.bytes"), "%s: the total adds the files' figures",
               cmds[c]);
        is_int(3 * 13, cli_int(j, "total.events"), "%s: and their events", cmds[c]);
        json_decref(j);
        cli_free(&o);
    }
    const char *args[] = {"leaks", "--bytes", paths[0], paths[1], paths[2], NULL};
    struct cli_out o = cli_run(args);
    char line[1024];
    cli_line(o.out, "    11 ", line, sizeof(line));
    ok(strstr(line, " 6000 B ") && strstr(line, paths[1]),
       "leaks text: rank 11's line has its 6000 bytes alive and its file: %s", line);
    cli_line(o.out, "          ", line, sizeof(line));
    ok(strstr(line, " 18000 B ") && strstr(line, "total"), "leaks text: the total line: %s", line);
    int heads = 0;
    for (const char *p = o.out; (p = strstr(p, "==> ")) != NULL; p++)
        heads++;
    is_int(NF, heads, "leaks text: each file's own report under a heading");
    cli_free(&o);
    const char *csv[] = {"timeline", "--format", "csv", paths[0], paths[1], NULL};
    o = cli_run(csv);
    is_int(2, o.status, "timeline --format csv of two files: a usage error");
    cli_free(&o);
    done_testing();
    return exit_status();
}
