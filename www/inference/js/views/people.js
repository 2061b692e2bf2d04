// people.js: the Tenants & users section (R-ADM-1, R-ADM-2): the operator's tenants with
// their queue weights (R-PRIO-2) and every manager's users with their roles; create and
// delete them.

import { api_delete, api_id, api_list_all, api_patch, api_post } from '../api.js';
import { badge, field, fmtTime, h, notify, onSubmit, replace, select, table } from '../dom.js';
import { confirmDiff, editButton, editDialog } from '../edit.js';
import { errorText, LIMITS, panel, refreshButton, tenantField, viewHeader } from './parts.js';

// A user's role, a new password (write-only) and its key ceiling: the most any key of
// the user may be given (R-ADM-2), 0 = no ceiling.
function user_spec(ctx) {
  return [
    { name: 'role', label: 'Role', type: 'enum', values: ctx.isOperator ? ['member', 'admin', 'operator'] : ['member', 'admin'] },
    { name: 'password', label: 'New password', type: 'password', writeOnly: true, maxlength: 1024, hint: 'empty keeps the current one' },
    ...LIMITS.map(([name, label]) => ({ name: `ceil_${name}`, label: `Ceiling: ${label}`, type: 'int', min: 0, hint: '0 = none' })),
  ];
}

async function user_edit(u, ctx, reload) {
  const values = { role: u.role };
  for (const [name] of LIMITS) values[`ceil_${name}`] = u.key_ceiling ? u.key_ceiling[name] ?? 0 : 0;
  const done = await editDialog({
    title: `Edit user ${u.name}`, spec: user_spec(ctx), values, done: `User ${u.name} saved`,
    risky: (ch) => (ch.role && ch.role !== 'operator' && u.role === 'operator' ? `${u.name} loses the operator's rights.` : null),
    save: (ch) => {
      const body = {};
      if (ch.role) body.role = ch.role;
      if (ch.password) body.password = ch.password;
      if (LIMITS.some(([name]) => `ceil_${name}` in ch)) {
        body.key_ceiling = {};
        for (const [name] of LIMITS) body.key_ceiling[name] = `ceil_${name}` in ch ? ch[`ceil_${name}`] : values[`ceil_${name}`];
      }
      return api_patch(`users/${api_id(u.id)}`, body);
    },
  });
  if (done) await reload();
}

async function tenant_edit(t, reload) {
  const done = await editDialog({
    title: `Edit tenant ${t.name}`, values: t, done: `Tenant ${t.name} saved`,
    spec: [{ name: 'weight', label: 'Queue weight', type: 'int', min: 1, max: 1000, required: true, hint: 'share of a contended queue, 1 to 1000' }],
    save: (ch) => api_patch(`tenants/${api_id(t.id)}`, ch),
  });
  if (done) await reload();
}

export async function render(root, ctx) {
  const tenants = h('div', { id: 'tenant-list' });
  const users = h('div', { id: 'user-list' });
  const reload = async () => {
    ctx.forgetTenants();
    await Promise.all([ctx.isOperator ? tenants_load(tenants, reload) : null, users_load(users, ctx, reload)]);
  };
  const parts = [viewHeader('Users', 'Who may sign in here and use the API, and in which tenant.', refreshButton(reload))];
  if (ctx.isOperator) {
    parts.push(h('section', { class: 'card' }, h('h2', null, 'Tenants'), tenant_form(reload), tenants));
  }
  parts.push(panel('New user', await user_form(ctx, reload), { id: 'new-user' }),
    h('section', { class: 'card' }, h('h2', null, 'Users'), users));
  replace(root, ...parts);
  await reload();
}

function tenant_form(reload) {
  const form = h('form', { class: 'inline-form', method: 'post', id: 'tenant-form' },
    field('New tenant', h('input', { name: 'name', required: true, maxlength: 128, placeholder: 'e.g. research' })),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'btn btn-secondary' }, 'Add tenant')));
  return onSubmit(form, async (v) => {
    await api_post('tenants', { name: v.name });
    notify(`Tenant ${v.name} added`);
    form.reset();
    await reload();
  });
}

async function tenants_load(box, reload) {
  const rows = await api_list_all('tenants');
  replace(box, table([
    { label: 'Tenant', cell: (t) => h('span', { class: 'tenant-name' }, t.name) },
    { label: 'Weight', cell: (t) => weight_editor(t, reload), class: 'num' },
    { label: 'Created', cell: (t) => fmtTime(t.created_at) },
    { label: '', class: 'actions', cell: (t) => h('div', { class: 'btn-row' }, edit_of(`Edit tenant ${t.name}`, () => tenant_edit(t, reload)),
      t.name === 'default' ? null : delete_button('tenant', t.name, `tenants/${api_id(t.id)}`, reload, [['weight', t.weight, null]])) },
  ], rows));
}

// R-PRIO-2: a tenant's share of a contended queue against the others (1..1000).
function weight_editor(t, reload) {
  const input = h('input', { type: 'number', min: 1, max: 1000, step: 1, value: t.weight, class: 'input-narrow', 'aria-label': `Weight of ${t.name}`, 'data-tenant': t.id });
  const save = h('button', { type: 'submit', class: 'btn btn-secondary btn-sm' }, 'Save');
  const form = h('form', { class: 'weight-edit', method: 'post' }, input, save);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    save.disabled = true;
    try {
      await api_patch(`tenants/${api_id(t.id)}`, { weight: Number(input.value) });
      notify(`Weight of ${t.name} is now ${input.value}`);
      await reload();
    } catch (err) {
      notify(errorText(err), 'error');
      save.disabled = false;
    }
  });
  return form;
}

async function user_form(ctx, reload) {
  const roles = ctx.isOperator ? ['member', 'admin', 'operator'] : ['member', 'admin'];
  const form = h('form', { class: 'form-grid', method: 'post', id: 'user-form' },
    field('Name', h('input', { name: 'name', required: true, maxlength: 128, autocomplete: 'off' })),
    await tenantField(ctx),
    field('Role', select('role', roles, 'member')),
    field('Password', h('input', { name: 'password', type: 'password', autocomplete: 'new-password', maxlength: 1024 }), 'optional: needed to sign in here'),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'btn' }, 'Create user')));
  return onSubmit(form, async (v) => {
    const body = { name: v.name, tenant: v.tenant, role: v.role };
    if (v.password) body.password = form.elements.password.value;
    await api_post('users', body);
    notify(`User ${v.name} created`);
    form.reset();
    await reload();
  });
}

async function users_load(box, ctx, reload) {
  const rows = await api_list_all('users');
  replace(box, table([
    { label: 'User', cell: (u) => u.name },
    { label: 'Tenant', cell: (u) => u.tenant },
    { label: 'Role', cell: (u) => badge(u.role, u.role === 'member' ? 'muted' : 'info') },
    { label: 'Sign-in', cell: (u) => (u.has_password ? 'password' : 'keys only') },
    { label: 'Key ceiling', cell: (u) => ceiling_text(u) },
    { label: 'Created', cell: (u) => fmtTime(u.created_at) },
    { label: '', class: 'actions', cell: (u) => h('div', { class: 'btn-row' }, edit_of(`Edit user ${u.name}`, () => user_edit(u, ctx, reload)),
      u.id === ctx.user.id ? null : delete_button('user', u.name, `users/${api_id(u.id)}`, reload, [['role', u.role, null], ['tenant', u.tenant, null]])) },
  ], rows, { rowClass: () => 'user-row' }));
}

function edit_of(aria, fn) {
  const b = editButton('Edit', aria);
  b.addEventListener('click', fn);
  return b;
}

function ceiling_text(u) {
  const c = u.key_ceiling || {};
  const set = LIMITS.filter(([name]) => c[name]).map(([name, label]) => `${label} ${c[name]}`);
  return set.length ? h('span', { class: 'small' }, set.join(' · ')) : h('span', { class: 'muted' }, 'none');
}

function delete_button(what, name, path, reload, rows = []) {
  const b = h('button', { type: 'button', class: 'btn btn-ghost-danger btn-sm', 'data-action': 'delete', 'aria-label': `Delete ${what} ${name}` }, 'Delete');
  b.addEventListener('click', async () => {
    if (!await confirmDiff(`Delete ${what}`, `Delete ${what} ${name}?`, [[what, name, null], ...rows], { okLabel: 'Delete' })) return;
    try {
      await api_delete(path);
      notify(`Deleted ${name}`);
      await reload();
    } catch (err) {
      notify(errorText(err), 'error');
    }
  });
  return b;
}
