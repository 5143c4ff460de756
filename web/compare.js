/* compare.js: two or more files side by side, for the viewer's compare view.
 *
 * - levelSeries(model, filter): a file's allocated bytes after each block op, with
 *   the op's time (from the file's first event), as a step function;
 * - columnMax(series, offset, span, W): its highest level in each of W columns of
 *   [0, span), the series shifted right by offset; NaN where the file has no time;
 * - stackDiff(a, b): stacks matched by their frames (ids differ between files),
 *   with the bytes and blocks each had live at its file's peak of allocated
 *   memory (docs/REPLAY.md rule 12), for every stack where the bytes differ, the
 *   largest change first. a and b are {model, info} as the viewer holds them,
 *   filterA and filterB (filterA where absent) choose their blocks;
 * - peakOf(cols, ops, t_min, filter): the peak of the chosen intervals' level, by
 *   the same rule as the file's (the first op at which the level exceeds every
 *   earlier one): {ev, bytes, offset}, ev null when nothing was chosen.
 * filter, where taken: {device, stream, category} (null or absent: any) chooses the
 * intervals counted. */
function memtraceCompareFactory() {
    'use strict';
    const Format = typeof module === 'object' && module.exports ? require('./format.js') : globalThis.MemtraceFormat;
    const Replay = typeof module === 'object' && module.exports ? require('./replay.js') : globalThis.MemtraceReplay;

    function chooser(cols, filter) {
        const get = (k) => (filter && filter[k] !== undefined ? filter[k] : null);
        const dev = get('device'), st = get('stream'), cat = get('category');
        if (dev === null && st === null && cat === null)
            return null;
        return (id) => (dev === null || cols.device[id] === dev) && (st === null || cols.stream[id] === st) &&
            (cat === null || cols.category[id] === cat);
    }

    function peakOf(cols, ops, t_min, filter) {
        const keep = chooser(cols, filter);
        let cur = 0, best = { ev: null, bytes: 0, offset: 0 };
        for (let k = 0; k < ops.length; k++) {
            const v = ops[k], id = v > 0 ? v - 1 : -v - 1;
            if (keep && !keep(id))
                continue;
            if (v < 0) {
                cur -= cols.size[id];
                continue;
            }
            cur += cols.size[id];
            if (cur > best.bytes)
                best = { ev: cols.ev0[id], bytes: cur, offset: cols.t0[id] - t_min };
        }
        return best;
    }

    function levelSeries(model, filter) {
        const keep = chooser(model.blocks, filter);
        const ops = keep ? model.blockOps.filter((op) => keep(op > 0 ? op - 1 : -op - 1)) : model.blockOps;
        const b = model.blocks, n = ops.length;
        const t = new Float64Array(n), v = new Float64Array(n);
        let level = 0;
        for (let i = 0; i < n; i++) {
            const op = ops[i];
            if (op > 0) {
                level += b.size[op - 1];
                t[i] = b.t0[op - 1] - model.t_min;
            } else {
                level -= b.size[-op - 1];
                t[i] = b.t1[-op - 1] - model.t_min;
            }
            v[i] = level;
        }
        return { t, v, n, end: Math.max(0, model.t_max - model.t_min) };
    }

    function columnMax(s, offset, span, W) {
        const out = new Float64Array(W).fill(NaN);
        let j = 0, level = 0;
        for (let x = 0; x < W; x++) {
            const c0 = (x * span) / W - offset, c1 = ((x + 1) * span) / W - offset;
            if (c1 <= 0 || c0 > s.end)
                continue;
            let max = level;
            while (j < s.n && s.t[j] < c1) {
                level = s.v[j++];
                if (level > max)
                    max = level;
            }
            out[x] = max;
        }
        return out;
    }

    function frameKey(f) {
        return `${f.symbol || (f.module ? f.module + '+' + f.offset : f.ip)}\u0000${f.file}\u0000${f.line}`;
    }

    /* Per stack signature: {frames, bytes, count} live at the file's peak. */
    function atPeak(file, filter) {
        const m = file.model, out = new Map();
        const pe = filter ? peakOf(m.blocks, m.blockOps, m.t_min, filter).ev : m.figures.allocated.peak_event;
        for (const [stack, [bytes, count]] of Replay.stacksAt(m.blocks, pe, chooser(m.blocks, filter))) {
            const frames = Format.stackFrames(file.info, stack);
            const key = frames.map(frameKey).join('\u0001');
            const g = out.get(key) || { frames, bytes: 0, count: 0 };
            g.bytes += bytes;
            g.count += count;
            out.set(key, g);
        }
        return out;
    }

    function stackDiff(a, b, filterA, filterB) {
        const A = atPeak(a, filterA), B = atPeak(b, filterB === undefined ? filterA : filterB), rows = [];
        for (const key of new Set([...A.keys(), ...B.keys()])) {
            const x = A.get(key), y = B.get(key);
            const ab = x ? x.bytes : 0, bb = y ? y.bytes : 0;
            if (ab === bb)
                continue;
            rows.push({
                key, frames: (y || x).frames, a: [ab, x ? x.count : 0], b: [bb, y ? y.count : 0],
                delta: bb - ab, change: !x ? 'new' : !y ? 'gone' : bb > ab ? 'grew' : 'shrank',
            });
        }
        rows.sort((p, q) => Math.abs(q.delta) - Math.abs(p.delta) || (p.key < q.key ? -1 : 1));
        return rows;
    }

    return { levelSeries, columnMax, stackDiff, peakOf };
}

(function (api) {
    if (typeof module === 'object' && module.exports)
        module.exports = api;
    else
        globalThis.MemtraceCompare = api;
})(memtraceCompareFactory());
