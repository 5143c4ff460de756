// replay-t: web/replay.js gives the figures `memtrace summary --json` gives (peaks
// with their event and time, current levels, every tally), on gen-web's files and on
// the committed format cases; and web/pickle.js reads the real PyTorch snapshot with
// the entry counts its README lists, infers what was live before its trace began (3
// segments, 31 blocks: docs/REPLAY.md rule 0) and ends with its 10 segments and 40
// blocks live, as `memtrace import` then `memtrace summary` does.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { replayFile } from './replay-cli.mjs';
import { bail, builddir, diag, done, genFiles, is, join, ok, plan, require, skipAll, srcdir, webdir } from './lib.mjs';

const Pickle = require(join(webdir, 'pickle.js'));
const { Replay } = require(join(webdir, 'replay.js'));
const memtrace = join(builddir, 'memtrace');
if (!existsSync(memtrace))
    skipAll(`${memtrace} is not built`);

/* The C tool's figures without what the web replay does not compute. */
function cFigures(path) {
    const j = JSON.parse(execFileSync(memtrace, ['summary', '--json', path],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    delete j.top;
    delete j.allocated.peak_time_utc;
    delete j.reserved.peak_time_utc;
    return j;
}

try {
    const gen = genFiles();
    const valid = join(srcdir, 'tests', 'snapshot', 'valid');
    const files = ['basic', 'rules', 'hostile'].map((n) => join(gen, `${n}.memtrace`))
        .concat(readdirSync(valid).sort().map((n) => join(valid, n, 'input.memtrace')));
    const pickle = join(srcdir, '..', 'shared', 'data', 'pytorch-snapshots', 'eor-training.pickle');
    plan(files.length + 11);
    for (const f of files) {
        const { replay, result } = await replayFile(f);
        const js = { file: f, truncated: result.truncated, ...replay.figures() };
        const name = f.slice(f.lastIndexOf('/', f.lastIndexOf('/') - 1) + 1);
        const c = cFigures(f);
        /* Past 2^53 the viewer's Numbers round (and the C tool's JSON saturates at
         * 2^63-1): such files must say so, and agree on what stays exact. */
        if (replay.wide > 0)
            is([js.events, js.allocs.count, js.replaced_allocs.count, replay.wide > 0],
                [c.events, c.allocs.count, c.replaced_allocs.count, true],
                `${name}: wide values flagged, counts as the C tool's`);
        else
            is(js, c, `${name}: the C tool's figures`);
    }
    const { replay: rules } = await replayFile(join(gen, 'rules.memtrace'));
    const f = rules.figures();
    is([f.replaced_allocs, f.unmatched_frees, f.unmatched_segment_frees, f.segment_frees],
        [{ count: 1, bytes: 100 }, { count: 1, bytes: 50 }, { count: 2, bytes: 0x2000 },
            { count: 2, bytes: 0x2800 + 0x20000 }], 'rules: replaced, unmatched and unmapped tallies');
    is([f.reserved.current_bytes, f.reserved.current_count], [0x1800, 1], 'rules: the trimmed piece stays live');

    /* A snapshot whose trace begins late: a pending block's request and a block's
     * free of blocks it never allocated (0x1000, 0x1100), a segment it never
     * allocated freed with a block in it (0x100000), a free in no segment (0x500000);
     * the final state's segment 0x0 that no traced segment overlaps, with two active
     * blocks the trace never allocated (0x2000, 0x3000 pending) and one it did. */
    const entry = (action, addr, size, stream) => ({ action, addr, size, stream: stream || 0, frames: [] });
    const block = (address, size, state) => ({ address, size, requested_size: size, state, frames: [] });
    const late = { device_traces: [[entry('free_requested', 0x1000, 256), entry('free_completed', 0x1000, 256),
        entry('free_completed', 0x1100, 512), entry('free_completed', 0x100100, 128), entry('segment_free', 0x100000, 0x10000, 5),
        entry('free_completed', 0x500000, 64), entry('segment_alloc', 0x200000, 0x10000), entry('alloc', 0x200000, 4096),
        entry('alloc', 0x4000, 100)]],
    segments: [{ device: 0, address: 0, total_size: 0x10000, stream: 0, segment_type: 'large', frames: [],
        blocks: [block(0, 0x2000, 'inactive'), block(0x2000, 1024, 'active_allocated'), block(0x2400, 0xc00, 'inactive'),
            block(0x3000, 2048, 'active_pending_free'), block(0x3800, 0x800, 'inactive'), block(0x4000, 100, 'active_allocated'),
            block(0x4064, 0xbf9c, 'inactive')] },
    { device: 0, address: 0x200000, total_size: 0x10000, stream: 0, segment_type: 'large', frames: [],
        blocks: [block(0x200000, 4096, 'active_allocated'), block(0x201000, 0xf000, 'inactive')] }] };
    const lr = new Replay();
    const lres = Pickle.readSnapshot(late, { event: (e) => lr.event(e), state: (st) => lr.state(st) });
    is([lres.initial.segments.map((g) => [g.addr, g.total_size, g.stream, g.blocks.map((b) => [b.addr, b.size, b.state])]),
        lres.initialDropped], [[[0, 0x10000, 0, [[0x1000, 256, 1], [0x1100, 512, 1], [0x2000, 1024, 1], [0x3000, 2048, 2]]],
        [0x100000, 0x10000, 5, [[0x100100, 128, 1]]]], 1],
    'pickle: what was live before a trace, from its frees and the final state; a block in no such segment left out');
    const lf = lr.figures();
    is([lf.allocated.peak_bytes, lf.allocated.peak_event, lf.allocated.current_bytes, lf.allocated.current_count,
        lf.reserved.peak_bytes, lf.reserved.peak_event, lf.reserved.current_bytes, lf.allocs.count, lf.frees,
        lf.unmatched_frees, lf.segment_frees.count, lf.unmatched_segment_frees.count],
    [7268, 8, 7268, 4, 0x20000, 0, 0x20000, 2, { count: 3, bytes: 896 }, { count: 1, bytes: 64 }, 1, 0],
    'pickle: it is live from event 0 (the reserved peak), its frees match, and the allocations are the trace\'s');

    if (!existsSync(pickle)) {
        for (let i = 0; i < 7; i++)
            ok(true, `# skip ${pickle} is absent`);
    } else {
        const { replay, result } = await replayFile(pickle);
        const c = replay.actionCounts;
        is([c[0], c[1], c[2], c[3], c[7]], [1935, 1926, 1926, 7, 9],
            'pickle: alloc, free_requested, free_completed, segment_alloc, snapshot entries');
        is(result.state.segments.length, 10, 'pickle: 10 segments in the state');
        /* The trace begins after three segments and 31 blocks were allocated. */
        const init = result.initial.segments.map((g) => [g.addr.toString(16), g.total_size, g.is_large,
            g.blocks.length, g.blocks.reduce((a, b) => a + b.size, 0)]);
        is([init, result.initialDropped], [[['7f4444c00000', 2097152, false, 0, 0],
            ['7f447b200000', 2097152, false, 30, 262144], ['7f44f2000000', 20971520, true, 1, 8519680]], 0],
        'pickle: live before the first entry, 3 segments holding 31 blocks (8,781,824 bytes), none left out');
        /* At the end: the final state's 10 segments and 40 blocks. Allocated is the
         * 31 blocks' 8,781,824 bytes and the 9 the trace allocated, at the sizes
         * their entries give (39,976,976: four are 4-byte requests in 512-byte
         * blocks, so the final state's 48,760,832 is 2,032 more). */
        const pf = replay.figures();
        is([pf.reserved.current_bytes, pf.reserved.current_count, pf.allocated.current_bytes, pf.allocated.current_count,
            pf.allocated.peak_bytes, pf.allocs.count, pf.segment_allocs.count, pf.unmatched_frees.count],
        [134217728, 10, 48758800, 40, 99486724 + 8781824, 1935, 7, 0],
        'pickle: at the end 10 segments (128 MiB) and 40 blocks live; the 31 are in the peak, not in the allocations');
        /* The same figures as the C importer gives, once it writes the state too. */
        const dir = mkdtempSync(join(tmpdir(), 'memtrace-replay-'));
        process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
        const imported = join(dir, 'eor.memtrace');
        execFileSync(memtrace, ['import', pickle, '-o', imported], { stdio: 'ignore' });
        const { replay: cr, result: cres } = await replayFile(imported);
        if (cres.initial === null) {
            ok(true, '# skip memtrace import writes no state before the first event yet');
        } else {
            const cf = cFigures(imported), level = (l) => [l.current_bytes, l.current_count, l.peak_bytes, l.peak_event];
            is([level(pf.allocated), level(pf.reserved), pf.allocs, pf.frees],
                [level(cf.allocated), level(cf.reserved), cf.allocs, cf.frees],
                'pickle: the viewer\'s figures are memtrace import\'s, then memtrace summary\'s');
            diag(`imported: ${JSON.stringify(level(cr.figures().allocated))}`);
        }
        ok(result.frames.length > 100 && replay.figures().allocated.peak_bytes > 0,
            'pickle: frames interned and a peak found', `frames ${result.frames.length}`);
        let err = null;
        try {
            /* PROTO 2, GLOBAL 'os\nsystem\n': a pickle that would import. */
            Pickle.unpickle(new Uint8Array([0x80, 2, 0x63, ...Buffer.from('os\nsystem\n'), 0x2e]));
        } catch (e) {
            err = e.message;
        }
        is(err, 'pickle: refused opcode GLOBAL at offset 2: this viewer reads plain data only and never imports or calls code from a file',
            'pickle: GLOBAL is refused with one clear error');
    }
    done();
} catch (e) {
    bail(e);
}
