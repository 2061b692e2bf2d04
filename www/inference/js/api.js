// api.js: the page's only way to the management API (/api/v1/, R-ADM-1).
// R-SEC-7: credentials travel in the HttpOnly session cookie and the CSRF token in a
// header, kept in memory only; no secret ever goes into a URL (all are in bodies).

const BASE = '/api/v1/';
let csrfToken = null;
let onSignedOut = () => {};

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || null;
    this.param = e.param || null;
  }
}

// Called when the session is gone (401), so the page can show the login form.
export function api_on_signed_out(fn) {
  onSignedOut = fn;
}

// path: "endpoints/3/replicas"; params: an object turned into a query string (only ids,
// dates and filters, never a secret).
export function api_path(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const qs = q.toString();
  return qs ? `${path}?${qs}` : path;
}

export const api_id = (id) => encodeURIComponent(String(id));

export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  const write = method !== 'GET' && method !== 'HEAD';
  if (write) {
    headers['Content-Type'] = 'application/json';
    if (csrfToken) headers['X-CSRF-Token'] = csrfToken;
  }
  const res = await fetch(BASE + path, {
    method,
    headers,
    body: write ? JSON.stringify(body || {}) : undefined,
    credentials: 'same-origin',
    cache: 'no-store',
    redirect: 'error',
  });
  let data = null;
  try {
    data = await res.json();
  } catch {
    data = null;
  }
  if (!res.ok) {
    const err = new ApiError(res.status, data);
    if (res.status === 401 && !path.startsWith('auth/login')) {
      csrfToken = null;
      onSignedOut(err);
    }
    throw err;
  }
  return data;
}

export const api_get = (path, params) => api('GET', api_path(path, params));

// A GET answered as text (the usage CSV); errors as api() reports them.
export async function api_text(path, params) {
  const res = await fetch(BASE + api_path(path, params), { credentials: 'same-origin', cache: 'no-store', redirect: 'error' });
  if (!res.ok) {
    let data = null;
    try { data = await res.json(); } catch { data = null; }
    const err = new ApiError(res.status, data);
    if (res.status === 401) { csrfToken = null; onSignedOut(err); }
    throw err;
  }
  return res.text();
}
export const api_post = (path, body) => api('POST', path, body);
export const api_patch = (path, body) => api('PATCH', path, body);
export const api_delete = (path) => api('DELETE', path);

// Every row of a listing ({"data","total","limit","offset"}), page by page.
export async function api_list_all(path, params, max = 5000) {
  const rows = [];
  for (let offset = 0; offset < max;) {
    const page = await api_get(path, { ...params, limit: 1000, offset });
    rows.push(...page.data);
    offset += page.data.length;
    if (!page.data.length || offset >= page.total) break;
  }
  return rows;
}

// ---- session -----------------------------------------------------------------------

export async function api_login(username, password) {
  const me = await api('POST', 'auth/login', { username, password });
  csrfToken = me.csrf_token;
  return me;
}

// After a reload the cookie is still there; the CSRF token comes back from auth/me.
export async function api_me() {
  const me = await api('GET', 'auth/me');
  csrfToken = me.csrf_token || null;
  return me;
}

export async function api_logout() {
  try {
    await api('POST', 'auth/logout', {});
  } finally {
    csrfToken = null;
  }
}
