// sessions.js: the session list (index.html): filter, upload with progress, delete.
'use strict';
(() => {
  const { api, el, qs, fmtTime, fmtPct, fmtInt, fmtDate, smellText, showError, clearError, renderTable } = FP;
  const table = document.getElementById('sessions');
  const more = document.getElementById('more');
  const fName = document.getElementById('f-name');
  const fLabel = document.getElementById('f-label');
  const PAGE = Math.min(1000, Math.max(1, Number(FP.param('limit')) || 50)); // ?limit= sizes a page
  if (FP.param('label')) fLabel.value = FP.param('label'); // ?label=k:v: a filtered list to share
  if (FP.param('q')) fName.value = FP.param('q');
  let rows = [];
  let next = null;

  const picked = [];
  const pickBtn = document.getElementById('compare-picked');
  function pick(s, on) {
    const i = picked.indexOf(s.id);
    if (on && i < 0) picked.push(s.id);
    if (!on && i >= 0) picked.splice(i, 1);
    while (picked.length > 2) picked.shift(); // the two latest picks
    for (const b of table.querySelectorAll('input.pick')) b.checked = picked.includes(Number(b.dataset.id));
    pickBtn.disabled = picked.length !== 2;
  }
  pickBtn.addEventListener('click', () => {
    if (picked.length === 2) location.href = `compare.html${qs({ base: Math.min(...picked), head: Math.max(...picked) })}`;
  });
  function labelFilter(k, v) {
    fLabel.value = `${k}:${v}`;
    load(false).catch(() => {});
  }
  // Labels: the first LABELS_SHOWN badges, the rest behind "+N more" (issue 51, item 7: a
  // captured session's nine badges made a row six lines tall). The button shows them all.
  const LABELS_SHOWN = 3;
  function labelCell(s) {
    const all = Object.entries(s.labels || {}).map(([k, v]) => el('button', { type: 'button', class: 'badge label', title: `Show only ${k}:${v}`,
      onclick: () => labelFilter(k, v) }, `${k}:${v}`));
    if (all.length <= LABELS_SHOWN) return all;
    const rest = el('span', { class: 'more-labels', hidden: true }, all.slice(LABELS_SHOWN));
    const more = el('button', { type: 'button', class: 'badge more', 'aria-expanded': 'false', title: all.slice(LABELS_SHOWN).map((b) => b.textContent).join(' '),
      onclick: () => { rest.hidden = false; more.remove(); } }, `+${all.length - LABELS_SHOWN} more`);
    return [...all.slice(0, LABELS_SHOWN), more, rest];
  }
  // The top suspect in words: its category and its culprit, short (whole on hover).
  function suspectCell(s) {
    const t = s.top_suspect;
    if (!t) return s.step_mean_us === undefined ? '—' : 'none above 5%';
    return el('span', { class: 'suspect', title: `${t.category.replace(/_/g, ' ')}: ${t.culprit} (${fmtPct(t.at_stake_fraction)} of the wall at stake)` },
      el('b', {}, t.category.replace(/_/g, ' ')), ' ', FP.shortName(t.culprit, 30), ` (${fmtPct(t.at_stake_fraction, 0)})`);
  }
  const cols = [
    { key: 'pick', label: 'Pick', sortable: false, csv: false, render: (s) => el('input', { type: 'checkbox', class: 'pick', 'data-id': s.id,
      'aria-label': `Pick ${FP.sessionName(s)} to compare`, checked: picked.includes(s.id), onchange: (e) => pick(s, e.target.checked) }) },
    { key: 'name', label: 'Name', rowHeader: true, value: (s) => FP.sessionName(s).toLowerCase(),
      render: (s) => el('a', { href: `session.html?id=${s.id}`, class: 'session-link', title: FP.sessionName(s) }, FP.sessionName(s)) },
    { key: 'labels', label: 'Labels', sortable: false, render: labelCell,
      csv: (s) => Object.entries(s.labels || {}).map(([k, v]) => `${k}:${v}`).join(' ') },
    // the run's GPUs, then in small the source and the node's count: "V100-DGXS-32GB x1" /
    // "kineto · of 4 on the node" (one column for both, so that the list fits 1440 px)
    { key: 'hardware', label: 'Hardware, source', value: (s) => s.hardware || '', render: (s) => {
      const m = /^(.*?)(?: \((of .*)\))?$/.exec(s.hardware || '');
      return el('span', { class: 'hw', title: s.hardware || '' }, s.hardware ? m[1].replace(/^(NVIDIA|Tesla) /, '') : '—',
        el('span', { class: 'small muted src' }, ` ${[s.source, m[2]].filter(Boolean).join(' · ')}`));
    }, csv: (s) => s.hardware || '' },
    { key: 'source', label: 'Source', csvOnly: true, csv: (s) => s.source },
    { key: 'duration_us', label: 'Duration', num: true, render: (s) => fmtTime(s.duration_us) },
    // the mean step and GPU busy as the session page's header says them (tb-profiler's)
    { key: 'step_mean_us', label: 'Mean step', num: true, render: (s) => el('span', { dataset: { session: s.id, fig: 'mean step', value: s.step_mean_us ?? '' } }, fmtTime(s.step_mean_us)) },
    { key: 'gpu_utilization', label: 'GPU busy', num: true, title: "tb-profiler's GPU utilization: kernel time over the steps' time (the whole trace without steps)",
      render: (s) => el('span', { dataset: { session: s.id, fig: 'GPU busy', value: s.gpu_utilization ?? '' } }, fmtPct(s.gpu_utilization)) },
    { key: 'top_suspect', label: 'Top suspect', value: (s) => (s.top_suspect ? s.top_suspect.at_stake_fraction : -1), render: suspectCell,
      csv: (s) => (s.top_suspect ? `${s.top_suspect.category}: ${s.top_suspect.culprit}` : '') },
    { key: 'top_cuda_operator', label: 'Top GPU operator', render: (s) => FP.nameEl(s.top_cuda_operator || '—', FP.shortName(s.top_cuda_operator || '—', 22)) },
    { key: 'smells', label: 'Smells',
      sortable: false, render: (s) => (s.smells || []).map((id) => el('span', { class: 'badge smell', title: id }, smellText(id))),
      csv: (s) => (s.smells || []).join(' ') },
    { key: 'created_at', label: 'Uploaded', render: (s) => el('span', { title: fmtDate(s.created_at) }, fmtDate(s.created_at).slice(0, 10)),
      csv: (s) => s.created_at },
    { key: 'actions', label: 'Actions', sortable: false, csv: false, render: (s) => [
      el('a', { href: `timeline.html?id=${s.id}` }, 'timeline'), ' ',
      el('button', { type: 'button', class: 'danger delete', 'aria-label': `Delete ${FP.sessionName(s)}`,
                     onclick: () => del(s) }, 'Delete')] },
  ];

  function filterQuery(extra) {
    const label = fLabel.value.trim();
    return qs({ q: fName.value.trim(), label, limit: PAGE, ...extra });
  }

  let seq = 0;
  let sort = { key: 'created_at', dir: 'descending', clientSort: true };
  function draw() {
    renderTable(table, cols, rows, sort, (key) => { sort = { ...FP.nextSort(sort, key, cols), clientSort: true }; draw(); });
    FP.setCaption(table, `${rows.length} session${rows.length === 1 ? '' : 's'}${next ? ' (more available)' : ''}`);
  }
  async function load(append) {
    if (append && !next) return; // nothing after the last page: never load page one again
    const my = ++seq;
    const q = filterQuery(append && next ? { next } : {});
    const j = await api('/api/v1/sessions' + q);
    if (my !== seq) return; // a newer filter was asked for meanwhile
    rows = append ? rows.concat(j.sessions || []) : (j.sessions || []);
    next = j.next || null;
    more.hidden = !next;
    draw();
  }

  async function del(s) {
    if (!confirm(`Delete session “${FP.sessionName(s)}” (id ${s.id})? This cannot be undone.`)) return;
    await api(`/api/v1/sessions/${s.id}`, { method: 'DELETE' });
    status(`Deleted “${FP.sessionName(s)}”.`);
    await load(false);
  }

  // ---- upload -------------------------------------------------------------------------------
  const fileInput = document.getElementById('file');
  const labelsInput = document.getElementById('upload-labels');
  const progress = document.getElementById('progress');
  const statusEl = document.getElementById('upload-status');
  const drop = document.getElementById('dropzone');

  function status(msg, link) {
    statusEl.replaceChildren(msg, link ? ' ' : '', link || '');
  }

  function parseLabels(text) {
    return text.split(',').map((x) => x.trim()).filter(Boolean);
  }

  // The raw file body goes as-is (gzip too: the server reads the magic bytes). XMLHttpRequest,
  // not fetch, because only XHR reports upload progress.
  function upload(file) {
    return new Promise((resolve) => {
      clearError();
      const labels = parseLabels(labelsInput.value);
      const bad = labels.find((l) => !/^[^:]+:/.test(l));
      if (bad) { showError(`Label “${bad}” is not key:value.`); resolve(null); return; }
      const xhr = new XMLHttpRequest();
      xhr.open('POST', '/api/v1/sessions' + qs({ name: file.name, label: labels }));
      xhr.setRequestHeader('Accept', 'application/json');
      progress.hidden = false;
      progress.value = 0;
      status(`Uploading ${file.name} (${FP.fmtMem(file.size)})…`);
      xhr.upload.onprogress = (e) => {
        if (e.lengthComputable) {
          progress.value = Math.round((e.loaded / e.total) * 100);
          if (e.loaded >= e.total) status(`Uploaded ${file.name}; the server is reading the trace…`);
        }
      };
      xhr.onload = async () => {
        progress.value = 100;
        let j = null;
        try { j = JSON.parse(xhr.responseText); } catch (_) { /* shown below */ }
        if (xhr.status >= 200 && xhr.status < 300 && j && j.id !== undefined) {
          status(`Uploaded ${file.name} as session ${j.id}.`,
                 el('a', { href: `session.html?id=${j.id}`, class: 'new-session' }, 'Open it'));
          progress.hidden = true;
          await load(false);
          resolve(j);
        } else {
          const e = j && j.error ? j.error : { code: 'http_' + xhr.status, message: xhr.responseText.slice(0, 300) };
          showError(`Upload of ${file.name} failed: ${e.message} (${e.code}, HTTP ${xhr.status})`);
          status(`Upload of ${file.name} failed.`);
          progress.hidden = true;
          resolve(null);
        }
      };
      xhr.onerror = () => {
        showError(`Upload of ${file.name} failed: the server could not be reached.`);
        progress.hidden = true;
        resolve(null);
      };
      xhr.send(file);
    });
  }

  async function uploadAll(files) {
    for (const f of files) await upload(f);
    fileInput.value = '';
  }

  fileInput.addEventListener('change', () => uploadAll([...fileInput.files]));
  for (const ev of ['dragenter', 'dragover']) {
    drop.addEventListener(ev, (e) => { e.preventDefault(); drop.classList.add('over'); });
  }
  for (const ev of ['dragleave', 'drop']) {
    drop.addEventListener(ev, () => drop.classList.remove('over'));
  }
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    if (e.dataTransfer && e.dataTransfer.files.length) uploadAll([...e.dataTransfer.files]);
  });

  // ---- filters ------------------------------------------------------------------------------
  const form = document.getElementById('filters');
  form.addEventListener('submit', (e) => { e.preventDefault(); load(false).catch(() => {}); });
  form.addEventListener('reset', () => setTimeout(() => load(false).catch(() => {}), 0));
  const live = FP.debounce(() => load(false).catch(() => {}), 300);
  fName.addEventListener('input', live);
  fLabel.addEventListener('input', () => {
    const v = fLabel.value.trim();
    if (!v || v.includes(':')) live(); // a half-typed label is not a filter yet
  });
  more.addEventListener('click', () => load(true).catch(() => {}));

  load(false).catch(() => {});
})();
