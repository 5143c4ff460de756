#!/usr/bin/env node
// replay-cli: runs the web viewer's reader and replay (web/format.js, web/pickle.js,
// web/replay.js) on one file in node and prints the figures `memtrace summary --json`
// prints (without the UTC times and the top stacks), so the viewer's model can be
// checked against the C tool and against tests/replay/ cases:
//     node tests/web/replay-cli.mjs FILE
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const web = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'web');
const Format = require(join(web, 'format.js'));
const Pickle = require(join(web, 'pickle.js'));
const { Replay } = require(join(web, 'replay.js'));

/* Reads path (a .memtrace file or a PyTorch snapshot) into a replay; resolves to
 * {replay, result} where result is the reader's (tables, meta, truncated, error). */
export async function replayFile(path) {
    const bytes = new Uint8Array(readFileSync(path));
    const rp = new Replay();
    const sink = { event: (e) => rp.event(e), state: (s) => rp.state(s) };
    const result = Format.isMemtrace(bytes)
        ? await Format.read(bytes, sink)
        : Pickle.readSnapshot(Pickle.parseSnapshot(bytes), sink);
    return { replay: rp, result };
}

export function figuresJson(path, replay, result) {
    return { file: path, truncated: result.truncated, ...replay.figures() };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
    const path = process.argv[2];
    if (!path || process.argv.length > 3) {
        process.stderr.write('usage: node tests/web/replay-cli.mjs FILE\n');
        process.exit(2);
    }
    try {
        const { replay, result } = await replayFile(path);
        if (result.error) {
            process.stderr.write(`memtrace: ${path}: ${result.error.message}\n`);
            process.exit(1);
        }
        process.stdout.write(JSON.stringify(figuresJson(path, replay, result), null, 2) + '\n');
    } catch (e) {
        process.stderr.write(`memtrace: ${path}: ${e.message}\n`);
        process.exit(1);
    }
}
