// Topology: GET /topology drawn as a graph. Each sub-topology is a box
// of its nodes (source, processor, sink); topics are pills outside the
// boxes (user topics, repartition topics between boxes, changelogs under
// their stores); stores are cylinders, and choosing one opens it in the
// stores view.
import { getJSON } from './api.js';
import { h, s, clear, errorBox } from './dom.js';
import { appInfo, go } from './nav.js';

export const title = 'Topology';

export function mount(main) {
  const body = h('div', { class: 'graph-wrap' }, h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('h1', { class: 'view-title' }, 'Topology'), body);
  let live = true;
  Promise.all([getJSON('topology'), appInfo().catch(() => null)]).then(([topo, info]) => {
    if (!live) return;
    clear(body).append(graph(topo, info), legend());
  }).catch((e) => { if (live) clear(body).append(errorBox(`topology: ${e.message}`)); });
  return () => { live = false; };
}

const NW = 200, NH = 34, COLW = 224, ROWH = 66, PAD = 20, TOP = 34, LANE_GAP = 40;

// layout places every element on a grid that flows down: an element's row
// is the longest path to it from a root (topic → source → … → sink →
// topic); a store and its changelog sit right of the node that owns the
// store. Each sub-topology is a box in a lane; sub-topologies whose rows
// overlap go in separate lanes, side by side, so boxes never overlap, and
// a chain of them (through repartition topics) stacks in one lane, with
// the topic between them in the row between.
export function layout(topo, info) {
  const app = info ? info.application_id : '<application.id>';
  const changelogs = (info && info.changelogs) || {};
  const els = new Map(); // id → element
  const edges = []; // [from, to, cls]
  const add = (id, e) => { if (!els.has(id)) els.set(id, { id, ...e }); return els.get(id); };
  const storeOwner = new Map();
  for (const sub of topo.sub_topologies || []) {
    for (const n of sub.nodes || []) {
      const id = `n:${sub.id}:${n.name}`;
      add(id, { kind: n.kind, label: n.name, sub: sub.id });
      for (const c of n.children || []) edges.push([id, `n:${sub.id}:${c}`, '']);
      for (const t of n.topics || []) {
        const name = n.internal ? `${app}-${t}` : t;
        const cls = n.internal ? (t.endsWith('-repartition') ? 'repartition' : 'internal') : 'user';
        const te = add(`t:${name}`, { kind: 'topic', label: name, cls, sub: sub.id });
        if (n.kind === 'source') edges.push([te.id, id, '']);
        else { edges.push([id, te.id, '']); te.sub = sub.id; te.produced = true; }
      }
      for (const st of n.stores || []) if (!storeOwner.has(st)) storeOwner.set(st, id);
    }
  }
  const storeInfo = new Map((topo.stores || []).map((st) => [st.name, st]));
  for (const [st, owner] of storeOwner) {
    const sub = els.get(owner).sub;
    const meta = storeInfo.get(st) || {};
    add(`s:${st}`, { kind: 'store', label: st, sub, windowed: !!meta.windowed, owner });
    edges.push([owner, `s:${st}`, 'store']);
    const cl = changelogs[st] || `${app}-${st}-changelog`;
    add(`c:${cl}`, { kind: 'topic', label: cl, cls: 'changelog', sub, owner: `s:${st}` });
    edges.push([`s:${st}`, `c:${cl}`, 'changelog']);
  }
  // Rows: longest path, where a topic a sub-topology writes also goes
  // below all of that sub-topology's nodes (outside its box). Bounded by
  // the element count: a topic an application both writes and reads
  // would otherwise loop.
  const flowEls = [...els.values()].filter((e) => e.kind !== 'store' && e.cls !== 'changelog');
  const row = new Map(flowEls.map((e) => [e.id, 0]));
  const flow = edges.filter(([, , c]) => c === '');
  const limit = els.size + 1;
  const relax = () => {
    for (let i = 0; i < limit; i++) {
      let changed = false;
      for (const [a, b] of flow) {
        const r = Math.min(row.get(a) + 1, limit);
        if (row.get(b) < r) { row.set(b, r); changed = true; }
      }
      if (!changed) return;
    }
  };
  const subs = [...new Set(flowEls.filter((e) => e.kind !== 'topic').map((e) => e.sub))].sort((a, b) => a - b);
  const span = (sub) => {
    const rs = flowEls.filter((e) => e.sub === sub && e.kind !== 'topic').map((e) => row.get(e.id));
    return [Math.min(...rs), Math.max(...rs)];
  };
  for (let pass = 0; pass < 4; pass++) {
    relax();
    let moved = false;
    for (const e of flowEls) {
      if (e.kind !== 'topic' || !e.produced) continue;
      const [, hi] = span(e.sub);
      if (row.get(e.id) <= hi) { row.set(e.id, Math.min(hi + 1, limit)); moved = true; }
    }
    if (!moved) break;
  }
  // A store is in its owner's row, a changelog in its store's.
  const flowOwner = (e) => (e.kind === 'store' ? e.owner : els.get(e.owner).owner);
  for (const e of els.values()) if (!row.has(e.id)) row.set(e.id, row.get(flowOwner(e)));
  // Lanes: a sub-topology joins the first lane whose sub-topologies'
  // rows (with their topics, one row out) do not meet its own.
  const lanes = []; // [{spans: [[lo, hi]], subs: []}]
  const laneOf = new Map();
  for (const sub of [...subs].sort((a, b) => span(a)[0] - span(b)[0] || a - b)) {
    const [lo, hi] = span(sub);
    let lane = lanes.find((l) => l.spans.every(([a, b]) => hi < a - 1 || lo > b + 1));
    if (!lane) { lane = { spans: [], subs: [] }; lanes.push(lane); }
    lane.spans.push([lo, hi]);
    lane.subs.push(sub);
    laneOf.set(sub, lane);
  }
  // Columns within a lane, row by row from the top: an element takes the
  // column of its first parent if free, else the next free one; an edge
  // that spans rows reserves a column in each row it crosses (a bend
  // point), so no edge runs through a node. Stores and changelogs go
  // right of their owner.
  const parents = new Map();
  for (const [a, b] of flow) parents.set(b, [...(parents.get(b) || []), a]);
  const col = new Map();
  const bends = new Map(); // "a>b" → [{row, col}], top to bottom
  const key = (a, b) => `${a}>${b}`;
  for (const lane of lanes) {
    const inLane = (e) => lane.subs.includes(e.sub);
    const members = flowEls.filter(inLane);
    const occupied = new Map();
    const take = (r, pref) => {
      if (!occupied.has(r)) occupied.set(r, new Set());
      let c = Math.max(0, pref);
      while (occupied.get(r).has(c)) c++;
      occupied.get(r).add(c);
      return c;
    };
    const rows = [...new Set(members.map((e) => row.get(e.id)))].sort((a, b) => a - b);
    const waiting = new Map(); // row → [{edge, pref}] bends to place
    const lastCol = (a, b) => { const bs = bends.get(key(a, b)); return bs && bs.length ? bs[bs.length - 1].col : col.get(a); };
    const lo = rows[0], hi = rows[rows.length - 1];
    for (let r = lo; r <= hi; r++) {
      const items = [];
      for (const w of waiting.get(r) || []) items.push({ bend: w, pref: lastCol(w.a, w.b) });
      for (const e of members.filter((m) => row.get(m.id) === r)) {
        const ps = (parents.get(e.id) || []).filter((p) => col.has(p));
        items.push({ e, pref: ps.length ? Math.min(...ps.map((p) => lastCol(p, e.id))) : 0 });
      }
      items.sort((x, y) => x.pref - y.pref || (x.bend ? 0 : 1) - (y.bend ? 0 : 1));
      for (const it of items) {
        const c = take(r, it.pref);
        if (it.bend) { bends.get(key(it.bend.a, it.bend.b)).push({ row: r, col: c }); continue; }
        col.set(it.e.id, c);
        for (const [a, b] of flow) {
          if (a !== it.e.id || !els.has(b) || !inLane(els.get(b)) || row.get(b) <= r + 1) continue;
          bends.set(key(a, b), []);
          for (let rr = r + 1; rr < row.get(b); rr++) {
            if (!waiting.has(rr)) waiting.set(rr, []);
            waiting.get(rr).push({ a, b });
          }
        }
      }
    }
    for (const e of [...els.values()].filter((x) => x.kind === 'store' && inLane(x))) {
      const r = row.get(e.id);
      col.set(e.id, take(r, col.get(e.owner) + 1));
      const cl = [...els.values()].find((x) => x.owner === e.id);
      if (cl) col.set(cl.id, take(r, col.get(e.id) + 1));
    }
    lane.cols = Math.max(1, ...[...occupied.values()].map((set) => Math.max(...set) + 1));
  }
  let x0 = PAD;
  for (const lane of lanes) { lane.x = x0; x0 += lane.cols * COLW + LANE_GAP; }
  const pos = new Map();
  for (const e of els.values()) {
    const lane = laneOf.get(e.sub);
    pos.set(e.id, { x: lane.x + col.get(e.id) * COLW, y: TOP + row.get(e.id) * ROWH });
  }
  // Bend points as coordinates, for the edges.
  const via = new Map();
  for (const [k, bs] of bends) {
    const lane = laneOf.get(els.get(k.split('>')[0]).sub);
    via.set(k, bs.map((b) => ({ x: lane.x + b.col * COLW, y: TOP + b.row * ROWH })));
  }
  const boxes = subs.map((sub) => {
    const inBox = [...els.values()].filter((e) => e.sub === sub && (e.kind !== 'topic' || e.cls === 'changelog'));
    const xs = inBox.map((e) => pos.get(e.id).x), ys = inBox.map((e) => pos.get(e.id).y);
    const x = Math.min(...xs) - 12, y = Math.min(...ys) - 26;
    return { sub, x, y, w: Math.max(...xs) + NW + 12 - x, h: Math.max(...ys) + NH + 12 - y };
  });
  const width = Math.max(...[...pos.values()].map((p) => p.x)) + NW + PAD;
  const height = Math.max(...[...pos.values()].map((p) => p.y)) + NH + PAD;
  return { els, edges, pos, via, boxes, width, height };
}

function graph(topo, info) {
  const { els, edges, pos, via, boxes, width, height } = layout(topo, info);
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, width, height, class: 'topology', role: 'group', 'aria-label': 'Topology graph' });
  svg.append(s('defs', {}, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }))));
  for (const b of boxes) {
    svg.append(s('g', { class: 'subtopology', 'data-kind': 'subtopology', 'data-name': String(b.sub) },
      s('rect', { x: b.x, y: b.y, width: b.w, height: b.h, rx: 10 }),
      s('text', { x: b.x + b.w - 10, y: b.y + 16, class: 'box-label', 'text-anchor': 'end' }, `Sub-topology ${b.sub}`)));
  }
  for (const [a, b, cls] of edges) {
    const p = pos.get(a), q = pos.get(b);
    if (!p || !q) continue;
    let d;
    if (cls) { // right, to a store or its changelog
      d = `M${p.x + NW},${p.y + NH / 2} L${q.x},${q.y + NH / 2}`;
    } else {
      // Down from p, straight through each bend point's row, into q.
      const pts = [[p.x + NW / 2, p.y + NH]];
      for (const bp of via.get(`${a}>${b}`) || []) pts.push([bp.x + NW / 2, bp.y], [bp.x + NW / 2, bp.y + NH]);
      pts.push([q.x + NW / 2, q.y]);
      d = `M${pts[0][0]},${pts[0][1]}`;
      for (let i = 1; i < pts.length; i++) {
        const [x1, y1] = pts[i - 1], [x2, y2] = pts[i], my = (y1 + y2) / 2;
        d += i % 2 ? ` C${x1},${my} ${x2},${my} ${x2},${y2}` : ` L${x2},${y2}`;
      }
    }
    svg.append(s('path', { d, class: `edge ${cls}`, 'marker-end': 'url(#arrow)' }));
  }
  for (const e of els.values()) {
    const p = pos.get(e.id);
    const label = e.label.length > 27 ? e.label.slice(0, 26) + '…' : e.label;
    const kindText = e.kind === 'topic' ? `${e.cls} topic` : e.kind === 'store' ? `${e.windowed ? 'window ' : ''}store` : e.kind;
    const g = s('g', { class: `node ${e.kind} ${e.cls || ''}`, 'data-kind': e.kind === 'topic' ? `topic-${e.cls}` : e.kind, 'data-name': e.label, transform: `translate(${p.x},${p.y})` });
    g.append(s('title', {}, `${kindText}: ${e.label}`));
    if (e.kind === 'topic') g.append(s('rect', { width: NW, height: NH, rx: NH / 2 }));
    else if (e.kind === 'store') g.append(s('path', { d: `M0,6 a${NW / 2},6 0 0,1 ${NW},0 v${NH - 12} a${NW / 2},6 0 0,1 -${NW},0 z M0,6 a${NW / 2},6 0 0,0 ${NW},0` }));
    else g.append(s('rect', { width: NW, height: NH, rx: 4 }));
    g.append(s('text', { x: NW / 2, y: NH / 2 + 4, 'text-anchor': 'middle' }, label));
    // Left-aligned: the edge into the element comes in at its middle.
    if (e.kind === 'topic' || e.kind === 'store') g.append(s('text', { x: 10, y: -4, class: 'kind' }, kindText));
    if (e.kind === 'store') {
      // A store is a link to its queries.
      g.setAttribute('tabindex', '0');
      g.setAttribute('role', 'link');
      g.setAttribute('aria-label', `store ${e.label}: open in Stores`);
      const open = () => go('stores', { store: e.label });
      g.addEventListener('click', open);
      g.addEventListener('keydown', (ev) => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); open(); } });
    }
    svg.append(g);
  }
  return h('div', { class: 'graph-scroll', tabindex: '0', 'aria-label': 'Topology graph, scrollable' }, svg);
}

function legend() {
  const item = (cls, text) => h('span', { class: 'key' }, h('span', { class: `swatch-node ${cls}`, 'aria-hidden': 'true' }), text);
  return h('p', { class: 'legend' }, item('source', 'source'), item('processor', 'processor'), item('sink', 'sink'),
    item('topic user', 'topic'), item('topic repartition', 'repartition topic'), item('topic changelog', 'changelog topic'), item('store', 'store (select to query)'));
}
