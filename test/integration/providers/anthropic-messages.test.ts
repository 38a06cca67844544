import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectExactCapture, lastCall } from '../../support/capture.js';
import { loadQwen3, startReferenceUpstream, type ReferenceUpstream } from '../../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../../support/start-proxy.js';
import { patient } from '../../support/patience.js';

const TOOLS: Anthropic.Tool[] = [
  {
    name: 'list_files',
    description: 'List files',
    input_schema: { type: 'object', properties: { path: { type: 'string' }, recursive: { type: 'boolean' } }, required: ['path'] },
  },
  { name: 'read_file', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } },
];

let upstream: ReferenceUpstream;
let t: TestProxy;
let client: Anthropic;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  t = await startTestProxy(upstream.url, { contextWindow: 40_960 });
  // The SDK appends /v1/messages to its base URL, as Claude Code does with ANTHROPIC_BASE_URL.
  client = new Anthropic({ baseURL: `${t.proxy.url}/s/${t.session}`, apiKey: 'sk-ant-test-0123456789', maxRetries: 0 });
});

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const row = () => lastCall(t.store, t.session);
const sentUpstream = () => upstream.calls[upstream.calls.length - 1]!.body;

describe('Anthropic Messages through polar (official @anthropic-ai/sdk)', () => {
  it('messages.create: thinking with a signature, then text; end_turn; usage from the captured ids', async () => {
    const msg = await client.messages.create(
      {
        model: 'claude-opus-4-8',
        max_tokens: 64_000,
        thinking: { type: 'enabled', budget_tokens: 2048 },
        system: [
          { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.330.c4f; cc_entrypoint=sdk-cli; cch=93b2e;' },
          { type: 'text', text: 'You are a careful agent.' },
        ],
        messages: [{ role: 'user', content: 'Say hello.' }],
      },
      { timeout: patient(60_000) },
    ); // the SDK insists on one for a non-streaming 64k-token call
    expect(msg.type).toBe('message');
    expect(msg.model).toBe('claude-opus-4-8');
    expect(msg.stop_reason).toBe('end_turn');
    expect(msg.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    const thinking = msg.content[0] as Anthropic.ThinkingBlock;
    expect(thinking.thinking).toContain('Answer briefly');
    expect(thinking.signature).toMatch(/^polar1\./);
    expect((msg.content[1] as Anthropic.TextBlock).text).toContain('You said: “Say hello.”');
    const { sampled } = expectExactCapture(t.store, t.session, upstream);
    expect(msg.usage.input_tokens).toBe(sampled.promptIds.length);
    expect(msg.usage.output_tokens).toBe(sampled.reply.ids.length);
    // The billing line is not sent upstream; the record of what the harness sent keeps it.
    expect(JSON.stringify(sentUpstream().messages)).not.toContain('x-anthropic-billing-header');
    expect(sentUpstream().messages[0]).toEqual({ role: 'system', content: 'You are a careful agent.' });
    expect(row().originalRequest).toContain('cch=93b2e');
    // The thinking switch and the context clamp: 64,000 output tokens cannot fit a 40,960 context.
    expect(sentUpstream().chat_template_kwargs).toEqual({ enable_thinking: true });
    expect(sentUpstream()).not.toHaveProperty('max_tokens');
    expect(row().requestHeaders.authorization ?? row().requestHeaders['x-api-key']).toBe('[redacted]');
    expect(JSON.stringify(row())).not.toContain('sk-ant-test-0123456789');
  });

  it('messages.stream(...).finalMessage(): events in order, the same content as non-streaming', async () => {
    const stream = client.messages.stream({ model: 'claude-sonnet-4-6', max_tokens: 1024, messages: [{ role: 'user', content: 'Stream a greeting.' }] });
    const types: string[] = [];
    stream.on('streamEvent', (e) => types.push(e.type));
    const msg = await stream.finalMessage();
    expect(types[0]).toBe('message_start');
    expect(types.slice(-2)).toEqual(['message_delta', 'message_stop']);
    expect(msg.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    const { sampled, row: r } = expectExactCapture(t.store, t.session, upstream);
    expect((msg.content[1] as Anthropic.TextBlock).text).toBe(sampled.reply.content);
    expect((msg.content[0] as Anthropic.ThinkingBlock).thinking).toBe(sampled.reply.reasoning);
    expect(msg.usage.output_tokens).toBe(sampled.reply.ids.length);
    expect(r.streamed).toBe(true);
    expect(sentUpstream().max_tokens).toBe(1024);
  });

  it('tool use and a tool-result round trip; thinking sent back maps to the same reasoning', async () => {
    const first = await client.messages
      .stream({ model: 'm', max_tokens: 1024, tools: TOOLS, messages: [{ role: 'user', content: 'Please use the tools, both of them.' }] })
      .finalMessage();
    expect(first.stop_reason).toBe('tool_use');
    const uses = first.content.filter((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use');
    expect(uses.map((u) => [u.name, u.input])).toEqual([
      ['list_files', { path: 'src/file-0.ts', recursive: true }],
      ['read_file', { path: 'src/file-1.ts', recursive: false }],
    ]);
    const reasoning = (first.content[0] as Anthropic.ThinkingBlock).thinking;
    expectExactCapture(t.store, t.session, upstream);

    const second = await client.messages.create({
      model: 'm',
      max_tokens: 1024,
      tools: TOOLS,
      messages: [
        { role: 'user', content: 'Please use the tools, both of them.' },
        { role: 'assistant', content: first.content },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: uses[0]!.id, content: 'a.ts\nb.ts' },
            { type: 'tool_result', tool_use_id: uses[1]!.id, content: [{ type: 'text', text: 'no such file' }], is_error: true },
          ],
        },
      ],
    });
    expect(second.stop_reason).toBe('end_turn');
    const messages = sentUpstream().messages as Record<string, unknown>[];
    expect(messages.slice(1).map((m) => m.role)).toEqual(['assistant', 'tool', 'tool']);
    expect(messages[1]).toMatchObject({ reasoning_content: reasoning, tool_calls: [{ id: uses[0]!.id }, { id: uses[1]!.id }] });
    expect(messages[2]).toEqual({ role: 'tool', tool_call_id: uses[0]!.id, content: 'a.ts\nb.ts' });
    expect(messages[3]).toEqual({ role: 'tool', tool_call_id: uses[1]!.id, content: '[Tool Error] no such file' });
    expect(loadQwen3().decode(upstream.calls[upstream.calls.length - 1]!.promptIds)).toContain('<tool_response>\na.ts\nb.ts\n</tool_response>');
    expectExactCapture(t.store, t.session, upstream);
  });

  it('count_tokens is answered by the upstream tokenizer, fast, and not recorded as a call', async () => {
    const before = t.store.requests.list(t.session).length;
    const tokenizes = upstream.tokenizeCount();
    const counted = await client.messages.countTokens({ model: 'm', messages: [{ role: 'user', content: 'How many tokens is this?' }] });
    expect(counted.input_tokens).toBeGreaterThan(5);
    expect(upstream.tokenizeCount()).toBe(tokenizes + 1);
    expect(t.store.requests.list(t.session)).toHaveLength(before);
  });

  it('errors arrive in the Anthropic shape, before and during a stream', async () => {
    upstream.fault('http-500');
    const err = await client.messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(502);
    expect((err as { error: { error: { type: string } } }).error.error.type).toBe('api_error');
    expect(row()).toMatchObject({ status: 'error', provider: 'anthropic-messages', httpStatus: 502 });

    upstream.fault('http-400-context');
    const tooLong = await client.messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect((tooLong as InstanceType<typeof Anthropic.APIError>).status).toBe(400);
    expect((tooLong as Error).message).toMatch(/prompt is too long/);

    upstream.fault('error-event');
    await expect(client.messages.stream({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }).finalMessage()).rejects.toThrow(
      /CUDA error/,
    );
    expect(row()).toMatchObject({ status: 'error', streamed: true });
  });
});
