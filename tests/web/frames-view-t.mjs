// frames-view-t: the views hide the frames of stack capture, dispatch, the interpreter
// and thread start (format.js's copy of snapshot/frames.c's rules) on a real PyTorch
// snapshot (shared/data/pytorch-snapshots/eor-training.pickle) imported with `memtrace
// import`. Its largest stack at the peak, stack 50 (15.0 MiB), has 50 frames: 34 are
// hidden and the peak table starts it at #6, the allocation's kernel, as `memtrace
// peak` does, and lists 12 frames, then past them its Python frames #31 and #35, as
// `memtrace peak --depth 12` does; every stack hides as many frames as `memtrace peak
// --json` says; no torch::unwind::unwind() frame is in the peak table, the flame graph
// or a block's tooltip. Ticking "all frames" shows them everywhere, and is kept in the
// URL. Two
// snapshots whose one stack differs only in a hidden frame are compared on whole
// stacks: the compare view lists both stacks, each shown from #1 with 1 frame hidden.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { bail, builddir, done, is, join, launch, loadFile, needBrowser, ok, openViewer, plan, screenshot,
    skipAll, srcdir } from './lib.mjs';

const pickle = join(srcdir, '..', 'shared', 'data', 'pytorch-snapshots', 'eor-training.pickle');
const memtrace = join(builddir, 'memtrace');
if (!existsSync(memtrace))
    skipAll(`${memtrace} is not built`);
if (!existsSync(pickle))
    skipAll(`${pickle} is absent`);
const pw = needBrowser();
const UNWIND = 'torch::unwind::unwind()';

plan(21);
let ctx;
try {
    const dir = mkdtempSync(join(tmpdir(), 'memtrace-frames-'));
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'eor.memtrace');
    execFileSync(memtrace, ['import', pickle, '-o', file], { stdio: 'ignore' });
    const cli = JSON.parse(execFileSync(memtrace, ['peak', file, '--json', '--top', '100'], { encoding: 'utf8' }));
    const cliHidden = Object.fromEntries(cli.stacks.map((s) => [String(s.stack), s.hidden_frames]));
    const cliDepth = JSON.parse(execFileSync(memtrace, ['peak', file, '--json', '--top', '100', '--depth', '12'], { encoding: 'utf8' }));
    const cliListed = Object.fromEntries(cliDepth.stacks.map((s) => [String(s.stack), s.frames.map((f) => f.index)]));

    ctx = await launch(pw);
    const page = await openViewer(ctx);
    is(await loadFile(page, file), 'ready', 'the imported snapshot loads');
    const peakTab = async () => {
        await page.click('#tabs button[data-view="peak"]');
        await page.waitForTimeout(150);
    };
    /* Per row of the peak table: stack, hidden count, its frame lines and notes. */
    const peak = () => page.evaluate(() => Array.from(document.querySelectorAll('#peak-table tbody tr'), (tr) => ({
        stack: tr.dataset.stack, hidden: tr.cells[2].dataset.hidden,
        lines: Array.from(tr.cells[2].querySelectorAll('.frame-line'), (d) => d.textContent),
        notes: Array.from(tr.cells[2].querySelectorAll('.frames-more, .frames-hidden'), (d) => d.textContent),
    })));
    const flame = () => page.evaluate((u) => [
        Array.from(document.querySelectorAll('#flame .flame-node[data-depth="1"]'), (n) => n.textContent),
        Array.from(document.querySelectorAll('#flame .flame-node'), (n) => n.textContent).filter((t) => t === u).length,
    ], UNWIND);
    const hasUnwind = (rows) => rows.some((r) => r.lines.some((l) => l.includes(UNWIND)));

    await peakTab();
    let rows = await peak();
    is([rows[0].stack, rows[0].hidden, rows[0].lines.length, rows[0].lines[0].split('<')[0]],
        ['50', '34', 14, '#6 at::TensorBase at::detail::_empty_strided_generic'],
        'peak table: stack 50 starts at frame #6, the kernel that allocated, 34 frames hidden');
    is(rows[0].notes, ['... 2 more frames', '34 frames hidden: 6 capture, 10 dispatch, 14 interpreter, 3 start, ' +
        '1 unknown; tick "all frames" to see them'], 'peak table: stack 50 says how many frames of each kind are hidden, as the CLI');
    is(rows[0].lines.map((l) => l.split(' ')[0]), ['#6', '#7', '#8', '#9', '#10', '#15', '#16', '#17', '#22', '#24', '#25', '#27',
        '#31', '#35'], 'peak table: frames numbered by their place in the whole stack, as memtrace peak numbers them');
    /* Past the first 12, the program's Python frames, after the frames between. */
    const row50 = await page.evaluate(() => Array.from(document.querySelectorAll('#peak-table tbody tr[data-stack="50"] td:nth-child(3) > div'),
        (d) => d.textContent));
    is(row50.slice(11, 14), ['#27 at::_ops::to_dtype_layout::call(at::Tensor const&, std::optional<c10::ScalarType>, ' +
        'std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, bool, bool, std::optional<c10::MemoryFormat>)',
    '... 2 more frames', '#31 generate_counterfactuals (/oscar/home/jsolt/FourierNN/counterfactuals.py:102)'],
    'peak table: after #27, "... 2 more frames", then stack 50\'s Python frame #31 generate_counterfactuals');
    is(row50[14], '#35 <module> (/oscar/home/jsolt/FourierNN/counterfactuals.py:218)',
        'peak table: and #35 <module>, as memtrace peak --depth 12 lists them');
    is(Object.fromEntries(rows.map((r) => [r.stack, r.lines.map((l) => Number(l.split(' ')[0].slice(1)))])), cliListed,
        `peak table: each of the ${rows.length} stacks lists the frames memtrace peak --depth 12 lists`);
    ok(!hasUnwind(rows), `peak table: no ${UNWIND} frame by default`);
    is(Object.fromEntries(rows.map((r) => [r.stack, Number(r.hidden)])), cliHidden,
        `peak table: each of the ${rows.length} stacks hides as many frames as memtrace peak --json says`);
    /* (no stack): the 8.1 MiB block live before the trace began, which the snapshot
     * holds without frames. */
    let [outer, unwinds] = await flame();
    is([outer, unwinds], [['<module>', 'torch::autograd::python::PythonEngine::thread_init(int, ' +
        'std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)', '(no stack)'], 0],
    'flame graph: towers start at the program\'s <module> and autograd\'s thread, none ends in the unwinder');
    await screenshot(page, 'frames-peak');

    /* A row leads to the timeline, where the stack is named by its Python frame. */
    await page.click('#peak-table tbody tr:first-child');
    await page.waitForTimeout(150);
    is(await page.evaluate(() => document.getElementById('search-result').textContent),
        'stack 50: generate_counterfactuals (/oscar/home/jsolt/FourierNN/counterfactuals.py:102)',
        'the stack is named by its innermost Python frame');
    /* Hover the middle column at 12 MiB, a block the trace allocated (below it are
     * the 8.4 MiB live before the trace): its stack without the hidden frames. */
    const hover = async () => {
        await page.waitForFunction(() => memtraceViewer.settled());
        const at = await page.evaluate(() => {
            const v = memtraceViewer.state.view;
            return memtraceViewer.toScreen(memtraceViewer.state.model.t_min + (v.t0 + v.t1) / 2, 12 * 1048576);
        });
        await page.mouse.move(at.x, at.y);
        await page.mouse.move(at.x + 1, at.y);
        return page.evaluate(() => document.getElementById('tooltip').innerText);
    };
    await page.fill('#search', '');
    await page.waitForTimeout(300);
    let tip = await hover();
    ok(/frames, innermost first/.test(tip) && /\n#\d+ \S/.test(tip) && !tip.includes(UNWIND) &&
        /\d+ frames hidden: \d+ capture.*; tick "all frames" to see them/.test(tip),
    'a block\'s tooltip: its stack without the unwinder, and how many frames are hidden', tip.slice(0, 2000));

    await page.check('#all-frames');
    await page.waitForTimeout(300);
    tip = await hover();
    ok(tip.includes(`#0 ${UNWIND}`) && !tip.includes('frames hidden'), 'with "all frames": the tooltip starts at #0, the unwinder',
        tip.slice(0, 2000));
    await peakTab();
    rows = await peak();
    is([rows[0].stack, rows[0].hidden, rows[0].lines[0], rows[0].notes],
        ['50', '0', `#0 ${UNWIND}`, ['... 19 more frames', '... 3 more frames', '... 14 more frames']],
        'with "all frames": stack 50 starts at #0, the unwinder, nothing hidden; #31 and #35 past the first 12');
    ok(rows.every((r) => r.stack === '0' || r.lines[0] === `#0 ${UNWIND}`), `with "all frames": every stack starts with ${UNWIND}`);
    [outer, unwinds] = await flame();
    ok(outer.includes('_start') && unwinds > 0, 'with "all frames": the flame graph has the start and unwinder frames',
        JSON.stringify([outer, unwinds]));
    await screenshot(page, 'frames-peak-all');
    await page.waitForTimeout(200);
    ok(await page.evaluate(() => location.hash.includes('frames=all')), 'the choice is kept in the URL');

    const page2 = await ctx.newPage();
    await page2.goto(page.url());
    await page2.setInputFiles('#file-input', file);
    await page2.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 60000 });
    const again = await page2.evaluate(() => [document.getElementById('all-frames').checked,
        document.querySelector('#peak-table tbody tr .frame-line').textContent]);
    is(again, [true, `#0 ${UNWIND}`], 'a page opened with that URL shows every frame');
    await page2.close();

    await page.uncheck('#all-frames');
    await page.waitForTimeout(300);
    rows = await peak();
    is([rows[0].hidden, rows[0].lines[0].split(' ')[0], hasUnwind(rows), page.errors],
        ['34', '#6', false, []], 'unticked: the frames are hidden again, and the page logged no error');

    /* The same Python stack under two different capture frames, 100 bytes each. */
    const snap = (capture) => JSON.stringify({ segments: [], device_traces: [[{ action: 'alloc', addr: 0x10000, size: 100,
        stream: 0, time_us: 1000, frames: [{ name: capture, filename: '??', line: 0 },
            { name: 'alloc_x', filename: 'model.py', line: 10 }, { name: 'main', filename: 'train.py', line: 1 }] }]] });
    const a = join(dir, 'a.json'), b = join(dir, 'b.json');
    writeFileSync(a, snap(UNWIND));
    writeFileSync(b, snap('torch::CapturedTraceback::gather(bool, bool, bool)'));
    await page.setInputFiles('#file-input', [a, b]);
    await page.waitForFunction(() => document.body.dataset.state === 'ready' &&
        !document.querySelector('#tabs button[data-view="compare"]').hidden, null, { timeout: 60000 });
    await page.click('#tabs button[data-view="compare"]');
    await page.waitForTimeout(150);
    const compare = () => page.evaluate(() => Array.from(document.querySelectorAll('#compare-table tbody tr'), (tr) => [
        tr.className, Number(tr.dataset.delta), ...Array.from(tr.cells[4].children, (d) => d.textContent)]));
    const shown = ['#1 alloc_x (model.py:10)', '#2 main (train.py:1)', '1 frame hidden: 1 capture; tick "all frames" to see them'];
    is(await compare(), [['new', 100, ...shown], ['gone', -100, ...shown]],
        'compare: stacks that differ only in a hidden frame are two stacks, each shown without it');
    await page.check('#all-frames');
    await page.waitForTimeout(300);
    is((await compare()).map((r) => r[2]), ['#0 torch::CapturedTraceback::gather(bool, bool, bool)', `#0 ${UNWIND}`],
        'compare with "all frames": the frame that tells them apart');
    await ctx.close();
    done();
} catch (e) {
    if (ctx)
        await ctx.close().catch(() => {});
    bail(e);
}
