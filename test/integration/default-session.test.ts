import { afterAll, beforeAll, expect, it } from 'vitest';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';

/**
 * The proxy's default session (a rollout's `…-unattributed`) exists only once a call lands there:
 * a rollout whose calls all name their sessions adds no empty session to `polar sessions`.
 */
let upstream: ReferenceUpstream;
let t: TestProxy;

beforeAll(async () => {
  upstream = await startReferenceUpstream({ log: false });
  t = await startTestProxy(upstream.url, { defaultSession: 'r1-unattributed' });
});

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const chat = (url: string) =>
  fetch(url, {
    method: 'POST',
    body: JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }),
    headers: { 'content-type': 'application/json' },
  });

const ids = () => t.store.sessions.list().map((s) => s.id);

it('is not made at start, nor by calls that name their own session', async () => {
  expect(ids()).toEqual([]);
  expect((await chat(`${t.proxy.baseUrl('sample-1')}/chat/completions`)).status).toBe(200);
  expect(ids()).toEqual(['sample-1']);
});

it("is made by the first call that lands there, with the proxy's upstream and model", async () => {
  expect((await chat(`${t.proxy.baseUrl()}/chat/completions`)).status).toBe(200);
  expect(ids().sort()).toEqual(['r1-unattributed', 'sample-1']);
  expect(t.store.sessions.get('r1-unattributed')).toMatchObject({ upstreamUrl: upstream.url, servedModel: 'Qwen/Qwen3-8B', cwd: process.cwd() });
  expect(t.store.requests.list('r1-unattributed')).toHaveLength(1);
});
