// routes.js: the Routes section (R-ADM-3): per (tenant, model) the priority groups, each
// drawn as a bar of the traffic split between its weighted routes (the canary split of
// R-RT-2; weight 0 = standby, R-RT-4); create routes and edit weight, priority, status and
// the route's answer cache (R-CACHE-2: its own mode and TTL, or the model policy's) and its
// mirror (R-SHD-1: a share of its requests copied to another endpoint, answers unseen).

import { api_delete, api_id, api_list_all, api_patch, api_post } from '../api.js';
import { badge, field, fmtNum, h, notify, onSubmit, replace, select, table } from '../dom.js';
import { confirmDiff, editButton, editDialog } from '../edit.js';
import { errorText, panel, refreshButton, viewHeader } from './parts.js';

export async function render(root, ctx) {
  const list = h('div', { class: 'stack', id: 'route-list' });
  const reload = () => routes_load(list, ctx, reload);
  const parts = [viewHeader('Routes', 'Which endpoints serve each model name, and how its traffic is split.', refreshButton(reload))];
  if (ctx.canManage) parts.push(panel('New route', await routes_form(ctx, reload), { id: 'new-route' }));
  replace(root, ...parts, list);
  await reload();
}

async function routes_load(list, ctx, reload) {
  const [routes, eps] = await Promise.all([api_list_all('model-routes'), ctx.canManage ? api_list_all('endpoints') : []]);
  ctx.routeEndpoints = eps;
  const groups = new Map();
  for (const r of routes) {
    const k = `${r.tenant_id}\u0000${r.model}`;
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(r);
  }
  const sorted = [...groups.values()].sort((a, b) =>
    a[0].tenant.localeCompare(b[0].tenant) || a[0].model.localeCompare(b[0].model));
  if (!sorted.length) {
    replace(list, h('div', { class: 'card empty-card' },
      ctx.canManage ? 'No routes yet. A route gives an endpoint a public model name.' : 'No models are routed for your tenant yet.'));
    return;
  }
  replace(list, sorted.map((g) => model_card(g, ctx, reload)));
}

async function routes_form(ctx, reload) {
  const eps = await api_list_all('endpoints');
  const epOptions = eps.map((e) => [String(e.id), ctx.isOperator ? `${e.name} (${e.tenant})` : e.name]);
  const tenantPick = ctx.isOperator
    ? [field('Tenant', select('tenant', [['', 'The endpoint\u2019s tenant'], ...(await ctx.tenants()).map((t) => [t.name, t.name])], ''))]
    : [];
  const form = h('form', { class: 'form-grid', method: 'post', id: 'route-form' },
    field('Model name', h('input', { name: 'model', required: true, maxlength: 128, placeholder: 'e.g. llama-3-70b' })),
    tenantPick,
    field('Endpoint', eps.length ? select('endpoint_id', epOptions, epOptions[0][0]) : h('input', { disabled: true, value: 'create an endpoint first' })),
    field('Weight', h('input', { name: 'weight', type: 'number', min: 0, value: 100 }), 'share within its priority; 0 = standby'),
    field('Priority', h('input', { name: 'priority', type: 'number', min: ctx.isOperator ? -1000 : 0, value: 0 }), '0 first; higher numbers are fallbacks'),
    field('Upstream model', h('input', { name: 'target_model', maxlength: 256, placeholder: 'optional: the name the backend knows' })),
    field('Mirror', select('mirror', [['', 'None'], ...eps.map((e) => [e.name, ctx.isOperator ? `${e.name} (${e.tenant})` : e.name])], ''),
      'optional: an endpoint of the same tenant that gets a copy of a share of the requests (shadow traffic)'),
    field('Mirror %', h('input', { name: 'mirror_percent', type: 'number', min: 0, max: 100, step: 1, value: 10, inputmode: 'numeric' }),
      '0–100: the share of requests mirrored'),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'btn' }, 'Create route')));
  return onSubmit(form, async (v) => {
    if (!v.endpoint_id) throw new Error('Create an endpoint first.');
    const body = { model: v.model, endpoint_id: Number(v.endpoint_id), weight: v.weight ?? 100, priority: v.priority ?? 0 };
    if (v.tenant) body.tenant = v.tenant;
    if (v.target_model) body.target_model = v.target_model;
    if (v.mirror) {
      const p = v.mirror_percent;
      if (!Number.isInteger(p) || p < 0 || p > 100) throw new Error('Mirror %: a whole number from 0 to 100.');
      body.mirror = v.mirror;
      body.mirror_percent = p;
    }
    await api_post('model-routes', body);
    notify(`Route ${v.model} → ${eps.find((e) => String(e.id) === v.endpoint_id)?.name} created`);
    form.elements.model.value = '';
    await reload();
  });
}

// Shares of the weighted active routes of one priority group, in percent.
function route_shares(routes) {
  const weighted = routes.filter((r) => r.status === 'active' && r.weight > 0);
  const total = weighted.reduce((a, r) => a + r.weight, 0);
  const share = new Map(weighted.map((r) => [r.id, total ? (r.weight * 100) / total : 0]));
  return { weighted, share };
}

const pct = (p) => `${+p.toFixed(1)}%`;

// R-SHD-1: "mirror → gpu-b 25 %" (its answers are compared, never served).
const mirror_text = (r) => h('span', { class: 'mirror-text' }, `mirror \u2192 ${r.mirror} ${r.mirror_percent} %`);

function split_bar(model, prio, routes) {
  const { weighted, share } = route_shares(routes);
  const standby = routes.filter((r) => r.status === 'active' && r.weight === 0);
  const bar = h('div', { class: 'split', 'data-model': model, 'data-priority': prio, role: 'img',
    'aria-label': weighted.map((r) => `${r.endpoint} ${pct(share.get(r.id))}`).join(', ') || 'no weighted route' });
  weighted.forEach((r, i) => {
    const seg = h('div', { class: `split-seg s${i % 8}`, title: `${r.endpoint}: weight ${r.weight}, ${pct(share.get(r.id))}`, 'data-endpoint': r.endpoint }, pct(share.get(r.id)));
    seg.style.flexGrow = String(r.weight);
    bar.append(seg);
  });
  if (!weighted.length) bar.append(h('div', { class: 'split-none' }, 'no active weighted route'));
  const legend = h('ul', { class: 'legend' },
    weighted.map((r, i) => h('li', null, h('span', { class: `swatch s${i % 8}` }), `${r.endpoint} · ${pct(share.get(r.id))}`)),
    standby.map((r) => h('li', { class: 'muted' }, h('span', { class: 'swatch swatch-standby' }), `${r.endpoint} · standby`)),
    routes.filter((r) => r.mirror).map((r) => h('li', { class: 'route-mirror', 'data-route': r.id, 'data-endpoint': r.endpoint },
      h('span', { class: 'swatch swatch-mirror', 'aria-hidden': 'true' }), `${r.endpoint} · `, mirror_text(r))));
  return h('div', { class: 'split-row' },
    h('div', { class: 'split-label' }, `Priority ${prio}`, prio === routes.minPrio ? badge('primary', 'info') : badge('fallback', 'muted')),
    bar, legend);
}

function model_card(routes, ctx, reload) {
  const model = routes[0].model;
  const prios = [...new Set(routes.map((r) => r.priority))].sort((a, b) => a - b);
  const byPrio = prios.map((p) => {
    const list = routes.filter((r) => r.priority === p);
    list.minPrio = prios[0];
    return [p, list];
  });
  const shares = new Map();
  for (const [, list] of byPrio) for (const [id, sh] of route_shares(list).share) shares.set(id, sh);
  return h('section', { class: 'card route-card', 'data-model': model },
    h('div', { class: 'card-head' },
      h('div', { class: 'card-title' }, h('h2', null, model), h('span', { class: 'chip' }, routes[0].tenant),
        h('span', { class: 'muted small' }, `${routes.length} route${routes.length === 1 ? '' : 's'}`))),
    byPrio.map(([p, list]) => split_bar(model, p, list)),
    route_table(routes, shares, ctx, reload));
}

function route_table(routes, shares, ctx, reload) {
  const cols = [
    { label: 'Endpoint', cell: (r) => r.endpoint },
    { label: 'Priority', cell: (r) => String(r.priority), class: 'num' },
    { label: 'Weight', cell: (r) => (ctx.canManage ? weight_editor(r, routes, reload) : String(r.weight)), class: 'num' },
    { label: 'Share', cell: (r) => (shares.has(r.id) ? pct(shares.get(r.id)) : r.status === 'active' ? 'standby' : '–'), class: 'num' },
    { label: 'Status', cell: (r) => badge(r.status, r.status === 'active' ? 'ok' : 'muted') },
    { label: 'Upstream model', cell: (r) => r.target_model || '–' },
    { label: 'Cache', cell: cache_cell },
    { label: 'Mirror', cell: (r) => (r.mirror ? mirror_text(r) : h('span', { class: 'muted' }, 'none')) },
  ];
  if (ctx.canManage) cols.push({ label: '', class: 'actions', cell: (r) => route_actions(r, routes, ctx, reload) });
  const sorted = [...routes].sort((a, b) => a.priority - b.priority || b.weight - a.weight);
  return table(cols, sorted, { rowClass: (r) => (r.status === 'active' ? null : 'row-muted') });
}

function weight_editor(r, group, reload) {
  const input = h('input', { type: 'number', min: 0, value: r.weight, class: 'input-narrow', 'aria-label': `Weight of ${r.endpoint}`, 'data-route': r.id });
  const save = h('button', { type: 'submit', class: 'btn btn-secondary btn-sm' }, 'Save');
  const form = h('form', { class: 'weight-edit', method: 'post' }, input, save);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const w = Number(input.value);
    if (!Number.isInteger(w) || w < 0) {
      notify('The weight is a whole number of 0 or more.', 'error');
      return;
    }
    if (w === 0 && last_live(r, group) && !await confirmDiff('Weight 0 on the last route',
      `${r.endpoint} is the last route serving ${r.model}: with weight 0 it only stands by.`, [['weight', r.weight, 0]], { okLabel: 'Apply' })) return;
    save.disabled = true;
    try {
      await api_patch(`model-routes/${api_id(r.id)}`, { weight: w });
      notify(`Weight of ${r.model} → ${r.endpoint} is now ${input.value}`);
      await reload();
    } catch (err) {
      notify(errorText(err), 'error');
      save.disabled = false;
    }
  });
  return form;
}

// R-CACHE-2: null is the model policy's (mode and TTL each).
function cache_cell(r) {
  const mode = r.cache === null ? h('span', { class: 'muted' }, 'policy\u2019s') : badge(r.cache, r.cache === 'off' ? 'muted' : 'info');
  const ttl = r.cache_ttl_s === null ? null : h('span', { class: 'muted small' }, ` · ${fmtNum(r.cache_ttl_s)} s`);
  return h('span', { class: 'route-cache', 'data-route': r.id }, mode, ttl);
}

const CACHE_CHOICES = [['', 'Inherit (the model policy\u2019s)'], ['off', 'Off'], ['exact', 'Exact'], ['semantic', 'Semantic']];

const CACHE_SPEC = [
  { name: 'cache', label: 'Cache', type: 'enum', nullable: true, values: CACHE_CHOICES.slice(1), labels: { null: CACHE_CHOICES[0][1] },
    hint: 'answers kept for identical greedy requests' },
  { name: 'cache_ttl_s', label: 'Cache TTL (s)', type: 'int', min: 1, max: 31536000, placeholder: 'the policy\u2019s', hint: 'empty = the model policy\u2019s' },
];

async function cache_edit(r, reload) {
  const done = await editDialog({
    title: `Cache of ${r.model} → ${r.endpoint}`, spec: CACHE_SPEC, values: r, done: `Cache of ${r.model} → ${r.endpoint} saved`,
    save: (ch) => api_patch(`model-routes/${api_id(r.id)}`, ch),
  });
  if (done) await reload();
}

// The route is the last one taking this model's traffic (active, weight > 0).
function last_live(r, group) {
  const live = group.filter((x) => x.status === 'active' && x.weight > 0);
  return live.length === 1 && live[0].id === r.id;
}

function route_spec(r, ctx) {
  const eps = (ctx.routeEndpoints || []).filter((e) => e.tenant_id === r.tenant_id || ctx.isOperator);
  return [
    { name: 'priority', label: 'Priority', type: 'int', min: ctx.isOperator ? -1000 : 0, max: 1000, hint: '0 first; higher = fallback' },
    { name: 'weight', label: 'Weight', type: 'int', min: 0, hint: '0 = standby' },
    { name: 'target_model', label: 'Upstream model', type: 'text', maxlength: 256, hint: 'empty = the public name' },
    { name: 'status', label: 'Status', type: 'enum', values: ['active', 'inactive'] },
    { name: 'endpoint_id', label: 'Endpoint', type: 'enum', numeric: true,
      values: eps.length ? eps.map((e) => [String(e.id), ctx.isOperator ? `${e.name} (${e.tenant})` : e.name]) : [[String(r.endpoint_id), r.endpoint]] },
    // R-SHD-1: only the route's own tenant's endpoints, never its own endpoint (the API says so too).
    { name: 'mirror', label: 'Mirror', type: 'enum', nullable: true, labels: { null: 'None' }, values: mirror_choices(r, ctx),
      hint: 'an endpoint that gets a copy of a share of the requests; its answers are only compared' },
    { name: 'mirror_percent', label: 'Mirror %', type: 'int', min: 0, max: 100, required: true, hint: '0–100: the share of requests mirrored' },
  ];
}

function mirror_choices(r, ctx) {
  const names = (ctx.routeEndpoints || []).filter((e) => e.tenant_id === r.tenant_id && e.id !== r.endpoint_id).map((e) => e.name);
  if (r.mirror && !names.includes(r.mirror)) names.push(r.mirror);
  return names;
}

async function route_edit(r, group, ctx, reload) {
  const done = await editDialog({
    title: `Edit route ${r.model} → ${r.endpoint}`, spec: route_spec(r, ctx), values: r, done: `Route ${r.model} → ${r.endpoint} saved`,
    // A mirror sent alone would mirror 100 %: send the share the dialog showed with it.
    save: (ch) => api_patch(`model-routes/${api_id(r.id)}`, ch.mirror && !('mirror_percent' in ch) ? { ...ch, mirror_percent: r.mirror_percent } : ch),
    risky: (ch) => ((ch.weight === 0 || ch.status === 'inactive') && last_live(r, group)
      ? `This is the last route serving ${r.model}: after this change no endpoint takes its traffic.` : null),
  });
  if (done) await reload();
}

function route_actions(r, group, ctx, reload) {
  const edit = editButton('Edit', `Edit route ${r.model} → ${r.endpoint}`);
  edit.addEventListener('click', () => route_edit(r, group, ctx, reload));
  const cache = h('button', { type: 'button', class: 'btn btn-secondary btn-sm', 'data-action': 'cache' }, 'Cache');
  cache.addEventListener('click', () => cache_edit(r, reload));
  const next = r.status === 'active' ? 'inactive' : 'active';
  const toggle = h('button', { type: 'button', class: 'btn btn-secondary btn-sm' }, next === 'inactive' ? 'Disable' : 'Enable');
  toggle.addEventListener('click', async () => {
    if (next === 'inactive' && last_live(r, group) && !await confirmDiff('Disable the last route',
      `No endpoint serves ${r.model} after this.`, [['status', r.status, next]], { okLabel: 'Disable' })) return;
    try {
      await api_patch(`model-routes/${api_id(r.id)}`, { status: next });
      await reload();
    } catch (err) {
      notify(errorText(err), 'error');
    }
  });
  const del = h('button', { type: 'button', class: 'btn btn-ghost-danger btn-sm', 'data-action': 'delete' }, 'Delete');
  del.addEventListener('click', async () => {
    if (!await confirmDiff('Delete route', `Stop routing ${r.model} to ${r.endpoint}?${last_live(r, group) ? ' It is the last route serving it.' : ''}`,
      [['model', r.model, null], ['endpoint', r.endpoint, null], ['priority', r.priority, null], ['weight', r.weight, null], ['status', r.status, null]],
      { okLabel: 'Delete' })) return;
    try {
      await api_delete(`model-routes/${api_id(r.id)}`);
      await reload();
    } catch (err) {
      notify(errorText(err), 'error');
    }
  });
  return h('div', { class: 'btn-row' }, edit, cache, toggle, del);
}
