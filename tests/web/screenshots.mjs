// screenshots: the README's pictures of the web viewer, taken from gen-web's files in
// headless Chromium, one per view, cropped, into docs/images/:
//   make -C build check TESTS=   # builds tests/web/gen-web and memtrace
//   top_builddir=build node tests/web/screenshots.mjs
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { builddir, genFiles, join, launch, loadFile, needBrowser, openViewer, pathToFileURL,
    srcdir } from './lib.mjs';

const out = join(srcdir, 'docs', 'images');
mkdirSync(out, { recursive: true });
const pw = needBrowser();
const gen = genFiles();
const ctx = await launch(pw);
const page = await openViewer(ctx);
await page.setViewportSize({ width: 1100, height: 720 });

/* Crops to the header and the element with id (and what floats over it). */
async function shot(name, id, extra) {
    const box = await page.locator('#' + id).boundingBox();
    const tip = await page.locator('#tooltip').isVisible() ? await page.locator('#tooltip').boundingBox() : null;
    const bottom = Math.max(box.y + box.height, tip ? tip.y + tip.height : 0);
    const height = Math.min(720, Math.ceil(bottom + (extra || 0) + 8));
    await page.screenshot({ path: join(out, name), clip: { x: 0, y: 0, width: 1100, height } });
    console.log(`docs/images/${name}`);
}
const tab = async (v) => {
    await page.click(`#tabs button[data-view="${v}"]`);
    await page.waitForTimeout(200);
};

await loadFile(page, join(gen, 'basic.memtrace'));
await page.waitForTimeout(200);
/* Pin the 64 MiB of weights in the middle of the run. */
const at = await page.evaluate(() => memtraceViewer.toScreen(memtraceViewer.state.model.t_min + 45e6, 48 * 1024 * 1024));
await page.mouse.click(at.x, at.y);
await page.waitForTimeout(200);
await shot('web-timeline.png', 'view-timeline');
await page.keyboard.press('Escape');
/* Back to the peak's time (the click above chose 45 ms), then the next event. */
await page.evaluate(() => { memtraceViewer.state.at = null; });
await tab('attime');
await page.click('#events-table tr[data-ev="204"]');
await page.waitForTimeout(200);
await page.evaluate(() => { document.getElementById('events-wrap').style.maxHeight = '300px'; });
await shot('web-attime.png', 'view-attime');
await tab('peak');
const leaf = await page.locator('#flame .flame-node[data-depth="3"]', { hasText: 'alloc_weights' }).boundingBox();
await page.mouse.move(leaf.x + 40, leaf.y + 8);
await page.waitForTimeout(100);
await shot('web-peak.png', 'peak-table');

/* Reserved vs allocated on the file with counters and an out-of-memory event. */
await loadFile(page, join(gen, 'devices.memtrace'));
await tab('reserved');
await shot('web-reserved.png', 'view-reserved');

await page.setInputFiles('#file-input', [join(gen, 'basic.memtrace'), join(gen, 'streams.memtrace')]);
await page.waitForFunction(() => document.body.dataset.state === 'ready');
await tab('compare');
await shot('web-compare.png', 'compare-table');

const report = join(gen, 'report.html');
execFileSync(join(builddir, 'memtrace'), ['html', join(gen, 'streams.memtrace'), '-o', report]);
await page.goto(pathToFileURL(report).href);
await page.waitForFunction(() => document.body.dataset.state === 'ready');
await page.waitForTimeout(200);
await shot('web-html.png', 'view-timeline');
await ctx.close();
