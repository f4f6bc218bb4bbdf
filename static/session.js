// session.js: one session (session.html?id=N): report, smells, operators, kernels, phases, GPU.
'use strict';
(() => {
  const { api, el, qs, fmtTime, fmtShare, fmtMem, fmtPct, fmtInt, fmtDims, renderTable, nextSort, dl } = FP;
  const id = FP.param('id');
  const base = `/api/v1/sessions/${encodeURIComponent(id || '')}`;
  if (!id) { FP.showError('No session id in the address (session.html?id=N).'); return; }

  document.getElementById('download').href = `${base}/trace`;
  document.getElementById('download').setAttribute('download', `firstpass-session-${id}.trace.json`);
  // the gzip file itself (?format=gzip): a tenth of the JSON's size, and Perfetto and
  // chrome://tracing open it as it is (issue 51, item 6)
  document.getElementById('download-gz').href = `${base}/trace?format=gzip`;
  document.getElementById('download-gz').setAttribute('download', `firstpass-session-${id}.trace.json.gz`);
  document.getElementById('to-timeline').href = `timeline.html?id=${encodeURIComponent(id)}`;
  document.getElementById('to-compare').href = `compare.html?base=${encodeURIComponent(id)}`;
  document.getElementById('to-baselines').href = `baselines.html?session=${encodeURIComponent(id)}`;

  // ---- summary ------------------------------------------------------------------------------
  let sessionStart = 0;
  let word = 'CUDA', noGpu = false; // "GPU" on AMD (ROCm) traces; noGpu: a CPU-only trace
  const summary = FP.once(base, { quiet: true }); // trend.js reads the same reply
  // The first screen's replies are asked for at once, beside the summary, not after it (issue
  // 51, item 7: the first screen in under a second). Quiet: a missing session is one message.
  const firstScreen = { suspects: FP.once(`${base}/suspects`, { quiet: true }), steps: FP.once(`${base}/steps${qs({ limit: 1000 })}`, { quiet: true }) };
  for (const p of Object.values(firstScreen)) p.catch(() => {}); // handled where awaited; never an unhandled rejection
  const shown = (p) => p.catch((e) => { FP.showError(e.message); throw e; });
  async function loadSummary() {
    const s = await summary;
    sessionStart = s.start_us || 0;
    document.title = `${FP.sessionName(s)} · firstpass`;
    document.getElementById('title').textContent = FP.sessionName(s);
    const meta = document.getElementById('meta');
    const item = (k, v) => el('span', {}, k + ': ', el('b', {}, v));
    // fig: a figure's name wherever it is shown (the cross-page test: one name, one value)
    const fig = (k, v, value, title) => el('span', { title: title || null }, k + ': ', el('b', { dataset: { session: id, fig: k, value: value ?? '' } }, v));
    meta.replaceChildren(
      item('id', String(s.id)),
      item('source', s.source || '—'),
      item('hardware', s.hardware || '—'),
      fig('duration', fmtTime(s.duration_us), s.duration_us),
      item('events', fmtInt(s.event_count)),
      s.step_mean_us !== null && s.step_mean_us !== undefined ? fig('mean step', fmtTime(s.step_mean_us), s.step_mean_us) : null,
      // "GPU busy" is tb-profiler's GPU utilization on every surface (issue 51, item 1)
      noGpu ? null : fig('GPU busy', fmtPct(s.gpu_utilization), s.gpu_utilization,
        s.step_mean_us !== null && s.step_mean_us !== undefined ? "tb-profiler's GPU utilization: kernel time over the steps' time"
          : "tb-profiler's GPU utilization: kernel time over the trace's time (no steps)"),
      item('uploaded', FP.fmtDate(s.created_at)),
      // a rank of a distributed run links its job, whose page links each rank back (issue 51, item 4)
      s.labels && s.labels.job ? el('span', {}, 'job: ', el('a', { id: 'to-job', href: `job.html?job=${encodeURIComponent(s.labels.job)}` },
        s.labels.job + (s.labels.rank !== undefined ? ` (rank ${s.labels.rank})` : ''))) : null,
      el('span', {}, Object.entries(s.labels || {}).map(([k, v]) => el('span', { class: 'badge label' }, `${k}:${v}`))),
      analysisNote(s));
  }

  // Which analysis its figures come from (issue 52); an older one can be re-analysed here (a
  // write: with --tokens-file the server answers 401 and the error says so).
  function analysisNote(s) {
    if (s.analysis_version === undefined) return '';
    const older = s.analysis_version < s.current_analysis_version;
    const failed = s.reanalysis_failure ? ` Its last re-analysis failed: ${s.reanalysis_failure.error}` : '';
    const button = el('button', { type: 'button', id: 'reanalyse', onclick: async (e) => {
      e.target.disabled = true;
      e.target.textContent = 'Re-analysing…';
      try { await api(`${base}/reanalyse`, { method: 'POST' }); location.reload(); } catch (_) { e.target.disabled = false; e.target.textContent = 'Re-analyse'; }
    } }, 'Re-analyse');
    return el('span', { id: 'analysis-version', class: older || failed ? 'note' : '' },
      `analysed by version ${s.analysis_version}` + (older ? `; current ${s.current_analysis_version}` : '') + '.' + failed + ' ',
      older || failed ? button : '');
  }

  // ---- replies several sections read (each requested once: FP.once) ----------------------------
  // Every operator row, in the server's order of the table's default sort (CUDA total; CPU
  // total on a CPU-only trace): the table's first page, the share chart, the report's long
  // names and trend.js's operator list are all cut from it.
  const ALL_OPS = 10000; // the most the server returns
  const allOps = () => FP.once(`${base}/operators${qs({ sort: noGpu ? 'cpu_time_total' : 'cuda_time_total', limit: ALL_OPS })}`);
  const topKernels = () => FP.once(`${base}/kernels${qs({ sort: 'total_us', limit: 50 })}`);

  // ---- report -------------------------------------------------------------------------------
  const LINES = [
    ['workload', 'Workload'], ['hardware', 'Hardware'], ['top_cuda_time', 'Top CUDA time'],
    ['top_cpu_cost', 'Top CPU cost'], ['next_experiment', 'Next experiment'],
  ];
  const reportEl = document.getElementById('report');

  let longNames = []; // kernel and operator names a report line may quote in full
  // Where text quotes the long name n: [start, length], in full or cut by the server (its
  // head then "…": the report cuts a name at 256 bytes), or null. Issue 51, item 7: the Top
  // CUDA line of an Nsight export quoted a 300-character kernel signature cut that way.
  function quoted(text, n) {
    const i = text.indexOf(n.slice(0, 60));
    if (i < 0) return null;
    let k = 0;
    while (k < n.length && text[i + k] === n[k]) k++;
    if (k === n.length) return [i, k];
    return text[i + k] === '…' ? [i, k + 1] : null;
  }
  function withShortNames(text) {
    const parts = [String(text)];
    for (const n of longNames) {
      for (let i = 0; i < parts.length; i++) {
        const at = typeof parts[i] === 'string' ? quoted(parts[i], n) : null;
        if (!at) continue;
        const t = parts[i];
        parts.splice(i, 1, t.slice(0, at[0]), FP.nameEl(n), t.slice(at[0] + at[1]));
        i++;
      }
    }
    return parts;
  }
  function renderReport(r) {
    const lines = r.lines || {};
    const edited = new Set(r.edited || []);
    reportEl.replaceChildren(...LINES.map(([key, label]) => {
      const text = el('span', { class: 'text', id: `line-${key}`, title: lines[key] || '' }, withShortNames(lines[key] || ''));
      const row = el('div', { class: 'report-line', dataset: { key } },
        el('span', { class: 'key', id: `label-${key}` }, label.replace('CUDA', word),
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

  async function loadReport() {
    if (!longNames.length) {
      const [k, o] = await Promise.all([topKernels().catch(() => ({})), allOps().catch(() => ({}))]);
      longNames = [...(k.kernels || []), ...(o.operators || []).slice(0, 50)].map((x) => x.name).filter((n) => n.length > 60)
        .sort((a, b) => b.length - a.length);
    }
    renderReport(await api(`${base}/report`));
  }

  // Evidence as words and units, never raw JSON: a list of {name, ...} reads "name (fields)".
  function evidence(ev) {
    if (!ev || typeof ev !== 'object') return null;
    return dl(Object.entries(ev).map(([k, v]) => [k.replace(/_/g, ' '), FP.fmtValue(k, v)]), 'facts small');
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
    { key: 'name', label: 'Name', rowHeader: true, value: T('name'), render: (r) => FP.nameEl(r.name) },
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
    // The default sort, no kind, no grouping: the rows every section shares, cut here (the
    // server's LIMIT gives the same first rows of the same order).
    const shared = (serverKey || 'cuda_time_total') === (noGpu ? 'cpu_time_total' : 'cuda_time_total') && !opKind.value && !opGroup.checked;
    let j = await (shared ? allOps() : api(`${base}/operators${q}`));
    if (shared && serverOrder && !filter && limit) j = { ...j, operators: (j.operators || []).slice(0, limit) };
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
  const yesNo = (b) => (b === true ? 'yes' : b === false ? 'no' : '—');
  const kCols = [
    { key: 'name', label: 'Kernel', rowHeader: true, render: (k) => FP.nameEl(k.name, k.short) },
    { key: 'calls', label: 'Calls', num: true, render: (k) => fmtInt(k.calls) },
    { key: 'total_us', label: 'Total', num: true, render: (k) => fmtTime(k.total_us) },
    { key: 'share', label: 'Share', num: true, render: (k) => fmtPct(k.share) },
    { key: 'tl', label: 'Trace', csv: false, sortable: false, render: (k) => el('a', { class: 'tl-link', href: FP.timelineHref(id, { find: k.name }), title: 'Its first call on the timeline, selected' }, 'timeline') },
    { key: 'mean_us', label: 'Mean', num: true, render: (k) => fmtTime(k.mean_us) },
    { key: 'min_us', label: 'Min', num: true, render: (k) => fmtTime(k.min_us) },
    { key: 'max_us', label: 'Max', num: true, render: (k) => fmtTime(k.max_us) },
    { key: 'grid', label: 'Grid', value: (k) => fmtDims(k.grid), render: (k) => fmtDims(k.grid) },
    { key: 'block', label: 'Block', value: (k) => fmtDims(k.block), render: (k) => fmtDims(k.block) },
    { key: 'registers_per_thread', label: 'Regs/thread', num: true, render: (k) => k.registers_per_thread ?? '—' },
    { key: 'shared_memory_bytes', label: 'Shared mem', num: true, render: (k) => fmtMem(k.shared_memory_bytes) },
    { key: 'blocks_per_sm', label: 'Blocks/SM', num: true, render: (k) => (k.blocks_per_sm === null || k.blocks_per_sm === undefined ? '—' : k.blocks_per_sm.toFixed(2)) },
    { key: 'est_occupancy', label: 'Est. occupancy', num: true, render: (k) => fmtPct(k.est_occupancy) },
    { key: 'est_sm_efficiency', label: 'SM efficiency', num: true, render: (k) => fmtPct(k.est_sm_efficiency) },
    { key: 'tensor_core', label: 'Tensor cores', value: (k) => (k.tensor_core ? 1 : 0), render: (k) => yesNo(k.tensor_core) },
  ];
  function clientTable(table, cols, rows, initial) {
    let st = { ...initial, clientSort: true };
    const draw = () => renderTable(table, cols, rows, st, (key) => { st = nextSort(st, key, cols); draw(); });
    draw();
  }
  async function loadKernels() {
    const j = await topKernels();
    const short = FP.shortNames((j.kernels || []).map((k) => k.name));
    (j.kernels || []).forEach((k, i) => { k.short = short[i]; });
    clientTable(document.getElementById('kernels'), kCols, j.kernels || [], { key: 'total_us', dir: 'descending' });
  }

  // ---- phases -------------------------------------------------------------------------------
  const pCols = [
    { key: 'name', label: 'Phase', rowHeader: true, render: (p) => FP.nameEl(p.name) },
    { key: 'kind', label: 'Kind' },
    { key: 'count', label: 'Count', num: true, render: (p) => fmtInt(p.count) },
    { key: 'total_us', label: 'Total', num: true, render: (p) => fmtTime(p.total_us) },
    // a range's own wall time, not a step role's (the step chart's data loading) nor the time
    // at stake (the first screen): named apart (issue 51, item 1)
    { key: 'mean_us', label: 'Mean range', title: "one range's wall time, start to end, on average", num: true, render: (p) => fmtTime(p.mean_us) },
    { key: 'gpu_busy_us', label: 'Busy in range', title: 'time with GPU work running while a range of this name is open', num: true, render: (p) => fmtTime(p.gpu_busy_us) },
    { key: 'busy_share', label: 'Busy of range', title: "busy in range over the ranges' wall time", num: true, value: (p) => (p.total_us ? p.gpu_busy_us / p.total_us : 0),
      render: (p) => (p.total_us ? fmtPct(p.gpu_busy_us / p.total_us) : '—') },
    { key: 'kernels', label: 'Kernels', num: true, render: (p) => fmtInt(p.kernels) },
    { key: 'kernel_mean_us', label: 'Kernel mean', num: true, render: (p) => fmtTime(p.kernel_mean_us) },
    { key: 'cpu_only_us', label: 'CPU only', num: true, render: (p) => fmtTime(p.cpu_only_us) },
  ];
  async function loadPhases() {
    const j = await api(`${base}/phases`);
    // a CPU-only trace has no GPU busy or kernels to show
    const cols = noGpu ? pCols.filter((c) => !/gpu_busy|busy_share|kernel/.test(c.key)) : pCols;
    clientTable(document.getElementById('phases'), cols, j.phases || [], { key: 'total_us', dir: 'descending' });
  }

  // ---- GPU facts ----------------------------------------------------------------------------
  // An idle gap's link: the gap with half its length either side; selected, the host operator
  // that was running as it ended (the last one starting before its end), when the gap names one.
  function gapHref(x) {
    const pad = Math.max(x.dur_us / 2, 5);
    return FP.timelineHref(id, { start: x.start_us - pad, end: x.start_us + x.dur_us + pad,
      find: x.host_op || null, at: x.host_op ? x.start_us + x.dur_us : null, dir: x.host_op ? 'prev' : null });
  }
  async function loadGpu() {
    try { sessionStart = (await summary).start_us || 0; } catch (_) { /* shown by loadSummary */ }
    const g = await api(`${base}/gpu`);
    const out = document.getElementById('gpu');
    const L = g.launch || {};
    const parts = [
      el('div', { class: 'cols' },
        el('div', {}, el('h3', {}, 'Utilisation'), dl([
          ['wall time', fmtTime(g.wall_us)],
          ['GPU busy', el('span', { dataset: { session: id, fig: 'GPU busy', value: g.gpu_utilization ?? '' }, title: "tb-profiler's GPU utilization" }, fmtPct(g.gpu_utilization))],
          ['busy of the wall', el('span', { dataset: { session: id, fig: 'busy of the wall', value: g.busy_fraction_of_wall ?? '' } }, fmtPct(g.busy_fraction_of_wall))],
          ['idle of the wall', el('span', { dataset: { session: id, fig: 'idle of the wall', value: g.gpu_idle_fraction ?? '' } }, fmtPct(g.gpu_idle_fraction))],
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
        { key: 'host_op', label: 'Host operator', render: (x) => FP.nameEl(x.host_op || '—') },
        { key: 'host_call', label: 'Host call', render: (x) => FP.nameEl(x.host_call || '—') },
        { key: 'tl', label: 'Trace', csv: false, render: (x) => el('a', { class: 'tl-link', href: gapHref(x), title: 'The gap on the timeline, with half its length either side; the host operator running at its end selected' }, 'timeline') }],
      gaps.largest || [], null, null);
      parts.push(el('h3', {}, `Device ${d.device}`),
        dl([['busy', fmtTime(d.busy_us)], ['idle', `${fmtTime(d.idle_us)} (${fmtPct(d.idle_fraction)} of the wall)`],
            ['idle gaps', `${fmtInt(gaps.count)} totalling ${fmtTime(gaps.total_us)}`]]),
        el('p', { class: 'muted small gap-def' }, `An idle gap is any stretch of at least 5µs with no kernel, copy or memset on the device; ` +
           `all ${fmtInt(gaps.count)} are counted here; the timeline marks the ${fmtInt((gaps.largest || []).length)} largest.`),
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

  // ---- pictures -----------------------------------------------------------------------------
  const CAT_COLORS = { data_loading: '#e15759', host_sync: '#f28e2b', python_overhead: '#b07aa1', launch_bound: '#edc948',
    cpu_bound_op: '#4e79a7', communication: '#76b7b2', copies_casts: '#9c755f', pageable_memcpy: '#ff9da7', compute_bound_op: '#59a14f', startup: '#d37295', tail: '#bab0ac',
    unfused_elementwise: '#8cd17d', tiny_kernels: '#f1ce63', math_below_roof: '#499894', recomputed_work: '#d4a6c8' };
  // GET /suspects' gpu_time_by_kind, in this order (issue 48: a busy GPU's time by kind of work)
  const KINDS = { math: 'math', data_movement: 'data movement', elementwise: 'elementwise', communication: 'communication', other: 'other' };
  const ROLE_COLORS = { kernel: '#59a14f', memcpy: '#edc948', memset: '#9c755f', communication: '#76b7b2', runtime: '#f28e2b',
    data_loading: '#e15759', cpu_exec: '#4e79a7', other: '#bab0ac' };
  const QUESTIONS = { kernels_packed: 'Are the kernels packed?', cpu_ranges_align: 'Do CPU ranges line up with their GPU work?',
    prefill_dense_decode_small: 'Prefill one dense block, decode many small ones?', copies_on_critical_path: 'Copies on the critical path?' };

  // The first screen's answer to "what next" (issue 42, item 8): the top suspect in full, its
  // time at stake per step and as a share of the wall, and its next experiment.
  function renderNext(j) {
    const box = document.getElementById('next-body');
    const list = j.suspects || [];
    if (!j.computed) {
      box.replaceChildren(el('p', {}, 'No suspect list for this session (stored before firstpass computed one): upload it again.'));
      return;
    }
    if (!list.length) {
      box.replaceChildren(el('p', { id: 'next-none' }, `Nothing holds more than 5% of the wall${j.healthy ? ': healthy' : ''}. ` +
        'Compare with a baseline to see what moved.'));
      return;
    }
    const top = list[0];
    const perStep = top.at_stake_per_step_us;
    box.replaceChildren(...[
      el('p', { class: 'next-culprit' }, el('span', { class: 'next-cat', dataset: { category: top.category } }, top.category.replace(/_/g, ' ')),
        ': ', el('b', { id: 'next-culprit' }, top.culprit), ' ',
        el('a', { id: 'next-timeline', class: 'tl-link', href: culpritHref(top), title: 'The first instance on the timeline, selected' }, 'see it in the timeline')),
      el('p', { class: 'next-stake' }, 'GPU idle at stake: ',
        perStep !== null && perStep !== undefined
          ? el('b', { id: 'next-per-step', dataset: { value: perStep } }, `${fmtTime(perStep)} per step`)
          : el('b', { id: 'next-once', dataset: { value: top.at_stake_us } }, `${fmtTime(top.at_stake_us)} once`),
        ', ', el('b', { id: 'next-share', dataset: { value: top.at_stake_fraction } }, `${fmtPct(top.at_stake_fraction)} of the wall`),
        ` (${fmtTime(top.at_stake_us)} of ${fmtTime(j.wall_us)}; at most what removing the cause could save).`),
      el('p', { class: 'next-exp' }, el('span', { class: 'key' }, 'Next experiment: '), el('span', { id: 'next-experiment' }, top.next_experiment)),
      list.length > 1 ? el('p', { class: 'muted small' }, 'Then: ', list.slice(1, 3).map((x, i) =>
        [i ? '; ' : '', `${x.category.replace(/_/g, ' ')} `, el('a', { class: 'tl-link next-then', href: culpritHref(x) }, FP.nameEl(x.culprit, FP.shortName(x.culprit, 50))),
          ` (${fmtPct(x.at_stake_fraction)})`])) : null,
    ].filter(Boolean));
  }

  // A suspect's link into the timeline: its culprit, the first instance selected (issue 51,
  // item 3). A suspect names no window of its own, so the timeline fits the view to the event.
  // Startup and tail name a stretch, not an event: their link is that window (the session's
  // start to its first GPU work, its last GPU work to its end), and a culprit in parentheses
  // ("(untraced)") names no event to select.
  let sessionEnd = null;
  function culpritHref(x) {
    const ev = x.evidence || {}, named = x.culprit && !x.culprit.startsWith('(');
    if (x.category === 'startup' && ev.lead_in_us > 0)
      return FP.timelineHref(id, { start: sessionStart, end: sessionStart + ev.lead_in_us, find: named ? x.culprit : null });
    if (x.category === 'tail' && ev.tail_us > 0 && sessionEnd !== null)
      return FP.timelineHref(id, { start: sessionEnd - ev.tail_us, end: sessionEnd, find: named ? x.culprit : null });
    return FP.timelineHref(id, { find: named ? x.culprit : null });
  }

  // GET /suspects' gpu_time_by_kind_by_phase (issue 48 item 1): a row per phase, the phases
  // with the most GPU time first, as the reply orders them; a column per kind the session has
  // time of, each the share of the phase's GPU time (its time on hover and in data-us).
  const KIND_PHASES_SHOWN = 10; // rows drawn before "show all" (the reply has up to 50)
  function renderKindsByPhase(rows, dropped, kinds, all = false) {
    const box = document.getElementById('gpu-kinds-phases-box');
    box.hidden = !(rows && rows.length);
    if (box.hidden) return;
    const cols = [
      { key: 'phase', label: 'Phase', rowHeader: true, render: (r) => FP.nameEl(r.phase, FP.shortName(r.phase, 60)) },
      { key: 'gpu_us', label: 'GPU time', num: true, render: (r) => el('span', { dataset: { us: String(r.gpu_us) } }, fmtTime(r.gpu_us)) },
      ...Object.keys(KINDS).filter((k) => kinds && kinds[k] && kinds[k].us > 0).map((k) => ({
        key: k, label: KINDS[k], num: true, value: (r) => r[k].fraction,
        render: (r) => el('span', { title: fmtTime(r[k].us), dataset: { kind: k, us: String(r[k].us) } }, fmtPct(r[k].fraction)) }))];
    const cut = !all && rows.length > KIND_PHASES_SHOWN;
    renderTable(document.getElementById('gpu-kinds-phases'), cols, cut ? rows.slice(0, KIND_PHASES_SHOWN) : rows, null, null);
    const left = dropped ? [dropped.rows ? `${fmtInt(dropped.rows)} more phase${dropped.rows === 1 ? '' : 's'} not listed by the server` : '',
      dropped.phases ? `${fmtInt(dropped.phases)} name${dropped.phases === 1 ? '' : 's'} past the 256 tracked (${fmtTime(dropped.gpu_us)} of GPU time inside them)` : '']
      .filter(Boolean) : [];
    document.getElementById('gpu-kinds-phases-note').replaceChildren('The GPU work launched inside each record_function / NVTX range name ' +
      '(nested ranges: in each enclosing phase), by kind, as a share of the phase\'s GPU time; the phases with the most GPU time first.' +
      (left.length ? ` ${left.join('; ')}.` : ''), ...(cut ? [' ', el('button', { type: 'button', id: 'gpu-kinds-phases-all',
      onclick: () => renderKindsByPhase(rows, dropped, kinds, true) }, `Show all ${fmtInt(rows.length)}`)] : []));
  }

  async function loadSuspects() {
    const j = await shown(firstScreen.suspects);
    try { // the summary was asked for beside the suspects: the tail's window needs its end
      const sm = await summary;
      sessionStart = sm.start_us || 0;
      sessionEnd = sm.end_us ?? null;
    } catch (_) { /* shown by loadSummary */ }
    renderNext(j);
    const box = document.getElementById('suspects-chart');
    const list = j.suspects || [];
    const kinds = j.gpu_time_by_kind;
    document.getElementById('gpu-kinds').replaceChildren(...(kinds ? ['GPU time by kind of work: ',
      ...Object.keys(KINDS).filter((k) => kinds[k]).map((k, i) => el('span', { dataset: { kind: k, us: String(kinds[k].us) } },
        `${i ? ', ' : ''}${KINDS[k]} ${fmtPct(kinds[k].fraction)} (${fmtTime(kinds[k].us)})`))] : []));
    renderKindsByPhase(j.gpu_time_by_kind_by_phase, j.gpu_time_by_kind_by_phase_dropped, kinds);
    document.getElementById('suspects-note').textContent = !j.computed ? 'Not computed for this session (stored before suspects existed).'
      : list.length ? `Ranked by the wall time at stake (at most what removing the cause could save); ${j.healthy ? 'healthy' : 'not healthy'}.`
        : `Nothing at stake above 5% of the wall${j.healthy ? ': healthy' : ''}.`;
    // 26: "compute bound op: " and the culprit fit the 294-unit gutter at 11px (30 could not)
    box.replaceChildren(list.length ? FPC.bars(list.map((x) => ({ label: `${x.category.replace(/_/g, ' ')}: ${FP.shortName(x.culprit, 26)}`,
      title: `${x.category.replace(/_/g, ' ')}: ${x.culprit}. ${x.next_experiment}`, value: x.at_stake_us, color: CAT_COLORS[x.category], href: culpritHref(x) })),
    (v) => fmtTime(v), { label: 'Suspects by time at stake', labelW: 300 }) : '');
    const q = j.questions || {};
    document.getElementById('questions').replaceChildren(...Object.entries(QUESTIONS).filter(([k]) => q[k]).map(([k, text]) =>
      el('li', { dataset: { question: k, answer: q[k].answer } }, el('b', {}, text), ' ',
        el('span', { class: `answer a-${q[k].answer.replace('/', '')}` }, q[k].answer), el('div', { class: 'small' }, q[k].summary || ''))));
  }

  // The step chart: the mean step first, then each step, on one axis; each role's share of the
  // mean step in the legend, as tb-profiler's overview gives it. The phases are totals over
  // the window (a DataLoader phase of 6 instances is 6 steps' worth), so they get a chart of
  // their own, never the steps' axis.
  async function loadSteps() {
    // the first 1,000 steps drawn (the API pages them, issue 50); the mean is of them all
    const j = await shown(firstScreen.steps);
    const roles = j.roles || Object.keys(ROLE_COLORS);
    const part = (r) => Object.fromEntries(roles.map((k) => [k, r[`${k}_us`] || 0]));
    const steps = j.steps || [], phases = j.phases || [], mean = j.mean;
    const total = j.total ?? steps.length;
    const meanDur = mean ? (mean.dur_us ?? roles.reduce((a, k) => a + (mean[`${k}_us`] || 0), 0)) : 0;
    const rows = (mean ? [{ label: 'mean step', title: `mean step (of ${total} step${total === 1 ? '' : 's'})`, parts: part(mean), mean: true }] : [])
      .concat(steps.map((r) => ({ label: r.name, parts: part(r),
        // the step's own window, its ProfilerStep range selected
        href: r.start_us !== undefined ? FP.timelineHref(id, { start: r.start_us, end: r.start_us + r.dur_us, find: r.name }) : null })));
    const note = document.getElementById('steps-note');
    note.dataset.meanUs = mean ? String(meanDur) : '';
    note.replaceChildren(...(steps.length
      ? [el('b', { id: 'step-mean', dataset: { session: id, value: meanDur, fig: 'mean step' } }, `Mean step ${fmtTime(meanDur)}`),
        ` over ${total} step${total === 1 ? '' : 's'} (ProfilerStep#N to the end of its GPU work, as tb-profiler counts them)` +
        `${total > steps.length ? `, the first ${steps.length} drawn` : ''}` +
        `${j.dropped_steps ? `; ${j.dropped_steps} more not counted (no GPU work, or a step cut by the window)` : ''}` +
        `${j.steps_over_cap ? `; ${j.steps_over_cap} more past the server's --max-steps, not split` : ''}. ` +
        "Each role's time in the mean step and its share (roles take the time in priority order, GPU work first, as tb-profiler's " +
        "overview does: data loading is the step's time inside a DataLoader range that no GPU work or runtime call covers, not the range's wall time):"]
      : ['No ProfilerStep in this trace.']));
    const box = document.getElementById('steps-chart');
    const share = (k) => (meanDur ? fmtShare(mean[`${k}_us`] || 0, meanDur) : '—');
    box.replaceChildren(...(rows.length ? [FPC.stacked(rows, roles, ROLE_COLORS, fmtTime, { label: 'Step time by role' }),
      FPC.legend(roles, ROLE_COLORS, mean ? (k) => `${share(k)} (${fmtTime(mean[`${k}_us`] || 0)})` : null)] : []));
    const pbox = document.getElementById('steps-phases-chart');
    document.getElementById('steps-phases-note').textContent = phases.length
      ? 'The longest record_function phases, each the total over the window of all its instances (not per step), split the same way.'
      : '';
    pbox.replaceChildren(...(phases.length ? [FPC.stacked(phases.map((r) => ({ label: `${FP.shortName(r.name, 40)} ×${r.count}`, title: r.name, parts: part(r) })),
      roles, ROLE_COLORS, fmtTime, { label: 'Phase totals by role', labelW: 300 })] : []));
  }

  async function loadBusy(s) {
    const N = 60;
    const j = await api(`${base}/busy${qs({ buckets: N })}`);
    const box = document.getElementById('busy-chart');
    const w = j.wall_us / N;
    // busy of the wall: kernels, copies and memsets over the whole span, named by what it
    // divides by ("GPU busy" alone is tb-profiler's utilization: the header's)
    const note = document.getElementById('busy-note');
    note.replaceChildren(...((j.devices || []).length
      ? [`Share of each ${fmtTime(w)} slice with a kernel, copy or memset running; white is idle. `,
        ...(j.devices || []).map((d, i) => [i ? '; ' : '', `GPU ${d.device}: `,
          el('span', { dataset: { session: id, fig: `GPU ${d.device} busy of the wall`, value: d.busy_fraction } }, `busy ${fmtPct(d.busy_fraction)} of the wall`),
          ` (${fmtTime(d.busy_us)} of ${fmtTime(j.wall_us)})`]), '.'].flat(Infinity)
      : ['No GPU work in this trace.']));
    box.replaceChildren(...(j.devices || []).map((d) => el('div', { class: 'busy-row', dataset: { device: d.device } }, el('span', { class: 'small' }, `GPU ${d.device}`),
      FPC.columns(d.buckets || [], (v) => fmtPct(v, 0), { label: `GPU ${d.device} busy share of each slice over time`, from: '0', to: fmtTime(j.wall_us),
        xTitle: 'time since the session start',
        slice: (i) => `${fmtTime(i * w)}–${fmtTime((i + 1) * w)}` }))));
  }

  // The top operators' self GPU time (every kernel counted once, under the innermost op that
  // launched it), the other operators, and what no operator launched, so the bars add up to
  // the GPU time; CPU time on a CPU-only trace. A runtime call is never GPU time (issue 42,
  // item 7): runtime and driver calls are not operators here.
  const NOT_OPS = /^(kernel|gpu_memcpy|gpu_memset|gpu_user_annotation|cuda_runtime|cuda_driver)$/;
  async function loadShare() {
    const key = noGpu ? 'self_cpu_time_total' : 'self_cuda_time_total';
    const j = await allOps();
    const total = (j.totals || {})[`${key}_us`] || 0;
    const host = (j.operators || []).filter((r) => (noGpu ? !/^(kernel|gpu_memcpy|gpu_memset|gpu_user_annotation)$/.test(r.kind) : !NOT_OPS.test(r.kind)) &&
      r[`${key}_us`] > 0).sort((a, b) => b[`${key}_us`] - a[`${key}_us`]);
    // No operator launched any of it (an Nsight export, a collector session): the GPU rows
    // themselves, so the picture still says where the time went.
    const gpuRows = noGpu ? [] : (j.operators || []).filter((r) => /^(kernel|gpu_memcpy|gpu_memset)$/.test(r.kind) && r[`${key}_us`] > 0)
      .sort((a, b) => b[`${key}_us`] - a[`${key}_us`]);
    const byKernel = !host.length && gpuRows.length > 0;
    const rows = byKernel ? gpuRows : host;
    const top = rows.slice(0, 8);
    const sum = (rs) => rs.reduce((a, r) => a + r[`${key}_us`], 0);
    const others = sum(rows.slice(8)), outside = total - sum(rows);
    // distinct names keep distinct labels (issue 51, item 7: two kernels shared one)
    const short = FP.shortNames(top.map((r) => r.name), 36);
    const items = top.map((r, i) => ({ label: short[i], title: r.name, value: r[`${key}_us`] }));
    const what = byKernel ? 'kernels' : 'operators';
    if (others > 0.0005) items.push({ label: `other ${what}`, title: `other ${what} (${rows.length - top.length})`, value: others, color: '#bab0ac' });
    if (!noGpu && outside > 0.0005) items.push({ label: 'launched outside every operator', value: outside, color: '#d3d3d3' });
    if (noGpu && outside > 0.0005) items.push({ label: 'everything else', value: outside, color: '#bab0ac' });
    document.getElementById('share-h').textContent = noGpu ? "Top operators' share of CPU time" : `Top ${what}' share of GPU time`;
    document.getElementById('share-note').textContent = !noGpu && !(total > 0) ? 'No GPU time in this trace: no kernel, copy or memset ran.'
      : byKernel ? `No operator launched GPU work in this trace (a runtime call is not GPU time): each kernel's time; the bars add up to ${fmtTime(total)}, the GPU time.`
      : `Self ${noGpu ? 'CPU' : word} time per operator; the bars add up to ${fmtTime(total)}` +
        (noGpu ? '.' : ', the GPU time; what ran with no operator around its launch has a bar of its own (a runtime call is not GPU time).');
    document.getElementById('share-chart').replaceChildren(items.length ? FPC.bars(items, (v) => `${fmtTime(v)} (${fmtShare(v, total)})`, { label: 'Top operators', labelW: 300 }) : '');
  }

  // Memory per device: allocated (the trace's Total Allocated when it has it) and reserved
  // (Total Reserved) over time, each with its peak and when.
  async function loadMemory() {
    const j = await api(`${base}/memory`);
    const devs = j.devices || [];
    document.getElementById('mem-note').textContent = devs.length
      ? 'Memory over time from the [memory] events (profile_memory=True), per device; the dot is the peak. Allocated is what the ' +
        'allocator held (the trace\'s Total Allocated, before the window included) where the trace has it; reserved, dashed, is its Total Reserved.'
      : 'No [memory] events: record with profile_memory=True to see memory.';
    document.getElementById('memory').replaceChildren(...devs.map((d) => {
      const fromTotals = d.allocated_from !== 'running_sum';
      const hasRes = d.reserved_peak_bytes !== null && d.reserved_peak_bytes !== undefined;
      return el('div', { class: 'mem-dev', dataset: { device: d.device, allocatedFrom: d.allocated_from || 'running_sum' } },
        el('h3', {}, d.device), dl([
          ['peak allocated', fmtMem(d.peak_bytes)], ['peak allocated at', fmtTime(d.peak_ts_us - sessionStart)],
          ...(hasRes ? [['peak reserved', fmtMem(d.reserved_peak_bytes)], ['peak reserved at', fmtTime(d.reserved_peak_ts_us - sessionStart)]] : []),
          ['allocated at the end', fmtMem(d.end_bytes)], ['allocations', fmtInt(d.allocations)],
          ['allocated is', fromTotals ? "the trace's Total Allocated" : 'the running sum of the window\'s allocations and frees (the trace has no Total Allocated)']]),
        FPC.line(d.samples || [], (x) => fmtTime(x - sessionStart), fmtMem, { label: `${d.device} memory over time`, xTitle: 'time since the session start',
          second: hasRes ? d.reserved_samples || [] : null }));
    }));
    const cols = [
      { key: 'name', label: 'Operator', rowHeader: true, render: (r) => FP.nameEl(r.name) },
      { key: 'calls', label: 'Calls', num: true, render: (r) => fmtInt(r.calls) },
      { key: 'self_cuda_memory_usage_bytes', label: `Self ${word} Mem`, num: true, render: (r) => fmtMem(r.self_cuda_memory_usage_bytes) },
      { key: 'self_cpu_memory_usage_bytes', label: 'Self CPU Mem', num: true, render: (r) => fmtMem(r.self_cpu_memory_usage_bytes) }];
    const memRows = (j.top_operators || []).slice(0, 15);
    document.getElementById('mem-ops').closest('.table-wrap').hidden = !memRows.length;
    const memCols = noGpu ? cols.filter((c) => !/cuda/.test(c.key)) : cols;
    clientTable(document.getElementById('mem-ops'), memCols, memRows, { key: noGpu ? 'self_cpu_memory_usage_bytes' : 'self_cuda_memory_usage_bytes', dir: 'descending' });
  }

  // The session's kind decides the words and the columns: "GPU" for AMD, and no GPU columns,
  // sorted by CPU total, on a CPU-only trace.
  function adapt(s) {
    noGpu = FP.cpuOnly(s);
    word = noGpu ? 'GPU' : FP.gpuWord(s);
    for (const c of opCols) c.label = c.label.replace('CUDA', word);
    for (const o of document.querySelectorAll('#trend-metric option')) o.textContent = o.textContent.replace('CUDA', word);
    if (noGpu) {
      for (let i = opCols.length - 1; i >= 0; i--) if (/cuda/.test(opCols[i].key)) opCols.splice(i, 1);
      opSort = { key: 'cpu_time_total', dir: 'descending' };
      for (const sel of ['#busy-h', '#busy-note', '#busy-chart', '#k-h', '#gpu-h']) {
        const e = document.querySelector(sel);
        (e.closest('section:not(#pictures)') || e).hidden = true;
      }
    }
  }

  // A missing session: one message in the page, nothing else under it.
  function missing(e) {
    FP.clearError();
    for (const x of document.querySelectorAll('main > :not(h1):not(#missing)')) x.hidden = true;
    document.getElementById('title').textContent = 'No such session';
    const m = document.getElementById('missing');
    m.className = 'note';
    m.replaceChildren(e.status === 404 ? `There is no session ${id}: it was deleted, or never uploaded. ` : `Session ${id} could not be read: ${e.message}. `,
      el('a', { href: 'index.html' }, 'Back to the sessions'));
    m.hidden = false;
  }

  // Each section loads on its own, so one failing endpoint does not blank the page.
  summary.then((s) => {
    adapt(s);
    for (const f of [loadSummary, loadSuspects, loadSteps, loadBusy, loadShare, loadReport, loadOperators, loadKernels, loadMemory, loadPhases, loadGpu]) f().catch(() => {});
  }, missing);
})();