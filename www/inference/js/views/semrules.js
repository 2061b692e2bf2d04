// semrules.js: the Rules tab's second card, the semantic routing rules (R-SEM-1): a PCRE2
// pattern matched against the last user message of a request the `semantic` strategy routes;
// a match forces a model first, takes one out (forbid), and with a label admits only models
// carrying it. Rights as content rules': the operator manages every rule (global or a
// tenant's); a tenant admin adds and deletes its own tenant's and reads the global ones.
// Add goes through the shared edit dialog, Delete through the confirm-with-diff one.

import { api_delete, api_id, api_list_all, api_post } from '../api.js';
import { badge, fmtTime, h, notify, replace, table } from '../dom.js';
import { confirmDiff, deleteRows, editDialog } from '../edit.js';
import { errorText } from './parts.js';

// The fields of POST /api/v1/semantic-rules, force|forbid as an action plus its model.
async function semrule_spec(ctx) {
  const tenant = ctx.isOperator
    ? { name: 'tenant', label: 'Tenant', type: 'enum', nullable: true, values: (await ctx.tenants()).map((t) => t.name),
      labels: { null: 'All tenants' } }
    : { name: 'tenant', label: 'Tenant', type: 'enum', values: [ctx.user.tenant], hint: 'rules for all tenants are the operator\u2019s' };
  return [
    { name: 'name', label: 'Name', type: 'text', required: true, maxlength: 64, placeholder: 'code-to-coder' },
    { name: 'pattern', label: 'Pattern (PCRE2)', type: 'textarea', required: true, maxlength: 4096, placeholder: '(?i)\\b(python|rust|sql)\\b',
      hint: 'matched against the last user message; one that does not compile or backtracks without bound is refused' },
    tenant,
    { name: 'action', label: 'Action', type: 'enum', values: [['force', 'Force'], ['forbid', 'Forbid']], hint: 'force: first; forbid: never' },
    { name: 'model', label: 'Model', type: 'text', required: true, maxlength: 256, placeholder: 'the public model name' },
    { name: 'label', label: 'Label', type: 'text', maxlength: 64, placeholder: 'e.g. eu-only',
      hint: 'optional: on a match, only models with it' },
  ];
}

// The rule as the dialog's fields (action + model from the API's action, model).
const semrule_values = (r) => ({ ...r, tenant: r.tenant ?? null });

async function semrule_create(ctx, reload) {
  const spec = await semrule_spec(ctx);
  const defaults = { action: 'force', tenant: ctx.isOperator ? null : ctx.user.tenant };
  await editDialog({
    title: 'New semantic routing rule', spec, values: defaults, submitLabel: 'Add rule',
    save: async (ch) => {
      const v = { ...defaults, ...ch };
      const body = { name: v.name, pattern: v.pattern, [v.action]: v.model };
      if (v.tenant) body.tenant = v.tenant;
      if (v.label) body.label = v.label;
      const r = await api_post('semantic-rules', body);
      notify(`Semantic rule ${r.name} added`);
      await reload();
      return r;
    },
  });
}

function semrule_actions(r, ctx, spec, reload) {
  if (!ctx.isOperator && !r.tenant) return h('span', { class: 'muted' }, 'operator\u2019s');
  const del = h('button', { type: 'button', class: 'btn btn-ghost-danger btn-sm', 'data-action': 'delete',
    'aria-label': `Delete semantic rule ${r.name}` }, 'Delete');
  del.addEventListener('click', async () => {
    const what = `${r.action} ${r.model} when ${r.pattern} matches (${r.tenant || 'all tenants'})`;
    if (!await confirmDiff('Delete semantic rule', `Delete the semantic rule ${r.name}: ${what}? It stops applying at the next configuration poll.`,
      deleteRows(spec, semrule_values(r)), { okLabel: 'Delete' })) return;
    try {
      await api_delete(`semantic-rules/${api_id(r.id)}`);
      notify(`Semantic rule ${r.name} deleted`);
      await reload();
    } catch (err) {
      notify(errorText(err), 'error');
    }
  });
  return del;
}

// Renders the card into box; the list is re-read on every reload.
export async function semrules_load(box, ctx) {
  const reload = () => semrules_load(box, ctx);
  const [rows, spec] = await Promise.all([api_list_all('semantic-rules'), semrule_spec(ctx)]);
  const add = h('button', { type: 'button', class: 'btn btn-sm', id: 'new-semrule', 'data-action': 'new' }, 'Add semantic rule');
  add.addEventListener('click', () => semrule_create(ctx, reload));
  const cols = [
    { label: 'Name', cell: (r) => h('strong', { class: 'semrule-name', 'data-semrule': r.id }, r.name) },
    { label: 'Tenant', cell: (r) => (r.tenant ? r.tenant : h('span', { class: 'muted' }, 'all tenants')) },
    { label: 'Pattern', cell: (r) => h('code', { class: 'semrule-pattern' }, r.pattern) },
    { label: 'Action', cell: (r) => h('span', { class: 'semrule-action' }, badge(r.action, r.action === 'forbid' ? 'bad' : 'info'), ` ${r.model}`) },
    { label: 'Label', cell: (r) => (r.label ? h('span', { class: 'chip semrule-label' }, r.label) : '–') },
    { label: 'Created', cell: (r) => fmtTime(r.created_at) },
    { label: '', class: 'actions', cell: (r) => semrule_actions(r, ctx, spec, reload) },
  ];
  replace(box, h('div', { class: 'card-head' },
    h('div', { class: 'card-title' }, h('h2', null, 'Semantic routing rules'),
      h('span', { class: 'muted small' }, 'for model auto with the semantic strategy; a forbid beats a force')),
    h('div', { class: 'card-actions' }, add)),
  table(cols, rows, { empty: 'No semantic routing rules: the semantic strategy ranks by description alone.', rowClass: () => 'semrule-row' }));
}
