// streams-t: the stream selector and annotation ranges on gen-web's streams.memtrace:
// peaks of 24 MiB over both streams (event 4), 16 MiB on stream 1 (event 3) and
// 12 MiB on stream 2 (event 7); "phase A" shaded from 1.5 ms to 4 ms; and at the
// peak 512 + 4096 bytes past those requested.
import { bail, done, genFiles, is, join, launch, loadFile, needBrowser, ok, openViewer, plan,
    screenshot } from './lib.mjs';

const MIB = 1024 * 1024;
const pw = needBrowser();
plan(11);
let ctx;
try {
    const gen = genFiles();
    ctx = await launch(pw);
    const page = await openViewer(ctx);
    is(await loadFile(page, join(gen, 'streams.memtrace')), 'ready', 'streams.memtrace opens');
    is(await page.evaluate(() => Array.from(document.querySelectorAll('#stream option'), (o) => o.textContent)),
        ['all', '0x1', '0x2'], 'the stream selector: all, or either stream');
    const top = () => page.evaluate(() => memtraceViewer.frame().top);
    const choose = async (v) => {
        await page.selectOption('#stream', v);
        /* The page writes the hash on a timer, which a loaded machine may run late. */
        await page.waitForFunction((v) => (v === '' ? !location.hash.includes('stream=')
            : location.hash.includes(`stream=${v}`)), v, { timeout: 10000 }).catch(() => {});
    };
    const tops = [await top()];
    await choose('1');
    tops.push(await top());
    await choose('2');
    tops.push(await top());
    is(tops, [24 * MIB, 16 * MIB, 12 * MIB], 'timeline: the highest level over both streams, stream 1, stream 2');
    ok(await page.evaluate(() => location.hash.includes('stream=2')), 'the stream is kept in the URL');
    await page.click('#tabs button[data-view="peak"]');
    await page.waitForTimeout(150);
    const peak = () => page.evaluate(() => [document.getElementById('peak-summary').textContent,
        Array.from(document.querySelectorAll('#peak-table tbody tr'),
            (tr) => [tr.cells[0].textContent, tr.cells[2].querySelector('.frame').textContent])]);
    let [summary, rows] = await peak();
    is(rows, [['8.0 MiB', 'small_tensor (tensors.c:5)'], ['4.0 MiB', 'alloc_activations (layers.c:77)']],
        'peak of stream 2: its two blocks');
    ok(summary.includes('on stream 0x2: 12.0 MiB') && summary.includes('event 7'), 'peak of stream 2: 12 MiB at event 7', summary);
    await choose('1');
    [summary, rows] = await peak();
    ok(summary.includes('16.0 MiB') && summary.includes('event 3') &&
        JSON.stringify(rows) === JSON.stringify([['10.0 MiB', 'alloc_weights (model.c:12)'], ['6.0 MiB', 'alloc_activations (layers.c:77)']]),
        'peak of stream 1: 16 MiB at event 3, in its two blocks', JSON.stringify([summary, rows]));
    await choose('');
    [summary, rows] = await peak();
    ok(summary.includes('24.0 MiB') && summary.includes('event 4') && rows.length === 3, 'all streams: the file\'s peak', summary);

    await page.click('#tabs button[data-view="timeline"]');
    await page.waitForTimeout(150);
    is(await page.evaluate(() => JSON.parse(document.getElementById('timeline').dataset.ranges)), [[1.5e6, 4e6]],
        'timeline: "phase A" is one range, 1.5 ms to 4 ms');
    /* Above the blocks (16 MiB of 24 at 2.5 ms, 18 at 5.5 ms): shaded inside the
     * range, white outside it. */
    const px = await page.evaluate(() => {
        const c = document.getElementById('timeline'), g = c.getContext('2d'), W = c.width - 90;
        const at = (t) => Array.from(g.getImageData(Math.round(78 + (t / 8e6) * W), 26, 1, 1).data);
        return [at(2.5e6), at(5.5e6)];
    });
    ok(px[0].join() !== '255,255,255,255' && px[1].join() === '255,255,255,255',
        'timeline: the range is shaded, the time after it is not', JSON.stringify(px));
    await screenshot(page, 'streams-timeline');
    await page.click('#tabs button[data-view="attime"]');
    await page.waitForTimeout(150);
    is(await page.evaluate(() => document.getElementById('attime').dataset.waste), String(512 + 4096),
        'memory at the peak: 4.5 KiB past the bytes requested');
    await screenshot(page, 'streams-attime');
    await ctx.close();
    done();
} catch (e) {
    if (ctx)
        await ctx.close().catch(() => {});
    bail(e);
}
