// parts.js: pieces the views share — section headers, fold-out forms, the tenant picker,
// the six key limits (SPEC §12) and UTC day arithmetic for usage days.

import { field, h, select } from '../dom.js';

export function viewHeader(title, subtitle, ...actions) {
  return h('div', { class: 'view-header' },
    h('div', null, h('h1', null, title), subtitle ? h('p', { class: 'muted' }, subtitle) : null),
    h('div', { class: 'view-actions' }, actions));
}

export function refreshButton(onclick) {
  return h('button', { type: 'button', class: 'btn btn-secondary', onclick }, 'Refresh');
}

// A fold-out card holding a create form.
export function panel(title, body, { open = false, id } = {}) {
  return h('details', { class: 'card panel', open, id },
    h('summary', null, h('span', { class: 'panel-plus', 'aria-hidden': 'true' }, '+'), title), h('div', { class: 'panel-body' }, body));
}

// Operators pick a tenant; everyone else works in their own.
export async function tenantField(ctx, name = 'tenant') {
  if (!ctx.isOperator) {
    return field('Tenant', h('input', { name, value: ctx.user.tenant, readonly: true }));
  }
  const tenants = await ctx.tenants();
  return field('Tenant', select(name, tenants.map((t) => [t.name, t.name]), ctx.user.tenant));
}

export const LIMITS = [
  ['qps_limit', 'QPS', 'requests per second'],
  ['concurrency_limit', 'Concurrency', 'requests in flight'],
  ['daily_limit', 'Calls / day', 'calls per billing day'],
  ['monthly_quota', 'Calls / month', 'calls per month'],
  ['tpm_limit', 'Tokens / min', 'tokens per minute'],
  ['monthly_token_quota', 'Tokens / month', 'tokens per month'],
];

export function limitFields(values = {}) {
  return LIMITS.map(([name, label, hint]) => field(label,
    h('input', { name, type: 'number', min: 0, step: 1, value: values[name] ?? 0, inputmode: 'numeric' }),
    `${hint}; 0 = unlimited`));
}

// Only the limits, as integers (empty counts as 0 = unlimited).
export function limitValues(v) {
  const out = {};
  for (const [name] of LIMITS) out[name] = Number.isFinite(v[name]) ? Math.trunc(v[name]) : 0;
  return out;
}

// Usage days are billing days (UTC unless sluice.conf sets billing_tz).
export function utcDay(d) {
  return d.toISOString().slice(0, 10);
}

export function addDays(day, n) {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + n);
  return utcDay(d);
}

export function daysBetween(from, to) {
  const out = [];
  for (let d = from; d <= to && out.length < 400; d = addDays(d, 1)) out.push(d);
  return out;
}

export function errorText(e) {
  return e && e.param ? `${e.message} (${e.param})` : (e && e.message) || String(e);
}
