// settings.js: the Settings section: every run-time setting of lib/settings.c from
// GET /api/v1/system/settings-schema with its type, range, default and meaning. The
// operator edits one in the shared dialog, which checks the value against the schema
// before sending it (PATCH system/inference-config); the others read them.

import { api_get, api_patch } from '../api.js';
import { badge, h, replace, table } from '../dom.js';
import { editButton, editDialog } from '../edit.js';
import { errorText, refreshButton, viewHeader } from './parts.js';

function range_text(s) {
  if (s.type === 'enum') return (s.values || []).join(' | ');
  if (s.type === 'bool') return 'true | false';
  if (s.type === 'text') return s.max ? `up to ${s.max} bytes` : 'text';
  const lo = s.min ?? '−∞';
  const hi = s.max ?? '∞';
  return `${lo} … ${hi}${s.type === 'number' && s.decimals !== undefined && s.decimals !== null ? `, ${s.decimals} decimals` : ''}`;
}

const show = (v) => (v === '' || v === null || v === undefined ? h('span', { class: 'muted' }, '(empty)') : String(v));

// The schema row as a field of the shared dialog.
export function setting_field(s) {
  const f = { name: 'value', label: s.name, hint: `${s.meaning} · default ${s.default === '' ? '(empty)' : s.default}` };
  if (s.type === 'bool') return { ...f, type: 'bool' };
  if (s.type === 'enum') return { ...f, type: 'enum', values: s.values || [] };
  if (s.type === 'int') return { ...f, type: 'int', min: s.min, max: s.max, required: true };
  if (s.type === 'number') return { ...f, type: 'number', min: s.min, max: s.max, decimals: s.decimals ?? undefined, required: true };
  return { ...f, type: 'text', maxlength: s.max || undefined };
}

function typed(s, v) {
  if (s.type === 'bool') return v === true || v === 'true';
  if (s.type === 'int' || s.type === 'number') return v === null || v === undefined || v === '' ? null : Number(v);
  return v ?? '';
}

export async function render(root, ctx) {
  const list = h('section', { class: 'card', id: 'settings-list' });
  const reload = () => settings_load(list, ctx, reload);
  replace(root, viewHeader('Settings', ctx.isOperator ? 'Run-time settings; a change reaches every responder within a second.'
    : 'Run-time settings (read only).', refreshButton(reload)), list);
  await reload();
}

async function settings_load(list, ctx, reload) {
  let res;
  try {
    res = await api_get('system/settings-schema');
  } catch (err) {
    replace(list, h('h2', null, 'Settings'), h('div', { class: 'table-empty', id: 'settings-unavailable' },
      `The settings schema is not available: ${errorText(err)}`));
    return;
  }
  const cols = [
    { label: 'Setting', cell: (s) => h('code', { class: 'setting-name' }, s.name) },
    { label: 'Value', cell: (s) => h('span', { class: 'setting-value' }, 'value' in s ? show(s.value) : h('span', { class: 'muted' }, '(not shown to your role)')) },
    { label: 'Type', cell: (s) => badge(s.type, 'muted') },
    { label: 'Range', cell: (s) => range_text(s) },
    { label: 'Default', cell: (s) => h('span', { class: 'setting-default' }, show(s.default)) },
    { label: 'Meaning', cell: (s) => s.meaning, class: 'wrap' },
  ];
  if (ctx.isOperator) cols.push({ label: '', class: 'actions', cell: (s) => setting_edit_button(s, reload) });
  replace(list, h('h2', null, 'Settings'),
    table(cols, res.data, { empty: 'No settings.', rowClass: () => 'setting-row' }));
  for (const tr of list.querySelectorAll('tr.setting-row')) {
    tr.dataset.setting = tr.querySelector('.setting-name').textContent;
  }
}

function setting_edit_button(s, reload) {
  const b = editButton('Edit', `Edit ${s.name}`);
  b.addEventListener('click', async () => {
    const f = setting_field(s);
    const done = await editDialog({
      title: `Setting ${s.name}`, spec: [f], values: { value: typed(s, s.value) }, done: `${s.name} saved`,
      risky: () => null,
      save: (ch) => api_patch('system/inference-config', { [s.name]: ch.value }),
    });
    if (done) await reload();
  });
  return b;
}
