// requests.js: the Requests section (issue 16): the usage events newest first from
// GET /api/v1/requests, filtered (time range, status, error code, model, key, user,
// endpoint) and paged by its keyset cursor (`next` = the id to ask `before`); each row
// opens its details (request id, routed model, replica, tokens, TTFT, latency, retries,
// affinity, cache).

import { api_get, api_list_all } from '../api.js';
import { badge, field, fmtNum, h, replace, select, table } from '../dom.js';
import { errorText, refreshButton, viewHeader } from './parts.js';

const SIZES = [['25', '25'], ['50', '50'], ['100', '100'], ['200', '200']];
const STATUSES = [['', 'Any'], ['2xx', '2xx'], ['4xx', '4xx'], ['5xx', '5xx'], ['200', '200'], ['400', '400'], ['401', '401'],
  ['404', '404'], ['429', '429'], ['500', '500'], ['502', '502'], ['503', '503'], ['504', '504']];

const ms = (v) => (v === null || v === undefined ? '–' : `${fmtNum(v)} ms`);

function when(tsMs) {
  const d = new Date(tsMs);
  const p = (x) => String(x).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function status_badge(r) {
  const s = r.status;
  return badge(String(s), s < 300 ? 'ok' : s < 500 ? 'warn' : 'bad');
}

// datetime-local (local time) -> epoch ms; empty -> undefined.
function local_ms(v) {
  if (!v) return undefined;
  const t = new Date(v).getTime();
  return Number.isFinite(t) ? t : undefined;
}

async function pickers(ctx) {
  const safe = (p) => p.catch(() => []);
  const [keys, users, eps] = await Promise.all([
    safe(api_list_all('tenant/api-keys')),
    ctx.canManage ? safe(api_list_all('users')) : [],
    ctx.canManage ? safe(api_list_all('endpoints')) : [],
  ]);
  return { keys, users, eps };
}

export async function render(root, ctx) {
  const p = await pickers(ctx);
  const out = h('section', { class: 'card', id: 'request-list' });
  const form = h('form', { class: 'card filter-form', method: 'get', id: 'request-filter' },
    field('From', h('input', { type: 'datetime-local', name: 'from' })),
    field('To', h('input', { type: 'datetime-local', name: 'to' })),
    field('Status', select('status', STATUSES, '')),
    field('Error code', h('input', { name: 'code', maxlength: 64, placeholder: 'e.g. upstream_timeout' })),
    field('Model', h('input', { name: 'model', maxlength: 256, placeholder: 'asked or routed' })),
    field('Key', select('key_id', [['', 'Any'], ...p.keys.map((k) => [String(k.id), `${k.name || k.prefix}${ctx.canManage ? ` · ${k.user}` : ''}`])], '')),
    ctx.canManage ? field('User', select('user_id', [['', 'Any'], ...p.users.map((u) => [String(u.id), u.name])], '')) : null,
    ctx.canManage ? field('Endpoint', select('endpoint_id', [['', 'Any'], ...p.eps.map((e) => [String(e.id), e.name])], '')) : null,
    field('Rows per page', select('limit', SIZES, '50')),
    h('div', { class: 'form-actions' },
      h('button', { type: 'reset', class: 'btn btn-secondary' }, 'Clear'),
      h('button', { type: 'submit', class: 'btn' }, 'Filter')));
  // Cursors of the pages shown so far: [undefined (first), next of page 1, ...].
  let cursors = [undefined];
  const filters = () => {
    const f = form.elements;
    const v = (n) => (f[n] ? f[n].value.trim() : '');
    return {
      from: local_ms(v('from')), to: local_ms(v('to')), status: v('status'), code: v('code'), model: v('model'),
      key_id: v('key_id'), user_id: v('user_id'), endpoint_id: v('endpoint_id'),
    };
  };
  let seq = 0;
  const load = async (page) => {
    out.setAttribute('aria-busy', 'true');
    const mine = ++seq;
    const q = { ...filters(), limit: form.elements.limit.value };
    let res;
    try {
      res = await api_get('requests', { ...q, before: cursors[page] });
      if (mine !== seq) return;   // a newer load replaced this one
    } catch (err) {
      if (mine !== seq) return;
      replace(out, h('h2', null, 'Requests'), h('div', { class: 'table-empty', id: 'requests-unavailable' },
        `The request log is not available: ${errorText(err)}`));
      out.removeAttribute('aria-busy');
      return;
    }
    cursors = cursors.slice(0, page + 1);
    if (res.next !== null && res.next !== undefined) cursors[page + 1] = res.next;
    const newer = h('button', { type: 'button', class: 'btn btn-secondary btn-sm', 'data-action': 'newer', disabled: page === 0 }, 'Newer');
    const older = h('button', { type: 'button', class: 'btn btn-secondary btn-sm', 'data-action': 'older', disabled: cursors[page + 1] === undefined }, 'Older');
    newer.addEventListener('click', () => load(page - 1));
    older.addEventListener('click', () => load(page + 1));
    const cols = [
      { label: 'Time', cell: (r) => when(r.ts_ms) },
      { label: 'Status', cell: status_badge },
      { label: 'Code', cell: (r) => (r.error_code ? h('code', null, r.error_code) : '–') },
      { label: 'Model', cell: (r) => (r.routed_model && r.routed_model !== r.model ? `${r.model} → ${r.routed_model}` : r.model || '–') },
      { label: 'Key', cell: (r) => r.key || (r.key_id ? `#${r.key_id}` : '–') },
      { label: 'User', cell: (r) => r.user || '–' },
      { label: 'Endpoint', cell: (r) => r.endpoint || '–' },
      { label: 'Tokens', cell: (r) => fmtNum((r.prompt_tokens || 0) + (r.completion_tokens || 0)), class: 'num' },
      { label: 'TTFT', cell: (r) => ms(r.ttft_ms), class: 'num' },
      { label: 'Latency', cell: (r) => ms(r.latency_ms), class: 'num' },
      { label: '', class: 'actions', cell: (r) => details_button(r) },
    ];
    replace(out, h('h2', null, 'Requests'),
      table(cols, res.data, { empty: 'No requests match.', rowClass: () => 'request-row' }),
      h('div', { class: 'pager' }, h('span', { class: 'muted small' }, `page ${page + 1} · ${res.data.length} shown`),
        h('div', { class: 'btn-row' }, newer, older)));
    out.querySelectorAll('tr.request-row').forEach((tr, i) => {
      tr.dataset.id = String(res.data[i].id);
      // The whole row opens the details too (the button is the keyboard's way).
      tr.addEventListener('click', (ev) => { if (!ev.target.closest('button')) request_details(res.data[i]); });
    });
    out.dataset.page = String(page);
    out.dataset.query = new URLSearchParams(Object.entries(q).filter(([, v]) => v !== undefined && v !== '')).toString();
    out.dataset.rows = String(res.data.length);
    out.removeAttribute('aria-busy');
  };
  form.elements.limit.addEventListener('change', () => { cursors = [undefined]; load(0); });
  form.addEventListener('submit', (ev) => { ev.preventDefault(); cursors = [undefined]; load(0); });
  form.addEventListener('reset', () => setTimeout(() => { cursors = [undefined]; load(0); }, 0));
  replace(root, viewHeader('Requests', 'Every request, newest first. Open one for its details.', refreshButton(() => load(0))), form, out);
  await load(0);
}

function details_button(r) {
  const b = h('button', { type: 'button', class: 'btn btn-secondary btn-sm', 'data-action': 'details', 'aria-label': `Details of ${r.request_id}` }, 'Details');
  b.addEventListener('click', () => request_details(r));
  return b;
}

const yesno = (v) => (v === null || v === undefined ? '–' : v ? 'yes' : 'no');

function request_details(r) {
  const items = [
    ['Request id', h('code', { class: 'req-id' }, r.request_id)],
    ['Time', when(r.ts_ms)],
    ['Status', String(r.status)],
    ['Error code', r.error_code || '–'],
    ['Path', r.path || '–'],
    ['Model asked', r.model || '–'],
    ['Routed model', r.routed_model || '–'],
    ['Endpoint', r.endpoint || '–'],
    ['Replica', r.replica || '–'],
    ['Key', r.key || (r.key_id ? `#${r.key_id}` : '–')],
    ['User', r.user || '–'],
    ['Prompt tokens', fmtNum(r.prompt_tokens)],
    ['Completion tokens', fmtNum(r.completion_tokens)],
    ['Cache read tokens', fmtNum(r.cache_read_tokens)],
    ['Reasoning tokens', fmtNum(r.reasoning_tokens)],
    ['TTFT', ms(r.ttft_ms)],
    ['Latency', ms(r.latency_ms)],
    ['Queued', ms(r.queue_ms)],
    ['Retries', fmtNum(r.retries)],
    ['Stream', yesno(r.stream)],
    ['Affinity', r.affinity || '–'],
    ['Cache', r.cache || (r.cached ? 'hit' : '–')],
    ['Finish reason', r.finish_reason || '–'],
    ['Content rule', r.content_rule || '–'],
    ['Estimated tokens', yesno(r.estimated)],
  ];
  const close = h('button', { type: 'button', class: 'btn', 'data-action': 'close' }, 'Close');
  const dlg = h('dialog', { class: 'dialog dialog-wide request-detail', 'aria-label': `Request ${r.request_id}` },
    h('h2', { class: 'dialog-title' }, `Request ${r.request_id}`),
    h('dl', { class: 'meta' }, items.map(([k, v]) => h('div', { 'data-item': k }, h('dt', null, k), h('dd', null, v)))),
    h('div', { class: 'dialog-actions' }, close));
  document.body.append(dlg);
  dlg.addEventListener('close', () => dlg.remove());
  close.addEventListener('click', () => dlg.close());
  dlg.showModal();
}
