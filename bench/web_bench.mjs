#!/usr/bin/env node
// web_bench: the web viewer at scale in headless Chromium. Writes training-loop files
// of 1M and 10M events with bench/gen_trace, opens web/index.html from file://, loads
// each through the file picker and prints: the time from choosing the file to the
// first drawn timeline, then zoom and pan frames (the timeline's draw time for views
// of 1/2, 1/8 ... of the run, and pans across it).
//     node bench/web_bench.mjs [BUILDDIR] [COUNTS...]   (defaults: build 1000000 10000000)
// MEMTRACE_WEB_DIR opens another copy of the viewer (an older one, to compare).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const src = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const build = resolve(process.argv[2] || join(src, 'build'));
const counts = process.argv.length > 3 ? process.argv.slice(3).map(Number) : [1e6, 1e7];
const gen = join(build, 'bench', 'gen_trace');
const pwPath = join(src, 'tests', 'web', 'node_modules', 'playwright-core');
if (!existsSync(gen) || !existsSync(pwPath) || !existsSync('/usr/bin/chromium')) {
    console.error('memtrace: web_bench needs bench/gen_trace built in ' + build +
        ', chromium and tests/web/node_modules (scripts/install-deps)');
    process.exit(1);
}
const pw = createRequire(import.meta.url)(pwPath);
const dir = mkdtempSync(join(tmpdir(), 'memtrace-bench-'));
const profile = mkdtempSync(join(tmpdir(), 'memtrace-chromium-'));
const ctx = await pw.chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium', headless: true, viewport: { width: 1280, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
    console.log('| events | file | load + first draw | zoom/pan frame: median | max | frames |');
    console.log('| ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const n of counts) {
        const file = join(dir, `train-${n}.memtrace`);
        execFileSync(gen, [String(n), file]);
        const page = await ctx.newPage();
        const errors = [];
        page.on('pageerror', (e) => errors.push(String(e)));
        await page.goto(pathToFileURL(join(process.env.MEMTRACE_WEB_DIR || join(src, 'web'), 'index.html')).href);
        const t0 = Date.now();
        await page.setInputFiles('#file-input', file);
        await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state),
            null, { timeout: 300000, polling: 20 });
        const loadMs = Date.now() - t0;
        const state = await page.evaluate(() => document.body.dataset.state);
        if (state !== 'ready')
            throw new Error(`${file}: ${await page.evaluate(() => document.getElementById('message').textContent)}`);
        /* Zoom in by halves around the middle, then pan each view across the run. */
        const frames = await page.evaluate(() => {
            const v = memtraceViewer, S = v.state, span = S.model.t_max - S.model.t_min;
            const times = [];
            for (let z = 1; z <= 64; z *= 2) {
                const w = span / z;
                for (let k = 0; k < 6; k++) {
                    const c = span / 2 + (k - 3) * w / 4;
                    const t = performance.now();
                    v.setView(c - w / 2, c + w / 2);
                    times.push(performance.now() - t);
                }
            }
            return times;
        });
        if (process.env.WEB_BENCH_FRAMES)
            console.log(`# frames in order (zoom 1x..64x, 6 pans each): ${frames.map((f) => f.toFixed(1)).join(' ')}`);
        frames.sort((a, b) => a - b);
        const med = frames[frames.length >> 1], max = frames[frames.length - 1];
        const mb = (statSync(file).size / 1e6).toFixed(1);
        console.log(`| ${n.toLocaleString('en')} | ${mb} MB | ${(loadMs / 1000).toFixed(2)} s | ` +
            `${med.toFixed(1)} ms | ${max.toFixed(1)} ms | ${frames.length} |`);
        if (errors.length)
            console.log(`errors: ${errors.join('; ')}`);
        await page.close();
        rmSync(file);
    }
} finally {
    await ctx.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(profile, { recursive: true, force: true });
}
