import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { float64Bits } from '../support/bits.js';
import { echoScript } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';

/**
 * The nemo-rl upstream against a stand-in for NeMo-RL's HTTP server (token fields only
 * unstreamed, sampling asserts): a streaming harness gets its reply as a stream, opened with
 * keep-alives while a slow generation runs; a quick refusal stays an HTTP error.
 */
describe('nemo-rl upstream, streaming harnesses', () => {
  let slow: MockServer;
  let t: TestProxy;
  beforeAll(async () => {
    // The unstreamed generation is held until the test releases it: a generation as long as it needs to be.
    slow = await startMockServer({ script: echoScript, nemoRl: { temperature: 1, topP: 1 }, holdAt: 0 });
    t = await startTestProxy(slow.url, { upstreamKind: 'nemo-rl', keepAliveMs: 50, upstreamOptions: { streamOpenAfterMs: 50 } });
  });
  afterAll(async () => {
    await t?.close();
    await slow?.close();
  });

  it('opens the stream and keeps it alive during a long generation, then sends the whole reply; tokens recorded exactly', async () => {
    const res = await fetch(`${t.proxy.url}/s/nemo/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hello over nemo' }] }),
    });
    // Headers and keep-alives arrive while the server is still generating (held).
    expect(res.status).toBe(200);
    await slow.held();
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let early = '';
    while ((early.match(/^: keep-alive$/gm) ?? []).length < 2) {
      const { value, done } = await reader.read();
      expect(done, 'the stream ended while the server was generating').toBe(false);
      early += decoder.decode(value, { stream: true });
    }
    expect(early).not.toContain('data: {');
    slow.release();
    let all = early;
    for (let r = await reader.read(); !r.done; r = await reader.read()) all += decoder.decode(r.value, { stream: true });
    const content = all
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => (JSON.parse(l.slice(6)) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? '')
      .join('');
    const logged = slow.calls.at(-1)!;
    expect(content).toBe(logged.reply.content);
    expect(all.trimEnd().endsWith('data: [DONE]')).toBe(true);
    const row = t.store.requests.get(t.store.requests.list('nemo').at(-1)!.id)!;
    expect(row.sampledIds).toEqual(logged.reply.ids);
    expect(row.promptIds).toEqual(logged.promptIds);
    expect(float64Bits(row.logprobs!)).toEqual(float64Bits(logged.reply.logprobs));
  });

  it('a refusal that comes quickly is still an HTTP error, not a stream', async () => {
    const strict = await startMockServer({ script: echoScript, nemoRl: { temperature: 0.6, topP: 0.95 } });
    const p = await startTestProxy(strict.url, { upstreamKind: 'nemo-rl', upstreamOptions: { streamOpenAfterMs: 2_000 } });
    try {
      const res = await fetch(`${p.proxy.url}/s/refused/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(502);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/500/);
      expect(p.store.requests.list('refused').at(-1)).toMatchObject({ status: 'error' });
    } finally {
      await p.close();
      await strict.close();
    }
  });
});
