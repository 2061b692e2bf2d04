// quotas.js: the Quotas section (R-KEY-6): the quota layers of tenants, users, endpoints
// and models, ANDed by the data plane (any refusal refuses); create, edit, delete. The
// operator sees every layer; a tenant admin those of its tenant's users and endpoints.

import { api_delete, api_id, api_list_all, api_patch, api_post } from '../api.js';
import { badge, field, fmtLimit, fmtTime, h, notify, onSubmit, replace, select, table } from '../dom.js';
import { confirmDiff, editDialog } from '../edit.js';
import { errorText, panel, refreshButton, viewHeader } from './parts.js';

// The limits each scope takes (R-KEY-6); the API refuses any other.
const SCOPES = {
  tenant: { label: 'Tenant', fields: ['concurrency', 'monthly_tokens'] },
  user: { label: 'User', fields: ['rpm', 'daily_tokens'] },
  endpoint: { label: 'Endpoint', fields: ['concurrency'] },
  model: { label: 'Model', fields: ['concurrency', 'queue_max'] },
};

const LIMITS = {
  concurrency: ['Concurrency', 'requests in flight; 0 = no limit'],
  rpm: ['Requests / min', 'per minute; 0 = no limit'],
  daily_tokens: ['Tokens / day', 'per billing day; 0 = no limit'],
  monthly_tokens: ['Tokens / month', 'per month; 0 = no limit'],
  queue_max: ['Queue length', 'waiting requests; empty = the endpoint\u2019s'],
};

export async function render(root, ctx) {
  const list = h('section', { class: 'card', id: 'quota-list' });
  const reload = () => quotas_load(list, reload);
  replace(root, viewHeader('Quotas', 'Limits per tenant, user, endpoint and model. A request must pass every layer that applies.', refreshButton(reload)),
    panel('New quota', await quotas_form(ctx, reload), { id: 'new-quota' }), list);
  await reload();
}

// The target names a scope picks from (a model is typed).
async function quotas_targets(ctx) {
  const [users, eps] = await Promise.all([api_list_all('users'), api_list_all('endpoints')]);
  const tenants = ctx.isOperator ? await ctx.tenants() : [];
  const label = (x) => (ctx.isOperator && x.tenant ? `${x.name} (${x.tenant})` : x.name);
  return {
    tenant: tenants.map((t) => [t.name, t.name]),
    user: users.map((u) => [u.name, label(u)]),
    endpoint: eps.map((e) => [e.name, label(e)]),
  };
}

function quota_target_input(scope, targets) {
  if (scope === 'model') return h('input', { name: 'target', required: true, maxlength: 128, placeholder: 'public model name' });
  const opts = targets[scope] || [];
  return opts.length ? select('target', opts, opts[0][0]) : h('input', { name: 'target', disabled: true, value: `no ${scope}s yet` });
}

function limit_input(name, value) {
  const attrs = { name, type: 'number', min: 0, step: 1, inputmode: 'numeric' };
  if (name === 'queue_max') attrs.placeholder = 'endpoint\u2019s';
  else attrs.value = 0;
  const input = h('input', attrs);
  if (value !== undefined && value !== null) input.value = String(value);
  return input;
}

// Only the scope's limits, as integers; queue_max empty is null (the endpoint's).
function quota_values(scope, v, { create = false } = {}) {
  const out = {};
  for (const name of SCOPES[scope].fields) {
    const n = v[name];
    if (Number.isFinite(n)) out[name] = Math.trunc(n);
    else if (name === 'queue_max' && !create) out[name] = null;
    else if (name !== 'queue_max') out[name] = 0;
  }
  return out;
}

async function quotas_form(ctx, reload) {
  const targets = await quotas_targets(ctx);
  const scopes = Object.keys(SCOPES).filter((s) => ctx.isOperator || s === 'user' || s === 'endpoint');
  const scopeSel = select('scope', scopes.map((s) => [s, SCOPES[s].label]), scopes[0]);
  const targetBox = h('div', { class: 'quota-target' });
  const limitBoxes = Object.entries(LIMITS).map(([name, [label, hint]]) => {
    const box = field(label, limit_input(name), hint);
    box.dataset.limit = name;
    return box;
  });
  // Each scope shows its own target picker and limits; the others are disabled (not sent).
  const show = () => {
    const scope = scopeSel.value;
    replace(targetBox, field(SCOPES[scope].label, quota_target_input(scope, targets)));
    for (const box of limitBoxes) {
      const on = SCOPES[scope].fields.includes(box.dataset.limit);
      box.hidden = !on;
      box.querySelector('input').disabled = !on;
    }
  };
  scopeSel.addEventListener('change', show);
  const form = h('form', { class: 'form-grid', method: 'post', id: 'quota-form' },
    field('Scope', scopeSel), targetBox, limitBoxes,
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'btn' }, 'Save quota')));
  show();
  return onSubmit(form, async (v) => {
    if (!v.target) throw new Error(`Pick the ${v.scope} first.`);
    const q = await api_post('quotas', { scope: v.scope, [v.scope]: v.target, ...quota_values(v.scope, v, { create: true }) });
    notify(`Quota of ${v.scope} ${v.target} saved`);
    form.reset();
    show();
    form.closest('details').open = false;
    await reload();
    return q;
  });
}

function quota_target(q) {
  return q.scope === 'tenant' ? q.tenant : q.scope === 'user' ? q.user : q.scope === 'endpoint' ? q.endpoint : q.model;
}

// A limit cell: '∞' for none, '–' where the scope takes no such limit.
function limit_cell(q, name) {
  if (!SCOPES[q.scope].fields.includes(name)) return h('span', { class: 'muted' }, '–');
  if (name === 'queue_max') return q.queue_max === null ? h('span', { class: 'muted' }, 'endpoint\u2019s') : String(q.queue_max);
  return fmtLimit(q[name]);
}

async function quotas_load(list, reload) {
  const rows = await api_list_all('quotas');
  const cols = [
    { label: 'Scope', cell: (q) => badge(q.scope, q.scope === 'tenant' || q.scope === 'model' ? 'info' : 'muted') },
    { label: 'Target', cell: (q) => h('strong', { class: 'quota-target-name', 'data-quota': q.id }, quota_target(q)) },
    { label: 'Tenant', cell: (q) => q.tenant || '–' },
    ...Object.entries(LIMITS).map(([name, [label]]) => ({ label, cell: (q) => limit_cell(q, name), class: 'num' })),
    { label: 'Updated', cell: (q) => fmtTime(q.updated_at) },
    { label: '', class: 'actions', cell: (q) => quota_actions(q, reload) },
  ];
  replace(list, h('h2', null, 'Quota layers'),
    table(cols, rows, { empty: 'No quotas yet: nothing is limited beyond the keys\u2019 own limits.' }));
}

function quota_actions(q, reload) {
  const what = `${q.scope} ${quota_target(q)}`;
  const edit = h('button', { type: 'button', class: 'btn btn-secondary btn-sm', 'data-action': 'edit' }, 'Edit');
  edit.addEventListener('click', async () => {
    const spec = SCOPES[q.scope].fields.map((name) => ({
      name, label: LIMITS[name][0], hint: LIMITS[name][1], type: 'int', min: 0, required: name !== 'queue_max',
    }));
    const done = await editDialog({
      title: `Quota of ${what}`, spec, values: q, submitLabel: 'Save quota', done: 'Quota saved',
      save: (ch) => api_patch(`quotas/${api_id(q.id)}`, ch),
    });
    if (done) await reload();
  });
  const del = h('button', { type: 'button', class: 'btn btn-ghost-danger btn-sm', 'data-action': 'delete' }, 'Delete');
  del.addEventListener('click', async () => {
    if (!await confirmDiff('Delete quota', `Remove the quota of ${what}? Its limits stop applying.`,
      SCOPES[q.scope].fields.map((name) => [LIMITS[name][0], q[name], null]), { okLabel: 'Delete' })) return;
    try {
      await api_delete(`quotas/${api_id(q.id)}`);
      notify(`Quota of ${what} deleted`);
      await reload();
    } catch (err) {
      notify(errorText(err), 'error');
    }
  });
  return h('div', { class: 'btn-row' }, edit, del);
}
