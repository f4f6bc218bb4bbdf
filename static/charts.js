// charts.js: the dashboard's pictures as inline SVG, no library. Every mark carries the number
// it stands for in data-value (and data-key for a stacked part), so a test reads what is drawn.
//   FPC.bars(items, fmt)                 one horizontal bar per {label, value, title?, href?}, in order
//                                        (href: the label is a link, e.g. into the timeline)
//   FPC.stacked(rows, keys, colors, fmt) one bar per {label, parts: {key: value}, mean?, href?}, parts
//                                        stacked; each part's hover gives its share of the bar
//   FPC.columns(values, fmtY, opts)      a column per value (a share per time slice)
//   FPC.line(points, fmtX, fmtY, opts)   [x, y] points as a line, the maximum marked; opts.second:
//                                        a second series, dashed, its maximum marked too
// A label cut to fit its gutter ends in "…" and keeps the whole name on hover (<title>).
// Every chart is one Tab stop: the arrow keys (Home, End) then move from mark to mark and the
// mark's number shows beside it, as it does on hover (FPC.interactive; issue 51, item 8).
// Hand-written, not a library: docs/dashboard.md ("Charts") says why.
'use strict';
const FPC = (() => {
  const NS = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) e.setAttribute(k, v);
    for (const c of children.flat()) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }
  const tip = (t) => svg('title', {}, t);

  // The one tooltip of the page: what a mark stands for, beside it, on hover and on focus.
  let tipEl = null;
  function showTip(mark) {
    if (!tipEl) {
      tipEl = document.createElement('div');
      tipEl.className = 'chart-tip';
      tipEl.setAttribute('role', 'status');
      document.body.append(tipEl);
    }
    const r = mark.getBoundingClientRect();
    tipEl.textContent = mark.getAttribute('aria-label');
    tipEl.hidden = false;
    tipEl.style.left = `${Math.max(4, Math.min(window.scrollX + r.left, window.scrollX + document.documentElement.clientWidth - 470))}px`;
    tipEl.style.top = `${window.scrollY + r.bottom + 6}px`;
  }
  function hideTip() { if (tipEl) tipEl.hidden = true; }
  // Marks (the elements with a data-value) reachable by keyboard: the chart is one Tab stop
  // (tabindex 0), each mark a roving stop (tabindex -1) the arrow keys move between; each
  // mark's label is its <title> (the number it stands for, in words).
  function interactive(root) {
    const marks = [...root.querySelectorAll('[data-value]')];
    if (!marks.length) return root;
    root.setAttribute('tabindex', '0');
    for (const m of marks) {
      m.setAttribute('tabindex', '-1');
      m.setAttribute('aria-label', m.querySelector('title')?.textContent || m.dataset.value);
      m.classList.add('mark');
    }
    root.addEventListener('keydown', (e) => {
      const at = marks.indexOf(document.activeElement);
      const to = { ArrowRight: at + 1, ArrowDown: at + 1, ArrowLeft: at - 1, ArrowUp: at - 1, Home: 0, End: marks.length - 1 }[e.key];
      if (to === undefined) return;
      e.preventDefault();
      marks[Math.max(0, Math.min(marks.length - 1, at < 0 && to < 0 ? 0 : to))].focus();
    });
    root.addEventListener('focusin', (e) => { if (marks.includes(e.target)) showTip(e.target); });
    root.addEventListener('focusout', hideTip);
    root.addEventListener('mouseover', (e) => { const m = e.target.closest('.mark'); if (m) showTip(m); });
    root.addEventListener('mouseleave', hideTip);
    return root;
  }

  // The right gutter: room for the longest value text (11px: about 6.5 units a character), so
  // "142ms (23.60%)" is never cut at the picture's edge.
  const gutter = (texts, least) => Math.max(least, ...texts.map((t) => String(t).length * 6.5 + 10));

  function bars(items, fmt, opts = {}) {
    const W = 720, L = opts.labelW || 260, RH = 20, R = gutter(items.map((i) => fmt(i.value)), 90);
    const max = Math.max(...items.map((i) => i.value), 0) || 1;
    const root = svg('svg', { viewBox: `0 0 ${W} ${items.length * RH + 4}`, class: 'chart bars', role: 'img', 'aria-label': opts.label || null });
    items.forEach((it, i) => {
      const w = Math.max(1, ((W - L - R) * it.value) / max), y = i * RH + 2;
      const lbl = svg('text', { x: L - 6, y: y + 13, 'text-anchor': 'end', class: 'lbl' }, it.label, tip(it.title || it.label));
      root.append(
        it.href ? svg('a', { href: it.href, class: 'tl-link' }, lbl) : lbl,
        svg('rect', { x: L, y, width: w.toFixed(1), height: RH - 5, class: 'bar', fill: it.color || null, 'data-value': it.value,
                      'data-label': it.label }, tip(`${it.title || it.label}: ${fmt(it.value)}`)),
        svg('text', { x: L + w + 4, y: y + 13, class: 'val' }, fmt(it.value)));
    });
    return interactive(root);
  }

  function stacked(rows, keys, colors, fmt, opts = {}) {
    const tot = (r) => keys.reduce((a, k) => a + (r.parts[k] || 0), 0);
    const W = 720, L = opts.labelW || 200, RH = 20, R = gutter(rows.map((r) => fmt(tot(r))), 70);
    const max = Math.max(...rows.map(tot), 0) || 1;
    const root = svg('svg', { viewBox: `0 0 ${W} ${rows.length * RH + 4}`, class: 'chart stacked', role: 'img', 'aria-label': opts.label || null });
    rows.forEach((r, i) => {
      const y = i * RH + 2;
      let x = L;
      const t = tot(r);
      const g = svg('g', { class: r.mean ? 'row mean' : 'row', 'data-label': r.label, 'data-total': t });
      for (const k of keys) {
        const v = r.parts[k] || 0;
        const w = ((W - L - R) * v) / max;
        if (v > 0) g.append(svg('rect', { x: x.toFixed(2), y, width: Math.max(0.5, w).toFixed(2), height: RH - 5, fill: colors[k], 'data-key': k,
                                          'data-value': v }, tip(`${r.title || r.label}: ${k.replace(/_/g, ' ')} ${fmt(v)} (${(t ? (v * 100) / t : 0).toFixed(2)}%)`)));
        x += w;
      }
      const lbl = svg('text', { x: L - 6, y: y + 13, 'text-anchor': 'end', class: r.mean ? 'lbl mean' : 'lbl' }, r.label, tip(r.title || r.label));
      root.append(r.href ? svg('a', { href: r.href, class: 'tl-link' }, lbl) : lbl, g,
        svg('text', { x: x + 4, y: y + 13, class: 'val' }, fmt(t)));
    });
    return interactive(root);
  }

  // extra(key): more words after a key's name (its share of the mean step), or none.
  function legend(keys, colors, extra) {
    return FP.el('div', { class: 'legend' }, keys.map((k) => FP.el('span', { dataset: { key: k } }, FP.el('i', { style: `background:${colors[k]}` }),
      k.replace(/_/g, ' '), extra ? FP.el('b', { class: 'share' }, ' ' + extra(k)) : null)));
  }

  function columns(values, fmtY, opts = {}) {
    const W = 720, H = opts.height || 90, L = 44, B = 16;
    const cw = (W - L) / Math.max(1, values.length);
    const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart columns', role: 'img', 'aria-label': opts.label || null },
      svg('line', { class: 'axis', x1: L, y1: H - B, x2: W, y2: H - B }),
      svg('text', { x: L - 4, y: 10, 'text-anchor': 'end' }, fmtY(1)), svg('text', { x: L - 4, y: H - B, 'text-anchor': 'end' }, fmtY(0)));
    values.forEach((v, i) => {
      const h = (H - B - 4) * Math.min(1, Math.max(0, v));
      root.append(svg('rect', { x: (L + i * cw).toFixed(2), y: (H - B - h).toFixed(2), width: Math.max(0.5, cw - 0.5).toFixed(2), height: h.toFixed(2),
                                class: 'col', 'data-value': v }, tip(`${opts.slice ? opts.slice(i) : i}: ${fmtY(v)}`)));
    });
    if (opts.from !== undefined) {
      root.append(svg('text', { x: L, y: H - 3 }, opts.from), svg('text', { x: W, y: H - 3, 'text-anchor': 'end' }, opts.to));
    }
    if (opts.xTitle) root.append(svg('text', { x: (L + W) / 2, y: H - 3, 'text-anchor': 'middle', class: 'axis-title' }, opts.xTitle));
    return interactive(root);
  }

  function line(points, fmtX, fmtY, opts = {}) {
    const W = 720, H = opts.height || 150, L = 70, R = 10, T = 10, B = 18;
    if (!points.length) return svg('svg', { viewBox: `0 0 ${W} 20` });
    const two = opts.second && opts.second.length ? opts.second : null, all = two ? points.concat(two) : points;
    const x0 = Math.min(...all.map((p) => p[0])), x1 = Math.max(...all.map((p) => p[0])) || x0 + 1;
    const ymax = Math.max(...all.map((p) => p[1]), 0) || 1;
    const X = (x) => L + ((W - L - R) * (x - x0)) / (x1 - x0 || 1), Y = (y) => T + (H - T - B) * (1 - y / ymax);
    const path = (ps) => ps.map((p, i) => `${i ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join('');
    const d = path(points);
    const peak = points.reduce((a, p) => (p[1] > a[1] ? p : a));
    const peak2 = two ? two.reduce((a, p) => (p[1] > a[1] ? p : a)) : null;
    return interactive(svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart line', role: 'img', 'aria-label': opts.label || null },
      two ? svg('path', { d: path(two), class: 'series second' }) : null,
      two ? svg('circle', { cx: X(peak2[0]).toFixed(1), cy: Y(peak2[1]).toFixed(1), r: 3, class: 'peak2', 'data-value': peak2[1], 'data-x': peak2[0] },
        tip(`reserved peak ${fmtY(peak2[1])} at ${fmtX(peak2[0])}`)) : null,
      svg('line', { class: 'axis', x1: L, y1: Y(0), x2: W - R, y2: Y(0) }), svg('line', { class: 'axis', x1: L, y1: T, x2: L, y2: Y(0) }),
      svg('text', { x: L - 4, y: T + 8, 'text-anchor': 'end' }, fmtY(ymax)), svg('text', { x: L - 4, y: Y(0), 'text-anchor': 'end' }, fmtY(0)),
      svg('text', { x: L, y: H - 3 }, fmtX(x0)), svg('text', { x: W - R, y: H - 3, 'text-anchor': 'end' }, fmtX(x1)),
      svg('path', { d, class: 'series' }),
      svg('circle', { cx: X(peak[0]).toFixed(1), cy: Y(peak[1]).toFixed(1), r: 4, class: 'peak', 'data-value': peak[1], 'data-x': peak[0] },
        tip(`peak ${fmtY(peak[1])} at ${fmtX(peak[0])}`)),
      opts.xTitle ? svg('text', { x: (L + W - R) / 2, y: H - 3, 'text-anchor': 'middle', class: 'axis-title' }, opts.xTitle) : null));
  }

  return { svg, bars, stacked, legend, columns, line, interactive };
})();
