// trend.js: session.html's trend chart: one operator of this session in the last 30 sessions
// with the same labels (GET /api/v1/trends), as an inline SVG line chart. Self-contained: it
// reads the session and its top operators itself (through FP.once, so that a reply session.js
// also reads is fetched once), and session.js does not depend on it.
'use strict';
(() => {
  const { api, el, qs, fmtTime, fmtInt } = FP;
  const id = FP.param('id');
  if (!id) return;
  const LAST = 30;
  const SVG = 'http://www.w3.org/2000/svg';
  // Annotation rows are ranges (ProfilerStep#N, record_function), not operators to follow.
  const SKIP_KINDS = new Set(['user_annotation', 'gpu_user_annotation']);
  const opSel = document.getElementById('trend-op');
  const metricSel = document.getElementById('trend-metric');
  const chart = document.getElementById('trend-chart');
  const summary = document.getElementById('trend-summary');
  let labels = {};
  let seq = 0;

  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) e.setAttribute(k, v);
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }
  // Session metrics (no operator): GPU busy is tb-profiler's utilization, the header's figure;
  // busy of the wall is named by what it divides by (issue 51, item 1).
  const SESSION_METRICS = new Set(['gpu_utilization', 'busy_fraction_of_wall']);
  const fmt = (metric, v) => (v === null || v === undefined ? (SESSION_METRICS.has(metric) ? 'unknown' : 'no such operator')
    : SESSION_METRICS.has(metric) ? FP.fmtPct(v) : metric === 'calls' ? fmtInt(v) : fmtTime(v));

  // Points left to right, oldest first; a session without the operator leaves a gap.
  function draw(points, metric) {
    const W = 640, H = 180, L = 78, R = 16, T = 12, B = 28;
    const vals = points.map((p) => p.value).filter((v) => v !== null);
    const max = Math.max(...vals, 0) || 1;
    const x = (i) => L + (points.length > 1 ? (i * (W - L - R)) / (points.length - 1) : (W - L - R) / 2);
    const y = (v) => T + (H - T - B) * (1 - v / max);
    const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': 'trend-summary' },
      svg('line', { class: 'axis', x1: L, y1: y(0), x2: W - R, y2: y(0) }),
      svg('line', { class: 'axis', x1: L, y1: T, x2: L, y2: y(0) }),
      svg('text', { x: L - 6, y: y(max) + 4, 'text-anchor': 'end' }, fmt(metric, max)),
      svg('text', { x: L - 6, y: y(0) + 4, 'text-anchor': 'end' }, fmt(metric, 0)));
    let run = [];
    const flush = () => {
      if (run.length > 1) root.append(svg('polyline', { class: 'line', points: run.join(' ') }));
      run = [];
    };
    points.forEach((p, i) => {
      if (p.value === null) { flush(); return; }
      run.push(`${x(i).toFixed(1)},${y(p.value).toFixed(1)}`);
    });
    flush();
    points.forEach((p, i) => {
      if (p.value === null) return;
      const current = String(p.session_id) === String(id);
      const dot = svg('circle', { cx: x(i).toFixed(1), cy: y(p.value).toFixed(1), r: current ? 5 : 3.5, class: current ? 'current' : null,
                                  'data-session-id': p.session_id, 'data-value': p.value },
        svg('title', {}, `session ${p.session_id} (${p.name}), ${FP.fmtDate(p.created_at)}: ${fmt(metric, p.value)}`));
      root.append(current ? dot : svg('a', { href: `session.html?id=${encodeURIComponent(p.session_id)}` }, dot));
    });
    // the first and the last session under the axis; one label when there is one point
    if (points.length === 1) root.append(svg('text', { x: x(0), y: H - 8, 'text-anchor': 'middle' }, `session ${points[0].session_id}`));
    else if (points.length) {
      root.append(svg('text', { x: x(0), y: H - 8, 'text-anchor': 'start' }, `session ${points[0].session_id}`),
        svg('text', { x: x(points.length - 1), y: H - 8, 'text-anchor': 'end' }, `session ${points[points.length - 1].session_id}`));
    }
    chart.replaceChildren(root);
  }

  async function load() {
    const my = ++seq;
    const op = opSel.value, metric = metricSel.value;
    if (!op) return;
    const session = SESSION_METRICS.has(metric);
    const q = qs({ label: Object.entries(labels).map(([k, v]) => `${k}:${v}`), metric, operator: session ? null : op, limit: LAST });
    const t = await api(`/api/v1/trends${q}`);
    if (my !== seq) return; // a newer choice is on its way
    const pts = t.points || [];
    draw(pts, metric);
    const have = pts.filter((p) => p.value !== null).map((p) => p.value);
    const mine = pts.find((p) => String(p.session_id) === String(id));
    const lab = Object.keys(labels).length ? `labelled ${Object.entries(labels).map(([k, v]) => `${k}:${v}`).join(' ')}` : 'of all sessions';
    summary.textContent = `${session ? 'The session' : op}, ${metricSel.selectedOptions[0].textContent}, in the last ${pts.length} sessions ${lab}` +
      (mine ? `: this session ${fmt(metric, mine.value)}` : '') +
      (have.length ? `; min ${fmt(metric, Math.min(...have))}, max ${fmt(metric, Math.max(...have))}` : '') +
      (pts.length - have.length ? `; ${pts.length - have.length} without ${session ? 'the figure (stored before it was kept)' : 'this operator'} (gaps).` : '.');
    opSel.disabled = session;
  }

  async function init() {
    // quiet: a missing session is session.js's one message, not a second one in the banner
    // FP.once: the same replies session.js reads (one request each for the page); the
    // operators are every row in the table's default order, of which the first ones are used
    const s = await FP.once(`/api/v1/sessions/${encodeURIComponent(id)}`, { quiet: true });
    const by = FP.cpuOnly(s) ? 'cpu_time_total' : 'cuda_time_total';
    const ops = await FP.once(`/api/v1/sessions/${encodeURIComponent(id)}/operators${qs({ sort: by, limit: 10000 })}`, { quiet: true });
    labels = s.labels || {};
    // a CPU-only trace: CPU total and calls only; AMD says GPU (app.js decides both)
    if (FP.cpuOnly(s)) {
      for (const o of [...metricSel.options]) if (/cuda|gpu|busy/.test(o.value)) o.remove();
      metricSel.value = 'cpu_time_total';
    } else {
      for (const o of metricSel.options) o.textContent = o.textContent.replace('CUDA', FP.gpuWord(s));
    }
    const names = [];
    for (const r of (ops.operators || []).slice(0, 25)) if (!SKIP_KINDS.has(r.kind) && !names.includes(r.name) && names.length < 10) names.push(r.name);
    opSel.replaceChildren(...names.map((n) => el('option', { value: n, title: n }, FP.shortName(n, 60))));
    if (!names.length) { summary.textContent = 'No operators in this session.'; return; }
    await load();
  }
  const reload = () => load().catch(() => {});
  opSel.addEventListener('change', reload);
  metricSel.addEventListener('change', reload);
  document.getElementById('trend-controls').addEventListener('submit', (e) => e.preventDefault());
  init().catch(() => {});
})();
