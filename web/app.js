/* app.js: the viewer page: loading (file picker, drag and drop, ?file=URL), the
 * views, hover and pinning, zoom and pan, and the view kept in the URL's hash.
 *
 * Every string that comes from a file reaches the page through textContent or
 * canvas text, never as HTML. */
(function () {
    'use strict';
    const $ = (id) => document.getElementById(id);
    const Timeline = globalThis.MemtraceTimeline;
    const Format = globalThis.MemtraceFormat;
    const Compare = globalThis.MemtraceCompare;

    const S = {
        model: null, info: null, tl: null, segTl: null,
        files: [], cur: 0, /* every file opened together ({model, info}); the one shown */
        view: { t0: 0, t1: 1, device: null, stream: null, category: null },
        tab: 'timeline', pinned: null, last: null, at: null, search: '', match: null, matchIds: null, flameFocus: [],
        peakSort: { key: 'bytes', dir: -1 },
        renderMs: 0, loadStart: 0, loadMs: 0, firstDrawMs: 0,
    };
    const MARGIN = { left: 78, right: 12, top: 16, bottom: 26 };

    /* ---------- formatting ---------- */
    function fmtBytes(b) {
        const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
        let i = 0, v = Math.abs(b);
        while (v >= 1024 && i < u.length - 1) {
            v /= 1024;
            i++;
        }
        return (b < 0 ? '-' : '') + (i === 0 ? String(v) : v.toFixed(1)) + ' ' + u[i];
    }
    function fmtTime(ns) {
        const a = Math.abs(ns);
        if (a >= 1e9)
            return (ns / 1e9).toFixed(a >= 1e11 ? 0 : 3) + ' s';
        if (a >= 1e6)
            return (ns / 1e6).toFixed(a >= 1e8 ? 0 : 2) + ' ms';
        if (a >= 1e3)
            return (ns / 1e3).toFixed(1) + ' us';
        return ns.toFixed(0) + ' ns';
    }
    function hex(n) {
        return '0x' + (typeof n === 'bigint' ? n.toString(16) : Math.round(n).toString(16));
    }
    function el(tag, text, cls) {
        const e = document.createElement(tag);
        if (text !== undefined && text !== null)
            e.textContent = String(text);
        if (cls)
            e.className = cls;
        return e;
    }
    function frameText(f) {
        let s = f.symbol || (f.module ? `${f.module}+${hex(f.offset)}` : hex(f.ip));
        if (f.file && f.file !== '??')
            s += ` (${f.file}${f.line ? ':' + f.line : ''})`;
        return s;
    }
    function stackOf(stack, max) {
        return Format.stackFrames(S.info, stack, max);
    }
    /* "all frames": every view shows every frame of a stack. */
    function allFrames() {
        return $('all-frames').checked;
    }
    /* The frames of a stack the views show (frames.c's rules, format.js's copy):
     * {frames, where (each one's index in the whole stack), hidden}; every frame when
     * "all frames" is ticked. */
    function visible(frames) {
        if (allFrames())
            return { frames, where: frames.map((f, k) => k), hidden: 0 };
        const v = Format.shownFrames(frames);
        v.kinds = v.hidden ? Format.hiddenKinds(frames) : '';
        return v;
    }
    /* The frame that names a stack in one line: its innermost frame with "all
     * frames", else its innermost Python frame or innermost shown frame. */
    function nameOf(stack) {
        return allFrames() ? stackOf(stack, 1)[0] : Format.nameFrame(stackOf(stack));
    }
    /* A frame of a list as the CLI prints it: #index in the whole stack, so that a gap
     * in the numbers shows where frames were hidden. */
    function frameLine(tag, f, k) {
        const line = el(tag, null, 'frame-line');
        line.appendChild(el('span', `#${k}`, 'frame-no'));
        line.appendChild(document.createTextNode(' '));
        line.appendChild(el('span', frameText(f), 'frame'));
        return line;
    }
    function moreFrames(box, n) {
        box.appendChild(el('div', `... ${n} more frame${n === 1 ? '' : 's'}`, 'frames-more'));
    }
    /* The lines after a list of frames: how many more there are (past the first
     * listed of those shown), how many hidden. */
    function framesNotes(box, v, listed) {
        if (v.frames.length > listed)
            moreFrames(box, v.frames.length - listed);
        if (v.hidden)
            box.appendChild(el('div', `${v.hidden} frame${v.hidden === 1 ? '' : 's'} hidden: ${v.kinds}; ` +
                'tick "all frames" to see them', 'frames-hidden'));
    }
    /* A stack in a table cell, as the CLI's --depth N lists it: the first N frames
     * shown, then up to N Python frames past them, so that a deep native stack does
     * not hide the program's lines; "... K more frames" for each gap. */
    const DEPTH = 12;
    function framesCell(td, v) {
        let python = 0, next = 0;
        v.frames.forEach((f, k) => {
            let keep = k < DEPTH;
            if (!keep && python < DEPTH && f && (f.file || '').length > 3 && f.file.endsWith('.py')) {
                keep = true;
                python++;
            }
            if (!keep)
                return;
            if (k > next)
                moreFrames(td, k - next);
            td.appendChild(frameLine('div', f, v.where[k]));
            next = k + 1;
        });
        framesNotes(td, v, next);
    }
    function str(id) {
        return (S.info && S.info.strings[id]) || '';
    }
    /* The device, stream and category selectors' choice, which every view shows.
     * A category is a block's (a segment has none): segments are chosen by device
     * and stream only. file: another file of the set, whose category of the same
     * name is chosen (ids differ between files; -1 where it has none). */
    function filter(file) {
        let category = S.view.category;
        if (file && file.info !== S.info && category !== null) {
            const name = category ? str(category) : '';
            category = category ? file.model.categories.find((k) => k && file.info.strings[k] === name) : 0;
            if (category === undefined)
                category = -1;
        }
        return { device: S.view.device, stream: S.view.stream, category };
    }
    function selected(cols, id) {
        return cols.device[id] === S.view.device && (S.view.stream === null || cols.stream[id] === S.view.stream) &&
            (S.view.category === null || cols !== S.model.blocks || cols.category[id] === S.view.category);
    }
    function filterText() {
        const v = S.view;
        return (S.model.devices.length > 1 ? ` on ${v.device < 0 ? 'the host' : 'device ' + v.device}` : '') +
            (v.stream === null ? '' : ` on stream ${hex(v.stream)}`) +
            (v.category === null ? '' : ` in category ${v.category ? str(v.category) : '(none)'}`);
    }
    /* The peak of the chosen blocks (segs: of the chosen segments), kept per model. */
    function peak(segs) {
        const m = S.model, v = S.view, key = `${segs ? 's' : 'b'} ${v.device} ${v.stream} ${segs ? '' : v.category}`;
        m.peaks = m.peaks || new Map();
        if (!m.peaks.has(key))
            m.peaks.set(key, segs ? Compare.peakOf(m.segs, m.segOps, m.t_min, { ...filter(), category: null })
                : Compare.peakOf(m.blocks, m.blockOps, m.t_min, filter()));
        return m.peaks.get(key);
    }

    /* ---------- loading ---------- */
    let worker = null, jobId = 0;
    function workerSource() {
        /* Function.prototype.toString gives each module's exact source. */
        return [memtraceFormatFactory, memtracePickleFactory, memtraceReplayFactory, memtraceWorkerMain]
            .map(String).join('\n') +
            '\nmemtraceWorkerMain(self, memtraceFormatFactory(), memtracePickleFactory(), memtraceReplayFactory());\n';
    }
    function getWorker() {
        if (worker === null) {
            const url = URL.createObjectURL(new Blob([workerSource()], { type: 'text/javascript' }));
            worker = new Worker(url);
        }
        return worker;
    }

    function setState(s) {
        document.body.dataset.state = s;
    }
    function showMessage(text, kind) {
        const m = $('message');
        m.textContent = text;
        m.className = kind || '';
        m.hidden = !text;
    }
    function progress(done, total, phase) {
        $('progress').hidden = false;
        const f = total > 0 ? done / total : 0;
        $('progress-bar').style.width = (100 * f).toFixed(1) + '%';
        $('progress-text').textContent = `${phase} ${(100 * f).toFixed(0)}%`;
    }

    /* Decodes one file in the worker: {model, info}, or {error}. */
    async function decode(name, buffer) {
        $('file-name').textContent = name;
        progress(0, buffer.byteLength, 'reading');
        const id = ++jobId;
        const w = getWorker();
        const result = await new Promise((resolve) => {
            w.onmessage = (msg) => {
                const d = msg.data;
                if (d.id !== id)
                    return;
                if (d.type === 'progress')
                    progress(d.done, d.total, d.phase);
                else
                    resolve(d);
            };
            w.postMessage({ id, name, bytes: buffer }, [buffer]);
        });
        $('progress').hidden = true;
        if (result.type === 'error')
            return { error: `${name}: ${result.message}` };
        return { model: result.model, info: result.info };
    }

    /* Opens files together (sources: {name, read: async () => ArrayBuffer}): the
     * first is shown, and with two or more the compare view is offered. */
    async function loadSet(sources) {
        S.loadStart = performance.now();
        setState('loading');
        showMessage('');
        const files = [], errors = [];
        for (const src of sources) {
            let r;
            try {
                r = await decode(src.name, await src.read());
            } catch (e) {
                r = { error: `${src.name}: ${e.message}` };
            }
            if (r.error)
                errors.push(r.error);
            else
                files.push(r);
        }
        if (!files.length) {
            setState('error');
            showMessage(errors.join('. '), 'error');
            return;
        }
        S.loadMs = performance.now() - S.loadStart;
        S.files = files;
        S.cur = 0;
        if (files.length > 1 && !new URLSearchParams(location.hash.slice(1)).has('view'))
            S.tab = 'compare';
        fillFileChoices();
        /* The view in the URL is the one the page was opened on: it applies to the
         * first file opened here, not to others opened later (their time ranges
         * differ). */
        open(files[0].model, files[0].info, !S.hashApplied);
        S.hashApplied = true;
        if (errors.length)
            showMessage(errors.join('. '), 'error');
    }

    function loadFiles(list) {
        return loadSet(Array.from(list, (f) => ({ name: f.name, read: () => f.arrayBuffer() })));
    }

    function loadUrls(urls) {
        return loadSet(urls.map((url) => ({
            name: decodeURIComponent(url.split('/').pop() || url),
            read: async () => {
                let r;
                try {
                    r = await fetch(url);
                } catch (e) {
                    throw new Error(`cannot fetch ${url}: ${e.message}` +
                        (location.protocol === 'file:' ? ' (pages opened from file:// may not fetch; open the file with the picker)' : ''));
                }
                if (!r.ok)
                    throw new Error(`cannot fetch ${url}: HTTP ${r.status}`);
                return r.arrayBuffer();
            },
        })));
    }

    function fillFileChoices() {
        const several = S.files.length > 1;
        for (const id of ['file-select', 'compare-a', 'compare-b']) {
            const sel = $(id);
            sel.textContent = '';
            S.files.forEach((f, i) => {
                const o = el('option', f.info.name);
                o.value = String(i);
                sel.appendChild(o);
            });
        }
        $('file-select').hidden = !several;
        $('file-select').value = '0';
        $('compare-a').value = '0';
        $('compare-b').value = several ? '1' : '0';
        document.querySelector('#tabs button[data-view="compare"]').hidden = !several;
        if (!several && S.tab === 'compare')
            S.tab = 'timeline';
    }

    /* ---------- opening a model ---------- */
    /* Shows a model; the view in the URL's hash applies to the first file of a set,
     * not to one chosen later in the file selector. */
    function open(model, info, fromHash = true) {
        S.model = model;
        S.info = info;
        mini = null;
        $('file-name').textContent = info.name;
        S.tl = new Timeline.Timeline(model);
        S.segTl = new Timeline.Timeline({ blocks: model.segs, blockOps: model.segOps, t_min: model.t_min,
            t_max: model.t_max });
        S.pinned = null;
        S.at = null;
        S.flameFocus = [];
        const dev = $('device');
        dev.textContent = '';
        const devices = model.devices.length ? model.devices : [0];
        for (const d of devices) {
            const o = el('option', d < 0 ? 'host' : `device ${d}`);
            o.value = String(d);
            dev.appendChild(o);
        }
        const sel = $('stream');
        sel.textContent = '';
        const all = el('option', 'all');
        all.value = '';
        sel.appendChild(all);
        for (const st of model.streams) {
            const o = el('option', hex(st));
            o.value = String(st);
            sel.appendChild(o);
        }
        const cat = $('category');
        cat.textContent = '';
        const any = el('option', 'all');
        any.value = '';
        cat.appendChild(any);
        for (const k of model.categories) {
            const o = el('option', k ? str(k) : '(none)');
            o.value = String(k);
            cat.appendChild(o);
        }
        /* Shown where there is a choice to make. */
        cat.parentElement.hidden = model.categories.length < 2;
        S.view = { t0: 0, t1: Math.max(1, model.t_max - model.t_min), device: devices[0], stream: null, category: null };
        if (fromHash) {
            readHash();
        } else {
            S.tl.setColorBy($('color-by').value);
            setSearch(S.search);
        }
        dev.value = String(S.view.device);
        sel.value = S.view.stream === null ? '' : String(S.view.stream);
        cat.value = S.view.category === null ? '' : String(S.view.category);
        $('drop').hidden = true;
        const msgs = [];
        if (info.error)
            msgs.push(`${info.name}: ${info.error.message}; showing the ${info.events} events before it`);
        else if (info.truncated)
            msgs.push(`${info.name} is truncated (no end record): showing its ${info.events} events`);
        if (model.wide)
            msgs.push(`${model.wide} events hold values past 2^53, shown rounded`);
        showMessage(msgs.join('. '), msgs.length ? 'warning' : '');
        fillInfo();
        fillLegend();
        showTab(S.tab);
        S.firstDrawMs = performance.now() - S.loadStart;
        /* The first frames after a load run the drawing code before the engine has
         * compiled it, and take 2 to 3 times as long as later ones: frames here,
         * before the page is ready, take that cost so that the first zoom or pan
         * does not. One of a narrow view, so that the code that moves between
         * checkpoints is compiled with the rest; the last shows the view again. */
        if (S.tab === 'timeline') {
            const v = { ...S.view }, mid = (v.t0 + v.t1) / 2, w = (v.t1 - v.t0) / 16;
            Object.assign(S.view, { t0: mid - w, t1: mid + w });
            drawTimeline();
            Object.assign(S.view, v);
            drawTimeline();
        }
        setState('ready');
    }

    /* ---------- the URL keeps the view ---------- */
    function readHash() {
        const h = new URLSearchParams(location.hash.slice(1));
        const num = (k) => (h.has(k) && isFinite(Number(h.get(k))) ? Number(h.get(k)) : null);
        const t0 = num('t0'), t1 = num('t1'), dev = num('dev');
        if (t0 !== null && t1 !== null && t1 > t0) {
            Object.assign(S.view, { t0, t1 });
            clampView();
        }
        if (dev !== null && S.model && S.model.devices.includes(dev))
            S.view.device = dev;
        const st = num('stream');
        if (h.get('stream') && st !== null && S.model && S.model.streams.includes(st))
            S.view.stream = st;
        const cat = num('cat');
        if (h.get('cat') && cat !== null && S.model && S.model.categories.includes(cat))
            S.view.category = cat;
        if (h.get('color') === 'category' || h.get('color') === 'stack') {
            $('color-by').value = h.get('color');
            S.tl.setColorBy(h.get('color'));
        }
        if (['timeline', 'reserved', 'attime', 'peak', 'info'].includes(h.get('view')) ||
            (h.get('view') === 'compare' && S.files.length > 1))
            S.tab = h.get('view');
        if (h.get('frames') === 'all')
            $('all-frames').checked = true;
        if (h.has('q')) {
            $('search').value = h.get('q');
            setSearch(h.get('q'));
        }
    }
    let hashTimer = 0;
    function writeHash() {
        clearTimeout(hashTimer);
        hashTimer = setTimeout(() => {
            const h = new URLSearchParams();
            h.set('view', S.tab);
            h.set('t0', String(Math.round(S.view.t0)));
            h.set('t1', String(Math.round(S.view.t1)));
            h.set('dev', String(S.view.device));
            if (S.view.stream !== null)
                h.set('stream', String(S.view.stream));
            if (S.view.category !== null)
                h.set('cat', String(S.view.category));
            h.set('color', $('color-by').value);
            if (allFrames())
                h.set('frames', 'all');
            if (S.search)
                h.set('q', S.search);
            history.replaceState(null, '', '#' + h.toString());
        }, 150);
    }

    /* ---------- tabs ---------- */
    function showTab(tab) {
        S.tab = tab;
        for (const b of document.querySelectorAll('#tabs button'))
            b.classList.toggle('active', b.dataset.view === tab);
        for (const v of document.querySelectorAll('.view'))
            v.hidden = v.id !== 'view-' + tab;
        hideTooltip();
        draw();
        writeHash();
    }

    function draw() {
        if (!S.model)
            return;
        if (S.tab === 'timeline')
            drawTimeline();
        else if (S.tab === 'reserved')
            drawReserved();
        else if (S.tab === 'attime')
            drawAtTime();
        else if (S.tab === 'peak')
            fillPeak();
        else if (S.tab === 'compare')
            drawCompare();
    }
    let frameRequested = false;
    function redraw() {
        if (frameRequested)
            return;
        frameRequested = true;
        requestAnimationFrame(() => {
            frameRequested = false;
            draw();
        });
    }

    /* ---------- canvas helpers ---------- */
    function sizeCanvas(c, h) {
        const w = Math.max(200, Math.floor(c.parentElement.clientWidth));
        if (c.width !== w)
            c.width = w;
        if (h && c.height !== h)
            c.height = h;
        return c.getContext('2d');
    }
    function niceStep(range, n) {
        const raw = range / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
        for (const m of [1, 2, 5, 10])
            if (raw <= m * p)
                return m * p;
        return 10 * p;
    }
    function niceBytesStep(top, n) {
        const raw = top / n;
        let p = 1;
        while (p * 1024 <= raw)
            p *= 1024;
        for (const m of [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
            if (raw <= m * p)
                return m * p;
        return 1024 * p;
    }
    function axes(ctx, W, H, top, view, base) {
        base = base || 0;
        ctx.fillStyle = '#333';
        ctx.strokeStyle = '#ccc';
        ctx.font = '11px sans-serif';
        ctx.textAlign = 'right';
        ctx.textBaseline = 'middle';
        if (top > base) {
            const step = niceBytesStep(top - base, 6);
            for (let b = Math.ceil(base / step) * step; b <= top; b += step) {
                const y = MARGIN.top + H - ((b - base) / (top - base)) * (H - 1);
                ctx.fillText(fmtBytes(b), MARGIN.left - 6, y);
                ctx.beginPath();
                ctx.moveTo(MARGIN.left - 3, y + 0.5);
                ctx.lineTo(MARGIN.left, y + 0.5);
                ctx.stroke();
            }
        }
        ctx.textAlign = 'center';
        ctx.textBaseline = 'top';
        const span = view.t1 - view.t0, step = niceStep(span, Math.max(2, W / 110));
        for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
            const x = MARGIN.left + ((t - view.t0) / span) * W;
            ctx.fillText(fmtTime(t), x, MARGIN.top + H + 6);
            ctx.beginPath();
            ctx.moveTo(x + 0.5, MARGIN.top + H);
            ctx.lineTo(x + 0.5, MARGIN.top + H + 4);
            ctx.stroke();
        }
    }
    function xOfTime(t, W) {
        return MARGIN.left + ((t - S.view.t0) / (S.view.t1 - S.view.t0)) * W;
    }
    /* Annotations as ranges (a start and its end: the latest open start of that name;
     * a start never ended runs to the end of the file) and points (marks, and ends
     * with no start), times relative to the file's first. Kept with the model. */
    function annotationSpans() {
        const m = S.model;
        if (m.spans)
            return m.spans;
        const ranges = [], points = [], open = new Map();
        for (const a of m.annotations) {
            const t = a.time - m.t_min;
            if (a.kind === 0) {
                const list = open.get(a.name) || [];
                list.push(ranges.length);
                open.set(a.name, list);
                ranges.push({ name: a.name, t0: t, t1: m.t_max - m.t_min, closed: false });
            } else if (a.kind === 1 && open.has(a.name) && open.get(a.name).length) {
                const r = ranges[open.get(a.name).pop()];
                r.t1 = t;
                r.closed = true;
            } else {
                points.push({ name: a.name, t, kind: a.kind });
            }
        }
        m.spans = { ranges, points };
        return m.spans;
    }
    function drawMarkers(ctx, W, H) {
        const sp = annotationSpans();
        ctx.save();
        ctx.beginPath();
        ctx.rect(MARGIN.left, 0, W, MARGIN.top + H);
        ctx.clip();
        ctx.font = '11px sans-serif';
        ctx.textAlign = 'left';
        ctx.textBaseline = 'top';
        sp.ranges.forEach((r, i) => {
            const x0 = xOfTime(r.t0, W), x1 = xOfTime(r.t1, W);
            if (x1 < MARGIN.left || x0 > MARGIN.left + W)
                return;
            /* Nested ranges alternate shades so that their edges stay visible. */
            ctx.fillStyle = i % 2 ? 'rgba(92, 47, 192, 0.10)' : 'rgba(192, 120, 40, 0.12)';
            ctx.fillRect(x0, MARGIN.top, Math.max(1, x1 - x0), H);
            ctx.fillStyle = '#5c2fc0';
            ctx.fillText(str(r.name) + (r.closed ? '' : ' (never ended)'), Math.max(x0, MARGIN.left) + 3, 2);
        });
        for (const a of sp.points) {
            const x = xOfTime(a.t, W);
            if (x < MARGIN.left - 1 || x > MARGIN.left + W + 1)
                continue;
            ctx.strokeStyle = a.kind === 1 ? '#7a5cc0' : '#5c2fc0';
            ctx.setLineDash(a.kind === 2 ? [2, 3] : [5, 3]);
            ctx.beginPath();
            ctx.moveTo(Math.round(x) + 0.5, MARGIN.top);
            ctx.lineTo(Math.round(x) + 0.5, MARGIN.top + H);
            ctx.stroke();
            ctx.fillStyle = '#5c2fc0';
            ctx.fillText((a.kind === 1 ? 'end ' : '') + str(a.name), x + 3, 2);
        }
        ctx.setLineDash([]);
        const p = peak(false);
        if (p.ev !== null) {
            const x = xOfTime(p.offset, W);
            ctx.strokeStyle = '#c0392b';
            ctx.beginPath();
            ctx.moveTo(Math.round(x) + 0.5, MARGIN.top);
            ctx.lineTo(Math.round(x) + 0.5, MARGIN.top + H);
            ctx.stroke();
        }
        if (S.at !== null) {
            const x = xOfTime(S.at, W);
            ctx.strokeStyle = '#111';
            ctx.setLineDash([3, 3]);
            ctx.beginPath();
            ctx.moveTo(Math.round(x) + 0.5, MARGIN.top);
            ctx.lineTo(Math.round(x) + 0.5, MARGIN.top + H);
            ctx.stroke();
            ctx.setLineDash([]);
        }
        /* Out of memory: a red bar with a triangle on top for each of the device and
         * stream chosen; returns how many are in view. */
        let ooms = 0;
        ctx.fillStyle = '#c0392b';
        for (const o of S.model.ooms) {
            if (o.device !== S.view.device || (S.view.stream !== null && o.stream !== S.view.stream))
                continue;
            const x = xOfTime(o.time - S.model.t_min, W);
            if (x < MARGIN.left - 1 || x > MARGIN.left + W + 1)
                continue;
            ooms++;
            ctx.fillRect(Math.round(x) - 1, MARGIN.top, 2, H);
            ctx.beginPath();
            ctx.moveTo(x - 6, MARGIN.top);
            ctx.lineTo(x + 6, MARGIN.top);
            ctx.lineTo(x, MARGIN.top + 10);
            ctx.fill();
        }
        ctx.restore();
        return ooms;
    }

    /* ---------- the active memory timeline ---------- */
    let lastFrame = null, frameImage = null;
    function drawTimeline() {
        const started = performance.now();
        const c = $('timeline');
        const ctx = sizeCanvas(c, Math.max(300, Math.min(640, window.innerHeight - 260)));
        const W = c.width - MARGIN.left - MARGIN.right, H = c.height - MARGIN.top - MARGIN.bottom;
        ctx.clearRect(0, 0, c.width, c.height);
        /* One image for every frame of a size: a fresh one (megabytes) per frame
         * left the garbage collector pauses that made the slowest frames. */
        if (!frameImage || frameImage.img.width !== W || frameImage.img.height !== H) {
            const img = ctx.createImageData(W, H);
            frameImage = { img, px: new Uint32Array(img.data.buffer) };
        }
        const img = frameImage.img, px = frameImage.px;
        S.tl.match = S.match;
        S.tl.matchIds = S.matchIds;
        const r = S.tl.render(S.view, W, H, px, 0xffffffff);
        ctx.putImageData(img, MARGIN.left, MARGIN.top);
        axes(ctx, W, H, r.top, S.view, r.base);
        c.dataset.ooms = String(drawMarkers(ctx, W, H));
        lastFrame = { W, H, scale: r.scale, top: r.top, base: r.base, levels: r.levels, drawn: r.drawn, aggregated: r.aggregated,
            view: viewKey() };
        drawMinimap();
        S.renderMs = performance.now() - started;
        c.dataset.drawn = String(r.drawn);
        c.dataset.ranges = JSON.stringify(annotationSpans().ranges.map((a) => [a.t0, a.t1]));
        c.dataset.aggregated = String(r.aggregated);
        if (S.pinned)
            showTooltipFor(S.pinned.hit, S.pinned.x, S.pinned.y, true);
    }

    /* What a frame of the timeline depends on, to tell whether the last one drawn
     * still shows the view. */
    function viewKey() {
        const v = S.view;
        return [v.t0, v.t1, v.yMin, v.yMax, v.device, v.stream, v.category, S.search, $('color-by').value].join();
    }

    let mini = null;
    function drawMinimap() {
        const c = $('minimap');
        const ctx = sizeCanvas(c, 48);
        const W = c.width - MARGIN.left - MARGIN.right, H = c.height - 4;
        const v = S.view;
        if (!mini || mini.W !== W || mini.device !== v.device || mini.stream !== v.stream || mini.category !== v.category)
            mini = { W, device: v.device, stream: v.stream, category: v.category, max: Timeline.overview(S.tl, v.device, W, v.stream, v.category) };
        ctx.clearRect(0, 0, c.width, c.height);
        let top = 0;
        for (const v of mini.max)
            top = Math.max(top, v);
        ctx.fillStyle = '#8aa4c8';
        for (let x = 0; x < W; x++) {
            const h = top > 0 ? (mini.max[x] / top) * H : 0;
            ctx.fillRect(MARGIN.left + x, 2 + H - h, 1, h);
        }
        const span = Math.max(1, S.model.t_max - S.model.t_min);
        const x0 = MARGIN.left + (S.view.t0 / span) * W, x1 = MARGIN.left + (S.view.t1 / span) * W;
        ctx.fillStyle = 'rgba(40, 80, 160, 0.18)';
        ctx.fillRect(x0, 0, Math.max(2, x1 - x0), c.height);
        ctx.strokeStyle = '#28509f';
        ctx.strokeRect(x0 + 0.5, 0.5, Math.max(2, x1 - x0), c.height - 1);
    }

    function clampView() {
        const span = Math.max(1, S.model.t_max - S.model.t_min);
        let { t0, t1 } = S.view;
        const min = Math.min(span, 1000);
        if (t1 - t0 < min) {
            const mid = (t0 + t1) / 2;
            t0 = mid - min / 2;
            t1 = mid + min / 2;
        }
        if (t1 - t0 > span) {
            t0 = 0;
            t1 = span;
        }
        if (t0 < 0) {
            t1 -= t0;
            t0 = 0;
        }
        if (t1 > span) {
            t0 -= t1 - span;
            t1 = span;
        }
        S.view.t0 = Math.max(0, t0);
        S.view.t1 = t1;
    }

    function resetView() {
        if (!S.model)
            return;
        S.view.t0 = 0;
        S.view.t1 = Math.max(1, S.model.t_max - S.model.t_min);
        delete S.view.yMin;
        delete S.view.yMax;
        redraw();
        writeHash();
    }
    function zoomKey(factor) {
        const mid = (S.view.t0 + S.view.t1) / 2, half = ((S.view.t1 - S.view.t0) * factor) / 2;
        S.view.t0 = mid - half;
        S.view.t1 = mid + half;
        clampView();
        redraw();
        writeHash();
    }
    function zoomAt(clientX, factor) {
        const c = $('timeline'), rect = c.getBoundingClientRect();
        const W = c.width - MARGIN.left - MARGIN.right;
        const fx = Math.min(1, Math.max(0, (clientX - rect.left - MARGIN.left) / W));
        const { t0, t1 } = S.view;
        const at = t0 + fx * (t1 - t0), span = (t1 - t0) * factor;
        S.view.t0 = at - fx * span;
        S.view.t1 = at + (1 - fx) * span;
        clampView();
        redraw();
        writeHash();
    }

    /* Shift+wheel: zoom the bytes axis around the pointer; out past the whole range
     * returns to fitting the tallest column. */
    function zoomBytesAt(clientY, factor) {
        if (!lastFrame || lastFrame.scale === 0)
            return;
        const rect = $('timeline').getBoundingClientRect();
        const fy = Math.min(1, Math.max(0, (lastFrame.H - (clientY - rect.top - MARGIN.top)) / lastFrame.H));
        const lo = lastFrame.base, hi = lastFrame.top;
        const at = lo + fy * (hi - lo), span = (hi - lo) * factor;
        let yMin = at - fy * span, yMax = at + (1 - fy) * span;
        if (yMin < 0) {
            yMax -= yMin;
            yMin = 0;
        }
        if (factor > 1 && span >= S.tl.levels(S.view, lastFrame.W).max.reduce((a, b) => Math.max(a, b), 0)) {
            delete S.view.yMin;
            delete S.view.yMax;
        } else {
            S.view.yMin = yMin;
            S.view.yMax = Math.max(yMax, yMin + 1);
        }
        redraw();
    }

    function hitAt(clientX, clientY) {
        if (!lastFrame)
            return null;
        const c = $('timeline'), rect = c.getBoundingClientRect();
        const x = Math.floor(clientX - rect.left - MARGIN.left);
        const y = clientY - rect.top - MARGIN.top;
        if (x < 0 || x >= lastFrame.W || y < 0 || y >= lastFrame.H || lastFrame.scale === 0)
            return null;
        const bytes = lastFrame.base + (lastFrame.H - y) / lastFrame.scale;
        const h = S.tl.hit(S.view, lastFrame.W, x, bytes, lastFrame.scale, lastFrame.levels);
        if (h)
            h.time = S.view.t0 + ((x + 1) * (S.view.t1 - S.view.t0)) / lastFrame.W;
        return h;
    }

    /* ---------- tooltip ---------- */
    function hideTooltip() {
        $('tooltip').hidden = true;
    }
    function row(tbl, k, v) {
        const tr = el('tr');
        tr.appendChild(el('th', k));
        tr.appendChild(el('td', v));
        tbl.appendChild(tr);
    }
    function blockDetails(box, id) {
        const c = S.model.blocks, t0 = S.model.t_min;
        const tbl = el('table');
        row(tbl, 'size', `${fmtBytes(c.size[id])} (${c.size[id]} bytes)`);
        row(tbl, 'address', hex(c.addr[id]));
        row(tbl, 'stream', hex(c.stream[id]));
        row(tbl, 'device', String(c.device[id]));
        if (c.category[id])
            row(tbl, 'category', str(c.category[id]));
        /* A block live before the first event (docs/REPLAY.md rule 0) has no event of
         * its own: its life began before the trace did. */
        const init = c.init[id] === 1;
        row(tbl, 'allocated', init ? 'before the first event (live when the trace began)'
            : `+${fmtTime(c.t0[id] - t0)} (event ${c.ev0[id]})`);
        if (c.treq[id] === c.treq[id])
            row(tbl, 'free requested', init && c.evreq[id] < 0 ? 'before the first event' : `+${fmtTime(c.treq[id] - t0)}`);
        const why = ['live at the end', 'freed', 'replaced by a later allocation', 'trimmed'][c.ended[id]];
        row(tbl, c.ended[id] === 0 ? 'freed' : why,
            c.ended[id] === 0 ? 'never (live at the end)' : `+${fmtTime(c.t1[id] - t0)} (event ${c.ev1[id]}), ` +
                `lived ${init ? 'more than ' : ''}${fmtTime(c.t1[id] - c.t0[id])}`);
        box.appendChild(tbl);
        const frames = stackOf(c.stack[id]), v = visible(frames);
        box.appendChild(el('div', frames.length ? `stack ${c.stack[id]}, ${frames.length} frames, innermost first:` : 'no stack recorded', 'stack-head'));
        const ol = el('ol', null, 'stack');
        v.frames.forEach((f, k) => ol.appendChild(frameLine('li', f, v.where[k])));
        box.appendChild(ol);
        framesNotes(box, v, v.frames.length);
    }
    function showTooltipFor(h, clientX, clientY, pinned) {
        const tip = $('tooltip');
        tip.textContent = '';
        if (!h) {
            tip.hidden = true;
            return;
        }
        tip.classList.toggle('pinned', !!pinned);
        if (pinned)
            tip.appendChild(el('div', 'pinned: click the chart or press Escape to release', 'pin-note'));
        if (h.kind === 'block') {
            blockDetails(tip, h.id);
        } else if (h.kind === 'aggregate') {
            tip.appendChild(el('div', `${h.count} allocations too small to draw at this scale, ${fmtBytes(h.bytes)} in all (zoom in to split them)`));
            const bySize = h.ids.slice().sort((a, b) => S.model.blocks.size[b] - S.model.blocks.size[a]).slice(0, 3);
            for (const id of bySize) {
                const f = nameOf(S.model.blocks.stack[id]);
                tip.appendChild(el('div', `${fmtBytes(S.model.blocks.size[id])} at ${hex(S.model.blocks.addr[id])}${f ? ' from ' + frameText(f) : ''}`, 'agg-item'));
            }
        } else if (h.kind === 'levels') {
            const tbl = el('table');
            row(tbl, 'time', `+${fmtTime((h.t0 + h.t1) / 2)} (a column of ${fmtTime(h.t1 - h.t0)})`);
            row(tbl, `allocated${filterText()}`, fmtBytes(h.allocated));
            row(tbl, `reserved${filterText()}`, fmtBytes(h.reserved));
            if (h.used === h.used)
                row(tbl, 'device-reported used', fmtBytes(h.used));
            if (h.rss === h.rss)
                row(tbl, 'process RSS', fmtBytes(h.rss));
            tip.appendChild(tbl);
            tip.appendChild(el('div', 'the highest level of each in this pixel column', 'stack-head'));
            for (const o of h.ooms) {
                const f = nameOf(o.stack);
                tip.appendChild(el('div', `out of memory at +${fmtTime(o.time - S.model.t_min)} (event ${o.index}): ` +
                    `${fmtBytes(o.size)} asked for, ${fmtBytes(o.device_free)} free on the device${f ? ', from ' + frameText(f) : ''}`, 'oom-item'));
            }
        } else {
            tip.appendChild(el('div', `allocations that came and went within this pixel column: the level reached ${fmtBytes(h.max)} (${fmtBytes(h.max - h.level)} above what stayed); zoom in to see them`));
        }
        tip.hidden = false;
        const vw = window.innerWidth, vh = window.innerHeight;
        const r = tip.getBoundingClientRect();
        tip.style.left = Math.min(vw - r.width - 8, clientX + 14) + 'px';
        tip.style.top = Math.max(8, Math.min(vh - r.height - 8, clientY + 14)) + 'px';
    }

    /* ---------- search ---------- */
    /* A query is an address (0x...: the blocks that held it), stack:N (that stack),
     * or text found in a frame's function, file or module (the stacks through such a
     * frame). What matches keeps its colour on the timeline, the rest is dimmed. */
    function setSearch(q) {
        S.search = q.trim();
        S.match = null;
        S.matchIds = null;
        const res = $('search-result');
        res.textContent = '';
        if (!S.search || !S.info)
            return;
        const info = S.info, nStacks = info.stackParent.length;
        if (/^0x[0-9a-f]+$/i.test(S.search)) {
            const a = Number(BigInt(S.search)), c = S.model.blocks, ids = new Uint8Array(c.n);
            let n = 0, first = -1;
            for (let id = 0; id < c.n; id++) {
                if (c.addr[id] <= a && a < c.addr[id] + Math.max(1, c.size[id])) {
                    ids[id] = 1;
                    n++;
                    if (first < 0)
                        first = id;
                }
            }
            S.matchIds = ids;
            res.textContent = n ? `${n} block${n > 1 ? 's' : ''} held ${hex(a)}, the first from +${fmtTime(c.t0[first] - S.model.t_min)}`
                : `no block held ${hex(a)}`;
            return;
        }
        const m = new Uint8Array(nStacks), st = /^stack:(\d+)$/i.exec(S.search);
        if (st) {
            const id = Number(st[1]);
            if (id < nStacks)
                m[id] = 1;
            const f = id < nStacks ? nameOf(id) : null;
            res.textContent = id < nStacks ? `stack ${id}${f ? ': ' + frameText(f) : ''}` : `no stack ${id}`;
            S.match = m;
            return;
        }
        const needle = S.search.toLowerCase();
        const frameHit = new Uint8Array(info.frames.length);
        for (let i = 1; i < info.frames.length; i++) {
            const f = info.frames[i];
            if (f && ((info.strings[f.symbol] || '').toLowerCase().includes(needle) ||
                (info.strings[f.file] || '').toLowerCase().includes(needle) ||
                (info.strings[f.module] || '').toLowerCase().includes(needle)))
                frameHit[i] = 1;
        }
        /* A stack matches if any node on its path does: parents have smaller ids. */
        let n = 0;
        for (let id = 1; id < nStacks; id++) {
            m[id] = frameHit[info.stackFrame[id]] || m[info.stackParent[id]];
            n += m[id];
        }
        res.textContent = `${n} stack${n === 1 ? '' : 's'} match`;
        S.match = m;
    }

    /* ---------- reserved vs allocated ---------- */
    /* Per column the highest value of a counter series (the latest sample before a
     * column carries into it), NaN before the first sample; sel(k) picks samples. */
    function counterColumns(cn, val, sel, W) {
        const out = new Float64Array(W).fill(NaN), span = S.view.t1 - S.view.t0;
        let last = NaN;
        for (let k = 0; k < cn.n; k++) {
            if (!sel(k))
                continue;
            const t = cn.time[k] - S.model.t_min, v = val[k];
            const x = Math.floor(((t - S.view.t0) / span) * W);
            if (x < 0) {
                last = v;
                continue;
            }
            if (x >= W)
                break;
            if (last === last && out[x] !== out[x])
                out[x] = last;
            out[x] = out[x] === out[x] ? Math.max(out[x], v) : v;
            last = v;
        }
        /* Between samples the level holds. */
        let carry = NaN;
        for (let x = 0; x < W; x++) {
            if (out[x] === out[x])
                carry = out[x];
            else
                out[x] = carry;
        }
        return out;
    }
    function drawReserved() {
        const c = $('reserved');
        const ctx = sizeCanvas(c, 420);
        const W = c.width - MARGIN.left - MARGIN.right, H = c.height - MARGIN.top - MARGIN.bottom;
        ctx.clearRect(0, 0, c.width, c.height);
        const a = S.tl.levels(S.view, W).max, r = S.segTl.levels({ ...S.view, category: null }, W).max;
        /* The counters: device-reported used memory of the device chosen, and the
         * process's resident set (every sample has it, whatever its device). */
        const cn = S.model.counters, dev = S.view.device;
        const used = counterColumns(cn, cn.used, (k) => cn.device[k] === dev && cn.total[k] > 0, W);
        const rss = counterColumns(cn, cn.rss, (k) => cn.rss[k] > 0, W);
        let top = 0;
        for (let x = 0; x < W; x++)
            top = Math.max(top, a[x], r[x], used[x] || 0, rss[x] || 0);
        const scale = top > 0 ? (H - 1) / top : 0;
        const area = (vals, fill) => {
            ctx.fillStyle = fill;
            for (let x = 0; x < W; x++) {
                const h = vals[x] * scale;
                ctx.fillRect(MARGIN.left + x, MARGIN.top + H - h, 1, h);
            }
        };
        const line = (vals, colour, dash) => {
            ctx.strokeStyle = colour;
            ctx.lineWidth = 2;
            ctx.setLineDash(dash);
            ctx.beginPath();
            let pen = false;
            for (let x = 0; x < W; x++) {
                if (vals[x] !== vals[x]) {
                    pen = false;
                    continue;
                }
                const y = MARGIN.top + H - vals[x] * scale;
                if (pen)
                    ctx.lineTo(MARGIN.left + x + 0.5, y);
                else
                    ctx.moveTo(MARGIN.left + x + 0.5, y);
                pen = true;
            }
            ctx.stroke();
            ctx.setLineDash([]);
            ctx.lineWidth = 1;
        };
        area(r, '#c9d6ea');
        area(a, '#3d6fb6');
        line(used, '#2e8b57', []);
        line(rss, '#d68910', [6, 3]);
        axes(ctx, W, H, top, S.view);
        const ooms = drawMarkers(ctx, W, H);
        const pa = peak(false), pr = peak(true);
        const usedMax = used.reduce((m, v) => (v > m ? v : m), 0), rssMax = rss.reduce((m, v) => (v > m ? v : m), 0);
        const labels = [['#3d6fb6', `allocated${filterText()} (peak ${fmtBytes(pa.bytes)})`],
            ['#7d93b8', `reserved${filterText()} (peak ${fmtBytes(pr.bytes)})`]];
        if (usedMax > 0)
            labels.push(['#2e8b57', `device-reported used (highest in view ${fmtBytes(usedMax)})`]);
        if (rssMax > 0)
            labels.push(['#d68910', `process RSS, dashed (highest in view ${fmtBytes(rssMax)})`]);
        if (ooms)
            labels.push(['#c0392b', `out of memory: ${ooms} in view`]);
        ctx.font = '12px sans-serif';
        ctx.textAlign = 'left';
        ctx.textBaseline = 'top';
        /* A pale box keeps the labels readable over the lines. */
        ctx.fillStyle = 'rgba(255, 255, 255, 0.85)';
        ctx.fillRect(MARGIN.left + 4, MARGIN.top + 2, Math.max(...labels.map(([, t]) => ctx.measureText(t).width)) + 8, 16 * labels.length + 4);
        labels.forEach(([colour, text], i) => {
            ctx.fillStyle = colour;
            ctx.fillText(text, MARGIN.left + 8, MARGIN.top + 4 + 16 * i);
        });
        Object.assign(c.dataset, { peakAllocated: String(pa.bytes), peakReserved: String(pr.bytes),
            usedMax: String(usedMax), rssMax: String(rssMax), ooms: String(ooms), top: String(top) });
        c.cols = { a, r, used, rss, W, H };
    }
    /* What the reserved view shows under the pointer: the levels of its pixel column
     * (each the highest there) and the out-of-memory events within 3 pixels. */
    function reservedHit(clientX, clientY) {
        const c = $('reserved'), cols = c.cols;
        if (!cols || !S.model)
            return null;
        const rect = c.getBoundingClientRect();
        const x = Math.floor(clientX - rect.left - MARGIN.left), y = clientY - rect.top - MARGIN.top;
        if (x < 0 || x >= cols.W || y < 0 || y >= cols.H)
            return null;
        const span = S.view.t1 - S.view.t0;
        const ooms = S.model.ooms.filter((o) => o.device === S.view.device &&
            (S.view.stream === null || o.stream === S.view.stream) &&
            Math.abs(xOfTime(o.time - S.model.t_min, cols.W) - MARGIN.left - (x + 0.5)) <= 3);
        return { kind: 'levels', t0: S.view.t0 + (x * span) / cols.W, t1: S.view.t0 + ((x + 1) * span) / cols.W,
            allocated: cols.a[x], reserved: cols.r[x], used: cols.used[x], rss: cols.rss[x], ooms };
    }

    /* ---------- memory at a time: segments with their blocks ---------- */
    function liveAt(tl, t) {
        const ix = tl.index;
        ix.seek(ix.opAt(t + 1e-9));
        return ix.live.ids();
    }
    function atTime() {
        if (S.at !== null)
            return S.at;
        const p = peak(false);
        return p.ev !== null ? p.offset : 0;
    }
    let stripes = null;
    function stripePattern(ctx) {
        if (!stripes) {
            const p = document.createElement('canvas');
            p.width = p.height = 6;
            const g = p.getContext('2d');
            g.strokeStyle = 'rgba(20, 20, 20, 0.55)';
            g.lineWidth = 1.5;
            g.beginPath();
            g.moveTo(0, 6);
            g.lineTo(6, 0);
            g.stroke();
            stripes = p;
        }
        return ctx.createPattern(stripes, 'repeat');
    }
    function drawAtTime() {
        const t = atTime();
        $('attime-label').textContent = `+${fmtTime(t)}`;
        const segIds = Array.from(liveAt(S.segTl, t)).filter((id) => selected(S.model.segs, id));
        const blockIds = Array.from(liveAt(S.tl, t)).filter((id) => selected(S.model.blocks, id));
        const sc = S.model.segs, bc = S.model.blocks;
        segIds.sort((x, y) => sc.addr[x] - sc.addr[y]);
        const rowH = 22, c = $('attime');
        const rows = Math.max(1, segIds.length + (segIds.length ? 0 : 1));
        const ctx = sizeCanvas(c, 30 + rows * rowH);
        ctx.clearRect(0, 0, c.width, c.height);
        const W = c.width - 230;
        let biggest = 1;
        for (const id of segIds)
            biggest = Math.max(biggest, sc.size[id]);
        ctx.font = '11px sans-serif';
        ctx.textBaseline = 'middle';
        const segOf = (addr) => {
            let lo = 0, hi = segIds.length - 1, found = -1;
            while (lo <= hi) {
                const mid = (lo + hi) >> 1;
                if (sc.addr[segIds[mid]] <= addr) {
                    found = mid;
                    lo = mid + 1;
                } else {
                    hi = mid - 1;
                }
            }
            return found;
        };
        segIds.forEach((id, i) => {
            const y = 10 + i * rowH, w = Math.max(2, (sc.size[id] / biggest) * W);
            ctx.fillStyle = '#e6e9ef';
            ctx.fillRect(220, y, w, rowH - 6);
            ctx.fillStyle = '#333';
            ctx.textAlign = 'right';
            ctx.fillText(`${hex(sc.addr[id])} ${fmtBytes(sc.size[id])}`, 214, y + (rowH - 6) / 2);
        });
        let outside = 0, pending = 0, waste = 0;
        const pattern = stripePattern(ctx);
        for (const id of blockIds) {
            const i = segOf(bc.addr[id]);
            if (i < 0 || bc.addr[id] >= sc.addr[segIds[i]] + sc.size[segIds[i]]) {
                outside++;
                continue;
            }
            const s = segIds[i], y = 10 + i * rowH;
            const w = Math.max(2, (sc.size[s] / biggest) * W);
            const x0 = 220 + ((bc.addr[id] - sc.addr[s]) / sc.size[s]) * w;
            const bw = Math.max(1, (bc.size[id] / sc.size[s]) * w);
            const rgb = Timeline.hashColor(bc.stack[id]);
            ctx.fillStyle = `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;
            ctx.fillRect(x0, y, bw, rowH - 6);
            /* Bytes past those requested: the allocator's rounding. */
            const req = bc.req[id];
            if (req > 0 && req < bc.size[id]) {
                waste += bc.size[id] - req;
                const ww = Math.max(1, ((bc.size[id] - req) / sc.size[s]) * w);
                ctx.fillStyle = '#f5b041';
                ctx.fillRect(x0 + bw - ww, y, ww, rowH - 6);
            }
            /* Freed by the program, not yet given back (the free has not completed). */
            if (bc.treq[id] - S.model.t_min <= t) {
                pending++;
                ctx.fillStyle = pattern;
                ctx.fillRect(x0, y, bw, rowH - 6);
            }
        }
        if (!segIds.length) {
            ctx.fillStyle = '#333';
            ctx.textAlign = 'left';
            ctx.fillText(`no segment is live at this time; ${blockIds.length} blocks are`, 10, 20);
        }
        c.dataset.segments = String(segIds.length);
        c.dataset.blocks = String(blockIds.length - outside);
        c.dataset.pending = String(pending);
        c.dataset.waste = String(waste);
        fillAtLegend(blockIds.length - outside, pending, waste);
        fillEvents(t);
    }
    function fillAtLegend(blocks, pending, waste) {
        const lg = $('attime-legend');
        lg.textContent = '';
        for (const [cls, text] of [['alloc', `allocated (colour by stack): ${blocks} blocks`],
            ['pending', `free requested, not completed: ${pending}`],
            ['free', 'inactive: free space in a segment'],
            ['waste', `rounding: bytes past those requested, ${fmtBytes(waste)}`]]) {
            const item = el('span', null, 'legend-item');
            item.appendChild(el('span', null, 'swatch ' + cls));
            item.appendChild(el('span', text));
            lg.appendChild(item);
        }
    }

    /* Every event that changed blocks or segments, an annotation or an oom, in file
     * order, rebuilt from the intervals (the model keeps no event list): by event
     * number, then compacted, with times made monotonic as the timeline's. */
    function eventList() {
        if (S.model.eventIndex)
            return S.model.eventIndex;
        const m = S.model, n = m.figures.events;
        const kind = new Uint8Array(n), id = new Int32Array(n), act = new Uint8Array(n).fill(255);
        const put = (ev, k, i, a) => {
            if (ev >= 0 && ev < n && act[ev] === 255) {
                kind[ev] = k;
                id[ev] = i;
                act[ev] = a;
            }
        };
        for (const [k, c] of [[0, m.blocks], [1, m.segs]]) {
            for (let i = 0; i < c.n; i++) {
                if (c.act0[i] !== 255)
                    put(c.ev0[i], k, i, c.act0[i]);
                if (c.evreq[i] >= 0)
                    put(c.evreq[i], k, i, 1);
                if (c.ended[i] === 1 || c.ended[i] === 3)
                    put(c.ev1[i], k, i, c.act1[i]);
            }
        }
        m.annotations.forEach((a, i) => put(a.index, 2, i, 9));
        m.ooms.forEach((o, i) => put(o.index, 3, i, 8));
        const evs = [];
        for (let ev = 0; ev < n; ev++)
            if (act[ev] !== 255)
                evs.push(ev);
        const T = new Float64Array(evs.length);
        let last = -Infinity;
        evs.forEach((ev, j) => {
            const k = kind[ev], i = id[ev], c = k === 0 ? m.blocks : m.segs;
            let t = k === 2 ? m.annotations[i].time : k === 3 ? m.ooms[i].time
                : act[ev] === 1 ? c.treq[i] : c.ev0[i] === ev ? c.t0[i] : c.t1[i];
            t -= m.t_min;
            if (t < last)
                t = last;
            T[j] = last = t;
        });
        m.eventIndex = { evs, T, kind, id, act };
        return m.eventIndex;
    }
    function eventRow(L, j) {
        const m = S.model, ev = L.evs[j], k = L.kind[ev], i = L.id[ev], a = L.act[ev];
        const out = { ev, t: L.T[j], action: Format.ACTIONS[a] || `action ${a}`, size: '', addr: '', frame: '', device: null };
        if (k === 0 || k === 1) {
            const c = k === 0 ? m.blocks : m.segs;
            out.size = fmtBytes(c.size[i]);
            out.addr = hex(c.addr[i]);
            out.device = c.device[i];
            const f = nameOf(c.stack[i]);
            out.frame = f ? frameText(f) : '';
        } else if (k === 2) {
            const an = m.annotations[i];
            out.action = `annotate ${['start', 'end', 'mark'][an.kind] || 'kind ' + an.kind}`;
            out.frame = str(an.name);
        } else {
            const o = m.ooms[i];
            out.size = fmtBytes(o.size);
            out.device = o.device;
            const f = nameOf(o.stack);
            out.frame = f ? frameText(f) : '';
        }
        return out;
    }
    /* The events of the device and stream chosen (annotations: of every one) around
     * time t: the last one at or before t (the one chosen) with up to 20 before and
     * 20 after it. */
    function fillEvents(t) {
        const L = eventList(), tbody = $('events-table').tBodies[0];
        tbody.textContent = '';
        let lo = 0, hi = L.T.length;
        while (lo < hi) {
            const mid = (lo + hi) >>> 1;
            if (L.T[mid] <= t + 1e-9)
                lo = mid + 1;
            else
                hi = mid;
        }
        const mine = (j) => {
            const ev = L.evs[j], k = L.kind[ev], i = L.id[ev];
            if (k === 2)
                return true;
            if (k === 3) {
                const o = S.model.ooms[i];
                return o.device === S.view.device && (S.view.stream === null || o.stream === S.view.stream);
            }
            return selected(k === 0 ? S.model.blocks : S.model.segs, i);
        };
        let chosen = lo - 1;
        while (chosen >= 0 && !mine(chosen))
            chosen--;
        const before = [], after = [];
        for (let j = chosen - 1; j >= 0 && before.length < 20; j--)
            if (mine(j))
                before.unshift(j);
        for (let j = Math.max(chosen + 1, 0); j < L.T.length && after.length < 20; j++)
            if (mine(j))
                after.push(j);
        const list = chosen >= 0 ? [...before, chosen, ...after] : after;
        for (const j of list) {
            const r = eventRow(L, j);
            const tr = el('tr', null, j === chosen ? 'chosen' : '');
            tr.dataset.ev = String(r.ev);
            tr.dataset.t = String(r.t);
            for (const [v, cls] of [[`+${fmtTime(r.t)}`, 'num'], [String(r.ev), 'num'], [r.action], [r.size, 'num'], [r.addr, 'mono'], [r.frame, 'mono']])
                tr.appendChild(el('td', v, cls));
            tbody.appendChild(tr);
        }
        $('events-table').dataset.chosen = chosen >= 0 ? String(L.evs[chosen]) : '';
        const sel = tbody.querySelector('tr.chosen');
        if (sel && S.tab === 'attime') {
            const box = $('events-wrap');
            box.scrollTop = sel.offsetTop - box.clientHeight / 2;
        }
    }

    /* ---------- compare: several files on one axis, and by stack ---------- */
    const FILE_COLOURS = ['#3d6fb6', '#c0392b', '#2e8b57', '#8e44ad', '#d68910', '#17a2b8', '#7f8c8d', '#6d4c41'];
    function drawCompare() {
        const files = S.files, c = $('compare');
        const ctx = sizeCanvas(c, 320);
        const W = c.width - MARGIN.left - MARGIN.right, H = c.height - MARGIN.top - MARGIN.bottom;
        ctx.clearRect(0, 0, c.width, c.height);
        const clock = $('compare-align').value === 'clock';
        const first = Math.min(...files.map((f) => f.model.t_min));
        const offsets = files.map((f) => (clock ? f.model.t_min - first : 0));
        /* Each file's blocks on the device and stream chosen (the selectors list the
         * shown file's). */
        let span = 1, top = 0;
        const series = files.map((f, i) => {
            const fl = filter(f), key = `${fl.device} ${fl.stream} ${fl.category}`;
            f.series = f.series || new Map();
            if (!f.series.has(key)) {
                const m = f.model;
                f.series.set(key, { s: Compare.levelSeries(m, fl), peak: Compare.peakOf(m.blocks, m.blockOps, m.t_min, fl) });
            }
            const fs = f.series.get(key);
            span = Math.max(span, offsets[i] + fs.s.end);
            top = Math.max(top, fs.peak.bytes);
            return fs;
        });
        axes(ctx, W, H, top, { t0: 0, t1: span });
        const legend = $('compare-legend');
        legend.textContent = '';
        files.forEach((f, i) => {
            const col = Compare.columnMax(series[i].s, offsets[i], span, W), colour = FILE_COLOURS[i % FILE_COLOURS.length];
            ctx.strokeStyle = colour;
            ctx.lineWidth = 1.5;
            ctx.beginPath();
            let pen = false;
            for (let x = 0; x < W; x++) {
                if (col[x] !== col[x]) {
                    pen = false;
                    continue;
                }
                const y = MARGIN.top + H - (top > 0 ? (col[x] / top) * (H - 1) : 0);
                if (pen)
                    ctx.lineTo(MARGIN.left + x, y);
                else
                    ctx.moveTo(MARGIN.left + x, y);
                ctx.lineTo(MARGIN.left + x + 1, y);
                pen = true;
            }
            ctx.stroke();
            const item = el('span', null, 'legend-item');
            const sw = el('span', null, 'swatch');
            sw.style.background = colour;
            item.appendChild(sw);
            item.appendChild(el('span', `${f.info.name}: peak ${fmtBytes(series[i].peak.bytes)}${filterText()}`));
            legend.appendChild(item);
        });
        ctx.lineWidth = 1;
        c.dataset.peaks = JSON.stringify(series.map((fs) => fs.peak.bytes));
        c.dataset.span = String(span);
        fillStackDiff();
    }

    function fillStackDiff() {
        const a = S.files[Number($('compare-a').value)] || S.files[0];
        const b = S.files[Number($('compare-b').value)] || S.files[0];
        const rows = Compare.stackDiff(a, b, filter(a), filter(b)), tbody = $('compare-table').tBodies[0];
        tbody.textContent = '';
        let up = 0, down = 0, upBytes = 0, downBytes = 0;
        for (const r of rows) {
            if (r.delta > 0) {
                up++;
                upBytes += r.delta;
            } else {
                down++;
                downBytes -= r.delta;
            }
        }
        const pa = Compare.peakOf(a.model.blocks, a.model.blockOps, a.model.t_min, filter(a)).bytes;
        const pb = Compare.peakOf(b.model.blocks, b.model.blockOps, b.model.t_min, filter(b)).bytes;
        $('compare-summary').textContent = a === b ? 'Choose two different files.' :
            `Peak${filterText()} ${fmtBytes(pa)} in ${a.info.name}, ${fmtBytes(pb)} in ${b.info.name} ` +
            `(${pb >= pa ? '+' : '-'}${fmtBytes(Math.abs(pb - pa))}). ` +
            `${rows.length} stacks differ: ${up} grew or are new (+${fmtBytes(upBytes)}), ` +
            `${down} shrank or are gone (-${fmtBytes(downBytes)}).`;
        for (const r of rows.slice(0, 500)) {
            const tr = el('tr', null, r.change);
            tr.dataset.delta = String(r.delta);
            tr.appendChild(el('td', r.change));
            tr.appendChild(el('td', `${fmtBytes(r.a[0])} in ${r.a[1]}`, 'num'));
            tr.appendChild(el('td', `${fmtBytes(r.b[0])} in ${r.b[1]}`, 'num'));
            tr.appendChild(el('td', `${r.delta > 0 ? '+' : '-'}${fmtBytes(Math.abs(r.delta))}`, 'num delta'));
            /* Matched on whole stacks (compare.js); only the display hides frames. */
            const td = el('td'), v = visible(r.frames);
            if (!r.frames.length)
                td.appendChild(el('span', '(no stack)'));
            framesCell(td, v);
            tr.appendChild(td);
            tbody.appendChild(tr);
        }
    }

    /* ---------- peak table and flame graph ---------- */
    function fillPeak() {
        const f = S.model.figures.allocated, c = S.model.blocks, tbody = $('peak-table').tBodies[0];
        tbody.textContent = '';
        if (f.peak_event === null) {
            $('peak-summary').textContent = 'Nothing was allocated.';
            $('flame').textContent = '';
            return;
        }
        const p = peak(false);
        if (p.ev === null) {
            $('peak-summary').textContent = `Nothing was allocated${filterText()}.`;
            $('flame').textContent = '';
            return;
        }
        const groups = new Map([...globalThis.MemtraceReplay.stacksAt(c, p.ev, (id) => selected(c, id))].map(([k, [bytes, count]]) => [k, { bytes, count }]));
        let count = 0;
        for (const g of groups.values())
            count += g.count;
        $('peak-summary').textContent = `Peak of allocated memory${filterText()}: ${fmtBytes(p.bytes)} (${p.bytes} bytes) at +${fmtTime(p.offset)}, event ${p.ev}, in ${count} blocks from ${groups.size} stacks.`;
        drawFlame(groups);
        /* Sorted by the column chosen (bytes first), ties by bytes, then stack id. */
        const { key, dir } = S.peakSort;
        const inner = (stack) => {
            const f = visible(stackOf(stack)).frames[0];
            return f ? frameText(f) : '';
        };
        const rows = [...groups.entries()].map(([stack, g]) => ({ stack, g, text: key === 'stack' ? inner(stack) : '' }));
        rows.sort((a, b) => dir * (key === 'stack' ? (a.text < b.text ? -1 : a.text > b.text ? 1 : 0) : a.g[key] - b.g[key]) ||
            b.g.bytes - a.g.bytes || a.stack - b.stack);
        for (const th of document.querySelectorAll('#peak-table th[data-sort]')) {
            th.classList.toggle('sorted-desc', th.dataset.sort === key && dir < 0);
            th.classList.toggle('sorted-asc', th.dataset.sort === key && dir > 0);
        }
        for (const { stack, g } of rows.slice(0, 200)) {
            const tr = el('tr');
            tr.dataset.stack = String(stack);
            tr.appendChild(el('td', fmtBytes(g.bytes), 'num'));
            tr.appendChild(el('td', String(g.count), 'num'));
            const td = el('td'), v = visible(stackOf(stack));
            if (!v.frames.length)
                td.appendChild(el('span', '(no stack)'));
            framesCell(td, v);
            td.dataset.hidden = String(v.hidden);
            tr.appendChild(td);
            tbody.appendChild(tr);
        }
    }

    /* The stacks live at the peak as a tree, outermost frame at the top; frames of
     * the same text under one parent are one node. Hidden frames are left out before
     * the tree is built, so that the towers do not all end in the same frames of stack
     * capture and dispatch. */
    function flameTree(groups) {
        const node = (name, full, parent) => ({ name, full, parent, bytes: 0, count: 0, kids: new Map() });
        const root = node('all stacks at the peak', 'all stacks at the peak', null);
        for (const [stack, g] of groups) {
            const path = visible(stackOf(stack)).frames.reverse();
            let at = root;
            at.bytes += g.bytes;
            at.count += g.count;
            for (const fr of path.length ? path : [null]) {
                const full = fr ? frameText(fr) : '(no stack)';
                let k = at.kids.get(full);
                if (!k) {
                    k = node(fr ? fr.symbol || full : full, full, at);
                    at.kids.set(full, k);
                }
                k.bytes += g.bytes;
                k.count += g.count;
                at = k;
            }
        }
        return root;
    }
    function textHash(s) {
        let h = 2166136261;
        for (let i = 0; i < s.length; i++)
            h = Math.imul(h ^ s.charCodeAt(i), 16777619);
        return h >>> 0;
    }
    /* The zoom is kept as the path of frame texts from the root, so that it survives
     * a redraw; a path that no longer exists shows the whole tree. */
    function drawFlame(groups) {
        const box = $('flame'), root = flameTree(groups);
        box.textContent = '';
        let focus = root;
        for (const key of S.flameFocus) {
            const k = focus.kids.get(key);
            if (!k)
                break;
            focus = k;
        }
        const nodes = [];
        const ROW = 20;
        const add = (n, depth, left, width) => {
            const d = el('div', n.name, 'flame-node' + (n === focus ? ' focus' : ''));
            d.style.left = (100 * left).toFixed(4) + '%';
            d.style.width = (100 * width).toFixed(4) + '%';
            d.style.top = depth * ROW + 'px';
            const h = (textHash(n.full) % 50) + 10;
            d.style.background = n === root ? '#c8cdd7' : `hsl(${h}, 75%, ${62 + (textHash(n.full) >>> 8) % 14}%)`;
            d.dataset.depth = String(depth);
            d.dataset.bytes = String(n.bytes);
            d.dataset.index = String(nodes.length);
            nodes.push(n);
            box.appendChild(d);
        };
        const chain = [];
        for (let n = focus; n; n = n.parent)
            chain.unshift(n);
        chain.forEach((n, i) => add(n, i, 0, 1));
        let depth = chain.length - 1, maxDepth = depth;
        const minShare = 0.5 / Math.max(200, box.clientWidth || 1000);
        const walk = (n, d, left) => {
            let x = left;
            for (const k of [...n.kids.values()].sort((a, b) => b.bytes - a.bytes)) {
                const w = focus.bytes > 0 ? k.bytes / focus.bytes : 0;
                if (w >= minShare) {
                    add(k, d, x, w);
                    maxDepth = Math.max(maxDepth, d);
                    walk(k, d + 1, x);
                }
                x += w;
            }
        };
        walk(focus, depth + 1, 0);
        box.style.height = (maxDepth + 1) * ROW + 'px';
        box.flame = { nodes, root };
    }
    function flameNode(e) {
        const d = e.target.closest && e.target.closest('.flame-node');
        return d && $('flame').flame ? $('flame').flame.nodes[Number(d.dataset.index)] : null;
    }
    function showFlameTip(n, clientX, clientY) {
        const tip = $('tooltip'), total = $('flame').flame.root.bytes;
        tip.textContent = '';
        tip.classList.remove('pinned');
        tip.appendChild(el('div', n.full, 'flame-frame'));
        const tbl = el('table');
        row(tbl, 'bytes', `${fmtBytes(n.bytes)} (${n.bytes} bytes)`);
        row(tbl, 'blocks', String(n.count));
        row(tbl, 'share', `${total > 0 ? (100 * n.bytes / total).toFixed(1) : '0.0'}% of the peak`);
        tip.appendChild(tbl);
        tip.appendChild(el('div', n.parent ? 'click to zoom into this frame' : 'click to see every stack', 'stack-head'));
        tip.hidden = false;
        const r = tip.getBoundingClientRect();
        tip.style.left = Math.min(window.innerWidth - r.width - 8, clientX + 14) + 'px';
        tip.style.top = Math.max(8, Math.min(window.innerHeight - r.height - 8, clientY + 14)) + 'px';
    }

    /* ---------- file information ---------- */
    function fillInfo() {
        const info = S.info, m = S.model, f = m.figures;
        const tb = $('info-table').tBodies[0];
        tb.textContent = '';
        const add = (k, v) => row(tb, k, v);
        add('file', `${info.name} (${fmtBytes(info.size)}, ${info.kind}${info.kind === 'memtrace' ? ' format ' + info.version.join('.') : ''})`);
        add('events', `${info.events}${info.truncated ? ' (truncated: no end record)' : ''}`);
        add('duration', fmtTime(f.duration_ns));
        add('peak allocated', `${fmtBytes(f.allocated.peak_bytes)} (${f.allocated.peak_bytes} bytes)`);
        add('peak reserved', `${fmtBytes(f.reserved.peak_bytes)} (${f.reserved.peak_bytes} bytes)`);
        add('allocs / frees', `${f.allocs.count} / ${f.frees.count} (unmatched frees ${f.unmatched_frees.count}, replaced ${f.replaced_allocs.count})`);
        add('segments', `${f.segment_allocs.count} allocated, ${f.segment_frees.count} freed`);
        /* Memory live before the first event (docs/REPLAY.md rule 0): a state before
         * the events, or what a PyTorch snapshot's trace did not reach back to. */
        const before = (cols) => {
            let n = 0, bytes = 0;
            for (let id = 0; id < cols.n; id++)
                if (cols.init[id]) {
                    n++;
                    bytes += cols.size[id];
                }
            return [n, bytes];
        };
        const [ns, bs] = before(m.segs), [nb, bb] = before(m.blocks);
        if (ns || nb || info.initialDropped)
            add('live before the first event', `${ns} segment${ns === 1 ? '' : 's'} (${fmtBytes(bs)}), ` +
                `${nb} block${nb === 1 ? '' : 's'} (${fmtBytes(bb)})` +
                (info.initialDropped ? `; ${info.initialDropped} block${info.initialDropped === 1 ? '' : 's'} ` +
                    'in no segment known to be live then left out' : ''));
        add('oom events', String(f.oom.count));
        for (const k of Object.keys(info.meta || {})) {
            const v = info.meta[k];
            /* A table of settings (a snapshot's allocator_settings): one row each. */
            if (v && typeof v === 'object' && !Array.isArray(v))
                for (const sk of Object.keys(v))
                    add(`${k === 'allocator_settings' ? 'allocator setting' : 'meta ' + k} ${sk}`,
                        typeof v[sk] === 'string' ? v[sk] : JSON.stringify(v[sk]));
            else
                add(`meta ${k}`, typeof v === 'string' ? v : JSON.stringify(v));
        }
        const at = $('action-table').tBodies[0];
        at.textContent = '';
        const names = Format.ACTIONS;
        m.actionCounts.forEach((n, a) => {
            if (n)
                row(at, names[a] || `action ${a}`, String(n));
        });
        const an = $('annotation-table').tBodies[0];
        an.textContent = '';
        for (const a of m.annotations.slice(0, 1000))
            row(an, `+${fmtTime(a.time - m.t_min)}`, `${['start', 'end', 'mark'][a.kind] || 'kind ' + a.kind} ${str(a.name)}`);
    }

    function fillLegend() {
        const lg = $('legend');
        lg.textContent = '';
        const items = [];
        if ($('color-by').value === 'category') {
            for (const cat of S.model.categories)
                items.push([cat, cat ? str(cat) : '(no category)']);
        } else {
            items.push(null);
        }
        for (const it of items.slice(0, 40)) {
            if (it === null) {
                lg.appendChild(el('span', 'colour: one per stack; hover a band for its stack', 'legend-note'));
                continue;
            }
            const rgb = Timeline.hashColor(it[0]);
            const sw = el('span', null, 'swatch');
            sw.style.background = `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;
            const item = el('span', null, 'legend-item');
            item.appendChild(sw);
            item.appendChild(el('span', it[1]));
            lg.appendChild(item);
        }
        const g = el('span', null, 'legend-item');
        const sw = el('span', null, 'swatch grey');
        g.appendChild(sw);
        g.appendChild(el('span', 'too small to draw (summed)'));
        lg.appendChild(g);
        const p = el('span', null, 'legend-item');
        p.appendChild(el('span', null, 'swatch pale'));
        p.appendChild(el('span', 'came and went within a pixel'));
        lg.appendChild(p);
    }

    /* ---------- events ---------- */
    function bind() {
        $('file-input').addEventListener('change', (e) => {
            if (e.target.files.length)
                loadFiles(e.target.files);
        });
        $('file-select').addEventListener('change', (e) => {
            const f = S.files[Number(e.target.value)];
            if (!f)
                return;
            S.cur = Number(e.target.value);
            open(f.model, f.info, false);
        });
        $('events-table').addEventListener('click', (e) => {
            const tr = e.target.closest && e.target.closest('tr[data-t]');
            if (!tr || !S.model)
                return;
            S.at = Number(tr.dataset.t);
            redraw();
        });
        for (const th of document.querySelectorAll('#peak-table th[data-sort]')) {
            th.addEventListener('click', () => {
                const key = th.dataset.sort;
                S.peakSort = { key, dir: S.peakSort.key === key ? -S.peakSort.dir : key === 'stack' ? 1 : -1 };
                if (S.model)
                    fillPeak();
            });
        }
        /* A row of the peak table shows its stack on the timeline. */
        $('peak-table').tBodies[0].addEventListener('click', (e) => {
            const tr = e.target.closest && e.target.closest('tr[data-stack]');
            if (!tr || !S.model)
                return;
            $('search').value = `stack:${tr.dataset.stack}`;
            setSearch($('search').value);
            showTab('timeline');
        });
        $('help-button').addEventListener('click', () => ($('help').hidden = !$('help').hidden));
        $('help-close').addEventListener('click', () => ($('help').hidden = true));
        const flame = $('flame');
        flame.addEventListener('mousemove', (e) => {
            const n = flameNode(e);
            if (n)
                showFlameTip(n, e.clientX, e.clientY);
            else
                hideTooltip();
        });
        flame.addEventListener('mouseleave', hideTooltip);
        flame.addEventListener('click', (e) => {
            const n = flameNode(e);
            if (!n)
                return;
            const path = [];
            for (let k = n; k.parent; k = k.parent)
                path.unshift(k.full);
            S.flameFocus = path;
            hideTooltip();
            fillPeak();
        });
        for (const id of ['compare-align', 'compare-a', 'compare-b'])
            $(id).addEventListener('change', () => S.tab === 'compare' && redraw());
        document.addEventListener('dragover', (e) => {
            e.preventDefault();
            document.body.classList.add('dragging');
        });
        document.addEventListener('dragleave', () => document.body.classList.remove('dragging'));
        document.addEventListener('drop', (e) => {
            e.preventDefault();
            document.body.classList.remove('dragging');
            if (e.dataTransfer.files.length)
                loadFiles(e.dataTransfer.files);
        });
        for (const b of document.querySelectorAll('#tabs button'))
            b.addEventListener('click', () => S.model && showTab(b.dataset.view));
        $('device').addEventListener('change', (e) => {
            S.view.device = Number(e.target.value);
            mini = null;
            redraw();
            writeHash();
        });
        $('stream').addEventListener('change', (e) => {
            S.view.stream = e.target.value === '' ? null : Number(e.target.value);
            mini = null;
            S.flameFocus = [];
            redraw();
            writeHash();
        });
        $('category').addEventListener('change', (e) => {
            S.view.category = e.target.value === '' ? null : Number(e.target.value);
            mini = null;
            S.flameFocus = [];
            redraw();
            writeHash();
        });
        $('color-by').addEventListener('change', (e) => {
            if (!S.tl)
                return;
            S.tl.setColorBy(e.target.value);
            fillLegend();
            redraw();
            writeHash();
        });
        /* Every frame in every view, or only those frames.c's rules show. */
        $('all-frames').addEventListener('change', () => {
            if (!S.model)
                return;
            S.flameFocus = [];
            setSearch(S.search);
            if (S.pinned)
                showTooltipFor(S.pinned.hit, S.pinned.x, S.pinned.y, true);
            redraw();
            writeHash();
        });
        let searchTimer = 0;
        $('search').addEventListener('input', (e) => {
            clearTimeout(searchTimer);
            searchTimer = setTimeout(() => {
                setSearch(e.target.value);
                redraw();
                writeHash();
            }, 120);
        });

        const c = $('timeline');
        c.addEventListener('wheel', (e) => {
            if (!S.model)
                return;
            e.preventDefault();
            if (e.shiftKey)
                zoomBytesAt(e.clientY, Math.pow(1.0015, e.deltaY || e.deltaX));
            else
                zoomAt(e.clientX, Math.pow(1.0015, e.deltaY));
        }, { passive: false });
        let drag = null;
        c.addEventListener('mousedown', (e) => {
            if (!S.model)
                return;
            drag = { x: e.clientX, t0: S.view.t0, t1: S.view.t1, moved: false };
        });
        window.addEventListener('mousemove', (e) => {
            if (drag) {
                const dx = e.clientX - drag.x;
                if (Math.abs(dx) > 3)
                    drag.moved = true;
                if (drag.moved) {
                    const W = c.width - MARGIN.left - MARGIN.right;
                    const dt = (-dx / W) * (drag.t1 - drag.t0);
                    S.view.t0 = drag.t0 + dt;
                    S.view.t1 = drag.t1 + dt;
                    clampView();
                    redraw();
                    writeHash();
                    hideTooltip();
                    return;
                }
            }
            if (e.target === c && !S.pinned && S.model)
                showTooltipFor(hitAt(e.clientX, e.clientY), e.clientX, e.clientY, false);
        });
        window.addEventListener('mouseup', (e) => {
            if (!drag)
                return;
            const moved = drag.moved;
            drag = null;
            if (moved || e.target !== c)
                return;
            /* A click pins what is under the pointer (or releases a pin), and
             * chooses the time for "memory at a time". */
            const h = hitAt(e.clientX, e.clientY);
            if (S.pinned || !h) {
                S.pinned = null;
                hideTooltip();
            } else {
                S.pinned = { hit: h, x: e.clientX, y: e.clientY };
                showTooltipFor(h, e.clientX, e.clientY, true);
            }
            if (h)
                S.at = h.time;
            redraw();
        });
        c.addEventListener('mouseleave', () => {
            if (!S.pinned)
                hideTooltip();
        });
        c.addEventListener('dblclick', resetView);
        const rc = $('reserved');
        rc.addEventListener('mousemove', (e) => {
            if (!S.pinned)
                showTooltipFor(reservedHit(e.clientX, e.clientY), e.clientX, e.clientY, false);
        });
        rc.addEventListener('mouseleave', () => {
            if (!S.pinned)
                hideTooltip();
        });
        window.addEventListener('keydown', (e) => {
            if (e.key === 'Escape') {
                S.pinned = null;
                hideTooltip();
                $('help').hidden = true;
                return;
            }
            const t = e.target;
            if (e.ctrlKey || e.metaKey || e.altKey || (t && ['INPUT', 'SELECT', 'TEXTAREA'].includes(t.tagName)))
                return;
            if (e.key === '?') {
                $('help').hidden = !$('help').hidden;
                return;
            }
            if (!S.model)
                return;
            const tabs = [...document.querySelectorAll('#tabs button')].filter((b) => !b.hidden);
            if (e.key === '+' || e.key === '=') {
                zoomKey(0.5);
            } else if (e.key === '-' || e.key === '_') {
                zoomKey(2);
            } else if (e.key === 'ArrowLeft' || e.key === 'ArrowRight') {
                const d = (e.key === 'ArrowLeft' ? -0.1 : 0.1) * (S.view.t1 - S.view.t0);
                S.view.t0 += d;
                S.view.t1 += d;
                clampView();
                redraw();
                writeHash();
            } else if (e.key === '0') {
                resetView();
            } else if (e.key === '/') {
                $('search').focus();
            } else if (/^[1-9]$/.test(e.key) && Number(e.key) <= tabs.length) {
                showTab(tabs[Number(e.key) - 1].dataset.view);
            } else {
                return;
            }
            e.preventDefault();
        });
        const mm = $('minimap');
        let mdrag = false;
        const moveTo = (e) => {
            const rect = mm.getBoundingClientRect();
            const W = mm.width - MARGIN.left - MARGIN.right;
            const span = Math.max(1, S.model.t_max - S.model.t_min);
            const t = ((e.clientX - rect.left - MARGIN.left) / W) * span;
            const half = (S.view.t1 - S.view.t0) / 2;
            S.view.t0 = t - half;
            S.view.t1 = t + half;
            clampView();
            redraw();
            writeHash();
        };
        mm.addEventListener('mousedown', (e) => {
            if (!S.model)
                return;
            mdrag = true;
            moveTo(e);
        });
        window.addEventListener('mousemove', (e) => mdrag && moveTo(e));
        window.addEventListener('mouseup', () => (mdrag = false));
        window.addEventListener('resize', () => {
            mini = null;
            redraw();
        });
    }

    /* Hooks for tests and scripts: where a time and a byte level are on screen, what
     * the last frame drew, and timings. */
    globalThis.memtraceViewer = {
        state: S,
        toScreen(tAbs, bytes) {
            const c = $('timeline'), rect = c.getBoundingClientRect();
            const t = tAbs - S.model.t_min;
            return {
                x: rect.left + MARGIN.left + ((t - S.view.t0) / (S.view.t1 - S.view.t0)) * lastFrame.W,
                y: rect.top + MARGIN.top + lastFrame.H - (bytes - lastFrame.base) * lastFrame.scale,
            };
        },
        frame: () => lastFrame && { W: lastFrame.W, H: lastFrame.H, top: lastFrame.top, base: lastFrame.base, drawn: lastFrame.drawn, aggregated: lastFrame.aggregated },
        timings: () => ({ loadMs: S.loadMs, firstDrawMs: S.firstDrawMs, renderMs: S.renderMs }),
        /* True once the timeline on screen shows the current view: input changes the
         * view at once but draws on the next animation frame, and toScreen() and
         * frame() describe the frame drawn. */
        settled: () => !frameRequested && lastFrame !== null && S.tab === 'timeline' && lastFrame.view === viewKey(),
        setView(t0, t1) {
            S.view.t0 = t0;
            S.view.t1 = t1;
            clampView();
            draw();
        },
    };

    /* A page written by `memtrace html` carries its files as base64 in script
     * elements that never run; decoded in slices to bound atob's strings. */
    function decodeBase64(text) {
        const n = text.length;
        const len = (n / 4) * 3 - (text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0);
        const out = new Uint8Array(Math.max(0, len));
        const STEP = 1 << 20;
        let o = 0;
        for (let i = 0; i < n; i += STEP) {
            const s = atob(text.slice(i, i + STEP));
            for (let j = 0; j < s.length; j++)
                out[o++] = s.charCodeAt(j);
        }
        return out.buffer;
    }
    function embeddedFiles() {
        return Array.from(document.querySelectorAll('script[type="application/x-memtrace-base64"]'),
            (s) => ({ name: s.dataset.name || 'embedded', read: () => decodeBase64(s.textContent.trim()) }));
    }

    bind();
    const q = new URLSearchParams(location.search);
    const embedded = embeddedFiles();
    if (embedded.length)
        loadSet(embedded.map((f) => ({ name: f.name, read: async () => f.read() })));
    else if (q.has('file'))
        loadUrls(q.getAll('file'));
})();
