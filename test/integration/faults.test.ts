import http from 'node:http';
import net from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { patient } from '../support/patience.js';
import { waitUntil } from '../support/wait.js';

let upstream: ReferenceUpstream;
let t: TestProxy;

beforeAll(async () => {
  upstream = await startReferenceUpstream({ chunkDelayMs: 5 });
  t = await startTestProxy(upstream.url, { maxBodyBytes: 4096, upstreamTimeoutMs: 500 });
});

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const chatBody = (extra: Record<string, unknown> = {}) => JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...extra });

async function post(path: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${t.proxy.url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
  return { status: res.status, text: await res.text() };
}

function lastCall() {
  const calls = t.store.requests.list(t.session);
  return t.store.requests.get(calls[calls.length - 1]!.id)!;
}

/** After any fault the proxy must still serve a normal call. */
async function expectStillServing() {
  const res = await post('/v1/chat/completions', chatBody());
  expect(res.status).toBe(200);
  expect(lastCall().status).toBe('ok');
}

describe('bad input', () => {
  it('malformed JSON → 400 in the OpenAI error shape, recorded with the body as sent', async () => {
    const res = await post('/v1/chat/completions', '{"model": "m", "messages": [');
    expect(res.status).toBe(400);
    const body = JSON.parse(res.text);
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'polar_bad_request' });
    expect(body.error.message).toMatch(/not valid JSON/);
    const row = lastCall();
    expect(row).toMatchObject({ status: 'error', httpStatus: 400, errorCode: 'POLAR_BAD_REQUEST', originalRequest: '{"model": "m", "messages": [' });
    await expectStillServing();
  });

  it('a body that is JSON but not a chat request → 400 naming the field', async () => {
    const res = await post('/v1/chat/completions', JSON.stringify({ model: 'm', messages: [] }));
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text).error.param).toBe('messages');
    expect(lastCall().status).toBe('error');
  });

  it('n > 1 is refused with a reason rather than silently capturing one sample', async () => {
    const res = await post('/v1/chat/completions', chatBody({ n: 2 }));
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text).error.message).toMatch(/one sample per call/);
  });

  it('a body over --max-body → 413, with Content-Length and chunked alike', async () => {
    const big = chatBody({ padding: 'x'.repeat(8000) });
    const res = await post('/v1/chat/completions', big);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.text).error.message).toMatch(/--max-body/);
    expect(lastCall()).toMatchObject({ status: 'error', httpStatus: 413, errorCode: 'POLAR_BODY_TOO_LARGE' });

    const chunked = await new Promise<number>((resolve, reject) => {
      const req = http.request(`${t.proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      for (let i = 0; i < 10; i++) req.write('x'.repeat(1000));
      req.end();
    });
    expect(chunked).toBe(413);
    expect(lastCall().httpStatus).toBe(413);
    await expectStillServing();
  });

  it('an unknown route → 404 naming the supported routes, recorded', async () => {
    const res = await post('/v1/embeddings', chatBody());
    expect(res.status).toBe(404);
    expect(JSON.parse(res.text).error.message).toContain('POST /v1/chat/completions');
    expect(lastCall()).toMatchObject({ status: 'error', httpStatus: 404, provider: 'unknown', path: '/v1/embeddings' });
  });
});

describe('upstream faults', () => {
  it('upstream 5xx → 502 with the upstream message, recorded', async () => {
    upstream.fault('http-500');
    const res = await post('/v1/chat/completions', chatBody());
    expect(res.status).toBe(502);
    expect(JSON.parse(res.text).error.message).toContain('EngineCore encountered an issue');
    expect(lastCall()).toMatchObject({ status: 'error', httpStatus: 502, errorCode: 'POLAR_UPSTREAM_STATUS' });
    await expectStillServing();
  });

  it('an upstream context-length 400 stays a 400 with code context_length_exceeded (harnesses route on it)', async () => {
    upstream.fault('http-400-context');
    const res = await post('/v1/chat/completions', chatBody());
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text).error).toMatchObject({ code: 'context_length_exceeded', param: 'messages' });
  });

  it('upstream that never answers → 504 after --upstream-timeout, recorded', async () => {
    upstream.fault('stall');
    const res = await post('/v1/chat/completions', chatBody());
    expect(res.status).toBe(504);
    expect(lastCall()).toMatchObject({ status: 'error', httpStatus: 504, errorCode: 'POLAR_UPSTREAM_HEADERS_TIMEOUT' });
    await expectStillServing();
  });

  it('upstream reply that is not JSON → 502, recorded', async () => {
    upstream.fault('bad-json');
    const res = await post('/v1/chat/completions', chatBody());
    expect(res.status).toBe(502);
    expect(lastCall()).toMatchObject({ status: 'error', errorCode: 'POLAR_UPSTREAM_PROTOCOL' });
  });

  it('upstream refused (nothing listening) → 502, recorded, and the proxy keeps serving', async () => {
    const port = await freePort();
    const dead = await startTestProxy(`http://127.0.0.1:${port}`);
    try {
      const res = await fetch(`${dead.proxy.baseUrl()}/chat/completions`, { method: 'POST', body: chatBody() });
      expect(res.status).toBe(502);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/ECONNREFUSED/);
      const row = dead.store.requests.list(dead.session)[0]!;
      expect(row).toMatchObject({ status: 'error', httpStatus: 502, errorCode: 'POLAR_UPSTREAM_CONNECT' });
      const again = await fetch(`${dead.proxy.baseUrl()}/chat/completions`, { method: 'POST', body: chatBody() });
      expect(again.status).toBe(502);
      expect(dead.store.requests.list(dead.session)).toHaveLength(2);
    } finally {
      await dead.close();
    }
  });

  it('upstream drops the connection mid-stream → an in-stream error the SDK raises; partial tokens kept', async () => {
    upstream.fault('drop');
    const client = new OpenAI({ baseURL: t.proxy.baseUrl(), apiKey: 'x', maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    let received = 0;
    await expect(
      (async () => {
        for await (const _ of stream) received++;
      })(),
    ).rejects.toThrow();
    expect(received).toBeGreaterThan(0);
    const row = lastCall();
    expect(row.status).toBe('error');
    expect(row.httpStatus).toBe(200);
    expect(row.promptIds!.length).toBeGreaterThan(0);
    expect(row.sampledIds!.length).toBeGreaterThan(0);
    expect(row.sampledIds!.length).toBeLessThan(upstream.calls[upstream.calls.length - 1]!.reply.ids.length);
    expect(row.reply).toContain('"error"');
    await expectStillServing();
  });

  it('an error event inside the upstream stream is relayed as an error and recorded', async () => {
    upstream.fault('error-event');
    const res = await post('/v1/chat/completions', chatBody({ stream: true }));
    expect(res.status).toBe(200);
    expect(res.text).toContain('CUDA error');
    expect(res.text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(lastCall()).toMatchObject({ status: 'error', errorCode: 'POLAR_UPSTREAM_STATUS' });
  });
});

describe('harness disconnects', () => {
  it('mid-stream: the upstream request is aborted and the call recorded as aborted with what arrived', async () => {
    const slow = await startReferenceUpstream({ chunkDelayMs: 40 });
    const p = await startTestProxy(slow.url);
    try {
      const gone = slow.clientGone();
      await new Promise<void>((resolve, reject) => {
        const req = http.request(`${p.proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
          let chunks = 0;
          res.on('data', () => {
            if (++chunks === 3) {
              req.destroy();
              resolve();
            }
          });
        });
        req.on('error', () => undefined);
        req.end(chatBody({ stream: true }));
        setTimeout(() => reject(new Error('no data')), patient(5000)).unref();
      });
      await gone; // the proxy aborted its upstream request
      await waitUntil('the row to be marked aborted', () => p.store.requests.list(p.session)[0]?.status === 'aborted', { everyMs: 10 });
      const row = p.store.requests.get(p.store.requests.list(p.session)[0]!.id)!;
      expect(row.errorCode).toBe('POLAR_CLIENT_ABORTED');
      expect(row.promptIds!.length).toBeGreaterThan(0);
      expect(row.sampledIds!.length).toBeLessThan(slow.calls[0]!.reply.ids.length);
      expect(row.sampledIds).toEqual(slow.calls[0]!.reply.ids.slice(0, row.sampledIds!.length));
      expect(row.logprobs).toHaveLength(row.sampledIds!.length);
    } finally {
      await p.close();
      await slow.close();
    }
  });
});

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('a database that refuses the write', () => {
  it('never lets an unrecorded reply reach the harness: an error instead, in either mode', async () => {
    const p = await startTestProxy(upstream.url);
    try {
      // Break the final write only: the small begin row still goes in, the end transaction cannot.
      p.store.db.exec('DROP TABLE request_bodies');
      const warnings: string[] = [];
      const onWarning = (w: Error) => warnings.push(w.message);
      process.on('warning', onWarning);
      const plain = await fetch(`${p.proxy.baseUrl()}/chat/completions`, { method: 'POST', body: chatBody() });
      expect(plain.status).toBe(500);
      expect(((await plain.json()) as { error: { code: string } }).error.code).toBe('polar_store_write');

      const streamed = await fetch(`${p.proxy.baseUrl()}/chat/completions`, { method: 'POST', body: chatBody({ stream: true }) });
      const text = await streamed.text();
      // Content chunks went out as they came; the close did not: an error event takes [DONE]'s place
      // first, so an SDK raises instead of accepting a reply the database does not have.
      const events = text.split('\n\n').filter(Boolean);
      expect(events.at(-2)).toContain('polar_store_write');
      expect(events.at(-1)).toBe('data: [DONE]');
      process.off('warning', onWarning);
      expect(warnings.some((w) => /could not record the call/.test(w))).toBe(true);
    } finally {
      await p.close();
    }
  });
});
