/* cli_stack.c: stacks and frames as text and JSON. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "frames.h"

/* The frame's names are the recorded program's: escaped (cli_escape), so that a name
 * with control characters cannot act on the terminal that shows it. */
const char *cli_frame_text(char *buf, size_t size, const struct memtrace_frame *fr)
{
    char *sym = cli_escape(fr->symbol, 0), *mod = cli_escape(fr->module, 0);
    char *file = cli_escape(fr->file, 0);
    int n;
    if (sym && sym[0])
        n = snprintf(buf, size, "%s", sym);
    else if (mod && mod[0])
        n = snprintf(buf, size, "%s+0x%" PRIx64, mod, fr->offset);
    else
        n = snprintf(buf, size, "0x%" PRIx64, fr->ip);
    if (n >= 0 && (size_t)n < size && file && file[0] && strcmp(file, "??") != 0) {
        if (fr->line)
            snprintf(buf + n, size - (size_t)n, " at %s:%u", file, (unsigned)fr->line);
        else
            snprintf(buf + n, size - (size_t)n, " at %s", file);
    }
    free(sym);
    free(mod);
    free(file);
    return buf;
}

#define MT_STACK_MAX 4096

int cli_all_frames;

/* The frames of stack to show, innermost first: those frames.c shows (all with
 * --all-frames), the first depth of them (depth < 0: all) and then up to depth
 * Python frames more, so that a deep native stack does not hide the program's lines.
 * ids gets them, where their places in the whole stack, seq their places among the
 * frames shown (a gap there is frames left out by depth); *total the stack's depth,
 * *shown how many frames.c shows and *hidden how many it hid (of the first
 * MT_STACK_MAX: those past it count as shown). */
static int stack_frames(const struct memtrace_reader *r, uint32_t stack, int depth, uint32_t *ids,
                        int *where, int *seq, int *total, int *shown, int *hidden)
{
    int full = stack ? memtrace_reader_stack(r, stack, ids, MT_STACK_MAX) : 0;
    int n = full > MT_STACK_MAX ? MT_STACK_MAX : full;
    *total = full;
    int m = n;
    if (cli_all_frames) {
        for (int k = 0; k < n; k++)
            where[k] = k;
    } else {
        m = mt_stack_shown(r, ids, n, where);
    }
    *shown = m + (full - n); /* frames past MT_STACK_MAX count as shown */
    *hidden = n - m;
    int kept = 0, python = 0;
    for (int k = 0; k < m; k++) {
        int keep = depth < 0 || k < depth;
        if (!keep && python < depth && mt_frame_is_python(memtrace_reader_frame(r, ids[k]))) {
            keep = 1;
            python++;
        }
        if (keep) {
            ids[kept] = ids[k];
            where[kept] = where[k];
            seq[kept++] = k;
        }
    }
    return kept;
}

/* "(34 frames hidden: 6 capture, 12 dispatch, 13 interpreter, 3 start; ...)": how many
 * frames of each kind of frames.c the stack left out. */
static void print_hidden(FILE *f, const struct memtrace_reader *r, uint32_t stack, int hidden,
                         const char *indent)
{
    static uint32_t ids[MT_STACK_MAX];
    int n = memtrace_reader_stack(r, stack, ids, MT_STACK_MAX);
    int count[MT_FRAME_KINDS] = {0};
    for (int k = 0; k < n && k < MT_STACK_MAX; k++)
        count[mt_frame_kind(memtrace_reader_frame(r, ids[k]))]++;
    fprintf(f, "%s(%d frame%s hidden:", indent, hidden, hidden == 1 ? "" : "s");
    const char *sep = " ";
    for (int kind = MT_FRAME_SHOWN + 1; kind < MT_FRAME_KINDS; kind++)
        if (count[kind]) {
            fprintf(f, "%s%d %s", sep, count[kind], mt_frame_kind_name(kind));
            sep = ", ";
        }
    fprintf(f, "; --all-frames shows them)\n");
}

void cli_stack_print(FILE *f, const struct memtrace_reader *r, uint32_t stack, int depth,
                     const char *indent)
{
    static uint32_t ids[MT_STACK_MAX];
    static int where[MT_STACK_MAX], seq[MT_STACK_MAX];
    int total, shown, hidden;
    int n = stack_frames(r, stack, depth, ids, where, seq, &total, &shown, &hidden);
    if (total == 0) {
        fprintf(f, "%s(no stack)\n", indent);
        return;
    }
    for (int k = 0; k < n; k++) {
        int gap = seq[k] - (k ? seq[k - 1] + 1 : 0);
        if (gap > 0)
            fprintf(f, "%s... %d more frame%s\n", indent, gap, gap == 1 ? "" : "s");
        const struct memtrace_frame *fr = memtrace_reader_frame(r, ids[k]);
        char text[1200];
        if (fr)
            fprintf(f, "%s#%-2d %s\n", indent, where[k], cli_frame_text(text, sizeof(text), fr));
        else
            fprintf(f, "%s#%-2d (unknown frame %u)\n", indent, where[k], (unsigned)ids[k]);
    }
    int rest = shown - (n ? seq[n - 1] + 1 : 0);
    if (rest > 0)
        fprintf(f, "%s... %d more frame%s\n", indent, rest, rest == 1 ? "" : "s");
    if (hidden)
        print_hidden(f, r, stack, hidden, indent);
}

json_t *cli_stack_json(const struct memtrace_reader *r, uint32_t stack, int depth)
{
    static uint32_t ids[MT_STACK_MAX];
    static int where[MT_STACK_MAX], seq[MT_STACK_MAX];
    int total, shown, hidden;
    int n = stack_frames(r, stack, depth, ids, where, seq, &total, &shown, &hidden);
    json_t *arr = json_array();
    for (int k = 0; k < n; k++) {
        const struct memtrace_frame *fr = memtrace_reader_frame(r, ids[k]);
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(ids[k]));
        json_object_set_new(o, "index", json_integer(where[k]));
        if (fr) {
            char ip[32];
            snprintf(ip, sizeof(ip), "0x%" PRIx64, fr->ip);
            json_object_set_new(o, "ip", json_string(ip));
            json_object_set_new(o, "symbol", cli_json_str(fr->symbol));
            json_object_set_new(o, "module", cli_json_str(fr->module));
            json_object_set_new(o, "offset", cli_json_u64(fr->offset));
            json_object_set_new(o, "file", cli_json_str(fr->file));
            json_object_set_new(o, "line", json_integer(fr->line));
        }
        json_array_append_new(arr, o);
    }
    return arr;
}

int cli_stack_hidden(const struct memtrace_reader *r, uint32_t stack)
{
    static uint32_t ids[MT_STACK_MAX];
    static int where[MT_STACK_MAX], seq[MT_STACK_MAX];
    int total, shown, hidden;
    stack_frames(r, stack, -1, ids, where, seq, &total, &shown, &hidden);
    return hidden;
}
