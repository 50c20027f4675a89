// Overview: the application's instances with their tasks (GET /instances,
// when the instance serves it), this instance's tasks with their state
// (GET /tasks), and live charts of its throughput, end-to-end latency and
// where its loop's time goes (GET /stats, sampled by the instance every
// second).
import { getJSON, poll } from './api.js';
import { h, clear, fmtNum, fmtRate, fmtMs, fmtAge, errorBox, table } from './dom.js';
import { chart } from './chart.js';
import { appInfo } from './nav.js';

export const title = 'Overview';

export function mount(main) {
  const cards = h('section', { class: 'cards', 'aria-label': 'Summary' });
  const charts = h('div', { class: 'charts' },
    h('section', { class: 'panel', 'aria-labelledby': 'h-thr' }, h('h2', { id: 'h-thr' }, 'Throughput'), h('div', { id: 'chart-throughput' })),
    h('section', { class: 'panel', 'aria-labelledby': 'h-lat' }, h('h2', { id: 'h-lat' }, 'End-to-end latency'), h('div', { id: 'chart-latency' })),
    h('section', { class: 'panel', 'aria-labelledby': 'h-loop' }, h('h2', { id: 'h-loop' }, 'Where the time goes'), h('div', { id: 'chart-loop' })));
  const instances = h('section', { class: 'panel', id: 'instances', 'aria-labelledby': 'h-inst' }, h('h2', { id: 'h-inst' }, 'Instances'), h('p', { class: 'muted' }, 'Loading…'));
  const tasks = h('section', { class: 'panel', id: 'tasks', 'aria-labelledby': 'h-tasks' }, h('h2', { id: 'h-tasks' }, 'Tasks on this instance'), h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('h1', { class: 'view-title' }, 'Overview'), cards, charts, instances, tasks);

  let group = null, st = null, info = null, lastTasks = null;
  appInfo().then((i) => { info = i; }).catch(() => {});

  const stopFast = poll(async (signal) => {
    const [ts, stats] = await Promise.allSettled([getJSON('tasks', { signal }), getJSON('stats', { signal })]);
    if (stats.status === 'fulfilled') { st = stats.value; drawCharts(charts, st); }
    drawTasks(tasks, ts);
    lastTasks = ts.status === 'fulfilled' ? ts.value : null;
    drawCards(cards, group, st, lastTasks);
  }, 2000);
  const stopSlow = poll(async (signal) => {
    try {
      group = await getJSON('instances', { signal });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      group = { unavailable: e.status === 404 ? 'instances unavailable: this instance does not serve /instances' : `instances unavailable: ${e.message}` };
    }
    drawInstances(instances, group, info);
    drawCards(cards, group, st, lastTasks);
  }, 5000);
  return () => { stopFast(); stopSlow(); };
}

function card(label, value, id) {
  return h('div', { class: 'card', id }, h('div', { class: 'card-label' }, label), h('div', { class: 'card-value' }, value));
}

function drawCards(el, group, st, tasks) {
  const last = st && st.points.length ? st.points[st.points.length - 1] : null;
  const ok = group && !group.unavailable;
  clear(el).append(
    card('Group', ok ? `${group.state || '?'} · gen ${group.generation ?? '?'}` : 'n/a', 'card-group'),
    card('Input lag', ok && group.lag !== undefined ? fmtNum(group.lag) : tasks ? fmtNum(sumLag(tasks.filter((t) => t.state !== 'standby'))) : '–', 'card-lag'),
    card('Tasks here', tasks ? String(tasks.filter((t) => t.state !== 'standby').length) : '–', 'card-tasks'),
    card('Records in', st ? fmtNum(st.totals.processed) : '–', 'card-in'),
    card('Records out', st ? fmtNum(st.totals.produced) : '–', 'card-out'),
    card('In / s', last ? fmtRate(last.in_per_sec) : '–', 'card-rate'),
    card('Latency p99', last && last.latencies ? fmtMs(last.latency_p99) : '–', 'card-p99'));
}

function sumLag(tasks) {
  let n = 0;
  for (const t of tasks) for (const v of Object.values(t.lag || {})) n += v;
  return n;
}

function drawCharts(el, st) {
  const pts = st.points;
  const thr = chart({
    title: 'Records per second',
    windowMs: st.window_ms,
    unit: 'records/s',
    fmt: fmtRate,
    series: [
      { name: 'in', cls: 's1', points: pts.map((p) => [p.t, p.in_per_sec]) },
      { name: 'out', cls: 's2', points: pts.map((p) => [p.t, p.out_per_sec]) },
    ],
  });
  const withLat = pts.filter((p) => p.latencies > 0);
  const lat = chart({
    title: 'End-to-end latency (record timestamp to output)',
    windowMs: st.window_ms,
    unit: 'record timestamp → output',
    fmt: fmtMs,
    tick: (v) => (v >= 1000 ? (v / 1000).toFixed(1) + ' s' : v > 0 && v < 10 ? v.toFixed(1) + ' ms' : Math.round(v) + ' ms'),
    series: [
      { name: 'p50', cls: 's1', points: withLat.map((p) => [p.t, p.latency_p50]) },
      { name: 'p99', cls: 's3', points: withLat.map((p) => [p.t, p.latency_p99]) },
    ],
  });
  // The loop's time: waiting for input (poll), processing, and
  // committing (flush, end and apply, during which nothing is processed),
  // each in percent of the interval.
  const pct = (p, ...phases) => 100 * phases.reduce((n, ph) => n + ((p.loop && p.loop[ph]) || 0), 0);
  const loop = chart({
    title: "Where the instance loop's time goes",
    windowMs: st.window_ms,
    unit: '% of the time',
    fmt: (v) => v.toFixed(0) + ' %',
    series: [
      { name: 'poll', cls: 's1', points: pts.map((p) => [p.t, pct(p, 'poll')]) },
      { name: 'process', cls: 's2', points: pts.map((p) => [p.t, pct(p, 'process')]) },
      { name: 'commit', cls: 's3', points: pts.map((p) => [p.t, pct(p, 'flush', 'end', 'apply')]) },
    ],
  });
  clear(el.querySelector('#chart-throughput')).append(thr, legend([['in', 's1'], ['out', 's2']]));
  clear(el.querySelector('#chart-latency')).append(lat, legend([['p50', 's1'], ['p99', 's3']]));
  clear(el.querySelector('#chart-loop')).append(loop, legend([['poll: waiting for input', 's1'], ['process', 's2'], ['commit', 's3']]));
}

function legend(items) {
  return h('p', { class: 'legend' }, items.map(([n, c]) => h('span', { class: 'key' }, h('span', { class: `swatch ${c}`, 'aria-hidden': 'true' }), n)));
}

// taskState is what a person should read of a task's state: a standby
// copy that is still behind its changelogs is warming up (catching up
// before it can take the task over).
function taskState(t) {
  if (t.state === 'restoring') {
    const total = (t.restored || 0) + (t.restore_remaining || 0);
    const pct = total > 0 ? Math.floor((100 * (t.restored || 0)) / total) : 0;
    return h('span', { class: 'state restoring' }, h('span', { class: 'badge restoring' }, 'restoring'),
      h('progress', { max: Math.max(total, 1), value: t.restored || 0, 'aria-label': `restored ${pct}%` }),
      ` ${pct}% · ${fmtNum(t.restore_remaining)} left`);
  }
  if (t.state === 'standby') {
    const behind = sumLag([t]);
    return behind > 0
      ? h('span', { class: 'badge warming', title: `standby copy catching up: ${fmtNum(behind)} changelog records behind` }, `warming up · ${fmtNum(behind)} behind`)
      : h('span', { class: 'badge standby' }, 'standby');
  }
  return h('span', { class: `badge ${t.state}` }, t.state);
}

function drawTasks(el, res) {
  const body = [h('h2', { id: 'h-tasks' }, 'Tasks on this instance')];
  if (res.status === 'rejected') {
    body.push(errorBox(`tasks: ${res.reason.message}`));
  } else if (!res.value || res.value.length === 0) {
    body.push(h('p', { class: 'muted', id: 'no-tasks' }, 'No tasks yet: the instance has not received its assignment.'));
  } else {
    const rows = res.value.map((t) => {
      const lag = Object.entries(t.lag || {}).map(([k, v]) => `${k}: ${fmtNum(v)}`).join(', ');
      return h('tr', { 'data-task': t.id, 'data-state': t.state },
        h('th', { scope: 'row' }, t.id),
        h('td', {}, taskState(t)),
        h('td', {}, (t.stores || []).join(', ') || '–'),
        h('td', { class: 'num' }, fmtNum(t.processed)),
        h('td', { class: 'num' }, fmtNum(t.out)),
        h('td', { class: 'num', title: lag }, fmtNum(sumLag([t]))),
        h('td', { class: 'num' }, fmtAge(t.since)));
    });
    body.push(table(null, ['Task', 'State', 'Stores', 'In', 'Out', 'Lag', 'For'], rows, { id: 'tasks-table' }));
  }
  clear(el).append(...body);
}

function drawInstances(el, group, info) {
  const body = [h('h2', { id: 'h-inst' }, 'Instances')];
  if (group.unavailable) {
    body.push(h('p', { class: 'muted', id: 'instances-unavailable' }, group.unavailable));
  } else {
    const insts = group.instances || [];
    body.push(h('p', { class: 'muted' }, `${group.application || ''} · ${group.state || ''} · generation ${group.generation ?? '?'} · ${insts.length} instance${insts.length === 1 ? '' : 's'} · lag ${fmtNum(group.lag)}`));
    const rows = insts.map((i) => {
      const here = info && info.endpoint && i.endpoint === info.endpoint;
      return h('tr', { 'data-instance': i.endpoint || i.member_id },
        h('th', { scope: 'row' }, i.endpoint || i.host || '?', here ? h('span', { class: 'badge here' }, 'this one') : null,
          h('div', { class: 'sub' }, i.client_id || i.member_id || '')),
        h('td', {}, h('ul', { class: 'chips' }, (i.tasks || []).map((t) => h('li', { class: 'chip', title: (t.partitions || []).map((p) => `${p.topic}[${p.partition}] ${p.committed}/${p.end}`).join('\n') }, `${t.id}`, t.lag ? h('span', { class: 'lag' }, ` lag ${fmtNum(t.lag)}`) : null)))),
        h('td', {}, h('ul', { class: 'chips' }, (i.standbys || []).map((s) => h('li', { class: 'chip standby' }, s)))),
        h('td', { class: 'num' }, fmtNum(i.lag)));
    });
    body.push(table(null, ['Instance', 'Tasks', 'Standbys', 'Lag'], rows, { id: 'instances-table' }));
  }
  clear(el).append(...body);
}
