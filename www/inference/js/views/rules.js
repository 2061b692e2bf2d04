// rules.js: the Rules section (R-GUARD-3): content rules matched against the request's text
// (scope input) or the answer's (output); block refuses with content_policy_violation, flag
// serves and marks it (X-Content-Flag). The operator manages every rule and picks the tenant
// (or all tenants); a tenant admin adds and deletes its own tenant's and reads the global
// ones. The API checks every pattern (it must compile and match in bounded time).
// The second card holds the semantic routing rules (semrules.js, R-SEM-1), same rights.

import { api_delete, api_id, api_list_all, api_post } from '../api.js';
import { badge, field, fmtTime, h, notify, onSubmit, replace, select, table } from '../dom.js';
import { confirmDiff } from '../edit.js';
import { errorText, panel, refreshButton, viewHeader } from './parts.js';
import { semrules_load } from './semrules.js';

const ALL = '';   // the tenant picker's value for a global rule (every tenant)
const SCOPES = [['input', 'Input (the request)'], ['output', 'Output (the answer; a stream ends at a block)']];

export async function render(root, ctx) {
  const list = h('section', { class: 'card', id: 'rule-list' });
  const sem = h('section', { class: 'card', id: 'semrule-list' });
  const reload = () => Promise.all([rules_load(list, ctx, reload), semrules_load(sem, ctx)]);
  replace(root, viewHeader('Rules', 'Content rules: keywords and regular expressions checked on what callers send (input) or on the answers (output); semantic routing rules steer model auto.', refreshButton(reload)),
    panel('New content rule', await rules_form(ctx, reload), { id: 'new-rule' }), list, sem);
  await reload();
}

async function rule_tenant_field(ctx) {
  if (!ctx.isOperator) {
    return field('Tenant', h('input', { name: 'tenant', value: ctx.user.tenant, readonly: true }),
      'rules for all tenants are the operator\u2019s');
  }
  const tenants = await ctx.tenants();
  return field('Tenant', select('tenant', [[ALL, 'All tenants'], ...tenants.map((t) => [t.name, t.name])], ALL));
}

async function rules_form(ctx, reload) {
  const kindSel = select('kind', [['pattern', 'Regular expression (PCRE2)'], ['keyword', 'Keyword (whole word, any case)']], 'pattern');
  const text = h('input', { name: 'text', required: true, maxlength: 4096, autocomplete: 'off', spellcheck: 'false', placeholder: 'password\\s*[:=]' });
  kindSel.addEventListener('change', () => {
    text.placeholder = kindSel.value === 'keyword' ? 'confidential' : 'password\\s*[:=]';
  });
  const form = h('form', { class: 'form-grid', method: 'post', id: 'rule-form' },
    field('Name', h('input', { name: 'name', required: true, maxlength: 64, autocomplete: 'off', placeholder: 'no-secrets' })),
    field('Kind', kindSel),
    field('Pattern or keyword', text, 'a pattern that does not compile, or that backtracks without bound, is refused'),
    await rule_tenant_field(ctx),
    field('Action', select('action', [['block', 'Block (400 content_policy_violation)'], ['flag', 'Flag (served, logged, X-Content-Flag)']], 'block')),
    field('Scope', select('scope', SCOPES, 'input')),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'btn' }, 'Add rule')));
  return onSubmit(form, async (v) => {
    const body = { name: v.name, [v.kind]: v.text, action: v.action, scope: v.scope };
    if (v.tenant !== ALL) body.tenant = v.tenant;
    const r = await api_post('rules', body);
    notify(`Rule ${r.name} added`);
    form.reset();
    form.closest('details').open = false;
    await reload();
    return r;
  });
}

function rule_where(r) {
  return r.tenant ? r.tenant : 'all tenants';
}

async function rules_load(list, ctx, reload) {
  const rows = await api_list_all('rules');
  const cols = [
    { label: 'Name', cell: (r) => h('strong', { class: 'rule-name', 'data-rule': r.id }, r.name) },
    { label: 'Tenant', cell: (r) => (r.tenant ? r.tenant : h('span', { class: 'muted' }, 'all tenants')) },
    { label: 'Kind', cell: (r) => r.kind },
    { label: 'Pattern', cell: (r) => h('code', { class: 'rule-pattern' }, r.pattern) },
    { label: 'Action', cell: (r) => badge(r.action, r.action === 'block' ? 'bad' : 'warn') },
    { label: 'Scope', cell: (r) => r.scope },
    { label: 'Created', cell: (r) => fmtTime(r.created_at) },
    { label: '', class: 'actions', cell: (r) => rule_actions(r, ctx, reload) },
  ];
  replace(list, h('h2', null, 'Content rules'),
    table(cols, rows, { empty: 'No content rules: requests and answers pass unscreened (the built-in injection set is a setting).' }));
}

function rule_actions(r, ctx, reload) {
  // A tenant admin reads the global rules but does not delete them (the API refuses too).
  if (!ctx.isOperator && !r.tenant) return h('span', { class: 'muted' }, 'operator\u2019s');
  const del = h('button', { type: 'button', class: 'btn btn-ghost-danger btn-sm', 'data-action': 'delete' }, 'Delete');
  del.addEventListener('click', async () => {
    const what = `${r.action} rule ${r.name} (${r.kind} ${r.pattern}, ${r.scope}, ${rule_where(r)})`;
    if (!await confirmDiff('Delete rule', `Delete the ${what}? It stops applying at once.`,
      [['name', r.name, null], ['pattern', r.pattern, null], ['action', r.action, null], ['scope', r.scope, null]], { okLabel: 'Delete' })) return;
    try {
      await api_delete(`rules/${api_id(r.id)}`);
      notify(`Rule ${r.name} deleted`);
      await reload();
    } catch (err) {
      notify(errorText(err), 'error');
    }
  });
  return del;
}
