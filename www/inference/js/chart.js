// chart.js: small SVG charts for the usage view (R-ADM-3): stacked bars per day and their
// legend. Drawn with our own code (no library, nothing external, CSP 'self' only);
// colours come from app.css classes .s0 ... .s7.

import { h, s } from './dom.js';

export const CHART_SERIES_MAX = 8;

function chart_compact(n) {
  const a = Math.abs(n);
  if (a >= 1e9) return `${+(n / 1e9).toFixed(1)}G`;
  if (a >= 1e6) return `${+(n / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${+(n / 1e3).toFixed(1)}k`;
  return String(Math.round(n * 100) / 100);
}

// A round step so that max is covered by about `count` intervals.
function chart_step(max, count) {
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  const nice = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10;
  return Math.max(1, nice * mag);
}

// labels: the x values (days); series: [{name, values: [] per label}]; returns <svg>.
export function chart_stacked_bars({ labels, series, width, height = 240, title, unit = '' }) {
  const m = { left: 52, right: 12, top: 14, bottom: 30 };
  const w = Math.max(280, Math.round(width));
  const pw = w - m.left - m.right;
  const ph = height - m.top - m.bottom;
  const sums = labels.map((_, i) => series.reduce((acc, se) => acc + (se.values[i] || 0), 0));
  const peak = Math.max(0, ...sums);
  const step = chart_step(peak || 1, 4);
  const top = Math.max(step, Math.ceil(peak / step) * step);
  const y = (v) => m.top + ph - (v / top) * ph;
  const svg = s('svg', {
    class: 'chart', viewBox: `0 0 ${w} ${height}`, width: w, height, role: 'img',
    'aria-label': title, 'data-peak': peak,
  });
  svg.append(s('title', null, title));

  const grid = s('g', { class: 'chart-grid' });
  for (let v = 0; v <= top + 1e-9; v += step) {
    grid.append(s('line', { x1: m.left, x2: w - m.right, y1: y(v), y2: y(v) }),
      s('text', { x: m.left - 6, y: y(v) + 4, class: 'chart-ylabel' }, chart_compact(v)));
  }
  svg.append(grid);

  const n = labels.length;
  const slot = pw / Math.max(1, n);
  const bw = Math.max(2, Math.min(36, slot * 0.7));
  const bars = s('g', { class: 'chart-bars' });
  labels.forEach((label, i) => {
    let acc = 0;
    const x = m.left + i * slot + (slot - bw) / 2;
    series.forEach((se, j) => {
      const v = se.values[i] || 0;
      if (v <= 0) return;
      const r = s('rect', {
        class: `bar s${j % CHART_SERIES_MAX}`, x: x.toFixed(1), width: bw.toFixed(1),
        y: y(acc + v).toFixed(1), height: Math.max(1, y(acc) - y(acc + v)).toFixed(1),
        'data-value': v,
      });
      r.append(s('title', null, `${label} · ${se.name}: ${v.toLocaleString('en-US')}${unit}`));
      bars.append(r);
      acc += v;
    });
  });
  svg.append(bars);

  // Day labels thinned so they never overlap (about 44 px each), counted back from the
  // last day so the most recent one is always labelled.
  const every = Math.max(1, Math.ceil((n * 44) / pw));
  const xl = s('g', { class: 'chart-xlabels' });
  labels.forEach((label, i) => {
    if ((n - 1 - i) % every !== 0) return;
    xl.append(s('text', { x: (m.left + i * slot + slot / 2).toFixed(1), y: height - 10 }, label.slice(5)));
  });
  svg.append(xl, s('line', { class: 'chart-axis', x1: m.left, x2: w - m.right, y1: y(0), y2: y(0) }));
  if (!peak) {
    svg.append(s('text', { class: 'chart-empty', x: m.left + pw / 2, y: m.top + ph / 2 }, 'No usage in this range'));
  }
  return svg;
}

export function chart_legend(names) {
  return h('ul', { class: 'legend' }, names.map((name, j) =>
    h('li', null, h('span', { class: `swatch s${j % CHART_SERIES_MAX}` }), name)));
}
