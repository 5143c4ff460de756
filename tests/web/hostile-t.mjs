// hostile-t: strings from a file are text, never HTML. gen-web's hostile.memtrace
// puts <script>, <img onerror>, <svg onload>, <iframe> and event attributes in frame
// names, file names, categories, annotations, the source and the metadata, and a copy
// of it has such a file name; every view is shown, hovered and pinned, and no markup
// from the file may become an element or run.
import { bail, done, genFiles, is, join, launch, loadFile, needBrowser, ok, openViewer, plan,
    screenshot } from './lib.mjs';

const MIB = 1024 * 1024, T0 = 1e9;
const pw = needBrowser();
plan(10);
let ctx;
try {
    const gen = genFiles();
    ctx = await launch(pw);
    const page = await openViewer(ctx);
    const elements = () => page.evaluate(() => document.querySelectorAll('img, svg, iframe, b, script:not([src])').length);
    const before = await elements(); /* the page's own <b> */
    is(await loadFile(page, join(gen, '<img src=x onerror="window.__hostile=12">.memtrace')), 'ready', 'the file with markup in its name loads');
    is(await page.evaluate(() => document.getElementById('file-name').textContent),
        '<img src=x onerror="window.__hostile=12">.memtrace', 'its name is shown as text');
    is(await loadFile(page, join(gen, 'hostile.memtrace')), 'ready', 'hostile.memtrace loads');
    const p = await page.evaluate(([t, b]) => memtraceViewer.toScreen(t, b), [T0 + 5e6, 32 * MIB]);
    await page.mouse.move(p.x, p.y);
    await page.mouse.click(p.x, p.y);
    const tip = await page.evaluate(() => document.getElementById('tooltip').textContent);
    ok(tip.includes('<script>window.__hostile=4</script>alloc_weights (<img src=x onerror="window.__hostile=5">model.c:12)') &&
        tip.includes('<img src=x onerror="window.__hostile=8">weights'),
    'the pinned tooltip shows frame, file and category names as text', tip);
    await page.keyboard.press('Escape');
    /* The category selector and the search's answer hold names from the file. */
    is(await page.evaluate(() => Array.from(document.querySelectorAll('#category option'), (o) => o.textContent)),
        ['all', '<img src=x onerror="window.__hostile=8">weights', '<script>window.__hostile=9</script>activations'],
        'the category selector shows category names as text');
    await page.selectOption('#category', '10');
    await page.fill('#search', 'stack:3');
    await page.waitForFunction(() => document.getElementById('search-result').textContent.startsWith('stack 3'), null,
        { timeout: 10000 }).catch(() => {});
    is(await page.evaluate(() => document.getElementById('search-result').textContent),
        'stack 3: <script>window.__hostile=4</script>alloc_weights (<img src=x onerror="window.__hostile=5">model.c:12)',
        'the search shows the stack it found as text');
    await page.fill('#search', '<script>');
    await page.waitForTimeout(300);
    for (const tab of ['reserved', 'attime', 'peak', 'info', 'timeline']) {
        await page.click(`#tabs button[data-view="${tab}"]`);
        await page.waitForTimeout(100);
    }
    await page.click('#tabs button[data-view="info"]');
    const info = await page.evaluate(() => document.getElementById('view-info').textContent);
    ok(info.includes('<img src=x onerror="window.__hostile=1">') && info.includes('<script>window.__hostile=2</script>') &&
        info.includes('<img src=x onerror="window.__hostile=10">epoch'), 'metadata and annotations are shown as text', info.slice(0, 2000));
    await screenshot(page, 'hostile-info');
    await page.click('#tabs button[data-view="peak"]');
    const peak = await page.evaluate(() => document.getElementById('peak-table').textContent);
    ok(peak.includes('<svg onload="window.__hostile=7">alloc_activations'), 'the peak table shows frames as text', peak.slice(0, 2000));
    is(await elements(), before, 'no element from the file exists in the page');
    is(await page.evaluate(() => String(window.__hostile)), 'undefined', 'no script from the file ran');
    await ctx.close();
    done();
} catch (e) {
    if (ctx)
        await ctx.close().catch(() => {});
    bail(e);
}
