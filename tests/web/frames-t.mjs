// frames-t: web/format.js's copy of snapshot/frames.c's rules, in node: frameKind
// gives every case of tests/snapshot/frames-cases.json the kind the C test gives it;
// shownFrames keeps the shown frames with their places in the whole stack, and all
// of them when none would be shown; nameFrame names a stack by its innermost Python
// frame, else its innermost shown frame, else its innermost frame.
import { readFileSync } from 'node:fs';
import { bail, done, is, join, plan, require, srcdir, webdir } from './lib.mjs';

const Format = require(join(webdir, 'format.js'));

function frame(symbol, file, line = 0, module = '', ip = 0) {
    return { symbol, file, line, module, ip, offset: 0 };
}

try {
    const { cases } = JSON.parse(readFileSync(join(srcdir, 'tests', 'snapshot', 'frames-cases.json'), 'utf8'));
    plan(cases.length + 10);
    for (const c of cases) {
        const what = `${c.symbol || '(no symbol)'} in ${c.file || '(no file)'}${c.module ? ' of ' + c.module : ''}` +
            `${c.ip ? ' at 0x' + c.ip.toString(16) : ''}`;
        is(Format.frameKind(frame(c.symbol, c.file, c.line, c.module, c.ip)), c.kind,
            `${c.kind}: ${what}${c.why ? ' (' + c.why + ')' : ''}`);
    }

    /* A PyTorch stack, innermost first, as a snapshot gives it. */
    const torch = [
        frame('torch::unwind::unwind()', '??'),
        frame('torch::CapturedTraceback::gather(bool, bool, bool)', '??'),
        frame('c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long) const', ''),
        frame('at::native::empty_like(at::Tensor const&)', '??'),
        frame('at::_ops::empty_like::redispatch(c10::DispatchKeySet, at::Tensor const&)', '??'),
        frame('c10::impl::wrap_kernel_functor_unboxed_<...>::call(...)', 'RegisterCUDA.cpp'),
        frame('torch::autograd::THPVariable_ones_like(_object*, _object*, _object*)', 'python_torch_functions_1.cpp'),
        frame('cfunction_call', '??'),
        frame('_PyEval_EvalFrameDefault', '??'),
        frame('forward', '/home/user/model.py', 42),
        frame('_PyEval_EvalFrameDefault', '??'),
        frame('<module>', '/home/user/train.py', 7),
        frame('Py_RunMain', '??'),
        frame('__libc_start_main', ''),
        frame('_start', '??'),
    ];
    const s = Format.shownFrames(torch);
    is(s.frames.map((f) => f.symbol), ['at::native::empty_like(at::Tensor const&)',
        'torch::autograd::THPVariable_ones_like(_object*, _object*, _object*)', 'forward', '<module>'],
    'shownFrames: a PyTorch stack keeps the kernel, the binding and the two Python frames, in order');
    is([s.where, s.hidden], [[3, 6, 9, 11], 11], 'shownFrames: their places in the whole stack, 11 of 15 hidden');
    is([Format.hiddenKinds(torch), Format.hiddenKinds(torch.slice(3, 4))],
        [`${torch.filter((f) => Format.frameKind(f) === 'capture').length} capture, ` +
            `${torch.filter((f) => Format.frameKind(f) === 'dispatch').length} dispatch, ` +
            `${torch.filter((f) => Format.frameKind(f) === 'interpreter').length} interpreter, ` +
            `${torch.filter((f) => Format.frameKind(f) === 'start').length} start`, ''],
        'hiddenKinds: the hidden frames by kind, in the CLI\'s order; none: empty');
    is(Format.nameFrame(torch), torch[9], 'nameFrame: the innermost Python frame names it, not the innermost shown one');

    const hidden = torch.slice(0, 3);
    const all = Format.shownFrames(hidden);
    is([all.frames, all.where, all.hidden], [hidden, [0, 1, 2], 0], 'shownFrames: no frame shown: all three kept, none hidden');
    is(Format.nameFrame(hidden), hidden[0], 'nameFrame: no frame shown: the innermost frame');

    const native = [frame('_start', '??'), frame('alloc_weights', 'model.c', 12), frame('main', 'train.c', 100),
        frame('__libc_start_call_main', '??')];
    const n = Format.shownFrames(native);
    is([n.frames.map((f) => f.symbol), n.where, n.hidden], [['alloc_weights', 'main'], [1, 2], 2],
        'shownFrames: a C program\'s stack hides what is below main');
    is(Format.nameFrame(native), native[1], 'nameFrame: no Python frame: the innermost shown frame');

    is([Format.shownFrames([]), Format.nameFrame([])], [{ frames: [], where: [], hidden: 0 }, null],
        'an empty stack: nothing shown, nothing hidden, no name');
    is([Format.frameKind(null), Format.frameKind(frame('', '', 0, '', 0))], ['unknown', 'unknown'],
        'frameKind: no frame, or a frame the file does not have, is unknown');
    done();
} catch (e) {
    bail(e);
}
