// people.js: the Tenants & users section (R-ADM-1, R-ADM-2): the operator's tenants with
// their queue weights (R-PRIO-2) and every manager's users with their roles; create and
// delete them.

import { api_delete, api_id, api_list_all, api_patch, api_post } from '../api.js';
import { badge, confirmDialog, field, fmtTime, h, notify, onSubmit, replace, select, table } from '../dom.js';
import { errorText, panel, refreshButton, tenantField, viewHeader } from './parts.js';

export async function render(root, ctx) {
  const tenants = h('div', { id: 'tenant-list' });
  const users = h('div', { id: 'user-list' });
  const reload = async () => {
    ctx.forgetTenants();
    await Promise.all([ctx.isOperator ? tenants_load(tenants, reload) : null, users_load(users, ctx, reload)]);
  };
  const parts = [viewHeader('Tenants & users', 'Who may sign in here and use the API, and in which tenant.', refreshButton(reload))];
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
    { label: '', class: 'actions', cell: (t) => (t.name === 'default' ? '' : delete_button('tenant', t.name, `tenants/${api_id(t.id)}`, reload)) },
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
    { label: 'Created', cell: (u) => fmtTime(u.created_at) },
    { label: '', class: 'actions', cell: (u) => (u.id === ctx.user.id ? '' : delete_button('user', u.name, `users/${api_id(u.id)}`, reload)) },
  ], rows));
}

function delete_button(what, name, path, reload) {
  const b = h('button', { type: 'button', class: 'btn btn-ghost-danger btn-sm' }, 'Delete');
  b.addEventListener('click', async () => {
    if (!await confirmDialog(`Delete ${what}`, `Delete ${what} ${name}?`, 'Delete', true)) return;
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
