// edit.js: the one edit dialog and the one confirm-with-diff dialog every view uses
// (R-ADM-3). A view describes an object's editable fields once (a spec); the dialog fills
// them from the object, checks every value against its type and range before anything is
// sent, sends only what changed, and for a risky change (delete, revoke, weight 0 on the
// last route) first shows old -> new and asks.

import { h, notify } from './dom.js';

// A field spec: {name, label, type, values, min, max, decimals, nullable, hint, placeholder,
// maxlength, writeOnly, required, labels}.
//   type: 'text' | 'textarea' | 'password' | 'int' | 'number' | 'bool' | 'enum' | 'tristate'
//   nullable: an empty input means null (int/number/text/enum); tristate is null/true/false.
//   writeOnly: the current value is never shown; empty = unchanged (upstream credentials).

function edit_show(v) {
  if (v === null || v === undefined || v === '') return '–';
  if (v === true) return 'yes';
  if (v === false) return 'no';
  return String(v);
}

function edit_input(f, value) {
  const id = `edit-${f.name}`;
  let el;
  if (f.type === 'bool') {
    el = h('input', { type: 'checkbox', name: f.name, id, checked: !!value });
    const box = h('label', { class: 'check', 'data-field': f.name }, el, f.label);
    return f.hint ? h('div', { class: 'field' }, box, h('span', { class: 'field-hint' }, f.hint)) : box;
  }
  if (f.type === 'enum' || f.type === 'tristate') {
    const opts = f.type === 'tristate'
      ? [['', f.labels?.null || 'inherit'], ['true', f.labels?.true || 'on'], ['false', f.labels?.false || 'off']]
      : [...(f.nullable ? [['', f.labels?.null || '–']] : []), ...f.values.map((x) => (Array.isArray(x) ? x : [x, x]))];
    const cur = value === null || value === undefined ? '' : String(value);
    el = h('select', { name: f.name, id }, opts.map(([v, l]) => h('option', { value: v, selected: v === cur }, l)));
  } else if (f.type === 'textarea') {
    el = h('textarea', { name: f.name, id, rows: 3, maxlength: f.maxlength, placeholder: f.placeholder });
    el.value = value ?? '';
  } else {
    const num = f.type === 'int' || f.type === 'number';
    const step = f.type === 'int' ? 1 : f.decimals !== undefined ? 10 ** -f.decimals : 'any';
    el = h('input', {
      name: f.name, id, type: f.type === 'password' || f.writeOnly ? 'password' : num ? 'number' : 'text',
      min: f.min, max: f.max, step: num ? step : undefined, maxlength: f.maxlength, placeholder: f.placeholder,
      inputmode: num ? (f.type === 'int' ? 'numeric' : 'decimal') : undefined,
      autocomplete: f.type === 'password' || f.writeOnly ? 'new-password' : 'off', spellcheck: 'false',
    });
    if (!f.writeOnly && value !== null && value !== undefined) el.value = String(value);
    if (f.suggest && f.suggest.length) {
      // Known values offered as you type (e.g. node names); any other text is still allowed.
      const list = h('datalist', { id: `${id}-list` }, f.suggest.map((v) => h('option', { value: v })));
      el.setAttribute('list', list.id);
      el = [el, list];
    }
  }
  return h('label', { class: ['field', f.type === 'textarea' && 'field-wide'], 'data-field': f.name },
    h('span', { class: 'field-label' }, f.label), el, f.hint ? h('span', { class: 'field-hint' }, f.hint) : null);
}

// The typed value of one field, or throws an Error naming the field.
export function edit_parse(f, raw) {
  const fail = (why) => { const e = new Error(`${f.label}: ${why}`); e.field = f.name; throw e; };
  if (f.type === 'bool') return !!raw;
  if (f.type === 'tristate') return raw === '' ? null : raw === 'true';
  const text = typeof raw === 'string' ? raw.trim() : raw;
  if (text === '' || text === null || text === undefined) {
    if (f.required) fail('required');
    return f.type === 'text' || f.type === 'textarea' || f.type === 'password' ? (f.nullable ? null : '') : null;
  }
  if (f.type === 'enum') {
    if (!f.values.some((x) => String(Array.isArray(x) ? x[0] : x) === text)) fail(`one of ${f.values.join(', ')}`);
    return f.numeric ? Number(text) : text;
  }
  if (f.type === 'int' || f.type === 'number') {
    if (!/^-?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(text)) fail('not a number');
    const n = Number(text);
    if (!Number.isFinite(n)) fail('not a number');
    if (f.type === 'int' && !Number.isInteger(n)) fail('a whole number');
    if (f.type === 'number' && f.decimals !== undefined) {
      const dot = text.indexOf('.');
      if (dot >= 0 && !/e/i.test(text) && text.length - dot - 1 > f.decimals) fail(`at most ${f.decimals} decimals`);
    }
    if (f.min !== undefined && f.min !== null && n < f.min) fail(`at least ${f.min}`);
    if (f.max !== undefined && f.max !== null && n > f.max) fail(`at most ${f.max}`);
    return n;
  }
  if (f.maxlength && text.length > f.maxlength) fail(`at most ${f.maxlength} characters`);
  return text;
}

function edit_same(a, b) {
  const norm = (x) => (x === undefined || x === '' ? null : x);
  return JSON.stringify(norm(a)) === JSON.stringify(norm(b));
}

function edit_diff_table(rows) {
  return h('div', { class: 'table-wrap diff' }, h('table', null,
    h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Field'), h('th', { scope: 'col' }, 'Now'), h('th', { scope: 'col' }, 'After'))),
    h('tbody', null, rows.map(([label, from, to]) => h('tr', { class: 'diff-row' },
      h('td', null, label), h('td', { class: 'diff-old' }, edit_show(from)), h('td', { class: 'diff-new' }, edit_show(to)))))));
}

function edit_modal(title, body, actions) {
  const dlg = h('dialog', { class: 'dialog', 'aria-label': title },
    h('h2', { class: 'dialog-title' }, title), body, actions ? h('div', { class: 'dialog-actions' }, actions) : null);
  document.body.append(dlg);
  dlg.addEventListener('close', () => dlg.remove());
  dlg.showModal();
  return dlg;
}

// rows: [[label, old, new]]; resolves true when confirmed.
export function confirmDiff(title, message, rows, { okLabel = 'Confirm', danger = true } = {}) {
  return new Promise((resolve) => {
    const ok = h('button', { type: 'button', class: ['btn', danger && 'btn-danger'], 'data-action': 'confirm' }, okLabel);
    const cancel = h('button', { type: 'button', class: 'btn btn-secondary', 'data-action': 'cancel' }, 'Cancel');
    const dlg = edit_modal(title, [message ? h('p', { class: 'confirm-text' }, message) : null, rows.length ? edit_diff_table(rows) : null], [cancel, ok]);
    dlg.classList.add('confirm-dialog');
    let answer = false;
    ok.addEventListener('click', () => { answer = true; dlg.close(); });
    cancel.addEventListener('click', () => dlg.close());
    dlg.addEventListener('close', () => resolve(answer));
  });
}

// The fields of obj as rows "old -> (deleted)" for a delete's confirmation.
export function deleteRows(spec, obj) {
  return spec.filter((f) => !f.writeOnly).map((f) => [f.label, obj[f.name], null]);
}

// opts: {title, spec, values (the object now), save(changes, values) -> Promise,
//   risky(changes, values) -> message string | null, submitLabel, extra (nodes above the
//   fields), done (message for the notice)}. Resolves the save's result, or null (cancel /
//   nothing changed).
export function editDialog(opts) {
  const { title, spec, values = {}, save, risky, submitLabel = 'Save' } = opts;
  return new Promise((resolve) => {
    const status = h('p', { class: 'form-error', role: 'alert', hidden: true });
    const cancel = h('button', { type: 'button', class: 'btn btn-secondary', 'data-action': 'cancel' }, 'Cancel');
    const ok = h('button', { type: 'submit', class: 'btn', 'data-action': 'save' }, submitLabel);
    const form = h('form', { class: 'form-grid edit-form', method: 'post', novalidate: true },
      opts.extra || null, spec.map((f) => edit_input(f, values[f.name])), status,
      h('div', { class: 'dialog-actions' }, cancel, ok));
    const dlg = edit_modal(title, form, null);
    dlg.classList.add('edit-dialog');
    let result = null;
    cancel.addEventListener('click', () => dlg.close());
    dlg.addEventListener('close', () => resolve(result));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      status.hidden = true;
      for (const bad of form.querySelectorAll('[aria-invalid]')) bad.removeAttribute('aria-invalid');
      const changes = {};
      try {
        for (const f of spec) {
          const el = form.elements[f.name];
          const v = edit_parse(f, f.type === 'bool' ? el.checked : el.value);
          if (f.writeOnly) {
            if (v !== '' && v !== null) changes[f.name] = v;
          } else if (!edit_same(v, values[f.name])) changes[f.name] = v;
        }
      } catch (e) {
        if (e.field) form.elements[e.field]?.setAttribute('aria-invalid', 'true');
        status.textContent = e.message;
        status.hidden = false;
        return;
      }
      if (!Object.keys(changes).length) {
        notify('Nothing changed');
        dlg.close();
        return;
      }
      const why = risky ? risky(changes, values) : null;
      if (why) {
        const rows = Object.keys(changes).map((k) => {
          const f = spec.find((x) => x.name === k);
          return [f.label, f.writeOnly ? '(hidden)' : values[k], f.writeOnly ? '(new value)' : changes[k]];
        });
        if (!await confirmDiff(`Confirm: ${title}`, why, rows, { okLabel: 'Apply' })) return;
      }
      ok.disabled = true;
      try {
        result = (await save(changes, values)) ?? true;
        dlg.close();
        if (opts.done) notify(opts.done);
      } catch (e) {
        status.textContent = e && e.param ? `${e.message} (${e.param})` : (e && e.message) || String(e);
        status.hidden = false;
      } finally {
        ok.disabled = false;
      }
    });
    form.querySelector('input:not([type=checkbox]), select, textarea')?.focus();
  });
}

export function editButton(label = 'Edit', aria) {
  return h('button', { type: 'button', class: 'btn btn-secondary btn-sm', 'data-action': 'edit', 'aria-label': aria }, label);
}
