// reader-cross-t: web/format.js and the C reader give the same events for every
// .memtrace file under tests/ and for gen-web's files: the C side is `memtrace export
// --format csv` (every field of every event, names as bytes), the JavaScript side
// the same lines from the viewer's reader in exact mode (BigInts past 2^53). Both
// must also agree on whether the file is truncated and whether it has an error,
// and stop at the same event when it has one.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { bail, builddir, done, genFiles, is, join, plan, require, skipAll, srcdir, webdir } from './lib.mjs';

const Format = require(join(webdir, 'format.js'));
const memtrace = join(builddir, 'memtrace');
if (!existsSync(memtrace))
    skipAll(`${memtrace} is not built`);

function memtraceFiles(dir) {
    const out = [];
    for (const name of readdirSync(dir).sort()) {
        const p = join(dir, name);
        if (name === 'node_modules')
            continue;
        if (statSync(p).isDirectory())
            out.push(...memtraceFiles(p));
        else if (name.endsWith('.memtrace'))
            out.push(p);
    }
    return out;
}

function csvStr(s) {
    if (!/[,"\r\n]/.test(s))
        return s;
    return '"' + s.replace(/"/g, '""') + '"';
}

/* The JS reader's events as the C exporter's CSV, as bytes. */
async function jsCsv(bytes) {
    const rows = [];
    let res = null, error = null;
    try {
        res = await Format.read(bytes, { exact: true, event: (e) => rows.push({ ...e }) });
        if (res.error)
            error = res.error.message;
    } catch (e) {
        if (!(e instanceof Format.FormatError))
            throw e;
        error = e.message;
    }
    const strings = res ? res.strings : [];
    const name = (id) => csvStr((id && strings[id]) || '');
    let text = 'index,time_ns,action,device,stream,addr,size,requested_size,pool,tid,stack,category,source,aux\n';
    rows.forEach((e, i) => {
        text += [i, e.time, Format.ACTIONS[e.action] || String(e.action), e.device, e.stream,
            '0x' + e.addr.toString(16), e.size, e.requested_size, e.pool, e.tid, e.stack,
            name(e.category), name(e.source), e.aux].join(',') + '\n';
    });
    return { csv: Buffer.from(text, 'utf8'), truncated: !!(res && res.truncated), error };
}

try {
    const gen = genFiles();
    const files = memtraceFiles(join(srcdir, 'tests')).concat(memtraceFiles(gen));
    plan(files.length);
    for (const f of files) {
        const c = spawnSync(memtrace, ['export', '--format', 'csv', f], { maxBuffer: 1 << 30 });
        const js = await jsCsv(new Uint8Array(readFileSync(f)));
        const cErr = c.status !== 0, cTrunc = /is truncated/.test(c.stderr.toString());
        const name = f.startsWith(gen) ? `gen-web/${f.slice(gen.length + 1)}` : f.slice(srcdir.length + 1);
        /* A file the C reader refuses at its header prints no CSV header either. */
        const cOut = c.stdout.toString('latin1'), jOut = js.csv.toString('latin1');
        const same = cOut === jOut || (cErr && cOut === '' && jOut.split('\n').length === 2);
        is([same, cErr, cTrunc], [true, js.error !== null, js.truncated],
            `${name}: the same events, error and truncation (${jOut.split('\n').length - 2} events)`);
        if (!same) {
            const a = cOut.split('\n'), b = jOut.split('\n');
            const k = a.findIndex((l, i) => l !== b[i]);
            console.log(`# first difference at line ${k}:\n#  C: ${a[k]}\n# JS: ${b[k]}`);
        }
    }
    done();
} catch (e) {
    bail(e);
}
