// keys.js: the Keys section (R-ADM-3, R-KEY-1): member keys with their six limits, their
// queue priority (R-PRIO-2) and what they used today and this month; create a key (shown
// once), change limits, priority and the labels model auto must find (R-SEM-1), revoke.

import { api, api_delete, api_get, api_id, api_list_all, api_patch, api_post } from '../api.js';
import {
  badge, field, fmtLimit, fmtNum, h, notify, onSubmit, replace, select, showSecret, table,
} from '../dom.js';
import { confirmDiff, editButton, editDialog } from '../edit.js';
import { errorText, LIMITS, limitFields, limitValues, panel, refreshButton, utcDay, viewHeader } from './parts.js';

const STRATEGIES = ['balanced', 'cost', 'latency', 'semantic'];
// The key's own fields (PATCH tenant/api-keys/{id}) and its auto routing policy
// (PUT .../routing-policy, R-AUTO-1: null = the global setting).
const KEY_SPEC = [
  { name: 'name', label: 'Name', type: 'text', maxlength: 128 },
  ...LIMITS.map(([name, label, hint]) => ({ name, label, type: 'int', min: 0, hint: `${hint}; 0 = unlimited` })),
  { name: 'priority', label: 'Priority', type: 'int', min: 0, max: 9, hint: '0 first, 9 last' },
  { name: 'max_priority', label: 'Max priority', type: 'int', min: 0, max: 9, hint: 'empty = its own' },
  // R-SEM-1: models lacking one of these labels (their policy's) are no candidates of model auto.
  { name: 'require_labels', label: 'Require labels', type: 'text', nullable: true, maxlength: 1024, placeholder: 'eu-only',
    hint: 'comma-separated; model auto only picks models carrying every one; empty = none' },
];
const POLICY_SPEC = [
  { name: 'auto_routing_enabled', label: 'Auto routing', type: 'tristate', labels: { null: 'the global setting', true: 'on', false: 'off' } },
  { name: 'auto_routing_strategy', label: 'Auto strategy', type: 'enum', nullable: true, values: STRATEGIES, labels: { null: 'the global setting' } },
];
const POLICY_FIELDS = POLICY_SPEC.map((f) => f.name);

// R-PRIO-2: 0 is the highest; max priority empty = no higher than the key's own.
function priority_fields(k = {}) {
  return [
    field('Priority', h('input', { name: 'priority', type: 'number', min: 0, max: 9, step: 1, value: k.priority ?? 5 }),
      'in the wait queue: 0 first, 9 last'),
    field('Max priority', h('input', { name: 'max_priority', type: 'number', min: 0, max: 9, step: 1, value: k.max_priority ?? '', placeholder: 'its own' }),
      'the highest X-Priority may ask; empty = its own'),
  ];
}

function priority_values(v) {
  const out = {};
  if (Number.isFinite(v.priority)) out.priority = Math.trunc(v.priority);
  out.max_priority = Number.isFinite(v.max_priority) ? Math.trunc(v.max_priority) : null;
  return out;
}

export async function render(root, ctx) {
  const list = h('div', { id: 'key-list' });
  const reload = () => keys_load(list, ctx, reload);
  replace(root, viewHeader('Keys', 'Member API keys, their limits and use. Limits of 0 mean unlimited.', refreshButton(reload)),
    panel('New key', await keys_form(ctx, reload), { id: 'new-key' }), h('section', { class: 'card' }, list));
  await reload();
}

async function keys_form(ctx, reload) {
  let owner;
  if (ctx.role === 'member') {
    owner = field('Owner', h('input', { value: ctx.user.name, readonly: true }));
  } else {
    const users = await api_list_all('users');
    const opts = users.map((u) => [u.name, ctx.isOperator ? `${u.name} (${u.tenant}, ${u.role})` : `${u.name} (${u.role})`]);
    owner = field('Owner', select('user', opts, ctx.user.name));
  }
  const form = h('form', { class: 'form-grid', method: 'post', id: 'key-form' },
    owner, field('Name', h('input', { name: 'name', maxlength: 128, placeholder: 'e.g. batch-jobs' })),
    limitFields(), priority_fields(),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'btn' }, 'Create key')));
  return onSubmit(form, async (v) => {
    const body = { ...limitValues(v), ...priority_values(v) };
    if (body.max_priority === null) delete body.max_priority;
    if (v.user) body.user = v.user;
    if (v.name) body.name = v.name;
    const k = await api_post('tenant/api-keys', body);
    form.reset();
    form.closest('details').open = false;
    await reload();
    await showSecret(`Key ${k.name || k.prefix}`, k.key,
      'Copy this key now: it is shown once and cannot be read again. Use it as "Authorization: Bearer …" on /v1.');
  });
}

// Calls and tokens per key today and this month, from the daily aggregates (R-USE-6).
async function keys_usage() {
  const today = utcDay(new Date());
  const month = `${today.slice(0, 8)}01`;
  const [d, m] = await Promise.all([
    api_get('tenant/usage', { group_by: 'key', from: today, to: today, limit: 1000 }),
    api_get('tenant/usage', { group_by: 'key', from: month, to: today, limit: 1000 }),
  ]);
  const byKey = (res) => new Map(res.data.map((r) => [r.key_id, r]));
  return { day: byKey(d), month: byKey(m) };
}

// "used / limit" with a small meter when there is a limit.
function usage_cell(used, limit) {
  const text = h('span', { class: 'use-text' }, `${fmtNum(used)} / ${fmtLimit(limit)}`);
  if (!limit) return text;
  const ratio = Math.min(1, used / limit);
  const fill = h('span', { class: ['meter-fill', ratio >= 0.9 ? 'meter-bad' : ratio >= 0.7 ? 'meter-warn' : null] });
  fill.style.width = `${(ratio * 100).toFixed(1)}%`;
  return h('div', { class: 'use' }, text, h('span', { class: 'meter' }, fill));
}

async function keys_load(list, ctx, reload) {
  const keys = await api_list_all('tenant/api-keys');
  // Issue 16: the quota counters the gateway enforces (today, month); before the API had
  // them, the daily aggregates.
  const counted = keys.every((k) => k.today && k.month);
  const use = counted ? null : await keys_usage();
  const day = (k) => (counted ? { requests: k.today.requests, total_tokens: k.today.tokens } : use.day.get(k.id) || {});
  const mon = (k) => (counted ? { requests: k.month.requests, total_tokens: k.month.tokens } : use.month.get(k.id) || {});
  const cols = [
    { label: 'Key', cell: (k) => h('div', null, h('strong', null, k.name || '(unnamed)'), h('div', { class: 'muted small' }, h('code', null, `${k.prefix}…`)),
      k.require_labels ? h('div', { class: 'muted small key-labels', 'data-labels': k.require_labels }, `requires ${k.require_labels.split(',').join(', ')}`) : null) },
    { label: 'Owner', cell: (k) => (ctx.isOperator ? `${k.user} · ${k.tenant}` : k.user) },
    { label: 'Status', cell: (k) => (k.revoked ? badge('revoked', 'muted') : badge('active', 'ok')) },
    { label: 'QPS', cell: (k) => fmtLimit(k.qps_limit), class: 'num' },
    { label: 'Concurrency', cell: (k) => fmtLimit(k.concurrency_limit), class: 'num' },
    { label: 'Calls today', cell: (k) => h('div', null, usage_cell(day(k).requests || 0, k.daily_limit),
      h('div', { class: 'muted small key-tokens-today' }, `${fmtNum(day(k).total_tokens || 0)} tokens`)) },
    { label: 'Calls this month', cell: (k) => usage_cell(mon(k).requests || 0, k.monthly_quota) },
    { label: 'Tokens / min', cell: (k) => fmtLimit(k.tpm_limit), class: 'num' },
    { label: 'Tokens this month', cell: (k) => usage_cell(mon(k).total_tokens || 0, k.monthly_token_quota) },
    { label: 'Priority', cell: (k) => (k.max_priority === null || k.max_priority === k.priority ? String(k.priority) : `${k.priority} (up to ${k.max_priority})`), class: 'num' },
    { label: '', class: 'actions sticky-actions', cell: (k) => (k.revoked ? '' : key_actions(k, reload)) },
  ];
  const sorted = [...keys].sort((a, b) => Number(a.revoked) - Number(b.revoked) || b.id - a.id);
  replace(list, table(cols, sorted, { empty: 'No keys yet.', rowClass: (k) => (k.revoked ? 'row-muted' : null) }));
  list.dataset.counters = counted ? 'quota' : 'usage';
}

async function key_edit(k, reload) {
  let policy = { auto_routing_enabled: null, auto_routing_strategy: null };
  try {
    policy = await api_get(`tenant/api-keys/${api_id(k.id)}/routing-policy`);
  } catch (err) {
    notify(errorText(err), 'error');
  }
  const done = await editDialog({
    title: `Edit key ${k.name || k.prefix}`, spec: [...KEY_SPEC, ...POLICY_SPEC], values: { ...k, ...policy },
    done: 'Key saved',
    save: async (ch) => {
      const own = {};
      const pol = {};
      for (const [n, v] of Object.entries(ch)) (POLICY_FIELDS.includes(n) ? pol : own)[n] = v;
      // "eu-only, pii-ok" -> "eu-only,pii-ok" (the API takes words only); empty clears (null).
      if ('require_labels' in own) {
        own.require_labels = (own.require_labels || '').split(',').map((x) => x.trim()).filter(Boolean).join(',') || null;
      }
      if (Object.keys(own).length) await api_patch(`tenant/api-keys/${api_id(k.id)}`, own);
      if (Object.keys(pol).length) await api('PUT', `tenant/api-keys/${api_id(k.id)}/routing-policy`, pol);
      return true;
    },
  });
  if (done) await reload();
}

function key_actions(k, reload) {
  const edit = editButton('Edit', `Edit key ${k.name || k.prefix}`);
  edit.addEventListener('click', () => key_edit(k, reload));
  const revoke = h('button', { type: 'button', class: 'btn btn-ghost-danger btn-sm', 'data-action': 'revoke' }, 'Revoke');
  revoke.addEventListener('click', async () => {
    if (!await confirmDiff(`Revoke key ${k.name || k.prefix}`, 'Programs using it get 401 at once; this cannot be undone.',
      [['status', 'active', 'revoked'], ['prefix', `${k.prefix}…`, `${k.prefix}…`]], { okLabel: 'Revoke' })) return;
    try {
      await api_delete(`tenant/api-keys/${api_id(k.id)}`);
      notify('Key revoked');
      await reload();
    } catch (err) {
      notify(errorText(err), 'error');
    }
  });
  return h('div', { class: 'btn-row' }, edit, revoke);
}
