// roofline.js: the session page's efficiency section: a roofline (log-log arithmetic
// intensity against achieved FLOP/s, the device's roofs, one point per operator sized by its
// GPU time, its figures on hover) and the efficiency table, from GET /efficiency.
'use strict';
(() => {
  const { api, el, fmtTime, fmtPct, fmtInt, renderTable, nextSort } = FP;
  const id = FP.param('id');
  const box = document.getElementById('roofline');
  const table = document.getElementById('effic');
  if (!id || !box || !table) return;
  const NS = 'http://www.w3.org/2000/svg';
  const svg = (tag, attrs, ...kids) => {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, String(v));
    kids.forEach((c) => n.append(c));
    return n;
  };
  const num = (x, d = 2) => (x === null || x === undefined ? '—' : Number(x).toFixed(d));
  const W = 640, H = 360, L = 60, R = 20, T = 16, B = 40;

  function draw(doc) {
    const dev = doc.device;
    const pts = (doc.operators || []).filter((o) => o.intensity > 0 && o.tflops > 0);
    const peaks = dev && dev.peaks ? Object.entries(dev.peaks).filter(([, v]) => v > 0) : [];
    const bw = dev ? dev.bandwidth : 0;
    const ys = pts.map((o) => o.tflops * 1e12).concat(peaks.map(([, v]) => v));
    const xs = pts.map((o) => o.intensity);
    if (!ys.length) { box.replaceChildren(el('p', { class: 'muted small' }, doc.device_reason || 'No operator with known FLOPs and bytes.')); return; }
    const x0 = Math.pow(10, Math.floor(Math.log10(Math.min(0.01, ...xs)))), x1 = Math.pow(10, Math.ceil(Math.log10(Math.max(1000, ...xs))));
    const y0 = Math.pow(10, Math.floor(Math.log10(Math.min(...ys) / 10))), y1 = Math.pow(10, Math.ceil(Math.log10(Math.max(...ys) * 1.5)));
    const px = (x) => L + (Math.log10(x) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0)) * (W - L - R);
    const py = (y) => H - B - (Math.log10(y) - Math.log10(y0)) / (Math.log10(y1) - Math.log10(y0)) * (H - T - B);
    const g = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': 'Roofline: achieved FLOP/s against arithmetic intensity' });
    g.append(svg('rect', { x: L, y: T, width: W - L - R, height: H - T - B, fill: 'none', stroke: '#999' }));
    for (let x = x0; x <= x1; x *= 10) g.append(svg('text', { x: px(x), y: H - B + 16, 'text-anchor': 'middle', 'font-size': 10 }, document.createTextNode(String(x))));
    for (let y = y0; y <= y1; y *= 10) g.append(svg('text', { x: L - 4, y: py(y) + 3, 'text-anchor': 'end', 'font-size': 10 }, document.createTextNode((y / 1e12) + 'T')));
    g.append(svg('text', { x: (W + L) / 2, y: H - 6, 'text-anchor': 'middle', 'font-size': 11 }, document.createTextNode('FLOP per byte')));
    // the roofs: each peak flat, the bandwidth's slope up to it
    if (bw > 0) {
      for (const [name, peak] of peaks) {
        const ridge = peak / bw;
        g.append(svg('polyline', { class: 'roof', 'data-peak': name, 'data-value': peak, fill: 'none', stroke: '#c44', 'stroke-width': 1.5,
          points: `${px(x0)},${py(Math.max(y0, x0 * bw))} ${px(ridge)},${py(peak)} ${px(x1)},${py(peak)}` },
          svg('title', {}, document.createTextNode(`${name}: ${num(peak / 1e12, 1)} TFLOP/s, ridge ${num(ridge, 1)} FLOP/byte`))));
      }
    }
    const tmax = Math.max(...pts.map((o) => o.gpu_us));
    for (const o of pts) {
      const r = 3 + 12 * Math.sqrt(o.gpu_us / tmax);
      const tip = `${o.name} ${o.shape || ''}\n${o.dtype || ''} ${o.precision_class || ''}: ${num(o.tflops)} TFLOP/s, ${num(o.gbps, 1)} GB/s, ` +
        `${num(o.intensity)} FLOP/byte, ${fmtTime(o.gpu_us)} on the GPU\n${o.bound || 'unknown'}` +
        (o.peak_fraction !== null ? ` at ${fmtPct(o.peak_fraction)} of the ${o.peak_used || 'memory'} roof` : '') + (o.peak_note ? `\n${o.peak_note}` : '');
      g.append(svg('circle', { class: 'op', cx: px(o.intensity), cy: py(o.tflops * 1e12), r, fill: '#3a7bd5', 'fill-opacity': 0.5,
        stroke: '#1d4f91', 'data-name': o.name, 'data-tflops': o.tflops, 'data-intensity': o.intensity }, svg('title', {}, document.createTextNode(tip))));
    }
    box.replaceChildren(g);
  }

  const cols = [
    { key: 'name', label: 'Operator', rowHeader: true, render: (o) => FP.nameEl(o.name) },
    { key: 'shape', label: 'Shape' },
    { key: 'dtype', label: 'Dtype' },
    { key: 'precision_class', label: 'Class' },
    { key: 'calls', label: 'Calls', num: true, render: (o) => fmtInt(o.calls) },
    { key: 'gpu_us', label: 'GPU time', num: true, render: (o) => fmtTime(o.gpu_us) },
    { key: 'tflops', label: 'TFLOP/s', num: true, render: (o) => num(o.tflops) },
    { key: 'gbps', label: 'GB/s', num: true, render: (o) => num(o.gbps, 1) },
    { key: 'intensity', label: 'FLOP/byte', num: true, render: (o) => num(o.intensity) },
    { key: 'bound', label: 'Bound', render: (o) => o.bound || (o.peak_note ? 'assumption wrong' : '—') },
    { key: 'peak_fraction', label: '% of roof', num: true, render: (o) => (o.peak_fraction === null ? '—' : fmtPct(o.peak_fraction)) },
  ];

  (async () => {
    const doc = await api(`/api/v1/sessions/${encodeURIComponent(id)}/efficiency`, { quiet: true }).catch(() => null);
    if (!doc) return;
    const s = doc.session || {};
    const sum = document.getElementById('effic-summary');
    if (sum) sum.textContent = `GPU utilization ${s.gpu_utilization === null ? '—' : fmtPct(s.gpu_utilization)} (busy ÷ the steps' time), ` +
      `SM efficiency ${s.sm_efficiency === null ? '—' : fmtPct(s.sm_efficiency)}, MFU ${s.mfu === null ? '—' : fmtPct(s.mfu)}, ` +
      `MBU ${s.mbu === null ? '—' : fmtPct(s.mbu)} over ${s.coverage === null ? '—' : fmtPct(s.coverage)} of the GPU time` +
      (doc.device ? ` (${doc.device.label || doc.device.name})` : ` (device unknown: ${doc.device_reason})`);
    draw(doc);
    let st = { key: 'gpu_us', dir: 'descending', clientSort: true };
    const rows = doc.operators || [];
    const redraw = () => renderTable(table, cols, rows, st, (key) => { st = nextSort(st, key, cols); redraw(); });
    redraw();
  })();
})();
