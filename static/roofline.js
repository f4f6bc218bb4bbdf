// roofline.js: the session page's efficiency section, from GET /efficiency (issue 49 item 6):
// the efficiency line (coverage first, the conventional MFU with its window, occupancy and the
// tensor-core share), a roofline (log-log arithmetic intensity against achieved TFLOP/s, the
// device's roofs labelled with their values, one dot per operator shape sized by its GPU time,
// each dot reachable by keyboard: its figures in words, its table row highlighted), and the
// table of the operators with the most GPU time, a filter and "show all". A CPU-only trace has
// no efficiency section. Every figure drawn is clamped to finite, bounded axes (issue 50
// finding 5: a figure of 1e296 once made the tick loop endless).
'use strict';
(() => {
  const { api, el, fmtTime, fmtPct, fmtInt } = FP;
  const id = FP.param('id');
  const section = document.getElementById('efficiency-section');
  const box = document.getElementById('roofline');
  const table = document.getElementById('effic');
  if (!id || !box || !table || !section) return;
  const NS = 'http://www.w3.org/2000/svg';
  const svg = (tag, attrs, ...kids) => {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, String(v));
    kids.forEach((c) => n.append(typeof c === 'string' ? document.createTextNode(c) : c));
    return n;
  };
  const fin = (x) => typeof x === 'number' && isFinite(x);
  const num = (x, d = 2) => (fin(x) ? Number(x).toFixed(d) : '—');
  const sig = (x) => (fin(x) ? String(Number(x.toPrecision(3))) : '—');
  const W = 720, H = 400, L = 70, R = 150, T = 16, B = 48;
  // The axes' bounds: whatever a trace says, a drawn value stays inside them.
  const X_MIN = 1e-3, X_MAX = 1e5, Y_MIN = 1e-6, Y_MAX = 1e5; // FLOP per byte; TFLOP/s
  const TOP = 20; // rows shown before "show all"
  const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));
  const log10 = (v) => Math.log10(v);
  const decade = (v, up) => Math.pow(10, up ? Math.ceil(log10(v)) : Math.floor(log10(v)));
  const STATUS = { judged: null, in_doubt: 'in doubt', not_judged: 'not judged', unknown: 'unknown', upper_bound: 'upper bound', impossible: 'impossible' };
  const COLORS = { compute: '#1f6feb', memory: '#d97706', latency: '#8250df', none: '#8c959f' };
  const PEAK_NAMES = { fp32: 'FP32', tf32_tensor: 'TF32 tensor', fp32_matrix: 'FP32 matrix', fp16_tensor: 'FP16 tensor',
    bf16_tensor: 'BF16 tensor', fp8_tensor: 'FP8 tensor' };
  const boundWord = (o) => o.bound || STATUS[o.status] || 'unknown';

  // The device's roofs: distinct peaks, one line each, named by every precision that shares it.
  function roofsOf(dev) {
    const byValue = new Map();
    for (const [k, v] of Object.entries(dev?.peaks || {})) {
      if (!fin(v) || v <= 0) continue;
      const t = v / 1e12;
      byValue.set(t, [...(byValue.get(t) || []), PEAK_NAMES[k] || k]);
    }
    return [...byValue.entries()].sort((a, b) => a[0] - b[0]).map(([t, names]) => ({ tflops: t, name: names.join(' / ') }));
  }

  // One sentence that says what the picture shows, then the efficiency line.
  function summaryLine(doc) {
    const s = doc.session || {}, dev = doc.device;
    const parts = [];
    parts.push(`Modelled: ${fmtPct(s.coverage)} of the GPU time`);
    if (fin(s.copies_us) && s.copies_us > 0 && fin(s.gpu_us) && s.gpu_us > 0) parts.push(`copies and fills ${fmtPct(s.copies_us / s.gpu_us)} (not judged)`);
    for (const u of (s.unmodelled || []).slice(0, 3)) parts.push(`unknown ${fmtPct(u.fraction)}: ${u.reason}${u.top && u.top !== '(none)' ? ` (most: ${u.top})` : ''}`);
    let line = parts.join('; ') + '. ';
    const pk = s.mfu_peak, w = s.mfu_window;
    line += fin(s.mfu) ? `MFU ${fmtPct(s.mfu, 2)} of one ${pk ? `${pk.dtype} peak (${PEAK_NAMES[pk.unit] || pk.unit}, ${sig(pk.flops_per_s / 1e12)} TFLOP/s)` : 'peak'}` +
      (w ? ` over ${fmtTime(w.seconds * 1e6)} × ${w.devices} GPU${w.devices === 1 ? '' : 's'} (${w.calls})` : '') : `MFU — (${s.mfu_reason || 'unknown'})`;
    line += `, MBU ${fmtPct(s.mbu, 1)}. GPU busy ${fmtPct(s.gpu_utilization)}, SM efficiency ${fmtPct(s.sm_efficiency)}, ` +
      `occupancy ${fmtPct(s.achieved_occupancy)}, tensor cores ${fmtPct(s.tensor_core_fraction)} of kernel time.`;
    if (fin(s.above_roof_us) && fin(s.judged_us) && s.judged_us > 0)
      line += ` The judged calls take ${fmtTime(s.judged_us)}; at the best roofs they would take ${fmtTime(s.best_roof_us)} (${fmtTime(s.above_roof_us)} above).`;
    line += dev ? ` Device: ${dev.label || dev.name}${dev.row ? ` (${dev.table === 'devices_file' ? 'the --devices file' : 'built-in table'}: ${dev.source || dev.row})` : ''}.`
      : ` Device unknown: ${doc.device_reason || 'not in the table'}.`;
    return line;
  }

  let rows = [], shown = [], showAll = false, filter = '', highlighted = null;

  function highlight(i) {
    for (const tr of table.querySelectorAll('tbody tr.hl')) { tr.classList.remove('hl'); tr.style.background = ''; }
    highlighted = i;
    const o = rows[i];
    const detail = document.getElementById('roofline-detail');
    if (!o) { if (detail) detail.textContent = ''; return; }
    if (detail) detail.textContent = dotText(o);
    let tr = table.querySelector(`tbody tr[data-i="${i}"]`);
    if (!tr && !showAll) { showAll = true; renderRows(); tr = table.querySelector(`tbody tr[data-i="${i}"]`); }
    if (tr) { tr.classList.add('hl'); tr.style.background = '#fff8c5'; }
  }

  function dotText(o) {
    return `${o.name} ${o.shape || ''}: ${o.dtype || '?'} on ${o.unit || o.precision_class || 'unknown units'}, ${num(o.tflops)} TFLOP/s, ` +
      `${num(o.gbps, 1)} GB/s, ${num(o.intensity)} FLOP/byte, ${fmtTime(o.gpu_us)} on the GPU in ${fmtInt(o.calls)} calls; ` +
      (o.bound ? `${o.bound}-bound at ${fmtPct(o.peak_fraction)} of its roof` : `${boundWord(o)}: ${o.bound_reason || ''}`) +
      (fin(o.above_roof_us) ? `; ${fmtTime(o.above_roof_us)} above the best roof (${o.best_unit})` : '');
  }

  function draw(doc) {
    const dev = doc.device, bw = dev && fin(dev.bandwidth) && dev.bandwidth > 0 ? dev.bandwidth : 0;
    const roofs = dev && dev.row ? roofsOf(dev) : [];
    const pts = rows.map((o, i) => ({ o, i })).filter(({ o }) => fin(o.intensity) && o.intensity > 0 && fin(o.tflops) && o.tflops > 0);
    const explain = document.getElementById('effic-explain');
    if (explain) explain.textContent = 'Each dot is one operator shape: across, the FLOPs it does per byte it must move; up, the TFLOP/s it achieved; ' +
      'its area, its GPU time. The lines are the roofs: the slope is the memory bandwidth, each flat line a compute peak. A dot near a roof ' +
      'runs near that limit; one far below has room to gain, or a figure in doubt (its row says). Tab to a dot for its figures.';
    if (!pts.length) {
      box.replaceChildren(el('p', { class: 'muted small' }, 'No operator has known FLOPs and bytes, so there is nothing to place on a roofline' +
        (doc.device ? '.' : ` (and no roof: ${doc.device_reason || 'the device is unknown'}).`)));
      return;
    }
    const xs = pts.map(({ o }) => clamp(o.intensity, X_MIN, X_MAX)), ys = pts.map(({ o }) => clamp(o.tflops, Y_MIN, Y_MAX));
    const roofT = roofs.map((r) => clamp(r.tflops, Y_MIN, Y_MAX));
    const x0 = clamp(decade(Math.min(0.1, ...xs), false), X_MIN, X_MAX), x1 = clamp(decade(Math.max(1000, ...xs), true), X_MIN, X_MAX);
    const y0 = clamp(decade(Math.min(...ys, ...roofT) / 10, false), Y_MIN, Y_MAX);
    const y1 = clamp(decade(Math.max(...ys, ...roofT) * 1.5, true), Y_MIN, Y_MAX);
    const px = (x) => L + (log10(clamp(x, x0, x1)) - log10(x0)) / Math.max(1e-9, log10(x1) - log10(x0)) * (W - L - R);
    const py = (y) => H - B - (log10(clamp(y, y0, y1)) - log10(y0)) / Math.max(1e-9, log10(y1) - log10(y0)) * (H - T - B);
    const g = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'group',
      'aria-label': 'Roofline: achieved TFLOP/s against arithmetic intensity, one dot per operator shape' });
    g.append(svg('rect', { x: L, y: T, width: W - L - R, height: H - T - B, fill: 'none', stroke: '#999' }));
    // ticks: one a decade, at most 12 (the bounds above keep it so)
    for (let e = Math.round(log10(x0)), i = 0; e <= Math.round(log10(x1)) && i < 12; e++, i++)
      g.append(svg('text', { class: 'tick-x', x: px(10 ** e), y: H - B + 16, 'text-anchor': 'middle', 'font-size': 10 }, sig(10 ** e)));
    for (let e = Math.round(log10(y0)), i = 0; e <= Math.round(log10(y1)) && i < 12; e++, i++)
      g.append(svg('text', { class: 'tick-y', x: L - 4, y: py(10 ** e) + 3, 'text-anchor': 'end', 'font-size': 10 }, sig(10 ** e)));
    g.append(svg('text', { class: 'axis-title', 'data-axis': 'x', x: (W - R + L) / 2, y: H - 8, 'text-anchor': 'middle', 'font-size': 12 },
      'Arithmetic intensity (FLOP per byte)'));
    g.append(svg('text', { class: 'axis-title', 'data-axis': 'y', x: 14, y: (H - B + T) / 2, 'text-anchor': 'middle', 'font-size': 12,
      transform: `rotate(-90 14 ${(H - B + T) / 2})` }, 'Achieved TFLOP/s'));
    // the roofs: each peak flat, the bandwidth's slope up to it, labelled with its value
    if (bw > 0 && roofs.length) {
      for (const r of roofs) {
        const ridge = clamp(r.tflops * 1e12 / bw, x0, x1);
        g.append(svg('polyline', { class: 'roof', 'data-peak': r.name, 'data-value': r.tflops * 1e12, fill: 'none', stroke: '#cf222e', 'stroke-width': 1.5,
          points: `${px(x0)},${py(x0 * bw / 1e12)} ${px(ridge)},${py(r.tflops)} ${px(x1)},${py(r.tflops)}` }));
        g.append(svg('text', { class: 'roof-label', x: px(x1) + 4, y: py(r.tflops) + 4, 'font-size': 11, fill: '#cf222e' },
          `${r.name} ${sig(r.tflops)} TFLOP/s`));
      }
      const mx = clamp(x0 * 1.3, x0, x1), my = clamp(mx * bw / 1e12, y0, y1);
      g.append(svg('text', { class: 'roof-label', 'data-bandwidth': bw, x: px(mx) + 2, y: py(my) - 8, 'font-size': 11, fill: '#cf222e' },
        `DRAM ${sig(bw / 1e12)} TB/s`));
    }
    const tmax = Math.max(...pts.map(({ o }) => o.gpu_us)) || 1;
    for (const { o, i } of pts) {
      const r = 3 + 12 * Math.sqrt(Math.max(0, o.gpu_us) / tmax);
      const color = COLORS[o.bound === 'compute' || o.bound === 'memory' || o.bound === 'latency' ? o.bound : 'none'];
      const c = svg('circle', { class: 'op', cx: px(o.intensity), cy: py(o.tflops), r, fill: color, 'fill-opacity': 0.55, stroke: color,
        tabindex: 0, role: 'img', 'aria-label': dotText(o), 'data-i': i, 'data-name': o.name, 'data-tflops': o.tflops, 'data-intensity': o.intensity },
      svg('title', {}, dotText(o)));
      c.addEventListener('focus', () => highlight(i));
      c.addEventListener('mouseenter', () => highlight(i));
      c.addEventListener('click', () => highlight(i));
      g.append(c);
    }
    const legend = el('div', { class: 'legend', id: 'roofline-legend' },
      ...[['compute', 'compute-bound'], ['memory', 'memory-bound'], ['latency', 'latency-bound (short kernels, tiny grids)'],
        ['none', 'no verdict (the table says why)']].map(([k, t]) => el('span', { dataset: { key: k } }, el('i', { style: `background:${COLORS[k]}` }), t)),
      el('span', {}, el('i', { style: 'background:#cf222e' }), 'roof: bandwidth slope, compute peaks'),
      el('span', {}, 'dot area: GPU time'));
    const note = bw > 0 && roofs.length ? null : el('p', { class: 'muted small', id: 'roofline-noroof' },
      `No roofs: ${dev && !dev.row ? 'the device is not in the table of peaks (only its bandwidth is known)' : doc.device_reason || 'the device is unknown'}; the dots are the achieved figures alone.`);
    box.replaceChildren(...[note, g, legend, el('p', { class: 'small', id: 'roofline-detail', 'aria-live': 'polite' })].filter(Boolean));
  }

  const cols = [
    { key: 'name', label: 'Operator', rowHeader: true, render: (o) => FP.nameEl(o.name) },
    // into the timeline: the operator's first call, selected (issue 51, item 3)
    { key: 'tl', label: 'Trace', csv: false, sortable: false, render: (o) => el('a', { class: 'tl-link', href: FP.timelineHref(id, { find: o.name }), title: 'Its first call on the timeline, selected' }, 'timeline') },
    { key: 'shape', label: 'Shape', render: (o) => FP.nameEl(o.shape || '—', FP.shortName(o.shape || '—', 40)) },
    { key: 'dtype', label: 'Dtype' },
    { key: 'unit', label: 'Unit', render: (o) => o.unit || o.precision_class || '—' },
    { key: 'calls', label: 'Calls', num: true, render: (o) => fmtInt(o.calls) },
    { key: 'gpu_us', label: 'GPU time', num: true, render: (o) => fmtTime(o.gpu_us) },
    { key: 'gpu_us_median', label: 'Per call (min / median / max)', num: true,
      render: (o) => `${fmtTime(o.gpu_us_min)} / ${fmtTime(o.gpu_us_median)} / ${fmtTime(o.gpu_us_max)}` },
    { key: 'tflops', label: 'TFLOP/s', num: true, render: (o) => num(o.tflops) },
    { key: 'gbps', label: 'GB/s', num: true, render: (o) => num(o.gbps, 1) },
    { key: 'intensity', label: 'FLOP/byte', num: true, render: (o) => num(o.intensity) },
    { key: 'bound', label: 'Bound', value: boundWord, render: boundWord },
    { key: 'peak_fraction', label: '% of roof', num: true, render: (o) => fmtPct(o.peak_fraction) },
    { key: 'above_roof_us', label: 'Above best roof', num: true, render: (o) => (fin(o.above_roof_us) ? `${fmtTime(o.above_roof_us)} (${o.best_unit})` : '—') },
    // wide enough to read in a line or two (the server's CSP allows styles set through the CSSOM)
    { key: 'bound_reason', label: 'Why no verdict', render: (o) => el('span', { class: 'reason', style: 'display:inline-block;min-width:26em;max-width:44em' }, o.bound_reason || '') },
  ];

  let st = { key: 'gpu_us', dir: 'descending', clientSort: true };
  function renderRows() {
    const f = filter.toLowerCase();
    const matching = rows.map((o, i) => ({ o, i })).filter(({ o }) => !f || o.name.toLowerCase().includes(f) || (o.shape || '').toLowerCase().includes(f));
    const sorted = FP.sortRows(matching.map(({ o }) => o), cols.find((c) => c.key === st.key), st.dir);
    const idx = new Map(matching.map(({ o, i }) => [o, i]));
    shown = showAll || f ? sorted : sorted.slice(0, TOP);
    FP.renderTable(table, cols, shown, { ...st, clientSort: false }, (key) => { st = FP.nextSort(st, key, cols); renderRows(); });
    table.querySelectorAll('tbody tr').forEach((tr, k) => { if (shown[k]) tr.dataset.i = idx.get(shown[k]); });
    const more = document.getElementById('effic-more'), count = document.getElementById('effic-count');
    if (count) count.textContent = `${shown.length} of ${rows.length} rows` + (doc0?.operators_omitted?.rows ? ` (${fmtInt(doc0.operators_omitted.rows)} smaller rows not listed)` : '');
    if (more) { more.hidden = showAll || !!f || rows.length <= TOP; more.textContent = `Show all ${rows.length}`; }
    if (highlighted !== null) {
      const tr = table.querySelector(`tbody tr[data-i="${highlighted}"]`);
      if (tr) { tr.classList.add('hl'); tr.style.background = '#fff8c5'; }
    }
  }

  let doc0 = null;
  (async () => {
    const doc = await api(`/api/v1/sessions/${encodeURIComponent(id)}/efficiency`, { quiet: true }).catch(() => null);
    if (!doc) return;
    doc0 = doc;
    const s = doc.session || {};
    rows = doc.operators || [];
    // a CPU-only trace: no GPU time, no device: the section has nothing to say; a session
    // stored before the figures existed (no gpu_us at all) says so
    if (s.gpu_us === undefined) {
      document.getElementById('effic-summary').textContent = doc.device_reason || 'No efficiency figures for this session.';
      return;
    }
    if (!(fin(s.gpu_us) && s.gpu_us > 0) && !rows.length && !doc.device) { section.hidden = true; return; }
    const sum = document.getElementById('effic-summary');
    if (sum) sum.textContent = summaryLine(doc);
    draw(doc);
    const input = document.getElementById('effic-filter'), more = document.getElementById('effic-more');
    document.getElementById('effic-controls')?.addEventListener('submit', (e) => e.preventDefault());
    if (input) input.addEventListener('input', FP.debounce(() => { filter = input.value.trim(); renderRows(); }, 150));
    if (more) more.addEventListener('click', () => { showAll = true; renderRows(); });
    renderRows();
  })();
})();
