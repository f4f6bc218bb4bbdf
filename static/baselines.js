// baselines.js: the baselines and the regression check as a page (baselines.html; issue 42,
// item 9). Set a baseline from a session (PUT /api/v1/baselines/{name}), list and delete them
// (GET, DELETE), and check a run against one (GET /api/v1/sessions/{id}/regressions): the
// verdict and its one-sentence why, the step statistics it came from, the named phases past
// the noise floor, and the items that moved, as the explanation. ?session=ID pre-selects a
// session (the session page links here); ?head=ID&baseline=NAME runs the check at once.
'use strict';
(() => {
  const { api, el, qs, fmtTime, fmtPct, fmtInt, fmtSigned, renderTable, nextSort, dl } = FP;
  const headSel = document.getElementById('head'), againstSel = document.getElementById('against');
  const gateSel = document.getElementById('gate'), setSel = document.getElementById('set-session');
  const setName = document.getElementById('set-name'), setStatus = document.getElementById('set-status');
  let baselines = [];

  async function fillSessions() {
    const j = await api('/api/v1/sessions' + qs({ limit: 200 }));
    const opts = (sel) => sel.replaceChildren(el('option', { value: '' }, '— pick a session —'),
      ...(j.sessions || []).map((s) => el('option', { value: String(s.id) }, `#${s.id} ${FP.sessionName(s)}${s.hardware ? ' · ' + s.hardware : ''}`)));
    opts(headSel);
    opts(setSel);
    const pick = FP.param('head') || FP.param('session') || '';
    headSel.value = pick;
    setSel.value = FP.param('session') || '';
    if (['steps', 'operators', 'memory'].includes(FP.param('gate'))) gateSel.value = FP.param('gate');
  }

  async function loadBaselines() {
    baselines = (await api('/api/v1/baselines')).baselines || [];
    const keep = againstSel.value || FP.param('baseline') || '';
    againstSel.replaceChildren(el('option', { value: '' }, 'the newest baseline whose labels the run has'),
      ...baselines.map((b) => el('option', { value: b.name }, `${b.name} (session #${b.session_id})`)));
    againstSel.value = baselines.some((b) => b.name === keep) ? keep : '';
    const cols = [
      { key: 'name', label: 'Name', rowHeader: true, value: (b) => b.name },
      { key: 'session', label: 'Session', value: (b) => b.session_id,
        render: (b) => el('a', { href: `session.html?id=${b.session_id}` }, `#${b.session_id} ${b.session_name || ''}`) },
      { key: 'labels', label: 'Labels', value: (b) => Object.entries(b.labels || {}).map(([k, v]) => `${k}:${v}`).join(' '),
        render: (b) => Object.entries(b.labels || {}).map(([k, v]) => el('span', { class: 'badge label' }, `${k}:${v}`)) },
      { key: 'updated_at', label: 'Updated', value: (b) => b.updated_at, render: (b) => FP.fmtDate(b.updated_at) },
      { key: 'act', label: '', sortable: false, csv: false, render: (b) => [
        el('button', { type: 'button', class: 'check-against', onclick: () => { againstSel.value = b.name; if (headSel.value) check(); else headSel.focus(); } }, 'Check a run against it'), ' ',
        el('button', { type: 'button', class: 'danger', 'aria-label': `Delete baseline ${b.name}`, onclick: () => remove(b.name) }, 'Delete')] },
    ];
    let st = { key: 'updated_at', dir: 'descending', clientSort: true };
    const draw = () => renderTable(document.getElementById('baselines'), cols, baselines, st, (k) => { st = nextSort(st, k, cols); draw(); });
    draw();
  }

  async function remove(name) {
    if (!confirm(`Delete baseline ${name}? Sessions stay.`)) return;
    await api(`/api/v1/baselines/${encodeURIComponent(name)}`, { method: 'DELETE' });
    await loadBaselines();
  }

  document.getElementById('set').addEventListener('submit', async (e) => {
    e.preventDefault();
    const name = setName.value.trim();
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(name)) { setStatus.textContent = 'A name is 1 to 64 of A-Z a-z 0-9 . _ -'; return; }
    const b = await api(`/api/v1/baselines/${encodeURIComponent(name)}`, { method: 'PUT', body: { session_id: Number(setSel.value) } });
    setStatus.replaceChildren(`Baseline ${b.name} is session #${b.session_id}`,
      Object.keys(b.labels || {}).length ? ` (labels ${Object.entries(b.labels).map(([k, v]) => `${k}:${v}`).join(' ')})` : ' (no labels)', '.');
    await loadBaselines();
    againstSel.value = b.name;
  });

  const dir = (d) => (d === 'regressed' ? 'slower' : d === 'improved' ? 'faster' : null);
  const dTime = (d) => (d === null || d === undefined ? '—' : fmtSigned(d, fmtTime));
  const dRel = (r) => (r === null || r === undefined || !isFinite(r) ? '—' : fmtSigned(r, (x) => fmtPct(x)));
  const num = (unit, v) => (unit === 'us' ? fmtTime(v) : unit === 'fraction' ? fmtPct(v) : fmtInt(v));

  async function check() {
    const head = headSel.value;
    if (!head) { headSel.focus(); return; }
    const q = qs({ baseline: againstSel.value || null, gate: gateSel.value === 'steps' ? null : gateSel.value });
    const box = document.getElementById('verdict');
    let r;
    try {
      r = await api(`/api/v1/sessions/${encodeURIComponent(head)}/regressions${q}`, { quiet: true });
    } catch (e) {
      box.replaceChildren(el('p', { class: 'note', id: 'verdict-error' }, e.message));
      document.getElementById('why-details').hidden = true;
      return;
    }
    const v = r.verdict || {};
    box.replaceChildren(el('div', { class: `verdict ${r.regressed ? 'regressed' : 'clean'}`, id: 'verdict-box', dataset: { regressed: String(r.regressed), gate: r.gate || v.gate || 'steps' } },
      el('p', { class: 'head' }, r.regressed ? `Regressed: session #${r.head_session_id} against baseline ${r.baseline}` : `Not regressed: session #${r.head_session_id} against baseline ${r.baseline}`),
      el('p', { id: 'verdict-why' }, v.why || ''),
      dl([['baseline', el('span', {}, `${r.baseline} `, el('a', { href: `session.html?id=${r.base_session_id}` }, `session #${r.base_session_id}`), r.auto_picked ? ' (picked by labels)' : '')],
        ['run', el('a', { href: `session.html?id=${r.head_session_id}` }, `session #${r.head_session_id}`)],
        ['gate', r.gate === 'operators' ? 'operators (every item counts too)' : r.gate === 'memory' ? 'memory (the step, the named phases and the GPU memory peak decide)'
          : 'steps (the step and the named phases decide)'],
        ['compare', el('a', { href: `compare.html?base=${r.base_session_id}&head=${r.head_session_id}` }, 'side by side')]])));
    document.getElementById('why-details').hidden = false;
    const s = v.steps;
    renderTable(document.getElementById('verdict-steps'), [
      { key: 'side', label: 'Side', rowHeader: true },
      { key: 'count', label: 'Steps', num: true, render: (x) => fmtInt(x.count) },
      { key: 'mean', label: 'Mean step', num: true, render: (x) => el('span', { dataset: { value: x.mean_us, fig: 'mean step',
        session: x.side === 'baseline' ? r.base_session_id : r.head_session_id } }, fmtTime(x.mean_us)) },
      { key: 'sd', label: 'Std. deviation', num: true, render: (x) => fmtTime(x.stdev_us) }],
    s ? [{ side: 'baseline', ...s.base }, { side: 'run', ...s.head }] : [], null, null);
    if (s) {
      document.getElementById('verdict-steps').append(el('tfoot', {}, el('tr', {}, el('th', { scope: 'row' }, 'difference'),
        el('td', { class: `num ${dir(s.direction) || ''}`, colspan: 3, id: 'verdict-delta' },
          `${dTime(s.delta_us)} (${dRel(s.relative)}) against a noise floor of ${fmtTime(v.noise_us)}: ${s.direction}`))));
    }
    renderTable(document.getElementById('verdict-phases'), [
      { key: 'name', label: 'Phase', rowHeader: true, render: (p) => FP.nameEl(p.name) },
      { key: 'status', label: 'Status', cls: (p) => `status-${p.status}` },
      // a range's wall time per step: named apart from the step chart's role and the time at stake (issue 51, item 1)
      { key: 'b', label: 'Range time per step, base', num: true, value: (p) => p.base_per_step_us, render: (p) => fmtTime(p.base_per_step_us) },
      { key: 'h', label: 'Range time per step, run', num: true, value: (p) => p.head_per_step_us, render: (p) => fmtTime(p.head_per_step_us) },
      { key: 'd', label: 'Δ per step', num: true, value: (p) => p.delta_us, render: (p) => dTime(p.delta_us), cls: (p) => dir(p.direction) },
      { key: 'direction', label: 'Verdict', cls: (p) => dir(p.direction) }],
    v.phases || [], null, null);
    // the memory gate: the peak on each side and its verdict
    const m = v.memory;
    document.getElementById('verdict-memory-box').hidden = r.gate !== 'memory';
    if (r.gate === 'memory') {
      renderTable(document.getElementById('verdict-memory'), [
        { key: 'side', label: 'Side', rowHeader: true },
        { key: 'peak', label: 'Peak allocated', num: true, value: (x) => x.peak, render: (x) => el('span', { dataset: { value: x.peak ?? '' } }, FP.fmtMem(x.peak)) }],
      m ? [{ side: 'baseline', peak: m.base_peak_bytes }, { side: 'run', peak: m.head_peak_bytes }] : [], null, null,
      'Not judged: not both sessions have GPU memory events (profile_memory=True).');
      if (m) {
        document.getElementById('verdict-memory').append(el('tfoot', {}, el('tr', {}, el('th', { scope: 'row' }, 'difference'),
          el('td', { class: `num ${dir(m.direction) || ''}`, id: 'verdict-memory-delta' },
            `${fmtSigned(m.delta_bytes, FP.fmtMem)} (${dRel(m.relative)}): ${m.direction}`))));
      }
    }
    document.getElementById('items-note').textContent = `${fmtInt(r.counts.regressed)} moved the wrong way, ${fmtInt(r.counts.improved)} the right way, ` +
      `compared ${r.basis === 'per_step' ? 'per step' : 'per call'}; thresholds: more than ${fmtPct(r.thresholds.rel, 0)} and more than ` +
      `${fmtTime(r.thresholds.abs_us)} (${fmtInt(r.thresholds.abs_calls)} calls). ` +
      (r.gate === 'operators' ? 'With the operators gate, one regressed item fails the run.' : 'They explain the verdict; they do not decide it.');
    renderTable(document.getElementById('verdict-items'), [
      { key: 'direction', label: 'Direction', cls: (i) => dir(i.direction) },
      { key: 'kind', label: 'Kind' },
      { key: 'name', label: 'Name', rowHeader: true, render: (i) => FP.nameEl(i.name) },
      { key: 'metric', label: 'Metric', render: (i) => i.metric.replace(/_/g, ' ') },
      { key: 'base', label: 'Base', num: true, render: (i) => num(i.unit, i.base) },
      { key: 'head', label: 'Run', num: true, render: (i) => num(i.unit, i.head) },
      { key: 'relative', label: 'Δ %', num: true, render: (i) => dRel(i.relative), cls: (i) => dir(i.direction) }],
    (r.items || []).slice(0, 100), null, null);
  }
  document.getElementById('check').addEventListener('submit', (e) => { e.preventDefault(); check().catch(() => {}); });

  Promise.all([fillSessions(), loadBaselines()]).then(() => {
    if (FP.param('head')) check().catch(() => {});
  }).catch(() => { /* the banner shows it */ });
})();
