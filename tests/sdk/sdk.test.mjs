// sdk.test.mjs: sluice through the official OpenAI Node SDK (package `openai`, major 4).
//
// The gateway claims OpenAI compatibility (R-API-1..4, R-USE-1..2, R-SSE-4, R-RT-6,
// R-AUTH-2, R-AUTH-6); this is what a user's program sees. Each test checks both what the
// SDK returned and what the stand-in upstream received (GET /_fake/stats).
// Run by tests/sdk/run.sh, which starts the environment (env.py) and passes:
//   SLUICE_BASE_URL  http://127.0.0.1:PORT/v1     SLUICE_KEY  a member key of tenant acme
//   SLUICE_FAKE_PORT the stand-in's port           (route `m` -> endpoint ep1 -> that stand-in)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

// The package's exports hide package.json; read the installed one.
const SDK_VERSION = JSON.parse(readFileSync(new URL('./node_modules/openai/package.json', import.meta.url))).version;

const BASE_URL = process.env.SLUICE_BASE_URL;
const KEY = process.env.SLUICE_KEY;
const FAKE_PORT = process.env.SLUICE_FAKE_PORT;
if (!BASE_URL || !KEY || !FAKE_PORT) {
  throw new Error('SLUICE_BASE_URL, SLUICE_KEY and SLUICE_FAKE_PORT must be set (use tests/sdk/run.sh)');
}
console.log(`openai-node ${SDK_VERSION}, node ${process.version}, gateway ${BASE_URL}`);

const TEST_TIMEOUT_MS = 20000;
const client = new OpenAI({ baseURL: BASE_URL, apiKey: KEY, maxRetries: 0, timeout: 15000 });

// ---- helpers ----

async function fakeStats() {
  const r = await fetch(`http://127.0.0.1:${FAKE_PORT}/_fake/stats`, { signal: AbortSignal.timeout(5000) });
  assert.equal(r.status, 200, 'stand-in /_fake/stats');
  return r.json();
}

// The upstream's view of the last request, and how many data requests it got since `before`.
async function upstreamSince(before) {
  const s = await fakeStats();
  return { n: s.requests - before.requests, last: s.last, stats: s };
}

function lastBody(last) {
  assert.ok(last && typeof last.body === 'string', `stand-in recorded no body: ${JSON.stringify(last)}`);
  return JSON.parse(last.body);
}

// err.headers is a plain object in SDK v4 and a Headers in v5+; read either.
function header(headers, name) {
  if (!headers) return undefined;
  if (typeof headers.get === 'function') return headers.get(name) ?? undefined;
  return headers[name.toLowerCase()];
}

// Runs fn, which must throw; returns the error (a clear message when it did not throw).
async function mustThrow(fn, what) {
  try {
    const v = await fn();
    assert.fail(`${what}: expected an error, got ${JSON.stringify(v)?.slice(0, 300)}`);
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    return e;
  }
}

function describeErr(e) {
  return `${e?.constructor?.name} status=${e?.status} code=${e?.code} message=${e?.message} error=${JSON.stringify(e?.error)}`;
}

// Iterates an SDK stream with a bound on chunks; returns the chunks.
async function collect(stream, max = 1000) {
  const chunks = [];
  for await (const ch of stream) {
    chunks.push(ch);
    assert.ok(chunks.length <= max, `stream produced more than ${max} chunks`);
  }
  return chunks;
}

const MSG = [{ role: 'user', content: 'say three words' }];

// ---- chat ----

test('R-API-1 chat.completions.create non-streaming: content, usage, model m (upstream got model m, no caller key)', { timeout: TEST_TIMEOUT_MS }, async () => {
  const before = await fakeStats();
  const { data: r, response } = await client.chat.completions.create({ model: 'm', messages: MSG }).withResponse();
  assert.equal(r.object, 'chat.completion', JSON.stringify(r));
  assert.equal(r.model, 'm');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(r.choices[0].message.content.length > 0, 'empty content');
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage, `no usage: ${JSON.stringify(r)}`);
  assert.ok(r.usage.prompt_tokens >= 1 && r.usage.completion_tokens >= 1, JSON.stringify(r.usage));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  // R-API-4 / R-RT-5 response headers.
  assert.match(response.headers.get('x-request-id') ?? '', /\S/, 'no X-Request-Id');
  assert.equal(response.headers.get('x-routed-model'), 'm');

  const up = await upstreamSince(before);
  assert.equal(up.n, 1, `upstream got ${up.n} requests for one call`);
  assert.equal(up.last.method, 'POST');
  assert.equal(up.last.path, '/v1/chat/completions');
  const sent = lastBody(up.last);
  assert.equal(sent.model, 'm');
  assert.deepEqual(sent.messages, MSG);
  assert.ok(!sent.stream, `non-stream call forwarded as stream: ${up.last.body}`);
  assert.equal(up.last.headers['authorization'], undefined, 'caller credential forwarded upstream (R-API-5)');
  assert.equal(up.last.headers['x-request-id'], response.headers.get('x-request-id'), 'X-Request-Id not passed upstream');
});

test('R-SSE-1 R-USE-2 chat stream: joined deltas equal the non-stream content, no usage in any chunk', { timeout: TEST_TIMEOUT_MS }, async () => {
  const whole = await client.chat.completions.create({ model: 'm', messages: MSG });
  const expected = whole.choices[0].message.content;

  const before = await fakeStats();
  const stream = await client.chat.completions.create({ model: 'm', messages: MSG, stream: true });
  const chunks = await collect(stream);
  assert.ok(chunks.length >= 2, `only ${chunks.length} chunks`);
  let text = '';
  for (const ch of chunks) {
    assert.equal(ch.object, 'chat.completion.chunk', JSON.stringify(ch));
    assert.equal(ch.model, 'm');
    assert.ok(!('usage' in ch), `chunk carries usage though the client did not ask (R-USE-2): ${JSON.stringify(ch)}`);
    text += ch.choices?.[0]?.delta?.content ?? '';
  }
  assert.equal(text, expected, 'streamed text differs from the non-stream content');
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop', JSON.stringify(chunks.at(-1)));

  const up = await upstreamSince(before);
  assert.equal(up.n, 1, `upstream got ${up.n} requests for one stream`);
  const sent = lastBody(up.last);
  assert.equal(sent.stream, true);
  // R-USE-1: sluice asked the upstream for usage, to account it, and removed it again.
  assert.deepEqual(sent.stream_options, { include_usage: true }, `upstream body: ${up.last.body}`);
});

test('R-USE-1 R-USE-2 chat stream with stream_options.include_usage: the last chunk carries usage', { timeout: TEST_TIMEOUT_MS }, async () => {
  const before = await fakeStats();
  const stream = await client.chat.completions.create({
    model: 'm', messages: MSG, stream: true, stream_options: { include_usage: true },
  });
  const chunks = await collect(stream);
  assert.ok(chunks.length >= 2, `only ${chunks.length} chunks`);
  const last = chunks.at(-1);
  assert.ok(last.usage, `last chunk has no usage: ${JSON.stringify(last)}`);
  assert.deepEqual(last.choices, [], `usage chunk has choices: ${JSON.stringify(last)}`);
  assert.ok(last.usage.prompt_tokens >= 1 && last.usage.completion_tokens >= 1, JSON.stringify(last.usage));
  for (const ch of chunks.slice(0, -1)) {
    assert.ok(ch.usage == null, `a chunk before the last carries usage: ${JSON.stringify(ch)}`);
  }
  const text = chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join('');
  assert.ok(text.length > 0, 'no content in the stream');

  const up = await upstreamSince(before);
  assert.equal(up.n, 1);
  const sent = lastBody(up.last);
  assert.deepEqual(sent.stream_options, { include_usage: true }, `upstream body: ${up.last.body}`);
});

// ---- completions ----

test('R-API-1 completions.create non-stream and stream (prompt)', { timeout: TEST_TIMEOUT_MS }, async () => {
  const prompt = 'once upon a time';
  let before = await fakeStats();
  const r = await client.completions.create({ model: 'm', prompt });
  assert.equal(r.object, 'text_completion', JSON.stringify(r));
  assert.equal(r.model, 'm');
  assert.equal(r.choices.length, 1);
  assert.ok(typeof r.choices[0].text === 'string' && r.choices[0].text.length > 0, JSON.stringify(r));
  assert.ok(r.usage && r.usage.prompt_tokens >= 1 && r.usage.completion_tokens >= 1, JSON.stringify(r.usage));
  let up = await upstreamSince(before);
  assert.equal(up.n, 1);
  assert.equal(up.last.path, '/v1/completions');
  assert.equal(lastBody(up.last).prompt, prompt);

  before = await fakeStats();
  const stream = await client.completions.create({ model: 'm', prompt, stream: true });
  const chunks = await collect(stream);
  assert.ok(chunks.length >= 2, `only ${chunks.length} chunks`);
  for (const ch of chunks) {
    assert.equal(ch.object, 'text_completion', JSON.stringify(ch));
    assert.ok(!('usage' in ch), `chunk carries usage though the client did not ask (R-USE-2): ${JSON.stringify(ch)}`);
  }
  const text = chunks.map((c) => c.choices?.[0]?.text ?? '').join('');
  assert.equal(text, r.choices[0].text, 'streamed text differs from the non-stream text');
  up = await upstreamSince(before);
  assert.equal(up.n, 1);
  assert.equal(up.last.path, '/v1/completions');
  const sent = lastBody(up.last);
  assert.equal(sent.stream, true);
  assert.equal(sent.prompt, prompt);
});

// ---- embeddings ----

test('R-API-1 embeddings.create with an array input', { timeout: TEST_TIMEOUT_MS }, async () => {
  const input = ['alpha', 'beta gamma', 'delta'];
  const before = await fakeStats();
  // encoding_format float: the SDK would otherwise ask for base64 and decode it itself.
  const r = await client.embeddings.create({ model: 'm', input, encoding_format: 'float' });
  assert.equal(r.object, 'list', JSON.stringify(r));
  assert.equal(r.data.length, input.length, JSON.stringify(r));
  r.data.forEach((d, i) => {
    assert.equal(d.object, 'embedding');
    assert.equal(d.index, i);
    assert.ok(Array.isArray(d.embedding) && d.embedding.length > 0, JSON.stringify(d));
    assert.ok(d.embedding.every((x) => typeof x === 'number'), JSON.stringify(d));
  });
  assert.ok(r.usage && r.usage.prompt_tokens >= 1, JSON.stringify(r.usage));
  const up = await upstreamSince(before);
  assert.equal(up.n, 1);
  assert.equal(up.last.path, '/v1/embeddings');
  assert.deepEqual(lastBody(up.last).input, input);
});

// ---- models ----

test('R-AUTH-6 models.list contains m; models.retrieve(m)', { timeout: TEST_TIMEOUT_MS }, async () => {
  const before = await fakeStats();
  const ids = [];
  for await (const m of client.models.list()) {
    ids.push(m.id);
    assert.equal(m.object, 'model', JSON.stringify(m));
    assert.ok(ids.length <= 100, 'models.list did not end');
  }
  assert.ok(ids.includes('m'), `models.list: ${JSON.stringify(ids)}`);
  const m = await client.models.retrieve('m');
  assert.equal(m.id, 'm');
  assert.equal(m.object, 'model');
  // The list comes from sluice's own configuration, not from an upstream.
  const up = await upstreamSince(before);
  assert.equal(up.n, 0, `models listing reached the upstream: ${JSON.stringify(up.last)}`);
});

// ---- errors (R-API-2: the SDK raises its usual classes) ----

test('R-API-2 R-AUTH-2 wrong key -> AuthenticationError 401 invalid_api_key', { timeout: TEST_TIMEOUT_MS }, async () => {
  const bad = new OpenAI({ baseURL: BASE_URL, apiKey: 'sk-tenant-wrong-key-000', maxRetries: 0, timeout: 15000 });
  const before = await fakeStats();
  const e = await mustThrow(() => bad.chat.completions.create({ model: 'm', messages: MSG }), 'wrong key');
  assert.ok(e instanceof OpenAI.AuthenticationError, describeErr(e));
  assert.equal(e.status, 401);
  assert.equal(e.code, 'invalid_api_key', describeErr(e));
  assert.equal(e.error?.code, 'invalid_api_key');
  assert.ok(header(e.headers, 'x-request-id'), `no x-request-id: ${JSON.stringify(e.headers)}`);
  assert.equal(header(e.headers, 'x-should-retry'), 'false', 'an auth failure must say x-should-retry: false');
  const up = await upstreamSince(before);
  assert.equal(up.n, 0, 'a request with a wrong key reached the upstream');
});

test('R-API-2 R-RT-6 unknown model -> NotFoundError 404 model_not_found', { timeout: TEST_TIMEOUT_MS }, async () => {
  const before = await fakeStats();
  const e = await mustThrow(() => client.chat.completions.create({ model: 'no-such-model', messages: MSG }), 'unknown model');
  assert.ok(e instanceof OpenAI.NotFoundError, describeErr(e));
  assert.equal(e.status, 404);
  assert.equal(e.code, 'model_not_found', describeErr(e));
  assert.equal(e.param, 'model');
  assert.ok(header(e.headers, 'x-request-id'), 'no x-request-id');
  assert.equal(header(e.headers, 'x-should-retry'), 'false');
  const r = await mustThrow(() => client.models.retrieve('no-such-model'), 'retrieve unknown model');
  assert.ok(r instanceof OpenAI.NotFoundError, describeErr(r));
  assert.equal(r.code, 'model_not_found', describeErr(r));
  const up = await upstreamSince(before);
  assert.equal(up.n, 0, 'an unknown model reached the upstream');
});

test('R-API-2 R-API-3 missing messages -> BadRequestError 400 missing_field', { timeout: TEST_TIMEOUT_MS }, async () => {
  const before = await fakeStats();
  const e = await mustThrow(() => client.chat.completions.create({ model: 'm', messages: undefined }), 'missing messages');
  assert.ok(e instanceof OpenAI.BadRequestError, describeErr(e));
  assert.equal(e.status, 400);
  assert.equal(e.code, 'missing_field', describeErr(e));
  assert.equal(e.param, 'messages');
  assert.ok(header(e.headers, 'x-request-id'), 'no x-request-id');
  // The same through the SDK's low-level post.
  const p = await mustThrow(() => client.post('/chat/completions', { body: { model: 'm' } }), 'client.post without messages');
  assert.ok(p instanceof OpenAI.BadRequestError, describeErr(p));
  assert.equal(p.param, 'messages');
  const up = await upstreamSince(before);
  assert.equal(up.n, 0, 'an invalid request reached the upstream');
});

test('R-API-1 R-HC-8 upstream 429 passes through -> RateLimitError, Retry-After kept, not retried', { timeout: TEST_TIMEOUT_MS }, async () => {
  const before = await fakeStats();
  const e = await mustThrow(() => client.chat.completions.create(
    { model: 'm', messages: MSG },
    { headers: { 'X-Fake-Behavior': 'status=429;retry_after=1' } },
  ), 'upstream 429');
  assert.ok(e instanceof OpenAI.RateLimitError, describeErr(e));
  assert.equal(e.status, 429);
  // The upstream's own error body, unchanged (the stand-in's code is null).
  assert.equal(e.error?.type, 'invalid_request_error', describeErr(e));
  assert.equal(e.error?.message, 'fake error 429', describeErr(e));
  assert.equal(header(e.headers, 'retry-after'), '1', `headers: ${JSON.stringify(e.headers)}`);
  assert.ok(header(e.headers, 'x-request-id'), 'no x-request-id');
  const up = await upstreamSince(before);
  assert.equal(up.n, 1, `upstream got ${up.n} requests: a 4xx must not be retried`);
  assert.equal(up.last.headers['x-fake-behavior'], 'status=429;retry_after=1', 'per-request header not forwarded');
});

test('R-KEY-2 sluice\'s own quota refusal -> RateLimitError with the SPEC §12 body, no retry advised', { timeout: TEST_TIMEOUT_MS }, async () => {
  const limited = new OpenAI({ baseURL: BASE_URL, apiKey: process.env.SLUICE_LIMITED_KEY, maxRetries: 0, timeout: 15000 });
  // The first call of the day may pass (or may already have been spent by a retried run).
  try { await limited.chat.completions.create({ model: 'm', messages: MSG }); } catch (e) { /* counted below */ }
  const e = await mustThrow(() => limited.chat.completions.create({ model: 'm', messages: MSG }), 'daily limit');
  assert.ok(e instanceof OpenAI.RateLimitError, describeErr(e));
  assert.equal(e.status, 429);
  assert.equal(e.error?.code, 'DAILY_LIMIT_EXCEEDED', describeErr(e));
  assert.equal(e.error?.type, 'rate_limit_error');
  assert.equal(e.error?.scope, 'per_api_key');
  assert.equal(e.error?.limit, 1);
  assert.equal(e.error?.remaining, 0);
  assert.match(e.error?.reset_at ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  assert.equal(header(e.headers, 'x-should-retry'), 'false');
  assert.ok(header(e.headers, 'x-quota-reset'), 'no X-Quota-Reset');
  assert.ok(Number(header(e.headers, 'retry-after')) >= 1, 'no Retry-After');
});

// ---- mid-stream failure ----

test('R-SSE-4 upstream dies mid-stream -> the SDK stream throws APIError after the first chunks', { timeout: TEST_TIMEOUT_MS }, async () => {
  const before = await fakeStats();
  const stream = await client.chat.completions.create(
    { model: 'm', messages: MSG, stream: true },
    { headers: { 'X-Fake-Behavior': 'die_after=2' } },
  );
  const got = [];
  let err = null;
  try {
    for await (const ch of stream) {
      got.push(ch);
      assert.ok(got.length <= 100, 'stream did not end');
    }
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    err = e;
  }
  const text = got.map((c) => c.choices?.[0]?.delta?.content ?? '').join('');
  assert.ok(err, `stream ended without an error after ${got.length} chunks: ${JSON.stringify(got)}`);
  assert.ok(err instanceof OpenAI.APIError, describeErr(err));
  assert.ok(!(err instanceof OpenAI.APIConnectionError), `a connection error, not an error event: ${describeErr(err)}`);
  assert.ok(err.error && typeof err.error.message === 'string', `error event without message: ${describeErr(err)}`);
  assert.equal(text, 'w1 w2 ', `content before the failure: ${JSON.stringify(got)}`);
  assert.ok(got.every((c) => c.choices?.[0]?.finish_reason !== 'stop'), 'a finish chunk came before the error');
  const up = await upstreamSince(before);
  assert.equal(up.n, 1, `upstream got ${up.n} requests: a broken stream must not be retried`);
  assert.equal(lastBody(up.last).stream, true);
});
