// format-t: web/format.js, the viewer's .memtrace reader, in node: every committed
// case of tests/snapshot/{valid,invalid} reads as the C reader reads it, and 3,000
// random events with edge values (0, 2^64-1, times going backwards) come back exactly
// as gen-web wrote them, through hits and misses of the prediction table; a state
// chunk before the first event is handed to sink.state() before it and is the
// result's `initial` (docs/REPLAY.md rule 0).
import { readdirSync, readFileSync } from 'node:fs';
import { bail, done, genFiles, is, join, ok, plan, require, srcdir, webdir } from './lib.mjs';

const Format = require(join(webdir, 'format.js'));

async function readCase(path) {
    let events = 0;
    try {
        const r = await Format.read(new Uint8Array(readFileSync(path)), { event: () => events++ });
        return { events, truncated: r.truncated ? 1 : 0, error: r.error ? r.error.message : null };
    } catch (e) {
        if (!(e instanceof Format.FormatError))
            throw e;
        return { events, truncated: 0, error: e.message };
    }
}

function expectOf(dir) {
    const x = {};
    for (const line of readFileSync(join(dir, 'expect'), 'utf8').split('\n')) {
        const sp = line.indexOf(' ');
        if (sp > 0)
            x[line.slice(0, sp)] = line.slice(sp + 1);
    }
    return x;
}

try {
    const suites = join(srcdir, 'tests', 'snapshot');
    const valid = readdirSync(join(suites, 'valid')).sort();
    const invalid = readdirSync(join(suites, 'invalid')).sort();
    plan(valid.length * 2 + invalid.length + 7);

    for (const name of valid) {
        const dir = join(suites, 'valid', name), x = expectOf(dir);
        const r = await readCase(join(dir, 'input.memtrace'));
        is(r.events, Number(x.events), `valid/${name}: ${x.events} events`);
        is([r.truncated, r.error], [Number(x.truncated), null], `valid/${name}: truncated ${x.truncated}, no error`);
    }
    for (const name of invalid) {
        const dir = join(suites, 'invalid', name), x = expectOf(dir);
        const r = await readCase(join(dir, 'input.memtrace'));
        ok(r.error !== null && r.error.includes(x.error), `invalid/${name}: "${x.error}"`,
            `got: ${r.error}`);
    }

    const gen = genFiles();
    const want = readFileSync(join(gen, 'random.txt'), 'utf8').trim().split('\n');
    const got = [];
    const res = await Format.read(new Uint8Array(readFileSync(join(gen, 'random.memtrace'))), {
        exact: true,
        event: (e) => got.push([e.action, e.time, e.tid, e.addr, e.size, e.requested_size,
            e.stream, e.aux, e.device, e.pool, e.stack, e.category, e.source].join(' ')),
    });
    is(got.length, 3000, 'random: 3000 events');
    const bad = got.findIndex((line, i) => line !== want[i]);
    ok(bad < 0, 'random: every field of every event as written', bad < 0 ? '' :
        `event ${bad}\ngot:  ${got[bad]}\nwant: ${want[bad]}`);
    is([res.truncated, res.error, res.end], [false, null, { events: 3000 }], 'random: whole, with its end record');
    ok(res.wide > 0, 'random: events wider than 2^53 are flagged', `wide ${res.wide}`);

    /* Cut inside the second EVENTS chunk: the first chunk's 1,700 events remain. */
    const whole = new Uint8Array(readFileSync(join(gen, 'random.memtrace')));
    const cut = await Format.read(whole.subarray(0, whole.length - 200), {});
    is([cut.events, cut.truncated, cut.error], [1700, true, null], 'a cut file reads as truncated after its last whole chunk');
    const flipped = whole.slice();
    flipped[16 + 20 + 40] ^= 0xff; /* inside the first chunk, with more after it */
    const bad1 = await Format.read(flipped, {});
    is(bad1.error && bad1.error.message, 'chunk at offset 16: checksum mismatch', 'a damaged chunk in the middle is an error naming its offset');

    /* tests/replay/initial-state: a state of 2 segments (3 blocks and 1), then
     * 6 events. */
    const order = [];
    const init = await Format.read(new Uint8Array(readFileSync(join(srcdir, 'tests', 'replay', 'initial-state', 'input.memtrace'))), {
        event: (e) => order.push(`event ${e.index}`),
        state: (st) => order.push(`state of ${st.segments.length} segments`),
    });
    const segs = init.initial && init.initial.segments.map((g) => [g.addr, g.total_size, g.stream, g.blocks.map((b) => [b.addr, b.size, b.state])]);
    is([order.slice(0, 2), order.length, segs], [['state of 2 segments', 'event 0'], 7,
        [[1048576, 1048576, 0, [[1048576, 4096, 1], [1052672, 8192, 2], [1060864, 1036288, 0]]], [4194304, 2097152, 7, [[4194304, 2097152, 0]]]]],
    'a state before the first event: to sink.state() before event 0, and the result\'s initial');
    done();
} catch (e) {
    bail(e);
}
