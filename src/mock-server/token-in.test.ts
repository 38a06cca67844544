import { afterEach, describe, expect, it } from 'vitest';
import { loadQwen3 } from './qwen3.js';
import { renderPrompt, textOf, type ChatBody } from './render.js';
import type { ScriptedReply } from './sampler.js';
import { MAX_MODEL_LEN, startMockServer, type MockServer, type MockServerOptions } from './server.js';

/**
 * `/v1/completions` (vLLM) and `/generate` (SGLang) take the prompt as ids and must sample what
 * `/v1/chat/completions` samples for the same conversation: same ids, same logprobs.
 */
const qwen = loadQwen3();
const EOS = qwen.eosId;
type Json = Record<string, any>;

const servers: MockServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
/** A fresh server per call: replies are seeded by the server's reply counter. */
async function fresh(options: MockServerOptions = {}): Promise<MockServer> {
  const s = await startMockServer(options);
  servers.push(s);
  return s;
}

async function post(server: MockServer, path: string, body: unknown): Promise<{ status: number; json: Json }> {
  const res = await fetch(server.url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Json };
}

async function events(server: MockServer, path: string, body: unknown): Promise<Json[]> {
  const res = await fetch(server.url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  const data = (await res.text())
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice('data: '.length));
  expect(data.at(-1)).toBe('[DONE]');
  return data.slice(0, -1).map((d) => JSON.parse(d) as Json);
}

const fn = (name: string, properties: Record<string, unknown>) => ({
  type: 'function',
  function: { name, parameters: { type: 'object', properties, required: Object.keys(properties) } },
});
const tools = [fn('Read', { path: { type: 'string' } }), fn('Bash', { command: { type: 'string' } })];
const call = (id: string, command: string) => ({
  role: 'assistant',
  content: '',
  tool_calls: [{ id, type: 'function', function: { name: 'Bash', arguments: JSON.stringify({ command }) } }],
});

/** A script whose answer depends on everything a script may read, so equal replies mean equal reads. */
function digestScript(body: ChatBody): ScriptedReply {
  const digest = [
    body.messages.map((m) => `${m.role}:${textOf(m.content).length}:${((m.tool_calls as unknown[]) ?? []).length}`).join(','),
    (body.tools ?? []).map((t) => JSON.stringify((t as { function: unknown }).function)).join(''),
    String(body.chat_template_kwargs?.enable_thinking),
    textOf(body.messages.at(-1)?.content),
  ].join('|');
  return {
    reasoning: `Digest of what I read: ${digest.length} chars.`,
    content: digest,
    toolCalls: [{ name: 'Bash', arguments: { command: 'echo ünïcode 🚀' } }],
  };
}

const CASES: { name: string; body: ChatBody; options?: MockServerOptions }[] = [
  {
    name: 'the first call (reasoning, text and a tool call)',
    body: {
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Do the task.' },
      ],
      tools,
    },
  },
  {
    name: 'after a tool result (a tool call only)',
    body: { messages: [{ role: 'user', content: 'Do the task.' }, call('a', 'ls -la'), { role: 'tool', tool_call_id: 'a', content: 'total 0' }], tools },
  },
  {
    name: 'thinking off, after two tool results (text only)',
    body: {
      messages: [{ role: 'user', content: 'Do it' }, call('a', 'ls'), { role: 'tool', content: 'x' }, call('b', 'printf'), { role: 'tool', content: '' }],
      tools,
      chat_template_kwargs: { enable_thinking: false },
    },
  },
  {
    name: 'a script that reads every field',
    body: { messages: [{ role: 'user', content: 'Read me — naïve 日本語' }], tools },
    options: { script: digestScript },
  },
];

interface Sampled {
  ids: number[];
  logprobs: number[];
}

describe.each(CASES)('token in, token out: $name', ({ body, options }) => {
  const promptIds = renderPrompt(qwen, body);
  const completions = { model: 'm', prompt: promptIds, max_tokens: 4096, logprobs: 0, return_token_ids: true, add_special_tokens: false };
  const generate = { input_ids: promptIds, sampling_params: { max_new_tokens: 4096 }, return_logprob: true };

  async function viaChat(): Promise<{ sampled: Sampled; message: Json }> {
    const { json } = await post(await fresh(options), '/v1/chat/completions', { ...body, logprobs: true, return_token_ids: true });
    const choice = json.choices[0];
    expect(json.prompt_token_ids).toEqual(promptIds);
    return { sampled: { ids: choice.token_ids, logprobs: choice.logprobs.content.map((c: Json) => c.logprob) }, message: choice.message };
  }

  it('/v1/completions gives the ids and logprobs /v1/chat/completions gives', async () => {
    const chat = await viaChat();
    const server = await fresh(options);
    const { status, json } = await post(server, '/v1/completions', completions);
    expect(status).toBe(200);
    const choice = json.choices[0];
    expect({ ids: choice.token_ids, logprobs: choice.logprobs.token_logprobs }).toEqual(chat.sampled);
    // The sampled ids are not what re-tokenizing their text gives.
    expect(qwen.encode(qwen.decode(choice.token_ids))).not.toEqual(choice.token_ids);
    expect(json).toMatchObject({
      object: 'text_completion',
      model: server.model,
      usage: { prompt_tokens: promptIds.length, completion_tokens: chat.sampled.ids.length },
    });
    expect(choice).toMatchObject({ index: 0, finish_reason: 'stop', stop_reason: null, prompt_token_ids: promptIds, prompt_logprobs: null });
    expect(choice.token_ids.at(-1)).toBe(EOS);
    // The text is the chat reply's, tool call markup included, without the end-of-turn token.
    expect(choice.text).toBe(qwen.decode(choice.token_ids.slice(0, -1)));
    for (const c of chat.message.tool_calls ?? []) expect(choice.text).toContain(`{"name": "${c.function.name}", "arguments": ${c.function.arguments}}`);
    if (chat.message.content) expect(choice.text).toContain(chat.message.content);
    expect(choice.logprobs.tokens).toEqual(choice.token_ids.map((id: number) => qwen.decode([id])));
    const lens = choice.logprobs.tokens.map((t: string) => [...t].length);
    expect(choice.logprobs.text_offset).toEqual(lens.map((_: number, i: number) => lens.slice(0, i).reduce((a: number, b: number) => a + b, 0)));
    expect(choice.logprobs.top_logprobs).toEqual(choice.logprobs.tokens.map((t: string, i: number) => ({ [t]: choice.logprobs.token_logprobs[i] })));
    // The script was asked about the conversation read back from the ids.
    expect(server.calls[0]!.body.messages.map((m) => m.role)).toEqual(body.messages.map((m) => m.role));
    expect(server.calls[0]!.request.prompt).toEqual(promptIds);
  });

  it('/v1/completions streams the same, prompt ids on the first chunk only, usage last', async () => {
    const chat = await viaChat();
    const whole = (await post(await fresh(options), '/v1/completions', completions)).json.choices[0];
    const chunks = await events(await fresh({ ...options, chunkTokens: 3 }), '/v1/completions', {
      ...completions,
      stream: true,
      stream_options: { include_usage: true },
    });
    const usage = chunks.pop()!;
    expect(usage).toEqual({
      id: chunks[0]!.id,
      object: 'text_completion',
      created: chunks[0]!.created,
      model: chunks[0]!.model,
      choices: [],
      usage: { prompt_tokens: promptIds.length, total_tokens: promptIds.length + chat.sampled.ids.length, completion_tokens: chat.sampled.ids.length },
    });
    const choices = chunks.map((c) => c.choices[0]);
    expect(Object.keys(choices[0]!)).toEqual(['index', 'text', 'logprobs', 'finish_reason', 'stop_reason', 'prompt_token_ids', 'token_ids']);
    expect(choices.flatMap((c) => c.token_ids)).toEqual(chat.sampled.ids);
    expect(choices.flatMap((c) => c.logprobs.token_logprobs)).toEqual(chat.sampled.logprobs);
    expect(
      choices
        .map((c) => c.token_ids.length)
        .slice(0, -1)
        .every((n) => n === 3),
    ).toBe(true);
    expect(choices.map((c) => c.prompt_token_ids)).toEqual([promptIds, ...choices.slice(1).map(() => null)]);
    expect(choices.map((c) => c.finish_reason)).toEqual([...choices.slice(1).map(() => null), 'stop']);
    expect(choices.map((c) => c.text).join('')).toBe(whole.text);
    // vLLM's offsets: each chunk starts at the text streamed so far (in Python characters), then
    // steps by each token's own text (which for a split character is U+FFFD, so they can drift).
    let streamed = 0;
    for (const c of choices) {
      const steps = c.logprobs.tokens.map((t: string) => [...t].length);
      expect(c.logprobs.text_offset).toEqual(steps.map((_: number, i: number) => streamed + steps.slice(0, i).reduce((a: number, b: number) => a + b, 0)));
      streamed += [...c.text].length;
    }
  });

  it('/generate gives the same ids and logprobs, streamed as the output so far', async () => {
    const chat = await viaChat();
    const server = await fresh(options);
    const { status, json } = await post(server, '/generate', generate);
    expect(status).toBe(200);
    expect(json.output_ids).toEqual(chat.sampled.ids);
    expect(json.meta_info.output_token_logprobs).toEqual(chat.sampled.ids.map((id, i) => [chat.sampled.logprobs[i], id, null]));
    expect(json.meta_info).toMatchObject({
      finish_reason: { type: 'stop', matched: EOS },
      prompt_tokens: promptIds.length,
      completion_tokens: chat.sampled.ids.length,
      cached_tokens: 0,
    });
    expect(json.text).toBe(qwen.decode(chat.sampled.ids, { skipSpecialTokens: true }));

    const stream = await events(await fresh({ ...options, chunkTokens: 4 }), '/generate', { ...generate, stream: true });
    expect(stream.length).toBe(Math.ceil(chat.sampled.ids.length / 4));
    stream.forEach((e, k) => {
      const n = Math.min(4 * (k + 1), chat.sampled.ids.length);
      expect(e.output_ids).toEqual(chat.sampled.ids.slice(0, n));
      expect(e.meta_info.output_token_logprobs.map((x: unknown[]) => x[0])).toEqual(chat.sampled.logprobs.slice(0, n));
      expect(e.meta_info.completion_tokens).toBe(n);
      expect(json.text.startsWith(e.text)).toBe(true);
      expect(e.meta_info.finish_reason).toEqual(k === stream.length - 1 ? { type: 'stop', matched: EOS } : null);
    });
    expect(stream.at(-1)!.text).toBe(json.text);
  });
});

describe('token-in endpoints, request options', () => {
  const body: ChatBody = { messages: [{ role: 'user', content: 'Do the task.' }], tools };
  const promptIds = renderPrompt(qwen, body);

  it('cut at max_tokens with finish reason length, as the chat endpoint does', async () => {
    const chat = (await post(await fresh(), '/v1/chat/completions', { ...body, max_tokens: 5, logprobs: true, return_token_ids: true })).json.choices[0];
    expect(chat.finish_reason).toBe('length');
    const completion = (await post(await fresh(), '/v1/completions', { prompt: promptIds, max_tokens: 5, logprobs: 0, return_token_ids: true })).json
      .choices[0];
    expect(completion).toMatchObject({ token_ids: chat.token_ids, finish_reason: 'length', stop_reason: null });
    const generated = (await post(await fresh(), '/generate', { input_ids: promptIds, sampling_params: { max_new_tokens: 5 }, return_logprob: true })).json;
    expect(generated.output_ids).toEqual(chat.token_ids);
    expect(generated.meta_info.finish_reason).toEqual({ type: 'length', length: 5 });
    const streamed = await events(await fresh(), '/v1/completions', { prompt: promptIds, max_tokens: 5, return_token_ids: true, stream: true });
    expect(streamed.flatMap((c) => c.choices[0].token_ids)).toEqual(chat.token_ids);
    expect(streamed.at(-1)!.choices[0].finish_reason).toBe('length');
  });

  it("use the servers' defaults when no budget is given: 16 tokens for vLLM completions, 128 for SGLang", async () => {
    const full = (await post(await fresh(), '/v1/chat/completions', { ...body, return_token_ids: true })).json.choices[0].token_ids as number[];
    expect(full.length).toBeGreaterThan(16);
    expect(full.length).toBeLessThan(128);
    const completion = (await post(await fresh(), '/v1/completions', { prompt: promptIds, return_token_ids: true })).json.choices[0];
    expect(completion).toMatchObject({ token_ids: full.slice(0, 16), finish_reason: 'length' });
    expect((await post(await fresh(), '/generate', { input_ids: promptIds })).json.output_ids).toEqual(full);
  });

  it('stop at a stop_token_ids id, reporting it', async () => {
    const full = (await post(await fresh(), '/v1/chat/completions', { ...body, return_token_ids: true })).json.choices[0].token_ids as number[];
    const TOOL_CALL = qwen.tokenId('<tool_call>')!;
    const at = full.indexOf(TOOL_CALL);
    expect(at).toBeGreaterThan(0);
    const completion = (
      await post(await fresh(), '/v1/completions', { prompt: promptIds, max_tokens: 500, stop_token_ids: [TOOL_CALL], return_token_ids: true })
    ).json.choices[0];
    expect(completion).toMatchObject({ token_ids: full.slice(0, at + 1), finish_reason: 'stop', stop_reason: TOOL_CALL });
    expect(completion.text).toBe(qwen.decode(full.slice(0, at)));
    const generated = (await post(await fresh(), '/generate', { input_ids: promptIds, sampling_params: { stop_token_ids: [TOOL_CALL] } })).json;
    expect(generated.output_ids).toEqual(full.slice(0, at + 1));
    expect(generated.meta_info.finish_reason).toEqual({ type: 'stop', matched: TOOL_CALL });
  });

  it("keep special tokens in the text when asked (polar's settings), and return token ids as tokens", async () => {
    const completion = (
      await post(await fresh(), '/v1/completions', {
        prompt: promptIds,
        max_tokens: 500,
        skip_special_tokens: false,
        include_stop_str_in_output: true,
        logprobs: 0,
        return_tokens_as_token_ids: true,
      })
    ).json.choices[0];
    expect(completion.text.endsWith('</tool_call><|im_end|>')).toBe(true);
    expect(completion.logprobs.tokens.at(-1)).toBe(`token_id:${EOS}`);
    expect(completion.token_ids).toBeNull();
    const generated = (await post(await fresh(), '/generate', { input_ids: promptIds, sampling_params: { skip_special_tokens: false, no_stop_trim: true } }))
      .json;
    expect(generated.text.endsWith('</tool_call><|im_end|>')).toBe(true);
    const trimmed = (await post(await fresh(), '/generate', { input_ids: promptIds, sampling_params: { skip_special_tokens: false } })).json;
    expect(trimmed.text.endsWith('</tool_call>')).toBe(true);
  });

  it('refuse text prompts and ids that are not tokens with 400', async () => {
    const server = await fresh();
    const completion = await post(server, '/v1/completions', { prompt: 'hello', max_tokens: 5 });
    expect(completion.status).toBe(400);
    expect(completion.json.error).toMatchObject({ type: 'BadRequestError', code: 400 });
    const generated = await post(server, '/generate', { text: 'hello' });
    expect(generated.status).toBe(400);
    expect(generated.json.error.message).toContain('input_ids');
    const outside = await post(server, '/v1/completions', { prompt: [...promptIds, 151_700] });
    expect(outside).toMatchObject({ status: 400, json: { error: { message: 'Token id 151700 is out of vocabulary' } } });
    expect((await post(server, '/generate', { input_ids: [-1] })).status).toBe(400);
    expect(server.calls).toHaveLength(0);
  });

  it("/generate holds SGLang's length rule: prompt + max_new_tokens strictly below the context, the sum equal to it refused", async () => {
    const server = await fresh();
    const fills = await post(server, '/generate', { input_ids: promptIds, sampling_params: { max_new_tokens: MAX_MODEL_LEN - promptIds.length } });
    expect(fills.status).toBe(400);
    expect(fills.json.error.message).toContain("Requested token count exceeds the model's maximum context length of 40960 tokens");
    const long = await post(server, '/generate', { input_ids: new Array<number>(MAX_MODEL_LEN).fill(promptIds[0]!) });
    expect(long.status).toBe(400);
    expect(long.json.error.message).toContain("is longer than the model's context length (40960 tokens)");
    expect(server.calls).toHaveLength(0);
    const below = await post(server, '/generate', { input_ids: promptIds, sampling_params: { max_new_tokens: MAX_MODEL_LEN - promptIds.length - 1 } });
    expect(below.status).toBe(200);
  });

  it('misbehave on command like the chat endpoint', async () => {
    const server = await fresh();
    server.fault('http-500');
    expect((await post(server, '/v1/completions', { prompt: promptIds })).status).toBe(500);
    server.fault('http-400-context');
    const ctx = await post(server, '/generate', { input_ids: promptIds });
    expect(ctx.status).toBe(400);
    expect(ctx.json.error.message).toContain('context length');
    server.fault('error-event');
    const failed = await events(server, '/generate', { input_ids: promptIds, stream: true });
    expect(failed.at(-1)).toEqual({ error: { message: 'generation failed: CUDA error' } });
    server.fault('drop');
    await expect(post(server, '/v1/completions', { prompt: promptIds })).rejects.toThrow();
    expect((await post(server, '/v1/completions', { prompt: promptIds })).status).toBe(200);
  });
});
