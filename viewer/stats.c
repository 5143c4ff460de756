/* stats.c: `memtrace stats FILE`: the caching allocator's statistics, as PyTorch's
 * torch.cuda.memory_stats() names them, computed from the events.
 *
 * One pass over the shared replay model (snapshot/replay.h): each figure moves with
 * what the event did (rp->eff). The one figure that needs blocks placed in their
 * segments, inactive_split_bytes, keeps the live segments sorted by address with
 * their active bytes; it grows with live segments, never with events. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "replay.h"

static int json;
static struct cli_filter_opts fo;

static const struct cli_opt stats_opts[] = {
    CLI_OPTION_BOOL('j', "json", &json,
                    "print one JSON object with PyTorch's key names (\"allocated_bytes.all."
                    "current\", ...)"),
    CLI_OPTION_BOOL(0, "bytes", &cli_exact_bytes, "print sizes in bytes, not in KiB/MiB/GiB"),
    CLI_FILTER_OPTIONS(&fo),
    CLI_OPTION_END,
};

static const struct cli_help stats_help = {
    "stats",
    "memtrace stats FILE [--json] [--bytes] [filters]",
    "Replays FILE and prints the allocator's statistics as torch.cuda.memory_stats()\n"
    "defines them, each with its current value (at the end), peak, total allocated\n"
    "and total freed, for all pools and per pool (an event's pool 1: small_pool,\n"
    "2: large_pool):\n"
    "  allocation, allocated_bytes, requested_bytes: blocks from 'alloc' until their\n"
    "    'free_requested' (or 'free_completed' when no free was requested);\n"
    "  active, active_bytes: blocks from 'alloc' until 'free_completed' (a block\n"
    "    whose free waits on a stream stays active);\n"
    "  segment, reserved_bytes: 'segment_alloc' and 'segment_map' pieces until\n"
    "    'segment_free' or 'segment_unmap';\n"
    "  inactive_split_bytes: in each segment holding an active block, the bytes no\n"
    "    active block holds (memory that cannot be given back to the device); its\n"
    "    totals are the sums of its rises and falls, lower than an allocator's own,\n"
    "    which count each free block as it is split and merged;\n"
    "  num_ooms: 'oom' events; num_device_alloc, num_device_free: segment events.\n"
    "Peaks and totals count events inside the --from/--to window. Not in the events,\n"
    "so not shown: num_alloc_retries, num_sync_all_streams, inactive_split (the count)\n"
    "and the oversize figures. The allocator's settings come from the file's\n"
    "metadata. Files from several devices are summed unless --device picks one.",
    stats_opts,
    0,
};

enum { ALL, SMALL, LARGE, NPOOL };
static const char *const pool_key[NPOOL] = {"all", "small_pool", "large_pool"};

enum {
    S_ALLOCATION,
    S_SEGMENT,
    S_ACTIVE,
    S_ALLOCATED_BYTES,
    S_RESERVED_BYTES,
    S_ACTIVE_BYTES,
    S_INACTIVE_SPLIT_BYTES,
    S_REQUESTED_BYTES,
    NSTAT
};
static const char *const stat_key[NSTAT] = {
    "allocation",           "segment",        "active",
    "allocated_bytes",      "reserved_bytes", "active_bytes",
    "inactive_split_bytes", "requested_bytes"};

struct stat {
    uint64_t current, peak, allocated, freed;
};

/* A live segment piece, with the active blocks that start inside it. */
struct seg {
    uint64_t addr, size, act_bytes, act_count;
    int32_t pool;
};

struct stats {
    struct stat s[NSTAT][NPOOL];
    uint64_t num_ooms, num_device_alloc, num_device_free;
    struct seg *seg;
    size_t nseg, cap;
    int in_window, nomem, initial;
    const struct mt_replay *rp; /* for the seeding hook */
};

/* With st->initial set, a rise is no allocation: memory live before the first event
 * (docs/REPLAY.md, rule 0) is in the current and peak figures, not the totals. */
static void update(struct stats *st, int stat, int32_t pool, int64_t delta)
{
    int p2 = pool == 1 ? SMALL : pool == 2 ? LARGE : -1;
    for (int k = 0; k < 2; k++) {
        int p = k == 0 ? ALL : p2;
        if (p < 0)
            continue;
        struct stat *s = &st->s[stat][p];
        if (delta >= 0) {
            s->current += (uint64_t)delta;
            if (st->in_window) {
                if (!st->initial)
                    s->allocated += (uint64_t)delta;
                if (s->current > s->peak)
                    s->peak = s->current;
            }
        } else {
            uint64_t d = (uint64_t)-delta;
            s->current = s->current >= d ? s->current - d : 0;
            if (st->in_window)
                s->freed += d;
        }
    }
}

/* Index of the last segment starting at or before addr, or nseg when none. */
static size_t seg_find(const struct stats *st, uint64_t addr)
{
    size_t lo = 0, hi = st->nseg;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->seg[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? st->nseg : lo - 1;
}

static int64_t split_bytes(const struct seg *g)
{
    return g->act_count && g->size > g->act_bytes ? (int64_t)(g->size - g->act_bytes) : 0;
}

/* A segment's active figures change: its inactive split bytes follow. */
static void seg_change(struct stats *st, struct seg *g, int64_t bytes, int64_t count)
{
    int64_t before = split_bytes(g);
    g->act_bytes += (uint64_t)bytes;
    g->act_count += (uint64_t)count;
    int64_t after = split_bytes(g);
    if (after != before)
        update(st, S_INACTIVE_SPLIT_BYTES, g->pool, after - before);
}

static void block_active(struct stats *st, const struct mt_live *b, int sign)
{
    update(st, S_ACTIVE, b->pool, sign);
    update(st, S_ACTIVE_BYTES, b->pool, sign * (int64_t)b->size);
    size_t k = seg_find(st, b->head.key);
    if (k < st->nseg && b->head.key < st->seg[k].addr + st->seg[k].size)
        seg_change(st, &st->seg[k], sign * (int64_t)b->size, sign);
}

static void block_allocated(struct stats *st, const struct mt_live *b, int sign)
{
    update(st, S_ALLOCATION, b->pool, sign);
    update(st, S_ALLOCATED_BYTES, b->pool, sign * (int64_t)b->size);
    update(st, S_REQUESTED_BYTES, b->pool, sign * (int64_t)b->requested);
}

static void seg_remove_at(struct stats *st, size_t k)
{
    struct seg *g = &st->seg[k];
    int64_t split = split_bytes(g);
    if (split)
        update(st, S_INACTIVE_SPLIT_BYTES, g->pool, -split);
    update(st, S_SEGMENT, g->pool, -1);
    memmove(g, g + 1, (st->nseg - k - 1) * sizeof(*g));
    st->nseg--;
}

static void seg_insert(struct stats *st, const struct mt_live *e)
{
    if (st->nseg == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 64;
        struct seg *s = realloc(st->seg, cap * sizeof(*s));
        if (!s) {
            st->nomem = 1;
            return;
        }
        st->seg = s;
        st->cap = cap;
    }
    size_t k = seg_find(st, e->head.key);
    k = k == st->nseg ? 0 : k + 1;
    memmove(&st->seg[k + 1], &st->seg[k], (st->nseg - k) * sizeof(*st->seg));
    st->seg[k] = (struct seg){.addr = e->head.key, .size = e->size, .pool = e->pool};
    st->nseg++;
}

/* After a segment_free or segment_unmap of [lo, hi): pieces the model no longer
 * holds go (one segment each); a piece unmapped in part lives on at hi, where the
 * model put it, and stays one segment. */
static void seg_removed(struct stats *st, const struct mt_replay *rp, uint64_t lo, uint64_t hi)
{
    size_t k = seg_find(st, lo);
    if (k == st->nseg || st->seg[k].addr != lo)
        return;
    while (k < st->nseg && st->seg[k].addr < hi) {
        struct seg *g = &st->seg[k];
        if (mt_addrtab_find(&rp->segs, g->addr)) {
            k++;
            continue;
        }
        const struct mt_live *rest = mt_addrtab_find(&rp->segs, hi);
        if (g->addr + g->size > hi && rest && rest->counted) {
            int64_t before = split_bytes(g);
            g->size -= hi - g->addr;
            g->addr = hi;
            int64_t after = split_bytes(g);
            if (after != before)
                update(st, S_INACTIVE_SPLIT_BYTES, g->pool, after - before);
            break;
        }
        seg_remove_at(st, k);
    }
}

/* The replay's hook for an entry live before the first event. */
static void initial(void *ctx, const struct mt_live *e, int is_seg)
{
    struct stats *st = ctx;
    st->in_window = st->rp->in_window; /* a peak counts inside the window, as the model's */
    st->initial = 1;
    if (is_seg) {
        update(st, S_SEGMENT, e->pool, 1);
        update(st, S_RESERVED_BYTES, e->pool, (int64_t)e->size);
        seg_insert(st, e);
    } else {
        if (!e->pending)
            block_allocated(st, e, 1);
        block_active(st, e, 1);
    }
    st->initial = 0;
}

static void apply(struct stats *st, const struct mt_replay *rp)
{
    const struct mt_effect *eff = &rp->eff;
    const struct memtrace_event *ev = rp->ev;
    st->in_window = rp->in_window;
    switch (eff->kind) {
    case MT_EFF_ALLOC: {
        if (eff->replaced && eff->gone.counted) {
            if (!eff->gone.pending)
                block_allocated(st, &eff->gone, -1);
            block_active(st, &eff->gone, -1);
        }
        const struct mt_live *b = mt_addrtab_find(&rp->blocks, ev->addr);
        if (b && b->counted) {
            block_allocated(st, b, 1);
            block_active(st, b, 1);
        }
        break;
    }
    case MT_EFF_PENDING:
        if (eff->bytes)
            block_allocated(st, &eff->gone, -1);
        break;
    case MT_EFF_FREE:
        if (eff->gone.counted) {
            if (!eff->gone.pending)
                block_allocated(st, &eff->gone, -1);
            block_active(st, &eff->gone, -1);
        }
        break;
    case MT_EFF_SEG_ADD: {
        if (eff->replaced && eff->gone.counted) {
            update(st, S_RESERVED_BYTES, eff->gone.pool, -(int64_t)eff->gone.size);
            size_t k = seg_find(st, ev->addr);
            if (k < st->nseg && st->seg[k].addr == ev->addr)
                seg_remove_at(st, k);
        }
        const struct mt_live *g = mt_addrtab_find(&rp->segs, ev->addr);
        if (g && g->counted) {
            st->num_device_alloc++;
            update(st, S_SEGMENT, g->pool, 1);
            update(st, S_RESERVED_BYTES, g->pool, (int64_t)g->size);
            seg_insert(st, g);
        }
        break;
    }
    case MT_EFF_SEG_REMOVE:
        if (eff->gone.counted) {
            st->num_device_free++;
            update(st, S_RESERVED_BYTES, eff->gone.pool, -(int64_t)eff->bytes);
            uint64_t span = ev->action == MEMTRACE_SEGMENT_UNMAP ? ev->size : eff->gone.size;
            seg_removed(st, rp, ev->addr, ev->addr + span);
        }
        break;
    default:
        if (ev->action == MEMTRACE_OOM && rp->in_window &&
            (!rp->filter.has_device || ev->device == rp->filter.device))
            st->num_ooms++;
        break;
    }
}

static json_t *settings(const struct mt_replay *rp)
{
    const char *text = memtrace_reader_meta(rp->r);
    json_t *meta = text ? json_loads(text, 0, NULL) : NULL;
    json_t *s = json_object_get(meta, "allocator_settings");
    json_t *out = s ? json_incref(s) : NULL;
    json_decref(meta);
    return out;
}

static int print_json(const char *path, const struct stats *st, json_t *set)
{
    char key[96];
    json_t *j = json_object();
    json_object_set_new(j, "file", cli_json_str(path));
    for (int s = 0; s < NSTAT; s++)
        for (int p = 0; p < NPOOL; p++) {
            static const char *const field[4] = {"current", "peak", "allocated", "freed"};
            const struct stat *v = &st->s[s][p];
            const uint64_t f[4] = {v->current, v->peak, v->allocated, v->freed};
            for (int k = 0; k < 4; k++) {
                snprintf(key, sizeof(key), "%s.%s.%s", stat_key[s], pool_key[p], field[k]);
                json_object_set_new(j, key, cli_json_u64(f[k]));
            }
        }
    json_object_set_new(j, "num_ooms", cli_json_u64(st->num_ooms));
    json_object_set_new(j, "num_device_alloc", cli_json_u64(st->num_device_alloc));
    json_object_set_new(j, "num_device_free", cli_json_u64(st->num_device_free));
    json_object_set_new(j, "allocator_settings", set ? json_incref(set) : json_null());
    return cli_json_print(j);
}

static const char *cell(char *buf, size_t size, uint64_t v, int bytes)
{
    if (bytes)
        return cli_fmt_bytes(buf, size, v);
    snprintf(buf, size, "%" PRIu64, v);
    return buf;
}

static void print_text(const char *path, const struct stats *st, json_t *set)
{
    static const struct {
        const char *label;
        int stat, bytes;
    } rows[] = {
        {"Allocated memory", S_ALLOCATED_BYTES, 1},
        {"Active memory", S_ACTIVE_BYTES, 1},
        {"Requested memory", S_REQUESTED_BYTES, 1},
        {"Reserved memory", S_RESERVED_BYTES, 1},
        {"Non-releasable memory", S_INACTIVE_SPLIT_BYTES, 1},
        {"Allocations", S_ALLOCATION, 0},
        {"Active allocs", S_ACTIVE, 0},
        {"Reserved segments", S_SEGMENT, 0},
    };
    static const char *const sub[NPOOL] = {"", "      from small pool", "      from large pool"};
    const char *rule =
        "|==========================================================================="
        "======|\n";
    const char *line =
        "|---------------------------------------------------------------------------"
        "------|\n";
    char a[64], b[64], c[64], d[64];
    fputs(rule, stdout);
    printf("| %-79s |\n", "memory statistics of the caching allocator");
    printf("| %-79.79s |\n", path);
    fputs(line, stdout);
    snprintf(a, sizeof(a), "OOMs: %" PRIu64, st->num_ooms);
    snprintf(b, sizeof(b), "device allocs: %" PRIu64 ", frees: %" PRIu64, st->num_device_alloc,
             st->num_device_free);
    printf("| %-30s | %-46s |\n", a, b);
    fputs(rule, stdout);
    printf("| %-22s | %12s | %12s | %12s | %12s |\n", "Metric", "Cur Usage", "Peak Usage",
           "Tot Alloc", "Tot Freed");
    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        fputs(line, stdout);
        for (int p = ALL; p < NPOOL; p++) {
            const struct stat *v = &st->s[rows[r].stat][p];
            printf("| %-22s | %12s | %12s | %12s | %12s |\n", p == ALL ? rows[r].label : sub[p],
                   cell(a, sizeof(a), v->current, rows[r].bytes),
                   cell(b, sizeof(b), v->peak, rows[r].bytes),
                   cell(c, sizeof(c), v->allocated, rows[r].bytes),
                   cell(d, sizeof(d), v->freed, rows[r].bytes));
        }
    }
    fputs(rule, stdout);
    if (set) {
        char *text = json_dumps(set, JSON_COMPACT | JSON_SORT_KEYS);
        printf("allocator settings: %s\n", text ? text : "?");
        free(text);
    } else {
        printf("allocator settings: not in the file's metadata\n");
    }
}

static void take_level(struct stat *s, const struct mt_level *l)
{
    s->current = l->cur;
    s->peak = l->peak;
}

int cli_cmd_stats(int argc, char **argv)
{
    char *pos[argc + 1];
    int npos;
    int rc = cli_options_parse(argc, argv, &stats_help, pos, &npos);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (npos == 0)
        return cli_usage_error("stats", "'stats' needs a FILE argument");
    if (npos > 1)
        return cli_usage_error("stats", "'stats' takes one file, got '%s' and '%s'", pos[0],
                               pos[1]);
    struct mt_filter f;
    if ((rc = cli_filter_from_opts("stats", &fo, 1, &f)) != 0)
        return rc;
    struct mt_replay *rp = cli_replay_open_cli(pos[0], &f);
    if (!rp)
        return CLI_EXIT_FAIL;
    struct stats st;
    memset(&st, 0, sizeof(st));
    st.rp = rp;
    rp->on_initial = initial;
    rp->on_initial_ctx = &st;
    struct cli_progress prog;
    cli_progress_init(&prog, rp->r, "stats", 0);
    while ((rc = mt_replay_next(rp)) == 1) {
        cli_progress_update(&prog, rp->events);
        apply(&st, rp);
        if (st.nomem) {
            rc = MEMTRACE_ENOMEM;
            break;
        }
    }
    cli_progress_done(&prog);
    int status;
    if (rc == MEMTRACE_ENOMEM && memtrace_reader_error(rp->r)->code == 0) {
        cli_error("out of memory while replaying %s", rp->path);
        status = CLI_EXIT_FAIL;
    } else {
        status = cli_replay_done_cli(rp, rc);
    }
    if (status == CLI_EXIT_OK) {
        /* The model's own levels for all pools: the same rules, kept in one place. */
        take_level(&st.s[S_ALLOCATED_BYTES][ALL], &rp->in_use);
        take_level(&st.s[S_ACTIVE_BYTES][ALL], &rp->allocated);
        take_level(&st.s[S_RESERVED_BYTES][ALL], &rp->reserved);
        json_t *set = settings(rp);
        if (json) {
            status = print_json(pos[0], &st, set);
        } else {
            print_text(pos[0], &st, set);
        }
        json_decref(set);
    }
    free(st.seg);
    mt_replay_close(rp);
    return status;
}
