// ui.test.mjs: the /inference page (R-ADM-3, R-SEC-7) in headless Chromium (Debian's
// chromium, driven with playwright-core): sign in, create endpoints with replicas, an
// 80/20 route split, a key with limits, send traffic with that key, and read the usage
// charts; stored-XSS names, the CSP, roles, reload + CSRF, logout; screenshots at
// 1280x800 and 390x844. Every change made through the page is checked again through the
// API (what the server stored), and the traffic against the stand-ins' own counters.
// Run by run.sh, which starts env.py and passes its JSON line in SLUICE_UI_ENV.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { corsTests } from './cors.mjs';

const ENV = JSON.parse(process.env.SLUICE_UI_ENV || 'null');
if (!ENV) throw new Error('SLUICE_UI_ENV is not set: run tests/ui/run.sh');
const BASE = ENV.base_url;
const OUT = process.env.SLUICE_UI_OUT || path.resolve('test-output/ui');
const CHROMIUM = process.env.SLUICE_CHROMIUM || '/usr/bin/chromium';
const XSS = '<img src=x onerror=alert(1)>';
const T = 20000;   // per-test timeout, ms
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
// Every tab an operator sees, in order (issue 16's labels, and the earlier Quotas and Rules).
const OPERATOR_TABS = ['Endpoints', 'Routes', 'Keys', 'Quotas', 'Usage', 'Requests', 'Live', 'Models', 'Rules', 'Nodes',
  'Settings', 'Alerts', 'Audit', 'Users'];
const TAB_IDS = ['endpoints', 'routes', 'keys', 'quotas', 'usage', 'requests', 'live', 'models', 'rules', 'nodes',
  'settings', 'alerts', 'audit', 'users'];
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self';"
  + " frame-ancestors 'none'; base-uri 'none'; form-action 'self'";
const LAUNCH_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const profiles = [];
const contexts = [];
let page;
const problems = [];     // CSP violations, script errors, alert() calls: must stay empty
let refusals = 0;        // 400 answers a test provoked on purpose (the console logs each once)
const state = {};        // what one test leaves for the next

// ---- helpers ----

async function launch() {
  const dir = mkdtempSync(path.join(tmpdir(), 'sluice-ui-'));
  profiles.push(dir);
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM, headless: true, args: LAUNCH_ARGS, viewport: { width: 1440, height: 900 },
    timeout: 30000,
  });
  contexts.push(ctx);
  const p = ctx.pages()[0] || await ctx.newPage();
  p.setDefaultTimeout(8000);
  p.on('console', (m) => {
    const t = m.text();
    if (/Content.Security.Policy|Refused to/i.test(t) || (m.type() === 'error' && !/status of 40[149]/.test(t))) problems.push(`console: ${t}`);
  });
  p.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  p.on('dialog', async (d) => { problems.push(`${d.type()}() called: ${d.message()}`); await d.dismiss(); });
  return p;
}

// The API as the server sees it, through a separate session of our own.
let apiCookie = null;
async function apiGet(p) {
  if (!apiCookie) {
    const r = await fetch(`${BASE}/api/v1/auth/login`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ username: ENV.username, password: ENV.password }),
    });
    assert.equal(r.status, 200, 'API login for checking');
    apiCookie = r.headers.getSetCookie().find((c) => c.startsWith('sluice_session=')).split(';')[0];
  }
  const r = await fetch(`${BASE}/api/v1/${p}`, { headers: { Cookie: apiCookie } });
  assert.equal(r.status, 200, `GET ${p}`);
  return r.json();
}

async function apiSend(method, p, body) {
  if (!apiCookie) await apiGet('auth/me');
  const me = await (await fetch(`${BASE}/api/v1/auth/me`, { headers: { Cookie: apiCookie } })).json();
  const r = await fetch(`${BASE}/api/v1/${p}`, {
    method, headers: { Cookie: apiCookie, 'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf_token },
    body: JSON.stringify(body || {}),
  });
  return { status: r.status, body: await r.json().catch(() => null) };
}

// GET that may fail (a route api16 adds): the status and body.
async function apiTry(p) {
  if (!apiCookie) await apiGet('auth/me');
  const r = await fetch(`${BASE}/api/v1/${p}`, { headers: { Cookie: apiCookie } });
  return { status: r.status, body: await r.json().catch(() => null) };
}

// The open shared edit dialog: fill named fields (checkboxes take booleans), submit.
async function editSubmit(values, p = page) {
  const dlg = p.locator('dialog.edit-dialog[open]');
  await dlg.waitFor();
  for (const [name, v] of Object.entries(values)) {
    const el = dlg.locator(`[name="${name}"]`);
    const tag = await el.evaluate((e) => (e.type === 'checkbox' ? 'checkbox' : e.tagName));
    if (tag === 'checkbox') await el.setChecked(!!v);
    else if (tag === 'SELECT') await el.selectOption(String(v));
    else await el.fill(String(v));
  }
  await dlg.locator('[data-action="save"]').click();
}

async function dialogGone(p = page) {
  await p.locator('dialog[open]').first().waitFor({ state: 'detached' });
}

// axe-core in the page: serious or critical violations fail.
async function axeCheck(what, p = page) {
  // Through DevTools (evaluate), not a <script>: the page's CSP rightly refuses inline ones.
  if (!(await p.evaluate(() => !!window.axe))) await p.evaluate(AXE);
  const res = await p.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`);
  });
  assert.deepEqual(res, [], `${what}: accessibility`);
}

async function fakeRequests(url) {
  const r = await fetch(`${url}/_fake/stats`);
  return (await r.json()).requests;
}

async function tab(id) {
  await page.click(`#tabs a[data-view="${id}"]`);
  await page.waitForSelector(`.view-body[data-view="${id}"][data-ready]`);
}

// Reads a secret from the shown-once dialog and closes it.
async function takeSecret() {
  const dlg = page.locator('dialog.dialog[open]');
  await dlg.waitFor();
  const key = await dlg.locator('input.secret').inputValue();
  await dlg.locator('[data-action="close"]').click();
  await dlg.waitFor({ state: 'detached' });
  return key;
}

async function openPanel(id) {
  const open = await page.$eval(`#${id}`, (d) => d.open);
  if (!open) await page.click(`#${id} > summary`);
}

async function createEndpoint(name, replicaUrl) {
  await openPanel('new-endpoint');
  await page.fill('#endpoint-form [name="name"]', name);
  await page.selectOption('#endpoint-form [name="algorithm"]', 'least_connections');
  await page.click('#endpoint-form button[type="submit"]');
  const key = await takeSecret();
  const card = page.locator(`section.endpoint[data-endpoint="${name.replace(/["\\]/g, '\\$&')}"]`);
  await card.waitFor();
  if (replicaUrl) {
    await card.locator('.replica-form [name="url"]').fill(replicaUrl);
    await card.locator('.replica-form button[type="submit"]').click();
    await page.locator(`section.endpoint[data-endpoint="${name.replace(/["\\]/g, '\\$&')}"] code.url`, { hasText: replicaUrl }).waitFor();
  }
  return { key, card: page.locator(`section.endpoint[data-endpoint="${name.replace(/["\\]/g, '\\$&')}"]`) };
}

async function shoot(name) {
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(OUT, `${name}.png`), fullPage: true });
}

async function noSideScroll(what) {
  const [sw, iw] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  assert.ok(sw <= iw, `${what}: the page body scrolls sideways (${sw} > ${iw})`);
}

before(async () => {
  mkdirSync(OUT, { recursive: true });
  page = await launch();
});

after(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  for (const d of profiles) rmSync(d, { recursive: true, force: true });
});

// ---- tests ----

test('R-SEC-7: /inference sends a strict CSP, nosniff and no-referrer', { timeout: T }, async () => {
  const redirect = await fetch(`${BASE}/inference`, { redirect: 'manual' });
  assert.equal(redirect.status, 301);
  assert.equal(new URL(redirect.headers.get('location'), BASE).pathname, '/inference/');
  for (const p of ['/inference/', '/inference/app.js', '/inference/app.css', '/inference/js/api.js']) {
    const r = await fetch(BASE + p);
    assert.equal(r.status, 200, p);
    assert.equal(r.headers.get('content-security-policy'), CSP, `${p}: CSP`);
    assert.equal(r.headers.get('x-content-type-options'), 'nosniff', p);
    assert.equal(r.headers.get('referrer-policy'), 'no-referrer', p);
  }
  const html = await (await fetch(`${BASE}/inference/`)).text();
  assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>|\sstyle=|<style/i, 'no inline script or style');
});

test('R-ADM-3: sign in through the form; a wrong password is refused', { timeout: T }, async () => {
  await page.goto(`${BASE}/inference`);
  await page.waitForSelector('#login-form');
  await shoot('login-flow');
  await page.fill('#login-username', ENV.username);
  await page.fill('#login-password', 'not-the-password');
  await page.click('#login-form button[type="submit"]');
  await page.locator('#login-error').filter({ hasText: 'Wrong user name or password' }).waitFor();
  assert.ok(await page.isHidden('#app'));
  await page.fill('#login-password', ENV.password);
  await page.click('#login-form button[type="submit"]');
  await page.waitForSelector('#app:not([hidden])');
  assert.match(await page.textContent('#who-name'), /^oper · default$/);
  assert.equal(await page.textContent('#who-role'), 'operator');
  const tabs = await page.$$eval('#tabs a', (as) => as.map((a) => a.textContent));
  assert.deepEqual(tabs, OPERATOR_TABS);
  // R-SEC-7: the password travelled in the body only.
  assert.ok(!page.url().includes(ENV.password) && !page.url().includes('password'), page.url());
  const cookies = await contexts[0].cookies(BASE);
  const sess = cookies.find((c) => c.name === 'sluice_session');
  assert.ok(sess && sess.httpOnly && sess.sameSite === 'Strict', JSON.stringify(cookies));
});

test('R-ADM-3: create endpoints with a replica each, test one, rotate its key', { timeout: 30000 }, async () => {
  await tab('endpoints');
  const a = await createEndpoint('ep-a', ENV.fake_url);
  assert.match(a.key, /^sk-/);
  await createEndpoint('ep-b', ENV.fake2_url);
  await a.card.locator('.badge', { hasText: '1/1 healthy' }).waitFor();
  assert.equal(await a.card.locator('td .badge').first().textContent(), 'healthy');
  // What the server stored.
  const eps = (await apiGet('endpoints')).data;
  const epA = eps.find((e) => e.name === 'ep-a');
  assert.ok(epA && eps.some((e) => e.name === 'ep-b'), JSON.stringify(eps));
  assert.equal(epA.algorithm, 'least_connections');
  assert.equal(epA.tenant, 'default');
  assert.ok(a.key.startsWith(epA.key_prefix), 'the key shown is the endpoint key');
  const reps = (await apiGet(`endpoints/${epA.id}/replicas`)).data;
  assert.deepEqual(reps.map((r) => [r.url, r.healthy]), [[ENV.fake_url, true]]);
  state.epA = epA;

  // R-ANT-5: the one-click test reaches the stand-in.
  const before = await fakeRequests(ENV.fake_url);
  await a.card.locator('[data-action="test"]').click();
  const verdict = a.card.locator('.verdict[data-ok]');
  await verdict.waitFor();
  assert.equal(await verdict.getAttribute('data-ok'), 'true', await verdict.textContent());
  assert.match(await verdict.textContent(), /Passed: HTTP 200/);
  assert.equal(await fakeRequests(ENV.fake_url), before + 1, 'the test request reached the replica');

  // Rotation: confirm, then the new key once; the server has the new prefix.
  await a.card.locator('[data-action="rotate"]').click();
  await page.locator('dialog.dialog[open] button', { hasText: 'Rotate' }).click();
  await page.locator('dialog.dialog[open] .dialog-title', { hasText: 'New endpoint key' }).waitFor();
  const rotated = await takeSecret();
  assert.notEqual(rotated, a.key);
  const after = (await apiGet(`endpoints/${epA.id}`));
  assert.ok(rotated.startsWith(after.key_prefix) && !a.key.startsWith(after.key_prefix));
  await shoot('endpoints-flow');
});

test('R-SEC-7: names with HTML in them show as text (stored XSS)', { timeout: T }, async () => {
  await tab('users');
  await page.fill('#tenant-form [name="name"]', XSS);
  await page.click('#tenant-form button[type="submit"]');
  await page.locator('#tenant-list .tenant-name', { hasText: XSS }).waitFor();
  await tab('endpoints');
  const x = await createEndpoint(XSS, null);
  assert.equal(await x.card.locator('h2.endpoint-name').textContent(), XSS);
  assert.equal(await page.locator('img[src="x"]').count(), 0, 'no element was made from the name');
  assert.ok((await apiGet('tenants')).data.some((t) => t.name === XSS), 'stored verbatim');
  await page.waitForTimeout(200);
  assert.deepEqual(problems.filter((p) => p.includes('alert')), []);
});

test('R-ADM-3: a replica that does not answer shows unhealthy (sluice-healthd)', { timeout: 30000 }, async () => {
  await tab('endpoints');
  const down = await createEndpoint('ep-down', 'http://127.0.0.1:1');
  // healthd: 3 failed rounds of 300 ms; the page shows it on the next refresh.
  const deadline = Date.now() + 15000;
  while (Date.now() < deadline) {
    await page.click('.view-header button');
    await page.waitForSelector('section.endpoint[data-endpoint="ep-down"]');
    if (await down.card.locator('td .badge', { hasText: 'unhealthy' }).count()) break;
    await page.waitForTimeout(500);
  }
  assert.equal(await down.card.locator('td .badge').first().textContent(), 'unhealthy');
  assert.equal(await down.card.locator('.card-title .badge').textContent(), '0/1 healthy');
  const ep = (await apiGet('endpoints')).data.find((e) => e.name === 'ep-down');
  assert.equal((await apiGet(`endpoints/${ep.id}/replicas`)).data[0].healthy, false);
  state.epDown = ep;
  await shoot('endpoints-health-flow');
});

test('R-ADM-3: a route pair for one model, edited to an 80/20 split, shown as a bar', { timeout: 30000 }, async () => {
  await tab('routes');
  const add = async (endpoint, weight) => {
    await openPanel('new-route');
    await page.fill('#route-form [name="model"]', 'm');
    await page.selectOption('#route-form [name="endpoint_id"]', { label: `${endpoint} (default)` });
    await page.fill('#route-form [name="weight"]', String(weight));
    await page.click('#route-form button[type="submit"]');
    await page.locator(`.split[data-model="m"] .split-seg[data-endpoint="${endpoint}"]`).waitFor();
  };
  await add('ep-a', 80);
  await add('ep-b', 30);
  const segs = () => page.$$eval('.split[data-model="m"] .split-seg', (ss) => ss.map((s) => [s.dataset.endpoint, s.textContent]));
  assert.deepEqual(await segs(), [['ep-a', '72.7%'], ['ep-b', '27.3%']]);

  // A reload keeps the session; the CSRF token comes back from auth/me, so writes work.
  await page.reload();
  await page.waitForSelector('.view-body[data-view="routes"] .split[data-model="m"]');
  const input = page.locator('.route-card[data-model="m"] tr', { hasText: 'ep-b' }).locator('.weight-edit input');
  await input.fill('20');
  await page.locator('.route-card[data-model="m"] tr', { hasText: 'ep-b' }).locator('.weight-edit button').click();
  await page.locator('.split[data-model="m"] .split-seg', { hasText: '20%' }).waitFor();
  assert.deepEqual(await segs(), [['ep-a', '80%'], ['ep-b', '20%']]);
  const grow = await page.$$eval('.split[data-model="m"] .split-seg', (ss) => ss.map((s) => s.getBoundingClientRect().width));
  assert.ok(Math.abs(grow[0] / (grow[0] + grow[1]) - 0.8) < 0.02, `bar widths ${grow}`);
  const routes = (await apiGet('model-routes?model=m')).data;
  assert.deepEqual(routes.map((r) => [r.endpoint, r.weight]).sort(), [['ep-a', 80], ['ep-b', 20]]);
  await shoot('routes-flow');
});

test('R-ADM-3: a key with limits, shown once', { timeout: T }, async () => {
  await tab('keys');
  await openPanel('new-key');
  const limits = { qps_limit: 50, concurrency_limit: 10, daily_limit: 1000, monthly_quota: 20000, tpm_limit: 100000, monthly_token_quota: 5000000 };
  await page.fill('#key-form [name="name"]', 'ui-key');
  for (const [k, v] of Object.entries(limits)) await page.fill(`#key-form [name="${k}"]`, String(v));
  await page.fill('#key-form [name="priority"]', '3');   // R-PRIO-2
  await page.click('#key-form button[type="submit"]');
  state.key = await takeSecret();
  assert.match(state.key, /^sk-tenant-/);
  const keys = (await apiGet('tenant/api-keys')).data;
  const k = keys.find((x) => x.name === 'ui-key');
  assert.ok(k && state.key.startsWith(k.prefix), JSON.stringify(keys));
  for (const [name, v] of Object.entries(limits)) assert.equal(k[name], v, name);
  assert.deepEqual([k.priority, k.max_priority], [3, null]);
  assert.equal(k.user, 'oper');
  const row = page.locator('#key-list tr', { hasText: 'ui-key' });
  assert.match(await row.textContent(), /0 \/ 1,000/);
  assert.ok(!(await page.content()).includes(state.key), 'the key is no longer in the page');
  state.keyId = k.id;
});

test('issue 14: the Quotas tab: create quota layers, see them listed, edit one, delete them', { timeout: 30000 }, async () => {
  await tab('quotas');
  const rowOf = (target) => page.locator('#quota-list tbody tr').filter({ has: page.locator('.quota-target-name', { hasText: new RegExp(`^${target}$`) }) });
  // A user layer: the form shows only the limits a user layer takes (R-KEY-6).
  await openPanel('new-quota');
  await page.selectOption('#quota-form [name="scope"]', 'user');
  await page.selectOption('#quota-form [name="target"]', 'mia');
  assert.ok(await page.isHidden('#quota-form [data-limit="concurrency"]'), 'no concurrency for a user layer');
  await page.fill('#quota-form [name="rpm"]', '120');
  await page.fill('#quota-form [name="daily_tokens"]', '50000');
  await page.click('#quota-form button[type="submit"]');
  await rowOf('mia').waitFor();
  assert.match(await rowOf('mia').textContent(), /120/);
  // A model layer with its queue length.
  await openPanel('new-quota');
  await page.selectOption('#quota-form [name="scope"]', 'model');
  await page.fill('#quota-form [name="target"]', 'ui-model');
  await page.fill('#quota-form [name="concurrency"]', '3');
  await page.fill('#quota-form [name="queue_max"]', '5');
  await page.click('#quota-form button[type="submit"]');
  await rowOf('ui-model').waitFor();
  let qs = (await apiGet('quotas')).data;
  const user = qs.find((q) => q.scope === 'user' && q.user === 'mia');
  const model = qs.find((q) => q.scope === 'model' && q.model === 'ui-model');
  assert.ok(user && model, JSON.stringify(qs));
  assert.deepEqual([user.rpm, user.daily_tokens, user.tenant], [120, 50000, 'acme']);
  assert.deepEqual([model.concurrency, model.queue_max], [3, 5]);
  await shoot('quotas-flow');

  // Edit the model layer in its dialog: what the server stored changes.
  await rowOf('ui-model').locator('[data-action="edit"]').click();
  await page.fill('dialog.dialog[open] [name="concurrency"]', '4');
  await page.fill('dialog.dialog[open] [name="queue_max"]', '');
  await page.click('dialog.dialog[open] button[type="submit"]');
  await page.locator('dialog.dialog[open]').waitFor({ state: 'detached' });
  await rowOf('ui-model').filter({ hasText: 'endpoint’s' }).waitFor();
  const edited = await apiGet(`quotas/${model.id}`);
  assert.deepEqual([edited.concurrency, edited.queue_max], [4, null]);

  // Delete both, each after its confirmation.
  for (const target of ['mia', 'ui-model']) {
    await rowOf(target).locator('[data-action="delete"]').click();
    await page.locator('dialog.dialog[open] button', { hasText: 'Delete' }).click();
    await rowOf(target).waitFor({ state: 'detached' });
  }
  qs = (await apiGet('quotas')).data;
  assert.ok(!qs.some((q) => q.id === user.id || q.id === model.id), JSON.stringify(qs));

  // R-PRIO-1: an endpoint's queue from its card.
  await tab('endpoints');
  const card = page.locator('section.endpoint[data-endpoint="ep-b"]');
  await card.locator('[data-action="queue"]').click();
  await page.fill('dialog.dialog[open] [name="max_concurrency"]', '16');
  await page.fill('dialog.dialog[open] [name="queue_max"]', '40');
  await page.click('dialog.dialog[open] button[type="submit"]');
  await page.locator('dialog.dialog[open]').waitFor({ state: 'detached' });
  await card.locator('dd', { hasText: '40 · 10000 ms' }).waitFor();
  const ep = (await apiGet('endpoints')).data.find((e) => e.name === 'ep-b');
  assert.deepEqual([ep.max_concurrency, ep.queue_max, ep.queue_timeout_ms], [16, 40, 10000]);
});

test('issue 15: the Models tab: a policy with an exact cache, listed, its TTL edited, deleted; a route\u2019s cache', { timeout: 30000 }, async () => {
  await tab('models');
  const rowOf = (model) => page.locator('#policy-list tbody tr').filter({ has: page.locator(`.policy-model[data-model="${model}"]`) });
  await openPanel('new-policy');
  await page.fill('#policy-form [name="model"]', 'ui-cached');
  await page.selectOption('#policy-form [name="purpose"]', 'chat');
  await page.fill('#policy-form [name="quality_score"]', '71.5');
  await page.fill('#policy-form [name="price_input_per_1k"]', '0.25');
  await page.fill('#policy-form [name="max_output"]', '256');
  await page.selectOption('#policy-form [name="cache"]', 'exact');
  await page.fill('#policy-form [name="cache_ttl_s"]', '600');
  await page.check('#policy-form [name="default_greedy"]');
  await page.click('#policy-form button[type="submit"]');
  await rowOf('ui-cached').waitFor();
  assert.match(await rowOf('ui-cached').textContent(), /exact/);
  assert.match(await rowOf('ui-cached').textContent(), /600 s/);
  let p = await apiGet('models/routing-policies/ui-cached');
  assert.deepEqual([p.cache, p.cache_ttl_s, p.default_greedy, p.max_output, p.purpose, p.quality_score, p.price_input_per_1k,
    p.shrink_max_tokens, p.max_context], ['exact', 600, true, 256, 'chat', 71.5, 0.25, false, null]);
  assert.ok(await page.isVisible('#cache-list'), 'the answer cache card');
  // R-CACHE-4: the semantic hit audit (env.py recorded one, its prompt markup): text only.
  const hit = page.locator('#semantic-hits tr.semantic-hit', { hasText: 'req_ui_semantic' });
  await hit.waitFor();
  assert.equal(await hit.locator('.hit-similarity').textContent(), '0.961');
  assert.equal(await hit.locator('.hit-prompt').textContent(), '<img src=x onerror=alert(1)> capital of France?');
  assert.equal(await hit.locator('.hit-matched').textContent(), 'what is the capital of France');
  assert.equal(await page.locator('#semantic-hits img').count(), 0, 'a prompt became markup');
  await shoot('models-flow');

  // Edit the TTL in the dialog; the other fields stay what they were.
  await rowOf('ui-cached').locator('[data-action="edit"]').click();
  assert.equal(await page.inputValue('dialog.dialog[open] [name="cache"]'), 'exact');
  await page.fill('dialog.dialog[open] [name="cache_ttl_s"]', '1200');
  await page.click('dialog.dialog[open] button[type="submit"]');
  await page.locator('dialog.dialog[open]').waitFor({ state: 'detached' });
  await rowOf('ui-cached').filter({ hasText: '1,200 s' }).waitFor();
  p = await apiGet('models/routing-policies/ui-cached');
  assert.deepEqual([p.cache, p.cache_ttl_s, p.default_greedy, p.max_output, p.quality_score], ['exact', 1200, true, 256, 71.5]);

  await rowOf('ui-cached').locator('[data-action="delete"]').click();
  await page.locator('dialog.dialog[open] button', { hasText: 'Delete' }).click();
  await rowOf('ui-cached').waitFor({ state: 'detached' });
  assert.ok(!(await apiGet('models/routing-policies')).data.some((x) => x.model === 'ui-cached'));

  // R-CACHE-2: a route's own cache, then back to the policy's (NULL).
  await tab('routes');
  const row = () => page.locator('.route-card[data-model="m"] tr', { hasText: 'ep-b' });
  await row().locator('[data-action="cache"]').click();
  await page.selectOption('dialog.dialog[open] [name="cache"]', 'exact');
  await page.fill('dialog.dialog[open] [name="cache_ttl_s"]', '300');
  await page.click('dialog.dialog[open] button[type="submit"]');
  await page.locator('dialog.dialog[open]').waitFor({ state: 'detached' });
  await row().locator('.route-cache', { hasText: 'exact' }).waitFor();
  assert.match(await row().locator('.route-cache').textContent(), /300 s/);
  let r = (await apiGet('model-routes?model=m')).data.find((x) => x.endpoint === 'ep-b');
  assert.deepEqual([r.cache, r.cache_ttl_s], ['exact', 300]);
  await shoot('routes-cache-flow');
  await row().locator('[data-action="cache"]').click();
  await page.selectOption('dialog.dialog[open] [name="cache"]', '');
  await page.fill('dialog.dialog[open] [name="cache_ttl_s"]', '');
  await page.click('dialog.dialog[open] button[type="submit"]');
  await page.locator('dialog.dialog[open]').waitFor({ state: 'detached' });
  await row().locator('.route-cache', { hasText: 'policy’s' }).waitFor();
  r = (await apiGet('model-routes?model=m')).data.find((x) => x.endpoint === 'ep-b');
  assert.deepEqual([r.cache, r.cache_ttl_s], [null, null]);
});

test('issue 15: the Rules tab: rules added, a refusal shown in the form, listed, deleted after a confirmation', { timeout: 30000 }, async () => {
  await tab('rules');
  const rowOf = (name) => page.locator('#rule-list tbody tr').filter({ has: page.locator('.rule-name', { hasText: new RegExp(`^${name}$`) }) });
  await openPanel('new-rule');
  // A keyword rule of tenant acme that flags.
  await page.fill('#rule-form [name="name"]', 'ui-flag');
  await page.selectOption('#rule-form [name="kind"]', 'keyword');
  await page.fill('#rule-form [name="text"]', 'Confidential');
  await page.selectOption('#rule-form [name="tenant"]', 'acme');
  await page.selectOption('#rule-form [name="action"]', 'flag');
  await page.selectOption('#rule-form [name="scope"]', 'output');
  await page.click('#rule-form button[type="submit"]');
  await rowOf('ui-flag').waitFor();
  // What the API refuses, the form says (a 400 for a bad pattern is t0131's; a taken name is a 409).
  await openPanel('new-rule');
  await page.fill('#rule-form [name="name"]', 'ui-flag');
  await page.fill('#rule-form [name="text"]', 'other');
  await page.click('#rule-form button[type="submit"]');
  await page.locator('#rule-form .form-error:not([hidden])', { hasText: 'exists' }).waitFor();
  assert.equal((await apiGet('rules')).data.filter((r) => r.name === 'ui-flag').length, 1, 'nothing more stored');
  // A global regular expression that blocks (the picker's default: all tenants).
  await openPanel('new-rule');
  await page.fill('#rule-form [name="name"]', 'ui-block');
  await page.selectOption('#rule-form [name="kind"]', 'pattern');
  await page.fill('#rule-form [name="text"]', 'password\\s*[:=]');
  await page.selectOption('#rule-form [name="action"]', 'block');
  await page.click('#rule-form button[type="submit"]');
  await rowOf('ui-block').waitFor();
  assert.match(await rowOf('ui-block').textContent(), /all tenants/);
  assert.match(await rowOf('ui-flag').textContent(), /acme/);
  const rules = (await apiGet('rules')).data;
  const flag = rules.find((r) => r.name === 'ui-flag');
  const block = rules.find((r) => r.name === 'ui-block');
  assert.ok(flag && block, JSON.stringify(rules));
  assert.deepEqual([flag.tenant, flag.kind, flag.pattern, flag.action, flag.scope], ['acme', 'keyword', 'Confidential', 'flag', 'output']);
  assert.deepEqual([block.tenant, block.kind, block.pattern, block.action, block.scope], [null, 'pattern', 'password\\s*[:=]', 'block', 'input']);
  await shoot('rules-flow');

  // Delete: the confirmation names the rule and what it matched; cancel keeps it.
  await rowOf('ui-block').locator('[data-action="delete"]').click();
  const dlg = page.locator('dialog.dialog[open]');
  assert.match(await dlg.textContent(), /ui-block/);
  assert.match(await dlg.textContent(), /password\\s\*\[:=\]/);
  assert.match(await dlg.textContent(), /all tenants/);
  await dlg.locator('button', { hasText: 'Cancel' }).click();
  await dlg.waitFor({ state: 'detached' });
  assert.ok((await apiGet('rules')).data.some((r) => r.id === block.id), 'cancel kept it');
  for (const name of ['ui-block', 'ui-flag']) {
    await rowOf(name).locator('[data-action="delete"]').click();
    await page.locator('dialog.dialog[open] button', { hasText: 'Delete' }).click();
    await rowOf(name).waitFor({ state: 'detached' });
  }
  const left = (await apiGet('rules')).data;
  assert.ok(!left.some((r) => r.id === block.id || r.id === flag.id), JSON.stringify(left));
});

test('traffic with the new key follows the route', { timeout: 30000 }, async () => {
  assert.ok(state.key, 'the key test ran');
  // A new key reaches each responder at its next configuration poll (config.poll_ms, 250):
  // wait on /v1/models, which neither goes upstream nor counts as usage.
  const live = Date.now() + 5000;
  let models;
  do {
    models = await fetch(`${BASE}/v1/models`, { headers: { Authorization: `Bearer ${state.key}` } });
    await models.arrayBuffer();
    if (models.status === 200) break;
    await new Promise((r) => setTimeout(r, 100));
  } while (Date.now() < live);
  assert.equal(models.status, 200, 'the new key works within 5 s');
  await new Promise((r) => setTimeout(r, 600));   // > 2 x config.poll_ms: every responder has it
  const before = (await fakeRequests(ENV.fake_url)) + (await fakeRequests(ENV.fake2_url));
  const codes = [];
  for (let i = 0; i < 30; i++) {
    const r = await fetch(`${BASE}/v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${state.key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: `hello ${i}` }] }),
    });
    codes.push(r.status);
    await r.arrayBuffer();
  }
  assert.deepEqual([...new Set(codes)], [200]);
  const afterN = (await fakeRequests(ENV.fake_url)) + (await fakeRequests(ENV.fake2_url));
  assert.equal(afterN - before, 30, 'the stand-ins got the 30 requests');
  // The usage writer batches; wait until the daily aggregates have all 30.
  const deadline = Date.now() + 10000;
  let u;
  do {
    u = await apiGet(`tenant/usage?group_by=key`);
    if (u.totals.requests >= 30) break;
    await new Promise((r) => setTimeout(r, 200));
  } while (Date.now() < deadline);
  assert.equal(u.totals.requests, 30, JSON.stringify(u));
  state.usage = u.totals;
});

test('R-ADM-3: usage charts by model and by key after the traffic', { timeout: 30000 }, async () => {
  assert.ok(state.usage, 'the traffic test ran');
  await tab('usage');
  await page.waitForSelector('#usage-requests svg.chart rect.bar');
  const stat = async (k) => (await page.textContent(`.stat[data-stat="${k}"] .stat-value`)).replace(/,/g, '');
  assert.equal(await stat('requests'), '30');
  assert.equal(await stat('total_tokens'), String(state.usage.total_tokens));
  const sumBars = (id) => page.$$eval(`#${id} rect.bar`, (rs) => rs.reduce((a, r) => a + Number(r.dataset.value), 0));
  assert.equal(await sumBars('usage-requests'), 30, 'request bars add up to the total');
  assert.equal(await sumBars('usage-tokens'), state.usage.total_tokens, 'token bars add up to the total');
  assert.match(await page.textContent('#usage-out .legend'), /\bm\b/);
  await shoot('usage-flow');

  await page.selectOption('#usage-form [name="group"]', 'key');
  await page.waitForSelector('#usage-out[data-group="key"] #usage-requests rect.bar');
  assert.match(await page.textContent('#usage-out .legend'), /ui-key · oper/);
  assert.equal(await sumBars('usage-requests'), 30);

  // An empty range draws an empty chart, not an error.
  await page.fill('#usage-form [name="from"]', '2020-01-01');
  await page.fill('#usage-form [name="to"]', '2020-01-07');
  await page.click('#usage-form button[type="submit"]');
  await page.waitForSelector('#usage-out[data-from="2020-01-01"] .chart-empty');
  assert.equal(await stat('requests'), '0');
  await page.click('#usage-form [data-days="30"]');
  await page.waitForSelector('#usage-out:not([data-from="2020-01-01"]) #usage-requests rect.bar');

  // The keys view shows the same use against the key's limits.
  await tab('keys');
  // The quota counters (issue 16) also count what the usage events do not; at least the 30.
  const used = (await apiGet('tenant/api-keys')).data.find((x) => x.name === 'ui-key').today?.requests ?? 30;
  assert.ok(used >= 30, `today: ${used}`);
  assert.match(await page.locator('#key-list tr', { hasText: 'ui-key' }).textContent(), new RegExp(`${used} / 1,000`));
  await shoot('keys-flow');
});

test('issue 12: the Live tab shows the traffic per model and refreshes every 5 s', { timeout: 30000 }, async () => {
  assert.ok(state.usage, 'the traffic test ran');
  const labels = await page.$$eval('#tabs a', (as) => as.map((a) => a.textContent));
  assert.ok(labels.includes('Live'), `tabs: ${labels.join(', ')}`);
  await tab('live');
  // The 30 requests of the traffic test, from the same shared state the API reads.
  const live = await apiGet('live');
  const m = live.models.find((r) => r.model === 'm');
  assert.ok(m && m.requests >= 30, JSON.stringify(live.models));
  const row = page.locator('#live-models tr.live-model').filter({ has: page.locator('td:first-child code', { hasText: /^m$/ }) });
  await row.waitFor();
  const cells = await row.locator('td').allTextContents();
  assert.equal(Number(cells[1].replace(/,/g, '')), m.requests, cells.join(' | '));
  assert.match(cells[6], /ms$/, `p50 latency shown: ${cells.join(' | ')}`);
  assert.ok(await page.locator('#live-replicas tbody tr').count() >= 2, 'a row per replica');
  // The view asks again every 5 s without a click.
  const before = await page.$eval('#live-out', (e) => Number(e.dataset.refreshes));
  await page.waitForFunction((n) => Number(document.querySelector('#live-out').dataset.refreshes) > n, before, { timeout: 8000 });
  await shoot('live-flow');
});

test('R-ADM-3: alerts and audit tables', { timeout: T }, async () => {
  assert.ok(state.epDown, 'the health test ran');
  await tab('alerts');
  const row = page.locator('#alert-table tr', { hasText: 'ep-down' });
  await row.waitFor();
  assert.match(await row.textContent(), /active/);
  const active = (await apiGet('alerts?status=ACTIVE')).data.filter((a) => a.endpoint_id === state.epDown.id);
  assert.equal(active.length, 1, JSON.stringify(active));
  await shoot('alerts-flow');
  await row.locator('button', { hasText: 'Resolve' }).click();
  await page.waitForFunction(() => !document.querySelector('#alert-table tbody tr'));
  assert.equal((await apiGet(`alerts/${active[0].id}`)).status, 'RECOVERED');
  await tab('audit');
  await page.waitForSelector('#audit-table table');
  const rows = await page.$$eval('#audit-table tbody tr', (trs) => trs.map((t) => t.textContent));
  assert.ok(rows.some((r) => /create/.test(r) && /key/.test(r)), rows.join('\n'));
  assert.ok(!rows.join('').includes(state.key), 'the audit shows no key');
  await page.selectOption('.toolbar select', 'route');
  await page.waitForFunction(() => [...document.querySelectorAll('#audit-table tbody tr')].every((t) => /route/.test(t.textContent)));
  await shoot('audit-flow');
});

// ---- issue 16: every object edited from the page, risky edits confirmed with a diff ----

test('issue 16: an endpoint and a replica edited from their card; a bad value is refused in the page', { timeout: 30000 }, async () => {
  await tab('endpoints');
  const card = page.locator('section.endpoint[data-endpoint="ep-a"]');
  const before = await apiGet(`endpoints/${state.epA.id}`);
  await card.locator('.card-actions [data-action="edit"]').click();
  // Checked before sending: a negative timeout never reaches the API.
  await editSubmit({ connect_timeout_ms: '-5' });
  await page.locator('dialog.edit-dialog[open] .form-error:not([hidden])', { hasText: 'Connect timeout' }).waitFor();
  await axeCheck('the edit dialog');
  await page.screenshot({ path: path.join(OUT, 'edit-dialog-1440.png') });
  assert.equal((await apiGet(`endpoints/${state.epA.id}`)).connect_timeout_ms, before.connect_timeout_ms);
  await editSubmit({ connect_timeout_ms: String(before.connect_timeout_ms), first_byte_timeout_ms: '45000', affinity: !before.affinity,
    upstream_auth: 'Bearer ui-upstream-secret', wake_url: '' });
  await dialogGone();
  await card.locator('dd', { hasText: 'set' }).first().waitFor();
  const ep = await apiGet(`endpoints/${state.epA.id}`);
  assert.deepEqual([ep.first_byte_timeout_ms, ep.affinity, ep.upstream_auth_set, ep.algorithm, ep.stream_guard],
    [45000, !before.affinity, true, before.algorithm, before.stream_guard]);
  assert.ok(!(await page.content()).includes('ui-upstream-secret'), 'the credential is not shown again');

  // The replica: weight, max concurrency and state in the same dialog.
  const rep = (await apiGet(`endpoints/${state.epA.id}/replicas`)).data[0];
  await card.locator('[data-action="edit-replica"]').click();
  await editSubmit({ weight: '3', max_concurrency: '4' });
  await dialogGone();
  await card.locator('td.num', { hasText: /^3$/ }).waitFor();
  const r2 = await apiGet(`endpoints/${state.epA.id}/replicas/${rep.id}`);
  assert.deepEqual([r2.weight, r2.max_concurrency, r2.state], [3, 4, 'running']);
});

test('issue 16: a route edited; weight 0 on the last route shows old → new and asks first', { timeout: 30000 }, async () => {
  await tab('routes');
  const rowB = () => page.locator('.route-card[data-model="m"] tr', { hasText: 'ep-b' });
  await rowB().locator('[data-action="edit"]').click();
  await editSubmit({ target_model: 'up-m', priority: '1' });
  await dialogGone();
  await page.locator('.route-card[data-model="m"] tr', { hasText: 'up-m' }).waitFor();
  let r = (await apiGet('model-routes?model=m')).data.find((x) => x.endpoint === 'ep-b');
  assert.deepEqual([r.target_model, r.priority, r.weight], ['up-m', 1, 20]);
  await rowB().locator('[data-action="edit"]').click();
  await editSubmit({ target_model: '', priority: '0' });
  await dialogGone();
  await page.locator('.route-card[data-model="m"] tr', { hasText: 'ep-b' }).filter({ hasNotText: 'up-m' }).waitFor();

  // A model with one route: weight 0 asks, Cancel keeps it, Apply stores it.
  await openPanel('new-route');
  await page.fill('#route-form [name="model"]', 'solo');
  await page.selectOption('#route-form [name="endpoint_id"]', { label: 'ep-a (default)' });
  await page.fill('#route-form [name="weight"]', '10');
  await page.click('#route-form button[type="submit"]');
  const solo = page.locator('.route-card[data-model="solo"] tbody tr');
  await solo.waitFor();
  await solo.locator('[data-action="edit"]').click();
  await editSubmit({ weight: '0' });
  const confirm = page.locator('dialog.confirm-dialog[open]');
  await confirm.waitFor();
  assert.match(await confirm.textContent(), /last route/);
  assert.deepEqual(await confirm.locator('tr.diff-row td').allTextContents(), ['Weight', '10', '0']);
  await axeCheck('the confirm-with-diff dialog');
  await page.screenshot({ path: path.join(OUT, 'confirm-diff-1440.png') });
  await confirm.locator('[data-action="cancel"]').click();
  await page.locator('dialog.edit-dialog[open] [data-action="cancel"]').click();
  await dialogGone();
  assert.equal((await apiGet('model-routes?model=solo')).data[0].weight, 10, 'cancel sent nothing');
  await solo.locator('[data-action="edit"]').click();
  await editSubmit({ weight: '0' });
  await page.locator('dialog.confirm-dialog[open] [data-action="confirm"]').click();
  await dialogGone();
  await page.locator('.route-card[data-model="solo"] .legend', { hasText: 'standby' }).waitFor();
  assert.equal((await apiGet('model-routes?model=solo')).data[0].weight, 0);
  // Delete: the diff names what goes.
  await solo.locator('[data-action="delete"]').click();
  const del = page.locator('dialog.confirm-dialog[open]');
  assert.match(await del.textContent(), /solo/);
  await del.locator('[data-action="confirm"]').click();
  await page.locator('.route-card[data-model="solo"]').waitFor({ state: 'detached' });
  assert.equal((await apiGet('model-routes?model=solo')).data.length, 0);
});

test('issue 16: a key edited (name, limits, auto routing), its counters, Revoke in view at 1440 px and confirmed', { timeout: 30000 }, async () => {
  await tab('keys');
  await openPanel('new-key');
  await page.fill('#key-form [name="name"]', 'ui-edit');
  await page.click('#key-form button[type="submit"]');
  await takeSecret();
  const row = () => page.locator('#key-list tbody tr', { hasText: /ui-edit/ });
  await row().waitFor();
  const k = (await apiGet('tenant/api-keys')).data.find((x) => x.name === 'ui-edit');
  await row().locator('[data-action="edit"]').click();
  await editSubmit({ name: 'ui-edited', qps_limit: '7', tpm_limit: '9000', auto_routing_enabled: 'true', auto_routing_strategy: 'cost' });
  await dialogGone();
  await page.locator('#key-list tbody tr', { hasText: 'ui-edited' }).waitFor();
  const k2 = await apiGet(`tenant/api-keys/${k.id}`);
  assert.deepEqual([k2.name, k2.qps_limit, k2.tpm_limit], ['ui-edited', 7, 9000]);
  const pol = await apiGet(`tenant/api-keys/${k.id}/routing-policy`);
  assert.deepEqual([pol.auto_routing_enabled, pol.auto_routing_strategy], [true, 'cost']);

  // Today's counters are the API's (quota counters) when it has them.
  const ui = (await apiGet('tenant/api-keys')).data.find((x) => x.name === 'ui-key');
  if (ui.today) {
    assert.equal(await page.getAttribute('#key-list', 'data-counters'), 'quota');
    assert.match(await page.locator('#key-list tbody tr', { hasText: 'ui-key' }).textContent(),
      new RegExp(`${ui.today.requests} / 1,000`));
  }

  // Revoke is in view (not clipped) at 1440 px, on top of everything at its centre.
  await page.setViewportSize({ width: 1440, height: 900 });
  const revoke = page.locator('#key-list tbody tr', { hasText: 'ui-edited' }).locator('[data-action="revoke"]');
  const box = await revoke.boundingBox();
  assert.ok(box && box.x >= 0 && box.x + box.width <= 1440, `Revoke at ${JSON.stringify(box)}`);
  const hit = await revoke.evaluate((b) => {
    const r = b.getBoundingClientRect();
    const wrap = b.closest('.table-wrap').getBoundingClientRect();
    const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return { onTop: top === b || b.contains(top), inside: r.left >= wrap.left && r.right <= wrap.right + 0.5 };
  });
  assert.deepEqual(hit, { onTop: true, inside: true });
  await revoke.click();
  const dlg = page.locator('dialog.confirm-dialog[open]');
  assert.deepEqual((await dlg.locator('tr.diff-row').first().locator('td').allTextContents()), ['status', 'active', 'revoked']);
  await dlg.locator('[data-action="confirm"]').click();
  await page.locator('#key-list tbody tr.row-muted', { hasText: 'ui-edited' }).waitFor();
  assert.equal((await apiGet(`tenant/api-keys/${k.id}`)).revoked, true);
});

test('issue 16: users (role, password reset, key ceiling) and tenants edited; a tenant deleted after its diff', { timeout: 30000 }, async () => {
  await tab('users');
  await openPanel('new-user');
  await page.fill('#user-form [name="name"]', 'ui-adm');
  await page.selectOption('#user-form [name="tenant"]', 'acme');
  await page.selectOption('#user-form [name="role"]', 'member');
  await page.fill('#user-form [name="password"]', 'first-pass-123');
  await page.click('#user-form button[type="submit"]');
  const urow = page.locator('#user-list tr.user-row', { hasText: 'ui-adm' });
  await urow.waitFor();
  const u = (await apiGet('users')).data.find((x) => x.name === 'ui-adm');
  await urow.locator('[data-action="edit"]').click();
  state.admPassword = 'ui-second-pass-456';
  await editSubmit({ role: 'admin', password: state.admPassword, ceil_qps_limit: '100' });
  await dialogGone();
  await urow.filter({ hasText: 'admin' }).waitFor();
  const u2 = await apiGet(`users/${u.id}`);
  assert.deepEqual([u2.role, u2.key_ceiling.qps_limit], ['admin', 100]);
  const login = await fetch(`${BASE}/api/v1/auth/login`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: 'ui-adm', password: state.admPassword }) });
  assert.equal(login.status, 200, 'the reset password signs in');

  const trow = page.locator('#tenant-list tr', { hasText: XSS });
  await trow.locator('[data-action="edit"]').click();
  await editSubmit({ weight: '5000' });
  await page.locator('dialog.edit-dialog[open] .form-error:not([hidden])', { hasText: 'at most 1000' }).waitFor();
  await editSubmit({ weight: '5' });
  await dialogGone();
  let t = (await apiGet('tenants')).data.find((x) => x.name === XSS);
  assert.equal(t.weight, 5);
  await page.locator('#tenant-list tr', { hasText: XSS }).locator('[data-action="delete"]').click();
  const dlg = page.locator('dialog.confirm-dialog[open]');
  assert.equal(await dlg.locator('tr.diff-row td').first().textContent(), 'tenant');
  assert.equal(await page.locator('img[src="x"]').count(), 0);
  await dlg.locator('[data-action="confirm"]').click();
  await page.locator('#tenant-list tr', { hasText: XSS }).waitFor({ state: 'detached' });
  t = (await apiGet('tenants')).data.find((x) => x.name === XSS);
  assert.equal(t, undefined);
});

test('issue 16: a model policy edited in the shared dialog (tools, vision, context, description)', { timeout: 30000 }, async () => {
  await tab('models');
  await openPanel('new-policy');
  await page.fill('#policy-form [name="model"]', 'ui-pol');
  await page.click('#policy-form button[type="submit"]');
  const row = page.locator('#policy-list tbody tr').filter({ has: page.locator('.policy-model[data-model="ui-pol"]') });
  await row.waitFor();
  await row.locator('[data-action="edit"]').click();
  await editSubmit({ quality_score: '101' });
  await page.locator('dialog.edit-dialog[open] .form-error:not([hidden])', { hasText: 'Quality' }).waitFor();
  await editSubmit({ quality_score: '80', supports_tools: true, supports_vision: true, max_context: '8192', description: 'a <b>test</b> model',
    price_output_per_1k: '0.5', purpose: 'chat' });
  await dialogGone();
  await row.filter({ hasText: 'a <b>test</b> model' }).waitFor();
  const p = await apiGet('models/routing-policies/ui-pol');
  assert.deepEqual([p.quality_score, p.supports_tools, p.supports_vision, p.max_context, p.description, p.price_output_per_1k, p.purpose],
    [80, true, true, 8192, 'a <b>test</b> model', 0.5, 'chat']);
  state.policy = p;
});

test('issue 16: the Nodes tab: create, edit status, metrics URL and a pushed temperature, delete', { timeout: 30000 }, async () => {
  await tab('nodes');
  await page.click('#new-node');
  await editSubmit({ name: 'gpu-ui', metrics_url: 'http://127.0.0.1:9/metrics' });
  await dialogGone();
  const row = page.locator('#node-list tr.node-row', { hasText: 'gpu-ui' });
  await row.waitFor();
  const n = (await apiGet('nodes')).data.find((x) => x.name === 'gpu-ui');
  assert.deepEqual([n.status, n.metrics_url], ['online', 'http://127.0.0.1:9/metrics']);
  // A replica of ep-a placed on it from the replica's Edit (the node names are offered).
  await tab('endpoints');
  const card = page.locator('section.endpoint[data-endpoint="ep-a"]');
  await card.locator('[data-action="edit-replica"]').click();
  assert.deepEqual(await page.$$eval('dialog.edit-dialog[open] datalist option', (os) => os.map((o) => o.value)), ['gpu-ui']);
  await editSubmit({ node: 'gpu-ui' });
  await dialogGone();
  const rep = (await apiGet(`endpoints/${state.epA.id}/replicas`)).data[0];
  assert.equal(rep.node, 'gpu-ui');
  await tab('nodes');
  await row.locator('[data-action="edit"]').click();
  await editSubmit({ status: 'offline', gpu_temperature: '71.5' });
  // A replica is on it: the page shows the change and asks first.
  const confirm = page.locator('dialog.confirm-dialog[open]');
  assert.match(await confirm.textContent(), /1 replica/);
  assert.deepEqual(await confirm.locator('tr.diff-row').first().locator('td').allTextContents(), ['Status', 'online', 'offline']);
  await confirm.locator('[data-action="confirm"]').click();
  await dialogGone();
  await row.locator('.node-temp', { hasText: '71.5' }).waitFor();
  const n2 = await apiGet(`nodes/${n.id}`);
  assert.deepEqual([n2.status, n2.gpu_temperature], ['offline', 71.5]);
  await shoot('nodes-flow');
  await row.locator('[data-action="delete"]').click();
  await page.locator('dialog.confirm-dialog[open] [data-action="confirm"]').click();
  await row.waitFor({ state: 'detached' });
  assert.ok(!(await apiGet('nodes')).data.some((x) => x.id === n.id));
  assert.equal((await apiGet(`endpoints/${state.epA.id}/replicas`)).data[0].node, null, 'the replica lost its node');
});

test('issue 16: the Settings tab lists the schema and checks a value against it before sending', { timeout: 30000 }, async () => {
  await tab('settings');
  const schema = await apiTry('system/settings-schema');
  if (schema.status !== 200) {
    await page.locator('#settings-unavailable').waitFor();
    return;
  }
  const rows = await page.locator('#settings-list tr.setting-row').count();
  assert.equal(rows, schema.body.data.length, 'a row per setting');
  const row = page.locator('#settings-list tr[data-setting="auto_routing_weight_price"]');
  const def = schema.body.data.find((x) => x.name === 'auto_routing_weight_price');
  assert.match(await row.textContent(), new RegExp(`${def.min} … ${def.max}`));
  assert.equal(await row.locator('.setting-default').textContent(), String(def.default));
  await row.locator('[data-action="edit"]').click();
  await editSubmit({ value: String(def.max + 1) });
  await page.locator('dialog.edit-dialog[open] .form-error:not([hidden])', { hasText: `at most ${def.max}` }).waitFor();
  assert.equal((await apiGet('system/inference-config')).auto_routing_weight_price, def.value, 'nothing sent');
  await editSubmit({ value: '41' });
  await dialogGone();
  await row.locator('.setting-value', { hasText: /^41$/ }).waitFor();
  assert.equal((await apiGet('system/inference-config')).auto_routing_weight_price, 41);
  // A bool and an enum the same way.
  await page.locator('#settings-list tr[data-setting="builtin_injection_rules"] [data-action="edit"]').click();
  await editSubmit({ value: true });
  await dialogGone();
  await page.locator('#settings-list tr[data-setting="response_model"] [data-action="edit"]').click();
  await editSubmit({ value: 'upstream' });
  await dialogGone();
  await page.locator('#settings-list tr[data-setting="response_model"] .setting-value', { hasText: 'upstream' }).waitFor();
  const cfg = await apiGet('system/inference-config');
  assert.deepEqual([cfg.builtin_injection_rules, cfg.response_model], [true, 'upstream']);
  await apiSend('PATCH', 'system/inference-config', { builtin_injection_rules: null, response_model: null, auto_routing_weight_price: null });
});

// ---- issue 18: semantic routing rules, policy tenants and labels, key labels, route mirrors ----

test('issue 18: the Rules tab: a semantic routing rule added in the shared dialog, a bad pattern refused, deleted after its diff', { timeout: 30000 }, async () => {
  await tab('rules');
  const card = page.locator('#semrule-list');
  assert.equal(await card.locator('h2').textContent(), 'Semantic routing rules');
  const rowOf = (name) => card.locator('tr.semrule-row').filter({ has: page.locator('.semrule-name', { hasText: new RegExp(`^${name}$`) }) });
  // A pattern that does not compile: the API's refusal is shown in the dialog, nothing stored.
  await page.click('#new-semrule');
  await page.locator('dialog.edit-dialog[open]').waitFor();
  await axeCheck('the new semantic rule dialog');
  await page.screenshot({ path: path.join(OUT, 'semrule-dialog-1440.png') });
  refusals++;
  await editSubmit({ name: 'ui-sem-bad', pattern: '(unclosed', action: 'force', model: 'ui-pol' });
  await page.locator('dialog.edit-dialog[open] .form-error:not([hidden])', { hasText: 'pattern' }).waitFor();
  // The same dialog, fixed: a rule of tenant acme that forbids ui-pol for Python, with a label.
  await editSubmit({ name: 'ui-sem', pattern: '(?i)\\bpython\\b', tenant: 'acme', action: 'forbid', model: 'ui-pol', label: 'eu-only' });
  await dialogGone();
  await rowOf('ui-sem').waitFor();
  let rules = (await apiGet('semantic-rules')).data;
  assert.ok(!rules.some((r) => r.name === 'ui-sem-bad'), 'the refused rule was stored');
  const r = rules.find((x) => x.name === 'ui-sem');
  assert.ok(r, JSON.stringify(rules));
  assert.deepEqual([r.tenant, r.pattern, r.action, r.model, r.label], ['acme', '(?i)\\bpython\\b', 'forbid', 'ui-pol', 'eu-only']);
  assert.match(await rowOf('ui-sem').textContent(), /acme/);
  assert.match(await rowOf('ui-sem').locator('.semrule-action').textContent(), /forbid ui-pol/);
  assert.equal(await rowOf('ui-sem').locator('.semrule-label').textContent(), 'eu-only');
  // A global force rule (the picker's default: all tenants).
  await page.click('#new-semrule');
  await editSubmit({ name: 'ui-sem-all', pattern: 'invoice', model: 'm' });
  await dialogGone();
  await rowOf('ui-sem-all').waitFor();
  rules = (await apiGet('semantic-rules')).data;
  const all = rules.find((x) => x.name === 'ui-sem-all');
  assert.deepEqual([all.tenant, all.action, all.model, all.label], [null, 'force', 'm', null]);
  assert.match(await rowOf('ui-sem-all').textContent(), /all tenants/);
  await axeCheck('semantic routing rules');
  await shoot('semrules-flow');

  // Delete: the diff names what goes; Cancel keeps it, Delete removes it.
  await rowOf('ui-sem').locator('[data-action="delete"]').click();
  const dlg = page.locator('dialog.confirm-dialog[open]');
  assert.match(await dlg.textContent(), /ui-sem/);
  const diff = await dlg.locator('tr.diff-row').evaluateAll((trs) => trs.map((t) => [...t.cells].map((c) => c.textContent)));
  assert.deepEqual(diff.slice(0, 2), [['Name', 'ui-sem', '–'], ['Pattern (PCRE2)', '(?i)\\bpython\\b', '–']]);
  assert.ok(diff.some((x) => x[0] === 'Action' && x[1] === 'forbid'), JSON.stringify(diff));
  await axeCheck('the semantic rule delete confirmation');
  await dlg.locator('[data-action="cancel"]').click();
  await dlg.waitFor({ state: 'detached' });
  assert.ok((await apiGet('semantic-rules')).data.some((x) => x.id === r.id), 'cancel kept it');
  for (const name of ['ui-sem', 'ui-sem-all']) {
    await rowOf(name).locator('[data-action="delete"]').click();
    await page.locator('dialog.confirm-dialog[open] [data-action="confirm"]').click();
    await rowOf(name).waitFor({ state: 'detached' });
  }
  rules = (await apiGet('semantic-rules')).data;
  assert.ok(!rules.some((x) => x.id === r.id || x.id === all.id), JSON.stringify(rules));
});

test('issue 18: a model policy\u2019s tenants and labels and a key\u2019s required labels, edited in the shared dialog', { timeout: 30000 }, async () => {
  assert.ok(state.policy, 'the policy test ran');
  await tab('models');
  const row = () => page.locator('#policy-list tbody tr').filter({ has: page.locator('.policy-model[data-model="ui-pol"]') });
  await row().locator('[data-action="edit"]').click();
  assert.equal(await page.inputValue('dialog.edit-dialog[open] [name="tenants"]'), '');
  await editSubmit({ tenants: 'acme, default', labels: 'eu-only,pii-ok' });
  await dialogGone();
  await row().locator('.policy-labels .chip', { hasText: 'pii-ok' }).waitFor();
  let p = await apiGet('models/routing-policies/ui-pol');
  assert.deepEqual([p.tenants, p.labels], ['acme,default', 'eu-only,pii-ok']);
  assert.deepEqual(await row().locator('.policy-tenants .chip').allTextContents(), ['acme', 'default']);
  assert.deepEqual(await row().locator('.policy-labels .chip').allTextContents(), ['eu-only', 'pii-ok']);
  // The other fields stayed what they were.
  assert.deepEqual([p.quality_score, p.max_context, p.description], [80, 8192, 'a <b>test</b> model']);
  // A tenant that does not exist is the API's refusal, shown in the dialog.
  await row().locator('[data-action="edit"]').click();
  refusals++;
  await editSubmit({ tenants: 'acme,no-such-tenant' });
  await page.locator('dialog.edit-dialog[open] .form-error:not([hidden])', { hasText: 'tenants' }).waitFor();
  await editSubmit({ tenants: '' });
  await dialogGone();
  await row().locator('.policy-tenants', { hasText: 'every tenant' }).waitFor();
  p = await apiGet('models/routing-policies/ui-pol');
  assert.deepEqual([p.tenants, p.labels], [null, 'eu-only,pii-ok']);
  await axeCheck('models with labels');

  await tab('keys');
  const krow = () => page.locator('#key-list tbody tr', { hasText: 'ui-key' });
  const k = (await apiGet('tenant/api-keys')).data.find((x) => x.name === 'ui-key');
  await krow().locator('[data-action="edit"]').click();
  refusals++;
  await editSubmit({ require_labels: 'bad label' });
  await page.locator('dialog.edit-dialog[open] .form-error:not([hidden])', { hasText: 'require_labels' }).waitFor();
  await editSubmit({ require_labels: 'eu-only, pii-ok' });
  await dialogGone();
  await krow().locator('.key-labels', { hasText: 'eu-only, pii-ok' }).waitFor();
  assert.equal((await apiGet(`tenant/api-keys/${k.id}`)).require_labels, 'eu-only,pii-ok');
  await axeCheck('keys with required labels');
  await shoot('keys-labels');
  // Cleared again: empty sends null.
  await krow().locator('[data-action="edit"]').click();
  assert.equal(await page.inputValue('dialog.edit-dialog[open] [name="require_labels"]'), 'eu-only,pii-ok');
  await editSubmit({ require_labels: '' });
  await dialogGone();
  await krow().locator('.key-labels').waitFor({ state: 'detached' });
  assert.equal((await apiGet(`tenant/api-keys/${k.id}`)).require_labels, null);
});

test('issue 18: a route\u2019s mirror and share, from the new-route form and the shared dialog, shown beside the split', { timeout: 30000 }, async () => {
  await tab('routes');
  await openPanel('new-route');
  await page.fill('#route-form [name="model"]', 'shd-m');
  await page.selectOption('#route-form [name="endpoint_id"]', { label: 'ep-a (default)' });
  await page.selectOption('#route-form [name="mirror"]', 'ep-b');
  await page.fill('#route-form [name="mirror_percent"]', '25');
  await page.click('#route-form button[type="submit"]');
  const card = page.locator('.route-card[data-model="shd-m"]');
  const mirror = card.locator('.legend .route-mirror');
  await mirror.waitFor();
  assert.equal(await mirror.locator('.mirror-text').textContent(), 'mirror \u2192 ep-b 25 %');
  const route = async () => (await apiGet('model-routes?model=shd-m')).data[0];
  let r = await route();
  assert.deepEqual([r.endpoint, r.mirror, r.mirror_percent], ['ep-a', 'ep-b', 25]);

  // The dialog: the share checked in the page (0–100), then changed; the endpoint kept.
  const row = card.locator('tbody tr');
  await row.locator('[data-action="edit"]').click();
  assert.equal(await page.inputValue('dialog.edit-dialog[open] [name="mirror"]'), 'ep-b');
  const offered = await page.$$eval('dialog.edit-dialog[open] [name="mirror"] option', (os) => os.map((o) => o.value));
  assert.ok(!offered.includes('ep-a'), `a route may not mirror to its own endpoint: ${offered}`);
  await editSubmit({ mirror_percent: '101' });
  await page.locator('dialog.edit-dialog[open] .form-error:not([hidden])', { hasText: 'at most 100' }).waitFor();
  await editSubmit({ mirror_percent: '60' });
  await dialogGone();
  await mirror.filter({ hasText: 'mirror \u2192 ep-b 60 %' }).waitFor();
  r = await route();
  assert.deepEqual([r.mirror, r.mirror_percent], ['ep-b', 60]);
  // No mirror.
  await row.locator('[data-action="edit"]').click();
  await editSubmit({ mirror: '' });
  await dialogGone();
  await mirror.waitFor({ state: 'detached' });
  r = await route();
  assert.equal(r.mirror, null);
  // A mirror again, with the share the dialog shows sent along (not the API's 100 % default).
  await row.locator('[data-action="edit"]').click();
  await editSubmit({ mirror: 'ep-b', mirror_percent: '25' });
  await dialogGone();
  await mirror.filter({ hasText: 'mirror \u2192 ep-b 25 %' }).waitFor();
  r = await route();
  assert.deepEqual([r.mirror, r.mirror_percent], ['ep-b', 25]);
  assert.equal(await row.locator('.mirror-text').textContent(), 'mirror \u2192 ep-b 25 %');
  await axeCheck('routes with a mirror');
  await card.scrollIntoViewIfNeeded();
  await card.screenshot({ path: path.join(OUT, 'routes-mirror-1440.png') });
});

test('issue 18: the Settings tab has a row for every semantic_* setting of the schema', { timeout: T }, async () => {
  const schema = await apiTry('system/settings-schema');
  assert.equal(schema.status, 200);
  const names = schema.body.data.map((s) => s.name).filter((n) => n.startsWith('semantic_'));
  assert.ok(names.includes('semantic_threshold') && names.includes('semantic_weight_bm25'), JSON.stringify(names));
  await tab('settings');
  for (const n of names) {
    const def = schema.body.data.find((s) => s.name === n);
    const row = page.locator(`#settings-list tr[data-setting="${n}"]`);
    assert.equal(await row.count(), 1, n);
    assert.equal(await row.locator('.setting-default').textContent(), def.default === '' ? '(empty)' : String(def.default), n);
  }
});

test('issue 16: the Requests tab: newest first, filtered, a row opens its details', { timeout: 30000 }, async () => {
  await tab('requests');
  const api = await apiTry('requests?limit=5');
  if (api.status !== 200) {
    await page.locator('#requests-unavailable').waitFor();
    return;
  }
  await page.waitForSelector('#request-list[data-rows]');
  const ids = await page.$$eval('#request-list tr.request-row', (trs) => trs.map((t) => Number(t.dataset.id)));
  assert.ok(ids.length >= 5, `rows: ${ids.length}`);
  assert.deepEqual(ids.slice(0, 5), api.body.data.map((r) => r.id), 'newest first, as the API');
  assert.deepEqual([...ids].sort((a, b) => b - a), ids);
  // Keyset pages: 25 a page, Older follows the API's next cursor, Newer goes back.
  await page.selectOption('#request-filter [name="limit"]', '25');
  await page.waitForSelector('#request-list[data-rows="25"]:not([aria-busy])');
  const p1 = await apiGet('requests?limit=25');
  assert.ok(p1.next, 'more than 25 requests');
  await page.click('#request-list [data-action="older"]');
  await page.waitForSelector('#request-list[data-page="1"]:not([aria-busy])');
  const p2 = await apiGet(`requests?limit=25&before=${p1.next}`);
  assert.deepEqual(await page.$$eval('#request-list tr.request-row', (trs) => trs.map((t) => Number(t.dataset.id))), p2.data.map((r) => r.id));
  await page.click('#request-list [data-action="newer"]');
  await page.waitForSelector('#request-list[data-page="0"]:not([aria-busy])');
  assert.deepEqual(await page.$$eval('#request-list tr.request-row', (trs) => trs.map((t) => Number(t.dataset.id))), p1.data.map((r) => r.id));
  await page.selectOption('#request-filter [name="limit"]', '50');
  await page.selectOption('#request-filter [name="status"]', '2xx');
  await page.fill('#request-filter [name="model"]', 'm');
  await page.click('#request-filter button[type="submit"]');
  await page.waitForSelector('#request-list[data-query="status=2xx&model=m&limit=50"]:not([aria-busy])');
  const filtered = (await apiGet('requests?status=2xx&model=m&limit=50')).data;
  assert.equal(Number(await page.getAttribute('#request-list', 'data-rows')), filtered.length);
  const first = page.locator('#request-list tr.request-row').first();
  await first.locator('[data-action="details"]').click();
  const dlg = page.locator('dialog.request-detail[open]');
  await dlg.waitFor();
  assert.equal(await dlg.locator('.req-id').textContent(), filtered[0].request_id);
  for (const item of ['Routed model', 'Replica', 'TTFT', 'Latency', 'Retries', 'Affinity', 'Cache', 'Prompt tokens']) {
    assert.equal(await dlg.locator(`[data-item="${item}"]`).count(), 1, item);
  }
  await axeCheck('request details');
  await dlg.locator('[data-action="close"]').click();
  await dialogGone();
  // A click on the row itself opens the same details.
  await page.locator('#request-list tr.request-row').nth(1).locator('td').first().click();
  await page.locator('dialog.request-detail[open] .req-id', { hasText: filtered[1].request_id }).waitFor();
  await page.keyboard.press('Escape');
  await dialogGone();
});

test('issue 16: usage by endpoint with cost and latency percentiles; the table as CSV', { timeout: 30000 }, async () => {
  await tab('usage');
  await page.waitForSelector('#usage-requests svg.chart');
  if ((await apiTry('tenant/usage?group_by=endpoint')).status !== 200) return;   // the API part is not merged
  await page.selectOption('#usage-form [name="group"]', 'endpoint');
  await page.waitForSelector('#usage-out[data-group="endpoint"]');
  const api = await apiGet(`tenant/usage?group_by=endpoint&from=${await page.inputValue('#usage-form [name="from"]')}&to=${await page.inputValue('#usage-form [name="to"]')}`);
  assert.equal(await page.locator('#usage-out tr.usage-row').count(), api.data.length);
  if (api.data.length && api.data[0].cost !== undefined) {
    assert.match(await page.locator('#usage-out tr.usage-row .usage-cost').first().textContent(), new RegExp(api.data[0].currency));
  }
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#usage-csv')]);
  const file = await dl.path();
  const text = readFileSync(file, 'utf8');
  assert.match(dl.suggestedFilename(), /^usage-endpoint-.*\.csv$/);
  if (api.data.length && api.data[0].cost !== undefined) {
    const lines = text.trim().split('\n');
    assert.equal(lines.length, api.data.length + 1, text);
    assert.match(lines[0], /requests/);
  }
  // Cost from the model policy's prices per 1k tokens: the page shows the API's number.
  const set = await apiSend('PUT', 'models/routing-policies?name=m', { price_input_per_1k: 1, price_output_per_1k: 2 });
  assert.equal(set.status, 200, JSON.stringify(set.body));
  await page.selectOption('#usage-form [name="group"]', 'model');
  await page.waitForSelector('#usage-out[data-group="model"]');
  await page.click('#usage-form button[type="submit"]');
  const from = await page.inputValue('#usage-form [name="from"]');
  const to = await page.inputValue('#usage-form [name="to"]');
  const m = (await apiGet(`tenant/usage?group_by=model&from=${from}&to=${to}`)).data.find((r) => r.model === 'm');
  assert.ok(m.cost > 0, JSON.stringify(m));
  await page.locator('#usage-out tr.usage-row', { hasText: /^m/ }).locator('.usage-cost', { hasText: `${m.cost.toFixed(4)} ${m.currency}` }).waitFor();
  await apiSend('DELETE', 'models/routing-policies?name=m');
});

test('issue 16: audit rows name their object (target_label)', { timeout: T }, async () => {
  await tab('audit');
  await page.waitForSelector('#audit-table table');
  const api = (await apiGet('audit-log?limit=25')).data;
  const labels = await page.$$eval('#audit-table .audit-target', (xs) => xs.map((x) => x.textContent));
  if (api[0] && api[0].target_label !== undefined) {
    assert.deepEqual(labels, api.map((a) => a.target_label || `${a.object_type}${a.object_id ? ` #${a.object_id}` : ''}`));
    assert.ok(labels.some((l) => /^node gpu-ui/.test(l) || /^key /.test(l)), labels.join('\n'));
  } else {
    assert.equal(labels.length, api.length);
  }
});

test('issue 16: a failing endpoint shows its recovery badge, gone after a success', { timeout: 40000 }, async () => {
  const ep0 = await apiGet(`endpoints/${state.epA.id}`);
  if (!('failure_streak' in ep0)) return;   // the API part is not merged
  await apiSend('PATCH', 'system/inference-config', { recovery_hint_failures: 2 });
  const eps = (await apiGet('endpoints')).data;
  const epB = eps.find((e) => e.name === 'ep-b');
  // ep-b alone serves "rec-m"; its stand-in answers 500 for a while.
  await apiSend('POST', 'model-routes', { model: 'rec-m', endpoint_id: epB.id, weight: 1 });
  await fetch(`${ENV.fake2_url}/_fake/behavior`, { method: 'POST', body: 'status=500' });
  const call = async () => {
    const r = await fetch(`${BASE}/v1/chat/completions`, {
      method: 'POST', headers: { Authorization: `Bearer ${state.key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'rec-m', messages: [{ role: 'user', content: 'x' }] }),
    });
    await r.arrayBuffer();
    return r.status;
  };
  await new Promise((r) => setTimeout(r, 700));   // the new route reaches every responder
  let hinted = null;
  const deadline = Date.now() + 15000;
  try {
    while (Date.now() < deadline) {
      await call();
      const e = await apiGet(`endpoints/${epB.id}`);
      if (e.recovery_hint) { hinted = e; break; }
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await fetch(`${ENV.fake2_url}/_fake/behavior`, { method: 'POST', body: '' });
  }
  assert.ok(hinted, 'the API set recovery_hint');
  await tab('endpoints');
  const card = page.locator('section.endpoint[data-endpoint="ep-b"]');
  const b = card.locator('.recovery-badge');
  await b.waitFor();
  // The streak the card shows is the API's at its load: at least the one that set the hint.
  assert.ok(Number(await b.getAttribute('data-streak')) >= hinted.failure_streak, await b.getAttribute('data-streak'));
  if (hinted.last_error) assert.match(await card.locator('.recovery-note').textContent(), /last error/);
  await shoot('endpoints-recovery-flow');
  const until = Date.now() + 15000;
  let cleared = false;
  while (Date.now() < until) {
    await call();
    if (!(await apiGet(`endpoints/${epB.id}`)).recovery_hint) { cleared = true; break; }
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.ok(cleared, 'a success cleared recovery_hint');
  await page.click('.view-header button');
  await page.waitForSelector('section.endpoint[data-endpoint="ep-b"]');
  await card.locator('.recovery-badge').waitFor({ state: 'detached' });
  await apiSend('PATCH', 'system/inference-config', { recovery_hint_failures: null });
});

// ---- every tab: screenshots at 1440 and 390 px, 1920 px, axe-core ----

async function allTabs(p, ids, prefix, { axe = true } = {}) {
  for (const [w, hgt] of [[1440, 900], [390, 844]]) {
    await p.setViewportSize({ width: w, height: hgt });
    for (const id of ids) {
      await p.evaluate((v) => { location.hash = v; }, id);
      await p.waitForSelector(`.view-body[data-view="${id}"][data-ready]`);
      if (id === 'usage') await p.waitForSelector('#usage-requests svg.chart');
      assert.equal(await p.locator('.view-body .error-card').count(), 0, `${prefix}${id}: an error card`);
      const [sw, iw] = await p.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
      assert.ok(sw <= iw, `${prefix}${id} at ${w}: the page body scrolls sideways (${sw} > ${iw})`);
      const tb = await p.locator('#tabs a.active').boundingBox();
      assert.ok(tb && tb.x >= 0 && tb.x + tb.width <= w + 0.5, `${prefix}${id} at ${w}: the current tab is out of sight (${JSON.stringify(tb)})`);
      if (axe && w === 1440) await axeCheck(`${prefix}${id}`, p);
      await p.evaluate(() => window.scrollTo(0, 0));
      await p.screenshot({ path: path.join(OUT, `${prefix}${id}-${w}.png`), fullPage: true });
    }
  }
  await p.setViewportSize({ width: 1440, height: 900 });
}

test('R-ADM-3: every tab at 1440 and 390 px (screenshots), nothing clipped; axe-core finds nothing serious', { timeout: 90000 }, async () => {
  await allTabs(page, TAB_IDS, '');
  // 1920 px: the widest layout holds too.
  await page.setViewportSize({ width: 1920, height: 1080 });
  for (const id of ['endpoints', 'keys', 'usage']) {
    await page.evaluate((v) => { location.hash = v; }, id);
    await page.waitForSelector(`.view-body[data-view="${id}"][data-ready]`);
    await noSideScroll(`${id} at 1920`);
  }
  await shoot('keys-1920');
  await page.setViewportSize({ width: 1440, height: 900 });
});

async function signIn(user, password) {
  const p = await launch();
  await p.goto(`${BASE}/inference/`);
  await p.fill('#login-username', user);
  await p.fill('#login-password', password);
  await p.click('#login-form button[type="submit"]');
  await p.waitForSelector('#app:not([hidden])');
  await p.waitForSelector('.view-body[data-ready]');
  return p;
}

// A key created, edited and revoked through page p; checked through the API.
async function keyRoundTrip(p, name) {
  await p.click('#tabs a[data-view="keys"]');
  await p.waitForSelector('.view-body[data-view="keys"][data-ready]');
  if (!(await p.$eval('#new-key', (d) => d.open))) await p.click('#new-key > summary');
  await p.fill('#key-form [name="name"]', name);
  await p.fill('#key-form [name="qps_limit"]', '10');   // within ui-adm's key ceiling
  await p.click('#key-form button[type="submit"]');
  const dlg = p.locator('dialog.dialog[open]');
  await dlg.locator('input.secret').waitFor();
  await dlg.locator('[data-action="close"]').click();
  const row = p.locator('#key-list tbody tr', { hasText: name });
  await row.waitFor();
  await row.locator('[data-action="edit"]').click();
  await editSubmit({ daily_limit: '77' }, p);
  await dialogGone(p);
  await row.filter({ hasText: '/ 77' }).waitFor();
  const k = (await apiGet('tenant/api-keys')).data.find((x) => x.name === name);
  assert.equal(k.daily_limit, 77);
  await row.locator('[data-action="revoke"]').click();
  await p.locator('dialog.confirm-dialog[open] [data-action="confirm"]').click();
  await p.locator('#key-list tbody tr.row-muted', { hasText: name }).waitFor();
  assert.equal((await apiGet(`tenant/api-keys/${k.id}`)).revoked, true);
  return k;
}

test('R-ADM-2: an admin sees its tenant\u2019s tabs, each loads, and manages keys and endpoints', { timeout: 60000 }, async () => {
  assert.ok(state.admPassword, 'the users test ran');
  const p = await signIn('ui-adm', state.admPassword);
  const labels = await p.$$eval('#tabs a', (as) => as.map((a) => a.textContent));
  assert.deepEqual(labels, OPERATOR_TABS);
  const k = await keyRoundTrip(p, 'adm-key');
  assert.equal(k.tenant, 'acme');
  // An endpoint of its own tenant: created, edited, deleted.
  await p.click('#tabs a[data-view="endpoints"]');
  await p.waitForSelector('.view-body[data-view="endpoints"][data-ready]');
  await p.click('#new-endpoint > summary');
  await p.fill('#endpoint-form [name="name"]', 'adm-ep');
  await p.click('#endpoint-form button[type="submit"]');
  await p.locator('dialog.dialog[open] [data-action="close"]').click();
  const card = p.locator('section.endpoint[data-endpoint="adm-ep"]');
  await card.waitFor();
  await card.locator('.card-actions [data-action="edit"]').click();
  await editSubmit({ idle_timeout_ms: '33000' }, p);
  await dialogGone(p);
  const ep = (await apiGet('endpoints')).data.find((e) => e.name === 'adm-ep');
  assert.deepEqual([ep.tenant, ep.idle_timeout_ms], ['acme', 33000]);
  // A route to it: created, edited, deleted.
  await p.click('#tabs a[data-view="routes"]');
  await p.waitForSelector('.view-body[data-view="routes"][data-ready]');
  await p.click('#new-route > summary');
  await p.fill('#route-form [name="model"]', 'adm-m');
  await p.selectOption('#route-form [name="endpoint_id"]', { label: 'adm-ep' });
  await p.click('#route-form button[type="submit"]');
  const rrow = p.locator('.route-card[data-model="adm-m"] tbody tr');
  await rrow.waitFor();
  await rrow.locator('[data-action="edit"]').click();
  await editSubmit({ weight: '40', target_model: 'adm-up' }, p);
  await dialogGone(p);
  await rrow.filter({ hasText: 'adm-up' }).waitFor();
  const route = (await apiGet('model-routes?model=adm-m')).data[0];
  assert.deepEqual([route.weight, route.target_model, route.tenant], [40, 'adm-up', 'acme']);
  await rrow.locator('[data-action="delete"]').click();
  await p.locator('dialog.confirm-dialog[open] [data-action="confirm"]').click();
  await p.locator('.route-card[data-model="adm-m"]').waitFor({ state: 'detached' });
  assert.equal((await apiGet('model-routes?model=adm-m')).data.length, 0);
  // A member of its tenant: created, its key ceiling edited, deleted.
  await p.click('#tabs a[data-view="users"]');
  await p.waitForSelector('.view-body[data-view="users"][data-ready]');
  await p.click('#new-user > summary');
  await p.fill('#user-form [name="name"]', 'adm-user');
  await p.click('#user-form button[type="submit"]');
  const urow = p.locator('#user-list tr.user-row', { hasText: 'adm-user' });
  await urow.waitFor();
  await urow.locator('[data-action="edit"]').click();
  await editSubmit({ ceil_daily_limit: '500' }, p);
  await dialogGone(p);
  await urow.filter({ hasText: 'Calls / day 500' }).waitFor();
  const au = (await apiGet('users')).data.find((x) => x.name === 'adm-user');
  assert.deepEqual([au.tenant, au.role, au.key_ceiling.daily_limit], ['acme', 'member', 500]);
  await urow.locator('[data-action="delete"]').click();
  await p.locator('dialog.confirm-dialog[open] [data-action="confirm"]').click();
  await urow.waitFor({ state: 'detached' });
  assert.ok(!(await apiGet('users')).data.some((x) => x.name === 'adm-user'));
  await p.click('#tabs a[data-view="endpoints"]');
  await p.waitForSelector('.view-body[data-view="endpoints"][data-ready]');
  await card.locator('.card-actions [data-action="delete"]').click();
  await p.locator('dialog.confirm-dialog[open] [data-action="confirm"]').click();
  await card.waitFor({ state: 'detached' });
  assert.ok(!(await apiGet('endpoints')).data.some((e) => e.name === 'adm-ep'));
  // Issue 18: a semantic routing rule of its own tenant (the dialog offers no other), deleted.
  await p.click('#tabs a[data-view="rules"]');
  await p.waitForSelector('.view-body[data-view="rules"][data-ready]');
  await p.click('#new-semrule');
  assert.deepEqual(await p.$$eval('dialog.edit-dialog[open] [name="tenant"] option', (os) => os.map((o) => o.value)), ['acme']);
  await editSubmit({ name: 'adm-sem', pattern: 'hello', action: 'forbid', model: 'adm-m' }, p);
  await dialogGone(p);
  const srow = p.locator('#semrule-list tr.semrule-row', { hasText: 'adm-sem' });
  await srow.waitFor();
  const sr = (await apiGet('semantic-rules')).data.find((x) => x.name === 'adm-sem');
  assert.deepEqual([sr.tenant, sr.action, sr.model], ['acme', 'forbid', 'adm-m']);
  await srow.locator('[data-action="delete"]').click();
  await p.locator('dialog.confirm-dialog[open] [data-action="confirm"]').click();
  await srow.waitFor({ state: 'detached' });
  assert.ok(!(await apiGet('semantic-rules')).data.some((x) => x.name === 'adm-sem'));
  // Nodes and settings are read only for an admin.
  await p.click('#tabs a[data-view="nodes"]');
  await p.waitForSelector('.view-body[data-view="nodes"][data-ready]');
  assert.equal(await p.locator('#new-node').count(), 0);
  await allTabs(p, TAB_IDS, 'admin-', { axe: false });
});

test('R-ADM-2: a member sees routes, its keys, usage, requests, models and settings, read only where it may not write', { timeout: 60000 }, async () => {
  const p = await signIn(ENV.member_username, ENV.member_password);
  const tabs = await p.$$eval('#tabs a', (as) => as.map((a) => a.textContent));
  assert.deepEqual(tabs, ['Routes', 'Keys', 'Usage', 'Requests', 'Models', 'Settings']);
  assert.equal(await p.locator('#tabs a[data-view="rules"]').count(), 0, 'no Rules tab for members (R-GUARD-3)');
  await p.waitForSelector('.view-body[data-view="routes"] .empty-card');
  assert.equal(await p.locator('#new-route').count(), 0, 'no route form for members');
  await p.click('#tabs a[data-view="keys"]');
  await p.waitForSelector('#key-form', { state: 'attached' });
  assert.equal(await p.inputValue('#key-form input[readonly]'), 'mia');
  const k = await keyRoundTrip(p, 'mia-key');
  assert.equal(k.user, 'mia');
  await p.click('#tabs a[data-view="settings"]');
  await p.waitForSelector('.view-body[data-view="settings"][data-ready]');
  assert.equal(await p.locator('#settings-list [data-action="edit"]').count(), 0, 'settings are read only');
  await p.click('#tabs a[data-view="models"]');
  await p.waitForSelector('.view-body[data-view="models"][data-ready]');
  assert.equal(await p.locator('#policy-list [data-action="edit"]').count(), 0, 'policies are read only');
  await allTabs(p, ['routes', 'keys', 'usage', 'requests', 'models', 'settings'], 'member-');
});

test('R-ADM-2: log out ends the session', { timeout: T }, async () => {
  await page.click('#logout');
  await page.waitForSelector('#login:not([hidden])');
  const status = await page.evaluate(async () => (await fetch('/api/v1/auth/me')).status);
  assert.equal(status, 401);
  await page.reload();
  await page.waitForSelector('#login:not([hidden])');
});

test('R-SEC-7: no CSP violation, script error or alert() during the run', () => {
  // The API's 400s the issue 18 tests asked for (a bad pattern, tenant, label), no more.
  const bad = (t) => /status of 400/.test(t);
  assert.ok(problems.filter(bad).length <= refusals, JSON.stringify(problems));
  assert.deepEqual(problems.filter((t) => !bad(t)), []);
});

// R-API-7: CORS, from pages of two other origins (cors.mjs); they run after the tests above.
corsTests();
