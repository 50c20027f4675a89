// Dead letters: the latest records of the application's dead-letter
// topics (GET /deadletters), with the error and origin the runtime wrote
// in their headers.
import { getJSON, poll } from './api.js';
import { h, clear, errorBox, table, fmtTime } from './dom.js';

export const title = 'Dead letters';

export function mount(main) {
  const head = h('p', { class: 'muted', id: 'dlq-topics' }, 'Loading…');
  const out = h('div', { id: 'dlq-result' });
  const auto = h('input', { type: 'checkbox', id: 'dlq-auto', checked: true });
  const refresh = h('button', { type: 'button', id: 'dlq-refresh' }, 'Refresh');
  main.append(h('h1', { class: 'view-title' }, 'Dead letters'),
    h('div', { class: 'row' }, head, refresh, h('label', { for: 'dlq-auto' }, auto, ' refresh every 5 s')), out);
  let stop = null;
  const load = async (signal) => {
    try {
      const r = await getJSON('deadletters?limit=100', { signal });
      draw(head, out, r);
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      clear(out).append(errorBox(`dead letters: ${e.message}`));
    }
  };
  const start = () => { stop = poll(load, 5000); };
  refresh.addEventListener('click', () => load());
  auto.addEventListener('change', () => { if (stop) { stop(); stop = null; } if (auto.checked) start(); });
  start();
  return () => { if (stop) stop(); };
}

function text(v, b64) {
  if (v === null || v === undefined) return h('span', { class: 'muted' }, 'null');
  const shown = v.length > 200 ? v.slice(0, 199) + '…' : v;
  return h('code', { title: b64 ? 'not UTF-8: base64' : null }, b64 ? `base64 ${shown}` : shown);
}

function draw(head, out, r) {
  clear(head).append(`Topics: ${r.topics.join(', ')}`, r.complete ? '' : ' (read incomplete: time bound reached)');
  const body = [];
  if (r.error) body.push(errorBox(r.error));
  if (r.records.length === 0) {
    body.push(h('p', { class: 'muted', id: 'dlq-empty' }, 'No dead letters: every record so far was processed.'));
  } else {
    const rows = r.records.map((d) => h('tr', { 'data-offset': `${d.topic}/${d.partition}/${d.offset}` },
      h('td', {}, fmtTime(d.timestamp)),
      h('td', {}, h('span', { class: 'badge failed' }, d.class || '?')),
      h('td', { class: 'msg' }, d.message || ''),
      h('td', {}, d.origin ? `${d.origin.topic} [${d.origin.partition}] @${d.origin.offset}` : '–'),
      h('td', {}, text(d.key, d.key_base64)),
      h('td', {}, text(d.value, d.value_base64)),
      h('td', {}, h('details', {}, h('summary', {}, `${d.headers.length} headers`),
        h('ul', { class: 'headers' }, d.headers.map((x) => h('li', {}, h('code', {}, x.key), ' = ', text(x.value, x.base64))))),
        h('div', { class: 'sub' }, `${d.topic} [${d.partition}] @${d.offset}`))));
    body.push(table(`${r.records.length} latest, newest first`, ['Time', 'Class', 'Message', 'Origin', 'Key', 'Value', 'Headers'], rows, { id: 'dlq-table' }));
  }
  clear(out).append(...body);
}
