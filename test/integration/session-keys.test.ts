import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { forgedSessionKey, SessionKeys } from '../../src/proxy/session-keys.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';

/**
 * Per-session capabilities (issue 24): a proxy with session keys files a call under session S only
 * when it carries S's key or the operator token. Everything else — no key, `polar-S` with no secret,
 * a guessed secret, a sibling's valid key — is a 401 in the caller's API shape and an audit row, and
 * the victim session gets nothing: no row, no call, no upstream request.
 */
let upstream: ReferenceUpstream;
let t: TestProxy;
const keys = SessionKeys.random();
const OPERATOR = 'operator-token-0123456789';

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  t = await startTestProxy(upstream.url, { defaultSession: 'cap-default', sessionKeys: keys, authToken: OPERATOR });
});

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

interface Reply {
  status: number;
  json: Record<string, unknown>;
}

function send(pathname: string, body: string, headers: Record<string, string>): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port: t.proxy.port, method: 'POST', path: pathname, headers: { 'content-type': 'application/json', ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Each API shape: where its calls go, how its SDK sends a key, and what its 401 looks like. */
const SHAPES = [
  {
    name: 'openai-chat',
    path: (s: string) => `/s/${s}/v1/chat/completions`,
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    key: (k: string): Record<string, string> => ({ authorization: `Bearer ${k}` }),
    isRefusal: (j: Record<string, unknown>) => expect(j).toMatchObject({ error: { type: 'authentication_error', message: expect.any(String) } }),
  },
  {
    name: 'anthropic-messages',
    path: (s: string) => `/s/${s}/v1/messages`,
    body: JSON.stringify({ model: 'm', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] }),
    key: (k: string): Record<string, string> => ({ 'x-api-key': k, 'anthropic-version': '2023-06-01' }),
    isRefusal: (j: Record<string, unknown>) => expect(j).toMatchObject({ type: 'error', error: { type: 'authentication_error' } }),
  },
  {
    name: 'openai-responses',
    path: (s: string) => `/s/${s}/v1/responses`,
    body: JSON.stringify({ model: 'm', input: 'hi' }),
    key: (k: string): Record<string, string> => ({ authorization: `Bearer ${k}` }),
    isRefusal: (j: Record<string, unknown>) => expect(j).toMatchObject({ error: { type: 'authentication_error' } }),
  },
  {
    name: 'google-generate-content',
    path: (s: string) => `/s/${s}/v1beta/models/m:generateContent`,
    body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    key: (k: string): Record<string, string> => ({ 'x-goog-api-key': k }),
    isRefusal: (j: Record<string, unknown>) => expect(j).toMatchObject({ error: { code: 401, status: 'UNAUTHENTICATED' } }),
  },
] as const;

/** The ways a caller without the victim's key tries to write into it. */
const ATTEMPTS = [
  { reason: 'no-key', key: null },
  { reason: 'no-secret', key: (victim: string) => `polar-${victim}` },
  { reason: 'bad-secret', key: (victim: string) => forgedSessionKey(victim) },
  { reason: 'wrong-session', key: () => keys.keyFor('attacker') },
  { reason: 'unknown-key', key: () => 'sk-not-a-polar-key' },
] as const;

describe.each(SHAPES.map((s) => [s.name, s] as const))("%s: a call without the session's key", (name, shape) => {
  it.each(ATTEMPTS.map((a) => [a.reason, a] as const))(
    "%s: 401 in the caller's shape, an audit row, nothing in the victim session",
    async (reason, attempt) => {
      const victim = `victim-${name}-${reason}`;
      const upstreamBefore = upstream.requestCount();
      const auditBefore = t.store.audit.count();
      const headers = attempt.key ? shape.key(attempt.key(victim)) : name === 'anthropic-messages' ? { 'anthropic-version': '2023-06-01' } : {};
      const r = await send(shape.path(victim), shape.body, headers);
      expect(r.status).toBe(401);
      shape.isRefusal(r.json);
      expect(JSON.stringify(r.json)).toContain(reason);
      expect(t.store.audit.count()).toBe(auditBefore + 1);
      const [row] = t.store.audit.list({ session: victim });
      expect(row).toMatchObject({ reason, claimedSession: victim, method: 'POST', path: shape.path(victim), remote: '127.0.0.1' });
      for (const h of ['authorization', 'x-api-key', 'x-goog-api-key'])
        if (row!.requestHeaders[h] !== undefined) expect(row!.requestHeaders[h]).toBe('[redacted]');
      expect(t.store.sessions.get(victim)).toBeUndefined();
      expect(t.store.requests.list(victim)).toHaveLength(0);
      expect(upstream.requestCount()).toBe(upstreamBefore);
    },
  );
});

describe('the session named by header or key alone is checked the same way', () => {
  it("x-polar-session: victim with the attacker's own valid key is refused (wrong-session)", async () => {
    const r = await send('/v1/chat/completions', SHAPES[0].body, { 'x-polar-session': 'victim-h', authorization: `Bearer ${keys.keyFor('attacker')}` });
    expect(r.status).toBe(401);
    expect(t.store.audit.list({ session: 'victim-h' })[0]).toMatchObject({ reason: 'wrong-session' });
    expect(t.store.sessions.get('victim-h')).toBeUndefined();
  });

  it("a key naming the victim with a guessed secret and no path is refused (bad-secret); Google's ?key= too, redacted in the audit path", async () => {
    const r = await send('/v1/chat/completions', SHAPES[0].body, { authorization: `Bearer ${forgedSessionKey('victim-k')}` });
    expect(r.status).toBe(401);
    expect(t.store.audit.list({ session: 'victim-k' })[0]).toMatchObject({ reason: 'bad-secret', path: '/v1/chat/completions' });
    const forged = forgedSessionKey('victim-q');
    const g = await send(`/s/victim-q/v1beta/models/m:generateContent?key=${encodeURIComponent(forged)}`, SHAPES[3].body, {});
    expect(g.status).toBe(401);
    const row = t.store.audit.list({ session: 'victim-q' })[0]!;
    expect(row.reason).toBe('bad-secret');
    expect(row.path).toBe('/s/victim-q/v1beta/models/m:generateContent?key=%5Bredacted%5D');
    expect(t.store.requests.list('victim-q')).toHaveLength(0);
  });

  it('a call naming no session and carrying no key is refused, not filed in the default session', async () => {
    const before = t.store.requests.list('cap-default').length;
    const r = await send('/v1/chat/completions', SHAPES[0].body, {});
    expect(r.status).toBe(401);
    expect(t.store.audit.list({ limit: 1 })[0]).toMatchObject({ reason: 'no-key', claimedSession: null });
    expect(t.store.requests.list('cap-default')).toHaveLength(before);
  });
});

describe("the session's own key", () => {
  const ask = (client: OpenAI) => client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });

  it('works by path, by header and by key alone (OpenAI SDK), each filed under its session', async () => {
    await ask(new OpenAI({ baseURL: t.proxy.baseUrl('owner-path'), apiKey: keys.keyFor('owner-path'), maxRetries: 0 }));
    await ask(
      new OpenAI({ baseURL: t.proxy.baseUrl(), apiKey: keys.keyFor('owner-header'), defaultHeaders: { 'x-polar-session': 'owner-header' }, maxRetries: 0 }),
    );
    await ask(new OpenAI({ baseURL: t.proxy.baseUrl(), apiKey: keys.keyFor('owner-key'), maxRetries: 0 }));
    expect(t.store.requests.list('owner-path')).toHaveLength(1);
    expect(t.store.requests.list('owner-header')).toHaveLength(1);
    expect(t.store.requests.list('owner-key')).toHaveLength(1);
    expect(t.store.sessions.get('owner-key')!.metadata).toMatchObject({ session_source: 'api-key' });
  });

  it('works with the Anthropic and Google SDKs and the Responses API', async () => {
    const anthropic = new Anthropic({ baseURL: `${t.proxy.url}/s/owner-anthropic`, apiKey: keys.keyFor('owner-anthropic'), maxRetries: 0 });
    await anthropic.messages.create({ model: 'm', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] });
    const genai = new GoogleGenAI({ apiKey: keys.keyFor('owner-google'), httpOptions: { baseUrl: `${t.proxy.url}/s/owner-google` } });
    expect((await genai.models.generateContent({ model: 'm', contents: 'hello' })).text).toBeTruthy();
    await new OpenAI({ baseURL: t.proxy.baseUrl('owner-responses'), apiKey: keys.keyFor('owner-responses'), maxRetries: 0 }).responses.create({
      model: 'm',
      input: 'hi',
    });
    for (const s of ['owner-anthropic', 'owner-google', 'owner-responses'])
      expect(
        t.store.requests.list(s).map((c) => c.httpStatus),
        s,
      ).toEqual([200]);
  });

  it('the operator token may write into any session', async () => {
    await ask(new OpenAI({ baseURL: t.proxy.baseUrl('by-operator'), apiKey: OPERATOR, maxRetries: 0 }));
    const r = await send('/s/by-operator/v1/chat/completions', SHAPES[0].body, { 'x-polar-auth-token': OPERATOR });
    expect(r.status).toBe(200);
    expect(t.store.requests.list('by-operator')).toHaveLength(2);
  });

  it('no key, secret or operator token is anywhere in the SQLite file, even when a prompt echoes the key', async () => {
    const key = keys.keyFor('owner-secret');
    const secret = key.split('~')[1]!;
    const forged = forgedSessionKey('owner-secret');
    await new OpenAI({ baseURL: t.proxy.baseUrl('owner-secret'), apiKey: key, maxRetries: 0 }).chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: `my key is ${key}` }],
    });
    expect((await send('/s/owner-secret/v1/chat/completions', SHAPES[0].body, { authorization: `Bearer ${forged}` })).status).toBe(401);
    const row = t.store.requests.get(t.store.requests.list('owner-secret')[0]!.id)!;
    expect(row.originalRequest).toContain('my key is [redacted]');
    t.store.db.pragma('wal_checkpoint(TRUNCATE)');
    const files = [t.dbPath, `${t.dbPath}-wal`].filter((f) => fs.existsSync(f));
    const bytes = Buffer.concat(files.map((f) => fs.readFileSync(f)));
    for (const needle of [key, secret, forged.split('~')[1]!, OPERATOR]) expect(bytes.includes(Buffer.from(needle)), needle).toBe(false);
    expect(path.basename(t.dbPath)).toBe('polar.db');
  });
});
