/* cli_rank.h: per-stack figures gathered from a replay, ranked, and printed as a
 * table of stacks (text or JSON). peak, leaks, top and flamegraph share it.
 *
 * A rank starts with one row per stack id of the file (so adding to a stack is an
 * index, never a search), then cli_rank_finish() keeps the rows with something in them
 * and sorts them. Memory follows distinct stacks, never events. */
#ifndef MEMTRACE_CLI_RANK_H
#define MEMTRACE_CLI_RANK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "memtrace_snapshot.h"
#include "replay.h"

/* What the rows are ranked (and shares taken) by. */
enum cli_rank_by {
    CLI_RANK_BYTES,     /* bytes, then count */
    CLI_RANK_COUNT,     /* count, then bytes */
    CLI_RANK_TEMPORARY, /* temporary count, then temporary bytes */
};

struct cli_rank_row {
    uint32_t stack;
    uint64_t bytes, count;           /* live (peak, leaks) or allocated in total (top) */
    uint64_t temp_bytes, temp_count; /* temporaries (top) */
};

struct cli_rank {
    struct cli_rank_row *rows;
    size_t n; /* before finish: one per stack id; after: the rows kept, ranked */
    uint64_t bytes, count, temp_bytes, temp_count; /* totals over every row */
};

/* A rank with a row for each stack id of rp's file. 0, or MEMTRACE_ENOMEM. */
int cli_rank_init(struct cli_rank *rk, const struct mt_replay *rp);

/* Adds to the row of stack (ids past the file's table go to stack 0). */
void cli_rank_add(struct cli_rank *rk, uint32_t stack, uint64_t bytes, uint64_t count);

/* Rows from the model's tallies (ts: rp->block_stacks or rp->seg_stacks): what each
 * stack held at the latest peak of l, or what it holds now. */
void cli_rank_at_peak(struct cli_rank *rk, const struct mt_tallies *ts, const struct mt_level *l);
void cli_rank_live(struct cli_rank *rk, const struct mt_tallies *ts);

/* Rows of what each stack allocated in the window: bytes, count, temporaries. */
void cli_rank_allocated(struct cli_rank *rk, const struct mt_tallies *ts);

/* Rows of the entries of tab (rp->blocks or rp->segs) that count under the filter and
 * were made at or after event index since. */
void cli_rank_live_since(struct cli_rank *rk, const struct mt_addrtab *tab, uint64_t since);

/* Keeps the rows whose figure `by` ranks is not zero, sums the totals, sorts them,
 * largest first (ties: the other figure, then the lower stack id). */
void cli_rank_finish(struct cli_rank *rk, int by);

void cli_rank_free(struct cli_rank *rk);

/* How a table prints: the first ntop rows (0: all) with depth frames each (0: all);
 * with temporaries, the temporary figures too. */
struct cli_rank_view {
    const struct memtrace_reader *r;
    size_t ntop;
    int depth;
    int by;
    int temporaries;
};

/* The rows as a numbered text table, each with its frames innermost first. */
void cli_rank_print(FILE *f, const struct cli_rank *rk, const struct cli_rank_view *v);

/* The rows as a JSON array of objects: stack, bytes, count, share (of the total that
 * `by` ranks, 0..1), with temporaries temporary_count and temporary_bytes, then depth
 * (the full one) and frames. */
json_t *cli_rank_json(const struct cli_rank *rk, const struct cli_rank_view *v);

/* Rows shown: ntop (0: all) bounded by the rows kept. */
size_t cli_rank_shown(const struct cli_rank *rk, size_t ntop);

#endif
