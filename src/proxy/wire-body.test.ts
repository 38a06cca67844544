import fs from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import type { CanonicalRequest, ProviderName } from '../core/chat.js';
import { CODECS } from '../providers/codecs.js';
import { normalizeRequest } from '../providers/normalize.js';
import { encodeReasoning } from '../providers/openai-responses/reasoning-content.js';
import type { Upstream } from '../upstream/types.js';
import { createVllmUpstream } from '../upstream/vllm/index.js';
import { parseAsBytes, prepareFromBytes, realize, requestFacts } from './wire-body.js';

const FIXTURES = path.resolve(import.meta.dirname, '../../fixtures/requests');
const CALL = { id: 'req_1', sessionId: 's', agentId: 'main' };
const NON_ASCII = ' — café, naïve, 日本語, 🚀, à\u00a0';

function providerOf(apiPath: string): ProviderName {
  if (apiPath.startsWith('/v1/messages')) return 'anthropic-messages';
  if (apiPath.startsWith('/v1/responses')) return 'openai-responses';
  if (apiPath.includes(':generateContent') || apiPath.includes(':streamGenerateContent')) return 'google-generate-content';
  return 'openai-chat';
}

/** Every recorded harness request, as sent and with non-ASCII text (ending in a no-break space) added to each long string. */
function bodies(): { name: string; apiPath: string; body: unknown }[] {
  const out: { name: string; apiPath: string; body: unknown }[] = [];
  for (const harness of fs.readdirSync(FIXTURES).filter((d) => fs.statSync(path.join(FIXTURES, d)).isDirectory())) {
    for (const file of fs.readdirSync(path.join(FIXTURES, harness)).filter((f) => /^\d\d-.*\.json$/.test(f))) {
      const fixture = JSON.parse(fs.readFileSync(path.join(FIXTURES, harness, file), 'utf8')) as { path: string; body: unknown };
      const apiPath = fixture.path.split('?')[0]!;
      out.push({ name: `${harness}/${file}`, apiPath, body: fixture.body });
      out.push({ name: `${harness}/${file} + non-ASCII`, apiPath, body: spice(fixture.body) });
    }
  }
  // Claude Code's billing line in a block with more text: the rest is trimmed, and must end the same.
  const system = [{ type: 'text', text: `x-anthropic-billing-header: cc_version=2.1\nTu es utile. Voilà${NON_ASCII}` }];
  out.push({ name: 'billing line', apiPath: '/v1/messages', body: { model: 'm', max_tokens: 64, system, messages: [{ role: 'user', content: 'Salut' }] } });
  return out;
}

function spice(value: unknown): unknown {
  if (typeof value === 'string') return value.length > 24 ? value + NON_ASCII : value;
  if (Array.isArray(value)) return value.map(spice);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, spice(v)]));
  return value;
}

/** The request as the text path understands it: the decoded text, decoded and normalized. */
function canonicalViaText(apiPath: string, text: string): CanonicalRequest {
  return normalizeRequest(CODECS[providerOf(apiPath)].decodeRequest(JSON.parse(text), { path: apiPath }), { contextWindow: 32_768 });
}

/** The upstream body the text path builds: decoded text, decoded request, prepared, encoded. */
function viaText(upstream: Upstream, apiPath: string, text: string): Buffer {
  const canonical = canonicalViaText(apiPath, text);
  return Buffer.from(upstream.prepare(canonical, 'Qwen/Qwen3-8B', CALL).text, 'utf8');
}

/** What the proxy sends for these bytes on the byte path; null where it takes the text path. */
function viaBytes(upstream: Upstream, apiPath: string, bytes: Buffer): Buffer | null {
  const json = parseAsBytes(bytes);
  if (json === undefined) return null;
  // Frozen: the proxy realizes the same parsed value afterwards, so decoding must leave it as parsed
  // (a codec that wrote to it would throw here, and the byte path would be refused).
  const got = prepareFromBytes(deepFreeze(json), CODECS[providerOf(apiPath)], upstream, {
    path: apiPath,
    contextWindow: 32_768,
    servedModel: 'Qwen/Qwen3-8B',
    call: CALL,
    bytes,
  });
  return got?.upstreamReq.bytes ?? null;
}

describe('the upstream body built from the request bytes', () => {
  const upstream = createVllmUpstream({ baseUrl: 'http://127.0.0.1:9' });

  it('gives the record and the reply the same request facts as decoding the text, for every recorded harness request', () => {
    for (const { name, apiPath, body } of bodies()) {
      const text = JSON.stringify(body);
      const codec = CODECS[providerOf(apiPath)];
      for (const servedModel of ['Qwen/Qwen3-8B', null]) {
        const bytes = Buffer.from(text, 'utf8');
        const got = prepareFromBytes(deepFreeze(parseAsBytes(bytes)), codec, upstream, {
          path: apiPath,
          contextWindow: 32_768,
          servedModel,
          call: CALL,
          bytes,
        });
        const canonical = canonicalViaText(apiPath, text);
        expect(got!.facts(), `${name} (${servedModel})`).toStrictEqual(requestFacts(canonical, servedModel ?? canonical.requestedModel));
      }
    }
    // A requested model and Responses' echoed instructions and tools hold non-ASCII text here.
    const echoed = {
      model: 'modèle-日本',
      instructions: `Sois bref${NON_ASCII}`,
      tools: [{ type: 'function', name: 'lire_fichier', description: `Lit un fichier${NON_ASCII}`, parameters: { type: 'object', properties: {} } }],
      input: 'Salut',
    };
    const echoedBytes = Buffer.from(JSON.stringify(echoed));
    const facts = prepareFromBytes(parseAsBytes(echoedBytes), CODECS['openai-responses'], upstream, {
      path: '/v1/responses',
      contextWindow: null,
      servedModel: null,
      call: CALL,
      bytes: echoedBytes,
    })!.facts();
    expect(facts.model).toBe('modèle-日本');
    expect(JSON.stringify(facts.reply)).toContain(`Lit un fichier${NON_ASCII}`);
    expect(JSON.stringify(facts.reply)).toContain(`Sois bref${NON_ASCII}`);
  });

  it('is byte for byte the body the text path builds, for every recorded harness request', () => {
    const all = bodies();
    expect(all.length).toBeGreaterThanOrEqual(20);
    for (const { name, apiPath, body } of all) {
      const text = JSON.stringify(body);
      const bytes = viaBytes(upstream, apiPath, Buffer.from(text, 'utf8'));
      expect(bytes, name).not.toBeNull();
      expect(bytes!.equals(viaText(upstream, apiPath, text)), name).toBe(true);
    }
  });

  it('decodes polar’s own Responses reasoning item to the same bytes', () => {
    const body = {
      model: 'gpt-5',
      input: [
        { type: 'message', role: 'user', content: 'Bonjour, ça va ?' },
        { type: 'reasoning', summary: [], encrypted_content: encodeReasoning('Il faut répondre — 日本語 🚀') },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Très bien.' }] },
        { type: 'message', role: 'user', content: 'Et après ?' },
      ],
    };
    const text = JSON.stringify(body);
    const bytes = viaBytes(upstream, '/v1/responses', Buffer.from(text));
    expect(bytes!.toString('utf8')).toContain('Il faut répondre — 日本語 🚀');
    expect(bytes!.equals(viaText(upstream, '/v1/responses', text))).toBe(true);
  });

  it('keeps the max_tokens decision: the prompt estimate counts UTF-8 bytes either way', () => {
    // ~3 bytes per character: counted in characters this would keep max_tokens, in bytes it cannot.
    const body = { model: 'm', max_tokens: 20_000, messages: [{ role: 'user', content: '日本語'.repeat(12_000) }] };
    const text = JSON.stringify(body);
    const bytes = viaBytes(upstream, '/v1/chat/completions', Buffer.from(text))!;
    expect(JSON.parse(bytes.toString('utf8')).max_tokens).toBeUndefined();
    expect(bytes.equals(viaText(upstream, '/v1/chat/completions', text))).toBe(true);
  });

  it('is not used where strings would be read or mixed in: non-ASCII escapes, earlier responses, rendering upstreams', () => {
    const chat = (content: string) => Buffer.from(`{"model":"m","messages":[{"role":"user","content":"${content}"}]}`);
    expect(viaBytes(upstream, '/v1/chat/completions', chat('caf\\u00e9'))).toBeNull();
    expect(viaBytes(upstream, '/v1/chat/completions', chat('\\ud83d\\ude80'))).toBeNull();
    // ASCII escapes read the same either way: a translated body is written as the text path writes
    // it, and a Chat message shared with the request goes as the harness wrote it (body-splice.ts).
    const escaped = 'tab\\u0009quote\\u0022 café';
    const anthropic = Buffer.from(`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"${escaped}"}]}`);
    expect(viaBytes(upstream, '/v1/messages', anthropic)!.equals(viaText(upstream, '/v1/messages', anthropic.toString()))).toBe(true);
    const passed = viaBytes(upstream, '/v1/chat/completions', chat(escaped))!.toString();
    expect(passed).toContain(`{"role":"user","content":"${escaped}"}`);
    expect(JSON.parse(passed)).toEqual(JSON.parse(viaText(upstream, '/v1/chat/completions', chat(escaped).toString()).toString()));
    const follow = Buffer.from(JSON.stringify({ model: 'm', previous_response_id: 'resp_1', input: 'é' }));
    expect(viaBytes(upstream, '/v1/responses', follow)).toBeNull();
    const rendering = Object.create(upstream, { prepareBody: { value: undefined } }) as Upstream;
    expect(viaBytes(rendering, '/v1/chat/completions', chat('hi'))).toBeNull();
    // Not JSON, or no model: the text path reports it.
    expect(viaBytes(upstream, '/v1/chat/completions', Buffer.from('{"model":"m",'))).toBeNull();
  });
});

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** realize over a whole byte reading (the proxy realizes the request facts this way, part by part); null where the text path is taken. */
function parseUtf8Json(bytes: Buffer): unknown {
  const json = parseAsBytes(bytes);
  return json === undefined ? null : realize(json);
}

describe('what an in-flight call keeps of its request', () => {
  it('is none of the parsed conversation: the facts are read out before the send, so it can be collected while the server generates', async () => {
    // `gc` on demand in this process only; a test of retention needs a real collection.
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const upstream = createVllmUpstream({ baseUrl: 'http://127.0.0.1:1/v1' });
    for (const { name, apiPath, body } of bodies().filter((b) => b.name.endsWith('non-ASCII'))) {
      const bytes = Buffer.from(JSON.stringify(body));
      const { facts, parsed } = prepareAndForget(upstream, apiPath, bytes);
      // A WeakRef keeps its target alive until the job that made it ends.
      await new Promise((resolve) => setImmediate(resolve));
      gc();
      expect(parsed.filter((ref) => ref.deref() !== undefined).length, name).toBe(0);
      // …and the facts are still there, whole.
      const canonical = canonicalViaText(apiPath, bytes.toString('utf8'));
      expect(facts(), name).toEqual(requestFacts(canonical, 'Qwen/Qwen3-8B'));
    }
  });
});

/**
 * The byte path's facts for `bytes`, and weak references to every object and array of the parsed
 * conversation (made in a frame of its own, so nothing here holds them). The conversation is nearly
 * all of a request; the rest may be kept on purpose until the reply is encoded (a Responses reply
 * echoes the request's tools).
 */
function prepareAndForget(upstream: Upstream, apiPath: string, bytes: Buffer): { facts: () => unknown; parsed: WeakRef<object>[] } {
  const json = parseAsBytes(bytes) as object;
  const got = prepareFromBytes(json, CODECS[providerOf(apiPath)], upstream, {
    path: apiPath,
    contextWindow: 32_768,
    servedModel: 'Qwen/Qwen3-8B',
    call: CALL,
    bytes,
  });
  if (!got) throw new Error(`${apiPath}: the byte path was not taken`);
  const parsed: WeakRef<object>[] = [];
  const walk = (value: unknown): void => {
    if (value === null || typeof value !== 'object') return;
    parsed.push(new WeakRef(value));
    for (const v of Object.values(value)) walk(v);
  };
  for (const key of ['messages', 'input', 'contents', 'system', 'systemInstruction']) walk((json as Record<string, unknown>)[key]);
  return { facts: got.facts, parsed };
}

describe('parseAsBytes, then realize', () => {
  it('gives what JSON.parse of the decoded text gives, keys and `__proto__` included', () => {
    for (const { body } of bodies()) {
      const text = JSON.stringify(body);
      expect(parseUtf8Json(Buffer.from(text))).toEqual(JSON.parse(text));
    }
    const odd = '{"clé 🚀":{"__proto__":{"x":"ü"}},"a":["\\u0041é",1,null,true]}';
    const got = parseUtf8Json(Buffer.from(odd)) as Record<string, Record<string, unknown>>;
    expect(got).toEqual(JSON.parse(odd));
    expect(Object.getPrototypeOf(got['clé 🚀'])).toBe(Object.prototype);
    expect(Object.keys(got['clé 🚀']!)).toEqual(['__proto__']);
    expect(parseUtf8Json(Buffer.from('{"a":"\\u00e9"}'))).toBeNull();
    expect(parseUtf8Json(Buffer.from('{"a":'))).toBeNull();
  });
});
