// targets.js: the Targets page (targets.html): every engine a serving agent registered
// (GET /api/v1/targets), "Profile now" (POST /api/v1/captures), the capture's progress
// (GET /api/v1/captures/{id}) and, once it has landed, its job and sessions. Refreshed every
// two seconds; a row being typed in is left alone until the focus leaves it.
'use strict';
(() => {
  const { api, el, fmtDate, fmtInt, renderTable, showError, clearError } = FP;
  const STEPS = ['queued', 'running', 'flushing', 'uploaded'];
  const WORDS = {
    queued: 'queued: waiting for the agent to poll',
    running: "running: the engine's profiler records",
    flushing: 'flushing: the engine writes its traces, then the agent sends them',
    uploaded: 'uploaded',
    failed: 'failed',
    cancelled: 'cancelled',
  };
  let watched = Number(FP.param('capture')) || null; // the capture whose progress is shown
  let limits = null;
  const inputs = new Map(); // target name -> {kind, n}: what was typed, kept across refreshes

  const tokenInput = document.getElementById('token');
  tokenInput.value = sessionStorage.getItem('fp-token') || '';
  tokenInput.addEventListener('input', () => sessionStorage.setItem('fp-token', tokenInput.value.trim()));
  document.getElementById('token-form').addEventListener('submit', (e) => e.preventDefault());
  // The token box only where the server wants tokens (GET /targets' auth; a 401 says so too
  // when reads need one): a server without --tokens-file asks for nothing (issue 51, item 5).
  let auth = { tokens: false, read_auth: false };
  const showToken = (on) => { document.getElementById('token-form').hidden = !on; };
  const readHeaders = () => (auth.read_auth && tokenInput.value.trim() ? { Authorization: 'Bearer ' + tokenInput.value.trim() } : {});

  // The empty page's first step: the agent's command with this server's address, to copy.
  const agentCmd = () => [`firstpass-upload --server ${location.origin} --watch /traces \\`,
    '  --target vllm=http://127.0.0.1:8000,name=my-replica \\',
    `  --model MODEL${auth.tokens ? ' --token "$FIRSTPASS_TOKEN"' : ''}`].join('\n');
  function drawHowto(empty) {
    document.getElementById('howto').hidden = !empty;
    if (empty) document.getElementById('agent-cmd').textContent = agentCmd();
  }
  // navigator.clipboard exists in secure contexts only (https, localhost): elsewhere the old
  // copy command on a selection, which plain http allows.
  document.getElementById('copy-cmd').addEventListener('click', async () => {
    const text = agentCmd(), st = document.getElementById('copy-status');
    try {
      if (!navigator.clipboard) throw new Error('no clipboard API');
      await navigator.clipboard.writeText(text);
    } catch (_) {
      const sel = getSelection(), r = document.createRange();
      r.selectNodeContents(document.getElementById('agent-cmd'));
      sel.removeAllRanges();
      sel.addRange(r);
      if (!document.execCommand('copy')) { st.textContent = 'Select the command and copy it (Ctrl+C).'; return; }
    }
    st.textContent = 'Copied.';
  });

  function ago(s) {
    if (s < 90) return `${Math.max(0, s)} s ago`;
    if (s < 5400) return `${Math.round(s / 60)} min ago`;
    return `${(s / 3600).toFixed(1)} h ago`;
  }
  const inFlight = (c) => c && (c.status === 'queued' || c.status === 'running' || c.status === 'flushing');

  // POST /api/v1/captures with the tab's token (FP.api sends none): the new capture, or null
  // after showing the server's refusal in the banner.
  async function ask(target, kind, n) {
    const headers = { 'Content-Type': 'application/json', Accept: 'application/json' };
    const token = tokenInput.value.trim();
    if (token) headers.Authorization = 'Bearer ' + token;
    let res, body;
    try {
      res = await fetch('/api/v1/captures', { method: 'POST', headers, body: JSON.stringify({ target, [kind]: n }) });
      body = await res.json();
    } catch (e) {
      showError(`Cannot ask for the capture: ${e.message}`);
      return null;
    }
    if (res.status !== 201) {
      const why = body && body.error ? `${body.error.message} (${body.error.code}, HTTP ${res.status})` : `HTTP ${res.status}`;
      showError(`Profile ${target}: ${why}`);
      return null;
    }
    clearError();
    return body;
  }

  function profileForm(t) {
    const st = inputs.get(t.name) || { kind: 'seconds', n: t.engine === 'sglang' ? '' : '5' };
    const kinds = t.engine === 'sglang' ? ['seconds', 'steps'] : ['seconds'];
    const sel = el('select', { 'aria-label': `Capture ${t.name} by`, class: 'cap-kind' },
      kinds.map((k) => el('option', { value: k, selected: k === st.kind ? '' : null }, k)));
    const max = limits ? (st.kind === 'steps' ? limits.max_steps : limits.max_seconds) : null;
    const num = el('input', { type: 'number', min: '1', max: max ? String(max) : null, value: st.n || (st.kind === 'steps' ? '20' : '5'),
                              size: '5', class: 'cap-n', 'aria-label': `How many ${st.kind} for ${t.name}` });
    const full = limits && t.captures_last_hour >= limits.captures_per_hour;
    const why = !t.online ? 'its agent is offline' : inFlight(t.capture) ? `capture ${t.capture.id} is in flight` : full ? 'the hourly limit is reached' : '';
    const btn = el('button', { type: 'submit', class: 'primary', disabled: why ? '' : null, title: why || null }, 'Profile now');
    const save = () => inputs.set(t.name, { kind: sel.value, n: num.value });
    sel.addEventListener('change', () => { save(); draw(); });
    num.addEventListener('input', save);
    // novalidate: the server checks the bounds and its refusal names the flag to change
    const form = el('form', { class: 'cap-form', 'aria-label': `Profile ${t.name}`, novalidate: true }, sel, ' ', num, ' ', btn,
      why ? el('span', { class: 'muted small' }, ' ' + why) : '');
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const n = Number(num.value);
      if (!Number.isInteger(n) || n < 1) {
        showError(`Profile ${t.name}: give a whole number of ${sel.value}`);
        return;
      }
      btn.disabled = true;
      const c = await ask(t.name, sel.value, n);
      if (c) {
        watched = c.id;
        history.replaceState(null, '', `targets.html?capture=${c.id}`);
      }
      refresh();
    });
    return form;
  }

  let lastTargets = [];
  function draw() {
    const table = document.getElementById('targets');
    if (table.contains(document.activeElement) && document.activeElement.tagName !== 'BUTTON') return; // being typed in
    const cols = [
      { key: 'name', label: 'Target', rowHeader: true, value: (t) => t.name,
        render: (t) => [el('span', {}, t.name), el('br'), el('span', { class: 'muted small' }, t.url)] },
      { key: 'engine', label: 'Engine', value: (t) => t.engine },
      { key: 'agent', label: 'Agent', value: (t) => t.agent, render: (t) => `${t.agent}${t.host && t.host !== t.agent ? ' on ' + t.host : ''}` },
      { key: 'seen', label: 'Last contact', num: true, value: (t) => t.last_seen_s,
        render: (t) => el('span', { class: t.online ? 'faster' : 'slower' }, `${t.online ? 'online' : 'offline'} · ${ago(t.last_seen_s)}`) },
      { key: 'hour', label: 'Captures, last hour', num: true, value: (t) => t.captures_last_hour,
        render: (t) => `${fmtInt(t.captures_last_hour)}${limits ? ' of ' + limits.captures_per_hour : ''}` },
      { key: 'capture', label: 'Newest capture', value: (t) => (t.capture ? t.capture.id : 0),
        render: (t) => (t.capture ? el('a', { href: `targets.html?capture=${t.capture.id}`, class: 'cap-link' }, `#${t.capture.id} ${t.capture.status}`) : '—') },
      { key: 'go', label: 'Profile', sortable: false, csv: false, render: profileForm },
    ];
    renderTable(table, cols, lastTargets, { key: 'name', dir: 'ascending', clientSort: true }, null,
      'No engine registered: start the agent beside one (below).');
  }

  function drawProgress(c) {
    const box = document.getElementById('progress');
    if (!c) return;
    const at = STEPS.indexOf(c.status);
    const what = c.seconds ? `${c.seconds} s` : `${c.steps} steps`;
    let frac = c.status === 'uploaded' ? 1 : c.status === 'flushing' ? 0.7 : c.status === 'running' ? 0.2 : 0.05;
    if (c.status === 'running' && c.seconds) frac = 0.2 + 0.5 * Math.min(1, Math.max(0, c.elapsed_s) / (c.seconds + 1));
    const steps = el('ol', { class: 'cap-steps' }, STEPS.map((s, i) => el('li', {
      'aria-current': s === c.status ? 'step' : null,
      class: c.status === 'failed' ? null : i < at ? 'faster' : null,
    }, s === c.status ? el('strong', {}, s) : s)));
    const parts = [
      el('p', { id: 'progress-text' }, `Capture #${c.id} of ${c.target} (${c.engine}, ${what}): `,
        el('strong', { id: 'progress-status' }, WORDS[c.status] || c.status), ` · ${c.elapsed_s} s since asked`),
      el('progress', { max: '1', value: String(c.status === 'failed' ? 0 : frac), 'aria-label': `Capture ${c.id} progress` }),
      steps,
    ];
    if (c.status === 'failed') parts.push(el('p', { class: 'slower', id: 'progress-error' }, c.error || 'failed'));
    if (c.sessions.length) {
      parts.push(el('p', { id: 'progress-result' }, 'Landed: ',
        el('a', { href: 'job.html?job=' + encodeURIComponent(c.job), id: 'job-link' }, `job ${c.job}`),
        ` (${c.sessions.length} session${c.sessions.length === 1 ? '' : 's'}, one a rank): `,
        c.sessions.map((id, i) => [i ? ', ' : '', el('a', { href: 'session.html?id=' + id }, '#' + id)])));
    }
    box.replaceChildren(...parts);
  }

  function drawCaptures(list) {
    const cols = [
      { key: 'id', label: 'Capture', num: true, rowHeader: true, value: (c) => c.id,
        render: (c) => el('a', { href: `targets.html?capture=${c.id}` }, '#' + c.id) },
      { key: 'target', label: 'Target', value: (c) => c.target },
      { key: 'what', label: 'For', value: (c) => c.seconds || c.steps, render: (c) => (c.seconds ? `${c.seconds} s` : `${c.steps} steps`) },
      { key: 'status', label: 'Status', value: (c) => c.status,
        cls: (c) => (c.status === 'failed' ? 'slower' : c.status === 'uploaded' ? 'faster' : null) },
      { key: 'asked', label: 'Asked', value: (c) => c.created_at, render: (c) => fmtDate(c.created_at) },
      { key: 'took', label: 'Took', num: true, value: (c) => c.elapsed_s, render: (c) => `${c.elapsed_s} s` },
      { key: 'job', label: 'Result', value: (c) => c.sessions.length,
        render: (c) => (c.sessions.length ? el('a', { href: 'job.html?job=' + encodeURIComponent(c.job) }, `${c.job}: ${c.sessions.length} session${c.sessions.length === 1 ? '' : 's'}`)
          : c.error ? el('span', { class: 'small' }, c.error) : '—') },
    ];
    renderTable(document.getElementById('captures'), cols, list, { key: 'id', dir: 'descending', clientSort: true }, null);
  }

  let busy = false;
  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      // a page of targets (the API pages them, issue 50): the first PAGE by name
      const PAGE = 500;
      let t;
      try {
        t = await api(`/api/v1/targets?limit=${PAGE}`, { headers: readHeaders(), quiet: auth.read_auth });
      } catch (e) {
        if (e.status === 401 || e.status === 403) { auth = { tokens: true, read_auth: true }; showToken(true); }
        throw e;
      }
      auth = t.auth || auth;
      showToken(auth.tokens);
      drawHowto(!t.targets.length);
      limits = t.limits;
      document.getElementById('limits').textContent =
        `Server limits: at most ${limits.max_seconds} s or ${limits.max_steps} steps a capture, ${limits.captures_per_hour} captures a target an hour; ` +
        `an agent silent for ${limits.agent_timeout_s} s is offline and its captures fail.` +
        (t.total > t.targets.length ? ` Showing the first ${t.targets.length} of ${fmtInt(t.total)} targets, by name.` : '');
      lastTargets = t.targets;
      draw();
      const l = await api('/api/v1/captures?limit=20', { headers: readHeaders() });
      drawCaptures(l.captures);
      if (watched) drawProgress(await api('/api/v1/captures/' + watched, { headers: readHeaders() }));
    } catch (_) {
      /* the banner shows it; the next round tries again */
    } finally {
      busy = false;
    }
  }

  refresh();
  setInterval(() => { if (!document.hidden) refresh(); }, 2000);
})();
