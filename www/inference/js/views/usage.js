// usage.js: the Usage section (R-ADM-3, R-USE-6): requests and tokens per day as stacked
// bar charts by model, user or key over a chosen range of days, with totals and a table.
// The API groups by one dimension at a time: the range's groups come from one report,
// the per-day split from one report per day that had traffic.

import { api_get, api_text } from '../api.js';
import { chart_legend, chart_stacked_bars, CHART_SERIES_MAX } from '../chart.js';
import { field, fmtNum, h, notify, replace, select, table } from '../dom.js';
import { addDays, daysBetween, errorText, refreshButton, utcDay, viewHeader } from './parts.js';

const GROUPS = [['model', 'Model'], ['user', 'User'], ['key', 'Key'], ['endpoint', 'Endpoint'], ['replica', 'Replica'], ['day', 'Day']];
const MAX_DAYS = 366;
const PARALLEL = 6;
let last = { from: null, to: null, group: 'model' };

export async function render(root, ctx) {
  const today = utcDay(new Date());
  if (!last.from) last = { from: addDays(today, -13), to: today, group: 'model' };
  const out = h('div', { class: 'stack', id: 'usage-out' });
  const form = h('form', { class: 'card usage-controls', method: 'get', id: 'usage-form' },
    field('From', h('input', { type: 'date', name: 'from', value: last.from, max: today, required: true })),
    field('To', h('input', { type: 'date', name: 'to', value: last.to, max: today, required: true })),
    field('Group by', select('group', GROUPS, last.group)),
    h('div', { class: 'presets', role: 'group', 'aria-label': 'Quick ranges' },
      [7, 30, 90].map((n) => h('button', { type: 'button', class: 'btn btn-secondary btn-sm', 'data-days': n }, `${n} days`))),
    h('div', { class: 'form-actions' },
      h('button', { type: 'button', class: 'btn btn-secondary', id: 'usage-csv', 'data-action': 'csv' }, 'Download CSV'),
      h('button', { type: 'submit', class: 'btn' }, 'Show')));
  form.querySelector('#usage-csv').addEventListener('click', () => usage_csv(form));
  const run = async () => {
    const f = form.elements;
    last = { from: f.from.value, to: f.to.value, group: f.group.value };
    try {
      await usage_show(out, last, ctx);
    } catch (err) {
      // An API without this grouping (or a bad range) says so in the card, not as a crash.
      replace(out, h('div', { class: 'card error-card usage-error' }, h('h2', null, 'Could not load usage'), h('p', null, errorText(err))));
      out.removeAttribute('aria-busy');
      out.dataset.group = last.group;
    }
  };
  form.addEventListener('submit', (ev) => { ev.preventDefault(); run(); });
  form.elements.group.addEventListener('change', run);
  for (const b of form.querySelectorAll('[data-days]')) {
    b.addEventListener('click', () => {
      form.elements.to.value = today;
      form.elements.from.value = addDays(today, 1 - Number(b.dataset.days));
      run();
    });
  }
  replace(root, viewHeader('Usage', `Requests and tokens per billing day${ctx.role === 'member' ? ' (your own)' : ctx.isOperator ? '' : ' (your tenant)'}.`, refreshButton(run)), form, out);
  await run();
}

// The current table as the API writes it (format=csv), saved as a file.
async function usage_csv(form) {
  const f = form.elements;
  try {
    const text = await api_text('tenant/usage', { group_by: f.group.value, from: f.from.value, to: f.to.value, limit: 1000, format: 'csv' });
    const url = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
    const a = h('a', { href: url, download: `usage-${f.group.value}-${f.from.value}-${f.to.value}.csv`, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (err) {
    notify(errorText(err), 'error');
  }
}

const fmtMs = (v) => (v === null || v === undefined ? '–' : `${fmtNum(Math.round(v))} ms`);
function fmtCost(r) {
  if (r.cost === null || r.cost === undefined) return '–';
  return `${Number(r.cost).toFixed(4)} ${r.currency || ''}`.trim();
}

function group_of(group, r) {
  if (group === 'model') return { id: r.model, name: r.model || '(none)' };
  if (group === 'endpoint') return { id: r.endpoint_id, name: r.endpoint || (r.endpoint_id ? `endpoint ${r.endpoint_id}` : '(none)') };
  if (group === 'replica') return { id: r.replica_id, name: r.replica || (r.replica_id ? `replica ${r.replica_id}` : '(none)') };
  if (group === 'day') return { id: r.day, name: r.day };
  if (group === 'user') return { id: r.user_id, name: r.user || (r.user_id ? `user ${r.user_id}` : 'endpoint keys') };
  const owner = r.user ? ` · ${r.user}` : '';
  return { id: r.key_id, name: r.key_id ? `${r.name || r.prefix || `key ${r.key_id}`}${owner}` : 'endpoint keys' };
}

// Runs fn over items with at most n in flight.
async function each_limited(items, n, fn) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}

async function usage_show(out, q, ctx) {
  if (!q.from || !q.to || q.from > q.to) {
    replace(out, h('div', { class: 'card error-card' }, 'Choose a range whose start is not after its end.'));
    return;
  }
  const days = daysBetween(q.from, q.to);
  if (days.length > MAX_DAYS) {
    replace(out, h('div', { class: 'card error-card' }, `Choose at most ${MAX_DAYS} days.`));
    return;
  }
  out.setAttribute('aria-busy', 'true');
  const [groups, perDay] = await Promise.all([
    api_get('tenant/usage', { group_by: q.group, from: q.from, to: q.to, limit: 1000 }),
    api_get('tenant/usage', { group_by: 'day', from: q.from, to: q.to, limit: 1000 }),
  ]);
  const active = perDay.data.filter((r) => r.requests > 0).map((r) => r.day);
  const split = await each_limited(active, PARALLEL, (d) =>
    api_get('tenant/usage', { group_by: q.group, from: d, to: d, limit: 1000 }));

  // The largest groups get their own colour; the rest are summed as "other".
  const named = groups.data.slice(0, CHART_SERIES_MAX - 1).map((r) => group_of(q.group, r));
  const index = new Map(named.map((g, i) => [String(g.id), i]));
  const hasOther = groups.total > named.length;
  const mk = () => [...named.map((g) => ({ name: g.name, values: days.map(() => 0) })),
    ...(hasOther ? [{ name: 'other', values: days.map(() => 0) }] : [])];
  const reqSeries = mk();
  const tokSeries = mk();
  const dayIndex = new Map(days.map((d, i) => [d, i]));
  active.forEach((d, k) => {
    const di = dayIndex.get(d);
    for (const r of split[k].data) {
      const gi = index.get(String(group_of(q.group, r).id)) ?? named.length;
      if (gi >= reqSeries.length) continue;
      reqSeries[gi].values[di] += r.requests;
      tokSeries[gi].values[di] += r.total_tokens;
    }
  });

  const t = groups.totals;
  const stats = h('div', { class: 'stats' },
    [['requests', 'Requests', t.requests], ['errors', 'Errors', t.errors], ['prompt_tokens', 'Prompt tokens', t.prompt_tokens],
      ['completion_tokens', 'Completion tokens', t.completion_tokens], ['total_tokens', 'Total tokens', t.total_tokens],
      ...(groups.data.some((r) => r.cost !== undefined) ? [['cost', `Cost (${groups.data[0]?.currency || ''})`.replace(' ()', ''),
        +groups.data.reduce((a, r) => a + (Number(r.cost) || 0), 0).toFixed(4)]] : [])]
      .map(([k, label, v]) => h('div', { class: 'stat', 'data-stat': k }, h('div', { class: 'stat-label' }, label), h('div', { class: 'stat-value' }, fmtNum(v)))));
  const legendNames = reqSeries.map((se) => se.name);
  const groupLabel = GROUPS.find(([g]) => g === q.group)[1].toLowerCase();
  const reqBox = chart_box('usage-requests', `Requests per day by ${groupLabel}`, days, reqSeries, ' requests');
  const tokBox = chart_box('usage-tokens', `Tokens per day by ${groupLabel}`, days, tokSeries, ' tokens');
  const sum = t.total_tokens || 1;
  const tbl = table([
    { label: GROUPS.find(([g]) => g === q.group)[1], cell: (r) => group_of(q.group, r).name },
    { label: 'Requests', cell: (r) => fmtNum(r.requests), class: 'num' },
    { label: 'Errors', cell: (r) => fmtNum(r.errors), class: 'num' },
    { label: 'Prompt tokens', cell: (r) => fmtNum(r.prompt_tokens), class: 'num' },
    { label: 'Completion tokens', cell: (r) => fmtNum(r.completion_tokens), class: 'num' },
    { label: 'Total tokens', cell: (r) => fmtNum(r.total_tokens), class: 'num' },
    { label: 'Share', cell: (r) => `${((r.total_tokens * 100) / sum).toFixed(1)}%`, class: 'num' },
    { label: 'Cost', cell: (r) => h('span', { class: 'usage-cost' }, fmtCost(r)), class: 'num' },
    { label: 'Latency p50', cell: (r) => fmtMs(r.latency_p50_ms), class: 'num' },
    { label: 'Latency p95', cell: (r) => fmtMs(r.latency_p95_ms), class: 'num' },
    { label: 'TTFT p50', cell: (r) => fmtMs(r.ttft_p50_ms), class: 'num' },
    { label: 'TTFT p95', cell: (r) => fmtMs(r.ttft_p95_ms), class: 'num' },
  ], groups.data, { empty: 'No usage in this range.', rowClass: () => 'usage-row' });
  replace(out, stats, h('div', { class: 'chart-grid-2' }, reqBox, tokBox),
    h('section', { class: 'card' }, h('h2', null, `By ${groupLabel}`), chart_legend(legendNames), tbl));
  out.removeAttribute('aria-busy');
  out.dataset.from = q.from;
  out.dataset.to = q.to;
  out.dataset.group = q.group;
}

// A card with a chart that redraws at its own width (phone or desktop).
function chart_box(id, title, days, series, unit) {
  const holder = h('div', { class: 'chart-holder' });
  const box = h('section', { class: 'card chart-card', id }, h('h2', null, title), holder);
  let drawn = 0;
  const draw = () => {
    const w = holder.clientWidth;
    if (!w || Math.abs(w - drawn) < 8) return;
    drawn = w;
    replace(holder, chart_stacked_bars({ labels: days, series, width: w, title, unit }));
  };
  new ResizeObserver(draw).observe(holder);
  return box;
}
