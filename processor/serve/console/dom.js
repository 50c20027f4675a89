// h builds an element: h('td', {class: 'num'}, 'text', child...). Text is
// always set as text, never as HTML: keys, values and headers come from
// records and may hold anything.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG = 'http://www.w3.org/2000/svg';

// s builds an SVG element, as h does.
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// fmtNum prints n with thousands separators; fmtRate with one decimal
// under 10.
export function fmtNum(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '–';
  return Math.round(n).toLocaleString('en-US');
}

export function fmtRate(n) {
  if (!n) return '0';
  return n < 10 ? n.toFixed(1) : fmtNum(n);
}

export function fmtMs(ms) {
  if (!ms) return '–';
  if (ms < 1) return ms.toFixed(2) + ' ms';
  if (ms < 1000) return ms.toFixed(ms < 10 ? 1 : 0) + ' ms';
  return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
}

export function fmtTime(ms) {
  if (ms === undefined || ms === null) return '–';
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? String(ms) : d.toISOString().replace('T', ' ').replace('Z', ' UTC');
}

export function fmtAge(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t) || t <= 0) return '–';
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min';
  return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
}

// errorBox is a message for a failed request.
export function errorBox(msg) {
  return h('p', { class: 'error', role: 'alert' }, msg);
}

// table builds a scrollable table with a caption.
export function table(caption, head, rows, attrs = {}) {
  return h('div', { class: 'table-wrap' },
    h('table', attrs,
      caption ? h('caption', {}, caption) : null,
      h('thead', {}, h('tr', {}, head.map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows)));
}
