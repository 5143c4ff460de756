/* format.js: reads .memtrace files (docs/FORMAT.md) in the browser, a worker or node.
 *
 * A file is a 16-byte header and self-delimiting chunks, each a zlib stream with a
 * CRC-32 of its header and of its stored bytes. Table chunks (strings, frames, stack
 * trie nodes) grow the tables; an EVENTS chunk holds up to 2^20 events as columns:
 * a hit bit per event (the event repeats the prediction table's entry), a time delta
 * per event, and for missed events one varint per field. Events are handed to the
 * caller one at a time in a reused object, as the C reader does, so memory follows
 * one chunk and the tables, never the number of events.
 *
 * Integers are read as Numbers while they are exact (below 2^53), which is every
 * address, size and time a real device gives; wider ones go through BigInt so the
 * arithmetic modulo 2^64 stays exact, and the event's `wide` flag is set because its
 * Number fields are then rounded.
 *
 * The file is written as one factory function so that the page can hand its source
 * to a Worker built from a Blob: pages opened from file:// may not load module
 * scripts or worker scripts by URL, but may start a worker from a Blob. */
function memtraceFormatFactory() {
    'use strict';

    const HEADER_LEN = 16;
    const CHUNK_HEADER_LEN = 20;
    const CHUNK_MAX = 256 * 1024 * 1024;
    const MAX_EVENTS = 1 << 20;
    const PREDICT_SIZE = 4096;
    const NCOLS = 14;
    const ACTIONS = ['alloc', 'free_requested', 'free_completed', 'segment_alloc',
        'segment_free', 'segment_map', 'segment_unmap', 'snapshot', 'oom', 'annotate',
        'counter'];
    const TWO32 = 4294967296;
    const SAFE = Number.MAX_SAFE_INTEGER;

    let crcTable = null;
    function crc32(buf, start, end) {
        if (crcTable === null) {
            crcTable = new Int32Array(256);
            for (let n = 0; n < 256; n++) {
                let c = n;
                for (let k = 0; k < 8; k++)
                    c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
                crcTable[n] = c;
            }
        }
        let c = -1;
        for (let i = start; i < end; i++)
            c = crcTable[(c ^ buf[i]) & 0xff] ^ (c >>> 8);
        return (c ^ -1) >>> 0;
    }

    function u16(b, o) { return b[o] | (b[o + 1] << 8); }
    function u32(b, o) { return (b[o] | (b[o + 1] << 8) | (b[o + 2] << 16)) + b[o + 3] * 0x1000000; }

    class FormatError extends Error {
        constructor(message, offset) {
            super(message);
            this.offset = offset;
        }
    }

    /* Varints: vpos is the cursor of the last call, to keep the hot path free of
     * allocations. A value of 8 bytes or more may exceed 2^53 and is returned as a
     * BigInt when it does. */
    let vpos = 0;

    /* The bound on what tables and the state cost (docs/FORMAT.md, section 8), and
     * the bytes charged per entry: the C reader's sizes on a 64-bit machine. */
    const TABLE_FLOOR = 64 * 1048576;
    const TABLE_RATIO = 64;
    const TABLE_KINDS = { 2: 'strings', 3: 'frames', 4: 'stacks', 6: 'state' };
    function varint(b, p, end) {
        let v = 0, mul = 1;
        for (let i = 0; i < 10; i++) {
            if (p >= end)
                throw new RangeError('short varint');
            const x = b[p++];
            if (i >= 7)
                return wideVarint(b, p - i - 1, end);
            v += (x & 0x7f) * mul;
            if (x < 0x80) {
                vpos = p;
                return v;
            }
            mul *= 128;
        }
        throw new RangeError('varint too long');
    }
    function wideVarint(b, p, end) {
        let v = 0n, shift = 0n;
        for (let i = 0; i < 10; i++) {
            if (p >= end)
                throw new RangeError('short varint');
            const x = b[p++];
            v |= BigInt(x & 0x7f) << shift;
            if (x < 0x80) {
                vpos = p;
                v = BigInt.asUintN(64, v);
                return v <= BigInt(SAFE) ? Number(v) : v;
            }
            shift += 7n;
        }
        throw new RangeError('varint too long');
    }
    function big(v) { return typeof v === 'bigint' ? v : BigInt(v); }
    function narrow(v) { return v <= BigInt(SAFE) ? Number(v) : v; }
    function unzz(u) {
        if (typeof u === 'bigint')
            return narrowSigned((u >> 1n) ^ -(u & 1n));
        return u % 2 ? -(u + 1) / 2 : u / 2;
    }
    function narrowSigned(v) { return v >= -BigInt(SAFE) && v <= BigInt(SAFE) ? Number(v) : v; }
    /* a + unzz(u) modulo 2^64, exact. */
    function addDelta(a, u) {
        if (typeof a === 'number' && typeof u === 'number') {
            const r = a + (u % 2 ? -(u + 1) / 2 : u / 2);
            if (r >= 0 && r <= SAFE)
                return r;
        }
        return narrow(BigInt.asUintN(64, big(a) + big(unzz(u))));
    }
    function toNum(v) { return typeof v === 'bigint' ? Number(v) : v; }

    /* High 32 bits of the unsigned 64-bit product of two 32-bit values. */
    function mulhi(a, b) {
        const a0 = a & 0xffff, a1 = a >>> 16, b0 = b & 0xffff, b1 = b >>> 16;
        const p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
        const mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
        return (p11 + (p01 >>> 16) + (p10 >>> 16) + Math.floor(mid / 65536)) >>> 0;
    }
    /* ((addr + action) * 0x9E3779B97F4A7C15 mod 2^64) >> 52 */
    function predictKey(addr, action) {
        let lo, hi;
        if (typeof addr === 'number' && addr + action <= SAFE) {
            const x = addr + action;
            lo = x >>> 0;
            hi = Math.floor(x / TWO32) >>> 0;
        } else {
            const x = BigInt.asUintN(64, big(addr) + BigInt(action));
            lo = Number(x & 0xffffffffn);
            hi = Number(x >> 32n);
        }
        const up = (mulhi(lo, 0x7f4a7c15) + Math.imul(lo, 0x9e3779b9) + Math.imul(hi, 0x7f4a7c15)) >>> 0;
        return up >>> 20;
    }

    async function inflate(stored) {
        const s = new Blob([stored]).stream().pipeThrough(new DecompressionStream('deflate'));
        return new Uint8Array(await new Response(s).arrayBuffer());
    }

    const textDecoder = new TextDecoder('utf-8');

    /* Reads a whole file held in bytes (a Uint8Array). sink.event(e) gets each
     * event (e is reused: copy what you keep; e.index is its index in the file); sink.progress(done, total) the bytes
     * read so far, about every chunk; sink.state(s) each state chunk, in file order
     * between the events (the replay's rule 0 takes the one before the first event).
     * Resolves to the reader's result: meta, end, truncated, error (null, or
     * {message, offset} for a corrupt chunk after which reading stopped), events, the
     * tables (strings, frames, stacks), the latest state and `initial`: the latest
     * state read before the first event, what was live when the events begin (null
     * when there is none, or no event). A file that is not a memtrace file rejects
     * with a FormatError. */
    async function read(bytes, sink) {
        const r = new Reader(bytes, sink || {});
        await r.run();
        return r.result();
    }

    class Reader {
        constructor(bytes, sink) {
            this.b = bytes;
            this.sink = sink;
            this.meta = {};
            this.end = null;
            this.truncated = false;
            this.error = null;
            this.events = 0;
            this.wide = 0;
            this.strings = [''];
            this.frames = [null];
            this.stackParent = new Uint32Array(1024);
            this.stackFrame = new Uint32Array(1024);
            /* What the tables and the state cost, bounded as docs/FORMAT.md section 8
             * says, with the C reader's charges, so that a decompression bomb fails
             * here with the same message as there. */
            this.cost = 0;
            this.stateCost = 0;
            this.readEnd = 0;
            this.nstacks = 0;
            this.state = null;
            this.initial = null;
            this.version = [0, 0];
        }

        result() {
            return {
                version: this.version, meta: this.meta, end: this.end,
                truncated: this.end === null && this.error === null, error: this.error,
                events: this.events, wide: this.wide, strings: this.strings, frames: this.frames,
                stackParent: this.stackParent.subarray(0, this.nstacks + 1),
                stackFrame: this.stackFrame.subarray(0, this.nstacks + 1), state: this.state,
                initial: this.events > 0 ? this.initial : null,
            };
        }

        async run() {
            const b = this.b, size = b.length;
            if (size === 0)
                throw new FormatError('empty file, not a memtrace file', 0);
            const magic = 'MEMTRACE';
            for (let i = 0; i < Math.min(8, size); i++)
                if (b[i] !== magic.charCodeAt(i))
                    throw new FormatError('not a memtrace file (bad magic)', 0);
            if (size < HEADER_LEN)
                throw new FormatError(`file ends inside the header (${size} of 16 bytes)`, size);
            const major = u16(b, 8), minor = u16(b, 10);
            this.version = [major, minor];
            if (major > 1)
                throw new FormatError(`format version ${major}.${minor} is newer than this reader (1.0)`, 8);
            if (major === 0)
                throw new FormatError(`unsupported format version ${major}.${minor}`, 8);
            /* Decompression is asynchronous: the next chunk inflates while this one
             * is decoded. */
            let off = HEADER_LEN;
            let next = this.frame(off);
            let pending = next && next.chunk ? inflate(next.chunk.stored) : null;
            while (next !== null) {
                if (next.stop)
                    break;
                const c = next.chunk;
                let raw;
                try {
                    raw = await pending;
                } catch (e) {
                    raw = null;
                }
                off = c.end;
                next = this.frame(off);
                pending = next && next.chunk ? inflate(next.chunk.stored) : null;
                if (pending)
                    pending.catch(() => {});
                try {
                    this.precheck(c);
                } catch (e) {
                    return this.corrupt(e.message, e.offset);
                }
                if (raw === null || raw.length !== c.rawLen)
                    return this.corrupt(`chunk at offset ${c.off}: bad compressed data`, c.off);
                this.readEnd = c.end;
                try {
                    this.absorb(c.type, raw, c.off);
                } catch (e) {
                    if (e instanceof FormatError)
                        return this.corrupt(e.message, e.offset);
                    if (e instanceof RangeError)
                        return this.corrupt(`chunk at offset ${c.off}: malformed ${kindName(c.type)} (${e.message})`, c.off);
                    throw e;
                }
                if (this.sink.progress)
                    this.sink.progress(c.end, size);
                if (c.type === 7)
                    return;
            }
        }

        corrupt(message, offset) {
            this.error = { message, offset };
        }

        /* Frames the chunk at off: {chunk}, {stop} (end of data, truncated or
         * corrupt, recorded), or null at the clean end of the data. */
        frame(off) {
            const b = this.b, size = b.length;
            if (off >= size)
                return null;
            if (size - off < CHUNK_HEADER_LEN) {
                this.truncated = true;
                return { stop: true };
            }
            const storedLen = u32(b, off + 4), rawLen = u32(b, off + 8);
            if (u32(b, off + 16) !== crc32(b, off, off + 16)) {
                if (off + CHUNK_HEADER_LEN + storedLen === size)
                    this.truncated = true;
                else
                    this.corrupt(`corrupt chunk header at offset ${off}`, off);
                return { stop: true };
            }
            if (storedLen > CHUNK_MAX || rawLen > CHUNK_MAX) {
                this.corrupt(`chunk at offset ${off}: impossible length (${storedLen} stored, ${rawLen} raw)`, off);
                return { stop: true };
            }
            const start = off + CHUNK_HEADER_LEN, end = start + storedLen;
            if (end > size) {
                this.truncated = true;
                return { stop: true };
            }
            if (u32(b, off + 12) !== crc32(b, start, end)) {
                if (end >= size)
                    this.truncated = true;
                else
                    this.corrupt(`chunk at offset ${off}: checksum mismatch`, off);
                return { stop: true };
            }
            return { chunk: { off, type: b[off], rawLen, end, stored: b.subarray(start, end) } };
        }

        costLimit(read) {
            return Math.max(TABLE_FLOOR, read * TABLE_RATIO);
        }

        overLimit(off, kind, total, limit) {
            return new FormatError(`chunk at offset ${off}: its ${kind} would bring the tables to ` +
                `${Math.floor(total / 1048576)} MiB, over the ${Math.floor(limit / 1048576)} MiB ` +
                'this file may use (64 MiB, or 64 bytes per byte of the file; set ' +
                'MEMTRACE_TABLE_LIMIT_MB=N to allow N MiB)', off);
        }

        /* A table or state chunk holds at least its raw bytes: refused on its header. */
        precheck(c) {
            const kind = TABLE_KINDS[c.type];
            if (!kind)
                return;
            const limit = this.costLimit(c.end);
            const kept = c.type === 6 ? this.cost - this.stateCost : this.cost;
            if (c.rawLen > limit || kept > limit - c.rawLen)
                throw this.overLimit(c.off, kind, kept + c.rawLen, limit);
        }

        charge(kind, bytes, off) {
            const limit = this.costLimit(this.readEnd);
            if (bytes > limit || this.cost > limit - bytes)
                throw this.overLimit(off, kind, this.cost + bytes, limit);
            this.cost += bytes;
        }

        absorb(type, raw, off) {
            switch (type) {
            case 1: Object.assign(this.meta, jsonObject(raw, off, 'metadata')); break;
            case 2: this.absorbStrings(raw, off); break;
            case 3: this.absorbFrames(raw, off); break;
            case 4: this.absorbStacks(raw, off); break;
            case 5: this.absorbEvents(raw, off); break;
            case 6: this.absorbState(raw, off); break;
            case 7: this.end = jsonObject(raw, off, 'end record'); break;
            default: break; /* newer minor versions may add kinds that are safe to skip */
            }
        }

        tableHead(raw, off, kind, have) {
            const first = varint(raw, 0, raw.length);
            const n = varint(raw, vpos, raw.length);
            if (first !== have + 1)
                throw new FormatError(`chunk at offset ${off}: ${kind} start at id ${first}, expected ${have + 1}`, off);
            if (typeof n !== 'number' || n > 0xffffffff - have)
                throw new FormatError(`chunk at offset ${off}: malformed ${kind} (too many ids)`, off);
            return n;
        }

        absorbStrings(raw, off) {
            const n = this.tableHead(raw, off, 'strings', this.strings.length - 1);
            let p = vpos;
            if (n > raw.length - p)
                throw new FormatError(`chunk at offset ${off}: malformed strings (count exceeds payload)`, off);
            this.charge('strings', 8 + (raw.length - p) + 1 + n * 8, off);
            for (let i = 0; i < n; i++) {
                const z = raw.indexOf(0, p);
                if (z < 0)
                    throw new FormatError(`chunk at offset ${off}: malformed strings (unterminated string)`, off);
                this.strings.push(textDecoder.decode(raw.subarray(p, z)));
                p = z + 1;
            }
            if (p !== raw.length)
                throw new FormatError(`chunk at offset ${off}: malformed strings (trailing bytes)`, off);
        }

        absorbFrames(raw, off) {
            const n = this.tableHead(raw, off, 'frames', this.frames.length - 1);
            let p = vpos;
            const end = raw.length;
            if (n > (end - p) / 6)
                throw new FormatError(`chunk at offset ${off}: malformed frames (count exceeds payload)`, off);
            this.charge('frames', n * 64, off);
            let ip = 0;
            for (let i = 0; i < n; i++) {
                ip = addDelta(ip, varint(raw, p, end));
                const offset = varint(raw, vpos, end);
                const module = varint(raw, vpos, end);
                const symbol = varint(raw, vpos, end);
                const file = varint(raw, vpos, end);
                const line = varint(raw, vpos, end);
                p = vpos;
                this.frames.push({ ip: toNum(ip), offset: toNum(offset), module: id32(module),
                    symbol: id32(symbol), file: id32(file), line: id32(line) });
            }
            if (p !== end)
                throw new FormatError(`chunk at offset ${off}: malformed frames (trailing bytes)`, off);
        }

        absorbStacks(raw, off) {
            const n = this.tableHead(raw, off, 'stacks', this.nstacks);
            let p = vpos;
            const end = raw.length;
            if (n > (end - p) / 2)
                throw new FormatError(`chunk at offset ${off}: malformed stacks (count exceeds payload)`, off);
            this.charge('stacks', n * 12, off);
            const need = this.nstacks + n + 1;
            if (need > this.stackParent.length) {
                let cap = this.stackParent.length;
                while (cap < need)
                    cap *= 2;
                const a = new Uint32Array(cap), f = new Uint32Array(cap);
                a.set(this.stackParent);
                f.set(this.stackFrame);
                this.stackParent = a;
                this.stackFrame = f;
            }
            for (let i = 0; i < n; i++) {
                const up = varint(raw, p, end);
                const frame = varint(raw, vpos, end);
                p = vpos;
                const id = this.nstacks + 1;
                if (typeof up !== 'number' || up === 0 || up > id)
                    throw new FormatError(`chunk at offset ${off}: malformed stacks (parent is not an earlier node)`, off);
                this.stackParent[id] = id - up;
                this.stackFrame[id] = id32(frame);
                this.nstacks++;
            }
            if (p !== end)
                throw new FormatError(`chunk at offset ${off}: malformed stacks (trailing bytes)`, off);
        }

        absorbState(raw, off) {
            const end = raw.length;
            const t = varint(raw, 0, end);
            const n = varint(raw, vpos, end);
            let p = vpos;
            if (typeof n !== 'number' || n > (end - p) / 12)
                throw new FormatError(`chunk at offset ${off}: malformed state (segment count exceeds payload)`, off);
            const before = this.cost;
            this.cost -= this.stateCost;
            try {
                this.charge('state', n * 96, off);
            } catch (e) {
                this.cost = before;
                throw e;
            }
            const segs = [];
            for (let i = 0; i < n; i++) {
                const v = [];
                for (let k = 0; k < 12; k++) {
                    v.push(varint(raw, p, end));
                    p = vpos;
                }
                const nb = v[11];
                if (typeof nb !== 'number' || nb > (end - p) / 5)
                    throw new FormatError(`chunk at offset ${off}: malformed state (block count exceeds payload)`, off);
                this.charge('state', nb * 32, off);
                const seg = {
                    addr: toNum(v[0]), total_size: toNum(v[1]), allocated_size: toNum(v[2]),
                    active_size: toNum(v[3]), requested_size: toNum(v[4]), stream: toNum(v[5]),
                    device: Number(BigInt.asIntN(32, big(unzz(v[6])))),
                    pool: Number(BigInt.asIntN(32, big(unzz(v[7])))),
                    is_large: (toNum(v[8]) & 1) !== 0, is_expandable: (toNum(v[8]) & 2) !== 0,
                    stack: id32(v[9]), source: id32(v[10]), blocks: [],
                };
                let expect = v[0];
                for (let k = 0; k < nb; k++) {
                    const w = [];
                    for (let j = 0; j < 5; j++) {
                        w.push(varint(raw, p, end));
                        p = vpos;
                    }
                    const addr = addDelta(expect, w[0]);
                    const st = unzz(w[4]);
                    seg.blocks.push({ addr: toNum(addr), size: toNum(w[1]), requested_size: toNum(w[2]),
                        stack: id32(w[3]), state: typeof st === 'number' && Math.abs(st) <= 0x7fffffff ? st : 0 });
                    expect = narrow(BigInt.asUintN(64, big(addr) + big(w[1])));
                }
                segs.push(seg);
            }
            if (p !== end)
                throw new FormatError(`chunk at offset ${off}: malformed state (trailing bytes)`, off);
            this.stateCost = this.cost - (before - this.stateCost);
            this.state = { time: toNum(t), segments: segs };
            if (this.events === 0)
                this.initial = this.state;
            if (this.sink.state)
                this.sink.state(this.state);
        }

        absorbEvents(raw, off) {
            const end = raw.length;
            const bad = (why) => new FormatError(`chunk at offset ${off}: malformed events (${why})`, off);
            const n = varint(raw, 0, end);
            let p = vpos;
            if (p >= end)
                throw bad('short header');
            if (typeof n !== 'number' || n > MAX_EVENTS)
                throw bad('too many events');
            const ncols = raw[p++];
            if (ncols < 3)
                throw bad('too few columns');
            /* Per column: konst (1 const, 0 varint), value, cursor, end. */
            const konst = new Uint8Array(NCOLS).fill(1);
            const value = new Array(NCOLS).fill(0);
            const cur = new Int32Array(NCOLS), cend = new Int32Array(NCOLS);
            let hitBits = null, misses = n;
            for (let c = 0; c < ncols; c++) {
                if (p >= end)
                    throw bad('short column');
                const mode = raw[p++];
                let v = 0, cp = 0, ce = 0;
                if (mode === 0) {
                    v = varint(raw, p, end);
                    p = vpos;
                } else if (mode === 1 || mode === 2) {
                    if (end - p < 4)
                        throw bad('short column');
                    const clen = u32(raw, p);
                    p += 4;
                    if (clen > end - p)
                        throw bad('column exceeds payload');
                    cp = p;
                    ce = p + clen;
                    p += clen;
                } else {
                    throw bad('unknown column mode');
                }
                if (c === 0) {
                    if (mode === 1 || (mode === 0 && v !== 0 && v !== 1))
                        throw bad('bad hit column');
                    if (mode === 0) {
                        misses = v ? 0 : n;
                    } else {
                        if (ce - cp !== Math.ceil(n / 8))
                            throw bad('hit column length');
                        hitBits = raw.subarray(cp, ce);
                        let hits = 0;
                        for (let i = 0; i < n; i++)
                            hits += (hitBits[i >> 3] >> (i & 7)) & 1;
                        misses = n - hits;
                    }
                } else if (mode === 2) {
                    throw bad('bit column where values are expected');
                } else if (mode === 1 && c < NCOLS && countVarints(raw, cp, ce) !== (c === 2 ? n : misses)) {
                    throw bad('column does not hold one varint per value');
                }
                if (c < NCOLS) {
                    konst[c] = mode === 0 ? 1 : 0;
                    value[c] = v;
                    cur[c] = cp;
                    cend[c] = ce;
                }
            }
            if (p !== end)
                throw bad('trailing bytes');
            if (konst[0] && hitBits === null)
                value[0] = value[0] ? 1 : 0;
            this.decodeEvents(raw, n, hitBits, value[0], konst, value, cur, cend);
        }

        decodeEvents(raw, n, hitBits, allHit, konst, value, cur, cend) {
            const P = {
                action: new Uint8Array(PREDICT_SIZE), tid: new Uint32Array(PREDICT_SIZE),
                addr: new Array(PREDICT_SIZE).fill(0), size: new Array(PREDICT_SIZE).fill(0),
                req: new Array(PREDICT_SIZE).fill(0), stream: new Array(PREDICT_SIZE).fill(0),
                aux: new Array(PREDICT_SIZE).fill(0), device: new Int32Array(PREDICT_SIZE),
                pool: new Int32Array(PREDICT_SIZE), stack: new Uint32Array(PREDICT_SIZE),
                category: new Uint32Array(PREDICT_SIZE), source: new Uint32Array(PREDICT_SIZE),
            };
            const sink = this.sink.event ? this.sink : null;
            /* sink.exact: wide fields stay BigInts instead of rounded Numbers. */
            const exact = !!this.sink.exact;
            const e = { index: 0, action: 0, time: 0, tid: 0, addr: 0, size: 0, requested_size: 0,
                stream: 0, aux: 0, device: 0, pool: 0, stack: 0, category: 0, source: 0, wide: false };
            /* The previous event's fields, exact (a BigInt where wider than 2^53). */
            let time = 0, action = 0, tid = 0, addr = 0, size = 0, req = 0, stream = 0, aux = 0;
            let device = 0, pool = 0, stack = 0, category = 0, source = 0;
            let key = 0;
            const next = (c) => {
                if (konst[c])
                    return value[c];
                const v = varint(raw, cur[c], cend[c]);
                cur[c] = vpos;
                return v;
            };
            for (let i = 0; i < n; i++) {
                const hit = hitBits === null ? allHit : (hitBits[i >> 3] >> (i & 7)) & 1;
                if (hit) {
                    action = P.action[key]; tid = P.tid[key]; addr = P.addr[key]; size = P.size[key];
                    req = P.req[key]; stream = P.stream[key]; aux = P.aux[key];
                    device = P.device[key]; pool = P.pool[key]; stack = P.stack[key];
                    category = P.category[key]; source = P.source[key];
                } else {
                    action = low8(next(1));
                    tid = konst[3] ? u32of(value[3]) : (tid + toNum(unzz(next(3)))) >>> 0;
                    addr = konst[4] ? value[4] : addDelta(addr, next(4));
                    size = next(5);
                    req = konst[6] ? value[6] : addDelta(size, next(6));
                    stream = konst[7] ? value[7] : addDelta(stream, next(7));
                    aux = next(8);
                    device = konst[9] ? i32(unzz(value[9])) : i32(device + toNum(unzz(next(9))));
                    pool = konst[10] ? i32(unzz(value[10])) : i32(pool + toNum(unzz(next(10))));
                    stack = u32of(next(11));
                    category = u32of(next(12));
                    source = u32of(next(13));
                }
                time = addDelta(time, next(2));
                P.action[key] = action; P.tid[key] = tid; P.addr[key] = addr; P.size[key] = size;
                P.req[key] = req; P.stream[key] = stream; P.aux[key] = aux; P.device[key] = device;
                P.pool[key] = pool; P.stack[key] = stack; P.category[key] = category;
                P.source[key] = source;
                key = predictKey(addr, action);
                if (sink !== null) {
                    e.index = this.events;
                    e.action = action; e.tid = tid; e.device = device; e.pool = pool;
                    e.stack = stack; e.category = category; e.source = source;
                    e.wide = typeof time !== 'number' || typeof addr !== 'number' ||
                        typeof size !== 'number' || typeof req !== 'number' ||
                        typeof stream !== 'number' || typeof aux !== 'number';
                    if (e.wide)
                        this.wide++;
                    if (exact) {
                        e.time = time; e.addr = addr; e.size = size; e.requested_size = req;
                        e.stream = stream; e.aux = aux;
                    } else if (e.wide) {
                        e.time = toNum(time); e.addr = toNum(addr); e.size = toNum(size);
                        e.requested_size = toNum(req); e.stream = toNum(stream); e.aux = toNum(aux);
                    } else {
                        e.time = time; e.addr = addr; e.size = size; e.requested_size = req;
                        e.stream = stream; e.aux = aux;
                    }
                    sink.event(e);
                }
                this.events++;
            }
        }
    }

    /* int32 from a Number or BigInt, modulo 2^32 as the C reader's casts. */
    function i32(v) {
        if (typeof v === 'bigint')
            return Number(BigInt.asIntN(32, v));
        if (v >= -0x80000000 && v <= 0x7fffffff)
            return v;
        return Number(BigInt.asIntN(32, BigInt(v)));
    }
    function low8(v) { return typeof v === 'bigint' ? Number(v & 0xffn) : v & 0xff; }
    function u32of(v) { return typeof v === 'bigint' ? Number(v & 0xffffffffn) : v >>> 0; }
    /* An id read from the file: values past 32 bits read as 0 (unknown). */
    function id32(v) { return typeof v === 'number' && v <= 0xffffffff ? v : 0; }

    function countVarints(b, p, end) {
        let count = 0, run = 0;
        for (; p < end; p++) {
            if (b[p] & 0x80) {
                if (++run > 9)
                    return -1;
            } else {
                count++;
                run = 0;
            }
        }
        return run === 0 ? count : -1;
    }

    function jsonObject(raw, off, kind) {
        let v;
        try {
            v = JSON.parse(textDecoder.decode(raw));
        } catch (e) {
            v = null;
        }
        if (v === null || typeof v !== 'object' || Array.isArray(v))
            throw new FormatError(`chunk at offset ${off}: malformed ${kind} (not a JSON object)`, off);
        return v;
    }

    function kindName(t) {
        return ['chunk', 'metadata', 'strings', 'frames', 'stacks', 'events', 'state', 'end record'][t] || 'chunk';
    }

    /* Frames of stack id, innermost first, as {symbol, file, line, module, ip, offset}
     * with strings resolved. */
    function stackFrames(res, stack, max) {
        const out = [];
        let id = stack < res.stackParent.length ? stack : 0;
        while (id !== 0 && (max === undefined || out.length < max)) {
            const f = res.frames[res.stackFrame[id]];
            if (f)
                out.push({ symbol: res.strings[f.symbol] || '', file: res.strings[f.file] || '',
                    line: f.line, module: res.strings[f.module] || '', ip: f.ip, offset: f.offset });
            else
                out.push({ symbol: '', file: '', line: 0, module: '', ip: 0, offset: 0 });
            id = res.stackParent[id];
        }
        return out;
    }

    /* Which frames the views show by default. A copy of snapshot/frames.c's rules, in
     * its order and with its lists: a change to one is a change to both, and
     * tests/snapshot/frames-cases.json holds the cases both pass (tests/snapshot/frames-t,
     * tests/web/frames-t.mjs). A frame of a Python file is always shown. */
    const FRAME_RULES = {
        /* Symbols that take the stack, and the allocators that ask for it. */
        captureWithin: ['unwind::unwind', 'CapturedTraceback::gather', 'gather_with_cpp'],
        capturePrefix: ['c10::cuda::CUDACachingAllocator::', 'c10::xpu::XPUCachingAllocator::'],
        /* The dispatcher's generic layers between an operator's call and its kernel. */
        dispatchPrefix: ['c10::impl::wrap_kernel_functor_unboxed_', 'c10::impl::make_boxed_from_unboxed_functor',
            'c10::impl::BoxedKernelWrapper', 'c10::impl::call_functor_with_args_from_stack',
            'c10::BoxedKernel::', 'c10::KernelFunction::', 'c10::Dispatcher::', 'c10::OperatorHandle::',
            'c10::TypedOperatorHandle'],
        /* CPython's C functions that run Python code, by prefix (besides the Py and _Py
         * API names), and the interpreter's files. */
        interpPrefix: ['cfunction_', 'method_vectorcall', 'vectorcall_method', 'slot_tp_', 'pymain_', 'run_mod',
            'run_eval_code_obj', 'builtin_exec'],
        interpFile: ['Python/ceval.c', 'Objects/call.c', 'Objects/methodobject.c', 'Python/pythonrun.c',
            'Modules/main.c', 'pycore_ceval.h', 'cpython/abstract.h'],
        /* Below main and a thread's function. */
        startExact: ['_start', 'start_thread', '__clone', '__clone3', 'clone3', 'clone',
            'execute_native_thread_routine'],
        startPrefix: ['__libc_start_'],
    };

    /* A name of CPython's C API: Py or _Py, then a capital letter or '_'. */
    function pythonApi(s) {
        const k = s[0] === '_' ? 1 : 0, c = s[k + 2] || '';
        return s[k] === 'P' && s[k + 1] === 'y' && ((c >= 'A' && c <= 'Z') || c === '_');
    }

    /* The kind of frame f ({symbol, file, module, ip} as stackFrames gives it; null:
     * 'unknown'): 'shown', 'capture', 'dispatch', 'interpreter', 'start' or 'unknown'. */
    function frameKind(f) {
        if (!f)
            return 'unknown';
        const R = FRAME_RULES, sym = f.symbol || '', file = f.file || '';
        const base = file.slice(file.lastIndexOf('/') + 1);
        const known = (s) => s !== '' && s !== '??';
        const prefixed = (list) => list.some((p) => sym.startsWith(p));
        if (file.endsWith('.py'))
            return 'shown';
        if (!known(sym) && !known(file) && !f.module && !f.ip)
            return 'unknown';
        if (R.captureWithin.some((w) => sym.includes(w)) || prefixed(R.capturePrefix))
            return 'capture';
        if (prefixed(R.dispatchPrefix) || file.includes('core/boxing/') ||
            (base.startsWith('Register') && base.endsWith('.cpp')) ||
            (sym.startsWith('at::_ops::') && sym.includes('::redispatch(')))
            return 'dispatch';
        if (pythonApi(sym) || prefixed(R.interpPrefix) || R.interpFile.some((w) => file.includes(w)))
            return 'interpreter';
        if (R.startExact.includes(sym) || prefixed(R.startPrefix))
            return 'start';
        return 'shown';
    }

    /* The frames of a stack (innermost first) that are shown, in order: {frames,
     * where (each one's index in the whole stack), hidden (how many are not)}. When no
     * frame would be shown all are: a stack is never shown empty. */
    function shownFrames(frames) {
        const kept = [], where = [];
        frames.forEach((f, k) => {
            if (frameKind(f) === 'shown') {
                kept.push(f);
                where.push(k);
            }
        });
        if (kept.length === 0)
            return { frames: frames.slice(), where: frames.map((f, k) => k), hidden: 0 };
        return { frames: kept, where, hidden: frames.length - kept.length };
    }

    /* "6 capture, 10 dispatch, ...": how many frames of each kind frameKind hides, in
     * the order of the CLI's line (viewer/cli_stack.c); "" when none. */
    function hiddenKinds(frames) {
        const count = new Map(['capture', 'dispatch', 'interpreter', 'start', 'unknown'].map((k) => [k, 0]));
        for (const f of frames) {
            const k = frameKind(f);
            if (count.has(k))
                count.set(k, count.get(k) + 1);
        }
        return [...count].filter(([, n]) => n).map(([k, n]) => `${n} ${k}`).join(', ');
    }

    /* The frame that names a stack in one line: its innermost Python frame, else its
     * innermost shown frame, else its innermost frame; null for an empty stack. */
    function nameFrame(frames) {
        const python = frames.find((f) => f && (f.file || '').endsWith('.py'));
        return python || frames.find((f) => frameKind(f) === 'shown') || frames[0] || null;
    }

    function isMemtrace(bytes) {
        return bytes.length >= 8 && textDecoder.decode(bytes.subarray(0, 8)) === 'MEMTRACE';
    }

    return { read, crc32, predictKey, stackFrames, frameKind, shownFrames, hiddenKinds, nameFrame, isMemtrace,
        FormatError, ACTIONS };
}

(function (api) {
    if (typeof module === 'object' && module.exports)
        module.exports = api;
    else
        globalThis.MemtraceFormat = api;
})(memtraceFormatFactory());
