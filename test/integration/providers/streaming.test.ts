import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReferenceUpstream, type ReferenceUpstream } from '../../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../../support/start-proxy.js';

/**
 * Streaming is real: with an upstream that paces its tokens over seconds, each provider's first
 * event reaches the client long before the upstream finishes, and while the upstream is silent
 * (prefill) the harness gets keep-alives in its own provider's form.
 */
const PROVIDERS = [
  { name: 'openai-chat', path: '/v1/chat/completions', body: { model: 'm', stream: true, messages: [{ role: 'user', content: 'hello there' }] }, keepAlive: /^: keep-alive$/m, last: 'data: [DONE]' },
  { name: 'anthropic-messages', path: '/v1/messages', body: { model: 'm', stream: true, max_tokens: 500, messages: [{ role: 'user', content: 'hello there' }] }, keepAlive: /^event: ping$/m, last: 'event: message_stop' },
  { name: 'openai-responses', path: '/v1/responses', body: { model: 'm', stream: true, input: 'hello there' }, keepAlive: /^event: response\.in_progress$/m, last: 'event: response.completed' },
  {
    name: 'google-generate-content',
    path: '/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse',
    // Thoughts are sent only when asked for; asked here, so the reasoning streams too.
    body: { contents: [{ role: 'user', parts: [{ text: 'hello there' }] }], generationConfig: { thinkingConfig: { includeThoughts: true } } },
    keepAlive: /^: keep-alive$/m,
    last: '"finishReason":"STOP"',
  },
] as const;

interface Arrival {
  at: number;
  text: string;
}

async function timedStream(url: string, body: unknown): Promise<{ arrivals: Arrival[]; total: number }> {
  const start = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  const decoder = new TextDecoder();
  const arrivals: Arrival[] = [];
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) arrivals.push({ at: performance.now() - start, text: decoder.decode(chunk, { stream: true }) });
  return { arrivals, total: performance.now() - start };
}

const isKeepAlive = (text: string) => /^(: keep-alive|event: ping|event: response\.(created|in_progress))/.test(text.trim());

describe('streams are relayed as they are generated', () => {
  let paced: ReferenceUpstream;
  let t: TestProxy;
  beforeAll(async () => {
    paced = await startReferenceUpstream({ chunkDelayMs: 60, chunkTokens: 1 });
    t = await startTestProxy(paced.url, { keepAliveMs: 60_000 });
  });
  afterAll(async () => {
    await t?.close();
    await paced?.close();
  });

  it.each(PROVIDERS)('$name: the first event arrives long before the upstream finishes', async ({ path, body }) => {
    const { arrivals, total } = await timedStream(`${t.proxy.url}${path}`, body);
    const firstEvent = arrivals.find((a) => !isKeepAlive(a.text) && /data:|^\{/m.test(a.text))!;
    expect(total).toBeGreaterThan(1500); // the upstream paced ~40 tokens 60 ms apart
    expect(firstEvent.at).toBeLessThan(total / 4);
    // Many separate arrivals spread over the stream, not one burst at the end.
    const spread = arrivals.filter((a) => a.at > total / 4 && a.at < (3 * total) / 4);
    expect(spread.length).toBeGreaterThan(5);
  });
});

describe('keep-alives while the upstream is silent', () => {
  let slow: ReferenceUpstream;
  let t: TestProxy;
  beforeAll(async () => {
    slow = await startReferenceUpstream({ latencyMs: 1200 });
    t = await startTestProxy(slow.url, { keepAliveMs: 200 });
  });
  afterAll(async () => {
    await t?.close();
    await slow?.close();
  });

  it.each(PROVIDERS)('$name: keep-alives in its own form during a 1.2 s prefill, then the reply', async ({ path, body, keepAlive, last }) => {
    const { arrivals } = await timedStream(`${t.proxy.url}${path}`, body);
    const early = arrivals.filter((a) => a.at < 1150);
    // ~5 are due at 200 ms intervals; 2 leaves room for a loaded CI machine.
    expect(early.filter((a) => keepAlive.test(a.text)).length).toBeGreaterThanOrEqual(2);
    const all = arrivals.map((a) => a.text).join('');
    expect(all).toContain(last);
    expect(t.store.requests.list(t.session).at(-1)).toMatchObject({ status: 'ok', streamed: true });
  });
});
