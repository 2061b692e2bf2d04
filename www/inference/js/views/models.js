// models.js: the Models section: the model policies (SPEC §0, R-AUTO-2..4) with their
// limits (R-KEY-6) and answer cache (R-CACHE-1/2), the cache's entries per model
// (R-CACHE-3) and the semantic cache's sampled hits (R-CACHE-4). The operator adds, edits and deletes policies; an admin reads them and
// clears its own tenant's cached answers.

import { api, api_delete, api_get, api_list_all, api_path, api_post } from '../api.js';
import { badge, field, fmtNum, fmtTime, h, notify, onSubmit, replace, select, table } from '../dom.js';
import { confirmDiff, editDialog } from '../edit.js';
import { errorText, panel, refreshButton, viewHeader } from './parts.js';

// Every field of a model policy (admin/api_policies.c), for the shared edit dialog.
const POLICY_SPEC = [
  { name: 'purpose', label: 'Purpose', type: 'enum', nullable: true, values: ['chat', 'completion', 'embedding'] },
  { name: 'routing_enabled', label: 'Automatic routing may pick it', type: 'bool' },
  { name: 'quality_score', label: 'Quality', type: 'number', min: 0, max: 100, decimals: 3, hint: '0–100; empty = unknown' },
  { name: 'price_input_per_1k', label: 'Price in / 1k', type: 'number', min: 0, decimals: 6, hint: 'per 1k prompt tokens' },
  { name: 'price_output_per_1k', label: 'Price out / 1k', type: 'number', min: 0, decimals: 6, hint: 'per 1k completion tokens' },
  { name: 'supports_tools', label: 'Tools', type: 'bool' },
  { name: 'supports_vision', label: 'Vision', type: 'bool' },
  { name: 'max_context', label: 'Max context', type: 'int', min: 0, hint: 'tokens; empty = unknown' },
  { name: 'max_output', label: 'Max output', type: 'int', min: 0, hint: 'largest max_tokens; empty = the global cap' },
  { name: 'description', label: 'Description', type: 'textarea', nullable: true, maxlength: 1024 },
  // R-SEM-1: who may be routed to it, and its compliance labels (a key may require them).
  { name: 'tenants', label: 'Tenants', type: 'text', nullable: true, maxlength: 4096, placeholder: 'acme,beta',
    hint: 'comma-separated tenant names; empty = every tenant' },
  { name: 'labels', label: 'Labels', type: 'text', nullable: true, maxlength: 1024, placeholder: 'pii-ok,eu-only',
    hint: 'comma-separated words (letters, digits, . _ -); empty = none' },
  { name: 'cache', label: 'Cache', type: 'enum', values: ['off', 'exact', 'semantic'] },
  { name: 'cache_ttl_s', label: 'Cache TTL (s)', type: 'int', min: 1, max: 31536000, required: true },
  { name: 'semantic_threshold', label: 'Semantic threshold', type: 'number', min: 0, max: 1, decimals: 3, hint: 'empty = the setting' },
  { name: 'shrink_max_tokens', label: 'Shrink max_tokens to the tokens left', type: 'bool' },
  { name: 'clamp_max_tokens', label: 'Clamp max_tokens to max output', type: 'bool' },
  { name: 'default_greedy', label: 'No temperature counts as greedy', type: 'bool' },
];

const PURPOSES = [['', '–'], ['chat', 'chat'], ['completion', 'completion'], ['embedding', 'embedding']];
const CACHE_MODES = [['off', 'off'], ['exact', 'exact'], ['semantic', 'semantic']];
const TTL_MAX = 31536000;
const POLICIES = 'models/routing-policies';
// Model names may hold '/': the policy goes by ?name= (R-ADM-1).
const policyPath = (model) => api_path(POLICIES, { name: model });

export async function render(root, ctx) {
  const list = h('section', { class: 'card', id: 'policy-list' });
  const cache = h('section', { class: 'card', id: 'cache-list' });
  const hits = h('section', { class: 'card', id: 'semantic-hits' });
  const reload = () => (ctx.canManage ? Promise.all([policies_load(list, ctx, reload), cache_load(cache, reload), hits_load(hits)])
    : policies_load(list, ctx, reload));
  const parts = [viewHeader('Models', 'What routing knows of each public model name, its limits and its answer cache.', refreshButton(reload))];
  if (ctx.isOperator) parts.push(panel('New model policy', policy_form(reload), { id: 'new-policy' }));
  if (!ctx.canManage) {
    // Members read the policies (what each model costs and can do); the cache is the managers'.
    replace(root, ...parts, list);
    await reload();
    return;
  }
  replace(root, ...parts, list, cache, hits);
  await reload();
}

const num = (name, value, attrs = {}) => {
  const input = h('input', { name, type: 'number', min: 0, inputmode: 'decimal', ...attrs });
  if (value !== undefined && value !== null) input.value = String(value);
  return input;
};

const check = (name, label, on) => h('label', { class: 'check' }, h('input', { type: 'checkbox', name, checked: !!on }), label);

// Every field of a policy the page edits; empty numbers are "not known" (null).
function policy_fields(p = {}) {
  return [
    field('Purpose', select('purpose', PURPOSES, p.purpose || '')),
    field('Quality', num('quality_score', p.quality_score, { step: 0.001, max: 100, placeholder: '0–100' }), 'for automatic routing'),
    field('Price in / 1k', num('price_input_per_1k', p.price_input_per_1k, { step: 0.000001 }), 'per 1k prompt tokens'),
    field('Price out / 1k', num('price_output_per_1k', p.price_output_per_1k, { step: 0.000001 }), 'per 1k completion tokens'),
    field('Max context', num('max_context', p.max_context, { step: 1, inputmode: 'numeric' }), 'tokens; empty = unknown'),
    field('Max output', num('max_output', p.max_output, { step: 1, inputmode: 'numeric' }), 'largest max_tokens; empty = the global cap'),
    field('Cache', select('cache', CACHE_MODES, p.cache || 'off'), 'answers kept for identical greedy requests'),
    field('Cache TTL (s)', num('cache_ttl_s', p.cache_ttl_s ?? 3600, { step: 1, min: 1, max: TTL_MAX, required: true, inputmode: 'numeric' }), `1 to ${TTL_MAX}`),
    field('Tenants', h('input', { name: 'tenants', maxlength: 4096, value: p.tenants || '', placeholder: 'acme,beta', autocomplete: 'off', spellcheck: 'false' }),
      'comma-separated tenant names; empty = every tenant'),
    field('Labels', h('input', { name: 'labels', maxlength: 1024, value: p.labels || '', placeholder: 'pii-ok,eu-only', autocomplete: 'off', spellcheck: 'false' }),
      'comma-separated compliance labels'),
    check('supports_tools', 'Tools', p.supports_tools),
    check('supports_vision', 'Vision', p.supports_vision),
    check('shrink_max_tokens', 'Shrink max_tokens to the tokens left', p.shrink_max_tokens),
    check('default_greedy', 'No temperature counts as greedy', p.default_greedy),
  ];
}

// The form's values as the API takes them; clear: empty numbers are sent as null (an edit).
function policy_values(v, { clear = false } = {}) {
  const out = {
    cache: v.cache, shrink_max_tokens: !!v.shrink_max_tokens, default_greedy: !!v.default_greedy,
    supports_tools: !!v.supports_tools, supports_vision: !!v.supports_vision,
  };
  if (Number.isFinite(v.cache_ttl_s)) out.cache_ttl_s = Math.trunc(v.cache_ttl_s);
  for (const name of ['tenants', 'labels']) {
    const list = list_text(v[name]);
    if (list) out[name] = list;
    else if (clear) out[name] = null;
  }
  if (v.purpose) out.purpose = v.purpose;
  else if (clear) out.purpose = null;
  for (const name of ['quality_score', 'price_input_per_1k', 'price_output_per_1k', 'max_context', 'max_output']) {
    const n = v[name];
    if (Number.isFinite(n)) out[name] = name.startsWith('max_') ? Math.trunc(n) : n;
    else if (clear) out[name] = null;
  }
  return out;
}

// "acme, beta," -> "acme,beta": the API takes the names without spaces around them.
function list_text(v) {
  return (v || '').split(',').map((x) => x.trim()).filter(Boolean).join(',');
}

// R-SEM-1: the tenants it serves (none: every one) and its labels, as chips.
function scope_cell(p) {
  const chips = (cls, list) => list.split(',').map((x) => h('span', { class: ['chip', cls] }, x));
  return h('div', { class: 'policy-scope' },
    h('div', { class: 'policy-tenants', 'data-tenants': p.tenants || '' },
      p.tenants ? chips('chip-tenant', p.tenants) : h('span', { class: 'muted' }, 'every tenant')),
    p.labels ? h('div', { class: 'policy-labels', 'data-labels': p.labels }, chips('chip-label', p.labels)) : null);
}

function policy_form(reload) {
  const form = h('form', { class: 'form-grid', method: 'post', id: 'policy-form' },
    field('Model name', h('input', { name: 'model', required: true, maxlength: 128, placeholder: 'the public model name' })),
    policy_fields(),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'btn' }, 'Save policy')));
  return onSubmit(form, async (v) => {
    await api_post(POLICIES, { model: v.model, ...policy_values(v) });
    notify(`Policy of ${v.model} saved`);
    form.reset();
    form.closest('details').open = false;
    await reload();
  });
}

const price = (p) => (p.price_input_per_1k === null && p.price_output_per_1k === null ? '–'
  : `${p.price_input_per_1k ?? '–'} / ${p.price_output_per_1k ?? '–'}`);

function cache_badge(mode) {
  return badge(mode, mode === 'off' ? 'muted' : 'info');
}

async function policies_load(list, ctx, reload) {
  const rows = await api_list_all(POLICIES);
  const yes = (b) => (b ? 'yes' : 'no');
  const cols = [
    { label: 'Model', cell: (p) => h('strong', { class: 'policy-model', 'data-model': p.model }, p.model) },
    { label: 'Purpose', cell: (p) => p.purpose || '–' },
    { label: 'Auto', cell: (p) => yes(p.routing_enabled) },
    { label: 'Quality', cell: (p) => (p.quality_score === null ? '–' : String(p.quality_score)), class: 'num' },
    { label: 'Price in / out', cell: price, class: 'num' },
    { label: 'Max context', cell: (p) => fmtNum(p.max_context), class: 'num' },
    { label: 'Max output', cell: (p) => fmtNum(p.max_output), class: 'num' },
    { label: 'Tools', cell: (p) => yes(p.supports_tools) },
    { label: 'Vision', cell: (p) => yes(p.supports_vision) },
    { label: 'Description', cell: (p) => p.description || '–', class: 'wrap' },
    { label: 'Tenants · labels', cell: scope_cell },
    { label: 'Shrink', cell: (p) => yes(p.shrink_max_tokens) },
    { label: 'Cache', cell: (p) => cache_badge(p.cache) },
    { label: 'Cache TTL', cell: (p) => h('span', { class: 'policy-ttl' }, `${fmtNum(p.cache_ttl_s)} s`), class: 'num' },
    { label: 'Default greedy', cell: (p) => yes(p.default_greedy) },
  ];
  if (ctx.isOperator) cols.push({ label: '', class: 'actions', cell: (p) => policy_actions(p, reload) });
  replace(list, h('h2', null, 'Model policies'),
    table(cols, rows, { empty: 'No model policies yet: every model has the defaults (no cache, no limits of its own).' }));
}

function policy_actions(p, reload) {
  const edit = h('button', { type: 'button', class: 'btn btn-secondary btn-sm', 'data-action': 'edit' }, 'Edit');
  edit.addEventListener('click', async () => {
    const done = await editDialog({
      title: `Policy of ${p.model}`, spec: POLICY_SPEC, values: p, submitLabel: 'Save policy', done: `Policy of ${p.model} saved`,
      save: (ch) => {
        for (const name of ['tenants', 'labels']) if (name in ch) ch[name] = list_text(ch[name]) || null;
        return api('PUT', policyPath(p.model), ch);
      },
    });
    if (done) await reload();
  });
  const del = h('button', { type: 'button', class: 'btn btn-ghost-danger btn-sm', 'data-action': 'delete' }, 'Delete');
  del.addEventListener('click', async () => {
    if (!await confirmDiff('Delete model policy', `Remove the policy of ${p.model}? The model goes back to the defaults.`,
      POLICY_SPEC.filter((f) => p[f.name] !== null && p[f.name] !== undefined).map((f) => [f.label, p[f.name], null]), { okLabel: 'Delete' })) return;
    try {
      await api_delete(policyPath(p.model));
      notify(`Policy of ${p.model} deleted`);
      await reload();
    } catch (err) {
      notify(errorText(err), 'error');
    }
  });
  return h('div', { class: 'btn-row' }, edit, del);
}

// R-CACHE-3: what the cache holds per model (an admin: its tenant's), and clearing it.
async function cache_load(box, reload) {
  const stats = await api_get('cache');
  const clear = (model) => {
    const b = h('button', { type: 'button', class: 'btn btn-ghost-danger btn-sm', 'data-action': 'clear' }, 'Clear');
    b.addEventListener('click', async () => {
      const what = model ? `the cached answers of ${model}` : 'every cached answer';
      const entries = model ? (stats.models.find((m) => m.model === model) || {}).entries : stats.entries;
      if (!await confirmDiff('Clear the cache', `Delete ${what}? Requests go upstream again.`, [['entries', entries, 0]], { okLabel: 'Clear' })) return;
      try {
        const r = await api_delete(api_path('cache', { model }));
        notify(`Cleared ${fmtNum(r.deleted)} cached answer${r.deleted === 1 ? '' : 's'}`);
        await reload();
      } catch (err) {
        notify(errorText(err), 'error');
      }
    });
    return b;
  };
  const cols = [
    { label: 'Model', cell: (m) => h('strong', { class: 'cache-model' }, m.model) },
    { label: 'Entries', cell: (m) => fmtNum(m.entries), class: 'num' },
    { label: 'Bytes', cell: (m) => fmtNum(m.bytes), class: 'num' },
    { label: 'Hits', cell: (m) => fmtNum(m.hits), class: 'num' },
    { label: 'Expired', cell: (m) => fmtNum(m.expired), class: 'num' },
    { label: '', class: 'actions', cell: (m) => clear(m.model) },
  ];
  replace(box, h('div', { class: 'card-head' },
    h('div', { class: 'card-title' }, h('h2', null, 'Answer cache'),
      h('span', { class: 'muted small' }, `${fmtNum(stats.entries)} entries · ${fmtNum(stats.bytes)} bytes · ${fmtNum(stats.hits)} hits`)),
    stats.entries ? h('div', { class: 'card-actions' }, clear(null)) : null),
  table(cols, stats.models, { empty: 'Nothing cached.' }));
}

// R-CACHE-4: the latest sampled semantic hits, so an operator can see what a question was
// answered with: this request's last user turn against the stored one it matched.
const HITS_SHOWN = 20;
async function hits_load(box) {
  let res;
  try {
    res = await api_get('cache/semantic-hits', { limit: HITS_SHOWN });
  } catch (err) {
    replace(box, h('div', { class: 'card-head' }, h('div', { class: 'card-title' }, h('h2', null, 'Semantic cache hits'))),
      h('p', { class: 'muted' }, errorText(err)));
    return;
  }
  const cols = [
    { label: 'Time', cell: (x) => fmtTime(Math.floor(x.ts_ms / 1000)) },
    { label: 'Model', cell: (x) => h('strong', null, x.model) },
    { label: 'Similarity', cell: (x) => h('span', { class: 'hit-similarity' }, Number(x.similarity).toFixed(3)), class: 'num' },
    { label: 'Prompt', cell: (x) => h('span', { class: 'hit-prompt' }, x.prompt) },
    { label: 'Matched prompt', cell: (x) => h('span', { class: 'hit-matched' }, x.matched) },
    { label: 'Request', cell: (x) => h('code', { class: 'hit-request' }, x.request_id) },
  ];
  replace(box, h('div', { class: 'card-head' },
    h('div', { class: 'card-title' }, h('h2', null, 'Semantic cache hits'),
      h('span', { class: 'muted small' }, res.total > res.data.length
        ? `the latest ${fmtNum(res.data.length)} of ${fmtNum(res.total)} recorded` : `${fmtNum(res.total)} recorded`))),
  table(cols, res.data, { empty: 'No semantic hits recorded.', rowClass: () => 'semantic-hit' }));
}
