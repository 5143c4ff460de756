// views-t: the views beside the timeline on gen-web's basic.memtrace: reserved vs
// allocated (peaks 256 MiB and 96.8 MiB), memory at the peak (one segment holding
// the 202 blocks live then), the stacks live at the peak, and the file's metadata
// and annotations; a screenshot of each. The flame graph of the peak: widths,
// hover and zoom. Memory at a time: the events around the time, chosen by a click,
// and the blocks pending free.
import { bail, done, genFiles, is, join, launch, loadFile, needBrowser, ok, openViewer, plan,
    screenshot } from './lib.mjs';

const MIB = 1024 * 1024;
const pw = needBrowser();
plan(16);
let ctx;
try {
    const gen = genFiles();
    ctx = await launch(pw);
    const page = await openViewer(ctx);
    await loadFile(page, join(gen, 'basic.memtrace'));
    const tab = async (v) => {
        await page.click(`#tabs button[data-view="${v}"]`);
        await page.waitForTimeout(150);
        await screenshot(page, `view-${v}`);
    };
    await tab('reserved');
    is(await page.evaluate(() => { const d = document.getElementById('reserved').dataset; return [d.peakAllocated, d.peakReserved]; }),
        [String(64 * MIB + 32 * MIB + 200 * 4096), String(256 * MIB)], 'reserved vs allocated: both peaks');
    await tab('attime');
    is(await page.evaluate(() => { const d = document.getElementById('attime').dataset; return [d.segments, d.blocks]; }),
        ['1', '202'], 'memory at the peak: 1 segment holding 202 blocks');
    const events = () => page.evaluate(() => Array.from(document.querySelectorAll('#events-table tbody tr'),
        (tr) => [tr.className, ...Array.from(tr.cells, (td) => td.textContent)]));
    const around = await events();
    is([around.length, around[20]], [41, ['chosen', '+2.20 ms', '203', 'alloc', '4.0 KiB', '0x7f00060c7000', 'small_tensor (tensors.c:5)']],
        'memory at a time: 20 events before and after the peak, the peak\'s alloc highlighted');
    is(around[21].slice(2, 5).concat(around[21][6]), ['204', 'free_requested', '32.0 MiB', 'alloc_activations (layers.c:77)'],
        'memory at a time: the next event is the request to free the activations');
    await page.click('#events-table tr[data-ev="204"]');
    await page.waitForTimeout(100);
    const at204 = await page.evaluate(() => { const d = document.getElementById('attime').dataset;
        return [document.getElementById('attime-label').textContent, d.blocks, d.pending,
            document.querySelector('#events-table tr.chosen').dataset.ev]; });
    is(at204, ['+10.00 ms', '202', '1', '204'], 'memory at a time: a click on an event moves the time there; the activations are pending free');
    await screenshot(page, 'view-attime-pending');
    await page.click('#events-table tr[data-ev="205"]');
    await page.waitForTimeout(100);
    is(await page.evaluate(() => { const d = document.getElementById('attime').dataset; return [d.blocks, d.pending]; }),
        ['201', '0'], 'memory at a time: once the free completes the block is gone');
    ok((await page.evaluate(() => document.getElementById('attime-legend').textContent))
        .match(/allocated.*free requested, not completed: 0.*inactive.*rounding/), 'memory at a time: the legend of block states');
    await tab('peak');
    const rows = await page.evaluate(() => Array.from(document.querySelectorAll('#peak-table tbody tr'),
        (tr) => [tr.cells[0].textContent, tr.cells[1].textContent, tr.cells[2].querySelector('.frame').textContent]));
    is(rows, [['64.0 MiB', '1', 'alloc_weights (model.c:12)'], ['32.0 MiB', '1', 'alloc_activations (layers.c:77)'],
        ['800.0 KiB', '200', 'small_tensor (tensors.c:5)']], 'the peak table: three stacks, largest first');
    ok((await page.evaluate(() => document.getElementById('peak-summary').textContent)).includes('event 203'),
        'the peak is event 203, as memtrace summary says');
    const flameRow = (depth) => page.evaluate((d) => Array.from(document.querySelectorAll(`#flame .flame-node[data-depth="${d}"]`),
        (n) => [n.textContent, Number(n.dataset.bytes), Math.round(n.getBoundingClientRect().width)])
        .sort((a, b) => b[2] - a[2]), depth);
    const leaves = await flameRow(3), width = await page.evaluate(() => document.getElementById('flame').clientWidth);
    is(leaves.map((n) => [n[0], n[1]]), [['alloc_weights', 64 * MIB], ['alloc_activations', 32 * MIB], ['small_tensor', 200 * 4096]],
        'flame graph: under main > train_step, alloc_weights is the widest frame, with its 64 MiB');
    ok(Math.abs(leaves[0][2] - width * 64 * MIB / (96 * MIB + 200 * 4096)) <= 2,
        'flame graph: its width is its share of the peak', JSON.stringify([leaves, width]));
    const box = await page.locator('#flame .flame-node[data-depth="3"]', { hasText: 'alloc_weights' }).boundingBox();
    await page.mouse.move(box.x + 5, box.y + 5);
    const tip = await page.evaluate(() => document.getElementById('tooltip').innerText);
    ok(tip.includes('alloc_weights (model.c:12)') && tip.includes('67108864 bytes') && tip.includes('66.1% of the peak'),
        'flame graph: hover shows the frame, its bytes and its share', tip);
    await page.locator('#flame .flame-node[data-depth="3"]', { hasText: 'alloc_activations' }).click();
    const zoomed = await flameRow(3);
    is([zoomed.length, zoomed[0][0], zoomed[0][2]], [1, 'alloc_activations', width], 'flame graph: a click zooms into the frame');
    await screenshot(page, 'view-peak-zoomed');
    await page.locator('#flame .flame-node[data-depth="0"]').click();
    is((await flameRow(3)).length, 3, 'flame graph: a click on the root shows every stack again');
    await tab('info');
    const info = await page.evaluate(() => document.getElementById('view-info').innerText);
    ok(info.includes('testhost') && info.includes('Test GPU') && /alloc\s+2011/.test(info) && /free_completed\s+2010/.test(info),
        'file view: metadata and entries by action', info.slice(0, 1500));
    ok(/\+500\.0 us\s+start epoch 1/.test(info) && /\+102 ms\s+end epoch 1/.test(info), 'file view: the annotations', info);
    await ctx.close();
    done();
} catch (e) {
    if (ctx)
        await ctx.close().catch(() => {});
    bail(e);
}
