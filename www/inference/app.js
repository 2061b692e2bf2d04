// app.js: the /inference page's entry (R-ADM-3): sign-in, the header, the section tabs
// (location hash) and the context every view gets. Views live in js/views/*.js.
// Roles only decide what is shown; the API enforces every right (R-ADM-2).

import { api_get, api_list_all, api_login, api_logout, api_me, api_on_signed_out } from './js/api.js';
import { clear, h, notify, replace } from './js/dom.js';
import * as endpoints from './js/views/endpoints.js';
import * as routes from './js/views/routes.js';
import * as keys from './js/views/keys.js';
import * as quotas from './js/views/quotas.js';
import * as models from './js/views/models.js';
import * as usage from './js/views/usage.js';
import * as alerts from './js/views/alerts.js';
import * as audit from './js/views/audit.js';
import * as people from './js/views/people.js';
import * as live from './js/views/live.js';
import * as rules from './js/views/rules.js';
import * as requests from './js/views/requests.js';
import * as nodes from './js/views/nodes.js';
import * as settings from './js/views/settings.js';

// Section table: id (the hash), label, the roles that see it, the module (render(root, ctx)).
const VIEWS = [
  { id: 'endpoints', label: 'Endpoints', roles: ['operator', 'admin'], mod: endpoints },
  { id: 'routes', label: 'Routes', roles: ['operator', 'admin', 'member'], mod: routes },
  { id: 'keys', label: 'Keys', roles: ['operator', 'admin', 'member'], mod: keys },
  // R-KEY-6: quota layers; an admin sees (and the API lets it set) its tenant's user and endpoint ones.
  { id: 'quotas', label: 'Quotas', roles: ['operator', 'admin'], mod: quotas },
  { id: 'usage', label: 'Usage', roles: ['operator', 'admin', 'member'], mod: usage },
  // Issue 16: the usage events one by one (GET /api/v1/requests, scoped like usage).
  { id: 'requests', label: 'Requests', roles: ['operator', 'admin', 'member'], mod: requests },
  // GET /api/v1/live: the series /metrics shows; members are refused it (no per-user series).
  // Shown only when the API answers it (app_probe_live).
  { id: 'live', label: 'Live', roles: ['operator', 'admin'], mod: live, probe: true },
  // Model policies: the operator edits them; an admin reads them and clears its tenant's
  // cached answers (R-CACHE-3); a member reads them.
  { id: 'models', label: 'Models', roles: ['operator', 'admin', 'member'], mod: models },
  // R-GUARD-3: content rules; an admin manages its tenant's and reads the global ones.
  { id: 'rules', label: 'Rules', roles: ['operator', 'admin'], mod: rules },
  // R-HC-7: GPU hosts; the operator's, an admin reads them.
  { id: 'nodes', label: 'Nodes', roles: ['operator', 'admin'], mod: nodes },
  // Run-time settings: the operator edits them; everyone reads the schema.
  { id: 'settings', label: 'Settings', roles: ['operator', 'admin', 'member'], mod: settings },
  { id: 'alerts', label: 'Alerts', roles: ['operator', 'admin'], mod: alerts },
  { id: 'audit', label: 'Audit', roles: ['operator', 'admin'], mod: audit },
  { id: 'users', label: 'Users', roles: ['operator', 'admin'], mod: people },
];


const $ = (id) => document.getElementById(id);
let ctx = null;
let renderSeq = 0;

function app_context(me) {
  const user = me.user || {};
  const role = user.role || 'member';
  let tenants = null;
  return {
    me,
    user,
    role,
    isOperator: role === 'operator',
    canManage: role === 'operator' || role === 'admin',
    // Tenant names for the operator's pickers; others act in their own tenant.
    async tenants() {
      if (!tenants) tenants = role === 'operator' ? await api_list_all('tenants') : [{ id: user.tenant_id, name: user.tenant }];
      return tenants;
    },
    forgetTenants() { tenants = null; },
  };
}

function app_views() {
  return VIEWS.filter((v) => v.roles.includes(ctx.role) && (!v.probe || ctx.live));
}

// The Live tab exists when the gateway has the shared state /metrics reads: ask once.
async function app_probe_live(role) {
  if (role === 'member') return false;
  try {
    await api_get('live', { minutes: 1 });
    return true;
  } catch {
    return false;
  }
}

function app_current() {
  const views = app_views();
  const want = location.hash.replace(/^#/, '');
  return views.find((v) => v.id === want) || views[0];
}

async function app_render() {
  if (!ctx) return;
  const view = app_current();
  for (const a of $('tabs').querySelectorAll('a')) {
    const on = a.dataset.view === view.id;
    a.classList.toggle('active', on);
    if (on) {
      a.setAttribute('aria-current', 'page');
      // On a phone the tab row scrolls: keep the current tab in sight.
      const bar = $('tabs');
      bar.scrollLeft = Math.max(0, a.offsetLeft - bar.offsetLeft - (bar.clientWidth - a.offsetWidth) / 2);
    }
    else a.removeAttribute('aria-current');
  }
  const notice = $('notice');
  if (notice) notice.hidden = true;
  const seq = ++renderSeq;
  const root = h('div', { class: 'view-body', 'data-view': view.id });
  replace($('view'), root);
  root.append(h('p', { class: 'muted loading' }, 'Loading…'));
  try {
    await view.mod.render(root, ctx);
    if (seq === renderSeq) root.dataset.ready = 'true';
  } catch (e) {
    if (seq !== renderSeq || e.status === 401) return;
    replace(root, h('div', { class: 'card error-card' },
      h('h2', null, `Could not load ${view.label.toLowerCase()}`), h('p', null, e.message || String(e))));
  } finally {
    root.querySelector(':scope > .loading')?.remove();
  }
}

function app_show_login(message) {
  ctx = null;
  $('app').hidden = true;
  clear($('view'));
  $('login').hidden = false;
  const err = $('login-error');
  err.hidden = !message;
  err.textContent = message || '';
  $('login-username').focus();
}

async function app_show(me) {
  ctx = app_context(me);
  ctx.live = await app_probe_live(ctx.role);
  $('login').hidden = true;
  $('app').hidden = false;
  $('who-name').textContent = `${ctx.user.name} · ${ctx.user.tenant}`;
  $('who-role').textContent = ctx.role;
  replace($('tabs'), app_views().map((v) =>
    h('a', { href: `#${v.id}`, 'data-view': v.id, class: 'tab' }, v.label)));
  app_render();
}

async function app_login(ev) {
  ev.preventDefault();
  const form = ev.currentTarget;
  const button = form.querySelector('button');
  button.disabled = true;
  $('login-error').hidden = true;
  try {
    const me = await api_login(form.username.value.trim(), form.password.value);
    form.password.value = '';
    app_show(me);
  } catch (e) {
    const msg = e.status === 401 ? 'Wrong user name or password.'
      : e.status === 429 ? 'Too many failed sign-ins; wait a minute and try again.' : e.message;
    app_show_login(msg);
  } finally {
    button.disabled = false;
  }
}

async function app_logout() {
  try {
    await api_logout();
  } catch (e) {
    if (e.status !== 401) notify(e.message, 'error');
  }
  app_show_login('');
  $('login-error').hidden = true;
}

async function app_boot() {
  $('login-form').addEventListener('submit', app_login);
  $('logout').addEventListener('click', app_logout);
  window.addEventListener('hashchange', app_render);
  api_on_signed_out(() => { if (ctx) app_show_login('Your session ended; sign in again.'); });
  try {
    app_show(await api_me());
  } catch (e) {
    app_show_login(e.status === 401 ? '' : e.message);
  }
}

app_boot();
