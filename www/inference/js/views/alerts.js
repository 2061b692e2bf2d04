// alerts.js: the Alerts section (R-ADM-3, R-HC-2): replica health alerts, active or
// recovered, with the endpoint they concern; an admin can mark one resolved.

import { api_id, api_list_all, api_post } from '../api.js';
import { badge, field, fmtTime, h, notify, replace, select } from '../dom.js';
import { pagedTable } from './pager.js';
import { errorText, refreshButton, viewHeader } from './parts.js';

export async function render(root) {
  const eps = await api_list_all('endpoints').catch(() => []);
  const names = new Map(eps.map((e) => [e.id, e.name]));
  const status = select('status', [['ACTIVE', 'Active'], ['RECOVERED', 'Recovered'], ['', 'All']], 'ACTIVE');
  const pager = pagedTable({
    id: 'alert-table',
    path: 'alerts',
    params: () => ({ status: status.value }),
    empty: status.value === 'ACTIVE' ? 'No active alerts. All replicas are answering.' : 'No alerts.',
    columns: [
      { label: 'Raised', cell: (a) => fmtTime(a.created_at) },
      { label: 'Status', cell: (a) => badge(a.status.toLowerCase(), a.status === 'ACTIVE' ? 'bad' : 'ok') },
      { label: 'Severity', cell: (a) => badge((a.severity || '–').toLowerCase(), /^(error|critical)$/i.test(a.severity || '') ? 'bad' : 'warn') },
      { label: 'Type', cell: (a) => h('code', null, a.type) },
      { label: 'Endpoint', cell: (a) => (a.endpoint_id ? names.get(a.endpoint_id) || `#${a.endpoint_id}` : '–') },
      { label: 'Message', cell: (a) => a.message || '', class: 'wrap' },
      { label: 'Resolved', cell: (a) => fmtTime(a.resolved_at) },
      { label: '', class: 'actions', cell: (a) => (a.status === 'ACTIVE' ? resolve_button(a, () => pager.load()) : '') },
    ],
  });
  status.addEventListener('change', () => pager.reset());
  replace(root, viewHeader('Alerts', 'Raised by sluice-healthd when a replica stops answering; recovered when it is back.', refreshButton(() => pager.load())),
    h('section', { class: 'card' }, h('div', { class: 'toolbar' }, field('Show', status)), pager.el));
  await pager.load();
}

function resolve_button(a, reload) {
  const b = h('button', { type: 'button', class: 'btn btn-secondary btn-sm' }, 'Resolve');
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      await api_post(`alerts/${api_id(a.id)}/resolve`, {});
      notify('Alert resolved');
      await reload();
    } catch (err) {
      notify(errorText(err), 'error');
      b.disabled = false;
    }
  });
  return b;
}
