// nav.js: what sits above every page's <main>, written once (issue 51, item 7): the skip link,
// the error banner app.js fills, and the header with the navigation, the current page marked
// (aria-current). Each page loads it as the first thing in <body>, as a plain (blocking)
// script, so that the header is in the document before <main> is parsed: no flash, no layout
// shift, and no build step or server-side include. docs/dashboard.md says why this way.
'use strict';
(() => {
  const PAGES = [['index.html', 'Sessions'], ['job.html', 'Jobs'], ['compare.html', 'Compare'],
    ['baselines.html', 'Baselines'], ['targets.html', 'Targets']];
  const here = location.pathname.split('/').pop() || 'index.html';
  const make = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    e.append(...kids);
    return e;
  };
  const banner = make('div', { id: 'banner', role: 'alert' });
  banner.hidden = true;
  const links = PAGES.map(([href, text]) => make('li', {}, make('a', href === here ? { href, 'aria-current': 'page' } : { href }, text)));
  const header = make('header', { class: 'top' }, make('a', { class: 'brand', href: 'index.html' }, 'firstpass'),
    make('nav', { 'aria-label': 'Main' }, make('ul', {}, ...links)));
  document.currentScript.before(make('a', { class: 'skip', href: '#main' }, 'Skip to content'), banner, header);
})();
