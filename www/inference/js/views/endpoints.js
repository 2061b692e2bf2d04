// endpoints.js: the Endpoints section (R-ADM-3): each endpoint with its balancing
// algorithm, affinity, protocol, concurrency cap and wait queue (R-PRIO-1) and its replicas'
// health; create endpoint, add replica, change the queue, rotate the endpoint key (shown
// once) and the one-click test (R-ANT-5).

import { api_delete, api_id, api_list_all, api_patch, api_post } from '../api.js';
import {
  badge, field, fmtLimit, fmtTime, h, notify, onSubmit, replace, select, showSecret, table,
} from '../dom.js';
import { confirmDiff, deleteRows, editButton, editDialog } from '../edit.js';
import { errorText, panel, refreshButton, tenantField, viewHeader } from './parts.js';

const ALGORITHMS = ['round_robin', 'least_connections', 'random', 'engine_aware'];
const PROTOCOLS = ['openai', 'anthropic'];
const ENGINES = ['vllm', 'ollama', 'openai', 'anthropic', 'other'];
const STATES = ['running', 'sleeping', 'disabled'];

// Every field of `sluicectl endpoint set` (admin/api_endpoints.c endpoint_opts); the
// upstream credential is write-only (R-SEC-1: never read back, empty = unchanged).
const ENDPOINT_SPEC = [
  { name: 'algorithm', label: 'Algorithm', type: 'enum', values: ALGORITHMS },
  { name: 'protocol', label: 'Protocol', type: 'enum', values: PROTOCOLS },
  { name: 'health_path', label: 'Health path', type: 'text', maxlength: 256 },
  { name: 'health_check', label: 'Health checks', type: 'bool' },
  { name: 'affinity', label: 'Session affinity', type: 'bool' },
  { name: 'stream_guard', label: 'Stream guard', type: 'bool' },
  { name: 'connect_timeout_ms', label: 'Connect timeout (ms)', type: 'int', min: 1 },
  { name: 'first_byte_timeout_ms', label: 'First byte timeout (ms)', type: 'int', min: 1 },
  { name: 'idle_timeout_ms', label: 'Idle timeout (ms)', type: 'int', min: 1 },
  { name: 'failure_threshold', label: 'Failure threshold', type: 'int', min: 1, hint: 'failed rounds before unhealthy' },
  { name: 'start_period_seconds', label: 'Start period (s)', type: 'int', min: 0 },
  { name: 'business_probe_rounds', label: 'Business probe rounds', type: 'int', min: 0 },
  { name: 'max_concurrency', label: 'Max concurrency', type: 'int', min: 0, hint: '0 = no cap' },
  { name: 'queue_max', label: 'Queue length', type: 'int', min: 0 },
  { name: 'queue_timeout_ms', label: 'Queue timeout (ms)', type: 'int', min: 0 },
  { name: 'default_max_tokens', label: 'Default max_tokens', type: 'int', min: 0, hint: 'anthropic protocol' },
  { name: 'anthropic_version', label: 'Anthropic version', type: 'text', maxlength: 64 },
  { name: 'wake_url', label: 'Wake URL', type: 'text', maxlength: 2048 },
  { name: 'upstream_auth', label: 'Upstream credential', type: 'text', writeOnly: true, maxlength: 4096,
    hint: 'write-only; empty keeps the current one' },
];

const REPLICA_SPEC = [
  { name: 'weight', label: 'Weight', type: 'int', min: 0 },
  { name: 'max_concurrency', label: 'Max concurrency', type: 'int', min: 0, hint: '0 = no cap' },
  { name: 'node', label: 'Node', type: 'text', maxlength: 128, hint: 'a node name; empty = none' },
  { name: 'state', label: 'State', type: 'enum', values: STATES },
];

// R-PRIO-1: the endpoint's cap over all replicas and the bounds of its wait queue.
function queue_fields(e = {}) {
  const num = (name, value, min = 0) => h('input', { name, type: 'number', min, step: 1, value, inputmode: 'numeric' });
  return [
    field('Max concurrency', num('max_concurrency', e.max_concurrency ?? 0), 'over all replicas; 0 = no cap'),
    field('Queue length', num('queue_max', e.queue_max ?? 100), 'requests waiting when full'),
    field('Queue timeout (ms)', num('queue_timeout_ms', e.queue_timeout_ms ?? 10000), 'longest wait'),
  ];
}

function queue_values(v) {
  const out = {};
  for (const name of ['max_concurrency', 'queue_max', 'queue_timeout_ms']) {
    if (Number.isFinite(v[name])) out[name] = Math.trunc(v[name]);
  }
  return out;
}

export async function render(root, ctx) {
  const list = h('div', { class: 'stack', id: 'endpoint-list' });
  const reload = () => endpoints_load(list, reload);
  const create = await endpoints_create_form(ctx, reload);
  replace(root, viewHeader('Endpoints', 'Upstream servers, their replicas and health.', refreshButton(reload)),
    panel('New endpoint', create, { id: 'new-endpoint' }), list);
  await reload();
}

async function endpoints_load(list, reload) {
  const [eps, nodes] = await Promise.all([api_list_all('endpoints'), api_list_all('nodes').catch(() => [])]);
  REPLICA_SPEC.find((f) => f.name === 'node').suggest = nodes.map((n) => n.name);
  const replicas = await Promise.all(eps.map((e) => api_list_all(`endpoints/${api_id(e.id)}/replicas`)));
  if (!eps.length) {
    replace(list, h('div', { class: 'card empty-card' }, 'No endpoints yet. Create one above, then add its replicas.'));
    return;
  }
  replace(list, eps.map((e, i) => endpoint_card(e, replicas[i], reload)));
}

async function endpoints_create_form(ctx, reload) {
  const form = h('form', { class: 'form-grid', method: 'post', id: 'endpoint-form' },
    field('Name', h('input', { name: 'name', required: true, maxlength: 128, placeholder: 'e.g. llama-70b' })),
    await tenantField(ctx),
    field('Algorithm', select('algorithm', ALGORITHMS, 'round_robin')),
    field('Protocol', select('protocol', PROTOCOLS, 'openai')),
    field('Health path', h('input', { name: 'health_path', value: '/health', maxlength: 256 })),
    h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'affinity' }), 'Session affinity'),
    h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'health_check', checked: true }), 'Health checks'),
    queue_fields(),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'btn' }, 'Create endpoint')));
  return onSubmit(form, async (v) => {
    const ep = await api_post('endpoints', {
      name: v.name, tenant: v.tenant, algorithm: v.algorithm, protocol: v.protocol,
      health_path: v.health_path || '/health', affinity: v.affinity, health_check: v.health_check,
      ...queue_values(v),
    });
    form.reset();
    form.closest('details').open = false;
    await reload();
    if (ep.key) {
      await showSecret(`Endpoint key of ${ep.name}`, ep.key,
        'This key is shown once. It lets a program call this endpoint directly through /api/v1/proxy/.');
    }
  });
}

function endpoint_health(reps) {
  const running = reps.filter((r) => r.state === 'running');
  const healthy = running.filter((r) => r.healthy).length;
  if (!reps.length) return badge('no replicas', 'muted');
  if (!running.length) return badge('none running', 'muted');
  return badge(`${healthy}/${running.length} healthy`, healthy === running.length ? 'ok' : healthy ? 'warn' : 'bad');
}

function endpoint_card(e, reps, reload) {
  const verdict = h('p', { class: 'verdict', hidden: true, role: 'status' });
  const test = h('button', { type: 'button', class: 'btn btn-secondary btn-sm', 'data-action': 'test' }, 'Test');
  test.addEventListener('click', () => endpoint_test(e, test, verdict));
  const rotate = h('button', { type: 'button', class: 'btn btn-secondary btn-sm', 'data-action': 'rotate' }, 'Rotate key');
  rotate.addEventListener('click', async () => {
    if (!await confirmDiff('Rotate endpoint key', `The current key of ${e.name} stops working at once.`,
      [['key', `${e.key_prefix}…`, '(a new key, shown once)']], { okLabel: 'Rotate' })) return;
    try {
      const res = await api_post(`endpoints/${api_id(e.id)}/rotate-key`, {});
      await reload();
      await showSecret(`New endpoint key of ${e.name}`, res.key, 'This key is shown once; the old one no longer works.');
    } catch (err) {
      notify(errorText(err), 'error');
    }
  });
  const queue = h('button', { type: 'button', class: 'btn btn-secondary btn-sm', 'data-action': 'queue' }, 'Queue');
  queue.addEventListener('click', async () => {
    const done = await editDialog({
      title: `Queue of ${e.name}`, spec: ENDPOINT_SPEC.filter((f) => ['max_concurrency', 'queue_max', 'queue_timeout_ms'].includes(f.name)),
      values: e, done: `Queue of ${e.name} saved`, save: (ch) => api_patch(`endpoints/${api_id(e.id)}`, ch),
    });
    if (done) await reload();
  });
  const edit = editButton('Edit', `Edit ${e.name}`);
  edit.addEventListener('click', async () => {
    const done = await editDialog({
      title: `Edit endpoint ${e.name}`, spec: ENDPOINT_SPEC, values: e, done: `Endpoint ${e.name} saved`,
      save: (ch) => api_patch(`endpoints/${api_id(e.id)}`, ch),
      risky: (ch) => (ch.health_check === false ? 'Health checks off: failing replicas stay candidates.' : null),
    });
    if (done) await reload();
  });
  const del = h('button', { type: 'button', class: 'btn btn-ghost-danger btn-sm', 'data-action': 'delete' }, 'Delete');
  del.addEventListener('click', async () => {
    if (!await confirmDiff(`Delete endpoint ${e.name}`, `Delete ${e.name}, its ${reps.length} replica(s) and its routes?`,
      [['endpoint', e.name, null], ...deleteRows(ENDPOINT_SPEC.slice(0, 2), e), ['replicas', reps.length, 0]], { okLabel: 'Delete' })) return;
    try {
      await api_delete(`endpoints/${api_id(e.id)}`);
      notify(`Deleted ${e.name}`);
      await reload();
    } catch (err) {
      notify(errorText(err), 'error');
    }
  });
  const meta = h('dl', { class: 'meta' },
    meta_item('Algorithm', e.algorithm), meta_item('Protocol', e.protocol),
    meta_item('Affinity', e.affinity ? 'on' : 'off'),
    meta_item('Health check', e.health_check ? `${e.health_path}` : 'off'),
    meta_item('Max concurrency', fmtLimit(e.max_concurrency)),
    meta_item('Queue', `${e.queue_max} · ${e.queue_timeout_ms} ms`),
    meta_item('Key', e.key_prefix ? `${e.key_prefix}…` : '–'),
    meta_item('Timeouts', `${e.connect_timeout_ms} / ${e.first_byte_timeout_ms} / ${e.idle_timeout_ms} ms`),
    meta_item('Upstream credential', e.upstream_auth_set ? 'set' : 'none'),
    meta_item('Created', fmtTime(e.created_at)));
  return h('section', { class: 'card endpoint', 'data-endpoint': e.name },
    h('div', { class: 'card-head' },
      h('div', { class: 'card-title' }, h('h2', { class: 'endpoint-name' }, e.name),
        h('span', { class: 'chip' }, e.tenant), endpoint_health(reps), recovery_badge(e)),
      h('div', { class: 'card-actions' }, edit, test, queue, rotate, del)),
    recovery_note(e), meta, verdict, replicas_table(e, reps, reload), replica_form(e, reload));
}

// Issue 16: the API sets recovery_hint once the endpoint's consecutive failures reach
// recovery_hint_failures, and clears it after a success.
function recovery_badge(e) {
  if (!e.recovery_hint) return null;
  return h('span', { class: 'badge badge-bad recovery-badge', 'data-streak': e.failure_streak ?? 0 },
    `failing ×${e.failure_streak ?? '?'}`);
}

function recovery_note(e) {
  if (!e.recovery_hint) return null;
  return h('div', { class: 'recovery-note', role: 'status' },
    h('strong', null, `${e.failure_streak ?? '?'} failures in a row`),
    e.last_error ? h('span', null, ` · last error: ${e.last_error}${e.last_error_ms ? ` (${fmtTime(Math.floor(e.last_error_ms / 1000))})` : ''}`) : null,
    h('div', { class: 'recovery-hint' }, e.recovery_hint));
}

function meta_item(label, value) {
  return h('div', null, h('dt', null, label), h('dd', null, value));
}

async function endpoint_test(e, button, verdict) {
  button.disabled = true;
  verdict.hidden = false;
  verdict.className = 'verdict';
  verdict.textContent = 'Testing…';
  try {
    const r = await api_post(`endpoints/${api_id(e.id)}/test`, {});
    verdict.className = `verdict ${r.ok ? 'verdict-ok' : 'verdict-bad'}`;
    verdict.textContent = r.ok
      ? `✓ Passed: HTTP ${r.status} in ${r.latency_ms} ms from ${r.replica}`
      : `✗ Failed${r.status ? `: HTTP ${r.status}` : ''}${r.error ? ` — ${r.error}` : ''}`;
    verdict.dataset.ok = r.ok ? 'true' : 'false';
  } catch (err) {
    verdict.className = 'verdict verdict-bad';
    verdict.textContent = `✗ ${errorText(err)}`;
    verdict.dataset.ok = 'false';
  } finally {
    button.disabled = false;
  }
}

function replica_health(r) {
  if (r.state !== 'running') return badge(r.state, 'muted');
  return r.healthy ? badge('healthy', 'ok') : badge('unhealthy', 'bad');
}

function replicas_table(e, reps, reload) {
  const stateCell = (r) => {
    const sel = select('state', STATES, r.state);
    sel.setAttribute('aria-label', `State of ${r.url}`);
    sel.classList.add('select-sm');
    sel.addEventListener('change', async () => {
      try {
        await api_patch(`endpoints/${api_id(e.id)}/replicas/${api_id(r.id)}`, { state: sel.value });
        notify(`${r.url} is now ${sel.value}`);
        await reload();
      } catch (err) {
        sel.value = r.state;
        notify(errorText(err), 'error');
      }
    });
    return sel;
  };
  const edit = (r) => h('button', {
    type: 'button', class: 'btn btn-secondary btn-sm', 'data-action': 'edit-replica', 'aria-label': `Edit ${r.url}`,
    onclick: async () => {
      const active = reps.filter((x) => x.state === 'running' && x.weight > 0);
      const done = await editDialog({
        title: `Edit replica ${r.url}`, spec: REPLICA_SPEC, values: { ...r, node: r.node || '' }, done: `Replica ${r.url} saved`,
        save: (ch) => api_patch(`endpoints/${api_id(e.id)}/replicas/${api_id(r.id)}`, ch),
        risky: (ch) => ((ch.weight === 0 || (ch.state && ch.state !== 'running')) && active.length === 1 && active[0].id === r.id
          ? `${r.url} is the last running replica of ${e.name}: it stops getting traffic.` : null),
      });
      if (done) await reload();
    },
  }, 'Edit');
  const remove = (r) => h('button', {
    type: 'button', class: 'btn btn-ghost-danger btn-sm', 'aria-label': `Remove ${r.url}`, 'data-action': 'remove-replica',
    onclick: async () => {
      if (!await confirmDiff('Remove replica', `Remove ${r.url} from ${e.name}?`, [['url', r.url, null], ...deleteRows(REPLICA_SPEC, r)], { okLabel: 'Remove' })) return;
      try {
        await api_delete(`endpoints/${api_id(e.id)}/replicas/${api_id(r.id)}`);
        await reload();
      } catch (err) {
        notify(errorText(err), 'error');
      }
    },
  }, 'Remove');
  return table([
    { label: 'Replica', cell: (r) => h('code', { class: 'url' }, r.url) },
    { label: 'Health', cell: replica_health },
    { label: 'Engine', cell: (r) => r.engine },
    { label: 'Weight', cell: (r) => String(r.weight), class: 'num' },
    { label: 'Max concurrency', cell: (r) => (r.max_concurrency ? String(r.max_concurrency) : '∞'), class: 'num' },
    { label: 'Node', cell: (r) => r.node || '–' },
    { label: 'State', cell: stateCell },
    { label: '', cell: (r) => h('div', { class: 'btn-row' }, edit(r), remove(r)), class: 'actions' },
  ], reps, { empty: 'No replicas: add the upstream URL below.' });
}

function replica_form(e, reload) {
  const form = h('form', { class: 'inline-form replica-form', method: 'post' },
    field('Replica URL', h('input', { name: 'url', type: 'url', required: true, placeholder: 'http://10.0.0.5:8000', maxlength: 2048 })),
    field('Engine', select('engine', ENGINES, 'vllm')),
    field('Weight', h('input', { name: 'weight', type: 'number', min: 1, value: 1, class: 'input-narrow' })),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'btn btn-secondary' }, 'Add replica')));
  return onSubmit(form, async (v) => {
    await api_post(`endpoints/${api_id(e.id)}/replicas`, { url: v.url, engine: v.engine, weight: v.weight ?? 1 });
    notify(`Added ${v.url} to ${e.name}`);
    await reload();
  });
}

