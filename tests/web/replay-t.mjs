// replay-t: web/replay.js gives the figures `memtrace summary --json` gives (peaks
// with their event and time, current levels, every tally), on gen-web's files and on
// the committed format cases; and web/pickle.js reads the real PyTorch snapshot with
// the entry counts its README lists.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { replayFile } from './replay-cli.mjs';
import { bail, builddir, done, genFiles, is, join, ok, plan, require, skipAll, srcdir, webdir } from './lib.mjs';

const Pickle = require(join(webdir, 'pickle.js'));
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
    plan(files.length + 6);
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

    if (!existsSync(pickle)) {
        for (let i = 0; i < 4; i++)
            ok(true, `# skip ${pickle} is absent`);
    } else {
        const { replay, result } = await replayFile(pickle);
        const c = replay.actionCounts;
        is([c[0], c[1], c[2], c[3], c[7]], [1935, 1926, 1926, 7, 9],
            'pickle: alloc, free_requested, free_completed, segment_alloc, snapshot entries');
        is(result.state.segments.length, 10, 'pickle: 10 segments in the state');
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
