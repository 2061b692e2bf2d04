// anthropic.test.mjs: sluice's Anthropic ingress (POST /v1/messages, /v1/messages/count_tokens,
// GET /v1/models with anthropic-version; R-ANT-6/7) through the official Anthropic TypeScript
// SDK, package `@anthropic-ai/sdk`: the current line (1.x: API version 2026-10-21, the key sent
// as Authorization: Bearer) and the last 0.x as `anthropic-sdk-0` (API version 2023-06-01, the
// key sent as x-api-key, what most deployed tools still send).
//
// Route `claude` -> endpoint ep-ant (--protocol anthropic, target model claude-real): a native
// pass-through, so the SDK must get the stand-in's bytes. Route `gpt` -> endpoint ep-oa (an
// OpenAI stand-in, target model gpt-real): translated both ways. Every test checks what the
// SDK returned and what the stand-in received (GET /_fake/stats).
//
// The stand-in's Messages mode implements API version 2023-06-01 (and 2023-01-01) only and
// refuses any other anthropic-version (tests/fake/fake_anthropic.c, headers_check), so the 1.x
// client talking to ep-ant pins `anthropic-version: 2023-06-01` through defaultHeaders; the
// test "anthropic-version travels unchanged" shows the 1.x default (2026-10-21) reaching it.
// Run by run.sh, which starts env.py and passes its JSON line in SLUICE_ASDK_ENV.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import Anthropic from '@anthropic-ai/sdk';
import Anthropic0 from 'anthropic-sdk-0';

const ENV = JSON.parse(process.env.SLUICE_ASDK_ENV || 'null');
if (!ENV) throw new Error('SLUICE_ASDK_ENV is not set: run tests/anthropic-sdk/run.sh');
const version = (p) => JSON.parse(readFileSync(new URL(`./node_modules/${p}/package.json`, import.meta.url))).version;
console.log(`@anthropic-ai/sdk ${version('@anthropic-ai/sdk')} and ${version('anthropic-sdk-0')}, node ${process.version}, gateway ${ENV.base_url}`);

const BASE = ENV.base_url;            // http://127.0.0.1:PORT (the SDK adds /v1/...)
const KEY = ENV.key;
const ANT = `http://127.0.0.1:${ENV.ant_port}`;
const OA = `http://127.0.0.1:${ENV.oa_port}`;
const SECRET = ENV.ant_secret;
const STAND_IN_VERSION = '2023-06-01';
const T = 20000;

// Records what the SDK put on the wire (URL, headers, body) before handing it to fetch.
function recorder() {
  const sent = [];
  const f = async (url, init = {}) => {
    sent.push({ url: String(url), headers: new Headers(init.headers), body: init.body });
    return fetch(url, init);
  };
  return { sent, fetch: f };
}

const common = { baseURL: BASE, maxRetries: 0, timeout: 15000 };
// The current SDK with its own defaults: for the OpenAI endpoint, which has no version to honour.
const wire = recorder();
const sdk = new Anthropic({ ...common, apiKey: KEY, fetch: wire.fetch });
// The current SDK for the Anthropic stand-in, which speaks 2023-06-01 only.
const pinned = new Anthropic({ ...common, apiKey: KEY, defaultHeaders: { 'anthropic-version': STAND_IN_VERSION } });

// ---- helpers ----

async function stats(base) {
  const r = await fetch(`${base}/_fake/stats`, { signal: AbortSignal.timeout(5000) });
  assert.equal(r.status, 200, `${base}/_fake/stats`);
  return r.json();
}

async function since(base, before) {
  const s = await stats(base);
  return { n: s.requests - before.requests, last: s.last };
}

async function both() {
  return { ant: await stats(ANT), oa: await stats(OA) };
}

async function noneSince(b, what) {
  assert.equal((await since(ANT, b.ant)).n, 0, `${what}: reached the Anthropic stand-in`);
  assert.equal((await since(OA, b.oa)).n, 0, `${what}: reached the OpenAI stand-in`);
}

// The per-request ids the stand-in numbers: msg_fakeN, toolu_fakeN, req_fakeN.
const norm = (s) => s.replace(/\b(msg|toolu|req)_fake\d+/g, '$1_fakeN');

// The same body straight to the stand-in, as sluice must have sent it.
async function direct(path, body) {
  const r = await fetch(`${ANT}${path}`, {
    method: 'POST', body,
    headers: { 'x-api-key': SECRET, 'anthropic-version': STAND_IN_VERSION, 'content-type': 'application/json' },
  });
  return { status: r.status, headers: r.headers, text: await r.text() };
}

// What a Messages upstream must have received: the endpoint's credential, never the caller's.
function assertNativeRequest(last, path = '/v1/messages') {
  assert.equal(last.method, 'POST');
  assert.equal(last.path, path);
  assert.equal(last.headers['x-api-key'], SECRET, 'R-ANT-4: not the endpoint credential upstream');
  assert.equal(last.headers.authorization, undefined, 'an Authorization header went upstream');
  assert.ok(!JSON.stringify(last).includes(KEY), 'R-ANT-4: the caller key went upstream');
}

// "event: X\ndata: {...}\n\n" -> [{event, data}]
function sse(text) {
  return text.split('\n\n').filter((b) => b.trim()).map((block) => {
    const ev = /^event: (.*)$/m.exec(block);
    const data = /^data: (.*)$/m.exec(block);
    return { event: ev && ev[1], data: data && JSON.parse(data[1]) };
  });
}

async function mustThrow(fn, what) {
  try {
    const v = await fn();
    assert.fail(`${what}: expected an error, got ${JSON.stringify(v)?.slice(0, 300)}`);
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    return e;
  }
}

const describeErr = (e) => `${e?.constructor?.name} status=${e?.status} error=${JSON.stringify(e?.error)} message=${e?.message}`;

// Checks an Anthropic-shaped error the SDK raised: class, status, error.type.
function assertApiError(e, cls, status, type) {
  assert.ok(e instanceof cls, `want ${cls.name}: ${describeErr(e)}`);
  assert.equal(e.status, status, describeErr(e));
  assert.equal(e.error?.type, 'error', `not an Anthropic error body: ${describeErr(e)}`);
  assert.equal(e.error?.error?.type, type, describeErr(e));
  assert.equal(typeof e.error?.error?.message, 'string', describeErr(e));
}

// Iterates a stream; returns [events, error thrown or null].
async function drain(stream, max = 200) {
  const events = [];
  try {
    for await (const ev of stream) {
      events.push(ev);
      assert.ok(events.length <= max, 'the stream did not end');
    }
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    return [events, e];
  }
  return [events, null];
}

// The words of the stand-in's answers (tests/fake/fake_anthropic.c, fake_openai.c): w1 w2 w3.
const WORDS = 'w1 w2 w3';
const ASK = [{ role: 'user', content: 'say three words' }];
const TOOLS = [{
  name: 'get_weather', description: 'Weather of a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];

// ---- native pass-through (an anthropic endpoint) ----

test('R-ANT-6 messages.create -> anthropic endpoint: the stand-in\'s bytes, request-id relayed, body unchanged but model', { timeout: T }, async () => {
  const params = {
    model: 'claude', max_tokens: 64,
    system: [{ type: 'text', text: 'be brief', cache_control: { type: 'ephemeral' } }],
    messages: ASK, metadata: { user_id: 'u-native' }, temperature: 0.5, top_k: 5,
  };
  const before = await stats(ANT);
  const raw = await pinned.messages.create(params).asResponse();
  const got = await raw.text();
  assert.equal(raw.status, 200, got);
  const up = await since(ANT, before);
  assert.equal(up.n, 1, `upstream got ${up.n} requests for one call`);
  assertNativeRequest(up.last);
  assert.equal(up.last.query, '');
  assert.equal(up.last.headers['anthropic-version'], STAND_IN_VERSION);
  // The body went upstream exactly as the SDK serialised it, the model alias resolved.
  assert.equal(up.last.body, JSON.stringify({ ...params, model: 'claude-real' }));
  assert.match(raw.headers.get('request-id') ?? '', /^req_fake\d+$/, 'the upstream request-id was not relayed');
  assert.match(raw.headers.get('x-request-id') ?? '', /\S/);
  assert.equal(raw.headers.get('x-routed-model'), 'claude-real');
  // The same request straight to the stand-in: the same bytes, but the per-request ids and
  // the model, which names the caller's alias (setting response_model, default "client").
  const want = await direct('/v1/messages', up.last.body);
  assert.equal(want.status, 200, want.text);
  assert.ok(want.text.includes('"model":"claude-real"'), want.text);
  assert.equal(norm(got), norm(want.text).replace('"model":"claude-real"', '"model":"claude"'));

  // What the SDK made of it.
  const { data: msg, response } = await pinned.messages.create(params).withResponse();
  assert.match(msg.id, /^msg_fake\d+$/);
  assert.equal(msg.type, 'message');
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.model, 'claude');
  assert.deepEqual(msg.content, [{ type: 'text', text: WORDS }]);
  assert.equal(msg.stop_reason, 'end_turn');
  assert.equal(msg.stop_sequence, null);
  // input_tokens: the stand-in counts the words of system and messages (2 + 3).
  assert.deepEqual(msg.usage, { input_tokens: 5, output_tokens: 3, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
  assert.equal(msg._request_id, response.headers.get('request-id'), 'message._request_id');
});

test('R-ANT-6 stream -> anthropic endpoint: the bytes of the stand-in\'s stream; messages.stream() and create({stream}) parse it', { timeout: T }, async () => {
  const params = { model: 'claude', max_tokens: 64, messages: ASK };
  const before = await stats(ANT);
  const raw = await pinned.messages.create({ ...params, stream: true }).asResponse();
  const got = await raw.text();
  assert.equal(raw.status, 200, got);
  assert.match(raw.headers.get('content-type') ?? '', /^text\/event-stream/);
  assert.match(raw.headers.get('request-id') ?? '', /^req_fake\d+$/);
  const up = await since(ANT, before);
  assert.equal(up.n, 1);
  assertNativeRequest(up.last);
  assert.equal(up.last.body, JSON.stringify({ ...params, stream: true, model: 'claude-real' }));
  const want = await direct('/v1/messages', up.last.body);
  assert.equal(norm(got), norm(want.text).replaceAll('"model":"claude-real"', '"model":"claude"'));
  const events = sse(got);
  assert.deepEqual(events.map((e) => e.event), ['message_start', 'ping', 'content_block_start', 'content_block_delta',
    'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'], got);

  // messages.stream(): the helper accumulates the same events (the SDK drops pings).
  const s = pinned.messages.stream(params);
  const [seen, err] = await drain(s);
  assert.equal(err, null, describeErr(err));
  assert.deepEqual(seen.map((e) => e.type), events.filter((e) => e.event !== 'ping').map((e) => e.event));
  const fin = await s.finalMessage();
  assert.deepEqual(fin.content, [{ type: 'text', text: WORDS }]);
  assert.equal(fin.stop_reason, 'end_turn');
  assert.equal(fin.model, 'claude');
  assert.equal(fin.usage.output_tokens, 3);
  assert.equal(fin.usage.input_tokens, 3);

  // create({stream: true}): the raw events.
  const [evs, err2] = await drain(await pinned.messages.create({ ...params, stream: true }));
  assert.equal(err2, null, describeErr(err2));
  assert.equal(evs.filter((e) => e.type === 'content_block_delta').map((e) => e.delta.text).join(''), WORDS);
  assert.equal(evs.at(-2).delta.stop_reason, 'end_turn');
});

test('R-ANT-6 tools -> anthropic endpoint: a tool_use answer, then the tool_result sent back; a streamed tool call', { timeout: T }, async () => {
  const before = await stats(ANT);
  const ask = [{ role: 'user', content: 'please use the tool' }];
  const r1 = await pinned.messages.create({ model: 'claude', max_tokens: 64, tools: TOOLS, messages: ask });
  assert.equal(r1.stop_reason, 'tool_use', JSON.stringify(r1));
  assert.equal(r1.content.length, 2, JSON.stringify(r1));
  assert.deepEqual(r1.content[0], { type: 'text', text: WORDS });
  const use = r1.content[1];
  assert.equal(use.type, 'tool_use');
  assert.match(use.id, /^toolu_fake\d+$/);
  assert.equal(use.name, 'get_weather');
  assert.deepEqual(use.input, { q: 'fake' });
  let up = await since(ANT, before);
  assertNativeRequest(up.last);
  assert.equal(up.last.body, JSON.stringify({ model: 'claude-real', max_tokens: 64, tools: TOOLS, messages: ask }));

  const body2 = {
    model: 'claude', max_tokens: 64, tools: TOOLS,
    messages: [...ask, { role: 'assistant', content: r1.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '21 degrees' }] }],
  };
  const r2 = await pinned.messages.create(body2);
  assert.deepEqual(r2.content, [{ type: 'text', text: `tool_result[${use.id}]: 21 degrees ${WORDS}` }], JSON.stringify(r2));
  assert.equal(r2.stop_reason, 'end_turn');
  up = await since(ANT, before);
  assert.equal(up.n, 2);
  assert.equal(up.last.body, JSON.stringify({ ...body2, model: 'claude-real' }), 'the tool turns were not passed on unchanged');

  // Streamed: input_json_delta pieces, assembled by the SDK.
  const s = pinned.messages.stream({ model: 'claude', max_tokens: 64, tools: TOOLS, messages: ask });
  const [evs, err] = await drain(s);
  assert.equal(err, null, describeErr(err));
  const pieces = evs.filter((e) => e.type === 'content_block_delta' && e.delta.type === 'input_json_delta');
  assert.equal(pieces.length, 3, JSON.stringify(evs));
  assert.ok(pieces.every((e) => e.index === 1));
  const fin = await s.finalMessage();
  assert.equal(fin.stop_reason, 'tool_use');
  assert.equal(fin.content[1].type, 'tool_use');
  assert.equal(fin.content[1].name, 'get_weather');
  assert.deepEqual(fin.content[1].input, { q: 'fake' });
});

// ---- translated (an OpenAI endpoint) ----

test('R-ANT-7 messages.create -> openai endpoint: translated request, a Message back (text, stop_reason, usage)', { timeout: T }, async () => {
  const params = {
    model: 'gpt', max_tokens: 64, system: 'be brief', messages: ASK,
    stop_sequences: ['zzz'], metadata: { user_id: 'u-7' },
  };
  const before = await stats(OA);
  const { data: msg, response } = await sdk.messages.create(params).withResponse();
  assert.match(msg.id, /^msg_/);
  assert.equal(msg.type, 'message');
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.model, 'gpt');
  assert.deepEqual(msg.content, [{ type: 'text', text: WORDS }]);
  assert.equal(msg.stop_reason, 'end_turn');
  assert.equal(msg.stop_sequence, null);
  // The OpenAI stand-in's prompt_tokens: the words of the messages it got (2 + 3).
  assert.equal(msg.usage.input_tokens, 5, JSON.stringify(msg.usage));
  assert.equal(msg.usage.output_tokens, 3, JSON.stringify(msg.usage));
  assert.equal(response.headers.get('x-routed-model'), 'gpt-real');
  // The 1.x SDK sent its key as Bearer and its own API version; sluice took both.
  const w = wire.sent.at(-1);
  assert.equal(w.headers.get('authorization'), `Bearer ${KEY}`);
  assert.equal(w.headers.get('x-api-key'), null);
  assert.match(w.headers.get('anthropic-version') ?? '', /^20\d\d-\d\d-\d\d$/);

  const up = await since(OA, before);
  assert.equal(up.n, 1);
  assert.equal(up.last.path, '/v1/chat/completions');
  assert.deepEqual(JSON.parse(up.last.body), {
    model: 'gpt-real', max_tokens: 64, stop: ['zzz'], user: 'u-7',
    messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'say three words' }],
  });
  assert.equal(up.last.headers.authorization, undefined, 'the caller key went upstream');
  assert.ok(!JSON.stringify(up.last).includes(KEY), 'the caller key went upstream');
});

test('R-ANT-7 stream -> openai endpoint: the exact Anthropic event sequence; messages.stream() assembles it', { timeout: T }, async () => {
  const params = { model: 'gpt', max_tokens: 64, system: 'be brief', messages: ASK };
  const before = await stats(OA);
  const raw = await sdk.messages.create({ ...params, stream: true }).asResponse();
  const text = await raw.text();
  assert.equal(raw.status, 200, text);
  assert.match(raw.headers.get('content-type') ?? '', /^text\/event-stream/);
  const evs = sse(text);
  assert.deepEqual(evs.map((e) => e.event), ['message_start', 'content_block_start', 'ping', 'content_block_delta',
    'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'], text);
  for (const e of evs) assert.equal(e.data.type, e.event, `event name and data.type differ: ${JSON.stringify(e)}`);
  const start = evs[0].data.message;
  assert.match(start.id, /^msg_/);
  assert.equal(start.type, 'message');
  assert.equal(start.role, 'assistant');
  assert.equal(start.model, 'gpt');
  assert.deepEqual(start.content, []);
  assert.equal(start.stop_reason, null);
  assert.deepEqual(evs[1].data, { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
  assert.deepEqual(evs.slice(3, 6).map((e) => e.data.delta), [
    { type: 'text_delta', text: 'w1 ' }, { type: 'text_delta', text: 'w2 ' }, { type: 'text_delta', text: 'w3' }]);
  assert.ok(evs.slice(3, 7).every((e) => e.data.index === 0));
  const md = evs[7].data;
  assert.deepEqual(md.delta, { stop_reason: 'end_turn', stop_sequence: null });
  assert.equal(md.usage.output_tokens, 3, JSON.stringify(md));
  assert.equal(md.usage.input_tokens, 5, JSON.stringify(md));
  const up = await since(OA, before);
  assert.equal(up.n, 1);
  const sent = JSON.parse(up.last.body);
  assert.equal(sent.stream, true);
  assert.deepEqual(sent.stream_options, { include_usage: true }, 'sluice did not ask the upstream for usage');

  const s = sdk.messages.stream(params);
  const [seen, err] = await drain(s);
  assert.equal(err, null, describeErr(err));
  assert.deepEqual(seen.map((e) => e.type), evs.filter((e) => e.event !== 'ping').map((e) => e.event));
  assert.equal(await s.finalText(), WORDS);
  const fin = await s.finalMessage();
  assert.equal(fin.stop_reason, 'end_turn');
  assert.equal(fin.usage.output_tokens, 3);
  // message_start cannot know the input yet (OpenAI sends usage last); message_delta brings it.
  assert.equal(fin.usage.input_tokens, 5, JSON.stringify(fin.usage));
});

test('R-ANT-7 tools, images, tool_result -> openai endpoint: the OpenAI request the upstream got', { timeout: T }, async () => {
  const before = await stats(OA);
  const msg = await sdk.messages.create({
    model: 'gpt', max_tokens: 64, tools: TOOLS, tool_choice: { type: 'any' },
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'weather in Oslo?' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] },
      { role: 'assistant', content: [{ type: 'text', text: 'calling' },
        { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '21 degrees' }] },
    ],
  });
  assert.deepEqual(msg.content, [{ type: 'text', text: WORDS }]);
  assert.equal(msg.stop_reason, 'end_turn');
  const up = await since(OA, before);
  assert.equal(up.n, 1);
  assert.deepEqual(JSON.parse(up.last.body), {
    model: 'gpt-real', max_tokens: 64, tool_choice: 'required',
    tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: TOOLS[0].input_schema } }],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'weather in Oslo?' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] },
      { role: 'assistant', content: 'calling', tool_calls: [
        { id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
      { role: 'tool', tool_call_id: 'toolu_1', content: '21 degrees' },
    ],
  });
});

// ---- count_tokens, models ----

test('R-ANT-6 messages.countTokens: native to the anthropic endpoint, estimated by sluice for the openai one', { timeout: T }, async () => {
  const q = { system: 'be brief', messages: [{ role: 'user', content: 'one two three four' }] };
  let b = await both();
  const n = await pinned.messages.countTokens({ model: 'claude', ...q });
  assert.deepEqual({ ...n }, { input_tokens: 6 }, 'the stand-in counts 2 + 4 words');
  const up = await since(ANT, b.ant);
  assert.equal(up.n, 1);
  assertNativeRequest(up.last, '/v1/messages/count_tokens');
  assert.equal(up.last.body, JSON.stringify({ model: 'claude-real', ...q }));

  b = await both();
  const body = { model: 'gpt', ...q };
  const m = await sdk.messages.countTokens(body);
  // sluice's own estimate: the body's bytes / 4 + 1, the body being what the SDK sent.
  const sent = wire.sent.at(-1);
  assert.ok(sent.url.endsWith('/v1/messages/count_tokens'), sent.url);
  assert.equal(sent.body, JSON.stringify(body));
  assert.deepEqual({ ...m }, { input_tokens: Math.floor(Buffer.byteLength(sent.body) / 4) + 1 });
  await noneSince(b, 'a count for an openai endpoint');
});

test('R-ANT-6 models.list() and models.retrieve(): Anthropic-shaped, the tenant\'s routes only, no upstream', { timeout: T }, async () => {
  const b = await both();
  const ids = [];
  for await (const m of sdk.models.list()) {
    ids.push(m.id);
    assert.equal(m.type, 'model', JSON.stringify(m));
    assert.equal(typeof m.display_name, 'string');
    assert.match(m.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/, JSON.stringify(m));
    assert.ok(ids.length <= 50, 'models.list() did not end');
  }
  assert.deepEqual(ids.sort(), ['claude', 'gpt'], 'globex\'s claude-g must not show');
  const page = await sdk.models.list();
  assert.equal(page.has_more, false);
  assert.equal(page.first_id, page.data[0].id);
  assert.equal(page.last_id, page.data.at(-1).id);
  const one = await sdk.models.retrieve('claude');
  assert.equal(one.type, 'model');
  assert.equal(one.id, 'claude');
  const e = await mustThrow(() => sdk.models.retrieve('claude-g'), 'another tenant\'s model');
  assertApiError(e, Anthropic.NotFoundError, 404, 'not_found_error');
  await noneSince(b, 'the models listing');
});

// ---- errors: the SDK's own classes from sluice's Anthropic-shaped errors ----

test('R-ANT-6 errors from sluice: AuthenticationError, PermissionDeniedError, NotFoundError, BadRequestError; nothing upstream', { timeout: T }, async () => {
  const b = await both();
  // A wrong key, as Bearer and as x-api-key.
  for (const c of [new Anthropic({ ...common, apiKey: 'sk-tenant-wrong-0000' }),
    new Anthropic0({ ...common, apiKey: 'sk-tenant-wrong-0000' })]) {
    const e = await mustThrow(() => c.messages.create({ model: 'claude', max_tokens: 8, messages: ASK }), 'wrong key');
    assertApiError(e, c instanceof Anthropic ? Anthropic.AuthenticationError : Anthropic0.AuthenticationError, 401, 'authentication_error');
    assert.equal(e.headers.get('x-should-retry'), 'false');
    assert.match(e.headers.get('x-request-id') ?? '', /\S/);
  }
  // X-Sluice-Tenant is for operators; alice is a member.
  let e = await mustThrow(() => pinned.messages.create({ model: 'claude', max_tokens: 8, messages: ASK },
    { headers: { 'X-Sluice-Tenant': 'globex' } }), 'X-Sluice-Tenant from a member');
  assertApiError(e, Anthropic.PermissionDeniedError, 403, 'permission_error');
  assert.match(e.error.error.message, /X-Sluice-Tenant/);
  // An unknown model, another tenant's model, and (R-AUTH-5) an endpoint key of ep-oa asking
  // for the model of ep-ant: none of them exists for the caller.
  e = await mustThrow(() => sdk.messages.create({ model: 'no-such-model', max_tokens: 8, messages: ASK }), 'unknown model');
  assertApiError(e, Anthropic.NotFoundError, 404, 'not_found_error');
  assert.match(e.error.error.message, /no-such-model/);
  e = await mustThrow(() => sdk.messages.create({ model: 'claude-g', max_tokens: 8, messages: ASK }), 'globex\'s model');
  assertApiError(e, Anthropic.NotFoundError, 404, 'not_found_error');
  const epKey = new Anthropic({ ...common, apiKey: ENV.ep_oa_key, defaultHeaders: { 'anthropic-version': STAND_IN_VERSION } });
  e = await mustThrow(() => epKey.messages.create({ model: 'claude', max_tokens: 8, messages: ASK }), 'endpoint key, other endpoint');
  assertApiError(e, Anthropic.NotFoundError, 404, 'not_found_error');
  // max_tokens is required (the SDK's types say so; plain JavaScript can leave it out).
  e = await mustThrow(() => sdk.messages.create({ model: 'claude', messages: ASK }), 'no max_tokens');
  assertApiError(e, Anthropic.BadRequestError, 400, 'invalid_request_error');
  assert.match(e.error.error.message, /max_tokens/);
  assert.equal(e.headers.get('x-should-retry'), 'false');
  e = await mustThrow(() => sdk.messages.create({ model: 'gpt', max_tokens: 8, messages: ASK,
    thinking: { type: 'enabled', budget_tokens: 1024 } }), 'thinking to an openai endpoint');
  assertApiError(e, Anthropic.BadRequestError, 400, 'invalid_request_error');
  assert.match(e.error.error.message, /thinking/);
  await noneSince(b, 'a refused request');
  // The endpoint key does reach its own endpoint's model.
  const ok = await epKey.messages.create({ model: 'gpt', max_tokens: 8, messages: ASK });
  assert.deepEqual(ok.content, [{ type: 'text', text: WORDS }]);
});

test('R-ANT-6 a key limited to 1 request per second -> RateLimitError with Retry-After and X-RateLimit-*', { timeout: T }, async () => {
  const limited = new Anthropic({ ...common, apiKey: ENV.qps_key });
  const b = await both();
  const first = await limited.messages.create({ model: 'gpt', max_tokens: 8, messages: ASK });
  assert.deepEqual(first.content, [{ type: 'text', text: WORDS }]);
  const e = await mustThrow(() => limited.messages.create({ model: 'gpt', max_tokens: 8, messages: ASK }), 'second call within 1 s');
  assertApiError(e, Anthropic.RateLimitError, 429, 'rate_limit_error');
  assert.match(e.error.error.message, /QPS_EXCEEDED/);
  assert.equal(e.headers.get('retry-after'), '1');
  assert.equal(e.headers.get('x-ratelimit-limit'), '1');
  assert.equal(e.headers.get('x-ratelimit-remaining'), '0');
  const reset = Number(e.headers.get('x-ratelimit-reset'));
  assert.ok(reset >= Math.floor(Date.now() / 1000) && reset <= Date.now() / 1000 + 2, `X-RateLimit-Reset ${reset}`);
  assert.equal((await since(OA, b.oa)).n, 1, 'the refused call reached the upstream');
});

test('R-ANT-6 upstream 500 / 529 -> InternalServerError / OverloadedError, native bodies relayed, translated ones mapped', { timeout: T }, async () => {
  // Directives go in the prompt: /v1/messages passes no caller header but anthropic-* upstream.
  const ask = (st) => [{ role: 'user', content: `[[fake status=${st}]] hi` }];
  let before = await stats(ANT);
  let e = await mustThrow(() => pinned.messages.create({ model: 'claude', max_tokens: 8, messages: ask(500) }), 'native 500');
  assertApiError(e, Anthropic.InternalServerError, 500, 'api_error');
  assert.equal(e.error.error.message, 'fake error 500', 'not the upstream\'s own body');
  assert.match(e.error.request_id ?? '', /^req_fake\d+$/, describeErr(e));
  assert.equal(e.requestID, e.error.request_id, 'the upstream request-id header was not relayed');
  assert.equal((await since(ANT, before)).n, 1);
  before = await stats(ANT);
  e = await mustThrow(() => pinned.messages.create({ model: 'claude', max_tokens: 8, messages: ask(529) }), 'native 529');
  assertApiError(e, Anthropic.OverloadedError, 529, 'overloaded_error');
  assert.ok(e instanceof Anthropic.InternalServerError);
  assert.equal(e.error.error.message, 'Overloaded');
  assert.equal(e.headers.get('x-should-retry'), 'true', 'the upstream x-should-retry was not relayed');
  assert.ok((await since(ANT, before)).n >= 1);

  before = await stats(OA);
  e = await mustThrow(() => sdk.messages.create({ model: 'gpt', max_tokens: 8, messages: ask(500) }), 'translated 500');
  assertApiError(e, Anthropic.InternalServerError, 500, 'api_error');
  e = await mustThrow(() => sdk.messages.create({ model: 'gpt', max_tokens: 8, messages: ask(529) }), 'translated 529');
  assertApiError(e, Anthropic.OverloadedError, 529, 'overloaded_error');
  assert.ok((await since(OA, before)).n >= 2);
});

test('R-ANT-6 upstream 429 -> RateLimitError with the upstream\'s Retry-After, native and translated', { timeout: T }, async () => {
  let before = await stats(ANT);
  let e = await mustThrow(() => pinned.messages.create({ model: 'claude', max_tokens: 8,
    messages: [{ role: 'user', content: '[[fake status=429]] slow' }] }), 'native 429');
  assertApiError(e, Anthropic.RateLimitError, 429, 'rate_limit_error');
  assert.equal(e.error.error.message, 'fake error 429');
  assert.equal(e.headers.get('retry-after'), '1');
  assert.match(e.requestID ?? '', /^req_fake\d+$/);
  assert.equal((await since(ANT, before)).n, 1, 'a 429 was retried');
  before = await stats(OA);
  e = await mustThrow(() => sdk.messages.create({ model: 'gpt', max_tokens: 8,
    messages: [{ role: 'user', content: '[[fake status=429 retry_after=2]] slow' }] }), 'translated 429');
  assertApiError(e, Anthropic.RateLimitError, 429, 'rate_limit_error');
  assert.equal(e.headers.get('retry-after'), '2');
  assert.equal((await since(OA, before)).n, 1, 'a 429 was retried');
});

test('R-ANT-6 an error inside a stream (event: error) -> the SDK stream throws APIError after the first deltas', { timeout: T }, async () => {
  for (const [client, model, type] of [[pinned, 'claude', 'overloaded_error'], [sdk, 'gpt', 'api_error']]) {
    const stream = await client.messages.create({
      model, max_tokens: 64, stream: true, messages: [{ role: 'user', content: '[[fake error_after=2]] go' }],
    });
    const [evs, err] = await drain(stream);
    assert.ok(err instanceof Anthropic.APIError && !(err instanceof Anthropic.APIConnectionError), `${model}: ${describeErr(err)}`);
    assert.equal(err.error?.error?.type, type, `${model}: ${describeErr(err)}`);
    const text = evs.filter((e) => e.type === 'content_block_delta').map((e) => e.delta.text).join('');
    assert.equal(text, 'w1 w2 ', `${model}: text before the error`);
    assert.ok(!evs.some((e) => e.type === 'message_stop'), `${model}: a message_stop before the error`);
  }
});

// ---- headers and query that must travel unchanged (native) ----

test('R-ANT-6 anthropic-beta, ?beta=true and anthropic-version reach the anthropic upstream unchanged', { timeout: T }, async () => {
  const betas = ['prompt-caching-2024-07-31', 'token-efficient-tools-2025-02-19'];
  // The 0.x line puts ?beta=true in the URL of beta.messages itself; the 1.x line does not,
  // so it is given the query as a request option.
  for (const [what, Cls, opts, reqOpts] of [
    ['0.x', Anthropic0, {}, undefined],
    ['1.x', Anthropic, { defaultHeaders: { 'anthropic-version': STAND_IN_VERSION } }, { query: { beta: 'true' } }]]) {
    const rec = recorder();
    const c = new Cls({ ...common, apiKey: KEY, fetch: rec.fetch, ...opts });
    const before = await stats(ANT);
    const m = await c.beta.messages.create({ model: 'claude', max_tokens: 16, messages: ASK, betas }, reqOpts);
    assert.deepEqual(m.content, [{ type: 'text', text: WORDS }], what);
    const sent = rec.sent.at(-1);
    assert.equal(new URL(sent.url).search, '?beta=true', `${what}: ${sent.url}`);
    assert.equal(sent.headers.get('anthropic-beta'), betas.join(','), `${what}: the SDK's anthropic-beta`);
    const up = await since(ANT, before);
    assert.equal(up.n, 1, what);
    assertNativeRequest(up.last);
    assert.equal(up.last.query, 'beta=true', what);
    assert.equal(up.last.headers['anthropic-beta'], betas.join(','), what);
    assert.equal(up.last.headers['anthropic-version'], STAND_IN_VERSION, what);
    assert.equal(up.last.body, JSON.stringify({ model: 'claude-real', max_tokens: 16, messages: ASK }), what);
  }

  // The caller's version, not the endpoint's default.
  let before = await stats(ANT);
  const old = new Anthropic({ ...common, apiKey: KEY, defaultHeaders: { 'anthropic-version': '2023-01-01' } });
  await old.messages.create({ model: 'claude', max_tokens: 16, messages: ASK });
  let up = await since(ANT, before);
  assert.equal(up.last.headers['anthropic-version'], '2023-01-01');

  // The 1.x SDK's own version travels too: the stand-in refuses it, and its refusal comes back.
  before = await stats(ANT);
  const e = await mustThrow(() => sdk.messages.create({ model: 'claude', max_tokens: 16, messages: ASK }), 'version 2026-10-21');
  up = await since(ANT, before);
  assert.equal(up.n, 1);
  assert.equal(up.last.headers['anthropic-version'], wire.sent.at(-1).headers.get('anthropic-version'));
  assertApiError(e, Anthropic.BadRequestError, 400, 'invalid_request_error');
  assert.equal(e.error.error.message, 'anthropic-version: invalid version');
  assert.match(e.requestID ?? '', /^req_fake\d+$/);

  // No version at all: the endpoint's (2023-06-01).
  before = await stats(ANT);
  const r = await fetch(`${BASE}/v1/messages`, {
    method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'claude', max_tokens: 16, messages: ASK }),
  });
  assert.equal(r.status, 200, await r.text());
  up = await since(ANT, before);
  assert.equal(up.last.headers['anthropic-version'], '2023-06-01');
});

// ---- both ways of sending the key ----

test('R-ANT-6 the key as x-api-key and as Authorization: Bearer, both SDK lines, both endpoint kinds', { timeout: T }, async () => {
  const cases = [
    ['1.x apiKey', Anthropic, { apiKey: KEY, defaultHeaders: { 'anthropic-version': STAND_IN_VERSION } }, 'bearer'],
    ['1.x authToken', Anthropic, { apiKey: null, authToken: KEY, defaultHeaders: { 'anthropic-version': STAND_IN_VERSION } }, 'bearer'],
    ['1.x x-api-key header', Anthropic, { apiKey: null, authToken: null,
      defaultHeaders: { 'x-api-key': KEY, 'anthropic-version': STAND_IN_VERSION } }, 'x-api-key'],
    ['0.x apiKey', Anthropic0, { apiKey: KEY }, 'x-api-key'],
    ['0.x authToken', Anthropic0, { apiKey: null, authToken: KEY }, 'bearer'],
  ];
  for (const [what, Cls, opts, how] of cases) {
    const rec = recorder();
    const c = new Cls({ ...common, ...opts, fetch: rec.fetch });
    for (const model of ['claude', 'gpt']) {
      const b = await both();
      const m = await c.messages.create({ model, max_tokens: 16, messages: ASK });
      assert.deepEqual(m.content, [{ type: 'text', text: WORDS }], `${what} ${model}`);
      const h = rec.sent.at(-1).headers;
      if (how === 'bearer') {
        assert.equal(h.get('authorization'), `Bearer ${KEY}`, `${what}: the SDK did not send Bearer`);
        assert.equal(h.get('x-api-key'), null, what);
      } else {
        assert.equal(h.get('x-api-key'), KEY, `${what}: the SDK did not send x-api-key`);
        assert.equal(h.get('authorization'), null, what);
      }
      const up = await since(model === 'claude' ? ANT : OA, model === 'claude' ? b.ant : b.oa);
      assert.equal(up.n, 1, `${what} ${model}`);
      assert.ok(!JSON.stringify(up.last).includes(KEY), `${what} ${model}: the caller key went upstream`);
      if (model === 'claude') assertNativeRequest(up.last);
    }
  }
});

// ---- usage of a native call (R-ANT-7: the cache parts are recorded) ----

test('R-ANT-7 a native call\'s usage row keeps input, output and the cache parts', { timeout: T }, async () => {
  const { response } = await pinned.messages.create({
    model: 'claude', max_tokens: 16,
    messages: [{ role: 'user', content: '[[fake cache_read_tokens=7 cache_write_tokens=2]] count me' }],
  }).withResponse();
  const rid = response.headers.get('x-request-id');
  const q = 'SELECT path, status, prompt_tokens, completion_tokens, cache_read_tokens, cache_creation_tokens, model, routed_model '
    + 'FROM usage_events WHERE request_id = ?';
  const deadline = Date.now() + 8000;
  let rows = [];
  while (Date.now() < deadline) {
    rows = JSON.parse(execFileSync('python3', ['-c',
      'import json,sqlite3,sys; c=sqlite3.connect(sys.argv[1], timeout=10); c.row_factory=sqlite3.Row;'
      + ' print(json.dumps([dict(r) for r in c.execute(sys.argv[2], (sys.argv[3],))]))', ENV.db, q, rid]).toString());
    if (rows.length) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(rows.length, 1, `no usage row for ${rid}`);
  const row = rows[0];
  assert.equal(row.path, '/v1/messages');
  assert.equal(row.status, 200);
  assert.equal(row.model, 'claude');
  assert.equal(row.routed_model, 'claude-real');
  assert.equal(row.completion_tokens, 3);
  assert.equal(row.cache_read_tokens, 7);
  assert.equal(row.cache_creation_tokens, 2);
  // prompt_tokens is all input: the stand-in's input_tokens (the 5 prompt words, the directive included) plus both cache parts.
  assert.equal(row.prompt_tokens, 5 + 7 + 2, JSON.stringify(row));
});
