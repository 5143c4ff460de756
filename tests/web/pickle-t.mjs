// pickle-t: a real PyTorch snapshot (shared/data/pytorch-snapshots/eor-training.pickle)
// loads in the browser through the data-only pickle reader with the entry counts its
// README lists, and draws; a pickle that would import code is refused with one
// clear error.
import { existsSync, writeFileSync } from 'node:fs';
import { bail, done, genFiles, is, join, launch, loadFile, needBrowser, ok, openViewer, plan,
    screenshot, skipAll, srcdir } from './lib.mjs';

const pickle = join(srcdir, '..', 'shared', 'data', 'pytorch-snapshots', 'eor-training.pickle');
const pw = needBrowser();
if (!existsSync(pickle))
    skipAll(`${pickle} is absent`);
plan(6);
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
    /* Hover the highest column's top block: its stack has PyTorch's frames. */
    await page.click('#tabs button[data-view="timeline"]');
    const text = await page.evaluate(() => {
        const f = memtraceViewer.frame(), c = document.getElementById('timeline').getBoundingClientRect();
        return [f.W, f.H, c.left, c.top];
    });
    await page.mouse.move(text[2] + 78 + text[0] / 2, text[3] + 16 + text[1] - 3);
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
