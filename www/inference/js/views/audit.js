// audit.js: the Audit section (R-ADM-5): every change, newest first — who, what, and the
// fields that changed; the full before/after records fold out (shown as text).

import { field, fmtTime, h, replace, select } from '../dom.js';
import { pagedTable } from './pager.js';
import { refreshButton, viewHeader } from './parts.js';

const TYPES = ['', 'tenant', 'user', 'endpoint', 'replica', 'route', 'key', 'node', 'model_policy', 'setting', 'session', 'alert'];

// The top-level members whose values differ between before and after.
function audit_changes(a) {
  const before = a.before || {};
  const after = a.after || {};
  if (!a.before && a.after) return 'created';
  if (a.before && !a.after) return 'removed';
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
  const changed = keys.filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
  return changed.length ? changed.join(', ') : '–';
}

function audit_detail(a) {
  if (!a.before && !a.after) return '';
  return h('details', { class: 'audit-detail' }, h('summary', null, 'records'),
    h('pre', null, JSON.stringify({ before: a.before, after: a.after }, null, 2)));
}

export async function render(root) {
  const type = select('object_type', TYPES.map((t) => [t, t || 'All objects']), '');
  const pager = pagedTable({
    id: 'audit-table',
    path: 'audit-log',
    pageSize: 25,
    params: () => ({ object_type: type.value }),
    empty: 'No changes recorded.',
    columns: [
      { label: 'Time', cell: (a) => fmtTime(a.ts) },
      { label: 'Actor', cell: (a) => a.actor || '–' },
      { label: 'Action', cell: (a) => h('code', null, a.action) },
      { label: 'Object', cell: (a) => h('span', { class: 'audit-target' }, a.target_label || `${a.object_type}${a.object_id ? ` #${a.object_id}` : ''}`) },
      { label: 'Changed', cell: audit_changes, class: 'wrap' },
      { label: 'Details', cell: audit_detail },
    ],
  });
  type.addEventListener('change', () => pager.reset());
  replace(root, viewHeader('Audit log', 'Every change, by whom, with the records before and after. Secrets are never recorded.', refreshButton(() => pager.load())),
    h('section', { class: 'card' }, h('div', { class: 'toolbar' }, field('Object', type)), pager.el));
  await pager.load();
}
