// sdk.test.mjs: sluice through the official OpenAI Node SDK (package `openai`, major 4).
//
// The gateway claims OpenAI compatibility (R-API-1..4, R-API-8, R-USE-1..2, R-SSE-4, R-RT-6,
// R-AUTH-2, R-AUTH-6); this is what a user's program sees. Each test checks both what the
// SDK returned and what the stand-in upstream received (GET /_fake/stats).
// Run by tests/sdk/run.sh, which starts the environment (env.py) and passes:
//   SLUICE_BASE_URL  http://127.0.0.1:PORT/v1     SLUICE_KEY  a member key of tenant acme
//   SLUICE_FAKE_PORT the stand-in's port           (route `m` -> endpoint ep1 -> that stand-in)
//   SLUICE_ANT_FAKE_PORT, SLUICE_ANT_SECRET        (route `claude` -> endpoint ep-ant, --protocol
//                    anthropic, upstream credential SLUICE_ANT_SECRET -> a stand-in speaking Messages)
//   SLUICE_SDK_ENV   env.py's whole JSON line: also resp_fake_ports (route `r` -> endpoint ep-resp,
//                    two stand-ins round robin, for the Responses API), other_key (tenant globex), db
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
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

// ---- an Anthropic Messages upstream (R-ANT-1..4): the caller speaks OpenAI, the upstream Messages ----
//
// Route `claude` (target model claude-sdk-real) -> endpoint ep-ant (--protocol anthropic). The
// adapter forwards no caller header, so the stand-in's directives go in the prompt ("[[fake ...]]"),
// where they count as prompt words (input_tokens = the word count of system and message texts).

const ANT_PORT = process.env.SLUICE_ANT_FAKE_PORT;
const ANT_SECRET = process.env.SLUICE_ANT_SECRET;
const TOOLS = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];

async function antStats() {
  assert.ok(ANT_PORT && ANT_SECRET, 'SLUICE_ANT_FAKE_PORT and SLUICE_ANT_SECRET must be set (use tests/sdk/run.sh)');
  const r = await fetch(`http://127.0.0.1:${ANT_PORT}/_fake/stats`, { signal: AbortSignal.timeout(5000) });
  assert.equal(r.status, 200, 'anthropic stand-in /_fake/stats');
  return r.json();
}

async function antSince(before) {
  const s = await antStats();
  return { n: s.requests - before.requests, last: s.last, stats: s };
}

// What the Messages upstream must have received: the endpoint's credential, never the caller's.
function assertMessagesRequest(last) {
  assert.equal(last.method, 'POST');
  assert.equal(last.path, '/v1/messages');
  assert.equal(last.headers['x-api-key'], ANT_SECRET, 'R-ANT-4: not the endpoint credential upstream');
  assert.equal(last.headers['authorization'], undefined, 'R-ANT-4: an Authorization header went upstream');
  assert.equal(last.headers['anthropic-version'], '2023-06-01');
  assert.ok(!JSON.stringify(last).includes(KEY), 'R-ANT-4: the caller key went upstream');
}

test('R-ANT-1 anthropic upstream: chat.completions.create -> chat.completion; upstream got Messages', { timeout: TEST_TIMEOUT_MS }, async () => {
  const before = await antStats();
  const messages = [{ role: 'system', content: 'be brief' }, ...MSG];
  const { data: r, response } = await client.chat.completions.create({ model: 'claude', messages }).withResponse();
  assert.equal(r.object, 'chat.completion', JSON.stringify(r));
  assert.match(r.id, /^msg_fake\d+$/);
  assert.equal(r.model, 'claude', 'the client sees its own model name (R-RT-5)');
  assert.deepEqual(r.choices, [{ index: 0, message: { role: 'assistant', content: 'w1 w2 w3' }, finish_reason: 'stop', logprobs: null }]);
  assert.deepEqual(r.usage, { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8, prompt_tokens_details: { cached_tokens: 0 } });
  assert.equal(response.headers.get('x-routed-model'), 'claude-sdk-real');
  assert.match(response.headers.get('x-request-id') ?? '', /\S/);

  const up = await antSince(before);
  assert.equal(up.n, 1, `upstream got ${up.n} requests for one call`);
  assertMessagesRequest(up.last);
  assert.equal(up.last.headers['x-request-id'], response.headers.get('x-request-id'));
  assert.deepEqual(lastBody(up.last), {
    model: 'claude-sdk-real', max_tokens: 4096, system: [{ type: 'text', text: 'be brief' }],
    messages: [{ role: 'user', content: [{ type: 'text', text: 'say three words' }] }],
  });
});

test('R-ANT-1 R-USE-2 anthropic upstream: a stream through for await, usage only when asked', { timeout: TEST_TIMEOUT_MS }, async () => {
  let before = await antStats();
  const chunks = await collect(await client.chat.completions.create({ model: 'claude', messages: MSG, stream: true }));
  assert.equal(chunks.length, 5, `role, 3 deltas, finish: ${JSON.stringify(chunks)}`);
  for (const ch of chunks) {
    assert.equal(ch.object, 'chat.completion.chunk', JSON.stringify(ch));
    assert.equal(ch.model, 'claude');
    assert.equal(ch.id, chunks[0].id);
    assert.ok(!('usage' in ch), `usage the client did not ask for: ${JSON.stringify(ch)}`);
  }
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  assert.equal(chunks.map((c) => c.choices[0].delta.content ?? '').join(''), 'w1 w2 w3');
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop');
  let up = await antSince(before);
  assert.equal(up.n, 1);
  assertMessagesRequest(up.last);
  const sent = lastBody(up.last);
  assert.equal(sent.stream, true);
  assert.equal(sent.stream_options, undefined, `an OpenAI field went to Messages: ${up.last.body}`);

  before = await antStats();
  const withUsage = await collect(await client.chat.completions.create({
    model: 'claude', messages: MSG, stream: true, stream_options: { include_usage: true },
  }));
  const last = withUsage.at(-1);
  assert.deepEqual(last.choices, [], JSON.stringify(last));
  assert.deepEqual(last.usage, { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6, prompt_tokens_details: { cached_tokens: 0 } });
  assert.equal(withUsage.at(-2).choices[0].finish_reason, 'stop');
  up = await antSince(before);
  assert.equal(up.n, 1);
});

test('R-ANT-1 anthropic upstream: tool call -> tool message -> an answer holding the tool result', { timeout: TEST_TIMEOUT_MS }, async () => {
  const before = await antStats();
  const ask = [{ role: 'user', content: 'please use the tool' }];
  const r1 = await client.chat.completions.create({ model: 'claude', messages: ask, tools: TOOLS });
  assert.equal(r1.choices[0].finish_reason, 'tool_calls', JSON.stringify(r1));
  const calls = r1.choices[0].message.tool_calls;
  assert.equal(calls.length, 1, JSON.stringify(r1));
  assert.match(calls[0].id, /^toolu_fake\d+$/);
  assert.equal(calls[0].type, 'function');
  assert.equal(calls[0].function.name, 'get_weather');
  assert.equal(typeof calls[0].function.arguments, 'string', 'arguments must be a JSON string');
  assert.deepEqual(JSON.parse(calls[0].function.arguments), { q: 'fake' });
  let up = await antSince(before);
  assertMessagesRequest(up.last);
  assert.deepEqual(lastBody(up.last).tools, [{
    name: 'get_weather', description: 'Weather of a city',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  }]);

  const r2 = await client.chat.completions.create({
    model: 'claude', tools: TOOLS,
    messages: [...ask, r1.choices[0].message, { role: 'tool', tool_call_id: calls[0].id, content: '21 degrees' }],
  });
  assert.equal(r2.choices[0].message.content, `tool_result[${calls[0].id}]: 21 degrees w1 w2 w3`, JSON.stringify(r2));
  assert.equal(r2.choices[0].finish_reason, 'stop');
  up = await antSince(before);
  assert.equal(up.n, 2);
  const turns = lastBody(up.last).messages;
  assert.deepEqual(turns[1], { role: 'assistant', content: [
    { type: 'text', text: 'w1 w2 w3' },
    { type: 'tool_use', id: calls[0].id, name: 'get_weather', input: { q: 'fake' } }] });
  assert.deepEqual(turns[2], { role: 'user', content: [{ type: 'tool_result', tool_use_id: calls[0].id, content: '21 degrees' }] });
});

test('R-ANT-1 anthropic upstream: a streamed tool call, assembled by the SDK stream helper', { timeout: TEST_TIMEOUT_MS }, async () => {
  const chunks = await collect(await client.chat.completions.create({
    model: 'claude', messages: [{ role: 'user', content: 'use the tool' }], tools: TOOLS, stream: true,
  }));
  const tc = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
  assert.equal(tc.length, 4, `start + 3 argument pieces: ${JSON.stringify(tc)}`);
  assert.ok(tc.every((t) => t.index === 0), JSON.stringify(tc));
  assert.match(tc[0].id, /^toolu_fake\d+$/);
  assert.equal(tc[0].function.name, 'get_weather');
  assert.ok(tc.slice(1).every((t) => t.id === undefined && t.function.name === undefined), JSON.stringify(tc));
  assert.deepEqual(JSON.parse(tc.map((t) => t.function.arguments).join('')), { q: 'fake' });
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls');
  // The SDK's own accumulation (ChatCompletionStream) reads the same deltas.
  const helper = client.beta?.chat?.completions?.stream ? client.beta.chat.completions : client.chat.completions;
  const s = helper.stream({ model: 'claude', messages: [{ role: 'user', content: 'use the tool' }], tools: TOOLS });
  const final = await s.finalChatCompletion();
  const call = final.choices[0].message.tool_calls[0];
  assert.equal(final.choices[0].finish_reason, 'tool_calls', JSON.stringify(final));
  assert.equal(final.choices[0].message.content, 'w1 w2 w3');
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { q: 'fake' });
});

test('R-ANT-3 R-ANT-2 anthropic upstream: unmappable parameters and paths -> BadRequestError, nothing sent', { timeout: TEST_TIMEOUT_MS }, async () => {
  const before = await antStats();
  for (const [param, value] of [['n', 2], ['temperature', 1.5], ['logprobs', true], ['response_format', { type: 'json_object' }], ['seed', 7]]) {
    const e = await mustThrow(() => client.chat.completions.create({ model: 'claude', messages: MSG, [param]: value }), param);
    assert.ok(e instanceof OpenAI.BadRequestError, describeErr(e));
    assert.equal(e.status, 400);
    assert.equal(e.code, 'unsupported_parameter', describeErr(e));
    assert.equal(e.param, param, describeErr(e));
    assert.equal(header(e.headers, 'x-should-retry'), 'false');
  }
  const e = await mustThrow(() => client.embeddings.create({ model: 'claude', input: 'x', encoding_format: 'float' }), 'embeddings');
  assert.ok(e instanceof OpenAI.BadRequestError, describeErr(e));
  assert.equal(e.code, 'unsupported_endpoint_for_upstream_protocol', describeErr(e));
  const up = await antSince(before);
  assert.equal(up.n, 0, `a refused request reached the upstream: ${JSON.stringify(up.last)}`);
});

test('R-ANT-1 R-API-2 anthropic 529 overloaded -> InternalServerError 503 after the SDK retried it', { timeout: TEST_TIMEOUT_MS }, async () => {
  // maxRetries 1: the SDK retries a 503 (after the 5 s Retry-After sluice adds), then raises.
  const retrying = new OpenAI({ baseURL: BASE_URL, apiKey: KEY, maxRetries: 1, timeout: 15000 });
  const before = await antStats();
  const t0 = Date.now();
  const e = await mustThrow(() => retrying.chat.completions.create({
    model: 'claude', messages: [{ role: 'user', content: '[[fake status=529]] busy' }],
  }), 'upstream 529');
  assert.ok(e instanceof OpenAI.InternalServerError, describeErr(e));
  assert.equal(e.status, 503);
  assert.deepEqual(e.error, { message: 'Overloaded', type: 'server_error', param: null, code: 'overloaded_error' });
  assert.equal(header(e.headers, 'retry-after'), '5');
  const up = await antSince(before);
  assert.equal(up.n, 2, `the SDK should have tried twice (one retry): ${up.n}`);
  assert.equal(up.last.headers['x-stainless-retry-count'], undefined, 'caller headers must not reach a Messages upstream');
  assert.ok(Date.now() - t0 >= 4000, 'the SDK did not wait for Retry-After');
});

test('R-ANT-1 R-API-2 anthropic 429 -> RateLimitError; a mid-stream error event -> APIError', { timeout: TEST_TIMEOUT_MS }, async () => {
  let before = await antStats();
  const e = await mustThrow(() => client.chat.completions.create({
    model: 'claude', messages: [{ role: 'user', content: '[[fake status=429]] slow down' }],
  }), 'upstream 429');
  assert.ok(e instanceof OpenAI.RateLimitError, describeErr(e));
  assert.equal(e.status, 429);
  assert.equal(e.code, 'rate_limit_error', describeErr(e));
  assert.equal(header(e.headers, 'retry-after'), '1');
  assert.equal((await antSince(before)).n, 1);

  before = await antStats();
  const stream = await client.chat.completions.create({
    model: 'claude', messages: [{ role: 'user', content: '[[fake error_after=2]] go' }], stream: true,
  });
  const got = [];
  let err = null;
  try {
    for await (const ch of stream) {
      got.push(ch);
      assert.ok(got.length <= 100, 'stream did not end');
    }
  } catch (x) {
    if (x instanceof assert.AssertionError) throw x;
    err = x;
  }
  assert.ok(err instanceof OpenAI.APIError && !(err instanceof OpenAI.APIConnectionError), describeErr(err));
  assert.equal(err.error?.code, 'overloaded_error', describeErr(err));
  assert.equal(got.map((c) => c.choices?.[0]?.delta?.content ?? '').join(''), 'w1 w2 ');
  assert.equal((await antSince(before)).n, 1, 'a stream that had begun was retried');
});

// ---- the Responses API (R-API-8): route `r` -> endpoint ep-resp, two stand-ins round robin ----
//
// The stand-in names its ids resp_<name>_<n> (tests/fake/fake_responses.c), so the id says
// which replica made a response; each replica knows only its own ids (previous_response_id
// of another: 404 previous_response_not_found).

const SDK_ENV = JSON.parse(process.env.SLUICE_SDK_ENV || 'null');
const RESP_PORTS = SDK_ENV?.resp_fake_ports ?? [];
const RESP_NAMES = ['sdk-r1', 'sdk-r2'];

async function respStats() {
  assert.equal(RESP_PORTS.length, 2, 'SLUICE_SDK_ENV must name the two Responses stand-ins (use tests/sdk/run.sh)');
  return Promise.all(RESP_PORTS.map(async (p) => {
    const r = await fetch(`http://127.0.0.1:${p}/_fake/stats`, { signal: AbortSignal.timeout(5000) });
    assert.equal(r.status, 200);
    return r.json();
  }));
}

// Requests each replica got since `before`, and their last requests.
async function respSince(before) {
  const now = await respStats();
  return { n: now.map((s, i) => s.requests - before[i].requests), last: now.map((s) => s.last) };
}

// Which replica (0 or 1) made the response with this id.
function home(id) {
  const m = /^resp_(sdk-r[12])_\d+$/.exec(id ?? '');
  assert.ok(m, `not a stand-in response id: ${id}`);
  return RESP_NAMES.indexOf(m[1]);
}

// The rows of usage_events for one request id; the writer batches, so this waits for them.
async function usageRows(requestId, want = 1) {
  assert.ok(SDK_ENV?.db, 'SLUICE_SDK_ENV must name the database');
  const q = 'SELECT path, status, stream, model, prompt_tokens, completion_tokens, cache_read_tokens, reasoning_tokens'
    + ' FROM usage_events WHERE request_id = ?';
  const py = 'import json,sqlite3,sys; c=sqlite3.connect(sys.argv[1], timeout=10); c.row_factory=sqlite3.Row;'
    + ' print(json.dumps([dict(r) for r in c.execute(sys.argv[2], (sys.argv[3],))]))';
  const deadline = Date.now() + 8000;
  let rows = [];
  while (Date.now() < deadline) {
    rows = JSON.parse(execFileSync('python3', ['-c', py, SDK_ENV.db, q, requestId]).toString());
    if (rows.length >= want) break;
    await new Promise((r) => setTimeout(r, 150));
  }
  return rows;
}

// Per-response values of the stand-in: ids and the creation second.
const normResp = (s) => s.replace(/\b(resp|msg)_sdk-r[12]_\d+/g, '$1_X').replace(/"created_at":\d+/g, '"created_at":0');

test('R-API-8 responses.create non-stream: output_text, usage, the replica\'s bytes relayed', { timeout: TEST_TIMEOUT_MS }, async () => {
  const params = { model: 'r', instructions: 'be brief', input: 'say three words' };
  const before = await respStats();
  const { data: r, response } = await client.responses.create(params).withResponse();
  assert.equal(r.object, 'response', JSON.stringify(r));
  assert.equal(r.status, 'completed');
  assert.equal(r.model, 'r');
  assert.equal(r.output_text, 'w1 w2 w3', JSON.stringify(r));
  assert.equal(r.output[0].role, 'assistant');
  // input_tokens: the stand-in counts the words of instructions and input (2 + 3).
  assert.deepEqual(r.usage, { input_tokens: 5, input_tokens_details: { cached_tokens: 0 }, output_tokens: 3,
    output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 8 });
  assert.equal(response.headers.get('x-routed-model'), 'r');
  assert.match(response.headers.get('x-request-id') ?? '', /\S/);
  const at = home(r.id);
  const up = await respSince(before);
  assert.deepEqual(up.n, at === 0 ? [1, 0] : [0, 1], `one call, to the replica named in ${r.id}`);
  assert.equal(up.last[at].method, 'POST');
  assert.equal(up.last[at].path, '/v1/responses');
  assert.deepEqual(JSON.parse(up.last[at].body), params);
  assert.equal(up.last[at].headers.authorization, undefined, 'the caller key went upstream');

  // Byte for byte: the same request straight to a replica answers the same bytes (ids and
  // the creation second aside).
  const raw = await client.responses.create(params).asResponse();
  const got = await raw.text();
  const want = await (await fetch(`http://127.0.0.1:${RESP_PORTS[0]}/v1/responses`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(params),
  })).text();
  assert.equal(normResp(got), normResp(want));
});

test('R-API-8 responses.create stream: the typed events through response.completed with usage', { timeout: TEST_TIMEOUT_MS }, async () => {
  const before = await respStats();
  const events = await collect(await client.responses.create({ model: 'r', input: 'say three words', stream: true }));
  assert.deepEqual(events.map((e) => e.type), ['response.created', 'response.in_progress', 'response.output_item.added',
    'response.content_part.added', 'response.output_text.delta', 'response.output_text.delta', 'response.output_text.delta',
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  assert.equal(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join(''), 'w1 w2 w3');
  const done = events.at(-1).response;
  assert.equal(done.id, events[0].response.id);
  assert.equal(done.status, 'completed');
  assert.equal(done.model, 'r');
  assert.deepEqual(done.usage, { input_tokens: 3, input_tokens_details: { cached_tokens: 0 }, output_tokens: 3,
    output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 6 });
  const at = home(done.id);
  const up = await respSince(before);
  assert.deepEqual(up.n, at === 0 ? [1, 0] : [0, 1]);
  assert.deepEqual(JSON.parse(up.last[at].body), { model: 'r', input: 'say three words', stream: true });

  // The SDK's stream helper assembles the same (v4's finalResponse() has no output_text).
  const s = client.responses.stream({ model: 'r', input: 'say three words' });
  let streamed = '';
  s.on('response.output_text.delta', (e) => { streamed += e.delta; });
  const fin = await s.finalResponse();
  assert.equal(fin.status, 'completed');
  assert.deepEqual(fin.output[0].content.map((c) => c.text), ['w1 w2 w3'], JSON.stringify(fin));
  assert.equal(streamed, 'w1 w2 w3');
});

test('R-API-8 previous_response_id is pinned to the replica that made the response (6 follow-ups, round robin)', { timeout: TEST_TIMEOUT_MS }, async () => {
  // Round robin really alternates new conversations over both replicas...
  const fresh = [];
  for (let i = 0; i < 4; i++) fresh.push(home((await client.responses.create({ model: 'r', input: `new ${i}` })).id));
  assert.deepEqual([...new Set(fresh)].sort(), [0, 1], `new conversations all went to one replica: ${fresh}`);

  // ...but every follow-up goes where its previous response lives (elsewhere it would be 404).
  const before = await respStats();
  const first = await client.responses.create({ model: 'r', input: 'start' });
  const at = home(first.id);
  let prev = first.id;
  for (let i = 0; i < 6; i++) {
    const r = await client.responses.create({ model: 'r', input: `turn ${i}`, previous_response_id: prev });
    assert.equal(home(r.id), at, `follow-up ${i} of ${prev} answered by the other replica: ${r.id}`);
    assert.equal(r.previous_response_id, prev);
    assert.equal(r.output_text, `continuing ${prev} w1 w2 w3`, JSON.stringify(r));
    prev = r.id;
  }
  const up = await respSince(before);
  assert.equal(up.n[at], 7, `the home replica got ${up.n[at]} of 7 calls`);
  assert.equal(up.n[1 - at], 0, 'a follow-up reached the replica that does not know the id');
});

test('R-API-8 responses.retrieve / inputItems.list / cancel / del reach the replica that made the response', { timeout: TEST_TIMEOUT_MS }, async () => {
  const r = await client.responses.create({ model: 'r', input: 'remember me' });
  const at = home(r.id);
  const before = await respStats();
  const got = await client.responses.retrieve(r.id);
  assert.equal(got.id, r.id);
  assert.equal(got.status, 'completed');
  assert.equal(got.output[0].content[0].text, 'w1 w2 w3');
  let up = await respSince(before);
  assert.deepEqual([up.last[at].method, up.last[at].path], ['GET', `/v1/responses/${r.id}`]);

  const items = await client.responses.inputItems.list(r.id);
  assert.equal(items.data.length, 1, JSON.stringify(items.data));
  assert.equal(items.data[0].role, 'user');
  assert.deepEqual(items.data[0].content, [{ type: 'input_text', text: 'remember me' }]);
  up = await respSince(before);
  assert.deepEqual([up.last[at].method, up.last[at].path], ['GET', `/v1/responses/${r.id}/input_items`]);

  const c = await client.responses.cancel(r.id);
  assert.equal(c.id, r.id);
  assert.equal(c.status, 'cancelled', JSON.stringify(c));
  up = await respSince(before);
  assert.deepEqual([up.last[at].method, up.last[at].path], ['POST', `/v1/responses/${r.id}/cancel`]);

  await client.responses.del(r.id);
  up = await respSince(before);
  assert.deepEqual([up.last[at].method, up.last[at].path], ['DELETE', `/v1/responses/${r.id}`]);
  assert.equal(up.n[at], 4, `the home replica got ${up.n[at]} of 4 calls`);
  assert.equal(up.n[1 - at], 0, 'a call reached the replica that does not know the id');

  // Deleted: the home replica says so.
  const gone = await mustThrow(() => client.responses.retrieve(r.id), 'retrieve after delete');
  assert.ok(gone instanceof OpenAI.NotFoundError, describeErr(gone));
  assert.equal((await respSince(before)).n[at], 5);
});

test('R-API-8 another tenant\'s response id and an unknown one -> 404 response_not_found, nothing upstream; anthropic endpoint -> 400', { timeout: TEST_TIMEOUT_MS }, async () => {
  const r = await client.responses.create({ model: 'r', input: 'mine' });
  const other = new OpenAI({ baseURL: BASE_URL, apiKey: SDK_ENV.other_key, maxRetries: 0, timeout: 15000 });
  const before = await respStats();
  for (const [what, fn] of [
    ['retrieve', () => other.responses.retrieve(r.id)],
    ['inputItems.list', () => other.responses.inputItems.list(r.id)],
    ['cancel', () => other.responses.cancel(r.id)],
    ['del', () => other.responses.del(r.id)],
    ['unknown id', () => client.responses.retrieve('resp_never_made_1')],
  ]) {
    const e = await mustThrow(fn, what);
    assert.ok(e instanceof OpenAI.NotFoundError, `${what}: ${describeErr(e)}`);
    assert.equal(e.code, 'response_not_found', `${what}: ${describeErr(e)}`);
  }
  assert.deepEqual((await respSince(before)).n, [0, 0], 'a refused call reached a replica');
  // The response is still there for its own tenant.
  assert.equal((await client.responses.retrieve(r.id)).id, r.id);

  const antBefore = await antStats();
  const e = await mustThrow(() => client.responses.create({ model: 'claude', input: 'x' }), 'responses to an anthropic endpoint');
  assert.ok(e instanceof OpenAI.BadRequestError, describeErr(e));
  assert.equal(e.code, 'unsupported_endpoint_for_upstream_protocol', describeErr(e));
  assert.equal((await antSince(antBefore)).n, 0);
});

test('R-API-8 R-USE-1 responses usage rows: prompt, completion, cache read and reasoning tokens, stream or not', { timeout: TEST_TIMEOUT_MS }, async () => {
  const hdr = { headers: { 'X-Fake-Behavior': 'cache_read_tokens=2 reasoning_tokens=4' } };
  const { data: r, response } = await client.responses.create({ model: 'r', input: 'count these four words' }, hdr).withResponse();
  assert.deepEqual(r.usage, { input_tokens: 4, input_tokens_details: { cached_tokens: 2 }, output_tokens: 7,
    output_tokens_details: { reasoning_tokens: 4 }, total_tokens: 11 });
  const { data: stream, response: sresp } = await client.responses.create(
    { model: 'r', input: 'and these three', stream: true }, hdr).withResponse();
  const events = await collect(stream);
  assert.equal(events.at(-1).type, 'response.completed');

  const rows = await usageRows(response.headers.get('x-request-id'));
  assert.equal(rows.length, 1, `no usage row for ${response.headers.get('x-request-id')}`);
  assert.deepEqual(rows[0], { path: '/v1/responses', status: 200, stream: 0, model: 'r', prompt_tokens: 4,
    completion_tokens: 7, cache_read_tokens: 2, reasoning_tokens: 4 });
  const srows = await usageRows(sresp.headers.get('x-request-id'));
  assert.equal(srows.length, 1, `no usage row for the stream ${sresp.headers.get('x-request-id')}`);
  assert.deepEqual(srows[0], { path: '/v1/responses', status: 200, stream: 1, model: 'r', prompt_tokens: 3,
    completion_tokens: 7, cache_read_tokens: 2, reasoning_tokens: 4 });
});
