import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReferenceUpstream, type ReferenceUpstream } from '../../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../../support/start-proxy.js';

/**
 * Streaming is real: each provider's first events reach the client while the upstream is still
 * generating, and while the upstream is silent (prefill) the harness gets keep-alives in its own
 * provider's form. Asserted as an order of events (the upstream is held until the test releases
 * it), never as timings.
 */
const PROVIDERS = [
  {
    name: 'openai-chat',
    path: '/v1/chat/completions',
    body: { model: 'm', stream: true, messages: [{ role: 'user', content: 'hello there' }] },
    keepAlive: /^: keep-alive$/m,
    last: 'data: [DONE]',
  },
  {
    name: 'anthropic-messages',
    path: '/v1/messages',
    body: { model: 'm', stream: true, max_tokens: 500, messages: [{ role: 'user', content: 'hello there' }] },
    keepAlive: /^event: ping$/m,
    last: 'event: message_stop',
  },
  {
    name: 'openai-responses',
    path: '/v1/responses',
    body: { model: 'm', stream: true, input: 'hello there' },
    keepAlive: /^event: response\.in_progress$/m,
    last: 'event: response.completed',
  },
  {
    name: 'google-generate-content',
    path: '/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse',
    // Thoughts are sent only when asked for; asked here, so the reasoning streams too.
    body: { contents: [{ role: 'user', parts: [{ text: 'hello there' }] }], generationConfig: { thinkingConfig: { includeThoughts: true } } },
    keepAlive: /^: keep-alive$/m,
    last: '"finishReason":"STOP"',
  },
] as const;

/** Reads a streamed reply piece by piece, so a test can act between pieces. */
async function openStream(url: string, body: unknown): Promise<{ next(): Promise<string | null>; rest(): Promise<string> }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  const next = async () => {
    const { value, done } = await reader.read();
    return done ? null : decoder.decode(value, { stream: true });
  };
  return {
    next,
    async rest() {
      let all = '';
      for (let piece = await next(); piece !== null; piece = await next()) all += piece;
      return all;
    },
  };
}

/** Whether a piece of the stream carries generated text (a non-empty text or reasoning delta, in any provider's form). */
const hasContent = (text: string) => /"(content|reasoning_content|reasoning|text|delta|thinking)":"[^"]/.test(text) || /content_block_delta/.test(text);

/**
 * Order, not clocks: the upstream holds its reply after a few tokens until the test lets it go.
 * Events that reach the harness while it is held were relayed as generated; buffering until the
 * end would deliver nothing before the release.
 */
describe('streams are relayed as they are generated', () => {
  let paced: ReferenceUpstream;
  let t: TestProxy;
  beforeAll(async () => {
    paced = await startReferenceUpstream({ chunkTokens: 1, holdAt: 6 });
    t = await startTestProxy(paced.url, { keepAliveMs: 60_000 });
  });
  afterAll(async () => {
    await t?.close();
    await paced?.close();
  });

  it.each(PROVIDERS)('$name: the first events reach the harness while the upstream is still generating', async ({ path, body, last }) => {
    const stream = await openStream(`${t.proxy.url}${path}`, body);
    await paced.held();
    let before = '';
    while (!hasContent(before)) {
      const piece = await stream.next();
      expect(piece, 'the stream ended before the upstream finished').not.toBeNull();
      before += piece;
    }
    // The upstream has sent 6 of its tokens and is held: the reply is not finished.
    expect(before).not.toContain(last);
    paced.release();
    const after = await stream.rest();
    expect(after).toContain(last);
    expect(t.store.requests.list(t.session).at(-1)).toMatchObject({ status: 'ok', streamed: true });
  });
});

describe('keep-alives while the upstream is silent', () => {
  let slow: ReferenceUpstream;
  let t: TestProxy;
  beforeAll(async () => {
    // Held before its first token: a prefill that lasts until the test says so.
    slow = await startReferenceUpstream({ holdAt: 0 });
    t = await startTestProxy(slow.url, { keepAliveMs: 100 });
  });
  afterAll(async () => {
    await t?.close();
    await slow?.close();
  });

  it.each(PROVIDERS)('$name: keep-alives in its own form during the prefill, then the reply', async ({ path, body, keepAlive, last }) => {
    const stream = await openStream(`${t.proxy.url}${path}`, body);
    await slow.held();
    let early = '';
    while ((early.match(new RegExp(keepAlive.source, 'gm')) ?? []).length < 2) {
      const piece = await stream.next();
      expect(piece, 'the stream ended during the prefill').not.toBeNull();
      early += piece;
    }
    expect(hasContent(early)).toBe(false);
    slow.release();
    expect(early + (await stream.rest())).toContain(last);
    expect(t.store.requests.list(t.session).at(-1)).toMatchObject({ status: 'ok', streamed: true });
  });
});
