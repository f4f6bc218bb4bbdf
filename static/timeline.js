// timeline.js: canvas timeline (timeline.html?id=N&start=&end=&sel=&tracks=).
//
// The view lives in the address (issue 51, item 3): start and end (µs, as the API gives them),
// sel (the selected event's ref) and tracks (the track ids shown, comma-separated; all when
// absent) are written back as the view moves, so the address can be pasted. A finding's link
// may name its event instead of its ref: find=NAME (the whole name; NAME* for a prefix) selects
// the first such event at or after `at` (dir=prev: the last before it), else the first in the
// window (one running at `start`, else the first starting before `end`), else the session's first, through GET /events?q=NAME&match=exact; without start and end the view
// is then fitted to that event. The address then holds its ref.
//
// Draws CPU threads and GPU streams from the server's level-of-detail replies
// (GET /timeline?start_us&end_us&buckets): a track comes as events (<= 2,000 in the window) or
// as buckets (busy fraction per slice). Nothing is one DOM node per event. Zoom and pan act on
// the view at once, redrawing the last reply stretched to the new view; a debounced re-fetch
// then replaces it. Replies that arrive after a newer request was made are dropped.
'use strict';
(() => {
  const { api, el, qs, fmtTime, fmtPct, fmtInt } = FP;
  const id = FP.param('id');
  if (!id) { FP.showError('No session id in the address (timeline.html?id=N).'); return; }
  const base = `/api/v1/sessions/${encodeURIComponent(id)}`;
  document.getElementById('to-session').href = `session.html?id=${encodeURIComponent(id)}`;

  const canvas = document.getElementById('tl');
  const ctx = canvas.getContext('2d');
  const tip = document.getElementById('tip');
  const rangeEl = document.getElementById('range');
  const glanceEl = document.getElementById('glance');

  const COLORS = {
    cpu_op: '#4e79a7', user_annotation: '#b07aa1', gpu_user_annotation: '#76b7b2', python_function: '#a0cbe8',
    cuda_runtime: '#f28e2b', cuda_driver: '#ff9da7', kernel: '#59a14f', gpu_memcpy: '#edc948',
    gpu_memset: '#9c755f', cuda_sync: '#bab0ac',
  };
  const DEFAULT_COLOR = '#8c959f';
  const GAP_FILL = 'rgba(214, 39, 40, 0.22)';
  const GAP_EDGE = 'rgba(214, 39, 40, 0.9)';
  const PHASE_FILLS = ['rgba(255, 190, 60, 0.13)', 'rgba(60, 140, 255, 0.10)'];
  const PHASE_BAR = ['#f1c36b', '#8fb8f0'];
  const LABEL_W = 180, AXIS_H = 26, LANE_H = 15, MAX_LANES = 4, ROW = 14, BUCKET_H = 30, GAP = 6, MAX_DEPTH = 8;
  const color = (cat) => COLORS[cat] || DEFAULT_COLOR;
  const phaseH = () => phaseLanes * LANE_H + 4;

  let phaseLanes = 1;      // rows of the phase band (see normalize)
  let full = null;          // {s, e}: the whole session
  let view = null;          // {s, e}: what is on screen
  let data = null;          // last timeline reply
  let layout = [];          // [{track, y, h}]
  let seq = 0, pending = 0, dirty = false; // dirty: the view moved since the last fetch began
  let cssW = 800, cssH = 300;
  let exact = null;         // {view, timeline, busy}: the server's exact numbers for the view
  let sessionGaps = null;   // [{device, count}]: every idle gap of the session (GET /gpu)
  let selected = null;      // GET /events reply of the clicked or found event
  let shownTracks = null;   // Set of the track ids shown (the address's tracks), or null: all
  let area = null;          // {s, e}: the area selection (shift+drag, or "Summarise the view")
  // Counter tracks (issue 51, item 3), under the tracks: each device's GPU busy per slice of the
  // fetched window (GET /busy?buckets=, kernels, copies and memsets) and, where the trace has
  // [memory] events, each device's allocated bytes (GET /memory's samples, a step line).
  let busyData = null;      // GET /busy reply with buckets, over the fetched window
  let memData = null;       // GET /memory's devices with samples
  const COUNTER_H = 34;
  async function fetchBusy(s, e, n) {
    try {
      return await api(`${base}/busy${qs({ start_us: s, end_us: e, buckets: Math.max(1, Math.min(2000, Math.round(n / 2))) })}`, { quiet: true });
    } catch (_) { return null; }
  }
  function counterTracks() {
    const out = [];
    for (const d of (busyData && busyData.devices) || [])
      if (d.buckets && d.buckets.length) out.push({ id: `counter:busy:${d.device}`, kind: 'counter', counter: 'busy', label: `GPU ${d.device} busy`, dev: d });
    for (const d of memData || [])
      if ((d.samples || []).length) out.push({ id: `counter:mem:${d.device}`, kind: 'counter', counter: 'mem', label: `${d.device} memory allocated`, dev: d });
    return out;
  }
  // A counter's value at time t: busy in the slice holding t, or the allocated bytes after the
  // last sample at or before t.
  function counterAt(t, tr) {
    if (tr.counter === 'busy') {
      const n = tr.dev.buckets.length, w = (busyData.end_us - busyData.start_us) / n;
      const i = Math.floor((t - busyData.start_us) / w);
      return i >= 0 && i < n ? { v: tr.dev.buckets[i], from: busyData.start_us + i * w, w } : null;
    }
    let v = null;
    for (const [ts, bytes] of tr.dev.samples) { if (ts > t) break; v = bytes; }
    return v === null ? null : { v };
  }
  {
    const t = FP.param('tracks');
    if (t) shownTracks = new Set(t.split(',').filter(Boolean).slice(0, 256));
  }
  const heights = new Map(); // track id -> height set by dragging its bottom edge

  // ---- legend --------------------------------------------------------------------------------
  document.getElementById('legend').replaceChildren(
    ...Object.entries(COLORS).map(([k, c]) => el('span', {}, el('i', { style: `background:${c}` }), k)),
    el('span', {}, el('i', { style: `background:${GAP_FILL};border:1px solid ${GAP_EDGE}` }), 'GPU idle gap'),
    el('span', {}, el('i', { style: `background:${PHASE_BAR[0]}` }), 'phase'));

  // ---- fetching ------------------------------------------------------------------------------
  function plotW() { return Math.max(50, cssW - LABEL_W); }

  async function fetchView() {
    const my = ++seq;
    pending++;
    dirty = false;
    canvas.dataset.state = 'loading';
    showRange();
    try {
      // Half a view either side, so a short pan still has data to draw.
      const span = view.e - view.s;
      const s = Math.max(full.s, view.s - span / 2), e = Math.min(full.e, view.e + span / 2);
      const buckets = Math.min(4000, Math.max(50, Math.round(plotW() * (e - s) / span)));
      const [j, b] = await Promise.all([api(`${base}/timeline${qs({ start_us: s, end_us: e, buckets })}`), fetchBusy(s, e, buckets)]);
      if (my === seq) { data = normalize(j); busyData = b; relayout(); }
    } catch (_) {
      /* the banner shows it; keep drawing what we had */
    } finally {
      pending--;
      if (my === seq) {
        showRange(); draw(); summarize();
        if (!dirty) fetchExact(my);
      }
    }
  }
  const refetch = FP.debounce(fetchView, 150);

  // The view's exact numbers: event counts (every depth) from /timeline over exactly the view
  // and GPU busy from /busy. The drawn reply covers half a view more on each side, and its
  // buckets are resampled, so neither can be summed for the summary.
  async function fetchExact(my) {
    const v = { ...view };
    // the drawn reply already covers exactly this view (the whole session, at first): its
    // counts are the view's, and a second scan of every event would cost as much again
    const same = data && data.start_us === v.s && data.end_us === v.e;
    try {
      const [t, b] = await Promise.all([same ? data : api(`${base}/timeline${qs({ start_us: v.s, end_us: v.e, buckets: 1 })}`),
        api(`${base}/busy${qs({ start_us: v.s, end_us: v.e })}`)]);
      if (my !== seq) return;
      exact = { view: v, timeline: t, busy: b };
      summarize();
    } catch (_) { /* the banner shows it */ } finally {
      if (my === seq && !dirty) canvas.dataset.state = 'ready';
    }
  }

  // Nesting depth per event when the reply has none (a stack of open intervals), and phase
  // lanes: phases overlap (a step holds forward and backward), so each goes in the first lane
  // where it does not overlap the previous phase.
  function normalize(j) {
    for (const t of j.tracks || []) {
      const evs = t.events || [];
      if (!evs.length || evs.every((e) => typeof e.depth === 'number')) continue;
      evs.sort((a, b) => a.ts_us - b.ts_us || b.dur_us - a.dur_us);
      const ends = [];
      for (const e of evs) {
        while (ends.length && ends[ends.length - 1] <= e.ts_us + 1e-6) ends.pop();
        e.depth = ends.length;
        ends.push(e.ts_us + e.dur_us);
      }
    }
    const phases = (j.phases || []).slice().sort((a, b) => a.ts_us - b.ts_us || b.dur_us - a.dur_us);
    const laneEnd = [];
    for (const p of phases) {
      let l = laneEnd.findIndex((end) => end <= p.ts_us);
      if (l < 0) { l = laneEnd.length; laneEnd.push(0); }
      laneEnd[l] = p.ts_us + p.dur_us;
      p.lane = l;
    }
    j.phases = phases;
    phaseLanes = Math.max(phaseLanes, Math.min(MAX_LANES, laneEnd.length || 1));
    return j;
  }

  // ---- layout and drawing --------------------------------------------------------------------
  function heightOf(t) {
    if (heights.has(t.id)) return heights.get(t.id);
    if (t.kind === 'counter') return COUNTER_H;
    let h;
    if (t.mode === 'buckets') {
      // room for the named slices (the wide events the server sends with the buckets)
      let d = -1;
      for (const ev of t.slices || []) if ((ev.depth || 0) > d) d = ev.depth || 0;
      h = Math.max(BUCKET_H, (Math.min(d, MAX_DEPTH - 1) + 1) * ROW + 4);
    } else {
      let d = 0;
      for (const ev of t.events || []) if ((ev.depth || 0) > d) d = ev.depth || 0;
      h = (Math.min(d, MAX_DEPTH - 1) + 1) * ROW + 4;
    }
    return Math.max(h, ROW + 4);
  }
  function relayout() {
    if (memData !== null) canvas.dataset.counters = counterTracks().map((t) => t.id).join(',');
    let y = AXIS_H + phaseH() + 4;
    const tracks = (data ? data.tracks : []).filter((t) => !shownTracks || shownTracks.has(t.id)).concat(counterTracks());
    showAllBtn.hidden = !shownTracks;
    if (shownTracks && data) showAllBtn.textContent = `Show all ${fmtInt(data.tracks.length)} tracks (${fmtInt(tracks.filter((t) => t.kind !== 'counter').length)} shown)`;
    layout = tracks.map((t) => {
      const h = heightOf(t);
      const r = { track: t, y, h };
      y += h + GAP;
      return r;
    });
    resize(Math.max(y + 4, 120));
    // where the counter rows are, for tests and tools
    canvas.dataset.counterRows = JSON.stringify(layout.filter((r) => r.track.kind === 'counter').map((r) => ({ id: r.track.id, y: r.y, h: r.h })));
  }
  function resize(h) {
    const w = canvas.parentElement.clientWidth || 800;
    const dpr = window.devicePixelRatio || 1;
    if (w !== cssW || h !== cssH || canvas.width !== Math.round(w * dpr)) {
      cssW = w; cssH = h;
      canvas.style.height = h + 'px';
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  }
  const xOf = (t) => LABEL_W + ((t - view.s) / (view.e - view.s)) * plotW();
  const tOf = (x) => view.s + ((x - LABEL_W) / plotW()) * (view.e - view.s);

  function niceStep(span, n) {
    const raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
    return 10 * p;
  }

  let frame = 0;
  function draw() {
    if (frame) return;
    frame = requestAnimationFrame(() => { frame = 0; drawNow(); });
  }
  function drawNow() {
    if (!view) return;
    const W = cssW, H = cssH, pw = plotW();
    ctx.clearRect(0, 0, W, H);
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, W, H);
    ctx.font = '11px system-ui, "DejaVu Sans", sans-serif';
    ctx.textBaseline = 'middle';

    // axis
    ctx.fillStyle = '#f6f8fa';
    ctx.fillRect(0, 0, W, AXIS_H);
    const step = niceStep(view.e - view.s, Math.max(2, pw / 120));
    ctx.strokeStyle = '#eaeef2';
    ctx.fillStyle = '#57606a';
    ctx.beginPath();
    const ticks = [];
    for (let t = Math.ceil((view.s - full.s) / step) * step + full.s; t <= view.e; t += step) {
      const x = Math.round(xOf(t)) + 0.5;
      ctx.moveTo(x, AXIS_H - 6); ctx.lineTo(x, H);
      ticks.push(FP.fmtTimeAt(t - full.s, step));
      ctx.fillText(ticks[ticks.length - 1], x + 3, AXIS_H / 2);
    }
    ctx.stroke();
    canvas.dataset.ticks = ticks.join('|'); // the labels drawn, for tests and screen readers

    ctx.save();
    ctx.beginPath();
    ctx.rect(LABEL_W, 0, pw, H);
    ctx.clip();
    if (data) {
      // phases: a bar in their row and a faint band over every track
      let i0 = 0;
      for (const p of data.phases || []) {
        if (p.lane >= MAX_LANES) continue;
        const x0 = xOf(p.ts_us), x1 = xOf(p.ts_us + p.dur_us);
        if (x1 < LABEL_W || x0 > W) continue;
        const w = Math.max(1, x1 - x0), i = p.lane === 0 ? i0++ : p.lane;
        if (p.lane === 0) { // the outermost phases shade the tracks too
          ctx.fillStyle = PHASE_FILLS[i % 2];
          ctx.fillRect(x0, AXIS_H + phaseH(), w, H);
        }
        const y = AXIS_H + 2 + p.lane * LANE_H;
        ctx.fillStyle = PHASE_BAR[i % 2];
        ctx.fillRect(x0, y, w, LANE_H - 2);
        ctx.fillStyle = '#ffffff';
        ctx.fillRect(Math.round(x0), y, 1, LANE_H - 2); // a seam between touching phases
        label(p.name, x0, x1, y + (LANE_H - 2) / 2, '#1b1f24');
      }
      namedSlices = [];
      for (const r of layout) drawTrack(r);
      canvas.dataset.namedSlices = JSON.stringify(namedSlices);
      drawSelection();
      if (area && area.e > view.s && area.s < view.e) { // the area selection: a band over every track
        const x0 = Math.max(LABEL_W, xOf(area.s)), x1 = Math.min(W, xOf(area.e));
        ctx.fillStyle = 'rgba(9, 105, 218, 0.12)';
        ctx.fillRect(x0, AXIS_H, Math.max(1, x1 - x0), H - AXIS_H);
        ctx.fillStyle = 'rgba(9, 105, 218, 0.8)';
        ctx.fillRect(x0, AXIS_H, 1, H - AXIS_H);
        ctx.fillRect(Math.max(x0, x1 - 1), AXIS_H, 1, H - AXIS_H);
      }
      // GPU idle gaps over the GPU tracks of their device
      for (const g of data.gaps || []) {
        const x0 = xOf(g.ts_us), x1 = xOf(g.ts_us + g.dur_us);
        if (x1 < LABEL_W || x0 > W) continue;
        for (const r of layout) {
          if (r.track.kind !== 'gpu' || !sameDevice(r.track, g.device)) continue;
          ctx.fillStyle = GAP_FILL;
          ctx.fillRect(x0, r.y, Math.max(2, x1 - x0), r.h);
        }
        ctx.fillStyle = GAP_EDGE;
        ctx.fillRect(x0, AXIS_H + phaseH() - 4, Math.max(2, x1 - x0), 4);
      }
    }
    ctx.restore();

    // track labels
    ctx.fillStyle = '#f6f8fa';
    ctx.fillRect(0, AXIS_H, LABEL_W, H);
    ctx.fillStyle = '#57606a';
    ctx.fillText('phases', 8, AXIS_H + phaseH() / 2);
    for (const r of layout) {
      ctx.fillStyle = r.track.kind === 'gpu' ? '#116329' : '#0a3069';
      ctx.fillText(clipText(trackName(r.track), LABEL_W - 12),
                   8, r.y + Math.min(r.h, ROW * 2) / 2);
      ctx.fillStyle = '#eaeef2';
      ctx.fillRect(0, r.y + r.h + GAP / 2, W, 1);
    }
    ctx.strokeStyle = '#d0d7de';
    ctx.beginPath();
    ctx.moveTo(LABEL_W + 0.5, 0); ctx.lineTo(LABEL_W + 0.5, H);
    ctx.moveTo(0, AXIS_H + 0.5); ctx.lineTo(W, AXIS_H + 0.5);
    ctx.stroke();
  }

  // The selected event outlined, and its launch flow as an arrow from the runtime call to the
  // GPU activity (the correlation the server followed).
  function rowOf(e) {
    const r = layout.find((l) => l.track.id === e.track);
    if (!r) return null;
    let depth = 0;
    for (const ev of r.track.events || []) if (ev.ts_us === e.ts_us && ev.name === e.name) { depth = Math.min(ev.depth || 0, MAX_DEPTH - 1); break; }
    return { r, y: r.track.mode === 'buckets' ? r.y + r.h / 2 : r.y + 2 + depth * ROW + (ROW - 2) / 2 };
  }
  function drawSelection() {
    if (!selected || !selected.event) return;
    const e = selected.event, at = rowOf(e);
    if (at) {
      ctx.strokeStyle = '#ff9f1c';
      ctx.lineWidth = 2;
      ctx.strokeRect(xOf(e.ts_us) - 1, at.y - ROW / 2, Math.max(3, xOf(e.ts_us + e.dur_us) - xOf(e.ts_us)) + 2, ROW);
      ctx.lineWidth = 1;
    }
    const flows = selected.launched_by ? [[selected.launched_by, e]] : (selected.launches || []).map((k) => [e, k]);
    let drawn = 0;
    for (const [from, to] of flows) {
      const a = rowOf(from), b = rowOf(to);
      if (!a || !b) continue;
      drawn++;
      const x0 = xOf(from.ts_us), x1 = xOf(to.ts_us);
      ctx.strokeStyle = '#d62728';
      ctx.fillStyle = '#d62728';
      ctx.beginPath(); ctx.moveTo(x0, a.y); ctx.lineTo(x1, b.y); ctx.stroke();
      const ang = Math.atan2(b.y - a.y, x1 - x0);
      ctx.beginPath(); ctx.moveTo(x1, b.y);
      ctx.lineTo(x1 - 8 * Math.cos(ang - 0.4), b.y - 8 * Math.sin(ang - 0.4));
      ctx.lineTo(x1 - 8 * Math.cos(ang + 0.4), b.y - 8 * Math.sin(ang + 0.4));
      ctx.fill();
    }
    canvas.dataset.flows = String(drawn);
  }

  // "GPU 0 stream 7" already says what it is; "thread 456" gets a CPU in front.
  function trackName(t) {
    const l = t.label || t.id;
    if (t.kind === 'counter') return l;
    return /^(cpu|gpu)\b/i.test(l) ? l : `${t.kind === 'gpu' ? 'GPU' : 'CPU'} ${l}`;
  }

  function sameDevice(track, dev) {
    if (dev === undefined || dev === null) return true;
    if (track.device !== undefined) return track.device === dev;
    const parts = String(track.id).split(':'); // "gpu:DEVICE:STREAM"
    return parts.length < 2 || Number(parts[1]) === Number(dev);
  }

  function drawCounter(r) {
    const t = r.track, W = cssW, top = r.y + 3, h = r.h - 4, base = r.y + r.h - 1;
    ctx.fillStyle = t.counter === 'busy' ? 'rgba(89, 161, 79, 0.55)' : 'rgba(176, 122, 161, 0.45)';
    ctx.strokeStyle = t.counter === 'busy' ? '#3b7a33' : '#7b4a6f';
    ctx.beginPath();
    ctx.moveTo(LABEL_W, base);
    if (t.counter === 'busy') {
      const n = t.dev.buckets.length, w = (busyData.end_us - busyData.start_us) / n;
      t.dev.buckets.forEach((v, i) => {
        const x0 = xOf(busyData.start_us + i * w), x1 = xOf(busyData.start_us + (i + 1) * w), y = base - Math.min(1, Math.max(0, v)) * h;
        if (x1 < LABEL_W || x0 > W) return;
        ctx.lineTo(x0, y); ctx.lineTo(x1, y);
      });
      t.max = 1;
    } else {
      const peak = t.dev.peak_bytes || Math.max(...t.dev.samples.map((x) => x[1]), 1);
      let y = base;
      for (const [ts, bytes] of t.dev.samples) {
        const x = xOf(ts);
        ctx.lineTo(Math.max(LABEL_W, Math.min(W, x)), y);
        y = base - (bytes / peak) * h;
        ctx.lineTo(Math.max(LABEL_W, Math.min(W, x)), y);
      }
      ctx.lineTo(W, y);
      t.max = peak;
    }
    ctx.lineTo(W, base);
    ctx.closePath();
    ctx.fill();
    ctx.fillStyle = '#57606a';
    ctx.fillText(t.counter === 'busy' ? '100%' : FP.fmtMem(t.max), LABEL_W + 3, top + 5);
  }

  function drawTrack(r) {
    const t = r.track, W = cssW;
    if (t.kind === 'counter') { drawCounter(r); return; }
    if (t.mode === 'buckets') {
      const c = t.kind === 'gpu' ? COLORS.kernel : COLORS.cpu_op;
      ctx.fillStyle = c;
      for (const b of t.buckets || []) {
        const x0 = xOf(b.ts_us), x1 = xOf(b.ts_us + b.dur_us);
        if (x1 < LABEL_W || x0 > W || !(b.busy > 0)) continue;
        const h = Math.max(1, Math.min(1, b.busy) * (r.h - 2));
        ctx.fillRect(x0, r.y + r.h - h, Math.max(1, x1 - x0), h);
      }
      if (!(t.slices || []).length) return;
    }
    drawEvents(r, t.mode === 'buckets' ? t.slices : t.events);
  }
  // Events as boxes in rows by depth, named where there is room; over a bucket track, its
  // named slices (outlined, so they read apart from the busy bars under them).
  function drawEvents(r, events) {
    const t = r.track, W = cssW, over = t.mode === 'buckets';
    let lastCat = null;
    for (const ev of events || []) {
      const x0 = xOf(ev.ts_us), x1 = xOf(ev.ts_us + ev.dur_us);
      if (x1 < LABEL_W || x0 > W) continue;
      const d = Math.min(ev.depth || 0, MAX_DEPTH - 1);
      const y = r.y + 2 + d * ROW;
      if (ev.cat !== lastCat) { ctx.fillStyle = color(ev.cat); lastCat = ev.cat; }
      const w = Math.max(1, x1 - x0);
      ctx.fillRect(x0, y, w, ROW - 2);
      if (over) { ctx.strokeStyle = '#ffffff'; ctx.strokeRect(x0 + 0.5, y + 0.5, Math.max(0, w - 1), ROW - 3); }
      if (w > 40) {
        if (label(ev.name, x0, x1, y + (ROW - 2) / 2, '#ffffff') && over) namedSlices.push(ev.name);
        ctx.fillStyle = color(ev.cat);
      }
    }
  }
  let namedSlices = []; // the slice names drawn over bucket tracks in the last frame (for tests)

  function clipText(s, maxW) {
    s = String(s);
    if (ctx.measureText(s).width <= maxW) return s;
    let lo = 0, hi = s.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (ctx.measureText(s.slice(0, mid) + '…').width <= maxW) lo = mid; else hi = mid - 1;
    }
    return lo ? s.slice(0, lo) + '…' : '';
  }
  function label(text, x0, x1, y, fg) {
    const a = Math.max(x0, LABEL_W) + 3, b = Math.min(x1, cssW) - 3;
    if (b - a < 20) return false;
    const s = clipText(text, b - a);
    if (!s) return false;
    ctx.fillStyle = fg;
    ctx.fillText(s, a, y);
    return true;
  }

  // ---- text around the canvas ----------------------------------------------------------------
  function showRange() {
    if (!view) return;
    const st = (view.e - view.s) / 100; // neighbouring views must read differently
    rangeEl.textContent = `${FP.fmtTimeAt(view.s - full.s, st)} – ${FP.fmtTimeAt(view.e - full.s, st)} ` +
      `(${fmtTime(view.e - view.s)} of ${fmtTime(full.e - full.s)})${pending ? ' · loading…' : ''}`;
    canvas.dataset.viewStart = String(view.s);
    canvas.dataset.viewEnd = String(view.e);
    writeAddress();
  }

  // The view into the address (replaceState: no history entry per pan), debounced: Chromium
  // refuses more than a few hundred address changes in ten seconds.
  const roundUs = (v) => Math.round(v * 1000) / 1000;
  const writeAddress = FP.debounce(() => {
    if (!view) return;
    const whole = view.s === full.s && view.e === full.e;
    const href = FP.timelineHref(id, { start: whole ? null : roundUs(view.s), end: whole ? null : roundUs(view.e),
      sel: selected && selected.event ? selected.event.ref : null, tracks: shownTracks ? [...shownTracks] : null });
    if (location.pathname.endsWith('timeline.html') && location.search !== href.slice('timeline.html'.length)) history.replaceState(null, '', href);
    canvas.dataset.address = href;
  }, 120);
  const showAllBtn = document.getElementById('all-tracks');
  showAllBtn.addEventListener('click', () => { shownTracks = null; relayout(); draw(); summarize(); writeAddress(); });
  function hideTrack(tid) {
    const ids = (data ? data.tracks : []).map((t) => t.id).filter((x) => x !== tid && (!shownTracks || shownTracks.has(x)));
    if (!ids.length) return;
    shownTracks = new Set(ids);
    relayout(); draw(); summarize(); writeAddress();
  }

  // Busy and the median event of a track in the view, from what is drawn: used for CPU
  // tracks (the exact GPU busy comes from /busy). The median is over every event in the view,
  // all depths; on a GPU track over the kernels, copies and memsets, not annotation ranges.
  function drawnInView(t) {
    let busy = 0;
    const durs = [];
    const clip = (a, d) => Math.max(0, Math.min(a + d, view.e) - Math.max(a, view.s));
    if (t.mode === 'buckets') {
      for (const b of t.buckets || []) busy += clip(b.ts_us, b.dur_us) * (b.busy || 0);
    } else {
      let end = -Infinity;
      for (const ev of t.events || []) {
        if (ev.ts_us >= view.e || ev.ts_us + ev.dur_us <= view.s) continue;
        if (t.kind !== 'gpu' || ev.cat !== 'gpu_user_annotation') durs.push(ev.dur_us);
        if ((ev.depth || 0) === 0 && (t.kind !== 'gpu' || ev.cat !== 'gpu_user_annotation')) {
          const a = Math.max(ev.ts_us, end), b = ev.ts_us + ev.dur_us;
          if (b > a) { busy += clip(a, b - a); end = b; }
        }
      }
    }
    durs.sort((a, b) => a - b);
    return { busy: busy / (view.e - view.s), median: durs.length ? durs[durs.length >> 1] : null };
  }

  function summarize() {
    if (!data) return;
    const ex = exact && exact.view.s === view.s && exact.view.e === view.e ? exact : null;
    const streamBusy = (t) => {
      const [, dev, st] = String(t.id).split(':');
      const d = ex && (ex.busy.devices || []).find((x) => String(x.device) === dev);
      const s = d && d.streams.find((x) => String(x.stream) === st);
      return s ? s.busy_fraction : null;
    };
    const rows = layout.filter((r) => r.track.kind !== 'counter').map((r) => {
      const d = drawnInView(r.track);
      const et = ex && ex.timeline.tracks.find((t) => t.id === r.track.id);
      return { t: r.track, n: et ? et.count : null, busy: r.track.kind === 'gpu' ? streamBusy(r.track) : d.busy, median: d.median };
    });
    const gaps = (data.gaps || []).filter((g) => g.ts_us + g.dur_us > view.s && g.ts_us < view.e);
    const gapTotal = gaps.reduce((a, g) => a + Math.min(g.ts_us + g.dur_us, view.e) - Math.max(g.ts_us, view.s), 0);
    const all = (sessionGaps || []).reduce((a, d) => a + d.count, 0);
    const gapWords = `${fmtInt(gaps.length)} of the session's largest idle gap${gaps.length === 1 ? '' : 's'} in view, ` +
      `totalling ${fmtTime(gapTotal)} (${fmtPct(gapTotal / (view.e - view.s))} of the view)` +
      (sessionGaps ? `; the session has ${fmtInt(all)} gaps of 5µs or more in all (the session page counts them all, the timeline marks the largest)` : '');
    if (!rows.some((r) => r.t.kind === 'gpu')) glanceEl.textContent = 'No GPU stream in this session.';
    else if (!ex) glanceEl.textContent = 'In view: counting…';
    else {
      const devs = ex.busy.devices || [];
      const best = devs.reduce((a, d) => (!a || d.busy_fraction > a.busy_fraction ? d : a), null);
      const b = best ? best.busy_fraction : 0;
      glanceEl.textContent = `In view: GPU ${best ? best.device : ''} busy ${fmtPct(b)} (kernels, copies and memsets; exact); ` +
        `${fmtInt(ex.timeline.gpu_events)} GPU event${ex.timeline.gpu_events === 1 ? '' : 's'}, ` +
        `${fmtInt(ex.timeline.cpu_events)} CPU event${ex.timeline.cpu_events === 1 ? '' : 's'}; ${gapWords}. ` +
        (b > 0.8 ? 'Kernels are packed.' : b < 0.5 ? 'The GPU is mostly waiting.' : 'The GPU waits part of the time.');
    }
    glanceEl.dataset.exact = ex ? 'yes' : 'no';
    FP.renderTable(document.getElementById('tracks'), [
      { key: 'label', label: 'Track', rowHeader: true, render: (r) => trackName(r.t) },
      { key: 'mode', label: 'Drawn as', render: (r) => (r.t.mode === 'buckets'
        ? `busy buckets${(r.t.slices || []).length ? ` and ${fmtInt(r.t.slices.length)} named slice${r.t.slices.length === 1 ? '' : 's'}` : ''}` : 'events') },
      { key: 'n', label: 'Events in view', num: true, render: (r) => (r.n === null ? '…' : fmtInt(r.n)) },
      { key: 'busy', label: 'Busy in view', num: true, render: (r) => (r.busy === null ? '…' : fmtPct(r.busy)) },
      { key: 'median', label: 'Median event', num: true, render: (r) => (r.median === null ? '—' : fmtTime(r.median)) },
      { key: 'hide', label: 'Shown', csv: false, render: (r) => el('button', { type: 'button', class: 'hide-track', dataset: { track: r.t.id },
        disabled: rows.length < 2 ? '' : null, onclick: () => hideTrack(r.t.id) }, 'Hide') },
    ], rows, null, null);
  }

  // ---- hover ---------------------------------------------------------------------------------
  function hit(x, y) {
    if (!data || x < LABEL_W) return null;
    const t = tOf(x), tol = (3 / plotW()) * (view.e - view.s);
    if (y >= AXIS_H && y < AXIS_H + phaseH()) {
      const lane = Math.floor((y - AXIS_H - 2) / LANE_H);
      const p = (data.phases || []).find((q) => q.lane === lane && t >= q.ts_us && t <= q.ts_us + q.dur_us);
      return p && { title: p.name, rows: [['phase', ''], ['start', fmtTime(p.ts_us - full.s)], ['duration', fmtTime(p.dur_us)]] };
    }
    const r = layout.find((l) => y >= l.y && y < l.y + l.h);
    if (!r) return null;
    const tr = r.track;
    if (tr.kind === 'counter') {
      const c = counterAt(t, tr);
      return c && { title: tr.label, rows: tr.counter === 'busy'
        ? [['busy', fmtPct(c.v)], ['slice', `${fmtTime(c.from - full.s)} + ${fmtTime(c.w)}`], ['of', 'kernels, copies and memsets']]
        : [['allocated', FP.fmtMem(c.v)], ['at', fmtTime(t - full.s)], ['peak', FP.fmtMem(tr.max)]] };
    }
    const evs = tr.mode === 'buckets' ? tr.slices || [] : tr.events || [];
    if (tr.mode === 'buckets' && evs.length) { // a named slice under the pointer comes first
      const d = Math.floor((y - r.y - 2) / ROW);
      const ev = evs.find((q) => Math.min(q.depth || 0, MAX_DEPTH - 1) === d && t >= q.ts_us && t <= q.ts_us + q.dur_us);
      if (ev) return { title: ev.name, rows: [['duration', fmtTime(ev.dur_us)], ['start', fmtTime(ev.ts_us - full.s)], ['category', ev.cat || '—'],
        ['track', tr.label || tr.id], ['', 'click for all args and the launch flow']], ev, track: tr };
    }
    if (tr.mode === 'buckets') {
      const b = (tr.buckets || []).find((q) => t >= q.ts_us && t < q.ts_us + q.dur_us);
      if (b) return { title: b.top || '(idle)', rows: [['events', fmtInt(b.count)], ['busy', fmtPct(b.busy)],
        ['slice', `${fmtTime(b.ts_us - full.s)} + ${fmtTime(b.dur_us)}`], ['track', tr.label || tr.id]] };
    } else {
      const d = Math.floor((y - r.y - 2) / ROW);
      let best = null, bestDist = Infinity;
      for (const ev of tr.events || []) {
        if (Math.min(ev.depth || 0, MAX_DEPTH - 1) !== d) continue;
        const dist = t < ev.ts_us ? ev.ts_us - t : t > ev.ts_us + ev.dur_us ? t - ev.ts_us - ev.dur_us : 0;
        if (dist < bestDist) { bestDist = dist; best = ev; }
      }
      if (best && bestDist <= tol) {
        const rows = [['duration', fmtTime(best.dur_us)], ['start', fmtTime(best.ts_us - full.s)],
                      ['category', best.cat || '—'], ['track', tr.label || tr.id]];
        rows.push(['', 'click for all args and the launch flow']);
        return { title: best.name, rows, ev: best, track: tr };
      }
    }
    const g = tr.kind === 'gpu' && (data.gaps || []).find((q) => sameDevice(tr, q.device) && t >= q.ts_us && t <= q.ts_us + q.dur_us);
    if (g) return { title: 'GPU idle', rows: [['duration', fmtTime(g.dur_us)], ['start', fmtTime(g.ts_us - full.s)], ['device', String(g.device)]] };
    return null;
  }
  function showTip(e) {
    const rect = canvas.getBoundingClientRect();
    const x = e.clientX - rect.left, y = e.clientY - rect.top;
    const h = hit(x, y);
    if (!h) { tip.hidden = true; return; }
    tip.replaceChildren(el('div', {}, el('b', {}, h.title)),
      ...h.rows.slice(0, 14).map(([k, v]) => el('div', {}, el('span', { class: 'k' }, k + ': '), v)));
    tip.hidden = false;
    const tx = Math.min(x + 14, cssW - tip.offsetWidth - 4);
    tip.style.left = Math.max(0, tx) + 'px';
    tip.style.top = (y + 16 + tip.offsetHeight > cssH ? Math.max(0, y - tip.offsetHeight - 8) : y + 16) + 'px';
  }

  // ---- zoom and pan --------------------------------------------------------------------------
  function setView(s, e) {
    const minSpan = 0.5, fullSpan = full.e - full.s;
    let span = Math.min(Math.max(e - s, minSpan), fullSpan);
    if (s < full.s) s = full.s;
    if (s + span > full.e) s = full.e - span;
    view = { s, e: s + span };
    dirty = true;
    canvas.dataset.state = 'loading';
    showRange();
    draw();
    refetch();
  }
  function zoom(factor, atX) {
    const x = atX === undefined ? LABEL_W + plotW() / 2 : atX;
    const t = tOf(x), span = (view.e - view.s) * factor;
    const frac = (x - LABEL_W) / plotW();
    setView(t - frac * span, t - frac * span + span);
  }
  function pan(fraction) {
    const d = (view.e - view.s) * fraction;
    setView(view.s + d, view.e + d);
  }

  canvas.addEventListener('wheel', (e) => {
    e.preventDefault();
    const rect = canvas.getBoundingClientRect();
    const x = Math.max(LABEL_W, e.clientX - rect.left);
    if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) pan((e.deltaX || e.deltaY) / plotW());
    else zoom(Math.exp(Math.max(-1, Math.min(1, e.deltaY * 0.002))), x);
  }, { passive: false });

  // ---- select, flow, search ------------------------------------------------------------------
  const details = document.getElementById('details');
  const argRows = (o) => Object.entries(o || {}).map(([k, v]) => [k, typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)]);
  function eventLink(e, prefix) {
    return el('div', { class: 'flow' }, prefix, el('a', { href: '#', class: 'flow-link', dataset: { ref: e.ref },
      onclick: (ev) => { ev.preventDefault(); select({ ref: e.ref }, true); } }, FP.shortName(e.name, 60)),
    ` on ${e.track_label || e.track} at ${FP.fmtTimeAt(e.ts_us - full.s, 1)} (${fmtTime(e.dur_us)})`);
  }
  function showDetails() {
    const e = selected && selected.event;
    if (!e) { details.hidden = true; return; }
    details.replaceChildren(...[el('b', { class: 'ev-name', title: e.name }, e.name),
      FP.dl([['category', e.cat], ['track', e.track_label || e.track], ['start', FP.fmtTimeAt(e.ts_us - full.s, 1)],
        ['duration', fmtTime(e.dur_us)], ...(e.correlation !== null ? [['correlation', String(e.correlation)]] : [])], 'facts small'),
      selected.launched_by ? eventLink(selected.launched_by, 'Launched by ') : null,
      ...(selected.launches || []).map((k) => eventLink(k, 'Launches ')),
      el('div', { class: 'args' }, FP.dl(argRows(e.args), 'facts small args-dl'))].filter(Boolean));
    details.dataset.ref = e.ref;
    details.hidden = false;
    canvas.dataset.sel = e.ref;
  }
  // Selects an event (query: {ref} or {track, ts_us, dur_us}); reveal: move the view to it.
  async function select(query, reveal) {
    try {
      selected = await api(`${base}/events${qs(query)}`);
    } catch (_) { return; }
    if (reveal && selected.event) revealEvent(selected.event);
    showDetails();
    draw();
    writeAddress();
  }
  function revealEvent(e) {
    const span = view.e - view.s;
    if (e.ts_us >= view.s && e.ts_us + e.dur_us <= view.e) return;
    const w = Math.max(span, Math.min(full.e - full.s, e.dur_us * 3));
    setView(e.ts_us + e.dur_us / 2 - w / 2, e.ts_us + e.dur_us / 2 + w / 2);
  }
  // Name search in the server's order (start, track, stored order), from the current match or
  // from the view's start.
  const searchQ = document.getElementById('search-q'), searchStatus = document.getElementById('search-status');
  let lastMatch = null;
  async function search(dir) {
    const q = searchQ.value.trim();
    if (!q) return;
    const from = lastMatch && lastMatch.q === q ? { ref: lastMatch.ref } : { ts_us: dir === 'prev' ? view.e : view.s };
    let j;
    try { j = await api(`${base}/events${qs({ q, dir, ...from })}`); } catch (_) { return; }
    if (!j.event) { searchStatus.textContent = `no ${dir === 'prev' ? 'earlier' : 'later'} match`; return; }
    lastMatch = { q, ref: j.event.ref };
    selected = j;
    searchStatus.textContent = `${FP.shortName(j.event.name, 40)} at ${FP.fmtTimeAt(j.event.ts_us - full.s, 1)}`;
    searchStatus.dataset.ref = j.event.ref;
    revealEvent(j.event);
    showDetails();
    draw();
    writeAddress();
  }
  document.getElementById('search').addEventListener('submit', (e) => { e.preventDefault(); search('next'); });
  document.getElementById('search-prev').addEventListener('click', () => search('prev'));
  searchQ.addEventListener('input', () => { lastMatch = null; searchStatus.textContent = ''; });

  // The track whose bottom edge is under y (within 4 px): dragging it resizes the track.
  function edgeAt(y) { return layout.find((l) => Math.abs(y - (l.y + l.h)) <= 4); }

  let drag = null, resizing = null, downAt = null, areaDrag = null;
  canvas.addEventListener('mousedown', (e) => {
    if (e.button !== 0) return;
    const rect = canvas.getBoundingClientRect();
    if (e.shiftKey && e.clientX - rect.left >= LABEL_W) { // shift+drag: an area selection
      const t = tOf(e.clientX - rect.left);
      areaDrag = { t0: t };
      area = { s: t, e: t, pending: true };
      e.preventDefault();
      return;
    }
    const edge = edgeAt(e.clientY - rect.top);
    downAt = { x: e.clientX, y: e.clientY };
    if (edge) { resizing = { r: edge, y: e.clientY, h: edge.h }; return; }
    drag = { x: e.clientX, s: view.s, e: view.e };
    canvas.classList.add('dragging');
  });
  canvas.addEventListener('mouseup', (e) => {
    // a click (no drag): select the event under the pointer
    if (!downAt || Math.abs(e.clientX - downAt.x) > 3 || Math.abs(e.clientY - downAt.y) > 3 || resizing) return;
    const rect = canvas.getBoundingClientRect();
    const h = hit(e.clientX - rect.left, e.clientY - rect.top);
    if (h && h.ev) select({ track: h.track.id, ts_us: h.ev.ts_us, dur_us: h.ev.dur_us });
  });
  window.addEventListener('mousemove', (e) => {
    if (areaDrag) {
      const rect = canvas.getBoundingClientRect();
      const t = Math.max(view.s, Math.min(view.e, tOf(e.clientX - rect.left)));
      area = { s: Math.min(areaDrag.t0, t), e: Math.max(areaDrag.t0, t), pending: true };
      draw();
      return;
    }
    if (resizing) {
      heights.set(resizing.r.track.id, Math.max(ROW + 4, Math.round(resizing.h + e.clientY - resizing.y)));
      relayout(); draw();
      return;
    }
    if (!drag && e.target === canvas) {
      const rect = canvas.getBoundingClientRect();
      canvas.style.cursor = edgeAt(e.clientY - rect.top) ? 'row-resize' : '';
    }
    if (drag) {
      const dt = ((drag.x - e.clientX) / plotW()) * (drag.e - drag.s);
      setView(drag.s + dt, drag.e + dt);
      tip.hidden = true;
    } else if (e.target === canvas) showTip(e);
  });
  window.addEventListener('mouseup', () => {
    if (areaDrag) {
      areaDrag = null;
      if (area && area.e - area.s > 0) summarizeArea(area.s, area.e); else { area = null; draw(); }
    }
    drag = null; resizing = null; setTimeout(() => { downAt = null; }, 0); canvas.classList.remove('dragging'); });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
  canvas.addEventListener('keydown', (e) => {
    const k = e.key;
    if (k === '+' || k === '=' || k === 'w' || k === 'W') zoom(0.5);
    else if (k === '-' || k === '_' || k === 's' || k === 'S') zoom(2);
    else if (k === 'ArrowLeft' || k === 'a' || k === 'A') pan(-0.2);
    else if (k === 'ArrowRight' || k === 'd' || k === 'D') pan(0.2);
    else if (k === '0' || k === 'Home') setView(full.s, full.e);
    else return;
    e.preventDefault();
  });
  document.getElementById('zoom-in').addEventListener('click', () => zoom(0.5));
  document.getElementById('zoom-out').addEventListener('click', () => zoom(2));
  document.getElementById('pan-left').addEventListener('click', () => pan(-0.25));
  document.getElementById('pan-right').addEventListener('click', () => pan(0.25));
  document.getElementById('reset').addEventListener('click', () => setView(full.s, full.e));
  window.addEventListener('resize', FP.debounce(() => { relayout(); draw(); refetch(); }, 150));

  // ---- area selection: Perfetto's summary (GET /area) -----------------------------------------
  // Per track the events in the area and their time by name (each clipped to the area), and the
  // same by name over the tracks shown; the server reads the area's events, since a track
  // drawn as buckets has no events on the page to sum.
  const areaBox = document.getElementById('area');
  let areaSeq = 0;
  async function summarizeArea(s, e) {
    const my = ++areaSeq;
    area = { s, e, pending: true };
    draw();
    areaBox.hidden = false;
    areaBox.dataset.state = 'loading';
    document.getElementById('area-head').textContent = `Area ${FP.fmtTimeAt(s - full.s, (e - s) / 100)} – ${FP.fmtTimeAt(e - full.s, (e - s) / 100)} (${fmtTime(e - s)}): reading…`;
    let j;
    try {
      j = await api(`${base}/area${qs({ start_us: s, end_us: e, names: 10, tracks: shownTracks ? [...shownTracks].join(',') : null })}`);
    } catch (_) { if (my === areaSeq) areaBox.dataset.state = 'error'; return; }
    if (my !== areaSeq) return;
    area = { s, e };
    draw();
    const other = (o) => (o.other.count ? [{ name: `${fmtInt(o.other.names)} other name${o.other.names === 1 ? '' : 's'}`, count: o.other.count, total_us: o.other.total_us, mean_us: null, other: true }] : []);
    document.getElementById('area-head').textContent = `Area ${FP.fmtTimeAt(s - full.s, (e - s) / 100)} – ${FP.fmtTimeAt(e - full.s, (e - s) / 100)} ` +
      `(${fmtTime(e - s)}): ${fmtInt(j.count)} event${j.count === 1 ? '' : 's'} on ${fmtInt(j.tracks.length)} track${j.tracks.length === 1 ? '' : 's'}` +
      (j.tracks_omitted ? ` (and ${fmtInt(j.tracks_omitted)} more counted, not listed)` : '') + '. Time is each event\'s time inside the area, every nesting depth.';
    areaBox.dataset.count = String(j.count);
    areaBox.dataset.start = String(s);
    areaBox.dataset.end = String(e);
    FP.renderTable(document.getElementById('area-names'), [
      { key: 'name', label: 'Name', rowHeader: true, render: (n) => (n.other ? n.name : FP.nameEl(n.name)) },
      { key: 'count', label: 'Count', num: true, render: (n) => fmtInt(n.count) },
      { key: 'total_us', label: 'Time in area', num: true, render: (n) => fmtTime(n.total_us) },
      { key: 'share', label: 'Of the area', num: true, render: (n) => fmtPct(n.total_us / (e - s)) },
      { key: 'mean_us', label: 'Mean event', num: true, render: (n) => (n.mean_us === null ? '—' : fmtTime(n.mean_us)) },
    ], [...j.names, ...other(j)], null, null);
    FP.renderTable(document.getElementById('area-tracks'), [
      { key: 'track', label: 'Track', rowHeader: true, render: (t) => trackName(t) },
      { key: 'count', label: 'Events', num: true, render: (t) => fmtInt(t.count) },
      { key: 'top', label: 'Longest name', render: (t) => (t.names[0] ? FP.nameEl(t.names[0].name, FP.shortName(t.names[0].name, 50)) : '—') },
      { key: 'top_us', label: 'Its time', num: true, render: (t) => (t.names[0] ? fmtTime(t.names[0].total_us) : '—') },
      { key: 'top_n', label: 'Its count', num: true, render: (t) => (t.names[0] ? fmtInt(t.names[0].count) : '—') },
      { key: 'names', label: 'Names', num: true, render: (t) => fmtInt(t.names.length + t.other.names) },
    ], j.tracks, null, null);
    areaBox.dataset.state = 'ready';
  }
  document.getElementById('area-view').addEventListener('click', () => summarizeArea(view.s, view.e));
  document.getElementById('area-clear').addEventListener('click', () => { areaSeq++; area = null; areaBox.hidden = true; draw(); });

  // ---- start ---------------------------------------------------------------------------------
  (async () => {
    canvas.dataset.state = 'loading';
    try {
      const s = await api(base, { quiet: true });
      document.getElementById('title').textContent = `Timeline: ${FP.sessionName(s)}`;
      document.title = `Timeline: ${FP.sessionName(s)} · firstpass`;
    } catch (e) {
      // a missing session: one message, nothing else under it
      for (const x of document.querySelectorAll('main > :not(h1)')) x.hidden = true;
      document.getElementById('title').textContent = 'No such session';
      document.getElementById('main').append(el('p', { class: 'note', id: 'missing' }, e.status === 404
        ? `There is no session ${id}: it was deleted, or never uploaded. ` : `Session ${id} could not be read: ${e.message}. `,
      el('a', { href: 'index.html' }, 'Back to the sessions')));
      canvas.dataset.state = 'error';
      return;
    }
    api(`${base}/memory`, { quiet: true }).then((m) => {
      memData = (m.devices || []).filter((d) => (d.samples || []).length);
      if (data) { relayout(); draw(); }
      canvas.dataset.counters = counterTracks().map((t) => t.id).join(',');
    }, () => {});
    api(`${base}/gpu`, { quiet: true }).then((g) => {
      sessionGaps = (g.devices || []).map((d) => ({ device: d.device, count: (d.gaps || {}).count || 0 }));
      summarize();
    }, () => {});
    resize(cssH);
    try {
      const [j, b] = await Promise.all([api(`${base}/timeline${qs({ buckets: Math.round(plotW()) })}`), fetchBusy(null, null, Math.round(plotW()))]);
      data = normalize(j);
      busyData = b;
    } catch (_) { canvas.dataset.state = 'error'; return; }
    full = { s: data.start_us, e: data.end_us > data.start_us ? data.end_us : data.start_us + 1 };
    view = { ...full };
    relayout();
    showRange();
    drawNow();
    canvas.dataset.drawn = '1'; // first picture on screen (tests/browser/perf.test.mjs)
    summarize();
    if (await openFromAddress()) return; // the view moved: its own fetch marks it ready
    await fetchExact(seq);
    canvas.dataset.state = 'ready';
  })();

  // The view and the selection the address names (see the top of this file). Returns whether
  // the view moved off the whole session.
  async function openFromAddress() {
    const num = (k) => { const v = FP.param(k); return v !== null && v !== '' && isFinite(Number(v)) ? Number(v) : null; };
    const s = num('start'), e = num('end'), at = num('at');
    const sel = FP.param('sel'), find = FP.param('find'), dir = FP.param('dir') === 'prev' ? 'prev' : 'next';
    const windowed = s !== null && e !== null && e > s;
    let ev = null;
    try {
      if (sel) selected = await api(`${base}/events${qs({ ref: sel })}`, { quiet: true });
      else if (find) {
        const star = find.endsWith('*') && find.length > 1;
        const from = at !== null ? at : windowed ? s : null;
        const look = (d) => api(`${base}/events${qs({ q: star ? find.slice(0, -1) : find, match: star ? null : 'exact', dir: d, ts_us: from })}`);
        selected = null;
        if (windowed && at === null) {
          // the first in the window: one still running at its start (a step's ProfilerStep
          // range opens before the step's window, which starts where the last GPU work ended),
          // else the first starting inside it
          const r = await look('prev');
          if (r.event && r.event.ts_us + r.event.dur_us > s) selected = r;
        }
        if (!selected) selected = await look(dir);
        if (!selected.event || (windowed && at === null && selected.event.ts_us >= e)) {
          searchStatus.textContent = `no ${find} ${windowed ? 'in this window' : 'in this session'}`;
          searchStatus.dataset.missing = find;
          selected = null;
        }
      }
      ev = selected && selected.event;
    } catch (_) { selected = null; }
    if (ev) { searchQ.value = ev.name; showDetails(); }
    let moved = false;
    if (windowed) { setView(s, e); moved = true; } else if (ev) {
      // the event and as much again around it, so its neighbours show
      const w = Math.max(ev.dur_us * 2, 50);
      setView(ev.ts_us + ev.dur_us / 2 - w / 2, ev.ts_us + ev.dur_us / 2 + w / 2);
      moved = true;
    }
    draw();
    writeAddress();
    return moved;
  }
})();
