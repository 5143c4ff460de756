// controls-t: the viewer's controls on gen-web's basic.memtrace (64 MiB of weights
// from +1 ms, stack 3; 32 MiB of activations per 10 ms step, stack 4; 200 blocks of
// 4 KiB, stack 5): the keyboard shortcuts and their help box, the minimap, the
// tooltip's stream, search by address, by frame text and by stack, the peak table's
// sorting and its link to the timeline; the category selector in every view (the
// weights are in category "weights", the rest in "activations"); the device kept in
// the URL (devices.memtrace); a file dropped on the page, with the progress shown while
// it loads; and a snapshot's allocator settings in the file view.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { bail, done, genFiles, is, join, launch, loadFile, needBrowser, ok, openViewer, plan,
    screenshot } from './lib.mjs';

const MIB = 1024 * 1024, T0 = 1e9, SPAN = 102e6;
const pw = needBrowser();
plan(29);
let ctx;
try {
    const gen = genFiles();
    ctx = await launch(pw);
    const page = await openViewer(ctx);
    is(await loadFile(page, join(gen, 'basic.memtrace')), 'ready', 'basic.memtrace loads');
    const view = () => page.evaluate(() => ({ ...memtraceViewer.state.view }));
    /* Input changes the view at once; the frame that shows it comes on the next
     * animation frame. */
    const settled = () => page.waitForFunction(() => memtraceViewer.settled(), null, { timeout: 10000 }).catch(() => {});
    const key = async (k) => {
        await page.keyboard.press(k);
        await settled();
    };

    await page.keyboard.press('?');
    const help = await page.evaluate(() => [document.getElementById('help').hidden, document.getElementById('help').innerText]);
    ok(!help[0] && help[1].includes('zoom time in around the middle') && help[1].includes('shift+wheel'),
        '? opens the list of shortcuts', help[1]);
    await screenshot(page, 'help');
    await page.keyboard.press('Escape');
    ok(await page.evaluate(() => document.getElementById('help').hidden), 'Escape closes it');

    const v0 = await view();
    await key('+');
    const v1 = await view();
    ok(Math.abs(v1.t1 - v1.t0 - (v0.t1 - v0.t0) / 2) < 1 && Math.abs(v1.t0 + v1.t1 - v0.t0 - v0.t1) < 2,
        '+ halves the range around its middle', JSON.stringify([v0, v1]));
    await key('ArrowRight');
    const v2 = await view();
    ok(Math.abs(v2.t0 - v1.t0 - (v1.t1 - v1.t0) / 10) < 1 && Math.abs(v2.t1 - v2.t0 - (v1.t1 - v1.t0)) < 1,
        'the right arrow pans by a tenth of the range', JSON.stringify([v1, v2]));

    /* The minimap: a press centres the range there. */
    const mm = await page.evaluate(() => { const r = document.getElementById('minimap').getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; });
    await page.mouse.click(mm[0] + 78 + 0.25 * (mm[2] - 90), mm[1] + mm[3] / 2);
    await settled();
    const v3 = await view();
    ok(Math.abs((v3.t0 + v3.t1) / 2 - 0.25 * SPAN) < SPAN / 100 && Math.abs(v3.t1 - v3.t0 - (v1.t1 - v1.t0)) < 1,
        'a click on the minimap centres the range at that time', JSON.stringify(v3));
    await key('0');
    is([(await view()).t0, (await view()).t1], [0, SPAN], '0 shows the whole run again');
    await key('3');
    is(await page.evaluate(() => document.querySelector('#tabs button.active').dataset.view), 'attime', '3 opens the third view');
    await key('1');

    /* The tooltip's rows, the stream among them. */
    const at = (t, bytes) => page.evaluate(([t, b]) => memtraceViewer.toScreen(t, b), [t, bytes]);
    const pixel = (p) => page.evaluate(([x, y]) => {
        const c = document.getElementById('timeline'), r = c.getBoundingClientRect();
        return Array.from(c.getContext('2d').getImageData(Math.round(x - r.left), Math.round(y - r.top), 1, 1).data).join();
    }, [p.x, p.y]);
    const weights = await at(T0 + 5e6, 32 * MIB), acts = await at(T0 + 6e6, 80 * MIB);
    await page.mouse.move(weights.x, weights.y);
    const rows = await page.evaluate(() => Object.fromEntries(Array.from(document.querySelectorAll('#tooltip tr'),
        (tr) => [tr.cells[0].textContent, tr.cells[1].textContent])));
    is([rows.size, rows.address, rows.stream, rows.device], ['64.0 MiB (67108864 bytes)', '0x7f0000000000', '0x7', '0'],
        'the tooltip: size, address, stream and device');
    await page.mouse.move(0, 0);
    const colours = [await pixel(weights), await pixel(acts)];
    /* Each band: its own colour, or dimmed (light grey, under the shade of the
     * annotation "epoch 1"). */
    const state = (p, i) => (p === colours[i] ? 'colour' : p.split(',').slice(0, 3).every((v) => v >= 200 && v <= 232) ? 'dim' : p);
    const bands = async () => [state(await pixel(weights), 0), state(await pixel(acts), 1)];

    const search = async (q) => {
        await page.fill('#search', q);
        await page.waitForFunction((q) => (q ? location.hash.includes('q=' + encodeURIComponent(q)) : !location.hash.includes('q=')) &&
            memtraceViewer.settled(), q, { timeout: 10000 }).catch(() => {});
        return [await page.evaluate(() => document.getElementById('search-result').textContent), ...await bands()];
    };
    is(await search('0x7f0000100000'), ['1 block held 0x7f0000100000, the first from +1.00 ms', 'colour', 'dim'],
        'search by an address inside the weights: they keep their colour, the activations are dimmed');
    await screenshot(page, 'search-address');
    is(await search('layers.c'), ['1 stack match', 'dim', 'colour'], 'search by frame text: the activations\' stack only');
    ok(await page.evaluate(() => location.hash.includes('q=layers.c')), 'the URL keeps the search');
    is(await search(''), ['', 'colour', 'colour'], 'an empty search shows every colour again');

    /* Colour by category: each band takes its category's colour, named in the legend. */
    await page.selectOption('#color-by', 'category');
    await settled();
    /* Under the 12% shade of the annotation "epoch 1", to within rounding. */
    const byCat = await page.evaluate(() => [9, 10].map((k) => MemtraceTimeline.hashColor(k)));
    const near = (p, rgb) => p.split(',').slice(0, 3).every((v, i) => Math.abs(v - (rgb[i] + 0.12 * ([192, 120, 40][i] - rgb[i]))) <= 2);
    const got = [await pixel(weights), await pixel(acts), await page.evaluate(() => document.getElementById('legend').textContent)];
    ok(near(got[0], byCat[0]) && near(got[1], byCat[1]) && got[2].startsWith('weightsactivations'),
        'colour by category: the weights and the activations in their categories\' colours, both in the legend',
        JSON.stringify([got, byCat]));
    await page.selectOption('#color-by', 'stack');
    await settled();

    /* The peak table: sorted by a column on a click, a row leads to the timeline. */
    await page.click('#tabs button[data-view="peak"]');
    const peakRows = () => page.evaluate(() => Array.from(document.querySelectorAll('#peak-table tbody tr'),
        (tr) => tr.cells[2].querySelector('.frame').textContent.split(' ')[0]));
    await page.click('#peak-table th[data-sort="count"]');
    const byCount = await peakRows();
    await page.click('#peak-table th[data-sort="count"]');
    const byCountUp = await peakRows();
    await page.click('#peak-table th[data-sort="stack"]');
    is([byCount, byCountUp, await peakRows()], [['small_tensor', 'alloc_weights', 'alloc_activations'],
        ['alloc_weights', 'alloc_activations', 'small_tensor'], ['alloc_activations', 'alloc_weights', 'small_tensor']],
    'the peak table sorts by blocks (down, then up) and by frame');
    await page.click('#peak-table tbody tr:first-child');
    await settled();
    is([await page.evaluate(() => [document.querySelector('#tabs button.active').dataset.view,
        document.getElementById('search').value, document.getElementById('search-result').textContent]),
    ...await bands()], [['timeline', 'stack:4', 'stack 4: alloc_activations (layers.c:77)'], 'dim', 'colour'],
    'a row of the peak table shows its stack on the timeline, the others dimmed');
    await screenshot(page, 'peak-to-timeline');
    await search('');

    /* The category selector: "activations" leaves the weights out of every view. */
    is(await page.evaluate(() => Array.from(document.querySelectorAll('#category option'), (o) => o.textContent)),
        ['all', 'weights', 'activations'], 'the category selector lists both categories');
    const category = async (name) => {
        const v = await page.evaluate((n) => Array.from(document.querySelectorAll('#category option')).find((o) => o.textContent === n).value, name);
        await page.selectOption('#category', v);
        await page.waitForFunction((v) => (v === '' ? !location.hash.includes('cat=') : location.hash.includes(`cat=${v}`)),
            v, { timeout: 10000 }).catch(() => {});
    };
    const tab = async (v) => {
        await page.click(`#tabs button[data-view="${v}"]`);
        await page.waitForFunction((v) => location.hash.includes(`view=${v}`), v, { timeout: 10000 }).catch(() => {});
    };
    const tops = [];
    for (const name of ['weights', 'activations']) {
        await category(name);
        tops.push(await page.evaluate(() => memtraceViewer.frame().top));
    }
    is(tops, [64 * MIB, 32 * MIB + 200 * 4096], 'timeline: the weights alone hold 64 MiB, the activations 32.8 MiB');
    await tab('reserved');
    is(await page.evaluate(() => { const d = document.getElementById('reserved').dataset; return [Number(d.peakAllocated), Number(d.peakReserved)]; }),
        [32 * MIB + 200 * 4096, 256 * MIB], 'reserved vs allocated: the activations\' peak, in the same 256 MiB of segments');
    await tab('peak');
    is(await page.evaluate(() => Array.from(document.querySelectorAll('#peak-table tbody tr'),
        (tr) => [tr.cells[0].textContent, tr.cells[2].querySelector('.frame').textContent.split(' ')[0]])),
    [['32.0 MiB', 'alloc_activations'], ['800.0 KiB', 'small_tensor']], 'peak: the activations\' two stacks, no weights');
    await tab('attime');
    is(await page.evaluate(() => { const d = document.getElementById('attime').dataset; return [Number(d.segments), Number(d.blocks)]; }),
        [1, 201], 'memory at the activations\' peak: their 201 blocks in the segment');
    await page.selectOption('#category', '');
    is(page.errors, [], 'no errors on the page');

    /* The device is kept in the URL. */
    const page2 = await ctx.newPage();
    page2.errors = [];
    page2.on('pageerror', (e) => page2.errors.push(String(e)));
    await page2.goto(page.url().split('#')[0] + '#view=timeline&dev=1');
    await loadFile(page2, join(gen, 'devices.memtrace'));
    is(await page2.evaluate(() => [document.getElementById('device').value, memtraceViewer.frame().top]), ['1', 2 * MIB],
        'a URL with dev=1 opens on device 1');

    /* A file dropped on the page opens, the progress bar saying how far it got. */
    await page2.evaluate((bytes) => {
        const text = document.getElementById('progress-text');
        window.seenProgress = [];
        new MutationObserver(() => window.seenProgress.push(text.textContent))
            .observe(text, { childList: true, characterData: true, subtree: true });
        const dt = new DataTransfer();
        dt.items.add(new File([new Uint8Array(bytes)], 'streams.memtrace'));
        document.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, [...readFileSync(join(gen, 'streams.memtrace'))]);
    await page2.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 60000 });
    is(await page2.evaluate(() => [document.getElementById('file-name').textContent, memtraceViewer.frame().top]),
        ['streams.memtrace', 24 * MIB], 'a dropped file opens and draws');
    const seen = await page2.evaluate(() => window.seenProgress);
    ok(seen[0] === 'reading 0%' && seen.some((t) => /^(decoding|indexing) 100%$/.test(t)),
        'the progress bar goes from reading 0% to 100%', JSON.stringify(seen));

    /* A snapshot's allocator settings, one row each. */
    const dir = mkdtempSync(join(tmpdir(), 'memtrace-controls-'));
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    const snap = join(dir, 'settings.json');
    writeFileSync(snap, JSON.stringify({ segments: [], device_traces: [[{ action: 'alloc', addr: 4096, size: 512, stream: 0,
        time_us: 10, frames: [] }]], allocator_settings: { expandable_segments: true, max_split_size: 1048576,
        PYTORCH_CUDA_ALLOC_CONF: 'expandable_segments:True' } }));
    is(await loadFile(page2, snap), 'ready', 'a snapshot with allocator settings loads');
    is(await page2.evaluate(() => [memtraceViewer.state.view.t0, memtraceViewer.state.view.t1, memtraceViewer.state.view.device]),
        [0, 1, 0], 'a file opened later shows its whole run, not the range and device in the URL');
    await page2.click('#tabs button[data-view="info"]');
    const settings = await page2.evaluate(() => Object.fromEntries(Array.from(document.querySelectorAll('#info-table tr'),
        (tr) => [tr.cells[0].textContent, tr.cells[1].textContent]).filter((r) => r[0].startsWith('allocator setting'))));
    is(settings, { 'allocator setting expandable_segments': 'true', 'allocator setting max_split_size': '1048576',
        'allocator setting PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True' }, 'the file view lists each allocator setting');
    is(page2.errors, [], 'no errors on the second page');
    await ctx.close();
    done();
} catch (e) {
    if (ctx)
        await ctx.close().catch(() => {});
    bail(e);
}
