// pager.js: a paged table over one API listing ({"data","total","limit","offset"}) with
// newer/older buttons, for the alerts and the audit log.

import { api_get } from '../api.js';
import { h, replace, table } from '../dom.js';

// opts: {path, params: () => object, columns, pageSize, empty, id}
export function pagedTable(opts) {
  const body = h('div', { class: 'paged', id: opts.id });
  let offset = 0;
  const load = async (at = offset) => {
    const res = await api_get(opts.path, { ...opts.params(), limit: opts.pageSize || 25, offset: at });
    offset = at;
    const size = res.limit;
    const first = res.total ? offset + 1 : 0;
    const lastRow = offset + res.data.length;
    const prev = h('button', { type: 'button', class: 'btn btn-secondary btn-sm', disabled: offset === 0 }, 'Newer');
    const next = h('button', { type: 'button', class: 'btn btn-secondary btn-sm', disabled: lastRow >= res.total }, 'Older');
    prev.addEventListener('click', () => load(Math.max(0, offset - size)));
    next.addEventListener('click', () => load(offset + size));
    replace(body, table(opts.columns, res.data, { empty: opts.empty }),
      h('div', { class: 'pager' }, h('span', { class: 'muted small' }, `${first}–${lastRow} of ${res.total}`), h('div', { class: 'btn-row' }, prev, next)));
  };
  return { el: body, load, reset: () => load(0) };
}
