// session.js: one session (session.html?id=N): report, smells, operators, kernels, phases, GPU.
'use strict';
(() => {
  const { api, el, qs, fmtTime, fmtShare, fmtMem, fmtPct, fmtInt, fmtDims, renderTable, nextSort, dl } = FP;
  const id = FP.param('id');
  const base = `/api/v1/sessions/${encodeURIComponent(id || '')}`;
  if (!id) { FP.showError('No session id in the address (session.html?id=N).'); return; }

  document.getElementById('download').href = `${base}/trace`;
  document.getElementById('download').setAttribute('download', `firstpass-session-${id}.trace.json`);
  document.getElementById('to-timeline').href = `timeline.html?id=${encodeURIComponent(id)}`;
  document.getElementById('to-compare').href = `compare.html?base=${encodeURIComponent(id)}`;

  // ---- summary ------------------------------------------------------------------------------
  let sessionStart = 0;
  const summary = api(base);
  async function loadSummary() {
    const s = await summary;
    sessionStart = s.start_us || 0;
    document.title = `${FP.sessionName(s)} · firstpass`;
    document.getElementById('title').textContent = FP.sessionName(s);
    const meta = document.getElementById('meta');
    const item = (k, v) => el('span', {}, k + ': ', el('b', {}, v));
    meta.replaceChildren(
      item('id', String(s.id)),
      item('source', s.source || '—'),
      item('hardware', s.hardware || '—'),
      item('duration', fmtTime(s.duration_us)),
      item('events', fmtInt(s.event_count)),
      item('GPU idle', fmtPct(s.gpu_idle_fraction)),
      item('uploaded', FP.fmtDate(s.created_at)),
      el('span', {}, Object.entries(s.labels || {}).map(([k, v]) => el('span', { class: 'badge label' }, `${k}:${v}`))));
  }

  // ---- report -------------------------------------------------------------------------------
  const LINES = [
    ['workload', 'Workload'], ['hardware', 'Hardware'], ['top_cuda_time', 'Top CUDA time'],
    ['top_cpu_cost', 'Top CPU cost'], ['next_experiment', 'Next experiment'],
  ];
  const reportEl = document.getElementById('report');

  function renderReport(r) {
    const lines = r.lines || {};
    const edited = new Set(r.edited || []);
    reportEl.replaceChildren(...LINES.map(([key, label]) => {
      const text = el('span', { class: 'text', id: `line-${key}` }, lines[key] || '');
      const row = el('div', { class: 'report-line', dataset: { key } },
        el('span', { class: 'key', id: `label-${key}` }, label,
           edited.has(key) ? el('span', { class: 'badge edited', title: 'edited by hand' }, 'edited') : null),
        text,
        el('span', { class: 'actions' },
          el('button', { type: 'button', class: 'edit', 'aria-label': `Edit ${label}`, onclick: () => edit(row, key, label, lines[key] || '') }, 'Edit'),
          edited.has(key) ? el('button', { type: 'button', class: 'restore', 'aria-label': `Restore the draft of ${label}`,
                                           title: r.draft && r.draft[key] ? `Draft: ${r.draft[key]}` : null,
                                           onclick: () => save(key, null) }, 'Restore draft') : null));
      return row;
    }));
    renderSmells(r.smells || []);
  }

  function edit(row, key, label, value) {
    const input = el('input', { type: 'text', id: `edit-${key}`, 'aria-labelledby': `label-${key}`, value });
    const done = el('button', { type: 'button', class: 'primary save', onclick: () => save(key, input.value) }, 'Save');
    const cancel = el('button', { type: 'button', class: 'cancel', onclick: () => loadReport() }, 'Cancel');
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') { e.preventDefault(); save(key, input.value); }
      if (e.key === 'Escape') { e.preventDefault(); loadReport().then(() => row.querySelector('.edit')?.focus()); }
    });
    row.children[1].replaceWith(input);
    row.children[2].replaceChildren(done, cancel);
    input.focus();
    input.select();
  }

  async function save(key, value) {
    const body = { lines: { [key]: value === null || value.trim() === '' ? null : value } };
    const r = await api(`${base}/report`, { method: 'PUT', body });
    renderReport(r);
    const b = reportEl.querySelector(`.report-line[data-key="${key}"] .edit`);
    if (b) b.focus();
  }

  async function loadReport() { renderReport(await api(`${base}/report`)); }

  function evidence(ev) {
    if (!ev || typeof ev !== 'object') return null;
    const fmtV = (k, v) => {
      if (typeof v === 'number') {
        if (/share|fraction|ratio/.test(k)) return fmtPct(v);
        if (/_us$/.test(k)) return fmtTime(v);
        if (/bytes/.test(k)) return fmtMem(v);
        return String(Number.isInteger(v) ? v : v.toFixed(3));
      }
      return typeof v === 'object' ? JSON.stringify(v) : String(v);
    };
    return dl(Object.entries(ev).map(([k, v]) => [k, fmtV(k, v)]), 'facts small');
  }

  function renderSmells(smells) {
    const on = smells.filter((s) => s.fired);
    const off = smells.filter((s) => !s.fired);
    const ul = document.getElementById('smells');
    ul.replaceChildren(...(on.length ? on.map((s) => el('li', { dataset: { smell: s.id } },
      el('div', { class: 'title' }, s.title || FP.smellText(s.id)),
      el('div', {}, s.summary || ''), evidence(s.evidence)))
      : [el('li', { class: 'none' }, 'No smell fired.')]));
    document.getElementById('smells-off').replaceChildren(...off.map((s) =>
      el('li', {}, el('b', {}, s.title || FP.smellText(s.id)), s.summary ? ` — ${s.summary}` : '')));
    document.getElementById('smells-quiet').hidden = !off.length;
  }

  // ---- operators ----------------------------------------------------------------------------
  // Fields the server can sort by (?sort=); everything else sorts here.
  const SERVER_SORT = new Set(['cuda_time_total', 'self_cuda_time_total', 'cpu_time_total', 'self_cpu_time_total',
                               'calls', 'cpu_memory_usage', 'cuda_memory_usage']);
  const ALL_ROWS = 10000; // the most the server returns; sorting or filtering in the page needs them all
  let totals = {};
  const T = (k) => (r) => r[k];
  const opCols = [
    { key: 'name', label: 'Name', rowHeader: true, value: T('name'), render: (r) => el('span', { class: 'name', title: r.name }, r.name) },
    { key: 'input_shapes', label: 'Input Shapes', value: T('input_shapes'), grouped: true,
      render: (r) => el('span', { class: 'name', title: r.input_shapes ?? '' }, r.input_shapes ?? '') },
    { key: 'kind', label: 'Kind', value: T('kind') },
    { key: 'self_cpu_pct', server: 'self_cpu_time_total', label: 'Self CPU %', num: true, value: T('self_cpu_time_total_us'),
      render: (r) => fmtShare(r.self_cpu_time_total_us, totals.self_cpu_time_total_us) },
    { key: 'self_cpu_time_total', label: 'Self CPU', num: true, value: T('self_cpu_time_total_us'), render: (r) => fmtTime(r.self_cpu_time_total_us) },
    { key: 'cpu_pct', server: 'cpu_time_total', label: 'CPU total %', num: true, value: T('cpu_time_total_us'),
      render: (r) => fmtShare(r.cpu_time_total_us, totals.self_cpu_time_total_us) },
    { key: 'cpu_time_total', label: 'CPU total', num: true, value: T('cpu_time_total_us'), render: (r) => fmtTime(r.cpu_time_total_us) },
    { key: 'cpu_time_avg', label: 'CPU time avg', num: true, value: T('cpu_time_avg_us'), render: (r) => fmtTime(r.cpu_time_avg_us) },
    { key: 'self_cuda_time_total', label: 'Self CUDA', num: true, value: T('self_cuda_time_total_us'), render: (r) => fmtTime(r.self_cuda_time_total_us) },
    { key: 'self_cuda_pct', server: 'self_cuda_time_total', label: 'Self CUDA %', num: true, value: T('self_cuda_time_total_us'),
      render: (r) => fmtShare(r.self_cuda_time_total_us, totals.self_cuda_time_total_us) },
    { key: 'cuda_time_total', label: 'CUDA total', num: true, value: T('cuda_time_total_us'), render: (r) => fmtTime(r.cuda_time_total_us) },
    { key: 'cuda_time_avg', label: 'CUDA time avg', num: true, value: T('cuda_time_avg_us'), render: (r) => fmtTime(r.cuda_time_avg_us) },
    { key: 'cpu_memory_usage', label: 'CPU Mem', num: true, value: T('cpu_memory_usage_bytes'), render: (r) => fmtMem(r.cpu_memory_usage_bytes) },
    { key: 'self_cpu_memory_usage', label: 'Self CPU Mem', num: true, value: T('self_cpu_memory_usage_bytes'), render: (r) => fmtMem(r.self_cpu_memory_usage_bytes) },
    { key: 'cuda_memory_usage', label: 'CUDA Mem', num: true, value: T('cuda_memory_usage_bytes'), render: (r) => fmtMem(r.cuda_memory_usage_bytes) },
    { key: 'self_cuda_memory_usage', label: 'Self CUDA Mem', num: true, value: T('self_cuda_memory_usage_bytes'), render: (r) => fmtMem(r.self_cuda_memory_usage_bytes) },
    { key: 'calls', label: '# of Calls', num: true, value: T('calls'), render: (r) => fmtInt(r.calls) },
  ];
  let opSort = { key: 'cuda_time_total', dir: 'descending' };
  const opTable = document.getElementById('operators');
  const opName = document.getElementById('op-name');
  const opKind = document.getElementById('op-kind');
  const opLimit = document.getElementById('op-limit');
  const opGroup = document.getElementById('op-group');
  let opSeq = 0;

  async function loadOperators() {
    const seq = ++opSeq;
    const col = opCols.find((c) => c.key === opSort.key);
    const serverKey = col.server || (SERVER_SORT.has(col.key) ? col.key : null);
    const limit = Number(opLimit.value);
    const filter = opName.value.trim().toLowerCase();
    // The server sorts biggest first; it can also apply the limit when nothing else reorders
    // or drops rows afterwards.
    const serverOrder = serverKey && opSort.dir === 'descending';
    const q = qs({
      sort: serverKey || 'cuda_time_total',
      limit: serverOrder && !filter && limit ? limit : ALL_ROWS,
      kind: opKind.value,
      group_by: opGroup.checked ? 'input_shape' : null,
    });
    const j = await api(`${base}/operators${q}`);
    if (seq !== opSeq) return; // a newer request is on its way
    totals = j.totals || {};
    let rows = j.operators || [];
    const all = rows.length;
    if (filter) rows = rows.filter((r) => String(r.name).toLowerCase().includes(filter));
    if (!serverOrder) rows = FP.sortRows(rows, col, opSort.dir);
    const matched = rows.length;
    if (limit) rows = rows.slice(0, limit);
    const cols = opCols.filter((c) => !c.grouped || opGroup.checked);
    renderTable(opTable, cols, rows, opSort, (key) => {
      opSort = nextSort(opSort, key, opCols);
      loadOperators().catch(() => {});
    });
    opTable.dataset.sort = opSort.key;
    opTable.dataset.dir = opSort.dir;
    document.getElementById('op-summary').textContent =
      `${rows.length} of ${filter ? matched + ' matching, ' : ''}${all} rows shown; sorted by ${col.label} ` +
      `(${opSort.dir}, ${serverOrder ? 'by the server' : 'in the page'}). ` +
      `Self CPU total ${fmtTime(totals.self_cpu_time_total_us)}, self CUDA total ${fmtTime(totals.self_cuda_time_total_us)}.`;
  }
  const reloadOps = () => loadOperators().catch(() => {});
  opName.addEventListener('input', FP.debounce(reloadOps, 200));
  for (const c of [opKind, opLimit, opGroup]) c.addEventListener('change', reloadOps);
  document.getElementById('op-controls').addEventListener('submit', (e) => e.preventDefault());

  // ---- kernels ------------------------------------------------------------------------------
  const kCols = [
    { key: 'name', label: 'Kernel', rowHeader: true, render: (k) => el('span', { class: 'name', title: k.name }, k.name) },
    { key: 'calls', label: 'Calls', num: true, render: (k) => fmtInt(k.calls) },
    { key: 'total_us', label: 'Total', num: true, render: (k) => fmtTime(k.total_us) },
    { key: 'share', label: 'Share', num: true, render: (k) => fmtPct(k.share) },
    { key: 'mean_us', label: 'Mean', num: true, render: (k) => fmtTime(k.mean_us) },
    { key: 'min_us', label: 'Min', num: true, render: (k) => fmtTime(k.min_us) },
    { key: 'max_us', label: 'Max', num: true, render: (k) => fmtTime(k.max_us) },
    { key: 'grid', label: 'Grid', value: (k) => fmtDims(k.grid), render: (k) => fmtDims(k.grid) },
    { key: 'block', label: 'Block', value: (k) => fmtDims(k.block), render: (k) => fmtDims(k.block) },
    { key: 'registers_per_thread', label: 'Regs/thread', num: true, render: (k) => k.registers_per_thread ?? '—' },
    { key: 'shared_memory_bytes', label: 'Shared mem', num: true, render: (k) => fmtMem(k.shared_memory_bytes) },
  ];
  function clientTable(table, cols, rows, initial) {
    let st = { ...initial, clientSort: true };
    const draw = () => renderTable(table, cols, rows, st, (key) => { st = nextSort(st, key, cols); draw(); });
    draw();
  }
  async function loadKernels() {
    const j = await api(`${base}/kernels${qs({ sort: 'total_us', limit: 50 })}`);
    clientTable(document.getElementById('kernels'), kCols, j.kernels || [], { key: 'total_us', dir: 'descending' });
  }

  // ---- phases -------------------------------------------------------------------------------
  const pCols = [
    { key: 'name', label: 'Phase', rowHeader: true, render: (p) => el('span', { class: 'name', title: p.name }, p.name) },
    { key: 'kind', label: 'Kind' },
    { key: 'count', label: 'Count', num: true, render: (p) => fmtInt(p.count) },
    { key: 'total_us', label: 'Total', num: true, render: (p) => fmtTime(p.total_us) },
    { key: 'mean_us', label: 'Mean', num: true, render: (p) => fmtTime(p.mean_us) },
    { key: 'gpu_busy_us', label: 'GPU busy', num: true, render: (p) => fmtTime(p.gpu_busy_us) },
    { key: 'busy_share', label: 'GPU busy %', num: true, value: (p) => (p.total_us ? p.gpu_busy_us / p.total_us : 0),
      render: (p) => (p.total_us ? fmtPct(p.gpu_busy_us / p.total_us) : '—') },
    { key: 'kernels', label: 'Kernels', num: true, render: (p) => fmtInt(p.kernels) },
    { key: 'kernel_mean_us', label: 'Kernel mean', num: true, render: (p) => fmtTime(p.kernel_mean_us) },
    { key: 'cpu_only_us', label: 'CPU only', num: true, render: (p) => fmtTime(p.cpu_only_us) },
  ];
  async function loadPhases() {
    const j = await api(`${base}/phases`);
    clientTable(document.getElementById('phases'), pCols, j.phases || [], { key: 'total_us', dir: 'descending' });
  }

  // ---- GPU facts ----------------------------------------------------------------------------
  async function loadGpu() {
    try { sessionStart = (await summary).start_us || 0; } catch (_) { /* shown by loadSummary */ }
    const g = await api(`${base}/gpu`);
    const out = document.getElementById('gpu');
    const L = g.launch || {};
    const parts = [
      el('div', { class: 'cols' },
        el('div', {}, el('h3', {}, 'Utilisation'), dl([
          ['wall time', fmtTime(g.wall_us)],
          ['GPU idle', fmtPct(g.gpu_idle_fraction)],
          ['devices', String((g.devices || []).length)]])),
        el('div', {}, el('h3', {}, 'Kernel launches'), dl([
          ['launches', fmtInt(L.count)],
          ['launch delay mean', fmtTime(L.delay_mean_us)],
          ['launch delay p50', fmtTime(L.delay_p50_us)],
          ['launch delay p99', fmtTime(L.delay_p99_us)],
          [`short kernels (< ${fmtTime(L.short_kernel_threshold_us)})`, `${fmtInt(L.short_kernels)} (${fmtPct(L.short_kernel_share)})`]]))),
    ];
    for (const d of g.devices || []) {
      const gaps = d.gaps || {};
      const streams = el('table', {}, el('caption', {}, `Device ${d.device} streams`));
      renderTable(streams, [
        { key: 'stream', label: 'Stream', rowHeader: true },
        { key: 'busy_us', label: 'Busy', num: true, render: (s) => fmtTime(s.busy_us) },
        { key: 'events', label: 'Events', num: true, render: (s) => fmtInt(s.events) }], d.streams || [], null, null);
      const gapT = el('table', {}, el('caption', {}, `Device ${d.device}: largest idle gaps`));
      renderTable(gapT, [
        { key: 'start_us', label: 'Start (from session start)', num: true, render: (x) => fmtTime(x.start_us - sessionStart) },
        { key: 'dur_us', label: 'Length', num: true, render: (x) => fmtTime(x.dur_us) },
        { key: 'host_op', label: 'Host operator', render: (x) => el('span', { class: 'name', title: x.host_op || '—' }, x.host_op || '—') },
        { key: 'host_call', label: 'Host call', render: (x) => el('span', { class: 'name', title: x.host_call || '—' }, x.host_call || '—') }],
      gaps.largest || [], null, null);
      parts.push(el('h3', {}, `Device ${d.device}`),
        dl([['busy', fmtTime(d.busy_us)], ['idle', `${fmtTime(d.idle_us)} (${fmtPct(d.idle_fraction)})`],
            ['idle gaps', `${fmtInt(gaps.count)} totalling ${fmtTime(gaps.total_us)}`]]),
        el('div', { class: 'cols' }, el('div', { class: 'table-wrap' }, streams), el('div', { class: 'table-wrap' }, gapT)));
    }
    const copies = el('table', { id: 'copies' }, el('caption', {}, 'Memory copies'));
    renderTable(copies, [
      { key: 'direction', label: 'Direction', rowHeader: true },
      { key: 'count', label: 'Count', num: true, render: (c) => fmtInt(c.count) },
      { key: 'bytes', label: 'Bytes', num: true, render: (c) => fmtMem(c.bytes) },
      { key: 'total_us', label: 'Total', num: true, render: (c) => fmtTime(c.total_us) },
      { key: 'critical_path_count', label: 'On critical path', num: true, render: (c) => fmtInt(c.critical_path_count) },
      { key: 'critical_path_us', label: 'Critical path time', num: true, render: (c) => fmtTime(c.critical_path_us) }],
    g.copies || [], null, null);
    parts.push(el('h3', {}, 'Copies'), el('div', { class: 'table-wrap' }, copies));
    out.replaceChildren(...parts);
  }

  // Each section loads on its own, so one failing endpoint does not blank the page.
  for (const f of [loadSummary, loadReport, loadOperators, loadKernels, loadPhases, loadGpu]) f().catch(() => {});
})();
