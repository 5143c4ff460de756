/* worker.js: decodes a file off the page's thread. The page builds the worker from
 * a Blob of this function's source and the reader modules' (see app.js), which works
 * from file:// as well as from a server. Messages in: {id, name, bytes: ArrayBuffer}.
 * Out: {id, type: 'progress', done, total, phase}, then {id, type: 'loaded', model,
 * info} (model's typed arrays transferred) or {id, type: 'error', message}. */
function memtraceWorkerMain(self, Format, Pickle, ReplayMod) {
    'use strict';
    self.onmessage = async (msg) => {
        const { id, name, bytes } = msg.data;
        let last = 0;
        const progress = (done, total, phase) => {
            const now = Date.now();
            if (now - last >= 50 || done === total) {
                last = now;
                self.postMessage({ id, type: 'progress', done, total, phase });
            }
        };
        try {
            const b = new Uint8Array(bytes);
            const rp = new ReplayMod.Replay();
            const sink = { event: (e) => rp.event(e), state: (s) => rp.state(s),
                progress: (d, t) => progress(d, t, 'decoding') };
            let res, kind;
            if (Format.isMemtrace(b)) {
                kind = 'memtrace';
                res = await Format.read(b, sink);
            } else {
                kind = b.length && b[0] === 0x80 ? 'pytorch pickle' : 'pytorch json';
                progress(0, 1, 'parsing');
                res = Pickle.readSnapshot(Pickle.parseSnapshot(b), sink);
            }
            progress(1, 1, 'indexing');
            const model = rp.model();
            const info = {
                name, kind, size: b.length, version: res.version, meta: res.meta, end: res.end,
                truncated: res.truncated, error: res.error, events: res.events, wide: res.wide,
                strings: res.strings, frames: res.frames, stackParent: res.stackParent,
                stackFrame: res.stackFrame, state: res.state, initialDropped: res.initialDropped || 0,
            };
            self.postMessage({ id, type: 'loaded', model, info }, ReplayMod.transferables(model));
        } catch (e) {
            self.postMessage({ id, type: 'error', message: String(e && e.message ? e.message : e) });
        }
    };
}
