/* cli_rank.c: per-stack figures of a replay, ranked and printed (cli_rank.h). */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_rank.h"

int cli_rank_init(struct cli_rank *rk, const struct mt_replay *rp)
{
    memset(rk, 0, sizeof(*rk));
    size_t n = (size_t)memtrace_reader_stack_count(rp->r) + 1;
    rk->rows = calloc(n, sizeof(*rk->rows));
    if (!rk->rows)
        return MEMTRACE_ENOMEM;
    for (size_t k = 0; k < n; k++)
        rk->rows[k].stack = (uint32_t)k;
    rk->n = n;
    return 0;
}

void cli_rank_add(struct cli_rank *rk, uint32_t stack, uint64_t bytes, uint64_t count)
{
    struct cli_rank_row *w = &rk->rows[stack < rk->n ? stack : 0];
    w->bytes += bytes;
    w->count += count;
}

void cli_rank_at_peak(struct cli_rank *rk, const struct mt_tallies *ts, const struct mt_level *l)
{
    for (size_t k = 0; k < ts->n; k++) {
        uint64_t bytes, count;
        mt_tally_at_peak(ts, l, (uint32_t)k, &bytes, &count);
        cli_rank_add(rk, (uint32_t)k, bytes, count);
    }
}

void cli_rank_live(struct cli_rank *rk, const struct mt_tallies *ts)
{
    for (size_t k = 0; k < ts->n; k++)
        cli_rank_add(rk, (uint32_t)k, ts->t[k].live_bytes, ts->t[k].live_count);
}

void cli_rank_allocated(struct cli_rank *rk, const struct mt_tallies *ts)
{
    for (size_t k = 0; k < ts->n; k++) {
        const struct mt_tally *t = &ts->t[k];
        cli_rank_add(rk, (uint32_t)k, t->alloc_bytes, t->alloc_count);
        struct cli_rank_row *w = &rk->rows[k < rk->n ? k : 0];
        w->temp_bytes += t->temp_bytes;
        w->temp_count += t->temp_count;
    }
}

void cli_rank_live_since(struct cli_rank *rk, const struct mt_addrtab *tab, uint64_t since)
{
    for (size_t i = 0; i < tab->cap; i++) {
        const struct mt_live *e = mt_addrtab_at(tab, i);
        if (e && e->counted && e->index >= since)
            cli_rank_add(rk, e->stack, e->size, 1);
    }
}

static int rank_by;

static uint64_t first_key(const struct cli_rank_row *w)
{
    switch (rank_by) {
    case CLI_RANK_COUNT:
        return w->count;
    case CLI_RANK_TEMPORARY:
        return w->temp_count;
    default:
        return w->bytes;
    }
}

static uint64_t second_key(const struct cli_rank_row *w)
{
    switch (rank_by) {
    case CLI_RANK_COUNT:
        return w->bytes;
    case CLI_RANK_TEMPORARY:
        return w->temp_bytes;
    default:
        return w->count;
    }
}

static int row_cmp(const void *pa, const void *pb)
{
    const struct cli_rank_row *a = pa, *b = pb;
    uint64_t ka = first_key(a), kb = first_key(b);
    if (ka != kb)
        return ka > kb ? -1 : 1;
    ka = second_key(a);
    kb = second_key(b);
    if (ka != kb)
        return ka > kb ? -1 : 1;
    return a->stack < b->stack ? -1 : a->stack > b->stack;
}

void cli_rank_finish(struct cli_rank *rk, int by)
{
    size_t kept = 0;
    rank_by = by;
    rk->bytes = rk->count = rk->temp_bytes = rk->temp_count = 0;
    for (size_t k = 0; k < rk->n; k++) {
        const struct cli_rank_row *w = &rk->rows[k];
        rk->bytes += w->bytes;
        rk->count += w->count;
        rk->temp_bytes += w->temp_bytes;
        rk->temp_count += w->temp_count;
        if (first_key(w) != 0)
            rk->rows[kept++] = *w;
    }
    rk->n = kept;
    qsort(rk->rows, rk->n, sizeof(*rk->rows), row_cmp);
}

void cli_rank_free(struct cli_rank *rk)
{
    free(rk->rows);
    memset(rk, 0, sizeof(*rk));
}

size_t cli_rank_shown(const struct cli_rank *rk, size_t ntop)
{
    return ntop == 0 || ntop > rk->n ? rk->n : ntop;
}

static double share(const struct cli_rank *rk, const struct cli_rank_row *w, int by)
{
    uint64_t total = by == CLI_RANK_COUNT       ? rk->count
                     : by == CLI_RANK_TEMPORARY ? rk->temp_count
                                                : rk->bytes;
    uint64_t part = by == CLI_RANK_COUNT       ? w->count
                    : by == CLI_RANK_TEMPORARY ? w->temp_count
                                               : w->bytes;
    return total ? (double)part / (double)total : 0.0;
}

static const char *plural(uint64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

void cli_rank_print(FILE *f, const struct cli_rank *rk, const struct cli_rank_view *v)
{
    size_t shown = cli_rank_shown(rk, v->ntop);
    for (size_t k = 0; k < shown; k++) {
        const struct cli_rank_row *w = &rk->rows[k];
        char a[64], b[64], c[64];
        double pct = 100.0 * share(rk, w, v->by);
        cli_fmt_bytes(a, sizeof(a), w->bytes);
        cli_fmt_count(b, sizeof(b), w->count);
        if (v->by == CLI_RANK_COUNT)
            fprintf(f, "\n%2zu. %s %s (%.1f%%), %s (%" PRIu64 " bytes)", k + 1, b,
                    plural(w->count, "allocation", "allocations"), pct, a, w->bytes);
        else if (v->by == CLI_RANK_TEMPORARY)
            fprintf(f, "\n%2zu. %s temporary (%.1f%%) of %s %s", k + 1,
                    cli_fmt_count(c, sizeof(c), w->temp_count), pct, b,
                    plural(w->count, "allocation", "allocations"));
        else
            fprintf(f, "\n%2zu. %s (%" PRIu64 " bytes, %.1f%%) in %s %s", k + 1, a, w->bytes, pct,
                    b, plural(w->count, "allocation", "allocations"));
        if (v->temporaries && v->by != CLI_RANK_TEMPORARY)
            fprintf(f, ", %s temporary", cli_fmt_count(c, sizeof(c), w->temp_count));
        else if (v->by == CLI_RANK_TEMPORARY)
            fprintf(f, ", %s (%" PRIu64 " bytes) in temporaries",
                    cli_fmt_bytes(c, sizeof(c), w->temp_bytes), w->temp_bytes);
        fprintf(f, ", stack %u\n", (unsigned)w->stack);
        cli_stack_print(f, v->r, w->stack, v->depth, "      ");
    }
}

json_t *cli_rank_json(const struct cli_rank *rk, const struct cli_rank_view *v)
{
    json_t *arr = json_array();
    size_t shown = cli_rank_shown(rk, v->ntop);
    for (size_t k = 0; k < shown; k++) {
        const struct cli_rank_row *w = &rk->rows[k];
        json_t *s = json_object();
        uint32_t none[1];
        json_object_set_new(s, "stack", json_integer(w->stack));
        json_object_set_new(s, "bytes", cli_json_u64(w->bytes));
        json_object_set_new(s, "count", cli_json_u64(w->count));
        if (v->temporaries) {
            json_object_set_new(s, "temporary_count", cli_json_u64(w->temp_count));
            json_object_set_new(s, "temporary_bytes", cli_json_u64(w->temp_bytes));
        }
        json_object_set_new(s, "share", json_real(share(rk, w, v->by)));
        json_object_set_new(
            s, "depth",
            json_integer(w->stack ? memtrace_reader_stack(v->r, w->stack, none, 0) : 0));
        json_object_set_new(s, "hidden_frames", json_integer(cli_stack_hidden(v->r, w->stack)));
        json_object_set_new(s, "frames", cli_stack_json(v->r, w->stack, v->depth));
        json_array_append_new(arr, s);
    }
    return arr;
}
