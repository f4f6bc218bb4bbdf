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

  // api(path, {method, body, quiet}) -> parsed JSON (or null for 204).
  async function api(path, opts = {}) {
    const init = { method: opts.method || 'GET', headers: { Accept: 'application/json' } };
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

  // ---- formatting (torch.autograd.profiler_util) ---------------------------------------------
  function num(x) { return typeof x === 'number' && isFinite(x) ? x : 0; }
  // _format_time: 1.234s / 12.345ms / 456.000us
  function fmtTime(us) {
    if (us === null || us === undefined || !isFinite(us)) return '—';
    const a = Math.abs(us);
    if (a >= 1e6) return (us / 1e6).toFixed(3) + 's';
    if (a >= 1e3) return (us / 1e3).toFixed(3) + 'ms';
    return us.toFixed(3) + 'us';
  }
  // _format_time_share: value * 100 / total with two decimals; 0.00% when total is 0.
  function fmtShare(us, totalUs) {
    if (!totalUs) return '0.00%';
    return (num(us) * 100 / totalUs).toFixed(2) + '%';
  }
  // _format_memory: "1.23 Gb", "4.00 Mb", "12.00 Kb", "512 b"
  function fmtMem(bytes) {
    if (bytes === null || bytes === undefined) return '—';
    const KB = 1024, MB = KB * 1024, GB = MB * 1024, a = Math.abs(bytes);
    if (a >= GB) return (bytes / GB).toFixed(2) + ' Gb';
    if (a >= MB) return (bytes / MB).toFixed(2) + ' Mb';
    if (a >= KB) return (bytes / KB).toFixed(2) + ' Kb';
    return Math.round(bytes) + ' b';
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
  // smell id -> "one operator owns the run"
  function smellText(id) { return String(id).replace(/_/g, ' '); }

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
  function renderTable(table, cols, rows, state, onSort) {
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
      tbody.append(el('tr', {}, el('td', { colspan: cols.length, class: 'empty' }, 'Nothing to show.')));
    }
    table.replaceChildren(...(table.caption ? [table.caption] : []), el('thead', {}, trh), tbody);
    return shown;
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

  return { ApiError, api, showError, clearError, fmtTime, fmtShare, fmtMem, fmtPct, fmtInt, fmtSigned,
           fmtDate, fmtDims, smellText, el, param, qs, debounce, renderTable, sortRows, nextSort, dl,
           sessionName, num };
})();
