// compare-t: the compare view on two PyTorch snapshots written here with a known
// difference: at its peak A holds weights 1000, activations 500, a cache of 400 and
// an old buffer of 128 bytes (2028); B holds weights 1000, activations 800, a cache of
// 50 and an extra 256 (2106). The by-stack difference must list exactly the cache
// (-350, shrank), the activations (+300, grew), the extra (+256, new) and the old
// buffer (-128, gone), largest first, and not the weights; both files are drawn on
// one axis to their peaks; and the file selector shows either file. The cache and the
// extra are on stream 1, the rest on stream 0: on stream 1 alone the peaks are 400
// and 306 and only the cache (-350) and the extra (+256) differ. Then gen-web's
// basic.memtrace beside streams.memtrace, category "weights": basic's 64 MiB of
// weights, none in streams (whose blocks have no category), a difference of -64 MiB.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { bail, builddir, done, genFiles, is, join, launch, needBrowser, ok, pathToFileURL, plan,
    screenshot, skipAll } from './lib.mjs';

const memtrace = join(builddir, 'memtrace');
if (!existsSync(memtrace))
    skipAll(`${memtrace} is not built`);
const pw = needBrowser();

function snapshot(blocks, freed) {
    const trace = [];
    let t = 1000, addr = 0x10000;
    const at = {};
    for (const [name, size] of blocks) {
        at[name] = addr;
        trace.push({ action: 'alloc', addr, size, stream: ['cache', 'extra'].includes(name) ? 1 : 0, time_us: t,
            frames: [{ name: `alloc_${name}`, filename: 'model.py', line: 10 }, { name: 'main', filename: 'train.py', line: 1 }] });
        addr += 0x1000;
        t += 100;
    }
    for (const name of freed) {
        trace.push({ action: 'free_completed', addr: at[name], size: blocks.find((b) => b[0] === name)[1],
            stream: ['cache', 'extra'].includes(name) ? 1 : 0,
            time_us: t, frames: [] });
        t += 100;
    }
    return JSON.stringify({ segments: [], device_traces: [trace] });
}

plan(15);
let ctx;
try {
    const dir = mkdtempSync(join(tmpdir(), 'memtrace-compare-'));
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    const a = join(dir, 'a.json'), b = join(dir, 'b.json');
    writeFileSync(a, snapshot([['weights', 1000], ['acts', 500], ['cache', 400], ['old', 128]], ['acts', 'cache', 'old']));
    writeFileSync(b, snapshot([['weights', 1000], ['acts', 800], ['cache', 50], ['extra', 256]], ['acts']));
    const report = join(dir, 'report.html');
    execFileSync(memtrace, ['html', a, b, '-o', report]);

    ctx = await launch(pw);
    const page = ctx.pages()[0] || await ctx.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(pathToFileURL(report).href);
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 60000 });
    is(await page.evaluate(() => document.body.dataset.state), 'ready', 'the report with two files opens');
    is(await page.evaluate(() => document.querySelector('#tabs button.active').dataset.view), 'compare',
        'two files open in the compare view');
    is(await page.evaluate(() => JSON.parse(document.getElementById('compare').dataset.peaks)), [2028, 2106],
        'both files are drawn on one axis, each to its peak');
    /* The curves' pixels: A's colour and B's both appear on the chart. */
    const colours = await page.evaluate(() => {
        const c = document.getElementById('compare'), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        const seen = new Set();
        for (let i = 0; i < d.length; i += 4)
            seen.add(`${d[i]},${d[i + 1]},${d[i + 2]},${d[i + 3]}`);
        return [seen.has('61,111,182,255'), seen.has('192,57,43,255')];
    });
    is(colours, [true, true], "A's line and B's line are drawn");
    const rows = await page.evaluate(() => Array.from(document.querySelectorAll('#compare-table tbody tr'),
        (tr) => [tr.className, Number(tr.dataset.delta), tr.cells[4].innerText.split('\n')[0]]));
    is(rows, [['shrank', -350, '#0 alloc_cache (model.py:10)'], ['grew', 300, '#0 alloc_acts (model.py:10)'],
        ['new', 256, '#0 alloc_extra (model.py:10)'], ['gone', -128, '#0 alloc_old (model.py:10)']],
    'the stacks that differ at the peak, both directions, largest first; the weights are not listed');
    const summary = await page.evaluate(() => document.getElementById('compare-summary').textContent);
    ok(summary.includes('4 stacks differ: 2 grew or are new (+556 B), 2 shrank or are gone (-478 B)'),
        'the summary counts both directions', summary);
    await screenshot(page, 'compare');

    /* From B to A the differences turn round. */
    await page.selectOption('#compare-a', '1');
    await page.selectOption('#compare-b', '0');
    await page.waitForTimeout(100);
    const back = await page.evaluate(() => Array.from(document.querySelectorAll('#compare-table tbody tr'),
        (tr) => [tr.className, Number(tr.dataset.delta)]));
    is(back, [['grew', 350], ['shrank', -300], ['gone', -256], ['new', 128]], 'swapped, every change is reversed');

    /* The stream selector: stream 1 alone. */
    await page.selectOption('#compare-a', '0');
    await page.selectOption('#compare-b', '1');
    await page.selectOption('#stream', '1');
    await page.waitForFunction(() => document.getElementById('compare').dataset.peaks === '[400,306]', null,
        { timeout: 10000 }).catch(() => {});
    is(await page.evaluate(() => JSON.parse(document.getElementById('compare').dataset.peaks)), [400, 306],
        'stream 1: each file drawn to the peak of its stream-1 blocks');
    is(await page.evaluate(() => Array.from(document.querySelectorAll('#compare-table tbody tr'),
        (tr) => [tr.className, Number(tr.dataset.delta), tr.cells[4].innerText.split('\n')[0]])),
    [['shrank', -350, '#0 alloc_cache (model.py:10)'], ['new', 256, '#0 alloc_extra (model.py:10)']],
    'stream 1: only the cache and the extra differ');
    await screenshot(page, 'compare-stream-1');
    await page.selectOption('#stream', '');

    /* The file selector: the other views show the chosen file. */
    ok(await page.evaluate(() => !document.getElementById('file-select').hidden &&
        document.getElementById('file-select').options.length === 2), 'a file selector with both files');
    await page.click('#tabs button[data-view="timeline"]');
    is(await page.evaluate(() => memtraceViewer.frame().top), 2028, 'the timeline shows A first');
    await page.selectOption('#file-select', '1');
    await page.waitForTimeout(100);
    is([await page.evaluate(() => memtraceViewer.frame().top),
        await page.evaluate(() => document.getElementById('file-name').textContent)], [2106, 'b.json'],
    'choosing B shows B');

    /* A category is matched by its name in each file. */
    const gen = genFiles();
    await page.setInputFiles('#file-input', [join(gen, 'basic.memtrace'), join(gen, 'streams.memtrace')]);
    await page.waitForFunction(() => document.body.dataset.state === 'ready' &&
        document.getElementById('file-name').textContent === 'basic.memtrace', null, { timeout: 60000 });
    await page.click('#tabs button[data-view="compare"]');
    await page.selectOption('#category', '9');
    await page.waitForFunction(() => document.getElementById('compare').dataset.peaks === JSON.stringify([64 * 1024 * 1024, 0]),
        null, { timeout: 10000 }).catch(() => {});
    is(await page.evaluate(() => JSON.parse(document.getElementById('compare').dataset.peaks)), [64 * 1024 * 1024, 0],
        'category weights: basic.memtrace holds 64 MiB of them, streams.memtrace none');
    is(await page.evaluate(() => Array.from(document.querySelectorAll('#compare-table tbody tr'),
        (tr) => [tr.className, Number(tr.dataset.delta), tr.cells[4].innerText.split('\n')[0]])),
    [['gone', -64 * 1024 * 1024, '#0 alloc_weights (model.c:12)']], 'category weights: only the weights differ, gone');
    is(errors, [], 'no error on the page');
    await ctx.close();
    done();
} catch (e) {
    if (ctx)
        await ctx.close().catch(() => {});
    bail(e);
}
