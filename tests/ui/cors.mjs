// cors.mjs: CORS on the data plane (R-API-7) as a browser meets it. ui.test.mjs calls
// corsTests() after defining its own tests, so these run last in the same run (not a
// *.test.mjs of its own, which node would run in parallel with the page's tests).
//
// env.py sets cors_allowed_origins to http://127.0.0.1:<allowed_port>; this file serves the
// same tiny page (page.html + calls.js, below) from that origin and from
// http://127.0.0.1:<refused_port>, and has headless Chromium call the gateway from each with
// fetch: POST /v1/chat/completions with Authorization + Content-Type and POST /v1/messages with
// x-api-key + anthropic-version, so that every call needs a preflight. The preflights are
// also checked directly (what sluice answers to OPTIONS), and so are real answers.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { chromium } from 'playwright-core';

const ENV = JSON.parse(process.env.SLUICE_UI_ENV || 'null');
const BASE = ENV?.base_url;
const C = ENV?.cors;
const CHROMIUM = process.env.SLUICE_CHROMIUM || '/usr/bin/chromium';
const ALLOWED = `http://127.0.0.1:${C.allowed_port}`;
const REFUSED = `http://127.0.0.1:${C.refused_port}`;
const T = 20000;

// The page's script: one call to the gateway, and what the page could read of the answer.
const CALLS_JS = `
window.callGateway = async (base, kind, key, model) => {
  const body = { model, messages: [{ role: 'user', content: 'hello from a page' }] };
  const req = kind === 'chat'
    ? { path: '/v1/chat/completions', headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' } }
    : { path: '/v1/messages', headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' } };
  if (kind === 'messages') body.max_tokens = 32;
  try {
    const r = await fetch(base + req.path, { method: 'POST', headers: req.headers, body: JSON.stringify(body) });
    const h = (n) => r.headers.get(n);
    return { ok: true, status: r.status, body: await r.json(), requestId: h('x-request-id'), routedModel: h('x-routed-model'),
             retryAfter: h('retry-after'), rateLimit: h('x-ratelimit-limit'), notExposed: h('x-fake-upstream') };
  } catch (e) {
    return { ok: false, name: e.name, message: String(e.message) };
  }
};
document.body.dataset.ready = '1';
`;
const PAGE = '<!doctype html><html><head><meta charset="utf-8"><title>cors</title></head>'
  + '<body><p>a page of another origin</p><script src="/calls.js"></script></body></html>';

const servers = [];
let browser;
let ctx;

function serve(port) {
  const srv = http.createServer((req, res) => {
    if (req.url === '/calls.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' });
      res.end(CALLS_JS);
    } else if (req.url === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(PAGE);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  servers.push(srv);
  return new Promise((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', resolve);
  });
}

// A raw request with any Origin (fetch in Node would not let a test choose every header).
function raw(method, path, headers, body) {
  const u = new URL(BASE);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path, headers, timeout: 10000 }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { data += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end(body);
  });
}

const corsHeaders = (h) => Object.keys(h).filter((k) => k.startsWith('access-control-'));
const list = (v) => (v ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);

async function fakeRequests() {
  const r = await fetch(`${C.fake_url}/_fake/stats`);
  return (await r.json()).requests;
}

async function openPage(origin) {
  const p = await ctx.newPage();
  p.setDefaultTimeout(8000);
  await p.goto(`${origin}/`);
  await p.waitForSelector('body[data-ready]', { state: 'attached' });
  return p;
}

export function corsTests() {
  if (!C) throw new Error('SLUICE_UI_ENV has no "cors" part: run tests/ui/run.sh');

  before(async () => {
    await serve(C.allowed_port);
    await serve(C.refused_port);
    browser = await chromium.launch({
      executablePath: CHROMIUM, headless: true, timeout: 30000,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync'],
    });
    ctx = await browser.newContext();
  });

  after(async () => {
    if (browser) await browser.close().catch(() => {});
    for (const s of servers) s.close();
  });

  const PREFLIGHT_PATHS = [
    ['/v1/chat/completions', 'authorization,content-type,x-custom-token'],
    ['/v1/messages', 'anthropic-version,content-type,x-api-key'],
  ];

  test('R-API-7 preflight from the allowed origin: 204, allow-origin, methods, headers (asked ones too), max-age, Vary', { timeout: T }, async () => {
    const before = await fakeRequests();
    for (const [path, asked] of PREFLIGHT_PATHS) {
      const r = await raw('OPTIONS', path, {
        Origin: ALLOWED, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': asked,
      });
      assert.equal(r.status, 204, `${path}: ${r.status} ${r.body}`);
      assert.equal(r.headers['access-control-allow-origin'], ALLOWED, path);
      assert.ok(list(r.headers['access-control-allow-methods']).includes('post'), JSON.stringify(r.headers));
      const allowed = list(r.headers['access-control-allow-headers']);
      for (const h of ['authorization', 'content-type', 'x-api-key', 'anthropic-version', 'anthropic-beta',
        'x-stainless-retry-count', 'x-stainless-os', ...list(asked)]) {
        assert.ok(allowed.includes(h), `${path}: ${h} not in Access-Control-Allow-Headers: ${r.headers['access-control-allow-headers']}`);
      }
      assert.equal(r.headers['access-control-max-age'], '600', path);
      assert.ok(list(r.headers.vary).includes('origin'), `${path}: Vary ${r.headers.vary}`);
      assert.equal(r.body, '', `${path}: a 204 with a body`);
    }
    assert.equal(await fakeRequests(), before, 'a preflight reached the upstream');
  });

  test('R-API-7 preflight from another origin: 403 (cors_origin_not_allowed / permission_error), no Access-Control-* header', { timeout: T }, async () => {
    for (const [path, asked] of PREFLIGHT_PATHS) {
      const r = await raw('OPTIONS', path, {
        Origin: REFUSED, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': asked,
      });
      assert.equal(r.status, 403, `${path}: ${r.status} ${r.body}`);
      assert.deepEqual(corsHeaders(r.headers), [], `${path}: ${JSON.stringify(r.headers)}`);
      // The error in the shape of the path's protocol (Anthropic's on /v1/messages).
      const e = JSON.parse(r.body);
      if (path === '/v1/messages') assert.deepEqual([e.type, e.error?.type], ['error', 'permission_error'], r.body);
      else assert.deepEqual([e.error?.code, e.error?.type], ['cors_origin_not_allowed', 'permission_error'], r.body);
    }
  });

  test('R-API-7 real answers: allow-origin + expose-headers for the allowed origin only', { timeout: T }, async () => {
    const body = JSON.stringify({ model: C.model, messages: [{ role: 'user', content: 'hi' }] });
    const hdrs = (origin) => ({ Origin: origin, Authorization: `Bearer ${C.key}`, 'Content-Type': 'application/json' });
    const ok = await raw('POST', '/v1/chat/completions', hdrs(ALLOWED), body);
    assert.equal(ok.status, 200, ok.body);
    assert.equal(ok.headers['access-control-allow-origin'], ALLOWED);
    const exposed = list(ok.headers['access-control-expose-headers']);
    for (const h of ['x-request-id', 'x-routed-model', 'retry-after', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
      assert.ok(exposed.includes(h), `${h} not exposed: ${ok.headers['access-control-expose-headers']}`);
    }
    assert.ok(list(ok.headers.vary).includes('origin'), `Vary ${ok.headers.vary}`);
    const no = await raw('POST', '/v1/chat/completions', hdrs(REFUSED), body);
    assert.equal(no.status, 200, no.body);
    assert.deepEqual(corsHeaders(no.headers), [], JSON.stringify(no.headers));
    // The stand-in's own CORS headers never get through (cors=1 makes it send some).
    const strip = await raw('POST', '/v1/chat/completions', { ...hdrs(REFUSED), 'X-Fake-Behavior': 'cors=1' }, body);
    assert.equal(strip.status, 200, strip.body);
    assert.deepEqual(corsHeaders(strip.headers), [], JSON.stringify(strip.headers));
  });

  test('R-API-7 Chromium, a page of the allowed origin: chat and messages work, body and x-request-id readable', { timeout: 30000 }, async () => {
    const p = await openPage(ALLOWED);
    const before = await fakeRequests();
    const chat = await p.evaluate(([b, k, m]) => window.callGateway(b, 'chat', k, m), [BASE, C.key, C.model]);
    assert.ok(chat.ok, `the page's fetch failed: ${JSON.stringify(chat)}`);
    assert.equal(chat.status, 200, JSON.stringify(chat));
    assert.equal(chat.body.object, 'chat.completion');
    assert.equal(chat.body.choices[0].message.content, 'w1 w2 w3');
    assert.match(chat.requestId ?? '', /^req_[0-9a-f]+$/, 'x-request-id not readable by the page');
    assert.equal(chat.routedModel, C.model);
    assert.equal(chat.notExposed, null, 'a header not in Access-Control-Expose-Headers was readable');

    const msg = await p.evaluate(([b, k, m]) => window.callGateway(b, 'messages', k, m), [BASE, C.key, C.model]);
    assert.ok(msg.ok, `the page's fetch failed: ${JSON.stringify(msg)}`);
    assert.equal(msg.status, 200, JSON.stringify(msg));
    assert.equal(msg.body.type, 'message');
    assert.deepEqual(msg.body.content, [{ type: 'text', text: 'w1 w2 w3' }]);
    assert.match(msg.requestId ?? '', /^req_[0-9a-f]+$/);
    assert.notEqual(msg.requestId, chat.requestId);
    assert.equal(await fakeRequests(), before + 2, 'the two calls reached the stand-in once each');

    // Errors are readable too: a wrong key, and the key limited to 1 request per second.
    const bad = await p.evaluate(([b, m]) => window.callGateway(b, 'chat', 'sk-tenant-not-a-key', m), [BASE, C.model]);
    assert.ok(bad.ok, JSON.stringify(bad));
    assert.equal(bad.status, 401);
    assert.equal(bad.body.error.code, 'invalid_api_key');
    const first = await p.evaluate(([b, k, m]) => window.callGateway(b, 'chat', k, m), [BASE, C.qps_key, C.model]);
    const second = await p.evaluate(([b, k, m]) => window.callGateway(b, 'messages', k, m), [BASE, C.qps_key, C.model]);
    assert.equal(first.status, 200, JSON.stringify(first));
    assert.equal(second.status, 429, JSON.stringify(second));
    assert.equal(second.body.type, 'error');
    assert.equal(second.body.error.type, 'rate_limit_error');
    assert.equal(second.retryAfter, '1', 'Retry-After not readable by the page');
    assert.equal(second.rateLimit, '1', 'X-RateLimit-Limit not readable by the page');
    await p.close();
  });

  test('R-API-7 Chromium, a page of another origin: both fetches fail (TypeError), nothing reaches the upstream', { timeout: 30000 }, async () => {
    const p = await openPage(REFUSED);
    const before = await fakeRequests();
    for (const kind of ['chat', 'messages']) {
      const r = await p.evaluate(([b, kd, k, m]) => window.callGateway(b, kd, k, m), [BASE, kind, C.key, C.model]);
      assert.equal(r.ok, false, `${kind}: the browser let the page read the answer: ${JSON.stringify(r)}`);
      assert.equal(r.name, 'TypeError', `${kind}: ${JSON.stringify(r)}`);
    }
    assert.equal(await fakeRequests(), before, 'the refused preflight let a request through');
    await p.close();
  });
}
