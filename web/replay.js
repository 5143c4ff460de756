/* replay.js: the replay model of the web viewer, the same rules as `memtrace summary`
 * (viewer/summary.c).
 *
 * Events in file order update live blocks (keyed by address) and live segments:
 * - alloc adds a live block at addr; one already live there is replaced (the recorder
 *   missed its free) and counted as a replaced allocation;
 * - free_completed of a live block removes it; of an unknown address it counts as an
 *   unmatched free; free_requested changes nothing (its time is kept for display);
 * - segment_alloc and segment_map add reserved bytes as a live segment at addr (one
 *   already there is replaced); segment_free removes the segment at addr;
 *   segment_unmap removes size bytes from addr across live pieces and trims a piece
 *   it unmaps only partly (size 0 removes the one piece at addr); either of an
 *   unknown address counts as an unmatched segment free.
 * Peaks are the first event at which a level exceeds every earlier one.
 *
 * A state read before the first event (docs/REPLAY.md rule 0) is what was live when
 * the events begin: just before event 0 its segments and active blocks become live
 * (pending ones pending), in the levels from the start and at event 0's index and
 * time, but not counted as allocations. Their intervals are flagged `init`, and have
 * no event of their own (act0 255).
 *
 * Besides the figures, the replay keeps what the viewer draws: every block and
 * segment as an interval (start, end, address, size, stack, ...) in typed arrays,
 * and for each kind one op list in event order (+id+1 when interval id starts,
 * -(id+1) when it ends), which is all a sweep over time needs.
 *
 * Plain API, the same in a page, a worker and node:
 *   const rp = new MemtraceReplay.Replay();
 *   for each state chunk s, in file order: rp.state(s);
 *   for each event e (fields as format.js gives them): rp.event(e);
 *   (format.js's read(bytes, {event: (e) => rp.event(e), state: (s) => rp.state(s)}))
 *   rp.figures()  -> the figures `memtrace summary --json` prints (without stacks)
 *   rp.model()    -> the intervals and ops (typed arrays, transferable) */
function memtraceReplayFactory() {
    'use strict';

    const ALLOC = 0, FREE_REQUESTED = 1, FREE_COMPLETED = 2, SEGMENT_ALLOC = 3,
        SEGMENT_FREE = 4, SEGMENT_MAP = 5, SEGMENT_UNMAP = 6, OOM = 8, ANNOTATE = 9,
        COUNTER = 10;

    /* Columns that grow by doubling. */
    class Columns {
        constructor(spec, cap) {
            this.spec = spec;
            this.n = 0;
            this.cap = cap || 1024;
            this.c = {};
            for (const k in spec)
                this.c[k] = new spec[k](this.cap);
        }
        add() {
            if (this.n === this.cap) {
                this.cap *= 2;
                for (const k in this.spec) {
                    const a = new this.spec[k](this.cap);
                    a.set(this.c[k]);
                    this.c[k] = a;
                }
            }
            return this.n++;
        }
        trimmed() {
            const out = { n: this.n };
            for (const k in this.spec)
                out[k] = this.c[k].slice(0, this.n);
            return out;
        }
    }

    const INTERVAL = {
        t0: Float64Array, t1: Float64Array, treq: Float64Array, addr: Float64Array,
        size: Float64Array, stream: Float64Array, ev0: Float64Array, ev1: Float64Array,
        stack: Uint32Array, category: Uint32Array, device: Int32Array, tid: Uint32Array,
        ended: Uint8Array, /* 0 live at the end, 1 freed, 2 replaced, 3 trimmed */
        init: Uint8Array, /* 1: live before the first event (rule 0), not allocated by one */
        /* For the list of events at a time: bytes asked for (0: as size), the event
         * of the free request (-1: none), the actions that began and ended it. */
        req: Float64Array, evreq: Float64Array, act0: Uint8Array, act1: Uint8Array,
    };

    class Ops {
        constructor() {
            this.a = new Int32Array(4096);
            this.n = 0;
        }
        push(v) {
            if (this.n === this.a.length) {
                const b = new Int32Array(this.a.length * 2);
                b.set(this.a);
                this.a = b;
            }
            this.a[this.n++] = v;
        }
    }

    function level() {
        return { cur: 0, peak: 0, peak_event: -1, peak_time: 0 };
    }
    function tally() {
        return { count: 0, bytes: 0 };
    }

    class Replay {
        constructor() {
            this.blocks = new Columns(INTERVAL);
            this.segs = new Columns(INTERVAL, 64);
            this.blockOps = new Ops();
            this.segOps = new Ops();
            this.liveBlocks = new Map(); /* addr -> interval id */
            this.liveSegs = new Map();
            this.allocated = level();
            this.reserved = level();
            this.allocs = tally(); this.frees = tally(); this.unmatched_frees = tally();
            this.replaced_allocs = tally(); this.free_requests = tally();
            /* Temporaries (rule 6): the index of the latest alloc event, and per stack
             * [bytes, count] of blocks freed while theirs was still the latest. */
            this.lastAlloc = -1;
            this.temporaries = new Map();
            this.seg_allocs = tally(); this.seg_frees = tally(); this.unmatched_seg_frees = tally();
            this.replaced_segs = tally();
            this.events = 0;
            this.t_min = Infinity;
            this.t_max = -Infinity;
            this.annotations = [];
            this.ooms = [];
            this.oom = { count: 0, largest_bytes: 0, device_free_bytes: 0 };
            this.counters = new Columns({ time: Float64Array, used: Float64Array,
                total: Float64Array, rss: Float64Array, device: Int32Array }, 64);
            this.devices = new Set();
            this.streams = new Set();
            this.categories = new Set();
            this.wide = 0;
            this.actionCounts = new Array(256).fill(0);
            /* The latest state read before the first event, seeded at event 0. */
            this.initial = null;
        }

        /* A state chunk read at this point of the file: the one before the first
         * event is what was live when the events begin (rule 0); later ones change
         * nothing. */
        state(s) {
            if (this.events === 0)
                this.initial = s;
        }

        /* Rule 0, just before event 0 (e): the state's segments and active blocks are
         * live, at e's index and time, without counting as allocations. */
        seed(s, e) {
            const base = { time: e.time, tid: 0, category: 0, requested_size: 0 };
            for (const g of s.segments || []) {
                this.add(this.segs, this.liveSegs, this.segOps, this.reserved, this.replaced_segs,
                    { ...base, addr: g.addr, size: g.total_size, stream: g.stream, device: g.device,
                        stack: g.stack, action: SEGMENT_ALLOC }, 0, true);
                for (const b of g.blocks || []) {
                    if (b.state !== 1 && b.state !== 2)
                        continue;
                    const id = this.add(this.blocks, this.liveBlocks, this.blockOps, this.allocated,
                        this.replaced_allocs, { ...base, addr: b.addr, size: b.size, stream: g.stream,
                            device: g.device, stack: b.stack, requested_size: b.requested_size, action: ALLOC }, 0, true);
                    if (b.state === 2)
                        this.blocks.c.treq[id] = e.time;
                }
            }
        }

        event(e) {
            const i = this.events++;
            const t = e.time;
            if (t < this.t_min)
                this.t_min = t;
            if (t > this.t_max)
                this.t_max = t;
            if (e.wide)
                this.wide++;
            this.actionCounts[e.action & 255]++;
            if (i === 0 && this.initial !== null)
                this.seed(this.initial, e);
            switch (e.action) {
            case ALLOC:
                this.allocs.count++;
                this.allocs.bytes += e.size;
                this.add(this.blocks, this.liveBlocks, this.blockOps, this.allocated,
                    this.replaced_allocs, e, i);
                this.lastAlloc = i;
                break;
            case FREE_REQUESTED: {
                this.free_requests.count++;
                this.free_requests.bytes += e.size;
                const id = this.liveBlocks.get(e.addr);
                if (id !== undefined && this.blocks.c.treq[id] !== this.blocks.c.treq[id]) {
                    this.blocks.c.treq[id] = t;
                    this.blocks.c.evreq[id] = i;
                }
                break;
            }
            case FREE_COMPLETED: {
                const id = this.liveBlocks.get(e.addr);
                if (id === undefined) {
                    this.unmatched_frees.count++;
                    this.unmatched_frees.bytes += e.size;
                    break;
                }
                const sz = this.blocks.c.size[id];
                this.frees.count++;
                this.frees.bytes += sz;
                this.allocated.cur -= sz;
                if (this.blocks.c.ev0[id] === this.lastAlloc && !this.blocks.c.init[id]) {
                    const st = this.blocks.c.stack[id], tmp = this.temporaries.get(st) || [0, 0];
                    tmp[0] += sz;
                    tmp[1]++;
                    this.temporaries.set(st, tmp);
                }
                this.liveBlocks.delete(e.addr);
                this.close(this.blocks, this.blockOps, id, t, i, 1, e.action);
                break;
            }
            case SEGMENT_ALLOC:
            case SEGMENT_MAP:
                this.seg_allocs.count++;
                this.seg_allocs.bytes += e.size;
                this.add(this.segs, this.liveSegs, this.segOps, this.reserved,
                    this.replaced_segs, e, i);
                break;
            case SEGMENT_FREE: {
                const id = this.liveSegs.get(e.addr);
                if (id === undefined) {
                    this.unmatched_seg_frees.count++;
                    this.unmatched_seg_frees.bytes += e.size;
                    break;
                }
                const sz = this.segs.c.size[id];
                this.seg_frees.count++;
                this.seg_frees.bytes += sz;
                this.reserved.cur -= sz;
                this.liveSegs.delete(e.addr);
                this.close(this.segs, this.segOps, id, t, i, 1, e.action);
                break;
            }
            case SEGMENT_UNMAP:
                this.unmap(e, i);
                break;
            case ANNOTATE:
                this.annotations.push({ index: i, time: t, kind: e.aux, name: e.category,
                    tid: e.tid, device: e.device });
                break;
            case OOM:
                if (this.oom.count++ === 0 || e.size > this.oom.largest_bytes) {
                    this.oom.largest_bytes = e.size;
                    this.oom.device_free_bytes = e.aux;
                }
                this.ooms.push({ index: i, time: t, size: e.size, device_free: e.aux,
                    device: e.device, stream: e.stream, stack: e.stack });
                break;
            case COUNTER: {
                const k = this.counters.add(), c = this.counters.c;
                c.time[k] = t; c.used[k] = e.addr; c.total[k] = e.size; c.rss[k] = e.requested_size;
                c.device[k] = e.device;
                break;
            }
            default:
                break;
            }
        }

        /* A live interval for e at event i (init: live before the first event);
         * returns its id. */
        add(cols, live, ops, lvl, replaced, e, i, init) {
            const old = live.get(e.addr);
            if (old !== undefined) {
                const sz = cols.c.size[old];
                replaced.count++;
                replaced.bytes += sz;
                lvl.cur -= sz;
                this.close(cols, ops, old, e.time, i, 2, e.action);
            }
            const id = this.open(cols, ops, e, i, init);
            live.set(e.addr, id);
            lvl.cur += e.size;
            if (lvl.cur > lvl.peak) {
                lvl.peak = lvl.cur;
                lvl.peak_event = i;
                lvl.peak_time = e.time;
            }
            return id;
        }

        open(cols, ops, e, i, init) {
            const id = cols.add(), c = cols.c;
            c.t0[id] = e.time; c.t1[id] = NaN; c.treq[id] = NaN;
            c.addr[id] = e.addr; c.size[id] = e.size; c.stream[id] = e.stream;
            c.ev0[id] = i; c.ev1[id] = -1; c.stack[id] = e.stack; c.category[id] = e.category;
            c.device[id] = e.device; c.tid[id] = e.tid; c.ended[id] = 0;
            c.req[id] = e.requested_size || 0; c.evreq[id] = -1; c.act0[id] = init ? 255 : e.action; c.act1[id] = 0;
            c.init[id] = init ? 1 : 0;
            this.devices.add(e.device);
            this.streams.add(e.stream);
            if (cols === this.blocks && !init)
                this.categories.add(e.category);
            ops.push(id + 1);
            return id;
        }

        close(cols, ops, id, t, i, why, action) {
            cols.c.t1[id] = t;
            cols.c.act1[id] = action;
            cols.c.ev1[id] = i;
            cols.c.ended[id] = why;
            ops.push(-(id + 1));
        }

        /* Walks live pieces from addr, as apply_seg in viewer/summary.c. */
        unmap(e, i) {
            const c = this.segs.c;
            let at = e.addr, left = e.size, freed = 0, matched = false, id;
            while ((id = this.liveSegs.get(at)) !== undefined) {
                const sz = c.size[id];
                matched = true;
                if (left !== 0 && sz > left) {
                    this.liveSegs.delete(at);
                    this.close(this.segs, this.segOps, id, e.time, i, 3, e.action);
                    /* The rest of the piece lives on as a piece of its own. */
                    const rest = { time: e.time, addr: at + left, size: sz - left,
                        stream: c.stream[id], stack: c.stack[id], category: c.category[id],
                        device: c.device[id], tid: c.tid[id] };
                    /* A piece already live there is overwritten, as in the C table;
                     * its interval ends here. */
                    const over = this.liveSegs.get(at + left);
                    if (over !== undefined)
                        this.close(this.segs, this.segOps, over, e.time, i, 2, e.action);
                    const rid = this.open(this.segs, this.segOps, rest, i, c.init[id] === 1);
                    this.segs.c.act0[rid] = 255; /* not an event of its own */
                    this.liveSegs.set(at + left, rid);
                    freed += left;
                    break;
                }
                this.liveSegs.delete(at);
                this.close(this.segs, this.segOps, id, e.time, i, 1, e.action);
                freed += sz;
                if (left === 0 || sz === left || sz === 0)
                    break;
                left -= sz;
                at += sz;
            }
            if (!matched) {
                this.unmatched_seg_frees.count++;
                this.unmatched_seg_frees.bytes += e.size;
                return;
            }
            this.seg_frees.count++;
            this.seg_frees.bytes += freed;
            this.reserved.cur -= freed;
        }

        levelFigures(l, live) {
            const has = l.peak > 0;
            return {
                peak_bytes: l.peak,
                peak_event: has ? l.peak_event : null,
                peak_time_ns: has ? l.peak_time : null,
                peak_offset_ns: has ? l.peak_time - this.t_min : null,
                current_bytes: l.cur,
                current_count: live,
            };
        }

        /* The figures of `memtrace summary --json`, less file, truncated, the UTC
         * times and the top stacks (the caller adds what it knows). */
        figures() {
            const n = this.events;
            return {
                events: n,
                first_time_ns: n ? this.t_min : 0,
                last_time_ns: n ? this.t_max : 0,
                duration_ns: n ? this.t_max - this.t_min : 0,
                allocated: this.levelFigures(this.allocated, this.liveBlocks.size),
                reserved: this.levelFigures(this.reserved, this.liveSegs.size),
                allocs: { ...this.allocs },
                frees: { ...this.frees },
                unmatched_frees: { ...this.unmatched_frees },
                replaced_allocs: { ...this.replaced_allocs },
                segment_allocs: { ...this.seg_allocs },
                segment_frees: { ...this.seg_frees },
                unmatched_segment_frees: { ...this.unmatched_seg_frees },
                replaced_segments: { ...this.replaced_segs },
                annotations: this.annotations.length,
                oom: { ...this.oom },
            };
        }

        /* What the viewer draws; the typed arrays are fresh copies (transferable). */
        model() {
            return {
                figures: this.figures(),
                blocks: this.blocks.trimmed(),
                segs: this.segs.trimmed(),
                blockOps: this.blockOps.a.slice(0, this.blockOps.n),
                segOps: this.segOps.a.slice(0, this.segOps.n),
                annotations: this.annotations,
                ooms: this.ooms,
                counters: this.counters.trimmed(),
                devices: [...this.devices].sort((a, b) => a - b),
                streams: [...this.streams].sort((a, b) => a - b),
                categories: [...this.categories].sort((a, b) => a - b),
                t_min: this.events ? this.t_min : 0,
                t_max: this.events ? this.t_max : 0,
                wide: this.wide,
                actionCounts: this.actionCounts,
                freeRequests: { ...this.free_requests },
                temporaries: [...this.temporaries],
            };
        }
    }

    /* The ArrayBuffers of a model, for postMessage's transfer list. */
    /* Per stack [bytes, count] of the model's blocks live just after event ev (the
     * peak's, for the stacks at the peak: rule 12), as a Map; empty for ev null.
     * keep(id), when given, chooses the blocks counted. */
    function stacksAt(blocks, ev, keep) {
        const out = new Map();
        if (ev === null || ev === undefined)
            return out;
        for (let id = 0; id < blocks.n; id++) {
            if (blocks.ev0[id] > ev || (blocks.ended[id] !== 0 && blocks.ev1[id] <= ev) || (keep && !keep(id)))
                continue;
            const g = out.get(blocks.stack[id]) || [0, 0];
            g[0] += blocks.size[id];
            g[1]++;
            out.set(blocks.stack[id], g);
        }
        return out;
    }

    /* Per stack [bytes, count] of every block allocated, as a Map: not those live
     * before the first event (rule 0). */
    function stacksAllocated(blocks) {
        const out = new Map();
        for (let id = 0; id < blocks.n; id++) {
            if (blocks.init[id])
                continue;
            const g = out.get(blocks.stack[id]) || [0, 0];
            g[0] += blocks.size[id];
            g[1]++;
            out.set(blocks.stack[id], g);
        }
        return out;
    }

    function transferables(m) {
        const out = [m.blockOps.buffer, m.segOps.buffer];
        for (const cols of [m.blocks, m.segs, m.counters])
            for (const k in cols)
                if (cols[k] && cols[k].buffer)
                    out.push(cols[k].buffer);
        return out;
    }

    return { Replay, transferables, stacksAt, stacksAllocated };
}

(function (api) {
    if (typeof module === 'object' && module.exports)
        module.exports = api;
    else
        globalThis.MemtraceReplay = api;
})(memtraceReplayFactory());
