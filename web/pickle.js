/* pickle.js: PyTorch memory snapshots (torch.cuda.memory._snapshot() and
 * _dump_snapshot()) as pickle (protocols 2 to 5) or JSON, turned into the events,
 * tables and state that the .memtrace reader gives.
 *
 * The pickle reader is a data-only subset of Python's unpickler: it builds dicts,
 * lists, tuples, sets, strings, bytes, numbers (integers past 2^53, of any width,
 * as BigInt), booleans and None. Any opcode that would import a name or
 * call something (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX,
 * EXT*, PERSID, BINPERSID, buffers) is refused with one error that names it: no code
 * from a file ever runs. Dicts become objects without a prototype.
 *
 * PyTorch keeps the last N trace entries of each device, but its `segments` hold
 * every segment and block: memory allocated before the first entry is inferred
 * (initialState) and handed over as a state before the first event, which the
 * replay makes live from the start (docs/REPLAY.md rule 0), as `memtrace import`
 * writes it. */
function memtracePickleFactory() {
    'use strict';

    class PickleError extends Error {}

    const REFUSED = {
        0x63: 'GLOBAL', 0x93: 'STACK_GLOBAL', 0x52: 'REDUCE', 0x62: 'BUILD', 0x69: 'INST',
        0x6f: 'OBJ', 0x81: 'NEWOBJ', 0x92: 'NEWOBJ_EX', 0x82: 'EXT1', 0x83: 'EXT2',
        0x84: 'EXT4', 0x50: 'PERSID', 0x51: 'BINPERSID', 0x97: 'NEXT_BUFFER',
        0x98: 'READONLY_BUFFER',
    };
    const MARK = Symbol('mark');
    const utf8 = new TextDecoder('utf-8');
    const latin1 = new TextDecoder('latin1');

    function signedLE(b, p, n) {
        if (n === 0)
            return 0;
        if (n <= 6) {
            let v = 0;
            for (let i = n - 1; i >= 0; i--)
                v = v * 256 + b[p + i];
            if (b[p + n - 1] & 0x80)
                v -= 2 ** (8 * n);
            return v;
        }
        let v = 0n;
        for (let i = n - 1; i >= 0; i--)
            v = (v << 8n) | BigInt(b[p + i]);
        v = BigInt.asIntN(8 * n, v);
        return v >= -BigInt(Number.MAX_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
    }

    function key(k) {
        if (typeof k === 'string')
            return k;
        if (Array.isArray(k))
            return k.map(String).join(',');
        return String(k);
    }

    function setItem(d, k, v) {
        if (d === null || typeof d !== 'object' || Array.isArray(d))
            throw new PickleError('pickle: SETITEM on something that is not a dict');
        d[key(k)] = v;
    }

    /* Unpickles bytes (a Uint8Array); throws a PickleError on anything else. */
    function unpickle(b) {
        const stack = [], marks = [], memo = new Map();
        const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
        let p = 0;
        const need = (n) => {
            if (p + n > b.length)
                throw new PickleError(`pickle: the data ends inside an opcode at offset ${p}`);
        };
        const len = (n) => {
            need(n);
            let v = 0;
            for (let i = n - 1; i >= 0; i--)
                v = v * 256 + b[p + i];
            p += n;
            if (v > b.length - p)
                throw new PickleError(`pickle: a length of ${v} bytes runs past the data`);
            return v;
        };
        const popMark = () => {
            if (!marks.length)
                throw new PickleError('pickle: no MARK on the stack');
            const m = marks.pop();
            return stack.splice(m);
        };
        const top = () => {
            if (!stack.length)
                throw new PickleError('pickle: stack underflow');
            return stack[stack.length - 1];
        };
        const pop = () => {
            if (stack.length <= (marks.length ? marks[marks.length - 1] : 0))
                throw new PickleError('pickle: stack underflow');
            return stack.pop();
        };
        for (;;) {
            need(1);
            const at = p, op = b[p++];
            let n;
            switch (op) {
            case 0x80: need(1); if (b[p] > 5) throw new PickleError(`pickle: protocol ${b[p]} is newer than 5`); p += 1; break;
            case 0x95: need(8); p += 8; break; /* FRAME: a hint only */
            case 0x2e: /* STOP */
                if (stack.length !== 1)
                    throw new PickleError('pickle: STOP with a malformed stack');
                return stack[0];
            case 0x28: marks.push(stack.length); break;
            case 0x30: pop(); break;
            case 0x31: popMark(); break;
            case 0x32: stack.push(top()); break;
            case 0x4a: need(4); stack.push(dv.getInt32(p, true)); p += 4; break;
            case 0x4b: need(1); stack.push(b[p]); p += 1; break;
            case 0x4d: need(2); stack.push(dv.getUint16(p, true)); p += 2; break;
            case 0x8a: n = len(1); stack.push(signedLE(b, p, n)); p += n; break;
            case 0x8b: n = len(4); stack.push(signedLE(b, p, n)); p += n; break;
            case 0x47: need(8); stack.push(dv.getFloat64(p, false)); p += 8; break;
            case 0x4e: stack.push(null); break;
            case 0x88: stack.push(true); break;
            case 0x89: stack.push(false); break;
            case 0x8c: n = len(1); stack.push(utf8.decode(b.subarray(p, p + n))); p += n; break;
            case 0x58: n = len(4); stack.push(utf8.decode(b.subarray(p, p + n))); p += n; break;
            case 0x8d: n = len(8); stack.push(utf8.decode(b.subarray(p, p + n))); p += n; break;
            case 0x55: n = len(1); stack.push(latin1.decode(b.subarray(p, p + n))); p += n; break;
            case 0x54: n = len(4); stack.push(latin1.decode(b.subarray(p, p + n))); p += n; break;
            case 0x43: n = len(1); stack.push(b.slice(p, p + n)); p += n; break;
            case 0x42: n = len(4); stack.push(b.slice(p, p + n)); p += n; break;
            case 0x8e: n = len(8); stack.push(b.slice(p, p + n)); p += n; break;
            case 0x96: n = len(8); stack.push(b.slice(p, p + n)); p += n; break;
            case 0x7d: stack.push(Object.create(null)); break;
            case 0x5d: stack.push([]); break;
            case 0x29: stack.push([]); break;
            case 0x8f: stack.push([]); break;
            case 0x64: { /* DICT */
                const items = popMark(), d = Object.create(null);
                for (let i = 0; i + 1 < items.length; i += 2)
                    setItem(d, items[i], items[i + 1]);
                stack.push(d);
                break;
            }
            case 0x6c: case 0x74: case 0x91: stack.push(popMark()); break; /* LIST TUPLE FROZENSET */
            case 0x85: stack.push([pop()]); break;
            case 0x86: { const y = pop(), x = pop(); stack.push([x, y]); break; }
            case 0x87: { const z = pop(), y = pop(), x = pop(); stack.push([x, y, z]); break; }
            case 0x61: { const v = pop(), l = top(); if (!Array.isArray(l)) throw new PickleError('pickle: APPEND to something that is not a list'); l.push(v); break; }
            case 0x65: case 0x90: { /* APPENDS ADDITEMS */
                const items = popMark(), l = top();
                if (!Array.isArray(l))
                    throw new PickleError('pickle: APPENDS to something that is not a list');
                for (const v of items)
                    l.push(v);
                break;
            }
            case 0x73: { const v = pop(), k = pop(); setItem(top(), k, v); break; }
            case 0x75: {
                const items = popMark(), d = top();
                for (let i = 0; i + 1 < items.length; i += 2)
                    setItem(d, items[i], items[i + 1]);
                break;
            }
            case 0x71: need(1); memo.set(b[p], top()); p += 1; break;
            case 0x72: need(4); memo.set(dv.getUint32(p, true), top()); p += 4; break;
            case 0x94: memo.set(memo.size, top()); break;
            case 0x68: case 0x6a: {
                const w = op === 0x68 ? 1 : 4;
                need(w);
                const i = w === 1 ? b[p] : dv.getUint32(p, true);
                p += w;
                if (!memo.has(i))
                    throw new PickleError(`pickle: memo entry ${i} is not defined`);
                stack.push(memo.get(i));
                break;
            }
            default:
                if (REFUSED[op])
                    throw new PickleError(`pickle: refused opcode ${REFUSED[op]} at offset ${at}: ` +
                        'this viewer reads plain data only and never imports or calls code from a file');
                throw new PickleError(`pickle: unsupported opcode 0x${op.toString(16)} at offset ${at} ` +
                    '(snapshots use protocols 2 to 5)');
            }
        }
    }

    const ACTION = {
        alloc: 0, free_requested: 1, free_completed: 2, segment_alloc: 3, segment_free: 4,
        segment_map: 5, segment_unmap: 6, snapshot: 7, oom: 8, annotate: 9,
    };
    const STATE = { inactive: 0, active_allocated: 1, active_pending_free: 2 };

    function num(v) {
        return typeof v === 'bigint' ? Number(v) : typeof v === 'number' ? v : 0;
    }

    /* A block's frames: its own, else its first history entry's (older snapshots). */
    function blockFrames(k) {
        if (k.frames !== undefined)
            return k.frames;
        const h = Array.isArray(k.history) ? k.history[0] : null;
        return h && typeof h === 'object' ? h.frames : undefined;
    }

    /* What was live before the first trace entry of each device, from its trace
     * (entries, in order) and the snapshot's final segments (final: as readSnapshot
     * lays them out, frames still unresolved). A walk keeps the live blocks L and
     * segments S the trace made; a free of a block or segment the trace never made
     * was of one live before it (P, Q). At the end, a final segment that no segment
     * of S overlaps, and a final active block not in L, were live before too. Each Q
     * segment takes the P blocks that lie in it; a P block in none is dropped (and
     * counted): nothing says which segment held it. Returns {segments (as a state's,
     * stacks unresolved: frames), dropped}; no segments when nothing was live. */
    function initialState(traces, final) {
        const devices = new Set(final.map((g) => g.device));
        traces.forEach((tr, dev) => {
            if (Array.isArray(tr) && tr.length)
                devices.add(dev);
        });
        const segments = [];
        let dropped = 0;
        for (const dev of [...devices].sort((a, b) => a - b)) {
            const L = new Set(), P = new Map(), S = new Map(), Q = new Map();
            const tr = Array.isArray(traces[dev]) ? traces[dev] : [];
            for (const t of tr) {
                if (t === null || typeof t !== 'object')
                    continue;
                const a = num(t.addr);
                const pre = () => ({ addr: a, size: num(t.size), requested_size: num(t.size), frames: t.frames,
                    state: STATE.active_allocated });
                switch (t.action) {
                case 'alloc':
                    L.add(a);
                    break;
                case 'free_requested':
                    if (!L.has(a) && !P.has(a)) {
                        P.set(a, pre());
                        L.add(a); /* it was live, now pending */
                    }
                    break;
                case 'free_completed':
                    if (L.has(a))
                        L.delete(a);
                    else if (!P.has(a))
                        P.set(a, pre());
                    break;
                case 'segment_alloc':
                case 'segment_map':
                    S.set(a, num(t.size));
                    break;
                case 'segment_free':
                case 'segment_unmap':
                    if (S.has(a))
                        S.delete(a);
                    else if (!Q.has(a))
                        Q.set(a, { addr: a, total_size: num(t.size), stream: num(t.stream), device: dev, pool: 0,
                            is_large: false, frames: undefined });
                    break;
                default:
                    break;
                }
            }
            /* The traced segments by address, with the furthest end up to each: one
             * overlaps [a, a + z) when one starting before a + z ends past a. */
            const starts = [...S.keys()].sort((x, y) => x - y), reach = [];
            for (const sa of starts)
                reach.push(Math.max(reach.length ? reach[reach.length - 1] : -Infinity, sa + S.get(sa)));
            const overlapped = (a, z) => {
                let lo = 0, hi = starts.length;
                while (lo < hi) {
                    const mid = (lo + hi) >>> 1;
                    if (starts[mid] < a + z)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                return lo > 0 && reach[lo - 1] > a;
            };
            for (const g of final) {
                if (g.device !== dev)
                    continue;
                const a = g.addr, z = g.total_size;
                if (!overlapped(a, z))
                    Q.set(a, { addr: a, total_size: z, stream: g.stream, device: dev, pool: g.pool,
                        is_large: g.is_large, frames: g.frames });
                for (const b of g.blocks)
                    if ((b.state === STATE.active_allocated || b.state === STATE.active_pending_free) &&
                        !L.has(b.addr) && !P.has(b.addr))
                        P.set(b.addr, { addr: b.addr, size: b.size, requested_size: b.requested_size,
                            frames: b.frames, state: b.state });
            }
            const qs = [...Q.values()].sort((x, y) => x.addr - y.addr);
            const ps = [...P.values()].sort((x, y) => x.addr - y.addr);
            let j = 0;
            for (const q of qs) {
                const seg = { ...q, blocks: [] };
                while (j < ps.length && ps[j].addr < q.addr) {
                    dropped++;
                    j++;
                }
                while (j < ps.length && ps[j].addr + ps[j].size <= q.addr + q.total_size)
                    seg.blocks.push(ps[j++]);
                segments.push(seg);
            }
            dropped += ps.length - j;
        }
        return { segments, dropped };
    }

    /* Decodes a snapshot from bytes: pickle when it starts with the PROTO opcode,
     * else JSON. */
    function parseSnapshot(bytes) {
        if (bytes.length && bytes[0] === 0x80)
            return unpickle(bytes);
        let v;
        try {
            v = JSON.parse(utf8.decode(bytes));
        } catch (e) {
            throw new PickleError('not a memtrace file, a PyTorch pickle snapshot or JSON: ' + e.message);
        }
        return v;
    }

    /* Turns a snapshot object into what format.js's read() gives: the state live
     * before the first entry to sink.state(s) (where anything was), events to
     * sink.event(e) in trace order (devices one after another, annotations merged by
     * time), and tables and state in the result. */
    function readSnapshot(snap, sink) {
        if (snap === null || typeof snap !== 'object' || Array.isArray(snap) ||
            !('segments' in snap || 'device_traces' in snap))
            throw new PickleError('not a PyTorch memory snapshot (no segments or device_traces)');
        const strings = [''], strIds = new Map();
        const frames = [null], frameIds = new Map();
        let stackParent = new Uint32Array(1024), stackFrame = new Uint32Array(1024), nstacks = 0;
        const nodeIds = new Map();
        const str = (s) => {
            s = typeof s === 'string' ? s : s === undefined || s === null ? '' : String(s);
            let id = strIds.get(s);
            if (id === undefined) {
                id = strings.length;
                strings.push(s);
                strIds.set(s, id);
            }
            return id;
        };
        const frameOf = (f) => {
            if (f === null || typeof f !== 'object')
                return 0;
            const k = `${f.name}\u0000${f.filename}\u0000${f.line}`;
            let id = frameIds.get(k);
            if (id === undefined) {
                id = frames.length;
                frames.push({ ip: 0, offset: 0, module: 0, symbol: str(f.name), file: str(f.filename),
                    line: num(f.line) });
                frameIds.set(k, id);
            }
            return id;
        };
        const stackOf = (fs) => {
            if (!Array.isArray(fs) || fs.length === 0)
                return 0;
            let node = 0;
            for (let i = fs.length - 1; i >= 0; i--) {
                const fr = frameOf(fs[i]);
                const k = node * 4294967296 + fr;
                let id = nodeIds.get(k);
                if (id === undefined) {
                    id = ++nstacks;
                    if (id >= stackParent.length) {
                        const a = new Uint32Array(stackParent.length * 2), c = new Uint32Array(stackParent.length * 2);
                        a.set(stackParent);
                        c.set(stackFrame);
                        stackParent = a;
                        stackFrame = c;
                    }
                    stackParent[id] = node;
                    stackFrame[id] = fr;
                    nodeIds.set(k, id);
                }
                node = id;
            }
            return node;
        };

        const traces = Array.isArray(snap.device_traces) ? snap.device_traces : [];
        /* The final segments, blocks at their addresses (else where the one before
         * ends, as the snapshot lays them out); frames resolved below. */
        const final = [];
        for (const s of Array.isArray(snap.segments) ? snap.segments : []) {
            if (s === null || typeof s !== 'object')
                continue;
            const pool = Array.isArray(s.segment_pool_id) ? num(s.segment_pool_id[0]) : num(s.segment_pool_id);
            let at = num(s.address);
            final.push({
                addr: num(s.address), total_size: num(s.total_size), allocated_size: num(s.allocated_size),
                active_size: num(s.active_size), requested_size: num(s.requested_size),
                stream: num(s.stream), device: num(s.device), pool,
                is_large: s.segment_type === 'large', is_expandable: s.is_expandable === true,
                frames: s.frames, source: 0,
                blocks: (Array.isArray(s.blocks) ? s.blocks : []).filter((k) => k && typeof k === 'object').map((k) => {
                    const addr = k.address !== undefined ? num(k.address) : at;
                    at = addr + num(k.size);
                    return { addr, size: num(k.size), requested_size: num(k.requested_size),
                        frames: blockFrames(k), state: STATE[k.state] || 0 };
                }),
            });
        }
        const anns = Array.isArray(snap.external_annotations) ? snap.external_annotations : [];
        let tmin = Infinity;
        for (const tr of traces)
            if (Array.isArray(tr))
                for (const e of tr)
                    if (e && e.time_us !== undefined)
                        tmin = Math.min(tmin, num(e.time_us));
        for (const a of anns)
            if (a && a.time_us !== undefined)
                tmin = Math.min(tmin, num(a.time_us));
        const haveTime = tmin !== Infinity;
        if (!haveTime)
            tmin = 0;
        /* Times become ns from the first entry: time_us * 1000 since the epoch
         * exceeds 2^53. */
        const timeOf = (v, fallback) => (v === undefined ? fallback : (num(v) - tmin) * 1000);
        const e = { index: 0, action: 0, time: 0, tid: 0, addr: 0, size: 0, requested_size: 0,
            stream: 0, aux: 0, device: 0, pool: 0, stack: 0, category: 0, source: 0, wide: false };
        const annEvents = anns.filter((a) => a && typeof a === 'object').map((a) => ({
            time: timeOf(a.time_us, 0), device: num(a.device), name: str(a.name),
            kind: a.stage === 'END' ? 1 : a.stage === 'START' ? 0 : 2 }));
        annEvents.sort((x, y) => x.time - y.time);
        let ai = 0, events = 0, last = 0;
        const emitAnn = (a) => {
            e.index = events++; e.action = ACTION.annotate; e.time = a.time; e.addr = 0; e.size = 0;
            e.requested_size = 0; e.stream = 0; e.aux = a.kind; e.device = a.device; e.stack = 0;
            e.category = a.name; e.source = 0;
            if (sink.event)
                sink.event(e);
        };
        /* Stacks are interned in trace order, then the initial state's and the
         * final state's: the initial state goes to the sink before the first event. */
        const stacks = traces.map((tr) => (Array.isArray(tr)
            ? Uint32Array.from(tr, (t) => (t !== null && typeof t === 'object' ? stackOf(t.frames) : 0)) : null));
        const resolve = (g) => {
            const { frames, blocks, ...seg } = g;
            seg.stack = stackOf(frames);
            seg.blocks = blocks.map(({ frames: bf, ...b }) => ({ ...b, stack: stackOf(bf) }));
            return seg;
        };
        const init = initialState(traces, final);
        const initial = init.segments.length ? { time: 0, segments: init.segments.map(resolve) } : null;
        if (initial && sink.state)
            sink.state(initial);
        traces.forEach((tr, dev) => {
            if (!Array.isArray(tr))
                return;
            for (let k = 0; k < tr.length; k++) {
                const t = tr[k];
                if (t === null || typeof t !== 'object')
                    continue;
                const time = timeOf(t.time_us, last + 1000);
                while (ai < annEvents.length && annEvents[ai].time <= time)
                    emitAnn(annEvents[ai++]);
                last = time;
                const act = ACTION[t.action];
                e.index = events++;
                e.action = act === undefined ? 255 : act;
                e.time = time;
                e.addr = num(t.addr);
                e.size = num(t.size);
                e.requested_size = num(t.requested_size !== undefined ? t.requested_size : t.size);
                e.stream = num(t.stream);
                e.aux = act === ACTION.oom ? num(t.device_free) : 0;
                e.device = dev;
                e.pool = 0;
                e.stack = stacks[dev][k];
                e.category = 0;
                e.source = 0;
                if (sink.event)
                    sink.event(e);
            }
        });
        while (ai < annEvents.length)
            emitAnn(annEvents[ai++]);

        const segments = final.map(resolve);
        const meta = { format: 'pytorch-snapshot' };
        if (haveTime)
            meta.start_time_ns = tmin * 1000;
        if (snap.allocator_settings && typeof snap.allocator_settings === 'object')
            meta.allocator_settings = snap.allocator_settings;
        return {
            version: [0, 0], meta, end: null, truncated: false, error: null, events, wide: 0,
            strings, frames, stackParent: stackParent.subarray(0, nstacks + 1),
            stackFrame: stackFrame.subarray(0, nstacks + 1),
            state: segments.length ? { time: last, segments } : null,
            /* What was live before the first event, and how many blocks of it lay in
             * no segment known to be live then (left out). */
            initial: events ? initial : null, initialDropped: events ? init.dropped : 0,
        };
    }

    return { unpickle, parseSnapshot, readSnapshot, PickleError };
}

(function (api) {
    if (typeof module === 'object' && module.exports)
        module.exports = api;
    else
        globalThis.MemtracePickle = api;
})(memtracePickleFactory());
