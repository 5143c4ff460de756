// views-t: the views beside the timeline on gen-web's basic.memtrace: reserved vs
// allocated (peaks 256 MiB and 96.8 MiB), memory at the peak (one segment holding
// the 202 blocks live then), the stacks live at the peak, and the file's metadata
// and annotations; a screenshot of each.
import { bail, done, genFiles, is, join, launch, loadFile, needBrowser, ok, openViewer, plan,
    screenshot } from './lib.mjs';

const MIB = 1024 * 1024;
const pw = needBrowser();
plan(6);
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
    await tab('peak');
    const rows = await page.evaluate(() => Array.from(document.querySelectorAll('#peak-table tbody tr'),
        (tr) => [tr.cells[0].textContent, tr.cells[1].textContent, tr.cells[2].querySelector('.frame').textContent]));
    is(rows, [['64.0 MiB', '1', 'alloc_weights (model.c:12)'], ['32.0 MiB', '1', 'alloc_activations (layers.c:77)'],
        ['800.0 KiB', '200', 'small_tensor (tensors.c:5)']], 'the peak table: three stacks, largest first');
    ok((await page.evaluate(() => document.getElementById('peak-summary').textContent)).includes('event 203'),
        'the peak is event 203, as memtrace summary says');
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
