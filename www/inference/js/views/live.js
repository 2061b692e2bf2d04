// live.js: the Live section (issue 12): request and error rates, p50/p95 latency and time
// to first token per model and endpoint over the last 15 minutes, and every replica's
// load now, from GET /api/v1/live (the shared state /metrics reads). Redrawn every 5 s
// while the section is shown; an admin sees its tenant's part (the API narrows it).

import { api_get } from '../api.js';
import { badge, fmtNum, h, replace, table } from '../dom.js';
import { refreshButton, viewHeader } from './parts.js';

const REFRESH_MS = 5000;
let timer = null;

const fmtRate = (v) => (v === null || v === undefined ? '–' : `${v < 10 ? v.toFixed(2) : v.toFixed(1)}/s`);
const fmtMs = (v) => (v === null || v === undefined ? '–' : `${fmtNum(Math.round(v * 10) / 10)} ms`);
const fmtPct = (part, all) => (all ? `${((part * 100) / all).toFixed(1)}%` : '–');
const num = (label, cell) => ({ label, cell, class: 'num' });

// The columns a model row and an endpoint row share.
function rate_columns() {
  return [
    num('Requests', (r) => fmtNum(r.requests)),
    num('Req/s', (r) => fmtRate(r.request_rate)),
    num('Errors', (r) => fmtNum(r.errors)),
    num('Err/s', (r) => fmtRate(r.error_rate)),
    num('Error %', (r) => fmtPct(r.errors, r.requests)),
    num('p50', (r) => fmtMs(r.latency_p50_ms)),
    num('p95', (r) => fmtMs(r.latency_p95_ms)),
    num('TTFT p50', (r) => fmtMs(r.ttft_p50_ms)),
    num('TTFT p95', (r) => fmtMs(r.ttft_p95_ms)),
  ];
}

function circuit_badge(c) {
  return badge(c.replace('_', '-'), c === 'closed' ? 'ok' : c === 'open' ? 'bad' : 'warn');
}

function live_draw(out, d) {
  const total = d.models.reduce((a, m) => a + m.requests, 0);
  const errors = d.models.reduce((a, m) => a + m.errors, 0);
  const active = d.replicas.reduce((a, r) => a + r.active, 0);
  const stat = (k, label, v) => h('div', { class: 'stat', 'data-stat': k },
    h('div', { class: 'stat-label' }, label), h('div', { class: 'stat-value' }, v));
  const stats = h('div', { class: 'stats' },
    stat('requests', `Requests (${d.minutes} min)`, fmtNum(total)),
    stat('rate', 'Requests/s', fmtRate(total / d.window_seconds)),
    stat('errors', 'Errors', fmtNum(errors)),
    stat('active', 'In flight', fmtNum(active)));
  const models = table([{ label: 'Model', cell: (r) => h('code', null, r.model) }, ...rate_columns()],
    d.models, { empty: 'No model traffic yet.', rowClass: () => 'live-model' });
  const eps = table([
    { label: 'Endpoint', cell: (r) => r.endpoint },
    ...rate_columns(),
    num('Active', (r) => fmtNum(r.active)),
    num('Waiting', (r) => fmtNum(r.waiting)),
    num('Engine queue', (r) => fmtNum(r.queue)),
  ], d.endpoints, { empty: 'No endpoints.' });
  const reps = table([
    { label: 'Endpoint', cell: (r) => r.endpoint },
    { label: 'Replica', cell: (r) => h('code', { class: 'url' }, r.url) },
    num('Active', (r) => fmtNum(r.active)),
    num('Queue', (r) => fmtNum(r.queue)),
    num('KV cache', (r) => (r.kv_cache_ratio === null ? '–' : `${(r.kv_cache_ratio * 100).toFixed(1)}%`)),
    { label: 'Circuit', cell: (r) => circuit_badge(r.circuit) },
  ], d.replicas, { empty: 'No replicas.' });
  replace(out, stats,
    h('section', { class: 'card', id: 'live-models' }, h('h2', null, 'Models'), models),
    h('section', { class: 'card', id: 'live-endpoints' }, h('h2', null, 'Endpoints'), eps),
    h('section', { class: 'card', id: 'live-replicas' }, h('h2', null, 'Replicas'), reps),
    h('p', { class: 'muted' }, `Updated ${new Date(d.now_ms).toLocaleTimeString()}; every ${REFRESH_MS / 1000} s.`));
  out.dataset.updated = String(d.now_ms);
  out.dataset.refreshes = String(Number(out.dataset.refreshes || 0) + 1);
}

async function live_load(out) {
  const d = await api_get('live');
  live_draw(out, d);
}

export async function render(root, ctx) {
  if (timer) clearInterval(timer);
  const out = h('div', { class: 'stack', id: 'live-out' });
  const scope = ctx.isOperator ? 'the whole pool' : 'your tenant\'s endpoints and models';
  replace(root, viewHeader('Live', `Last 15 minutes, ${scope}.`, refreshButton(() => live_load(out).catch(() => {}))), out);
  await live_load(out);
  // Stops by itself once another section replaced this one (or the session ended).
  const t = setInterval(() => {
    if (!out.isConnected) {
      clearInterval(t);
      if (timer === t) timer = null;
      return;
    }
    live_load(out).catch(() => {});
  }, REFRESH_MS);
  timer = t;
}
