import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUNDLED_QWEN3 } from '../../src/upstream/tito/chat-template.js';
import { float64Bits } from '../support/bits.js';
import { MAX_MODEL_LEN, startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';

/**
 * Token-in/token-out streaming: the server's token stream (vLLM /v1/completions chunks, SGLang
 * /generate events that repeat the output so far) is parsed incrementally — one token per chunk,
 * so every tag and every multi-byte character is cut somewhere — and the harness gets the same
 * reply as unstreamed, with the same ids and logprobs recorded. Upstream failures reach the
 * harness as errors in its own format, and are recorded.
 */
const TOOLS = [
  {
    type: 'function' as const,
    function: { name: 'read', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } },
  },
  {
    type: 'function' as const,
    function: { name: 'list', description: 'List files', parameters: { type: 'object', properties: { path: { type: 'string' } } } },
  },
];

describe.each(['vllm-tito', 'sglang-tito'])('%s streaming', (kind) => {
  let upstream: ReferenceUpstream;
  let t: TestProxy;
  let client: OpenAI;
  beforeAll(async () => {
    upstream = await startReferenceUpstream({ chunkTokens: 1 });
    t = await startTestProxy(upstream.url, { upstreamKind: kind, upstreamOptions: { tokenizer: BUNDLED_QWEN3 } });
    client = new OpenAI({ baseURL: `${t.proxy.url}/v1`, apiKey: 'polar-tito', maxRetries: 0 });
  });
  afterAll(async () => {
    await t?.close();
    await upstream?.close();
  });

  const ask = <S extends boolean>(content: string, stream: S) => ({ model: 'm', stream, tools: TOOLS, messages: [{ role: 'user' as const, content }] });

  it('reasoning and text with multi-byte characters stream as they are parsed; ids and logprobs exact', async () => {
    const stream = await client.chat.completions.create({ ...ask('héllo 日本語 — say something', true), stream: true });
    let text = '';
    let reasoning = '';
    let pieces = 0;
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined;
      if (d?.content) {
        text += d.content;
        pieces++;
      }
      if (d?.reasoning_content) reasoning += d.reasoning_content;
    }
    const sampled = upstream.calls.at(-1)!.reply;
    expect(text).toBe(sampled.content);
    expect(reasoning).toBe(sampled.reasoning);
    expect(pieces).toBeGreaterThan(10);
    const row = t.store.requests.get(t.store.requests.list('tito').at(-1)!.id)!;
    expect(row.sampledIds).toEqual(sampled.ids);
    expect(row.promptIds).toEqual(upstream.calls.at(-1)!.promptIds);
    expect(float64Bits(row.logprobs!)).toEqual(float64Bits(sampled.logprobs));
    expect(row.tokenError).toBeNull();
    expect(row.assistantMessage).toMatchObject({ content: sampled.content, reasoning_content: sampled.reasoning });
  });

  it('parallel tool calls arrive whole, streamed or not, with finish_reason tool_calls', async () => {
    const stream = await client.chat.completions.create({ ...ask('use the tools, both of them', true), stream: true });
    const calls: { id?: string; name?: string; args: string }[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices[0]?.delta.tool_calls ?? []) {
        calls[c.index] ??= { args: '' };
        if (c.id) calls[c.index]!.id = c.id;
        if (c.function?.name) calls[c.index]!.name = c.function.name;
        calls[c.index]!.args += c.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    const sampled = upstream.calls.at(-1)!.reply;
    expect(finish).toBe('tool_calls');
    expect(calls.map((c) => ({ name: c.name, args: JSON.parse(c.args) }))).toEqual(
      sampled.toolCalls.map((c) => ({ name: c.name, args: JSON.parse(c.arguments) })),
    );
    expect(new Set(calls.map((c) => c.id)).size).toBe(2);

    const plain = await client.chat.completions.create(ask('use the tools, both of them', false));
    expect(plain.choices[0]!.finish_reason).toBe('tool_calls');
    expect(plain.choices[0]!.message.tool_calls!.map((c) => c.type === 'function' && c.function.name)).toEqual(sampled.toolCalls.map((c) => c.name));
  });

  it('a length-cut reply ends with finish_reason length; a server error reaches the harness as an OpenAI error and is recorded', async () => {
    const cut = await client.chat.completions.create({ ...ask('say something long', false), max_tokens: 7 });
    expect(cut.choices[0]!.finish_reason).toBe('length');
    expect(cut.usage?.completion_tokens).toBe(7);

    upstream.fault('http-500');
    await expect(client.chat.completions.create(ask('hi', true))).rejects.toMatchObject({ status: 502 });
    const row = t.store.requests.list('tito').at(-1)!;
    expect(row).toMatchObject({ status: 'error', httpStatus: 502 });
    // The proxy keeps serving.
    const after = await client.chat.completions.create(ask('hi again', false));
    expect(after.choices[0]!.message.content).toContain('hi again');
  });

  it('counts tokens locally with the template (Anthropic count_tokens): the length of the prompt it would send', async () => {
    const body = { model: 'm', messages: [{ role: 'user', content: 'count me, please' }] };
    const res = await fetch(`${t.proxy.url}/v1/messages/count_tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify(body),
    });
    const counted = ((await res.json()) as { input_tokens: number }).input_tokens;
    await client.chat.completions.create({ model: 'm', stream: false, messages: [{ role: 'user', content: 'count me, please' }] });
    expect(counted).toBe(t.store.requests.get(t.store.requests.list('tito').at(-1)!.id)!.promptIds!.length);
    expect(upstream.tokenizeCount()).toBe(0);
  });

  it("a harness that sets no budget gets all the server's context leaves, and the server takes it", async () => {
    // Codex and Gemini CLI send no max_tokens: the budget is the context left after the prompt,
    // which the mock (holding each server's own rule) refuses if it is one token too many.
    const full = await startTestProxy(upstream.url, { upstreamKind: kind, contextWindow: MAX_MODEL_LEN, upstreamOptions: { tokenizer: BUNDLED_QWEN3 } });
    try {
      const c = new OpenAI({ baseURL: `${full.proxy.url}/v1`, apiKey: 'polar-full', maxRetries: 0 });
      const reply = await c.chat.completions.create({ model: 'm', stream: false, messages: [{ role: 'user', content: 'no budget of my own' }] });
      expect(reply.choices[0]!.finish_reason).toBe('stop');
      const sent = JSON.parse(full.store.requests.get(full.store.requests.list('full').at(-1)!.id)!.upstreamRequest!) as Record<string, any>;
      const budget = sent.max_tokens ?? sent.sampling_params.max_new_tokens;
      const prompt = (sent.prompt ?? sent.input_ids) as number[];
      expect(budget).toBe(MAX_MODEL_LEN - prompt.length - (kind === 'sglang-tito' ? 1 : 0));
    } finally {
      await full.close();
    }
  });

  it('knows the exact prompt length: max_tokens is clamped to what the context leaves, an overflowing prompt is a 400', async () => {
    const small = await startTestProxy(upstream.url, { upstreamKind: kind, contextWindow: 400, upstreamOptions: { tokenizer: BUNDLED_QWEN3 } });
    try {
      const c = new OpenAI({ baseURL: `${small.proxy.url}/v1`, apiKey: 'polar-small', maxRetries: 0 });
      await c.chat.completions.create({ ...ask('hi', false), max_tokens: 100_000 });
      const sent = JSON.parse(small.store.requests.get(small.store.requests.list('small').at(-1)!.id)!.upstreamRequest!) as Record<string, any>;
      const budget = sent.max_tokens ?? sent.sampling_params.max_new_tokens;
      const prompt = (sent.prompt ?? sent.input_ids) as number[];
      // vLLM takes prompt + budget up to the context; SGLang only strictly below it.
      expect(budget).toBe(400 - prompt.length - (kind === 'sglang-tito' ? 1 : 0));
      await expect(c.chat.completions.create(ask('x'.repeat(4000), false))).rejects.toMatchObject({ status: 400 });
      expect(small.store.requests.list('small').at(-1)).toMatchObject({ status: 'error', httpStatus: 400 });
    } finally {
      await small.close();
    }
  });
});
