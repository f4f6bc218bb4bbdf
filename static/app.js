// app.js: what every firstpass page shares. No framework, no build step.
//   api()       fetch wrapper: JSON in/out; an {"error":{code,message}} body (or any non-2xx)
//               is shown in the page's banner and thrown as an ApiError.
//   fmt*        formatting that matches torch.profiler key_averages().table().
//   el()        tiny DOM builder.
//   renderTable a semantic <table> with sortable headers (<th scope="col" aria-sort>, buttons).
'use strict';

const FP = (() => {
  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  // ---- banner ------------------------------------------------------------------------------
  function banner() {
    let b = document.getElementById('banner');
    if (!b) {
      b = document.createElement('div');
      b.id = 'banner';
      document.body.prepend(b);
    }
    b.setAttribute('role', 'alert');
    return b;
  }
  function showError(message) {
    const b = banner();
    b.replaceChildren(
      el('span', { class: 'banner-text' }, message),
      el('button', { type: 'button', class: 'banner-close', 'aria-label': 'Dismiss error',
                     onclick: () => { b.hidden = true; } }, '×'));
    b.hidden = false;
  }
  function clearError() {
    const b = document.getElementById('banner');
    if (b) b.hidden = true;
  }

  // Turns a reply body into a message; the contract's error shape wins.
  function errorFrom(status, text) {
    try {
      const j = JSON.parse(text);
      if (j && j.error) return new ApiError(status, j.error.code || 'error', j.error.message || text);
    } catch (_) { /* not JSON */ }
    return new ApiError(status, 'http_' + status, text ? text.slice(0, 300) : 'HTTP ' + status);
  }

  // api(path, {method, body, quiet, headers}) -> parsed JSON (or null for 204).
  async function api(path, opts = {}) {
    const init = { method: opts.method || 'GET', headers: { Accept: 'application/json', ...(opts.headers || {}) } };
    if (opts.body !== undefined) {
      init.body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
      init.headers['Content-Type'] = 'application/json';
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      const err = new ApiError(0, 'network', `Cannot reach the server (${path}): ${e.message}`);
      if (!opts.quiet) showError(err.message);
      throw err;
    }
    const text = res.status === 204 ? '' : await res.text();
    if (!res.ok) {
      const err = errorFrom(res.status, text);
      if (!opts.quiet) showError(`${init.method} ${path.split('?')[0]}: ${err.message} (${err.code}, HTTP ${res.status})`);
      throw err;
    }
    if (!text) return null;
    try {
      return JSON.parse(text);
    } catch (e) {
      const err = new ApiError(res.status, 'bad_json', `${path}: reply is not JSON`);
      if (!opts.quiet) showError(err.message);
      throw err;
    }
  }

  // once(path, opts) -> the same promise for every caller of one GET in this page: the
  // session page's sections and trend.js share the summary, operator and kernel replies
  // (issue 42: the page made 22 requests, several twice). opts as api()'s; the first
  // caller's are used.
  const onceCache = new Map();
  function once(path, opts = {}) {
    if (!onceCache.has(path)) onceCache.set(path, api(path, opts));
    return onceCache.get(path);
  }

  // ---- formatting: units a human reads ------------------------------------------------------
  function num(x) { return typeof x === 'number' && isFinite(x) ? x : 0; }
  // Three significant digits (one more for 1000..9999 is kept whole): 1.04s, 323ms, 45.2µs.
  function sig3(v) {
    const a = Math.abs(v);
    return v.toFixed(a >= 100 || a === 0 ? 0 : a >= 10 ? 1 : 2);
  }
  function fmtTime(us) {
    if (us === null || us === undefined || !isFinite(us)) return '—';
    const a = Math.abs(us);
    if (a >= 1e6) return sig3(us / 1e6) + 's';
    if (a >= 999.5) return sig3(us / 1e3) + 'ms';
    return sig3(us) + 'µs';
  }
  // A time on an axis whose ticks are step apart: the unit of the value, enough decimals that
  // neighbouring ticks differ (1.041234s at a 1 µs step, not 1.041s on every tick).
  function fmtTimeAt(us, step) {
    if (!isFinite(us)) return '—';
    const a = Math.max(Math.abs(step), 1e-9), m = Math.max(Math.abs(us), a);
    const [div, unit] = m >= 1e6 ? [1e6, 's'] : m >= 1e3 ? [1e3, 'ms'] : [1, 'µs'];
    const dec = Math.max(0, Math.min(9, -Math.floor(Math.log10(a / div) + 1e-9)));
    return (us / div).toFixed(dec) + unit;
  }
  // value * 100 / total with two decimals; 0.00% when total is 0.
  function fmtShare(us, totalUs) {
    if (!totalUs) return '0.00%';
    return (num(us) * 100 / totalUs).toFixed(2) + '%';
  }
  // Bytes in binary units, three significant digits: 1.23 GB, 512 MB, 12.0 KB, 512 B.
  function fmtMem(bytes) {
    if (bytes === null || bytes === undefined || !isFinite(bytes)) return '—';
    const KB = 1024, MB = KB * 1024, GB = MB * 1024, a = Math.abs(bytes);
    if (a >= GB) return sig3(bytes / GB) + ' GB';
    if (a >= MB) return sig3(bytes / MB) + ' MB';
    if (a >= KB) return sig3(bytes / KB) + ' KB';
    return Math.round(bytes) + ' B';
  }
  function fmtPct(fraction, digits = 1) {
    if (fraction === null || fraction === undefined || !isFinite(fraction)) return '—';
    return (fraction * 100).toFixed(digits) + '%';
  }
  function fmtInt(n) {
    if (n === null || n === undefined || !isFinite(n)) return '—';
    return Math.round(n).toLocaleString('en-US');
  }
  function fmtSigned(x, f) {
    if (x === null || x === undefined || !isFinite(x)) return '—';
    return (x > 0 ? '+' : x < 0 ? '−' : '±') + f(Math.abs(x));
  }
  function fmtDate(iso) {
    if (!iso) return '—';
    const d = new Date(iso);
    if (isNaN(d)) return String(iso);
    return d.toISOString().replace('T', ' ').replace(/:\d\d(\.\d+)?Z$/, ' UTC');
  }
  function fmtDims(a) { return Array.isArray(a) ? a.join('×') : (a === undefined || a === null ? '—' : String(a)); }
  // A kernel or operator name short enough to read: no "void ", the parameter list folded to
  // "(…)", template arguments folded past the first level, and past max characters the middle
  // cut out with "…" (the end stays: a name never loses its closing parenthesis silently).
  // shortNames() keeps a list's short names distinct.
  function shortName(name, max = 70) {
    let s = String(name ?? '').replace(/^void /, '');
    const paren = s.search(/\((?![^<]*>)/);
    if (paren > 0 && s.endsWith(')') && /^[\w:~<>, *&]+$/.test(s.slice(0, paren))) s = s.slice(0, paren) + (s.length > paren + 2 ? '(…)' : '()');
    let out = '', depth = 0;
    for (const c of s) {
      if (c === '<') { depth++; if (depth === 2) out += '…'; }
      if (depth < 2) out += c;
      if (c === '>') depth = Math.max(0, depth - 1);
    }
    out = out.replace(/\s+/g, ' ').trim();
    return out.length > max ? out.slice(0, max - 16) + '…' + out.slice(-15) : out;
  }
  // Short names for names[], each at most max characters, distinct wherever the full names are:
  // names whose short forms clash keep their head and tail and show, between "…", the part where
  // they differ (the first character past their common head); a group still clashing after that
  // is parted again by its own common head. So clover::par_ranged2d_kernel<…(instance 1)…> and
  // <…(instance 2)…> read apart inside a chart's gutter (issue 51, item 7).
  function shortNames(names, max = 70) {
    const out = names.map((n) => shortName(n, max));
    const part = Math.max(8, max - 2 * Math.floor(max / 4) - 2), side = Math.max(4, Math.floor((max - part - 2) / 2));
    for (let round = 0; round < 8; round++) {
      const seen = new Map();
      out.forEach((s, i) => seen.set(s, [...(seen.get(s) || []), i]));
      let clash = false;
      for (const idx of seen.values()) {
        const full = idx.map((i) => String(names[i]).replace(/^void /, ''));
        if (idx.length < 2 || new Set(full).size < 2) continue;
        clash = true;
        let p = 0;
        while (p < full[0].length && full.every((f) => f[p] === full[0][p])) p++;
        idx.forEach((i, k) => {
          const f = full[k];
          if (f.length <= max) { out[i] = f; return; }
          const from = Math.max(0, Math.min(p - 3, f.length - part)), to = from + part;
          out[i] = (from > side + 1 ? f.slice(0, side) + '…' : f.slice(0, from)) + f.slice(from, to) +
            (to < f.length - side - 1 ? '…' + f.slice(-side) : f.slice(to));
        });
      }
      if (!clash) break;
    }
    return out;
  }
  // A name that stays on one line: the short form, the full one on hover.
  function nameEl(name, short) {
    return el('span', { class: 'name', title: name }, short ?? shortName(name));
  }
  // The vendor word for GPU time: "CUDA" for NVIDIA, "GPU" for AMD (ROCm) and unknown.
  function gpuWord(session) {
    const hw = String(session?.hardware || '') + ' ' + (session?.devices || []).map((d) => d.name || '').join(' ');
    return /AMD|Radeon|Instinct|\bMI\d{3}|ROCm|gfx\d/i.test(hw) ? 'GPU' : 'CUDA';
  }
  // A session with no GPU work at all (a CPU-only trace).
  function cpuOnly(session) { return !(session?.devices || []).length && !num(session?.cuda_time_total_us); }
  // A value of a smell's or suspect's evidence, readable: times, shares, bytes by key name,
  // other numbers to three significant digits, objects and lists spelled out (no raw JSON).
  function fmtValue(k, v) {
    if (v === null || v === undefined) return '—';
    if (typeof v === 'number') {
      if (/share|fraction|ratio|pct/.test(k)) return fmtPct(v);
      if (/_us$|(^|_)us$|time|dur/.test(k)) return fmtTime(v);
      if (/bytes/.test(k)) return fmtMem(v);
      return Number.isInteger(v) ? fmtInt(v) : (Math.abs(v) >= 1000 ? fmtInt(v) : String(Number(v.toPrecision(3))));
    }
    if (Array.isArray(v)) return v.slice(0, 5).map((x) => fmtValue(k, x)).join('; ') + (v.length > 5 ? `; … (${v.length})` : '');
    if (typeof v === 'object') return Object.entries(v).map(([kk, vv]) => `${kk === 'name' ? '' : kk.replace(/_/g, ' ') + ' '}${kk === 'name' ? shortName(vv, 60) : fmtValue(kk, vv)}`).join(', ');
    return k === 'name' || /op|culprit|kernel/.test(k) ? shortName(v, 80) : String(v);
  }

  // A smell's id in words (issue 51, item 7: "gpu idle host bound" read like an id); an id
  // this page does not know yet reads with its underscores as blanks.
  const SMELLS = {
    one_operator_owns_the_run: 'one op owns the run',
    cheap_operator_called_often: 'cheap op called often',
    gpu_idle_host_bound: 'GPU idle, host-bound',
  };
  function smellText(id) { return SMELLS[id] || String(id).replace(/_/g, ' '); }

  // ---- DOM ----------------------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
      else if (k === 'class') e.className = v;
      else if (k === 'dataset') Object.assign(e.dataset, v);
      // through the CSSOM: the server's Content-Security-Policy (style-src 'self') blocks
      // style attributes, not this
      else if (k === 'style') e.style.cssText = v;
      else if (v === true) e.setAttribute(k, '');
      else e.setAttribute(k, v);
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function param(name) { return new URLSearchParams(location.search).get(name); }
  // The timeline's address for a finding (issue 51, item 3): the view lives in the address, so
  // a link can be pasted. v: {start, end} (µs, as the API gives them), sel (an event's ref),
  // find (an event's whole name: the first at or after `at`, else `start`, else the session's
  // start, is selected; dir=prev searches back from `at`), tracks (track ids shown). A name
  // ending in * finds any name starting with the rest (ProfilerStep*).
  function timelineHref(id, v = {}) {
    return `timeline.html${qs({ id, start: v.start, end: v.end, sel: v.sel, find: v.find, at: v.at, dir: v.dir,
      tracks: v.tracks && v.tracks.length ? v.tracks.join(',') : null })}`;
  }
  function qs(obj) {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(obj)) {
      if (v === null || v === undefined || v === '') continue;
      if (Array.isArray(v)) v.forEach((x) => p.append(k, x)); else p.append(k, v);
    }
    const s = p.toString();
    return s ? '?' + s : '';
  }
  function debounce(fn, ms) {
    let t = 0;
    return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
  }

  // ---- tables -------------------------------------------------------------------------------
  // cols: [{key, label, title?, num?, value(row) (sort value), render(row) (cell content),
  //         cls(row)?, rowHeader?}]
  // state: {key, dir: 'descending'|'ascending'}; onSort(key) is called when a header is used.
  // With state.clientSort the rows are sorted here; otherwise they are shown as given.
  // empty: the words of an empty table (default "Nothing to show.").
  function renderTable(table, allCols, rows, state, onSort, empty) {
    const cols = allCols.filter((c) => !c.csvOnly); // csvOnly: a column of the CSV alone (its csv(row) gives the value)
    let shown = rows;
    if (state && state.clientSort) shown = sortRows(rows, cols.find((c) => c.key === state.key), state.dir);
    const trh = el('tr', {});
    for (const c of cols) {
      const sorted = state && state.key === c.key;
      const th = el('th', { scope: 'col', class: c.num ? 'num' : null, title: c.title || null,
                            'aria-sort': sorted ? state.dir : null });
      if (onSort && c.sortable !== false) {
        th.append(el('button', { type: 'button', class: 'sort', dataset: { key: c.key },
                                 onclick: () => onSort(c.key) },
          c.label, el('span', { class: 'sort-ind', 'aria-hidden': 'true' },
                      sorted ? (state.dir === 'ascending' ? ' ▲' : ' ▼') : '')));
      } else {
        th.append(c.label);
      }
      trh.append(th);
    }
    const tbody = el('tbody', {});
    for (const r of shown) {
      const tr = el('tr', {});
      for (const c of cols) {
        const content = c.render ? c.render(r) : (c.value ? c.value(r) : r[c.key]);
        const cls = [c.num ? 'num' : '', c.cls ? c.cls(r) || '' : ''].join(' ').trim() || null;
        const cell = el(c.rowHeader ? 'th' : 'td', { class: cls, scope: c.rowHeader ? 'row' : null }, content);
        tr.append(cell);
      }
      tbody.append(tr);
    }
    if (!shown.length) {
      tbody.append(el('tr', {}, el('td', { colspan: cols.length, class: 'empty' }, empty || 'Nothing to show.')));
    }
    table.replaceChildren(...(table.caption ? [table.caption] : []), el('thead', {}, trh), tbody);
    csvButton(table, allCols, shown);
    return shown;
  }

  // ---- CSV: a button on every table (issue 51, item 6) -----------------------------------------
  // The table as drawn, one flat column per column: a column whose every cell prints its sort
  // value with one of the page's formatters is written as that raw number, its unit in the
  // header ("Total (µs)": a time in µs, bytes, a fraction 0..1); a column may say so itself
  // (col.csv(row) and col.csvUnit); any other cell is its text, a name in full (its hover).
  // Columns of controls (col.csv === false, or cells holding only buttons and inputs) are left out.
  const UNITS = [['µs', (v) => fmtTime(v)], ['bytes', (v) => fmtMem(v)], ['fraction', (v) => fmtPct(v)],
    ['', (v) => fmtInt(v)], ['', (v) => String(v)]];
  function cellText(cell) {
    const n = cell.querySelector('.name[title]');
    return (n && cell.textContent.trim() === n.textContent.trim() ? n.getAttribute('title') : cell.textContent).trim();
  }
  function csvColumn(c, j, rows, trs) {
    if (c.csvOnly) return { head: c.csvUnit ? `${c.label} (${c.csvUnit})` : c.label, vals: rows.map((r) => c.csv(r)) };
    const cells = trs.map((tr) => tr.cells[j]);
    if (c.csv === false || (cells.length && cells.every((x) => x && x.querySelector('input, select')))) return null;
    const label = c.label.replace(/[▲▼]/g, '').trim();
    if (c.csv) return { head: c.csvUnit ? `${label} (${c.csvUnit})` : label, vals: rows.map((r) => c.csv(r)) };
    const raw = rows.map((r) => (c.value ? c.value(r) : r[c.key]));
    const numeric = raw.some((v) => typeof v === 'number' && isFinite(v));
    const unit = numeric && UNITS.find(([, f]) => raw.every((v, i) => !(typeof v === 'number' && isFinite(v)) || cellText(cells[i]) === f(v)));
    if (unit) return { head: unit[0] ? `${label} (${unit[0]})` : label, vals: raw.map((v, i) => (typeof v === 'number' && isFinite(v) ? v : cellText(cells[i]) === '—' ? '' : cellText(cells[i]))) };
    return { head: label, vals: cells.map((x) => (x ? cellText(x) : '')) };
  }
  // RFC 4180, and OWASP's CSV-injection rule as the server's CSV applies it: a text cell that
  // begins with = + - @, a tab or a CR is quoted with a leading '; numbers are left alone.
  function csvCell(v) {
    if (typeof v === 'number') return String(v);
    const s = String(v ?? '');
    if (/^[=+\-@\t\r]/.test(s) && !/^[+\-−]?[\d.]+/.test(s)) return `"'${s.replace(/"/g, '""')}"`;
    return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  }
  function tableCsv(table) {
    const { cols, rows } = table._csv;
    const trs = rows.length ? [...table.tBodies[0].rows] : [];
    const shownCols = cols.filter((c) => !c.csvOnly);
    const out = cols.map((c) => csvColumn(c, shownCols.indexOf(c), rows, trs)).filter(Boolean);
    const lines = [out.map((o) => csvCell(o.head)).join(',')];
    rows.forEach((_, i) => lines.push(out.map((o) => csvCell(o.vals[i])).join(',')));
    return lines.join('\r\n') + '\r\n';
  }
  function csvButton(table, cols, rows) {
    table._csv = { cols, rows };
    const cap = table.caption || table.createCaption();
    if (cap.querySelector('button.csv')) return;
    const name = () => `${(document.title.split(' · ')[0] || 'firstpass').replace(/[^\w.-]+/g, '-')}-${table.id || 'table'}.csv`;
    cap.append(el('button', { type: 'button', class: 'csv', title: 'Download this table as CSV', 'aria-label': `Download the table ${table.id || ''} as CSV`,
      onclick: () => {
        const a = el('a', { href: URL.createObjectURL(new Blob([tableCsv(table)], { type: 'text/csv' })), download: name() });
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(a.href), 10000);
      } }, 'CSV'));
  }
  // A table's caption text, its CSV button kept.
  function setCaption(table, text) {
    const cap = table.caption || table.createCaption();
    const b = cap.querySelector('button.csv');
    cap.replaceChildren(text, ...(b ? [' ', b] : []));
  }
  function sortRows(rows, col, dir) {
    if (!col) return rows.slice();
    const v = col.value || ((r) => r[col.key]);
    const sign = dir === 'ascending' ? 1 : -1;
    return rows.slice().sort((a, b) => {
      const x = v(a), y = v(b);
      if (typeof x === 'string' || typeof y === 'string') return sign * String(x ?? '').localeCompare(String(y ?? ''));
      return sign * ((x ?? -Infinity) - (y ?? -Infinity));
    });
  }
  // Next state when a header is clicked: a new column starts descending (biggest first) for
  // numbers and ascending for text; the same column flips.
  function nextSort(state, key, cols) {
    if (state.key === key) return { ...state, dir: state.dir === 'descending' ? 'ascending' : 'descending' };
    const c = cols.find((x) => x.key === key);
    return { ...state, key, dir: c && !c.num ? 'ascending' : 'descending' };
  }

  // A <dl> from [[term, value], ...]
  function dl(pairs, cls) {
    return el('dl', { class: cls || 'facts' }, pairs.map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
  }

  function sessionName(s) { return s && (s.name || `session ${s.id}`); }

  return { ApiError, api, once, showError, clearError, fmtTime, fmtTimeAt, fmtShare, shortName, shortNames, nameEl, gpuWord, cpuOnly, fmtValue, fmtMem, fmtPct, fmtInt, fmtSigned,
           fmtDate, fmtDims, smellText, el, param, timelineHref, qs, debounce, renderTable, sortRows, nextSort, dl,
           sessionName, num, tableCsv, setCaption };
})();
