import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectExactCapture, lastCall } from '../../support/capture.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../../support/start-proxy.js';

const TOOLS: OpenAI.Responses.Tool[] = [
  {
    type: 'function',
    name: 'list_files',
    description: 'List files',
    strict: false,
    parameters: { type: 'object', properties: { path: { type: 'string' }, recursive: { type: 'boolean' } }, required: ['path'] },
  },
  { type: 'web_search' },
];

let upstream: ReferenceUpstream;
let t: TestProxy;
let client: OpenAI;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  t = await startTestProxy(upstream.url);
  client = new OpenAI({ baseURL: t.proxy.baseUrl(), apiKey: 'polar-responses', maxRetries: 0 });
});

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const session = 'responses';
const sentUpstream = () => upstream.calls[upstream.calls.length - 1]!.body;

describe('OpenAI Responses through polar (official openai SDK)', () => {
  it('responses.create: a reasoning item, a message, usage; developer input becomes a system message', async () => {
    const res = await client.responses.create({
      model: 'gpt-5-codex',
      reasoning: { effort: 'high', summary: 'auto' },
      input: [
        { role: 'developer', content: 'You are Codex.' },
        { role: 'user', content: [{ type: 'input_text', text: 'Say hi.' }] },
      ],
    });
    expect(res.status).toBe('completed');
    expect(res.model).toBe('gpt-5-codex');
    expect(res.output.map((o) => o.type)).toEqual(['reasoning', 'message']);
    expect(res.output_text).toContain('You said: “Say hi.”');
    const { sampled } = expectExactCapture(t.store, session, upstream);
    expect(res.usage).toMatchObject({
      input_tokens: sampled.promptIds.length,
      output_tokens: sampled.reply.ids.length,
      total_tokens: sampled.promptIds.length + sampled.reply.ids.length,
    });
    expect(sentUpstream().messages[0]).toEqual({ role: 'system', content: 'You are Codex.' });
    expect(sentUpstream().chat_template_kwargs).toEqual({ enable_thinking: true });
  });

  it('responses.stream: the event sequence Codex needs, and finalResponse() equals the output', async () => {
    const stream = client.responses.stream({ model: 'gpt-5-codex', input: 'Stream a greeting.' });
    const types: string[] = [];
    const seqs: number[] = [];
    stream.on('event', (e) => {
      types.push(e.type);
      seqs.push(e.sequence_number);
    });
    const final = await stream.finalResponse();
    expect(types.slice(0, 2)).toEqual(['response.created', 'response.in_progress']);
    expect(types.at(-1)).toBe('response.completed');
    // Every item opens before its deltas and closes before the next one opens.
    const message = types.indexOf('response.output_text.delta');
    expect(types.lastIndexOf('response.output_item.added', message)).toBeGreaterThan(types.indexOf('response.output_item.done'));
    expect(types).toContain('response.reasoning_summary_text.delta');
    expect(types).toContain('response.output_text.done');
    expect(seqs).toEqual(seqs.map((_, i) => i));
    const { sampled } = expectExactCapture(t.store, session, upstream);
    expect(final.output_text).toBe(sampled.reply.content);
    const reasoning = final.output[0] as OpenAI.Responses.ResponseReasoningItem;
    expect(reasoning.summary[0]!.text).toBe(sampled.reply.reasoning);
  });

  it('function calls, and the round trip with function_call_output and the reasoning item sent back', async () => {
    const first = await client.responses.stream({ model: 'm', tools: TOOLS, input: 'Please use a tool to look around.' }).finalResponse();
    const call = first.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call.name).toBe('list_files');
    expect(JSON.parse(call.arguments)).toEqual({ path: 'src/file-0.ts', recursive: true });
    expectExactCapture(t.store, session, upstream);
    // web_search runs at OpenAI: not offered to a local model.
    expect((sentUpstream().tools as { function: { name: string } }[]).map((x) => x.function.name)).toEqual(['list_files']);

    const reasoning = first.output.find((o) => o.type === 'reasoning') as OpenAI.Responses.ResponseReasoningItem;
    const second = await client.responses.create({
      model: 'm',
      tools: TOOLS,
      input: [
        { role: 'user', content: 'Please use a tool to look around.' },
        // As Codex does with store: false: the summary dropped, only the encrypted content kept.
        { type: 'reasoning', id: reasoning.id, summary: [], encrypted_content: reasoning.encrypted_content },
        { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: 'function_call_output', call_id: call.call_id, output: 'a.ts\nb.ts' },
      ],
    });
    expect(second.output_text).toContain('a.ts');
    const messages = sentUpstream().messages as Record<string, unknown>[];
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(messages[1]).toMatchObject({
      reasoning_content: reasoning.summary[0]!.text,
      tool_calls: [{ id: call.call_id, function: { name: 'list_files', arguments: call.arguments } }],
    });
    expect(messages[2]).toEqual({ role: 'tool', tool_call_id: call.call_id, content: 'a.ts\nb.ts' });
  });

  it('custom tools (free-form input, like apply_patch) round-trip as custom_tool_call items', async () => {
    const res = await client.responses.create({
      model: 'm',
      tools: [{ type: 'custom', name: 'apply_patch', description: 'Apply a patch' }],
      input: 'Please use a tool now.',
    });
    const item = res.output.find((o) => o.type === 'custom_tool_call') as OpenAI.Responses.ResponseCustomToolCall;
    expect(item.name).toBe('apply_patch');
    expect(sentUpstream().tools).toEqual([
      { type: 'function', function: { name: 'apply_patch', description: 'Apply a patch', parameters: expect.objectContaining({ required: ['input'] }) } },
    ]);
    expectExactCapture(t.store, session, upstream);
  });

  it('previous_response_id is resolved from the recorded reply; an unknown one is a clear 400', async () => {
    const first = await client.responses.create({ model: 'm', input: 'Remember the word zebra.' });
    await client.responses.create({ model: 'm', previous_response_id: first.id, input: 'What was the word?' });
    const messages = sentUpstream().messages as Record<string, unknown>[];
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(messages[0]!.content).toBe('Remember the word zebra.');
    expect(messages[1]).toMatchObject({ content: first.output_text });
    expect(messages[2]!.content).toBe('What was the word?');

    const err = await client.responses.create({ model: 'm', previous_response_id: 'resp_nonexistent', input: 'x' }).catch((e: unknown) => e);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    expect((err as Error).message).toMatch(/previous_response_id resp_nonexistent is not a response this proxy recorded/);
  });

  it('errors: an OpenAI error object before headers, response.failed mid-stream', async () => {
    upstream.fault('http-400-context');
    const err = await client.responses.create({ model: 'm', input: 'x' }).catch((e: unknown) => e);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    expect((err as { code: string }).code).toBe('context_length_exceeded');

    upstream.fault('error-event');
    const stream = client.responses.stream({ model: 'm', input: 'x' });
    const types: string[] = [];
    stream.on('event', (e) => types.push(e.type));
    // The SDK hands over the failed response (Codex turns response.failed into an error itself).
    const failed = await stream.finalResponse();
    expect(failed.status).toBe('failed');
    expect(failed.error?.message).toMatch(/CUDA error/);
    expect(types.at(-1)).toBe('response.failed');
    expect(lastCall(t.store, session)).toMatchObject({ status: 'error', provider: 'openai-responses' });
  });
});
