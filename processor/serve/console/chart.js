// chart draws time series as an SVG line chart: series [{name, cls,
// points: [[t, v], …]}] over the window ending now. It scales with its
// container (viewBox), and carries a text summary for screen readers.
import { s } from './dom.js';

const W = 600, H = 170, L = 52, R = 8, T = 10, B = 22;

export function chart({ title, series, windowMs, unit, fmt, tick }) {
  // The axis spans the data, from one minute up to the whole window, so
  // the first minutes after the console opens are not a sliver.
  const now = Date.now();
  let first = now;
  for (const sr of series) if (sr.points.length) first = Math.min(first, sr.points[0][0]);
  windowMs = Math.min(windowMs, Math.max(60000, now - first));
  const t0 = now - windowMs;
  tick = tick || fmt;
  let max = 0;
  for (const sr of series) for (const [, v] of sr.points) max = Math.max(max, v);
  max = niceMax(max);
  const x = (t) => L + ((t - t0) / windowMs) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const last = series.map((sr) => `${sr.name} ${sr.points.length ? fmt(sr.points[sr.points.length - 1][1]) : 'no data'}`).join(', ');
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': `${title}: ${last}` });
  svg.append(s('title', {}, title));
  for (const f of [0, 0.5, 1]) {
    const v = max * f;
    svg.append(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
    svg.append(s('text', { x: L - 6, y: y(v) + 4, class: 'tick', 'text-anchor': 'end' }, tick(v)));
  }
  const mins = Math.round(windowMs / 60000);
  svg.append(s('text', { x: L, y: H - 6, class: 'tick' }, `−${mins} min`));
  svg.append(s('text', { x: W - R, y: H - 6, class: 'tick', 'text-anchor': 'end' }, 'now'));
  if (unit) svg.append(s('text', { x: L + (W - L - R) / 2, y: H - 6, class: 'tick', 'text-anchor': 'middle' }, unit));
  for (const sr of series) {
    const pts = sr.points.filter(([t]) => t >= t0);
    if (pts.length === 0) continue;
    const d = pts.map(([t, v], i) => `${i ? 'L' : 'M'}${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    svg.append(s('path', { d, class: `line ${sr.cls}`, 'data-series': sr.name }));
    if (pts.length === 1) {
      svg.append(s('circle', { cx: x(pts[0][0]), cy: y(pts[0][1]), r: 2.5, class: `dot ${sr.cls}` }));
    }
  }
  return svg;
}

// niceMax rounds m up to 1, 2 or 5 times a power of ten.
function niceMax(m) {
  if (!(m > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(m)));
  for (const f of [1, 2, 5, 10]) if (m <= f * p) return f * p;
  return 10 * p;
}
