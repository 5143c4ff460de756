// view-t: `memtrace view` serves the viewer and the named files on 127.0.0.1: node's
// fetch gets the page, a script and the file byte for byte; raw requests for paths
// outside (.., encoded slashes, absolute paths), another Host and other methods are
// refused; the viewer opens the served file in Chromium when it is installed; and
// SIGINT stops the server with status 0.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { bail, builddir, chromiumPath, done, genFiles, is, join, launch, ok, plan, require, screenshot,
    skipAll, srcdir } from './lib.mjs';

const memtrace = join(builddir, 'memtrace');
if (!existsSync(memtrace))
    skipAll(`${memtrace} is not built`);

/* One request as raw bytes, so that nothing normalises the path on the way. */
function raw(port, text) {
    return new Promise((resolve, reject) => {
        const s = connect(port, '127.0.0.1');
        let out = '';
        s.on('data', (d) => (out += d.toString('latin1')));
        s.on('end', () => resolve(out));
        s.on('error', reject);
        s.write(text);
    });
}
const statusOf = (res) => Number(res.split(' ')[1]);

plan(15);
let server, ctx;
try {
    const gen = genFiles();
    const basic = join(gen, 'basic.memtrace');
    server = spawn(memtrace, ['view', basic, join(gen, 'rules.memtrace')], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    server.stderr.on('data', (d) => (stderr += d));
    const url = await new Promise((resolve, reject) => {
        let out = '';
        server.stdout.on('data', (d) => {
            out += d;
            if (out.includes('\n'))
                resolve(out.split('\n')[0]);
        });
        server.on('exit', (c) => reject(new Error(`memtrace view exited with ${c}: ${stderr}`)));
    });
    const m = /^http:\/\/127\.0\.0\.1:(\d+)\/$/.exec(url);
    ok(m && Number(m[1]) > 0, 'it prints its URL on 127.0.0.1 with the port it was given', url);
    const port = Number(m[1]);

    let r = await fetch(url, { redirect: 'manual' });
    is([r.status, r.headers.get('location')],
        [302, '/index.html?file=%2Ffiles%2F0%2Fbasic.memtrace&file=%2Ffiles%2F1%2Frules.memtrace'],
        '/ sends the browser to the viewer with the files');
    r = await fetch(url + 'index.html');
    const page = await r.text();
    is([r.status, r.headers.get('content-type'), page], [200, 'text/html; charset=utf-8',
        readFileSync(join(srcdir, 'web', 'index.html'), 'utf8')], 'the page is web/index.html');
    r = await fetch(url + 'timeline.js');
    is([r.status, r.headers.get('content-type'), (await r.text()).length],
        [200, 'text/javascript; charset=utf-8', readFileSync(join(srcdir, 'web', 'timeline.js'), 'utf8').length],
        'a script of the viewer, as JavaScript');
    r = await fetch(url + 'files/0/basic.memtrace');
    is([r.status, Buffer.from(await r.arrayBuffer()).equals(readFileSync(basic))], [200, true],
        'the named file, byte for byte');
    r = await fetch(url + 'files/1/rules.memtrace', { method: 'HEAD' });
    is([r.status, Number(r.headers.get('content-length')), (await r.arrayBuffer()).byteLength],
        [200, readFileSync(join(gen, 'rules.memtrace')).length, 0], 'HEAD: the length, no body');

    const get = (path, host) => raw(port, `GET ${path} HTTP/1.1\r\nHost: ${host || `127.0.0.1:${port}`}\r\n\r\n`);
    const refused = [];
    for (const p of ['/../../../../etc/passwd', '/files/0/../../../../etc/passwd', '/%2e%2e/%2e%2e/etc/passwd',
        '/files/0/..%2F..%2Fetc%2Fpasswd', `/files/2/basic.memtrace`, '/files/0/random.txt', '/etc/passwd',
        `/${gen.slice(1)}/basic.memtrace`, '/web/index.html', '/index.html%00.js', '//etc/passwd', '/files/0/'])
        refused.push(statusOf(await get(p)));
    is(refused, Array(12).fill(404), 'paths outside the table are 404: .., encoded, absolute, other files');
    ok(!(await get('/../../../../etc/passwd')).includes('root:'), 'and nothing of /etc/passwd comes back');
    is(statusOf(await get('/index.html', 'evil.example:80')), 403, 'another Host is refused');
    is(statusOf(await get('/index.html', `localhost:${port}`)), 200, 'localhost with the port is this server');
    is(statusOf(await raw(port, `POST /index.html HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Length: 0\r\n\r\n`)),
        405, 'POST is not allowed');
    is(statusOf(await raw(port, `GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX: ${'a'.repeat(20000)}\r\n\r\n`)),
        431, 'a request head over 16 KiB is refused');

    const pwPath = join(srcdir, 'tests', 'web', 'node_modules', 'playwright-core');
    if (!existsSync(chromiumPath) || !existsSync(pwPath)) {
        ok(true, '# skip no chromium or playwright-core for the browser check');
    } else {
        ctx = await launch(require(pwPath));
        const p = ctx.pages()[0] || await ctx.newPage();
        await p.goto(url);
        await p.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 60000 });
        /* Two files open in the compare view; the timeline shows the first. */
        const peaks = await p.evaluate(() => document.body.dataset.state === 'ready' &&
            JSON.parse(document.getElementById('compare').dataset.peaks));
        await p.click('#tabs button[data-view="timeline"]');
        const top = await p.evaluate(() => memtraceViewer.frame().top);
        is([peaks[0], top], [96 * 1024 * 1024 + 200 * 4096, 96 * 1024 * 1024 + 200 * 4096],
            'the browser opens both served files and draws the first to its peak');
        await screenshot(p, 'view-served');
        await ctx.close();
        ctx = null;
    }

    const exited = new Promise((resolve) => server.on('exit', (code, sig) => resolve([code, sig])));
    server.kill('SIGINT');
    is(await exited, [0, null], 'SIGINT stops it with status 0');
    ok(stderr.endsWith('memtrace: stopped\n'), 'and it says so', stderr);
    done();
} catch (e) {
    if (ctx)
        await ctx.close().catch(() => {});
    if (server)
        server.kill('SIGTERM');
    bail(e);
}
