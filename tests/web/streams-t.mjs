// streams-t: the device and stream selectors in every view, and annotation ranges.
// gen-web's streams.memtrace: peaks of 24 MiB over both streams (event 5), 16 MiB on
// stream 1 (event 3) and 12 MiB on stream 2 (event 8); reserved 48, 32 and 16 MiB;
// "phase A" shaded from 1.5 ms to 4 ms; and at the peak 512 + 4096 bytes past those
// requested, 512 of them on stream 1 and 4096 on stream 2. devices.memtrace: device 0
// holds 12 MiB in 32 reserved and reports 40 MiB used, device 1 holds 2 MiB in 16 and
// reports 20; RSS up to 130 MiB; one out-of-memory event, on device 0.
import { bail, done, genFiles, is, join, launch, loadFile, needBrowser, ok, openViewer, plan,
    screenshot } from './lib.mjs';

const MIB = 1024 * 1024;
const pw = needBrowser();
plan(27);
let ctx;
try {
    const gen = genFiles();
    ctx = await launch(pw);
    const page = await openViewer(ctx);
    is(await loadFile(page, join(gen, 'streams.memtrace')), 'ready', 'streams.memtrace opens');
    is(await page.evaluate(() => Array.from(document.querySelectorAll('#stream option'), (o) => o.textContent)),
        ['all', '0x1', '0x2'], 'the stream selector: all, or either stream');
    const top = () => page.evaluate(() => memtraceViewer.frame().top);
    const choose = async (v, sel = '#stream', key = 'stream') => {
        await page.selectOption(sel, v);
        /* The page writes the hash on a timer, which a loaded machine may run late;
         * the view has drawn by then. */
        await page.waitForFunction(([v, key]) => (v === '' ? !location.hash.includes(`${key}=`)
            : location.hash.includes(`${key}=${v}`)), [v, key], { timeout: 10000 }).catch(() => {});
    };
    const tab = async (v) => {
        await page.click(`#tabs button[data-view="${v}"]`);
        await page.waitForFunction((v) => location.hash.includes(`view=${v}`), v, { timeout: 10000 }).catch(() => {});
    };
    /* Each view's figures for all streams, stream 1 and stream 2. */
    const perStream = async (figures) => {
        const out = [];
        for (const v of ['', '1', '2']) {
            await choose(v);
            out.push(await page.evaluate(figures));
        }
        return out;
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
    ok(summary.includes('on stream 0x2: 12.0 MiB') && summary.includes('event 8'), 'peak of stream 2: 12 MiB at event 8', summary);
    await choose('1');
    [summary, rows] = await peak();
    ok(summary.includes('16.0 MiB') && summary.includes('event 3') &&
        JSON.stringify(rows) === JSON.stringify([['10.0 MiB', 'alloc_weights (model.c:12)'], ['6.0 MiB', 'alloc_activations (layers.c:77)']]),
        'peak of stream 1: 16 MiB at event 3, in its two blocks', JSON.stringify([summary, rows]));
    await choose('');
    [summary, rows] = await peak();
    ok(summary.includes('24.0 MiB') && summary.includes('event 5') && rows.length === 3, 'all streams: the file\'s peak', summary);

    await tab('reserved');
    is(await perStream(() => { const d = document.getElementById('reserved').dataset; return [Number(d.peakAllocated), Number(d.peakReserved)]; }),
        [[24 * MIB, 48 * MIB], [16 * MIB, 32 * MIB], [12 * MIB, 16 * MIB]],
        'reserved vs allocated: the peaks of both streams, of stream 1, of stream 2');
    ok((await page.evaluate(() => document.getElementById('reserved').dataset.top)) === String(16 * MIB),
        'reserved vs allocated: stream 2 alone is drawn to its own 16 MiB');
    await screenshot(page, 'streams-reserved-2');
    await tab('attime');
    is(await perStream(() => { const d = document.getElementById('attime').dataset;
        return [document.getElementById('attime-label').textContent, Number(d.segments), Number(d.blocks), Number(d.waste)]; }),
    [['+3.00 ms', 2, 3, 512 + 4096], ['+2.00 ms', 1, 2, 512], ['+6.00 ms', 1, 2, 4096]],
    'memory at each peak: both streams at 3 ms, stream 1 at 2 ms, stream 2 at 6 ms, with their segments, blocks and rounding');
    is(await page.evaluate(() => [document.getElementById('events-table').dataset.chosen,
        Array.from(document.querySelectorAll('#events-table tbody tr'), (tr) => tr.dataset.ev)]),
    ['8', ['2', '4', '5', '6', '8', '9', '10', '11']], 'memory at a time, stream 2: its own events and the annotations only');
    await screenshot(page, 'streams-attime-2');
    await choose('');

    await tab('timeline');
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
    /* The mark "checkpoint" at 6.5 ms: a dashed line in the annotations' colour above
     * the 22 MiB live then, its name beside it. */
    const mark = await page.evaluate(() => {
        const c = document.getElementById('timeline'), g = c.getContext('2d'), W = c.width - 90;
        const x = Math.round(78 + (6.5e6 / 8e6) * W), d = g.getImageData(x, 20, 1, 30).data;
        let hits = 0;
        for (let i = 0; i < d.length; i += 4)
            hits += Math.abs(d[i] - 92) + Math.abs(d[i + 1] - 47) + Math.abs(d[i + 2] - 192) < 40;
        return hits;
    });
    ok(mark >= 6 && mark < 30, 'timeline: the mark is a dashed line', String(mark));
    await screenshot(page, 'streams-timeline');
    await tab('attime');
    is(await page.evaluate(() => document.getElementById('attime').dataset.waste), String(512 + 4096),
        'memory at the peak: 4.5 KiB past the bytes requested');
    await screenshot(page, 'streams-attime');

    /* Two devices: each view shows the one chosen; the reserved view draws the
     * counters and marks the out-of-memory event. */
    const page2 = await openViewer(ctx);
    is(await loadFile(page2, join(gen, 'devices.memtrace')), 'ready', 'devices.memtrace opens');
    is(await page2.evaluate(() => Array.from(document.querySelectorAll('#device option'), (o) => o.textContent)),
        ['device 0', 'device 1'], 'the device selector lists both devices');
    const dev = async (v) => {
        await page2.selectOption('#device', v);
        await page2.waitForFunction((v) => location.hash.includes(`dev=${v}`), v, { timeout: 10000 }).catch(() => {});
    };
    const tab2 = async (v) => {
        await page2.click(`#tabs button[data-view="${v}"]`);
        await page2.waitForFunction((v) => location.hash.includes(`view=${v}`), v, { timeout: 10000 }).catch(() => {});
    };
    const perDevice = async (figures) => {
        const out = [];
        for (const v of ['0', '1']) {
            await dev(v);
            out.push(await page2.evaluate(figures));
        }
        await dev('0');
        return out;
    };
    is(await perDevice(() => [memtraceViewer.frame().top, Number(document.getElementById('timeline').dataset.ooms)]),
        [[12 * MIB, 1], [2 * MIB, 0]], 'timeline: device 0 holds up to 12 MiB and ran out of memory once, device 1 2 MiB');
    await tab2('reserved');
    const reserved = () => { const d = document.getElementById('reserved').dataset;
        return [d.peakAllocated, d.peakReserved, d.usedMax, d.rssMax, d.ooms].map(Number); };
    is(await perDevice(reserved), [[12 * MIB, 32 * MIB, 40 * MIB, 130 * MIB, 1], [2 * MIB, 16 * MIB, 20 * MIB, 130 * MIB, 0]],
        'reserved vs allocated per device: peaks, the used memory it reports, the RSS, its out-of-memory events');
    /* The lines' pixels: used memory (green) at 2.5 ms and 40 MiB, RSS (orange) at
     * 3.5 ms and 120 MiB, the out-of-memory mark (red) at 3.5 ms above
     * the reserved bytes. */
    const near = (t, bytes, rgb) => page2.evaluate(([t, bytes, rgb]) => {
        const c = document.getElementById('reserved'), g = c.getContext('2d');
        const W = c.width - 90, H = c.height - 42, top = Number(c.dataset.top);
        const x = Math.round(78 + (t / 5e6) * W), y = Math.round(16 + H - bytes * (H - 1) / top);
        const d = g.getImageData(x - 4, y - 3, 9, 7).data;
        for (let i = 0; i < d.length; i += 4)
            if (Math.abs(d[i] - rgb[0]) + Math.abs(d[i + 1] - rgb[1]) + Math.abs(d[i + 2] - rgb[2]) < 30)
                return true;
        return false;
    }, [t, bytes, rgb]);
    is([await near(2.5e6, 40 * MIB, [46, 139, 87]), await near(3.6e6, 120 * MIB, [214, 137, 16]),
        await near(3.5e6, 70 * MIB, [192, 57, 43])], [true, true, true],
    'reserved vs allocated: the used-memory line, the RSS line and the out-of-memory mark are drawn where they belong');
    /* Hovering the chart reads its column out; at the out-of-memory mark, the event
     * with the bytes asked for, the device's free bytes and the stack's function. */
    const hover = async (t) => {
        const box = await page2.locator('#reserved').boundingBox();
        const dims = await page2.evaluate(() => { const c = document.getElementById('reserved');
            return [c.width - 90, c.height - 42]; });
        await page2.mouse.move(box.x + 78 + (t / 5e6) * dims[0], box.y + 16 + dims[1] / 2);
        return page2.evaluate(() => { const tip = document.getElementById('tooltip');
            return tip.hidden ? '' : tip.innerText.replace(/\s+/g, ' '); });
    };
    const atOom = await hover(3.5e6);
    ok(/allocated on device 0 12\.0 MiB/.test(atOom) && /reserved on device 0 32\.0 MiB/.test(atOom) &&
        /device-reported used 40\.0 MiB/.test(atOom) && /process RSS 120\.0 MiB/.test(atOom) &&
        /out of memory at \+3\.50? ms \(event \d+\): 1\.0 GiB asked for, 8\.0 MiB free on the device, from alloc_activations \(layers\.c:77\)/.test(atOom),
    `hovering the out-of-memory mark: the column's levels and the event (${atOom})`);
    await screenshot(page2, 'devices-reserved-hover');
    const before = await hover(1.25e6);
    ok(/time \+1\.25 ms/.test(before) && /allocated on device 0 8\.0 MiB/.test(before) &&
        /process RSS 100\.0 MiB/.test(before) && !before.includes('out of memory'),
        `hovering at 1.25 ms: 8 MiB allocated, no out-of-memory event (${before})`);
    await page2.mouse.move(0, 0);
    await screenshot(page2, 'devices-reserved');
    await tab2('peak');
    is(await perDevice(() => document.getElementById('peak-summary').textContent.replace(/ at .*/, '')),
        ['Peak of allocated memory on device 0: 12.0 MiB (12582912 bytes)', 'Peak of allocated memory on device 1: 2.0 MiB (2097152 bytes)'],
        'peak: each device\'s own');
    await tab2('attime');
    is(await perDevice(() => { const d = document.getElementById('attime').dataset; return [Number(d.segments), Number(d.blocks)]; }),
        [[1, 2], [1, 1]], 'memory at each device\'s peak: its segment and its blocks');
    ok((await page2.evaluate(() => document.getElementById('events-table').innerText)).includes('oom'),
        'memory at a time on device 0 lists the out-of-memory event');
    is(page2.errors, [], 'no errors on the page');
    await ctx.close();
    done();
} catch (e) {
    if (ctx)
        await ctx.close().catch(() => {});
    bail(e);
}
