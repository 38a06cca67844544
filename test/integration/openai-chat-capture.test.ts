import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadQwen3, startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { float64Bits } from '../support/bits.js';
import { expectExactCapture as expectCapture, lastCall } from '../support/capture.js';

const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'list_files',
      description: 'List files',
      parameters: { type: 'object', properties: { path: { type: 'string' }, recursive: { type: 'boolean' } }, required: ['path'] },
    },
  },
  {
    type: 'function',
    function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } },
  },
];

let upstream: ReferenceUpstream;
let t: TestProxy;
let client: OpenAI;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  t = await startTestProxy(upstream.url);
  client = new OpenAI({ baseURL: t.proxy.baseUrl(), apiKey: 'sk-test-secret-key-123456', maxRetries: 0 });
});

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const lastRow = () => lastCall(t.store, t.session);
const expectExactCapture = () => expectCapture(t.store, t.session, upstream);

describe('OpenAI Chat through polar proxy (official openai SDK as the client)', () => {
  it('non-streaming: the SDK parses the reply and the record is token-exact', async () => {
    const reply = await client.chat.completions.create({
      model: 'claude-opus-4-8',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Say hello in three languages.' },
      ],
    });
    expect(reply.object).toBe('chat.completion');
    expect(reply.model).toBe('claude-opus-4-8');
    expect(reply.choices[0]!.message.content).toContain('Hello! You said: “Say hello in three languages.”');
    expect((reply.choices[0]!.message as unknown as Record<string, unknown>).reasoning_content).toContain('Answer briefly');
    // polar's training fields stay out of the harness's reply.
    expect(reply.choices[0]!.logprobs).toBeUndefined();
    expect(reply).not.toHaveProperty('prompt_token_ids');
    expect(reply.choices[0]).not.toHaveProperty('token_ids');

    const { row, sampled } = expectExactCapture();
    expect(row.streamed).toBe(false);
    expect(row.requestedModel).toBe('claude-opus-4-8');
    expect(row.servedModel).toBe('Qwen/Qwen3-8B');
    expect(row.finishReason).toBe('stop');
    expect(sampled.body.model).toBe('Qwen/Qwen3-8B');
    expect(sampled.body).toMatchObject({ logprobs: true, top_logprobs: 0, return_token_ids: true });
    expect(JSON.parse(row.originalRequest!).model).toBe('claude-opus-4-8');
    expect(JSON.parse(row.upstreamRequest!)).toMatchObject({ model: 'Qwen/Qwen3-8B', return_token_ids: true });
    expect(JSON.parse(row.reply!).choices[0].message.content).toBe(reply.choices[0]!.message.content);
    // The API key never reaches the database.
    expect(row.requestHeaders.authorization).toBe('[redacted]');
    expect(JSON.stringify(row)).not.toContain('sk-test-secret-key-123456');
  });

  it('streaming: chunks are relayed, the SDK assembles them, the record is token-exact', async () => {
    const stream = await client.chat.completions.create({
      model: 'gpt-5',
      stream: true,
      messages: [{ role: 'user', content: 'Stream me something with ünïcödé.' }],
    });
    let content = '';
    let reasoning = '';
    let chunks = 0;
    let finish: string | null = null;
    for await (const chunk of stream) {
      chunks++;
      expect(chunk.model).toBe('gpt-5');
      const choice = chunk.choices[0]!;
      content += choice.delta.content ?? '';
      reasoning += ((choice.delta as Record<string, unknown>).reasoning_content as string | undefined) ?? '';
      if (choice.finish_reason) finish = choice.finish_reason;
      expect(choice).not.toHaveProperty('token_ids');
      expect(choice.logprobs).toBeUndefined();
    }
    expect(chunks).toBeGreaterThan(10);
    expect(finish).toBe('stop');
    const { row, sampled } = expectExactCapture();
    expect(content).toBe(sampled.reply.content);
    expect(reasoning).toBe(sampled.reply.reasoning);
    expect(row.streamed).toBe(true);
    expect(row.finishReason).toBe('stop');
    expect(row.reply!.endsWith('data: [DONE]\n\n')).toBe(true);
    // polar asked for usage; the client did not, so the usage-only chunk was not relayed.
    expect(row.reply).not.toContain('"choices":[]');
    expect(sampled.body.stream_options).toEqual({ include_usage: true });
    expect(row.usage).toMatchObject({ prompt_tokens: sampled.promptIds.length, completion_tokens: sampled.reply.ids.length });
  });

  it('tools, non-streaming: tool calls reach the SDK intact and the prompt saw the tools', async () => {
    const reply = await client.chat.completions.create({
      model: 'm',
      tools: TOOLS,
      messages: [{ role: 'user', content: 'Please use a tool to look around.' }],
    });
    const call = reply.choices[0]!.message.tool_calls![0]!;
    expect(reply.choices[0]!.finish_reason).toBe('tool_calls');
    expect(call.type).toBe('function');
    if (call.type !== 'function') throw new Error('expected a function call');
    expect(call.function.name).toBe('list_files');
    expect(JSON.parse(call.function.arguments)).toEqual({ path: 'src/file-0.ts', recursive: true });
    const { row, sampled } = expectExactCapture();
    expect(row.finishReason).toBe('tool_calls');
    expect(loadQwen3().decode(sampled.promptIds)).toContain('"name": "list_files"');
  });

  it('tools, streaming with parallel calls: the SDK sees both calls, ids stay exact', async () => {
    const stream = await client.chat.completions.create({
      model: 'm',
      stream: true,
      tools: TOOLS,
      messages: [{ role: 'user', content: 'Use the tools, both of them.' }],
    });
    const names: string[] = [];
    for await (const chunk of stream) {
      for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) if (tc.function?.name) names.push(tc.function.name);
    }
    expect(names).toEqual(['list_files', 'read_file']);
    expectExactCapture();
  });

  it('a client that asks for logprobs, usage and token ids itself gets them, from the same capture', async () => {
    const stream = await client.chat.completions.create({
      model: 'm',
      stream: true,
      logprobs: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'Logprobs please.' }],
      // vLLM's own extension, passed by RL-aware clients
      ...({ return_token_ids: true } as object),
    });
    const lps: number[] = [];
    const ids: number[] = [];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      for (const c of chunk.choices[0]?.logprobs?.content ?? []) lps.push(c.logprob);
      ids.push(...(((chunk.choices[0] as unknown as Record<string, unknown> | undefined)?.token_ids as number[] | undefined) ?? []));
      if (chunk.usage) usage = chunk.usage;
    }
    const { row } = expectExactCapture();
    expect(float64Bits(lps)).toEqual(float64Bits(row.logprobs!));
    expect(ids).toEqual(row.sampledIds);
    expect(usage?.completion_tokens).toBe(row.sampledIds!.length);
  });

  it('a length-truncated reply records finish_reason length and no end-of-turn token', async () => {
    const reply = await client.chat.completions.create({
      model: 'm',
      max_tokens: 7,
      messages: [{ role: 'user', content: 'Write a long essay.' }],
    });
    expect(reply.choices[0]!.finish_reason).toBe('length');
    const row = lastRow();
    expect(row.sampledIds).toHaveLength(7);
    expect(row.sampledIds).not.toContain(loadQwen3().eosId);
    expect(row.finishReason).toBe('length');
  });

  it('GET /v1/models answers with the served model', async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['Qwen/Qwen3-8B']);
  });

  it('sequence numbers are monotonic per session', () => {
    const seqs = t.store.requests.list(t.session).map((c) => c.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
  });
});
