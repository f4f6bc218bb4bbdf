// compare.js: two sessions side by side (compare.html?base=A&head=B), the step first (issue 51,
// item 2): the mean step and each of its roles, then the memory peak, then the phases (a range
// renamed by a change of the same kind is one row), then the operators.
// Deltas are head − base: a time or a memory peak that fell is green (▼), one that rose red (▲);
// the sign and the arrow carry the meaning without the colours. A share (GPU busy, idle) moves
// in percentage points ("pts"), a time or a size by its own unit and by percent of the base.
'use strict';
(() => {
  const { api, el, qs, fmtTime, fmtMem, fmtPct, fmtInt, fmtSigned, renderTable, nextSort } = FP;
  const baseSel = document.getElementById('base');
  const headSel = document.getElementById('head');
  const nameIn = document.getElementById('cmp-name');
  const limitSel = document.getElementById('cmp-limit');
  const filterIn = document.getElementById('pick-filter');
  const pickNote = document.getElementById('pick-note');
  let result = null;
  let sessions = [];

  // better: the direction that is good (-1: a fall is good, as for times; +1: a rise, as for GPU busy)
  const cls = (d, better = -1) => (!isFinite(d) || d === 0 ? null : d * better > 0 ? 'faster' : 'slower');
  const arrow = (d) => (!isFinite(d) || d === 0 ? '' : d < 0 ? ' ▼' : ' ▲');
  const dTime = (d) => (d === null || d === undefined ? '—' : fmtSigned(d, fmtTime) + arrow(d));
  const dRel = (r) => (r === null || r === undefined || !isFinite(r) ? '—' : fmtSigned(r, (x) => fmtPct(x)));
  // a change of a share, in percentage points: 0.402 -> 0.561 is "+15.9 pts", never "+15.9%"
  const fmtPts = (d) => (d === null || d === undefined || !isFinite(d) ? '—' : fmtSigned(d * 100, (x) => `${x.toFixed(1)} pts`) + arrow(d));
  const rel = (b, h) => (typeof b === 'number' && typeof h === 'number' && b !== 0 ? (h - b) / b : null);
  const g = (o, k) => (o ? o[k] : null);
  // "CUDA" for NVIDIA sessions, "GPU" when either side is AMD (ROCm): set per comparison.
  let word = 'CUDA';

  // ---- the pickers: filtered, the head suggested from the base's labels ----------------------
  const labelText = (s) => Object.entries(s.labels || {}).map(([k, v]) => `${k}:${v}`).join(' ');
  const optionText = (s) => `#${s.id} ${FP.sessionName(s)}${s.hardware ? ' · ' + s.hardware : ''}${labelText(s) ? ' · ' + labelText(s) : ''}`;
  const hasLabels = (s, want) => Object.entries(want || {}).every(([k, v]) => (s.labels || {})[k] === v);
  // A picker's options: the sessions the filter box matches (the one picked stays); the head's
  // in two groups, the sessions with all of the base's labels first (those a head is usually
  // compared with: the same model, the same workload), then the others.
  function fillOne(sel, keep, groups) {
    const f = filterIn.value.trim().toLowerCase();
    const match = (s) => String(s.id) === keep || !f || optionText(s).toLowerCase().includes(f);
    const opt = (s) => el('option', { value: String(s.id) }, optionText(s));
    sel.replaceChildren(el('option', { value: '' }, '— pick a session —'), ...groups.map(([label, list]) => {
      const shown = list.filter(match).map(opt);
      return label ? (shown.length ? el('optgroup', { label }, shown) : null) : shown;
    }).filter(Boolean).flat());
    sel.value = keep;
    return sel.options.length - 1;
  }
  function fillSelects() {
    const b = baseSel.value || FP.param('base') || '', h = headSel.value || FP.param('head') || '';
    const nb = fillOne(baseSel, b, [[null, sessions]]);
    const base = sessions.find((s) => String(s.id) === b);
    // a base without labels has no "same labels" group: every session would be in it
    const labelled = base && Object.keys(base.labels || {}).length;
    const same = labelled ? sessions.filter((s) => s.id !== base.id && hasLabels(s, base.labels)) : [];
    const nh = fillOne(headSel, h, labelled ? [["With the base's labels", same], ['Other sessions', sessions.filter((s) => !same.includes(s))]] : [[null, sessions]]);
    pickNote.dataset.same = String(same.length);
    pickNote.textContent = `${nb} of ${sessions.length} sessions listed for the base, ${nh} for the head` +
      (labelled ? `; ${same.length} with the base's labels (${labelText(base)}) come first` : '') +
      (filterIn.value.trim() ? `, filtered by “${filterIn.value.trim()}”` : '') + '.';
  }
  // The newest other session with all of the base's labels (the server's label filter), as the
  // session page's "Compare with another session" asks for a head; null when there is none.
  async function suggestHead(baseId) {
    const b = sessions.find((s) => String(s.id) === String(baseId)) || await api(`/api/v1/sessions/${encodeURIComponent(baseId)}`);
    const labels = Object.entries(b.labels || {}).slice(0, 16).map(([k, v]) => `${k}:${v}`);
    if (!labels.length) return null;
    const j = await api('/api/v1/sessions' + qs({ label: labels, limit: 20 }));
    const other = (j.sessions || []).find((s) => s.id !== b.id);
    return other ? { id: other.id, labels } : null;
  }
  async function loadSessions() {
    const j = await api('/api/v1/sessions' + qs({ limit: 200 }));
    sessions = j.sessions || [];
    fillSelects();
  }

  // ---- the summary: the step and the figures a reader asks about first -----------------------
  function drawWarning() {
    const hw = result.hardware || {};
    const box = document.getElementById('hw-warning');
    box.hidden = hw.same !== false;
    box.replaceChildren(...(hw.same === false ? [el('b', {}, 'Different hardware: '),
      `the base ran on ${hw.base}, the head on ${hw.head}. Times and peaks are not comparable one to one; compare runs on the same GPUs to judge a change.`] : []));
  }
  // The summary's rows: {label, b, h, f (format), kind, fig}; kind: 'time' and 'bytes' (a fall
  // is good), 'share-up' (a share whose rise is good: GPU busy), 'share-down' (idle), 'count'.
  // fig names the figure for the cross-page check (one name, one value on every page).
  const dOf = (r) => (typeof r.b === 'number' && typeof r.h === 'number' ? r.h - r.b : NaN);
  function deltaText(r) {
    const d = dOf(r);
    if (!isFinite(d)) return '—';
    if (r.kind.startsWith('share')) return fmtPts(d);
    return `${fmtSigned(d, r.f)}${arrow(d)}${rel(r.b, r.h) !== null ? ` (${dRel(rel(r.b, r.h))})` : ''}`;
  }
  const figCell = (r, v, sid) => (r.fig ? el('span', { dataset: { session: sid, fig: r.fig, value: v ?? '' } }, r.f(v)) : r.f(v));
  const gpuPeak = (mem, side) => {
    const rows = (mem || []).filter((r) => r.device !== 'cpu' && r[side]);
    return rows.length ? Math.max(...rows.map((r) => r[side].peak_bytes)) : null;
  };
  function drawSummary() {
    const b = result.base || {}, h = result.head || {}, st = result.steps || {};
    word = FP.gpuWord(b) === 'GPU' || FP.gpuWord(h) === 'GPU' ? 'GPU' : 'CUDA';
    const mean = (side) => (st[side] ? st[side].mean.dur_us : null);
    const pct = (x) => fmtPct(x);
    const rows = [
      { label: 'Mean step', b: mean('base'), h: mean('head'), f: fmtTime, kind: 'time', fig: 'mean step', unit: 'µs' },
      { label: 'Steps', b: st.base ? st.base.count : null, h: st.head ? st.head.count : null, f: fmtInt, kind: 'count' },
      { label: 'GPU busy', b: b.gpu_utilization, h: h.gpu_utilization, f: pct, kind: 'share-up', fig: 'GPU busy', unit: 'fraction' },
      { label: 'Memory peak (GPU, allocated)', b: gpuPeak(result.memory, 'base'), h: gpuPeak(result.memory, 'head'), f: fmtMem, kind: 'bytes', unit: 'bytes' },
      { label: 'Duration', b: b.duration_us, h: h.duration_us, f: fmtTime, kind: 'time', fig: 'duration', unit: 'µs' },
      { label: `${word} time total`, b: b.cuda_time_total_us, h: h.cuda_time_total_us, f: fmtTime, kind: 'time', unit: 'µs' },
      { label: 'CPU time total', b: b.cpu_time_total_us, h: h.cpu_time_total_us, f: fmtTime, kind: 'time', unit: 'µs' },
      { label: 'Idle of the wall', b: b.gpu_idle_fraction, h: h.gpu_idle_fraction, f: pct, kind: 'share-down', fig: 'idle of the wall', unit: 'fraction' },
      { label: 'Events', b: b.event_count, h: h.event_count, f: fmtInt, kind: 'count' },
    ];
    const table = document.getElementById('cmp-summary') || el('table', { id: 'cmp-summary' }, el('caption', {}, 'The two sessions: the step first'));
    renderTable(table, [
      { key: 'label', label: '', rowHeader: true, csv: (r) => (r.unit ? `${r.label} (${r.unit})` : r.label) },
      { key: 'b', label: `Base #${b.id} ${FP.sessionName(b)}`, num: true, render: (r) => figCell(r, r.b, b.id), csv: (r) => r.b ?? '' },
      { key: 'h', label: `Head #${h.id} ${FP.sessionName(h)}`, num: true, render: (r) => figCell(r, r.h, h.id), csv: (r) => r.h ?? '' },
      { key: 'd', label: 'Δ (head − base)', num: true, render: deltaText, csv: (r) => (isFinite(dOf(r)) ? dOf(r) : ''),
        cls: (r) => `delta ${r.kind === 'count' ? '' : cls(dOf(r), r.kind === 'share-up' ? 1 : -1) || ''}` },
    ], rows, null, null);
    for (const tr of table.tBodies[0].rows) tr.dataset.row = tr.cells[0].textContent;
    const link = (s) => el('a', { href: `session.html?id=${s.id}` }, `#${s.id} ${FP.sessionName(s)}`);
    const hw = FP.dl([['base', link(b)], ['head', link(h)], ['base hardware', b.hardware || '—'], ['head hardware', h.hardware || '—'],
                      [`base top ${word} operator`, FP.nameEl(b.top_cuda_operator || '—')], [`head top ${word} operator`, FP.nameEl(h.top_cuda_operator || '—')]]);
    document.getElementById('summary').replaceChildren(el('div', { class: 'table-wrap' }, table), hw, versionNote());
  }

  // ---- the step, role by role ------------------------------------------------------------------
  const ROLE_COLORS = { kernel: '#59a14f', memcpy: '#edc948', memset: '#9c755f', communication: '#76b7b2', runtime: '#f28e2b',
    data_loading: '#e15759', cpu_exec: '#4e79a7', other: '#bab0ac' };
  function drawSteps() {
    const st = result.steps || {}, roles = st.roles || Object.keys(ROLE_COLORS);
    const note = document.getElementById('cmp-steps-note');
    if (!st.base || !st.head) {
      note.textContent = `Not both sessions have ProfilerStep steps (base ${st.base ? st.base.count : 0}, head ${st.head ? st.head.count : 0}): ` +
        'no step to compare; the totals below are over each whole window.';
      document.getElementById('cmp-steps-chart').replaceChildren();
      renderTable(document.getElementById('cmp-steps'), [{ key: 'role', label: 'Role', rowHeader: true }], [], null, null);
      return;
    }
    const bm = st.base.mean, hm = st.head.mean, d = st.delta;
    const rows = roles.map((k) => ({ role: k, base: bm[`${k}_us`] || 0, head: hm[`${k}_us`] || 0, delta: d[`${k}_us`] || 0 }));
    const top = rows.reduce((a, r) => (Math.abs(r.delta) > Math.abs(a.delta) ? r : a), rows[0]);
    note.replaceChildren(`Mean step ${fmtTime(bm.dur_us)} → ${fmtTime(hm.dur_us)} (${fmtSigned(d.dur_us, fmtTime)}, ${dRel(rel(bm.dur_us, hm.dur_us))}) over ` +
      `${st.base.count} and ${st.head.count} steps; the role that moved most: `, el('b', { id: 'cmp-top-role' }, top.role.replace(/_/g, ' ')),
      ` ${fmtTime(top.base)} → ${fmtTime(top.head)} a step (${fmtSigned(top.delta, fmtTime)}).`);
    const part = (m) => Object.fromEntries(roles.map((k) => [k, m[`${k}_us`] || 0]));
    document.getElementById('cmp-steps-chart').replaceChildren(
      FPC.stacked([{ label: 'base mean step', parts: part(bm), mean: true }, { label: 'head mean step', parts: part(hm), mean: true }],
        roles, ROLE_COLORS, fmtTime, { label: 'Mean step by role, base and head' }), FPC.legend(roles, ROLE_COLORS));
    const all = [{ role: 'mean step', base: bm.dur_us, head: hm.dur_us, delta: d.dur_us, total: true }, ...rows];
    renderTable(document.getElementById('cmp-steps'), [
      { key: 'role', label: 'Role', rowHeader: true, render: (r) => (r.total ? el('b', {}, r.role) : r.role.replace(/_/g, ' ')) },
      { key: 'base', label: 'Base a step', num: true, render: (r) => fmtTime(r.base) },
      { key: 'head', label: 'Head a step', num: true, render: (r) => fmtTime(r.head) },
      { key: 'delta', label: 'Δ a step', num: true, csv: (r) => r.delta, csvUnit: 'µs', render: (r) => dTime(r.delta), cls: (r) => `delta ${cls(r.delta) || ''}` },
      { key: 'rel', label: 'Δ %', num: true, csv: (r) => rel(r.base, r.head) ?? '', csvUnit: 'fraction', render: (r) => dRel(rel(r.base, r.head)), cls: (r) => cls(r.delta) },
      { key: 'share', label: 'Share of the step (base → head)', num: true, csv: false,
        render: (r) => `${FP.fmtShare(r.base, bm.dur_us)} → ${FP.fmtShare(r.head, hm.dur_us)}` },
    ], all, null, null);
  }

  // ---- memory ----------------------------------------------------------------------------------
  function drawMemory() {
    const rows = result.memory || [];
    const side = (r, s, k) => (r[s] ? r[s][k] : null);
    renderTable(document.getElementById('cmp-memory'), [
      { key: 'device', label: 'Device', rowHeader: true },
      { key: 'base_peak', label: 'Base peak allocated', num: true, value: (r) => side(r, 'base', 'peak_bytes'), render: (r) => fmtMem(side(r, 'base', 'peak_bytes')) },
      { key: 'head_peak', label: 'Head peak allocated', num: true, value: (r) => side(r, 'head', 'peak_bytes'), render: (r) => fmtMem(side(r, 'head', 'peak_bytes')) },
      { key: 'delta', label: 'Δ peak', num: true, csv: (r) => r.delta_peak_bytes ?? '', csvUnit: 'bytes',
        render: (r) => (r.delta_peak_bytes === null ? '—' : `${fmtSigned(r.delta_peak_bytes, fmtMem)}${arrow(r.delta_peak_bytes)} (${dRel(rel(side(r, 'base', 'peak_bytes'), side(r, 'head', 'peak_bytes')))})`),
        cls: (r) => `delta ${cls(r.delta_peak_bytes) || ''}` },
      { key: 'base_res', label: 'Base peak reserved', num: true, value: (r) => side(r, 'base', 'reserved_peak_bytes'), render: (r) => fmtMem(side(r, 'base', 'reserved_peak_bytes')) },
      { key: 'head_res', label: 'Head peak reserved', num: true, value: (r) => side(r, 'head', 'reserved_peak_bytes'), render: (r) => fmtMem(side(r, 'head', 'reserved_peak_bytes')) },
    ], rows, null, null);
    if (!rows.length) FP.setCaption(document.getElementById('cmp-memory'), 'No [memory] events on either side (record with profile_memory=True).');
  }

  // ---- phases and operators --------------------------------------------------------------------
  const phaseName = (p) => (p.base_name ? [FP.nameEl(p.name), el('div', { class: 'small muted renamed' }, 'was ', FP.nameEl(p.base_name))] : FP.nameEl(p.name));
  const opCols = [
    { key: 'name', label: 'Operator', rowHeader: true, value: (o) => o.name, render: (o) => FP.nameEl(o.name, FP.shortName(o.name, 48)) },
    // the kind under the status: one column fewer, so that the table fits 1440 px (issue 51, item 2)
    { key: 'status', label: 'Status', value: (o) => o.status, cls: (o) => `status-${o.status}`, csv: (o) => o.status,
      render: (o) => [o.status, el('div', { class: 'small muted kind' }, o.kind)] },
    { key: 'kind', label: 'Kind', csvOnly: true, csv: (o) => o.kind },
    { key: 'base_calls', label: 'Calls base', num: true, value: (o) => g(o.base, 'calls'), render: (o) => fmtInt(g(o.base, 'calls')) },
    { key: 'head_calls', label: 'Calls head', num: true, value: (o) => g(o.head, 'calls'), render: (o) => fmtInt(g(o.head, 'calls')) },
    { key: 'base_cuda', get label() { return `${word} base`; }, num: true, value: (o) => g(o.base, 'cuda_time_total_us'), render: (o) => fmtTime(g(o.base, 'cuda_time_total_us')) },
    { key: 'head_cuda', get label() { return `${word} head`; }, num: true, value: (o) => g(o.head, 'cuda_time_total_us'), render: (o) => fmtTime(g(o.head, 'cuda_time_total_us')) },
    { key: 'd_cuda', get label() { return `Δ ${word}`; }, num: true, value: (o) => Math.abs(g(o.delta, 'cuda_time_total_us') || 0),
      csv: (o) => g(o.delta, 'cuda_time_total_us'), csvUnit: 'µs',
      render: (o) => dTime(g(o.delta, 'cuda_time_total_us')), cls: (o) => `delta ${cls(g(o.delta, 'cuda_time_total_us')) || ''}` },
    { key: 'r_cuda', get label() { return `Δ ${word} %`; }, num: true, value: (o) => g(o.relative, 'cuda_time_total'),
      csv: (o) => g(o.relative, 'cuda_time_total') ?? '', csvUnit: 'fraction',
      render: (o) => dRel(g(o.relative, 'cuda_time_total')), cls: (o) => cls(g(o.delta, 'cuda_time_total_us')) },
    { key: 'base_cpu', label: 'CPU base', num: true, value: (o) => g(o.base, 'cpu_time_total_us'), render: (o) => fmtTime(g(o.base, 'cpu_time_total_us')) },
    { key: 'head_cpu', label: 'CPU head', num: true, value: (o) => g(o.head, 'cpu_time_total_us'), render: (o) => fmtTime(g(o.head, 'cpu_time_total_us')) },
    { key: 'd_cpu', label: 'Δ CPU', num: true, value: (o) => Math.abs(g(o.delta, 'cpu_time_total_us') || 0),
      csv: (o) => g(o.delta, 'cpu_time_total_us'), csvUnit: 'µs',
      render: (o) => dTime(g(o.delta, 'cpu_time_total_us')), cls: (o) => `delta ${cls(g(o.delta, 'cpu_time_total_us')) || ''}` },
    { key: 'r_cpu', label: 'Δ CPU %', num: true, value: (o) => g(o.relative, 'cpu_time_total'),
      csv: (o) => g(o.relative, 'cpu_time_total') ?? '', csvUnit: 'fraction',
      render: (o) => dRel(g(o.relative, 'cpu_time_total')), cls: (o) => cls(g(o.delta, 'cpu_time_total_us')) },
  ];
  const phCols = [
    { key: 'name', label: 'Phase', rowHeader: true, value: (p) => p.name, render: phaseName,
      csv: (p) => (p.base_name ? `${p.name} (was ${p.base_name})` : p.name) },
    { key: 'status', label: 'Status', value: (p) => (p.base_name ? 'renamed' : p.status), cls: (p) => `status-${p.status}`,
      render: (p) => (p.base_name ? 'changed (renamed)' : p.status) },
    { key: 'base_count', label: 'Count (base)', num: true, value: (p) => g(p.base, 'count'), render: (p) => fmtInt(g(p.base, 'count')) },
    { key: 'head_count', label: 'Count (head)', num: true, value: (p) => g(p.head, 'count'), render: (p) => fmtInt(g(p.head, 'count')) },
    { key: 'base_total', label: 'Total (base)', num: true, value: (p) => g(p.base, 'total_us'), render: (p) => fmtTime(g(p.base, 'total_us')) },
    { key: 'head_total', label: 'Total (head)', num: true, value: (p) => g(p.head, 'total_us'), render: (p) => fmtTime(g(p.head, 'total_us')) },
    { key: 'd_total', label: 'Δ Total', num: true, value: (p) => Math.abs(g(p.delta, 'total_us') || 0), csv: (p) => g(p.delta, 'total_us'), csvUnit: 'µs',
      render: (p) => dTime(g(p.delta, 'total_us')), cls: (p) => `delta ${cls(g(p.delta, 'total_us')) || ''}` },
    { key: 'r_total', label: 'Δ %', num: true, value: (p) => g(p.relative, 'total'), csv: (p) => g(p.relative, 'total') ?? '', csvUnit: 'fraction',
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
      document.getElementById('summary').replaceChildren(el('p', { class: 'muted' }, a ? 'Pick a head session to compare with the base.' : 'Pick a base and a head session to compare.'));
      return;
    }
    result = await api('/api/v1/compare' + qs({ base: a, head: b }));
    document.title = `Compare #${a} → #${b} · firstpass`;
    drawWarning(); drawSummary(); drawSteps(); drawMemory(); drawPhases(); drawOps();
  }

  document.getElementById('pick').addEventListener('submit', (e) => {
    e.preventDefault();
    history.replaceState(null, '', 'compare.html' + qs({ base: baseSel.value, head: headSel.value }));
    run().catch(() => {});
  });
  document.getElementById('swap').addEventListener('click', () => {
    const [a, b] = [headSel.value, baseSel.value];
    baseSel.value = a;
    headSel.value = b;
    fillSelects();
    document.getElementById('pick').requestSubmit();
  });
  filterIn.addEventListener('input', FP.debounce(fillSelects, 150));
  baseSel.addEventListener('change', fillSelects);
  nameIn.addEventListener('input', FP.debounce(() => result && drawOps(), 150));
  limitSel.addEventListener('change', () => result && drawOps());
  document.getElementById('cmp-controls').addEventListener('submit', (e) => e.preventDefault());

  (async () => {
    await loadSessions();
    // a base and no head (the session page's link): the head suggested from the base's labels
    if (FP.param('base') && !FP.param('head')) {
      const s = await suggestHead(FP.param('base'));
      if (s) {
        headSel.value = String(s.id);
        fillSelects();
        pickNote.replaceChildren(el('span', { id: 'suggested' }, `Head suggested: #${s.id}, the newest other session with the base's labels (${s.labels.join(' ')}).`),
          ' ', pickNote.textContent);
        history.replaceState(null, '', 'compare.html' + qs({ base: baseSel.value, head: headSel.value }));
      } else {
        pickNote.replaceChildren(el('span', { id: 'suggested' }, 'No other session has all of the base\'s labels: pick a head.'), ' ', pickNote.textContent);
      }
    }
    await run();
  })().catch(() => {});
})();
