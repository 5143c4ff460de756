// lib.mjs: TAP output, the generated test files and headless Chromium for the web
// viewer's tests. The TAP driver's environment gives top_srcdir and top_builddir.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const srcdir = resolve(process.env.top_srcdir || join(here, '..', '..'));
export const builddir = resolve(process.env.top_builddir || join(srcdir, 'build'));
export const webdir = join(srcdir, 'web');
export const artifacts = join(builddir, 'tests', 'web', 'artifacts');
export const require = createRequire(import.meta.url);

let planned = 0, count = 0, failed = 0;
export function plan(n) {
    planned = n;
    console.log(`1..${n}`);
}
export function skipAll(why) {
    console.log(`1..0 # skip ${why}`);
    process.exit(0);
}
export function ok(cond, name, detail) {
    count++;
    if (!cond)
        failed++;
    console.log(`${cond ? 'ok' : 'not ok'} ${count} - ${name}`);
    if (!cond && detail !== undefined)
        for (const line of String(detail).split('\n'))
            console.log(`# ${line}`);
    return cond;
}
export function is(got, want, name) {
    const g = typeof got === 'bigint' ? got.toString() : JSON.stringify(got);
    const w = typeof want === 'bigint' ? want.toString() : JSON.stringify(want);
    return ok(g === w, name, `got:  ${g}\nwant: ${w}`);
}
export function diag(s) {
    for (const line of String(s).split('\n'))
        console.log(`# ${line}`);
}
export function done() {
    if (count !== planned)
        diag(`planned ${planned} tests, ran ${count}`);
    process.exit(failed || count !== planned ? 1 : 0);
}
export function bail(e) {
    console.log(`Bail out! ${String(e && e.stack ? e.stack : e).split('\n')[0]}`);
    diag(e && e.stack ? e.stack : e);
    process.exit(1);
}

/* Writes the generated files into a fresh directory; returns its path. */
export function genFiles() {
    const gen = join(builddir, 'tests', 'web', 'gen-web');
    if (!existsSync(gen))
        skipAll(`${gen} is not built (run make check)`);
    const dir = mkdtempSync(join(tmpdir(), 'memtrace-web-'));
    execFileSync(gen, [dir]);
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    return dir;
}

export const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';

/* Skips the whole test unless chromium and playwright-core are installed. */
export function needBrowser() {
    if (!existsSync(chromiumPath))
        skipAll(`no chromium at ${chromiumPath} (scripts/install-deps installs it)`);
    const pw = join(srcdir, 'tests', 'web', 'node_modules', 'playwright-core');
    if (!existsSync(pw))
        skipAll('tests/web/node_modules has no playwright-core (scripts/install-deps installs it)');
    return require(pw);
}

/* Starts headless Chromium with no network (it runs as root here, hence no sandbox). */
export async function launch(pw) {
    const profile = mkdtempSync(join(tmpdir(), 'memtrace-chromium-'));
    const context = await pw.chromium.launchPersistentContext(profile, {
        executablePath: chromiumPath,
        headless: true,
        viewport: { width: 1280, height: 900 },
        args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
            '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    process.on('exit', () => rmSync(profile, { recursive: true, force: true }));
    return context;
}

/* Opens web/index.html from file:// (query: a string such as '?view=...'), collecting
 * page errors into page.errors. */
export async function openViewer(context, query) {
    const page = context.pages()[0] || await context.newPage();
    page.errors = [];
    page.on('pageerror', (e) => page.errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') page.errors.push(m.text()); });
    await page.goto(pathToFileURL(join(webdir, 'index.html')).href + (query || ''));
    return page;
}

/* Loads a file through the file picker and waits until it is drawn. */
export async function loadFile(page, path) {
    await page.setInputFiles('#file-input', path);
    await page.waitForFunction(() => document.body.dataset.state === 'ready' ||
        document.body.dataset.state === 'error', null, { timeout: 60000 });
    return page.evaluate(() => document.body.dataset.state);
}

export async function screenshot(page, name) {
    mkdirSync(artifacts, { recursive: true });
    const path = join(artifacts, `${name}.png`);
    await page.screenshot({ path });
    return path;
}

export { join, pathToFileURL };
