// html-t: `memtrace html` writes one page that opens alone from file:// in headless
// Chromium with the network cut off: gen-web's basic.memtrace is drawn with the
// figures the C tool gives, nothing is fetched, a file name with markup stays text,
// and the command keeps the output rules (no clobber without --force, one clear
// line for a file it cannot embed).
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { bail, builddir, done, genFiles, is, join, launch, needBrowser, ok, pathToFileURL, plan,
    screenshot, skipAll, srcdir } from './lib.mjs';

const MIB = 1024 * 1024;
const memtrace = join(builddir, 'memtrace');
if (!existsSync(memtrace))
    skipAll(`${memtrace} is not built`);
const pw = needBrowser();
plan(16);
let ctx;
try {
    const gen = genFiles();
    const dir = mkdtempSync(join(tmpdir(), 'memtrace-html-'));
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    const report = join(dir, 'report.html');
    const run = (args) => spawnSync(memtrace, args, { encoding: 'utf8' });

    let r = run(['html', join(gen, 'basic.memtrace'), '-o', report]);
    is([r.status, r.stderr], [0, ''], 'memtrace html writes the page');
    const html = readFileSync(report, 'utf8');
    ok(!/<script[^>]+src=|<link[^>]+href=/.test(html) && html.includes("connect-src blob: data:"),
        'the page refers to no other file, and its policy allows no network');
    r = run(['html', join(gen, 'basic.memtrace'), '-o', report]);
    is([r.status, r.stderr.trim()], [1, `memtrace: ${report} exists: not replaced (--force replaces it)`],
        'an existing page is kept without --force');
    r = run(['html', join(gen, 'random.txt'), '-o', join(dir, 'bad.html')]);
    is([r.status, r.stderr.trim(), existsSync(join(dir, 'bad.html'))],
        [1, `memtrace: ${join(gen, 'random.txt')}: not a .memtrace file nor a PyTorch snapshot (pickle or JSON)`, false],
        'a file the viewer cannot open is one clear line, and no page is left');
    const hostileName = '<img src=x onerror="window.__hostile=12">.memtrace';
    const hostile = join(dir, 'hostile.html');
    r = run(['html', join(gen, hostileName), '-o', hostile]);
    is(r.status, 0, 'a file with markup in its name is embedded');

    /* Outside its build tree the binary reads the installed viewer, or the one
     * MEMTRACE_WEB_DIR names. */
    const copy = join(dir, 'memtrace');
    copyFileSync(memtrace, copy);
    r = spawnSync(copy, ['html', join(gen, 'basic.memtrace')], { encoding: 'utf8',
        env: { ...process.env, MEMTRACE_WEB_DIR: '' } });
    ok(r.status === 1 && /^memtrace: the web viewer is not in \/.*\/share\/memtrace\/web \(no index.html there\); reinstall memtrace\n$/.test(r.stderr)
        || r.status === 0 && r.stdout.includes('x-memtrace-base64'),
    'a copy outside the build tree looks in the installed pkgdatadir/web', r.stderr);
    r = spawnSync(copy, ['html', join(gen, 'basic.memtrace')], { encoding: 'utf8',
        env: { ...process.env, MEMTRACE_WEB_DIR: join(srcdir, 'web') } });
    is([r.status, r.stdout === readFileSync(report, 'utf8')], [0, true],
        'MEMTRACE_WEB_DIR names the viewer; standard output gets the same page');

    const c = JSON.parse(execFileSync(memtrace, ['summary', '--json', join(gen, 'basic.memtrace')], { encoding: 'utf8' }));
    ctx = await launch(pw);
    await ctx.setOffline(true);
    const fetched = [];
    await ctx.route('**/*', (route) => {
        const url = route.request().url();
        if (url.startsWith('file:') || url.startsWith('blob:') || url.startsWith('data:'))
            return route.continue();
        fetched.push(url);
        return route.abort();
    });
    const page = ctx.pages()[0] || await ctx.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('request', (q) => { if (!/^(file|blob|data):/.test(q.url())) fetched.push(q.url()); });
    /* The page alone in its directory: nothing beside it to load. */
    const alone = mkdtempSync(join(tmpdir(), 'memtrace-html-alone-'));
    process.on('exit', () => rmSync(alone, { recursive: true, force: true }));
    copyFileSync(report, join(alone, 'report.html'));
    await page.goto(pathToFileURL(join(alone, 'report.html')).href);
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 60000 });
    is(await page.evaluate(() => document.body.dataset.state), 'ready', 'the page opens from file:// offline');
    const frame = await page.evaluate(() => memtraceViewer.frame());
    is(frame.top, 64 * MIB + 32 * MIB + 200 * 4096, 'the timeline is drawn to the peak, 96.8 MiB');
    ok(frame.drawn > 1000 && frame.aggregated > 100000, 'bands drawn, small blocks summed', JSON.stringify(frame));
    await screenshot(page, 'html-report');
    await page.click('#tabs button[data-view="reserved"]');
    const peaks = await page.evaluate(() => {
        const d = document.getElementById('reserved').dataset;
        return [Number(d.peakAllocated), Number(d.peakReserved)];
    });
    is(peaks, [c.allocated.peak_bytes, c.reserved.peak_bytes], 'peaks as memtrace summary gives them');
    is(await page.evaluate(() => document.getElementById('file-name').textContent), 'basic.memtrace',
        'the file keeps its name');
    is([fetched, errors], [[], []], 'nothing was fetched from a network, no error on the page');

    await page.goto(pathToFileURL(hostile).href);
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 60000 });
    is(await page.evaluate(() => document.getElementById('file-name').textContent), hostileName,
        'a name with markup is shown as text');
    is(await page.evaluate(() => document.title), `memtrace: ${hostileName}`, 'and titles the page as text');
    is(await page.evaluate(() => String(window.__hostile)), 'undefined', 'no script from the file ran');
    await ctx.close();
    done();
} catch (e) {
    if (ctx)
        await ctx.close().catch(() => {});
    bail(e);
}
