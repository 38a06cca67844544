import http from 'node:http';
import { GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';

/**
 * Issue 10, defects 5–7: browser-origin attacks, redaction gaps, and bad input that got a 500 or
 * was silently changed. Requests go over raw HTTP so every header and byte is the test's choice.
 */
let upstream: ReferenceUpstream;
let t: TestProxy;

beforeAll(async () => {
  upstream = await startReferenceUpstream({ chunkTokens: 1, chunkDelayMs: 40 });
  t = await startTestProxy(upstream.url);
});

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

interface Reply {
  status: number;
  body: string;
}

function send(method: string, pathname: string, body: string | Buffer | null, headers: Record<string, string> = {}, target: TestProxy = t): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port: target.proxy.port, method, path: pathname, headers: { 'content-type': 'application/json', ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(body ?? undefined);
  });
}

const chat = (content: string) => JSON.stringify({ model: 'm', messages: [{ role: 'user', content }] });
const callsIn = (session: string) => t.store.requests.list(session);

describe('browser-origin protection', () => {
  it("a cross-site text/plain POST (no preflight) is refused 403 in the caller's format, not recorded, never reaches the GPU", async () => {
    const before = upstream.requestCount();
    const r = await send('POST', '/s/evil/v1/chat/completions', chat('write into your training data'), {
      'content-type': 'text/plain',
      origin: 'http://evil.example',
      'sec-fetch-site': 'cross-site',
    });
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body).error).toMatchObject({ type: 'permission_error', message: expect.stringMatching(/evil\.example|cross-site/) });
    // Sec-Fetch-Site alone (no Origin header) is enough: a sibling subdomain's page is still a page.
    for (const site of ['cross-site', 'same-site']) {
      const marked = await send('POST', '/s/evil/v1/chat/completions', chat('hi'), { 'sec-fetch-site': site });
      expect(marked.status).toBe(403);
      expect(JSON.parse(marked.body).error.message).toContain(`marked this request ${site} (Sec-Fetch-Site)`);
    }
    const anthropic = await send('POST', '/s/evil/v1/messages', '{}', { origin: 'http://evil.example' });
    expect(JSON.parse(anthropic.body)).toMatchObject({ type: 'error', error: { type: 'permission_error' } });
    expect(upstream.requestCount()).toBe(before);
    expect(callsIn('evil')).toHaveLength(0);
  });

  it('a DNS-rebinding Host is refused; --allow-host admits a name the user chose', async () => {
    const rebinding = await send('POST', '/s/rebind/v1/chat/completions', chat('hi'), { host: `attacker.example:${t.proxy.port}` });
    expect(rebinding.status).toBe(403);
    expect(rebinding.body).toMatch(/--allow-host attacker\.example/);
    expect((await send('GET', '/health', null, { host: 'attacker.example' })).status).toBe(403);
    expect(callsIn('rebind')).toHaveLength(0);
    const allowed = await startTestProxy(upstream.url, { allowHosts: ['gpu-box.internal'] });
    try {
      expect((await send('POST', '/v1/chat/completions', chat('hi'), { host: `gpu-box.internal:${allowed.proxy.port}` }, allowed)).status).toBe(200);
    } finally {
      await allowed.close();
    }
  });

  it("plain clients keep working: no Origin (curl -d, SDKs), the proxy's own origin, localhost", async () => {
    expect((await send('POST', '/s/plain/v1/chat/completions', chat('hi'))).status).toBe(200);
    expect(
      (await send('POST', '/s/plain/v1/chat/completions', chat('hi'), { origin: `http://127.0.0.1:${t.proxy.port}`, 'sec-fetch-site': 'same-origin' })).status,
    ).toBe(200);
    expect((await send('POST', '/s/plain/v1/chat/completions', chat('hi'), { host: `localhost:${t.proxy.port}` })).status).toBe(200);
    // A user typing the URL (Sec-Fetch-Site: none) is not a page acting on its own.
    expect((await send('POST', '/s/plain/v1/chat/completions', chat('hi'), { 'sec-fetch-site': 'none' })).status).toBe(200);
    expect(callsIn('plain')).toHaveLength(4);
  });
});

describe('redaction by name', () => {
  it('credential headers outside any fixed list are stored redacted, and their values scrubbed from bodies', async () => {
    const token = 'tok-SECRET-1234567890';
    const key = 'sk-proj-SECRET-0987654321';
    await send('POST', '/s/redact/v1/chat/completions?access_token=qp-SECRET-55555555&alt=x', chat(`echo ${key} please`), {
      'x-auth-token': token,
      'openai-api-key': key,
      'x-custom-session': 'abc',
    });
    const row = t.store.requests.get(callsIn('redact')[0]!.id)!;
    expect(row.requestHeaders).toMatchObject({ 'x-auth-token': '[redacted]', 'openai-api-key': '[redacted]', 'x-custom-session': '[redacted]' });
    expect(row.path).toBe('/s/redact/v1/chat/completions?access_token=%5Bredacted%5D&alt=x');
    const stored = JSON.stringify(row);
    for (const secret of [token, key, 'qp-SECRET-55555555']) expect(stored).not.toContain(secret);
    expect(row.originalRequest).toContain('echo [redacted] please');
  });

  it("Google's ?key= is accepted as the auth token", async () => {
    const guarded = await startTestProxy(upstream.url, { authToken: 'polar-token-123456' });
    try {
      const path = '/v1beta/models/gemini-2.5-pro:generateContent';
      const body = JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] });
      expect((await send('POST', `${path}?key=polar-token-123456`, body, {}, guarded)).status).toBe(200);
      const wrong = await send('POST', `${path}?key=nope`, body, {}, guarded);
      expect(wrong.status).toBe(401);
      expect(JSON.parse(wrong.body).error.status).toBe('UNAUTHENTICATED');
      // The official SDK, pointed at the proxy with the token as its API key.
      const genai = new GoogleGenAI({ apiKey: 'polar-token-123456', httpOptions: { baseUrl: guarded.proxy.url } });
      const reply = await genai.models.generateContent({ model: 'gemini-2.5-pro', contents: 'hello' });
      expect(reply.text).toMatch(/Hello!/);
      const stored = guarded.store.requests.list(guarded.session).map((c) => guarded.store.requests.get(c.id)!);
      expect(JSON.stringify(stored)).not.toContain('polar-token-123456');
    } finally {
      await guarded.close();
    }
  });
});

describe('bad input', () => {
  it("100 000-deep JSON is a 400 in the caller's format, not a stack overflow", async () => {
    const deep = `{"model":"m","messages":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    const r = await send('POST', '/s/bad/v1/chat/completions', deep);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body).error.message).toMatch(/nests deeper than 512/);
    const g = await send('POST', '/s/bad/v1beta/models/m:generateContent', `{"contents":${'['.repeat(5000)}${']'.repeat(5000)}}`);
    expect(JSON.parse(g.body).error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' });
    // Brackets inside strings do not count; ordinary nesting still works.
    expect((await send('POST', '/s/bad/v1/chat/completions', chat('['.repeat(2000)))).status).toBe(200);
  });

  it('invalid UTF-8 is refused with 400, so the recorded request is exactly what was sent', async () => {
    const bytes = Buffer.concat([Buffer.from('{"model":"m","messages":[{"role":"user","content":"caf'), Buffer.from([0xc3, 0x28]), Buffer.from('"}]}')]);
    const r = await send('POST', '/s/utf8/v1/chat/completions', bytes);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body).error.message).toMatch(/not valid UTF-8/);
    const row = t.store.requests.get(callsIn('utf8')[0]!.id)!;
    expect(row.status).toBe('error');
    expect(row.originalRequest ?? '').not.toContain('\uFFFD');
  });

  it('unknown routes and wrong methods answer in the shape of the API the path belongs to', async () => {
    const anthropic = await send('GET', '/v1/messages', null);
    expect(anthropic.status).toBe(405);
    expect(JSON.parse(anthropic.body)).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    const google = await send('GET', '/v1beta/models/m:generateContent', null);
    expect(JSON.parse(google.body).error).toMatchObject({ code: 405, status: 'NOT_FOUND' });
    const googleUnknown = await send('GET', '/v1beta/whatever', null);
    expect(JSON.parse(googleUnknown.body).error).toMatchObject({ code: 404, status: 'NOT_FOUND' });
    const openai = await send('GET', '/v1/nothing-here', null);
    expect(JSON.parse(openai.body).error).toMatchObject({ type: 'not_found_error' });
  });

  it('GET /health counts the calls in flight: 0 when idle, 1 during a call', async () => {
    expect(JSON.parse((await send('GET', '/health', null)).body)).toEqual({ ok: true, inFlight: 0 });
    const client = new OpenAI({ baseURL: `${t.proxy.url}/s/health/v1`, apiKey: 'x', maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    expect(JSON.parse((await send('GET', '/health', null)).body)).toEqual({ ok: true, inFlight: 1 });
    for (let n = await it.next(); !n.done; n = await it.next());
    expect(JSON.parse((await send('GET', '/health', null)).body)).toEqual({ ok: true, inFlight: 0 });
  });
});
