// dom.js: DOM building for the /inference page. R-SEC-7: every value from the API goes
// into the page as a text node or an attribute value (never parsed as HTML), so stored
// names such as "<img onerror=...>" show as text.

const SVG_NS = 'http://www.w3.org/2000/svg';

function dom_apply(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    else if (k === 'text') el.textContent = String(v);
    else if (k.startsWith('on')) {
      // Handlers are functions only: a string would be an inline handler (CSP refuses it).
      if (typeof v !== 'function') throw new TypeError(`${k} must be a function`);
      el.addEventListener(k.slice(2), v);
    }
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

function dom_append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// h('button', {class: 'btn', onclick: f}, 'Save') -> <button class="btn">Save</button>
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  dom_apply(el, attrs);
  dom_append(el, children);
  return el;
}

// The same for SVG elements (charts).
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  dom_apply(el, attrs);
  dom_append(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replace(el, ...children) {
  clear(el);
  dom_append(el, children);
  return el;
}

// ---- formatting --------------------------------------------------------------------

const NUM = new Intl.NumberFormat('en-US');
export const fmtNum = (n) => (n === null || n === undefined ? '–' : NUM.format(n));
// Limits: 0 means unlimited (SPEC §12).
export const fmtLimit = (n) => (!n ? '∞' : NUM.format(n));

export function fmtTime(epochS) {
  if (!epochS) return '–';
  const d = new Date(epochS * 1000);
  const p = (x) => String(x).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
}

export function badge(text, kind) {
  return h('span', { class: ['badge', kind && `badge-${kind}`] }, text);
}

// ---- tables ------------------------------------------------------------------------

// columns: [{label, cell: (row) => Node|string, class}]; scrolls inside its own box on
// narrow screens so the page body never does.
export function table(columns, rows, { empty = 'Nothing here yet.', caption, rowClass } = {}) {
  if (!rows.length) return h('div', { class: 'table-empty' }, empty);
  const head = h('tr', null, columns.map((c) => h('th', { class: c.class, scope: 'col' }, c.label)));
  const body = rows.map((r) => h('tr', { class: rowClass ? rowClass(r) : null },
    columns.map((c) => h('td', { class: c.class }, c.cell(r)))));
  const wrap = h('div', { class: 'table-wrap' },
    h('table', null, caption ? h('caption', null, caption) : null, h('thead', null, head), h('tbody', null, body)));
  dom_scroll_focus(wrap);
  return wrap;
}

// A table wider than its box scrolls inside it: then the box takes the keyboard focus, so
// it can be scrolled without a mouse even when no cell holds a button (WCAG 2.1.1).
function dom_scroll_focus(wrap) {
  if (typeof ResizeObserver === 'undefined') return;
  new ResizeObserver(() => {
    if (wrap.scrollWidth > wrap.clientWidth + 1) wrap.setAttribute('tabindex', '0');
    else wrap.removeAttribute('tabindex');
  }).observe(wrap);
}

// ---- forms -------------------------------------------------------------------------

export function field(label, input, hint) {
  return h('label', { class: 'field' }, h('span', { class: 'field-label' }, label), input,
    hint ? h('span', { class: 'field-hint' }, hint) : null);
}

export function select(name, options, value) {
  return h('select', { name },
    options.map((o) => {
      const [v, label] = Array.isArray(o) ? o : [o, o];
      return h('option', { value: v, selected: String(v) === String(value) }, label);
    }));
}

// The named inputs of a form as an object; numbers for type=number, booleans for checkboxes.
export function formValues(form) {
  const out = {};
  for (const el of form.elements) {
    if (!el.name || el.disabled) continue;
    if (el.type === 'checkbox') out[el.name] = el.checked;
    else if (el.type === 'number') out[el.name] = el.value === '' ? null : Number(el.value);
    else out[el.name] = el.value.trim();
  }
  return out;
}

// Runs an async submit handler with the form's buttons disabled and errors shown in it.
export function onSubmit(form, handler) {
  const status = h('p', { class: 'form-error', role: 'alert', hidden: true });
  form.append(status);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    status.hidden = true;
    const buttons = [...form.querySelectorAll('button')];
    buttons.forEach((b) => { b.disabled = true; });
    try {
      await handler(formValues(form), form);
    } catch (e) {
      status.textContent = e.message || String(e);
      status.hidden = false;
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
    }
  });
  return form;
}

// ---- dialogs and notices -----------------------------------------------------------

function dom_dialog(title, body, actions) {
  const dlg = h('dialog', { class: 'dialog' },
    h('h2', { class: 'dialog-title' }, title), body, h('div', { class: 'dialog-actions' }, actions));
  document.body.append(dlg);
  dlg.addEventListener('close', () => dlg.remove());
  dlg.showModal();
  return dlg;
}

// A secret shown once (R-SEC-1): in a read-only field to copy, never in a URL or storage.
export function showSecret(title, secret, note) {
  const input = h('input', { class: 'secret', readonly: true, 'aria-label': title, spellcheck: 'false' });
  input.value = secret;
  const copy = h('button', { type: 'button', class: 'btn btn-secondary' }, 'Copy');
  copy.addEventListener('click', async () => {
    input.select();
    try {
      await navigator.clipboard.writeText(secret);
      copy.textContent = 'Copied';
    } catch {
      copy.textContent = 'Select and copy';
    }
  });
  const done = h('button', { type: 'button', class: 'btn', 'data-action': 'close' }, 'Done');
  const dlg = dom_dialog(title, [h('p', { class: 'muted' }, note), h('div', { class: 'secret-row' }, input, copy)], [done]);
  done.addEventListener('click', () => dlg.close());
  input.select();
  return new Promise((resolve) => dlg.addEventListener('close', resolve));
}

let noticeTimer = null;
export function notify(message, kind = 'ok') {
  let box = document.getElementById('notice');
  if (!box) {
    box = h('div', { id: 'notice', role: 'status', 'aria-live': 'polite' });
    document.body.append(box);
  }
  box.className = `notice notice-${kind}`;
  box.textContent = message;
  box.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { box.hidden = true; }, kind === 'error' ? 8000 : 3500);
}
