/* timeline.js: the active memory timeline on a canvas, with level of detail.
 *
 * Every block is a band stacked over time: a new block goes on top of the live ones,
 * and when one below is freed the ones above it move down (the stacking order is the
 * order of allocation). The drawing works per pixel column: a sweep applies the ops
 * (block starts and ends, in event order) up to the column's end time and walks the
 * live blocks bottom up. A block shorter than one pixel is not dropped: consecutive
 * such blocks are summed into one grey band that splits into its blocks as the
 * vertical scale grows (the scale fits the tallest column in view, so zooming into
 * a quieter time splits them); blocks that come and go within one column show as a
 * pale band up to the highest level reached in that column.
 *
 * Level of detail, so that a frame costs about the same at any zoom and any file
 * size: the live set is kept every K ops (checkpoints; K starts small and doubles
 * until they fit a budget), and a column's live set is reached from the previous
 * column's or from the nearest checkpoint, whichever applies fewer ops. The level
 * of the chosen blocks (a device, stream, category) is kept per run of RUN ops:
 * its value before the run and its highest within it, so that a column's highest
 * level reads whole runs instead of every op; built once per choice (the first
 * while the file loads, by its first frame). A wide view thus reads W columns
 * times a checkpoint and a few runs, not every op of the file. */
function memtraceTimelineFactory() {
    'use strict';

    const CHECKPOINT_BUDGET = 16 * 1024 * 1024; /* block ids kept in all checkpoints */
    const RUN = 64; /* ops per run of the level summaries */

    /* The live set: ids in order of allocation, removal by tombstone, compacted when
     * half are tombstones. */
    class Live {
        constructor(nids) {
            this.arr = new Int32Array(1024);
            this.len = 0;
            this.dead = 0;
            this.pos = new Int32Array(Math.max(1, nids)).fill(-1);
        }
        reset(ids) {
            for (let i = 0; i < this.len; i++)
                if (this.arr[i] >= 0)
                    this.pos[this.arr[i]] = -1;
            this.len = 0;
            this.dead = 0;
            if (ids)
                for (let i = 0; i < ids.length; i++)
                    this.add(ids[i]);
        }
        add(id) {
            if (this.len === this.arr.length) {
                if (this.dead > this.len / 4) {
                    this.compact();
                } else {
                    const a = new Int32Array(this.arr.length * 2);
                    a.set(this.arr);
                    this.arr = a;
                }
            }
            this.pos[id] = this.len;
            this.arr[this.len++] = id;
        }
        remove(id) {
            const p = this.pos[id];
            if (p < 0)
                return;
            this.arr[p] = -1;
            this.pos[id] = -1;
            this.dead++;
            /* Every sweep walks the whole array, tombstones too: keep them few. */
            if (this.dead > 64 && this.dead * 2 > this.len)
                this.compact();
        }
        compact() {
            let j = 0;
            for (let i = 0; i < this.len; i++) {
                const id = this.arr[i];
                if (id >= 0) {
                    this.arr[j] = id;
                    this.pos[id] = j++;
                }
            }
            this.len = j;
            this.dead = 0;
        }
        ids() {
            const out = new Int32Array(this.len - this.dead);
            let j = 0;
            for (let i = 0; i < this.len; i++)
                if (this.arr[i] >= 0)
                    out[j++] = this.arr[i];
            return out;
        }
    }

    /* Sweep support for one kind of interval (blocks or segments). */
    class Index {
        constructor(cols, ops, t0) {
            this.c = cols;
            this.ops = ops;
            const n = ops.length;
            /* Op times, made monotonic (events of several threads may step back a
             * little), relative to the file's first time. */
            const T = new Float64Array(n);
            let last = -Infinity;
            for (let k = 0; k < n; k++) {
                const v = ops[k];
                let t = (v > 0 ? cols.t0[v - 1] : cols.t1[-v - 1]) - t0;
                if (t < last)
                    t = last;
                T[k] = last = t;
            }
            this.T = T;
            this.live = new Live(cols.n);
            this.buildCheckpoints();
        }

        /* One pass: over the budget, every other checkpoint goes and K doubles. */
        buildCheckpoints() {
            let K = 512, total = 0, cps = [];
            const live = this.live, n = this.ops.length;
            live.reset(null);
            for (let k = 0; k <= n; k++) {
                if (k % K === 0) {
                    const ids = live.ids();
                    total += ids.length;
                    cps.push(ids);
                    while (total > CHECKPOINT_BUDGET && K < n) {
                        cps = cps.filter((c, i) => i % 2 === 0);
                        total = cps.reduce((a, c) => a + c.length, 0);
                        K *= 2;
                    }
                }
                if (k < n) {
                    const v = this.ops[k];
                    if (v > 0)
                        live.add(v - 1);
                    else
                        live.remove(-v - 1);
                }
            }
            this.K = K;
            this.cps = cps;
            live.reset(null);
            this.at = 0;
        }

        /* First op index whose time is >= t. */
        opAt(t) {
            return this.opFrom(0, t);
        }

        /* First op index from lo on whose time is >= t. */
        opFrom(lo, t) {
            let hi = this.T.length;
            if (lo >= hi || this.T[lo] >= t)
                return lo;
            /* Near lo first (narrow columns), then halving. */
            let step = 1;
            while (lo + step < hi && this.T[lo + step] < t) {
                lo += step;
                step *= 2;
            }
            hi = Math.min(hi, lo + step);
            while (lo < hi) {
                const mid = (lo + hi) >>> 1;
                if (this.T[mid] < t)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            return lo;
        }

        /* Makes the live set the one before op k: on from where it is, or from the
         * checkpoint before k, whichever touches fewer ids. */
        seek(k) {
            const cp = Math.floor(k / this.K), from = cp * this.K;
            /* An integer either way: a double here would deoptimize the compiled seek. */
            const onward = this.at <= k ? k - this.at : 0x3fffffff;
            if (onward > this.live.len + this.cps[cp].length + (k - from)) {
                this.live.reset(this.cps[cp]);
                this.at = from;
            }
            while (this.at < k)
                this.apply(this.at++);
        }

        apply(k) {
            const v = this.ops[k];
            if (v > 0)
                this.live.add(v - 1);
            else
                this.live.remove(-v - 1);
        }
    }

    /* The level of the chosen intervals (device dev, stream st, category cat; null:
     * any) in runs of RUN ops: before[r] the level before run r, high[r] the highest
     * level after any op of run r. */
    class Levels {
        constructor(index, cols, dev, st, cat) {
            this.ix = index;
            this.c = cols;
            this.dev = dev;
            this.st = st;
            this.cat = cat;
            const ops = index.ops, n = ops.length, runs = Math.ceil(n / RUN);
            this.before = new Float64Array(runs + 1);
            this.high = new Float64Array(runs);
            let cur = 0;
            const size = cols.size, all = dev === null && st === null && cat === null;
            for (let r = 0; r < runs; r++) {
                this.before[r] = cur;
                let hi = cur;
                const end = Math.min(n, (r + 1) * RUN);
                for (let k = r * RUN; k < end; k++) {
                    const v = ops[k];
                    cur = all ? (v > 0 ? cur + size[v - 1] : cur - size[-v - 1]) : this.step(v, cur);
                    if (cur > hi)
                        hi = cur;
                }
                this.high[r] = hi;
            }
            this.before[runs] = cur;
        }

        /* The level after op v, from level cur. */
        step(v, cur) {
            const c = this.c, id = v > 0 ? v - 1 : -v - 1;
            if ((this.dev !== null && c.device[id] !== this.dev) || (this.st !== null && c.stream[id] !== this.st) ||
                (this.cat !== null && c.category[id] !== this.cat))
                return cur;
            return v > 0 ? cur + c.size[id] : cur - c.size[id];
        }

        /* The level before op k. */
        at(k) {
            const r = Math.floor(k / RUN), ops = this.ix.ops;
            let cur = this.before[r];
            for (let j = r * RUN; j < k; j++)
                cur = this.step(ops[j], cur);
            return cur;
        }

        /* Over ops [k0, k1) from level cur (the level before k0): into out, the
         * highest level (cur included) and the level after. */
        scan(k0, k1, cur, out) {
            const ops = this.ix.ops;
            let hi = cur, k = k0;
            while (k < k1 && k % RUN !== 0) {
                cur = this.step(ops[k++], cur);
                if (cur > hi)
                    hi = cur;
            }
            while (k + RUN <= k1) {
                const r = k / RUN;
                if (this.high[r] > hi)
                    hi = this.high[r];
                k += RUN;
                cur = this.before[r + 1];
            }
            while (k < k1) {
                cur = this.step(ops[k++], cur);
                if (cur > hi)
                    hi = cur;
            }
            out.max = hi;
            out.cur = cur;
        }
    }

    function nullish(v) {
        return v === undefined ? null : v;
    }

    function hashColor(id) {
        let x = Math.imul(id ^ 0x9e3779b9, 0x85ebca6b);
        x ^= x >>> 13;
        x = Math.imul(x, 0xc2b2ae35);
        x ^= x >>> 16;
        const h = (x >>> 0) % 360, s = 55 + ((x >>> 9) % 25), l = 48 + ((x >>> 17) % 14);
        return hsl(h, s, l);
    }
    function hsl(h, s, l) {
        s /= 100;
        l /= 100;
        const k = (n) => (n + h / 30) % 12;
        const a = s * Math.min(l, 1 - l);
        const f = (n) => Math.round(255 * (l - a * Math.max(-1, Math.min(k(n) - 3, Math.min(9 - k(n), 1)))));
        return [f(0), f(8), f(4)];
    }
    function rgba32(rgb, alpha) {
        return ((alpha << 24) | (rgb[2] << 16) | (rgb[1] << 8) | rgb[0]) >>> 0;
    }
    const GREY = rgba32([150, 150, 150], 255);
    const PALE = rgba32([200, 205, 215], 255);
    const DIM = rgba32([228, 228, 228], 255);

    /* Draws one device's blocks into an RGBA buffer. view: {t0, t1, device, stream,
     * category} (stream or category null or absent: every one). */
    class Timeline {
        constructor(model) {
            this.m = model;
            this.index = new Index(model.blocks, model.blockOps, model.t_min);
            this.colorBy = 'stack';
            this.colors = new Map();
            this.minPx = 1;
            this.match = null; /* Uint8Array by stack id: search hits keep their colour */
            this.matchIds = null; /* the same by block id */
            this.lv = new Map(); /* 'device stream category' -> Levels */
            /* Every field set once with its final type, so that compiled frames are
             * not thrown away when one changes (see idColors). */
            this.idCache = new Uint32Array(0);
            this.idCacheMatch = null;
            this.idCacheIds = null;
        }

        levelsFor(dev, st, cat) {
            /* One device and every stream: no block to leave out. */
            const devs = this.m.devices;
            if (st === null && devs && (devs.length === 0 || (devs.length === 1 && devs[0] === dev)))
                dev = null;
            const key = `${dev} ${st} ${cat}`;
            let l = this.lv.get(key);
            if (!l) {
                l = new Levels(this.index, this.m.blocks, dev, st, cat);
                this.lv.set(key, l);
            }
            return l;
        }

        colorOf(id) {
            if ((this.match && !this.match[this.m.blocks.stack[id]]) || (this.matchIds && !this.matchIds[id]))
                return DIM;
            const key = this.colorBy === 'category' ? this.m.blocks.category[id] : this.m.blocks.stack[id];
            let c = this.colors.get(key);
            if (c === undefined) {
                c = rgba32(hashColor(key), 255);
                this.colors.set(key, c);
            }
            return c;
        }

        setColorBy(by) {
            this.colorBy = by;
            this.colors.clear();
            this.idCache = new Uint32Array(0);
        }

        /* colorOf by block id, filled as blocks are drawn (0: not yet), for as long
         * as the colouring and the search stay the same. */
        idColors() {
            if (this.idCache.length !== this.m.blocks.n || this.idCacheMatch !== this.match || this.idCacheIds !== this.matchIds) {
                this.idCache = new Uint32Array(this.m.blocks.n);
                this.idCacheMatch = this.match;
                this.idCacheIds = this.matchIds;
            }
            return this.idCache;
        }

        /* Per column: the level at its end and the highest level within it. */
        levels(view, W) {
            const ix = this.index, dev = view.device === undefined ? null : view.device;
            const lv = this.levelsFor(dev, nullish(view.stream), nullish(view.category));
            const dt = (view.t1 - view.t0) / W;
            const end = new Float64Array(W), max = new Float64Array(W), out = { max: 0, cur: 0 };
            let k = ix.opAt(view.t0), cur = lv.at(k);
            for (let x = 0; x < W; x++) {
                const k1 = ix.opFrom(k, view.t0 + (x + 1) * dt);
                lv.scan(k, k1, cur, out);
                k = k1;
                cur = out.cur;
                end[x] = cur;
                max[x] = out.max;
            }
            return { end, max };
        }

        /* Renders into pixels (Uint32Array, W x H, row 0 at the top); returns the
         * scale and per column the levels, for hit tests and axes. */
        render(view, W, H, pixels, bg) {
            const lv = this.levels(view, W);
            let top = 0;
            for (let x = 0; x < W; x++)
                if (lv.max[x] > top)
                    top = lv.max[x];
            /* A vertical zoom (view.yMin, view.yMax) shows that range of bytes. */
            const base = view.yMax ? view.yMin || 0 : 0;
            if (view.yMax)
                top = view.yMax;
            const scale = top > base ? (H - 1) / (top - base) : 0;
            pixels.fill(bg);
            const ix = this.index, c = this.m.blocks, dev = view.device, st = nullish(view.stream), cat = nullish(view.category);
            const dt = (view.t1 - view.t0) / W;
            let k = ix.opAt(view.t0);
            const live = ix.live;
            let drawn = 0, aggregated = 0;
            /* Bands are contiguous: one band's top row is the next one's bottom. y in
             * bytes from the bottom, rows from the top. */
            const rowOf = (y) => H - Math.round((y - base) * scale);
            const fill = (x, r0, r1, color) => {
                if (r0 < 0)
                    r0 = 0;
                if (r1 > H)
                    r1 = H;
                for (let r = r0; r < r1; r++)
                    pixels[r * W + x] = color;
            };
            const colors = this.idColors();
            for (let x = 0; x < W; x++) {
                k = ix.opFrom(k, view.t0 + (x + 1) * dt);
                ix.seek(k);
                let y = 0, smallFrom = -1, row = rowOf(0);
                for (let i = 0; i < live.len; i++) {
                    const id = live.arr[i];
                    if (id < 0 || (dev !== null && c.device[id] !== dev) || (st !== null && c.stream[id] !== st) ||
                        (cat !== null && c.category[id] !== cat))
                        continue;
                    const s = c.size[id];
                    if (s * scale < this.minPx) {
                        if (smallFrom < 0)
                            smallFrom = y;
                        aggregated++;
                    } else {
                        if (smallFrom >= 0) {
                            const r = rowOf(y);
                            fill(x, r, row, GREY);
                            row = r;
                            smallFrom = -1;
                        }
                        const r = rowOf(y + s);
                        if (r < row && row > 0 && r < H) {
                            let col = colors[id];
                            if (col === 0)
                                col = colors[id] = this.colorOf(id);
                            fill(x, r, row, col);
                        }
                        row = r;
                        drawn++;
                    }
                    y += s;
                }
                if (smallFrom >= 0) {
                    const r = rowOf(y);
                    fill(x, r, row, GREY);
                    row = r;
                }
                if (lv.max[x] > y)
                    fill(x, rowOf(lv.max[x]), row, PALE);
            }
            return { scale, top, base, levels: lv, drawn, aggregated };
        }

        /* What is under pixel column x at byte level bytes: {kind: 'block', id},
         * {kind: 'aggregate', count, bytes, from}, {kind: 'transient', ...} or null. */
        hit(view, W, x, bytes, scale, levels) {
            const ix = this.index, c = this.m.blocks, dev = view.device, st = nullish(view.stream), cat = nullish(view.category);
            const dt = (view.t1 - view.t0) / W;
            const tEnd = view.t0 + (x + 1) * dt;
            ix.seek(ix.opAt(tEnd));
            const live = ix.live;
            let y = 0, agg = null;
            for (let i = 0; i < live.len; i++) {
                const id = live.arr[i];
                if (id < 0 || (dev !== null && c.device[id] !== dev) || (st !== null && c.stream[id] !== st) ||
                    (cat !== null && c.category[id] !== cat))
                    continue;
                const s = c.size[id];
                const small = s * scale < this.minPx;
                if (small) {
                    if (agg === null)
                        agg = { kind: 'aggregate', count: 0, bytes: 0, from: y, ids: [] };
                    agg.count++;
                    agg.bytes += s;
                    if (agg.ids.length < 1000)
                        agg.ids.push(id);
                } else {
                    if (agg !== null && bytes >= agg.from && bytes < y)
                        return agg;
                    agg = null;
                    if (bytes >= y && bytes < y + s)
                        return { kind: 'block', id, from: y };
                }
                y += s;
            }
            if (agg !== null && bytes >= agg.from && bytes < y)
                return agg;
            if (levels && bytes >= y && bytes < levels.max[x])
                return { kind: 'transient', level: y, max: levels.max[x] };
            return null;
        }
    }

    /* Per column maxima of a level over the whole time range: the minimap's curve. */
    function overview(tl, device, W, stream, category) {
        const span = Math.max(1, tl.m.t_max - tl.m.t_min);
        return tl.levels({ t0: 0, t1: span, device, stream: nullish(stream), category: nullish(category) }, W).max;
    }

    return { Timeline, Index, overview, hashColor };
}

(function (api) {
    if (typeof module === 'object' && module.exports)
        module.exports = api;
    else
        globalThis.MemtraceTimeline = api;
})(memtraceTimelineFactory());
