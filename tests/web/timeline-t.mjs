// timeline-t: the active memory timeline in headless Chromium, from file://, on
// gen-web's basic.memtrace (a 64 MiB block live from +1 ms, ten steps of 10 ms with
// 32 MiB of activations and 200 blocks of 4 KiB freed 8 ms into the step).
import { bail, done, genFiles, is, join, launch, loadFile, needBrowser, ok, openViewer, plan,
    screenshot } from './lib.mjs';

const MIB = 1024 * 1024, T0 = 1e9, BASE = 0x7f0000000000;
const pw = needBrowser();
plan(19);
let ctx;
try {
    const gen = genFiles();
    ctx = await launch(pw);
    const page = await openViewer(ctx);
    is(await loadFile(page, join(gen, 'basic.memtrace')), 'ready', 'basic.memtrace loads');
    const frame = await page.evaluate(() => memtraceViewer.frame());
    is(frame.top, 64 * MIB + 32 * MIB + 200 * 4096, 'the vertical scale fits the peak, 96.8 MiB');
    ok(frame.drawn > 1000 && frame.aggregated > 100000, 'bands drawn per column, small blocks summed',
        JSON.stringify(frame));

    /* The pixel in the middle of the weights' band has the colour of its stack. */
    const at = (t, bytes) => page.evaluate(([t, b]) => memtraceViewer.toScreen(t, b), [t, bytes]);
    const pixel = (p) => page.evaluate(([x, y]) => {
        const c = document.getElementById('timeline'), r = c.getBoundingClientRect();
        return Array.from(c.getContext('2d').getImageData(Math.round(x - r.left), Math.round(y - r.top), 1, 1).data);
    }, [p.x, p.y]);
    const pw1 = await at(T0 + 5e6, 32 * MIB), pw2 = await at(T0 + 50e6, 10 * MIB);
    const c1 = await pixel(pw1), c2 = await pixel(pw2);
    ok(c1.join() === c2.join() && c1.join() !== '255,255,255,255', 'the weights band is drawn in one colour along its life', `${c1} ${c2}`);
    const gap = await pixel(await at(T0 + 11e6, 80 * MIB));
    /* Empty, but inside the range of the annotation "epoch 1": its shade over white. */
    const shade = [192, 120, 40].map((v) => Math.round(255 - 0.12 * (255 - v))).concat(255);
    is(gap, shade, 'nothing above the weights between two steps (the shade of "epoch 1" only)');

    /* Waits until the timeline on screen shows the view the next check needs (or
     * 10 s, and lets the check report what it sees): the page takes input at once
     * but draws on the next animation frame. want: 'bytes zoomed', 'reset', or
     * ['t0' or 't1', a value it must have left]. */
    const settled = (want) => page.waitForFunction((w) => {
        const v = memtraceViewer.state.view;
        return memtraceViewer.settled() && (w === 'bytes zoomed' ? v.yMax !== undefined
            : w === 'reset' ? v.yMax === undefined && v.t0 === 0 : v[w[0]] !== w[1]);
    }, want, { timeout: 10000 }).catch(() => {});
    const tip = () => page.evaluate(() => {
        const t = document.getElementById('tooltip');
        return t.hidden ? '' : t.innerText;
    });
    await page.mouse.move(pw1.x, pw1.y);
    let text = await tip();
    ok(text.includes('64.0 MiB (67108864 bytes)') && text.includes('0x7f0000000000') &&
        text.includes('0x7'), 'hovering the weights shows their size and address', text);
    ok(/alloc_weights \(model\.c:12\)[\s\S]*train_step \(train\.c:40\)[\s\S]*main \(train\.c:100\)/.test(text),
        'and their whole stack, innermost first, with file and line', text);
    ok(text.includes('+1.00 ms (event 2)') && text.includes('never (live at the end)'), 'and when it was allocated and that it is never freed', text);
    const act = await at(T0 + 2e6 + 4e6, 80 * MIB);
    await page.mouse.move(act.x, act.y);
    text = await tip();
    ok(text.includes('32.0 MiB') && text.includes('alloc_activations (layers.c:77)') &&
        text.includes('+2.00 ms (event 3)') && text.includes('+10.00 ms'),
    'hovering the first activations shows 32 MiB, its stack and its free time', text);

    /* Click pins: the tooltip stays when the pointer leaves; Escape releases it. */
    await page.mouse.click(act.x, act.y);
    await page.mouse.move(pw2.x, pw2.y);
    text = await tip();
    ok(text.startsWith('pinned') && text.includes('alloc_activations'), 'a click pins the tooltip', text);
    await screenshot(page, 'timeline-pinned');
    await page.keyboard.press('Escape');
    is(await tip(), '', 'Escape releases the pin');

    /* The grey band of small blocks, then a vertical zoom on it splits it. */
    const small = await at(T0 + 5e6, 96 * MIB + 400 * 1024);
    await page.mouse.move(small.x, small.y);
    text = await tip();
    ok(text.includes('200 allocations too small to draw at this scale, 800.0 KiB in all'), 'hovering the grey band counts what it sums', text);
    await page.keyboard.down('Shift');
    for (let i = 0; i < 3; i++)
        await page.mouse.wheel(0, -1000);
    await page.keyboard.up('Shift');
    await settled('bytes zoomed');
    const f2 = await page.evaluate(() => memtraceViewer.frame());
    ok(f2.top - f2.base < 2 * MIB && f2.aggregated < frame.aggregated, 'shift+wheel zooms the bytes axis and the band splits',
        JSON.stringify(f2));
    /* The block in the middle of the zoomed range, the j-th small one of step 0. */
    const lo = Math.max(f2.base, 96 * MIB), hi = Math.min(f2.top, 96 * MIB + 800 * 1024);
    const j = Math.floor(((lo + hi) / 2 - 96 * MIB) / 4096);
    const one = await at(T0 + 5e6, 96 * MIB + j * 4096 + 2048);
    await page.mouse.move(one.x, one.y);
    text = await tip();
    ok(j > 0 && j < 200 && text.includes('4.0 KiB (4096 bytes)') && text.includes('small_tensor (tensors.c:5)') &&
        text.includes(`0x${(BASE + 96 * MIB + j * 4096).toString(16)}`), 'a block of the band is hovered alone', `j ${j} ${JSON.stringify(f2)}\n${text}`);
    await page.mouse.dblclick(pw2.x, pw2.y);
    await page.keyboard.press('Escape');
    /* The double click resets the view at once but draws on the next frame; until
     * then toScreen() maps bytes by the zoomed axis, off the canvas. */
    await settled('reset');

    /* Wheel zooms around the pointer; the hash keeps the view. */
    const v0 = await page.evaluate(() => ({ ...memtraceViewer.state.view }));
    const mid = await at(T0 + 51e6, 10 * MIB);
    await page.mouse.move(mid.x, mid.y);
    await page.mouse.wheel(0, -400);
    await settled(['t1', v0.t1]);
    const v1 = await page.evaluate(() => ({ ...memtraceViewer.state.view }));
    const span0 = v0.t1 - v0.t0, span1 = v1.t1 - v1.t0;
    ok(span1 < span0 * 0.7 && Math.abs((v1.t0 + v1.t1) / 2 - 51e6) < span1 / 2, 'wheel zooms in around the pointer',
        JSON.stringify([v0, v1]));
    /* The page writes the hash 150 ms after the view settles. */
    await page.waitForFunction((t1) => location.hash.includes(`t1=${t1}`), Math.round(v1.t1), { timeout: 10000 })
        .catch(() => {});
    const hash = await page.evaluate(() => location.hash);
    ok(hash.includes(`t0=${Math.round(v1.t0)}`) && hash.includes(`t1=${Math.round(v1.t1)}`), 'the URL keeps the visible range', hash);

    /* Drag pans by the dragged fraction of the range. */
    await page.mouse.move(mid.x, mid.y);
    await page.mouse.down();
    await page.mouse.move(mid.x - 100, mid.y, { steps: 5 });
    await page.mouse.up();
    await settled(['t0', v1.t0]);
    const v2 = await page.evaluate(() => ({ ...memtraceViewer.state.view }));
    const W = (await page.evaluate(() => memtraceViewer.frame())).W;
    ok(Math.abs(v2.t0 - v1.t0 - (100 / W) * span1) < span1 / 100 && Math.abs(v2.t1 - v2.t0 - span1) < 1,
        'dragging pans the range', JSON.stringify([v1, v2]));
    await screenshot(page, 'timeline-zoomed');

    /* The hash restores the view on a fresh page, once the page has written it. */
    await page.waitForFunction((t0) => location.hash.includes(`t0=${t0}`), Math.round(v2.t0), { timeout: 10000 })
        .catch(() => {});
    const page2 = await ctx.newPage();
    await page2.goto(page.url());
    await loadFile(page2, join(gen, 'basic.memtrace'));
    const v3 = await page2.evaluate(() => ({ ...memtraceViewer.state.view }));
    ok(Math.abs(v3.t0 - v2.t0) < 2 && Math.abs(v3.t1 - v2.t1) < 2, 'a page opened on that URL shows the same range',
        JSON.stringify([v2, v3]));
    is(page.errors, [], 'no errors on the page');
    await ctx.close();
    done();
} catch (e) {
    if (ctx)
        await ctx.close().catch(() => {});
    bail(e);
}
