import { afterEach, describe, expect, it } from 'vitest';
import { replacePrefixTokens } from './nemo-rl.js';
import { loadQwen3 } from './qwen3.js';
import { renderPrompt, type ChatBody } from './render.js';
import { startMockServer, type MockServer } from './server.js';

const qwen = loadQwen3();
const EOS = qwen.eosId;
type Json = Record<string, any>;

const servers: MockServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
async function nemo(): Promise<MockServer> {
  const s = await startMockServer({ nemoRl: { temperature: 0.7, topP: 0.95 } });
  servers.push(s);
  return s;
}

async function request(server: MockServer, method: string, path: string, body?: unknown) {
  const res = await fetch(server.url + path, {
    method,
    headers: { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, type: res.headers.get('content-type') ?? '', text: await res.text() };
}
async function chat(server: MockServer, body: Json): Promise<Json> {
  const res = await request(server, 'POST', '/v1/chat/completions', body);
  expect(res.status, res.text).toBe(200);
  return JSON.parse(res.text) as Json;
}

const SAMPLING = { temperature: 0.7, top_p: 0.95 };
const tools = [
  { type: 'function', function: { name: 'Bash', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } } },
];
const task: ChatBody = {
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Do the task.' },
  ],
  tools,
};

describe("NeMo-RL's vLLM HTTP server", () => {
  it('serves only /v1/chat/completions and /tokenize', async () => {
    const server = await nemo();
    for (const [method, path] of [
      ['GET', '/v1/models'],
      ['POST', '/v1/completions'],
      ['POST', '/generate'],
    ] as const) {
      expect(await request(server, method, path, method === 'POST' ? { prompt: [1] } : undefined)).toMatchObject({
        status: 404,
        text: '{"detail":"Not Found"}',
      });
    }
    const tokenized = JSON.parse((await request(server, 'POST', '/tokenize', task)).text) as Json;
    expect(tokenized.tokens).toEqual(renderPrompt(qwen, task));
  });

  it("refuses sampling that is not the training pair, with its asserts' plain 500", async () => {
    const server = await nemo();
    for (const bad of [{ temperature: 0.7 }, { ...SAMPLING, top_k: 20 }, { temperature: 1, top_p: 0.95 }, { temperature: 0.7, top_p: 1 }, { top_p: 0.95 }]) {
      expect(await request(server, 'POST', '/v1/chat/completions', { ...task, ...bad })).toEqual({
        status: 500,
        type: 'text/plain; charset=utf-8',
        text: 'Internal Server Error',
      });
    }
    expect(server.calls).toHaveLength(0);
    await chat(server, { ...task, ...SAMPLING, top_k: -1 });
    await chat(server, { ...task, ...SAMPLING, top_k: null });
    expect(server.calls).toHaveLength(2);
  });

  it('puts prompt and generation token ids and logprobs on the message, tokens as token_id:N', async () => {
    const server = await nemo();
    const reply = await chat(server, { ...task, ...SAMPLING, logprobs: true, top_logprobs: 0, return_token_ids: true });
    const choice = reply.choices[0];
    expect(choice.message.prompt_token_ids).toEqual(renderPrompt(qwen, task));
    expect(choice.message.generation_token_ids).toEqual(choice.token_ids);
    expect(choice.message.generation_log_probs).toEqual(choice.logprobs.content.map((c: Json) => c.logprob));
    expect(choice.logprobs.content.map((c: Json) => c.token)).toEqual(choice.token_ids.map((id: number) => `token_id:${id}`));
    // Without logprobs the message carries nothing extra; a null top_logprobs is refused.
    const plain = await chat(server, { ...task, ...SAMPLING });
    expect(plain.choices[0].message.generation_token_ids).toBeUndefined();
    expect((await request(server, 'POST', '/v1/chat/completions', { ...task, ...SAMPLING, logprobs: true, top_logprobs: null })).status).toBe(400);
    // Streaming is plain vLLM streaming (no token fields on a message), tokens still as ids.
    const res = await request(server, 'POST', '/v1/chat/completions', { ...task, ...SAMPLING, stream: true, logprobs: true, return_token_ids: true });
    const chunks = res.text
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => JSON.parse(e.slice(6)) as Json);
    const streamed = chunks.flatMap((c) => c.choices.flatMap((ch: Json) => ch.logprobs?.content ?? []));
    expect(streamed.length).toBeGreaterThan(0);
    expect(streamed.every((c: Json) => /^token_id:\d+$/.test(c.token))).toBe(true);
  });

  it("splices the previous turn's exact tokens into the next prompt", async () => {
    const server = await nemo();
    const first = (await chat(server, { ...task, ...SAMPLING, logprobs: true, top_logprobs: 0 })).choices[0].message;
    const prompt1 = first.prompt_token_ids as number[];
    const generation1 = first.generation_token_ids as number[];
    expect(generation1.at(-1)).toBe(EOS);
    const { prompt_token_ids, generation_token_ids, generation_log_probs, reasoning, ...visible } = first;
    const assistant = { ...visible, reasoning_content: reasoning, prompt_token_ids, generation_token_ids, generation_log_probs };
    const next: ChatBody = { ...task, messages: [...task.messages, assistant, { role: 'tool', tool_call_id: first.tool_calls[0].id, content: 'total 0' }] };

    const second = (await chat(server, { ...next, ...SAMPLING, logprobs: true, top_logprobs: 0 })).choices[0].message;
    const spliced = second.prompt_token_ids as number[];
    const rerendered = renderPrompt(qwen, next);
    // The re-render tokenizes the previous reply canonically; the sampled ids had other splits.
    expect(rerendered.slice(0, prompt1.length + generation1.length)).not.toEqual([...prompt1, ...generation1]);
    // NeMo-RL keeps them byte for byte, then goes on with the template from that turn's end.
    expect(spliced.slice(0, prompt1.length + generation1.length)).toEqual([...prompt1, ...generation1]);
    const eosBefore = renderPrompt(qwen, { ...next, messages: next.messages.slice(0, 3) }, { addGenerationPrompt: false }).filter((id) => id === EOS).length;
    const boundary = rerendered.findIndex((id, i) => id === EOS && rerendered.slice(0, i + 1).filter((x) => x === EOS).length === eosBefore);
    expect(spliced.slice(prompt1.length + generation1.length)).toEqual(rerendered.slice(boundary + 1));
    expect(qwen.decode(spliced)).toBe(qwen.decode(rerendered));
    expect(server.calls[1]!.promptIds).toEqual(spliced);
    // /tokenize splices the same way; a top-level required_prefix_token_ids does too.
    expect(JSON.parse((await request(server, 'POST', '/tokenize', next)).text).tokens).toEqual(spliced);
    const { prompt_token_ids: _p, generation_token_ids: _g, generation_log_probs: _l, ...bare } = assistant;
    const topLevel = { ...next, messages: [...task.messages, bare, next.messages[3]!], required_prefix_token_ids: [...prompt1, ...generation1] };
    expect(JSON.parse((await request(server, 'POST', '/tokenize', topLevel)).text).tokens).toEqual(spliced);
    // A message with prompt ids but no generation ids is a KeyError in NeMo-RL.
    const broken = { ...next, messages: [...task.messages, { ...bare, prompt_token_ids: prompt1 }, next.messages[3]!] };
    expect((await request(server, 'POST', '/v1/chat/completions', { ...broken, ...SAMPLING })).status).toBe(500);
  });
});

describe('replace_prefix_tokens', () => {
  it("follows NeMo-RL's docstring example", () => {
    expect(replacePrefixTokens(2, [11, 12, 13, 40, 41, 220, 17, 2], [11, 12, 13, 40, 41, 1001, 2], [11, 12, 13, 40, 41, 1001, 2, 21, 22, 40, 41])).toEqual([
      11, 12, 13, 40, 41, 220, 17, 2, 21, 22, 40, 41,
    ]);
  });

  it('counts end-of-turn tokens, so a template that drops earlier reasoning meets the same boundary', () => {
    // The prefix render kept a think block (90, 91) the full render drops: positions shift, counts do not.
    const template = [1, 2, 10, 11, 2, 5, 2, 7];
    expect(replacePrefixTokens(2, [1, 2, 10, 90, 91, 11, 2], [1, 2, 10, 90, 91, 11, 2], template)).toEqual([1, 2, 10, 90, 91, 11, 2, 5, 2, 7]);
    // A reply cut by length has no end-of-turn token of its own to drop.
    expect(replacePrefixTokens(2, [1, 2, 10, 90], [1, 2, 10, 11, 2], template)).toEqual([1, 2, 10, 90, 2, 5, 2, 7]);
    expect(replacePrefixTokens(2, [], [1, 2], template)).toEqual(template);
    expect(() => replacePrefixTokens(2, [1, 2], [2, 2, 2, 2, 2], template)).toThrow(/EOS token #5 not found/);
  });
});
