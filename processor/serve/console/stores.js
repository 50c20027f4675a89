// Stores: choose a store (from the topology, or from the graph), look a
// key up (GET /stores/{store}/keys/{key}), page through a range of a
// key-value store (GET /stores/{store}/keys?from=&to=&limit=&after=), and
// see a window store's windows of a key on a time axis.
import { getJSON } from './api.js';
import { h, s, clear, errorBox, table, fmtTime } from './dom.js';
import { go } from './nav.js';

export const title = 'Stores';

export function mount(main, params) {
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('h1', { class: 'view-title' }, 'Stores'), body);
  let live = true;
  getJSON('topology').then((topo) => {
    if (!live) return;
    const stores = topo.stores || [];
    if (stores.length === 0) {
      clear(body).append(h('p', { class: 'muted' }, 'This topology has no stores.'));
      return;
    }
    const name = params.get('store');
    const st = stores.find((x) => x.name === name) || stores[0];
    clear(body).append(picker(stores, st), lookup(st, params.get('key')), st.windowed ? h('p', { class: 'muted' }, 'Ranges over window stores are not served; look a key up to see its windows.') : range(st));
  }).catch((e) => { if (live) clear(body).append(errorBox(`topology: ${e.message}`)); });
  return () => { live = false; };
}

function picker(stores, st) {
  const sel = h('select', { id: 'store-select', 'aria-describedby': 'store-kind' },
    stores.map((x) => h('option', { value: x.name, selected: x.name === st.name }, x.name)));
  sel.addEventListener('change', () => go('stores', { store: sel.value }));
  const kind = [st.windowed ? 'window store' : 'key-value store', st.in_memory ? 'in memory' : 'Pebble', `sub-topology ${st.sub_topology}`].join(' · ');
  return h('section', { class: 'panel' },
    h('label', { for: 'store-select' }, 'Store '), sel, ' ', h('span', { id: 'store-kind', class: 'muted' }, kind));
}

function keyPath(store, key) {
  return `stores/${encodeURIComponent(store)}/keys/${encodeURIComponent(key)}`;
}

// showJSON prints a value as the instance gave it.
function showJSON(v) {
  return h('code', { class: 'json' }, v === undefined ? '' : JSON.stringify(v));
}

function lookup(st, initialKey) {
  const input = h('input', { id: 'key-input', type: 'text', autocomplete: 'off', spellcheck: 'false', required: true, value: initialKey || '' });
  const from = h('input', { id: 'win-from', type: 'datetime-local', step: '1' });
  const to = h('input', { id: 'win-to', type: 'datetime-local', step: '1' });
  const out = h('div', { id: 'lookup-result', 'aria-live': 'polite' });
  let seq = 0;
  const form = h('form', { class: 'row', id: 'lookup-form' },
    h('label', { for: 'key-input' }, 'Key'), input,
    st.windowed ? [h('label', { for: 'win-from' }, 'from'), from, h('label', { for: 'win-to' }, 'to')] : null,
    st.windowed ? to : null,
    h('button', { type: 'submit' }, 'Look up'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const key = input.value;
    const mine = ++seq;
    // The previous answer goes first, so a failed lookup never shows a
    // value that belongs to another key.
    clear(out).append(h('p', { class: 'muted' }, `Looking up ${JSON.stringify(key)}…`));
    const q = new URLSearchParams();
    if (st.windowed && from.value) q.set('from', String(new Date(from.value).getTime()));
    if (st.windowed && to.value) q.set('to', String(new Date(to.value).getTime()));
    const qs = q.toString();
    try {
      const r = await getJSON(keyPath(st.name, key) + (qs ? '?' + qs : ''));
      if (mine !== seq) return;
      clear(out).append(st.windowed ? windows(r, out.clientWidth) : entry(r));
    } catch (e) {
      if (mine !== seq) return;
      if (e.status === 404) clear(out).append(h('p', { class: 'notfound', 'data-result': 'not-found' }, `not found: ${JSON.stringify(key)} has ${st.windowed ? 'no windows in this time range' : 'no value'} in ${st.name}`));
      else clear(out).append(errorBox(`${e.status === 503 ? 'not available yet, retry: ' : ''}${e.message}`));
    }
  });
  if (initialKey) queueMicrotask(() => form.requestSubmit());
  return h('section', { class: 'panel', 'aria-labelledby': 'h-lookup' }, h('h2', { id: 'h-lookup' }, 'Look a key up'), form, out);
}

function entry(r) {
  return h('dl', { class: 'entry', 'data-result': 'found' },
    h('dt', {}, 'key'), h('dd', { id: 'found-key' }, showJSON(r.key)),
    h('dt', {}, 'value'), h('dd', { id: 'found-value' }, r.value !== undefined ? showJSON(r.value) : h('code', {}, `raw ${r.raw_value}`)),
    h('dt', {}, 'where'), h('dd', {}, `task ${r.task} · partition ${r.partition}`));
}

// windows draws a window store's windows of a key on a time axis, with a
// table of the same for reading and copying.
function windows(r, width) {
  const ws = r.windows || [];
  const t0 = Math.min(...ws.map((w) => w.start)), t1 = Math.max(...ws.map((w) => w.end));
  // Drawn at the width it is shown at, so its text keeps its size.
  const W = Math.max(280, Math.round(width || 600)), L = 10, R = 10, rowH = 22, H = 40 + ws.length * rowH;
  const span = Math.max(1, t1 - t0);
  const x = (t) => L + ((t - t0) / span) * (W - L - R);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'timeline', role: 'img', 'aria-label': `${ws.length} windows of ${JSON.stringify(r.key)} from ${fmtTime(t0)} to ${fmtTime(t1)}` });
  svg.append(s('line', { x1: L, x2: W - R, y1: H - 22, y2: H - 22, class: 'grid' }));
  // Ticks at the windows' bounds, labelled where there is room.
  const bounds = [...new Set(ws.flatMap((w) => [w.start, w.end]))].sort((a, b) => a - b);
  let lastX = -Infinity;
  for (const b of bounds) {
    const bx = x(b);
    svg.append(s('line', { x1: bx, x2: bx, y1: H - 26, y2: H - 18, class: 'grid' }));
    const anchor = b === t1 ? 'end' : b === t0 ? 'start' : 'middle';
    if (bx - lastX < 90 || (anchor === 'middle' && W - R - bx < 60)) continue;
    svg.append(s('text', { x: bx, y: H - 6, class: 'tick', 'text-anchor': anchor }, clock(b)));
    lastX = bx;
  }
  ws.forEach((w, i) => {
    const y = 8 + i * rowH;
    const wx = x(w.start), ww = Math.max(2, x(w.end) - x(w.start));
    svg.append(s('g', { class: 'window', 'data-start': w.start },
      s('title', {}, `[${fmtTime(w.start)}, ${fmtTime(w.end)}): ${JSON.stringify(w.value)}`),
      s('rect', { x: wx, y, width: ww, height: rowH - 6, rx: 3 }),
      s('text', { x: wx + 5, y: y + 12, class: 'tick' }, JSON.stringify(w.value))));
  });
  const rows = ws.map((w) => h('tr', {}, h('td', {}, fmtTime(w.start)), h('td', {}, fmtTime(w.end)), h('td', {}, showJSON(w.value))));
  return h('div', { 'data-result': 'found' },
    h('p', {}, `${ws.length} window${ws.length === 1 ? '' : 's'} of `, showJSON(r.key), ` · task ${r.task} · from ${fmtTime(t0)}`),
    svg,
    table(null, ['Start', 'End (exclusive)', 'Value'], rows, { id: 'windows-table' }));
}

// clock is a time of day (UTC), with milliseconds only when they are
// not zero.
function clock(ms) {
  const iso = new Date(ms).toISOString();
  return iso.endsWith('.000Z') ? iso.slice(11, 19) : iso.slice(11, 23);
}

function range(st) {
  const from = h('input', { id: 'range-from', type: 'text', autocomplete: 'off', spellcheck: 'false' });
  const to = h('input', { id: 'range-to', type: 'text', autocomplete: 'off', spellcheck: 'false' });
  const limit = h('input', { id: 'range-limit', type: 'number', min: '1', max: '1000', value: '20' });
  const out = h('div', { id: 'range-result', 'aria-live': 'polite' });
  const next = h('button', { type: 'button', id: 'range-next', disabled: true }, 'Next page');
  let cursor = '';
  const load = async (after) => {
    const q = new URLSearchParams();
    if (from.value) q.set('from', from.value);
    if (to.value) q.set('to', to.value);
    q.set('limit', limit.value || '20');
    if (after) q.set('after', after);
    clear(out).append(h('p', { class: 'muted' }, 'Loading…'));
    next.disabled = true;
    try {
      const page = await getJSON(`stores/${encodeURIComponent(st.name)}/keys?${q}`);
      const rows = page.entries.map((e) => h('tr', {}, h('td', {}, showJSON(e.key)), h('td', {}, e.value !== undefined ? showJSON(e.value) : h('code', {}, `raw ${e.raw_value}`))));
      clear(out).append(page.entries.length
        ? table(null, ['Key', 'Value'], rows, { id: 'range-table' })
        : h('p', { class: 'notfound' }, 'No keys in this range.'));
      cursor = page.next || '';
      next.disabled = !cursor;
    } catch (e) {
      clear(out).append(errorBox(e.message));
    }
  };
  const form = h('form', { class: 'row', id: 'range-form' },
    h('label', { for: 'range-from' }, 'From'), from,
    h('label', { for: 'range-to' }, 'to (exclusive)'), to,
    h('label', { for: 'range-limit' }, 'per page'), limit,
    h('button', { type: 'submit' }, 'List'), next);
  form.addEventListener('submit', (ev) => { ev.preventDefault(); load(''); });
  next.addEventListener('click', () => load(cursor));
  return h('section', { class: 'panel', 'aria-labelledby': 'h-range' }, h('h2', { id: 'h-range' }, 'Keys in a range'), form, out);
}
