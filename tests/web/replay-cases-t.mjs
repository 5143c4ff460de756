// replay-cases-t: web/replay.js on every case of tests/replay/ (docs/REPLAY.md's
// rules), every key of expected.json compared exactly, under the names replay-t
// gives the C model's figures: one replay, specified once, passed by both.
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { bail, done, is, join, ok, plan, require, srcdir, webdir } from './lib.mjs';

const Format = require(join(webdir, 'format.js'));
const { Replay, stacksAt, stacksAllocated } = require(join(webdir, 'replay.js'));

/* The outcome under expected.json's names, as tests/replay/replay-t.c builds it. */
async function outcome(path) {
    const rp = new Replay();
    const res = await Format.read(new Uint8Array(readFileSync(path)), { event: (e) => rp.event(e), state: (s) => rp.state(s) });
    if (res.error)
        throw new Error(`${path}: ${res.error.message}`);
    const m = rp.model(), f = m.figures;
    const level = (l) => ({ current: l.current_bytes, peak: l.peak_bytes, peak_event: l.peak_event });
    const pair = (t) => [t.count, t.bytes];
    /* A stack is named by its innermost frame's symbol. */
    const nameOf = (stack) => {
        const fr = Format.stackFrames(res, stack, 1)[0];
        return fr ? fr.symbol : '';
    };
    const named = (entries) => {
        const o = {};
        for (const [stack, [bytes, count]] of entries)
            if (count)
                o[nameOf(stack)] = [bytes, count];
        return o;
    };
    const live = (cols, pending) => {
        const rows = [];
        for (let id = 0; id < cols.n; id++)
            if (cols.ended[id] === 0) {
                const r = [cols.addr[id], cols.size[id]];
                if (pending)
                    r.push(cols.treq[id] === cols.treq[id]);
                rows.push(r);
            }
        return rows.sort((a, b) => a[0] - b[0]);
    };
    return {
        events: f.events, truncated: !!res.truncated,
        allocated: level(f.allocated), reserved: level(f.reserved),
        allocs: pair(f.allocs), frees: pair(f.frees), free_requests: pair(m.freeRequests),
        unmatched_frees: pair(f.unmatched_frees), replaced_allocs: pair(f.replaced_allocs),
        segment_allocs: pair(f.segment_allocs), segment_frees: pair(f.segment_frees),
        unmatched_segment_frees: pair(f.unmatched_segment_frees), replaced_segments: pair(f.replaced_segments),
        live_blocks: live(m.blocks, true), live_segments: live(m.segs, false),
        stacks_at_peak: named(stacksAt(m.blocks, f.allocated.peak_event)),
        stacks_allocated: named(stacksAllocated(m.blocks)),
        temporaries: named(m.temporaries),
    };
}

/* JSON equality with object keys in any order, as jansson's json_equal. */
function canon(v) {
    if (Array.isArray(v))
        return v.map(canon);
    if (v && typeof v === 'object')
        return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon(v[k])]));
    return v;
}

try {
    const dir = join(srcdir, 'tests', 'replay');
    const cases = readdirSync(dir).sort().filter((c) => existsSync(join(dir, c, 'expected.json')));
    const checks = [];
    for (const c of cases) {
        const want = JSON.parse(readFileSync(join(dir, c, 'expected.json'), 'utf8'));
        for (const k of Object.keys(want))
            if (!k.startsWith('_'))
                checks.push([c, k, want[k]]);
    }
    plan(checks.length + 1);
    ok(cases.length >= 9, `${cases.length} cases found`);
    const got = {};
    for (const c of cases)
        got[c] = await outcome(join(dir, c, 'input.memtrace'));
    for (const [c, k, want] of checks)
        is(canon(got[c][k]), canon(want), `${c}: ${k}`);
    done();
} catch (e) {
    bail(e);
}
