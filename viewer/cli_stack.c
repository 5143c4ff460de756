/* cli_stack.c: stacks and frames as text and JSON. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

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
    if (n >= 0 && (size_t)n < size && file && file[0]) {
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

static int stack_frames(const struct memtrace_reader *r, uint32_t stack, int depth, uint32_t *ids,
                        int *total)
{
    int max = depth < 0 || depth > MT_STACK_MAX ? MT_STACK_MAX : depth;
    *total = stack ? memtrace_reader_stack(r, stack, ids, max) : 0;
    return *total < max ? *total : max;
}

void cli_stack_print(FILE *f, const struct memtrace_reader *r, uint32_t stack, int depth,
                    const char *indent)
{
    static uint32_t ids[MT_STACK_MAX];
    int total;
    int n = stack_frames(r, stack, depth, ids, &total);
    if (total == 0) {
        fprintf(f, "%s(no stack)\n", indent);
        return;
    }
    for (int k = 0; k < n; k++) {
        const struct memtrace_frame *fr = memtrace_reader_frame(r, ids[k]);
        char text[1200];
        if (fr)
            fprintf(f, "%s#%-2d %s\n", indent, k, cli_frame_text(text, sizeof(text), fr));
        else
            fprintf(f, "%s#%-2d (unknown frame %u)\n", indent, k, (unsigned)ids[k]);
    }
    if (total > n)
        fprintf(f, "%s... %d more frames\n", indent, total - n);
}

json_t *cli_stack_json(const struct memtrace_reader *r, uint32_t stack, int depth)
{
    static uint32_t ids[MT_STACK_MAX];
    int total;
    int n = stack_frames(r, stack, depth, ids, &total);
    json_t *arr = json_array();
    for (int k = 0; k < n; k++) {
        const struct memtrace_frame *fr = memtrace_reader_frame(r, ids[k]);
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(ids[k]));
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
