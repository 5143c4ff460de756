// pickle-t: a real PyTorch snapshot (shared/data/pytorch-snapshots/eor-training.pickle)
// loads in the browser through the data-only pickle reader with the entry counts its
// README lists, and draws; what was live before its trace began (3 segments, 31
// blocks: docs/REPLAY.md rule 0) is live from the start, so that the end shows the
// snapshot's 10 segments and 40 blocks, and a tooltip says such a block was there
// when the trace began; a pickle that would import code is refused with one clear
// error.
import { existsSync, writeFileSync } from 'node:fs';
import { bail, done, genFiles, is, join, launch, loadFile, needBrowser, ok, openViewer, plan,
    screenshot, skipAll, srcdir } from './lib.mjs';

const pickle = join(srcdir, '..', 'shared', 'data', 'pytorch-snapshots', 'eor-training.pickle');
const pw = needBrowser();
if (!existsSync(pickle))
    skipAll(`${pickle} is absent`);
plan(9);
let ctx;
try {
    const gen = genFiles();
    ctx = await launch(pw);
    const page = await openViewer(ctx);
    is(await loadFile(page, pickle), 'ready', 'eor-training.pickle loads');
    const frame = await page.evaluate(() => memtraceViewer.frame());
    ok(frame.drawn > 0 && frame.top > 0, 'its timeline draws', JSON.stringify(frame));
    await screenshot(page, 'pickle-timeline');
    await page.click('#tabs button[data-view="info"]');
    const counts = await page.evaluate(() => Object.fromEntries(Array.from(
        document.querySelectorAll('#action-table tr'), (tr) => [tr.cells[0].textContent, tr.cells[1].textContent])));
    is(counts, { alloc: '1935', free_requested: '1926', free_completed: '1926', segment_alloc: '7', snapshot: '9' },
        'entries by action as its README lists them');
    await screenshot(page, 'pickle-info');
    /* The trace starts after 3 segments (0x7f4444c00000 and 0x7f447b200000, 2 MiB
     * small; 0x7f44f2000000, 20 MiB large) and 31 blocks in them were allocated. */
    const before = await page.evaluate(() => Array.from(document.querySelectorAll('#info-table tr'))
        .filter((tr) => tr.cells[0].textContent === 'live before the first event').map((tr) => tr.cells[1].textContent));
    is(before, ['3 segments (24.0 MiB), 31 blocks (8.4 MiB)'], 'the file view: what was live when the trace began');
    const fig = await page.evaluate(() => {
        const m = memtraceViewer.state.model, f = m.figures;
        let segs = 0;
        for (let id = 0; id < m.segs.n; id++)
            segs += m.segs.init[id] && m.segs.ended[id] === 0 ? 1 : 0;
        return [f.reserved.current_bytes, f.reserved.current_count, segs, f.allocated.current_bytes,
            f.allocated.current_count, f.allocated.peak_bytes, f.allocs.count];
    });
    /* Allocated at the end: the 31 blocks' 8,781,824 bytes and the 39,976,976 of the
     * 9 the trace allocated, at their entries' sizes (four are 4-byte requests in
     * 512-byte blocks: the final state's 48,760,832 is 2,032 more). */
    is(fig, [134217728, 10, 3, 48758800, 40, 108268548, 1935],
        'at the end: 10 segments (128 MiB) and 40 blocks live; the peak holds the 31, the allocations do not count them');
    /* The 8.1 MiB block of the 20 MiB segment is live throughout, just above the 30
     * small ones at the bottom: stacked in the order they became live. */
    await page.click('#tabs button[data-view="timeline"]');
    await page.waitForFunction(() => memtraceViewer.settled());
    const at = await page.evaluate(() => {
        const m = memtraceViewer.state.model;
        return memtraceViewer.toScreen((m.t_min + m.t_max) / 2, 4 * 1048576);
    });
    await page.mouse.move(at.x, at.y);
    await page.mouse.move(at.x + 1, at.y);
    const early = await page.evaluate(() => document.getElementById('tooltip').innerText);
    ok(early.includes('8.1 MiB (8519680 bytes)') && /allocated\s+before the first event \(live when the trace began\)/.test(early) &&
        /freed\s+never \(live at the end\)/.test(early), 'a block live before the trace: its tooltip says so', early.slice(0, 800));
    /* Hover a block the trace allocated, above those: its stack has PyTorch's frames. */
    const above = await page.evaluate(() => {
        const m = memtraceViewer.state.model;
        return memtraceViewer.toScreen((m.t_min + m.t_max) / 2, 16 * 1048576);
    });
    await page.mouse.move(above.x, above.y);
    const tip = await page.evaluate(() => document.getElementById('tooltip').innerText);
    ok(tip.includes('size') && /c10::cuda::CUDACachingAllocator|torch::|\.py:\d+/.test(tip), 'hovering a block shows its size and PyTorch frames', tip.slice(0, 1500));

    const evil = join(gen, 'evil.pickle');
    writeFileSync(evil, Buffer.concat([Buffer.from([0x80, 4]), Buffer.from('cos\nsystem\n'), Buffer.from([0x2e])]));
    is(await loadFile(page, evil), 'error', 'a pickle with GLOBAL is refused');
    is(await page.evaluate(() => document.getElementById('message').textContent),
        'evil.pickle: pickle: refused opcode GLOBAL at offset 2: this viewer reads plain data only and never imports or calls code from a file',
        'with one clear message');
    await ctx.close();
    done();
} catch (e) {
    if (ctx)
        await ctx.close().catch(() => {});
    bail(e);
}
