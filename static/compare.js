// compare.js: two sessions side by side (compare.html?base=A&head=B).
// Deltas are head − base: negative time is faster (green), positive slower (red); the sign
// and an arrow carry the same meaning for readers who do not see the colours.
'use strict';
(() => {
  const { api, el, qs, fmtTime, fmtPct, fmtInt, fmtSigned, renderTable, nextSort, dl } = FP;
  const baseSel = document.getElementById('base');
  const headSel = document.getElementById('head');
  const nameIn = document.getElementById('cmp-name');
  const limitSel = document.getElementById('cmp-limit');
  let result = null;

  const cls = (d) => (!isFinite(d) || d === 0 ? null : d < 0 ? 'faster' : 'slower');
  const arrow = (d) => (!isFinite(d) || d === 0 ? '' : d < 0 ? ' ▼' : ' ▲');
  const dTime = (d) => (d === null || d === undefined ? '—' : fmtSigned(d, fmtTime) + arrow(d));
  const dRel = (r) => (r === null || r === undefined || !isFinite(r) ? '—' : fmtSigned(r, (x) => fmtPct(x)));
  const g = (o, k) => (o ? o[k] : null);
  // "CUDA" for NVIDIA sessions, "GPU" when either side is AMD (ROCm): set per comparison.
  let word = 'CUDA';

  async function fillSelects() {
    const j = await api('/api/v1/sessions' + qs({ limit: 200 }));
    const opts = (sel) => {
      sel.replaceChildren(el('option', { value: '' }, '— pick a session —'),
        ...(j.sessions || []).map((s) => el('option', { value: String(s.id) },
          `#${s.id} ${FP.sessionName(s)}${s.hardware ? ' · ' + s.hardware : ''}`)));
    };
    opts(baseSel); opts(headSel);
    baseSel.value = FP.param('base') || '';
    headSel.value = FP.param('head') || '';
  }

  const opCols = [
    { key: 'name', label: 'Operator', rowHeader: true, value: (o) => o.name, render: (o) => FP.nameEl(o.name) },
    { key: 'kind', label: 'Kind', value: (o) => o.kind },
    { key: 'status', label: 'Status', value: (o) => o.status, cls: (o) => `status-${o.status}` },
    { key: 'base_calls', label: 'Calls (base)', num: true, value: (o) => g(o.base, 'calls'), render: (o) => fmtInt(g(o.base, 'calls')) },
    { key: 'head_calls', label: 'Calls (head)', num: true, value: (o) => g(o.head, 'calls'), render: (o) => fmtInt(g(o.head, 'calls')) },
    { key: 'base_cuda', get label() { return `${word} total (base)`; }, num: true, value: (o) => g(o.base, 'cuda_time_total_us'), render: (o) => fmtTime(g(o.base, 'cuda_time_total_us')) },
    { key: 'head_cuda', get label() { return `${word} total (head)`; }, num: true, value: (o) => g(o.head, 'cuda_time_total_us'), render: (o) => fmtTime(g(o.head, 'cuda_time_total_us')) },
    { key: 'd_cuda', get label() { return `Δ ${word}`; }, num: true, value: (o) => Math.abs(g(o.delta, 'cuda_time_total_us') || 0),
      render: (o) => dTime(g(o.delta, 'cuda_time_total_us')), cls: (o) => `delta ${cls(g(o.delta, 'cuda_time_total_us')) || ''}` },
    { key: 'r_cuda', get label() { return `Δ ${word} %`; }, num: true, value: (o) => g(o.relative, 'cuda_time_total'),
      render: (o) => dRel(g(o.relative, 'cuda_time_total')), cls: (o) => cls(g(o.delta, 'cuda_time_total_us')) },
    { key: 'base_cpu', label: 'CPU total (base)', num: true, value: (o) => g(o.base, 'cpu_time_total_us'), render: (o) => fmtTime(g(o.base, 'cpu_time_total_us')) },
    { key: 'head_cpu', label: 'CPU total (head)', num: true, value: (o) => g(o.head, 'cpu_time_total_us'), render: (o) => fmtTime(g(o.head, 'cpu_time_total_us')) },
    { key: 'd_cpu', label: 'Δ CPU', num: true, value: (o) => Math.abs(g(o.delta, 'cpu_time_total_us') || 0),
      render: (o) => dTime(g(o.delta, 'cpu_time_total_us')), cls: (o) => `delta ${cls(g(o.delta, 'cpu_time_total_us')) || ''}` },
    { key: 'r_cpu', label: 'Δ CPU %', num: true, value: (o) => g(o.relative, 'cpu_time_total'),
      render: (o) => dRel(g(o.relative, 'cpu_time_total')), cls: (o) => cls(g(o.delta, 'cpu_time_total_us')) },
  ];
  const phCols = [
    { key: 'name', label: 'Phase', rowHeader: true, value: (p) => p.name, render: (p) => FP.nameEl(p.name) },
    { key: 'status', label: 'Status', value: (p) => p.status, cls: (p) => `status-${p.status}` },
    { key: 'base_count', label: 'Count (base)', num: true, value: (p) => g(p.base, 'count'), render: (p) => fmtInt(g(p.base, 'count')) },
    { key: 'head_count', label: 'Count (head)', num: true, value: (p) => g(p.head, 'count'), render: (p) => fmtInt(g(p.head, 'count')) },
    { key: 'base_total', label: 'Total (base)', num: true, value: (p) => g(p.base, 'total_us'), render: (p) => fmtTime(g(p.base, 'total_us')) },
    { key: 'head_total', label: 'Total (head)', num: true, value: (p) => g(p.head, 'total_us'), render: (p) => fmtTime(g(p.head, 'total_us')) },
    { key: 'd_total', label: 'Δ Total', num: true, value: (p) => Math.abs(g(p.delta, 'total_us') || 0),
      render: (p) => dTime(g(p.delta, 'total_us')), cls: (p) => `delta ${cls(g(p.delta, 'total_us')) || ''}` },
    { key: 'r_total', label: 'Δ %', num: true, value: (p) => g(p.relative, 'total'),
      render: (p) => dRel(g(p.relative, 'total')), cls: (p) => cls(g(p.delta, 'total_us')) },
  ];
  // null key: the server's order (biggest |Δ| first)
  let opSort = { key: null, dir: 'descending' }, phSort = { key: null, dir: 'descending' };

  function drawOps() {
    const f = nameIn.value.trim().toLowerCase();
    let rows = (result.operators || []).filter((o) => !f || String(o.name).toLowerCase().includes(f));
    if (opSort.key) rows = FP.sortRows(rows, opCols.find((c) => c.key === opSort.key), opSort.dir);
    const limit = Number(limitSel.value);
    if (limit) rows = rows.slice(0, limit);
    renderTable(document.getElementById('cmp-ops'), opCols, rows, opSort.key ? opSort : null,
      (k) => { opSort = nextSort(opSort, k, opCols); drawOps(); });
  }
  function drawPhases() {
    let rows = result.phases || [];
    if (phSort.key) rows = FP.sortRows(rows, phCols.find((c) => c.key === phSort.key), phSort.dir);
    renderTable(document.getElementById('cmp-phases'), phCols, rows, phSort.key ? phSort : null,
      (k) => { phSort = nextSort(phSort, k, phCols); drawPhases(); });
  }

  function drawSummary() {
    const b = result.base || {}, h = result.head || {};
    word = FP.gpuWord(b) === 'GPU' || FP.gpuWord(h) === 'GPU' ? 'GPU' : 'CUDA';
    const row = (label, kb, f, isTime) => {
      const vb = b[kb], vh = h[kb], d = (vh ?? NaN) - (vb ?? NaN);
      return el('tr', {}, el('th', { scope: 'row' }, label), el('td', { class: 'num' }, f(vb)), el('td', { class: 'num' }, f(vh)),
        el('td', { class: `num delta ${isTime ? cls(d) || '' : ''}` }, isFinite(d) ? fmtSigned(d, f) + (isTime ? arrow(d) : '') : '—'));
    };
    const t = el('table', { id: 'cmp-summary' }, el('caption', {}, 'The two sessions'),
      el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, ''),
        el('th', { scope: 'col', class: 'num' }, el('a', { href: `session.html?id=${b.id}` }, `Base: #${b.id} ${FP.sessionName(b)}`)),
        el('th', { scope: 'col', class: 'num' }, el('a', { href: `session.html?id=${h.id}` }, `Head: #${h.id} ${FP.sessionName(h)}`)),
        el('th', { scope: 'col', class: 'num' }, 'Δ (head − base)'))),
      el('tbody', {},
        row('Duration', 'duration_us', fmtTime, true),
        row(`${word} time total`, 'cuda_time_total_us', fmtTime, true),
        row('CPU time total', 'cpu_time_total_us', fmtTime, true),
        row('GPU idle', 'gpu_idle_fraction', (x) => fmtPct(x), true),
        row('Events', 'event_count', fmtInt, false)));
    const hw = dl([['base hardware', b.hardware || '—'], ['head hardware', h.hardware || '—'],
                   [`base top ${word} operator`, b.top_cuda_operator || '—'], [`head top ${word} operator`, h.top_cuda_operator || '—']]);
    document.getElementById('summary').replaceChildren(el('div', { class: 'table-wrap' }, t), hw, versionNote());
  }

  // The two sides' figures come from different analysis versions (issue 52): say so, and offer
  // to re-analyse the older side (POST .../reanalyse, a write: tokens apply), then compare again.
  function versionNote() {
    const v = result.analysis_versions;
    if (!v || !v.differ) return '';
    const redo = (v.reanalyse || []).map((id) => el('button', { type: 'button', class: 'reanalyse', onclick: async (e) => {
      e.target.disabled = true;
      try { await api(`/api/v1/sessions/${id}/reanalyse`, { method: 'POST' }); await run(); } finally { e.target.disabled = false; }
    } }, `Re-analyse #${id}`));
    return el('p', { class: 'note', id: 'cmp-versions', role: 'status' },
      `The two sides were analysed by different versions (base ${v.base}, head ${v.head}; this server ${v.current}): `
      + 'some differences may come from the analysis, not the runs. ', ...redo);
  }

  async function run() {
    const a = baseSel.value, b = headSel.value;
    if (!a || !b) {
      document.getElementById('summary').replaceChildren(el('p', { class: 'muted' }, 'Pick a base and a head session to compare.'));
      return;
    }
    result = await api('/api/v1/compare' + qs({ base: a, head: b }));
    document.title = `Compare #${a} → #${b} · firstpass`;
    drawSummary(); drawOps(); drawPhases();
  }

  document.getElementById('pick').addEventListener('submit', (e) => {
    e.preventDefault();
    history.replaceState(null, '', 'compare.html' + qs({ base: baseSel.value, head: headSel.value }));
    run().catch(() => {});
  });
  document.getElementById('swap').addEventListener('click', () => {
    [baseSel.value, headSel.value] = [headSel.value, baseSel.value];
    document.getElementById('pick').requestSubmit();
  });
  nameIn.addEventListener('input', FP.debounce(() => result && drawOps(), 150));
  limitSel.addEventListener('change', () => result && drawOps());
  document.getElementById('cmp-controls').addEventListener('submit', (e) => e.preventDefault());

  fillSelects().then(run).catch(() => {});
})();
