// nodes.js: the Nodes section (R-HC-7, R-LB-6): the GPU hosts replicas run on, their status
// (online, offline, borrowed), the URL their metrics are read from and the GPU temperature
// last pushed. The operator adds, edits (status, metrics URL, a pushed temperature) and
// deletes them; an admin reads them.

import { api_delete, api_id, api_list_all, api_patch, api_post } from '../api.js';
import { badge, fmtTime, h, notify, replace, table } from '../dom.js';
import { confirmDiff, editButton, editDialog } from '../edit.js';
import { errorText, refreshButton, viewHeader } from './parts.js';

const STATUSES = ['online', 'offline', 'borrowed'];
const NODE_SPEC = [
  { name: 'status', label: 'Status', type: 'enum', values: STATUSES },
  { name: 'metrics_url', label: 'Metrics URL', type: 'text', maxlength: 2048, hint: 'empty = none' },
  { name: 'gpu_temperature', label: 'GPU temperature (°C)', type: 'number', min: -50, max: 200, decimals: 1, hint: 'pushed now; empty = unchanged' },
];

export async function render(root, ctx) {
  const list = h('section', { class: 'card', id: 'node-list' });
  const reload = () => nodes_load(list, ctx, reload);
  const add = h('button', { type: 'button', class: 'btn', id: 'new-node', 'data-action': 'new' }, 'New node');
  add.addEventListener('click', () => node_create(reload));
  replace(root, viewHeader('Nodes', 'GPU hosts, their status and temperature. Replicas on a node hotter than the threshold are not candidates.',
    ...(ctx.isOperator ? [add] : []), refreshButton(reload)), list);
  await reload();
}

async function node_create(reload) {
  const spec = [{ name: 'name', label: 'Name', type: 'text', required: true, maxlength: 128 }, ...NODE_SPEC.slice(0, 2)];
  const done = await editDialog({
    title: 'New node', spec, values: { status: 'online' }, submitLabel: 'Create node', done: 'Node created',
    save: (ch) => api_post('nodes', { status: 'online', ...ch }),
  });
  if (done) await reload();
}

function temp_cell(n) {
  if (n.gpu_temperature === null || n.gpu_temperature === undefined) return h('span', { class: 'muted' }, '–');
  return h('span', { class: 'node-temp' }, `${n.gpu_temperature} °C`);
}

async function nodes_load(list, ctx, reload) {
  const rows = await api_list_all('nodes');
  const cols = [
    { label: 'Node', cell: (n) => h('strong', { class: 'node-name', 'data-node': n.id }, n.name) },
    { label: 'Status', cell: (n) => badge(n.status, n.status === 'online' ? 'ok' : n.status === 'offline' ? 'bad' : 'warn') },
    { label: 'Metrics URL', cell: (n) => (n.metrics_url ? h('code', { class: 'url' }, n.metrics_url) : '–') },
    { label: 'GPU temperature', cell: temp_cell, class: 'num' },
    { label: 'Pushed', cell: (n) => fmtTime(n.temperature_at) },
    { label: 'Replicas', cell: (n) => String(n.replicas ?? 0), class: 'num' },
    { label: 'Created', cell: (n) => fmtTime(n.created_at) },
  ];
  if (ctx.isOperator) cols.push({ label: '', class: 'actions', cell: (n) => node_actions(n, reload) });
  replace(list, h('h2', null, 'Nodes'), table(cols, rows, { empty: 'No nodes: replicas are not tied to a host.', rowClass: () => 'node-row' }));
}

function node_actions(n, reload) {
  const edit = editButton('Edit', `Edit node ${n.name}`);
  edit.addEventListener('click', async () => {
    const done = await editDialog({
      title: `Edit node ${n.name}`, spec: NODE_SPEC, values: { ...n, metrics_url: n.metrics_url || '', gpu_temperature: n.gpu_temperature },
      done: `Node ${n.name} saved`,
      risky: (ch) => (ch.status && ch.status !== 'online' && n.replicas ? `${n.replicas} replica(s) on ${n.name} stop taking traffic.` : null),
      save: async (ch) => {
        const { gpu_temperature: t, ...rest } = ch;
        if (Object.keys(rest).length) await api_patch(`nodes/${api_id(n.id)}`, rest);
        if (t !== undefined && t !== null) await api_post(`nodes/${api_id(n.id)}/temperature`, { gpu_temperature: t });
        return true;
      },
    });
    if (done) await reload();
  });
  const del = h('button', { type: 'button', class: 'btn btn-ghost-danger btn-sm', 'data-action': 'delete', 'aria-label': `Delete node ${n.name}` }, 'Delete');
  del.addEventListener('click', async () => {
    if (!await confirmDiff(`Delete node ${n.name}`, n.replicas ? `${n.replicas} replica(s) lose their node.` : '',
      [['node', n.name, null], ['status', n.status, null], ['metrics URL', n.metrics_url, null]], { okLabel: 'Delete' })) return;
    try {
      await api_delete(`nodes/${api_id(n.id)}`);
      await reload();
    } catch (err) {
      notify(errorText(err), 'error');
    }
  });
  return h('div', { class: 'btn-row' }, edit, del);
}
