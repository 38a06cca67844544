import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SseParser } from '../../core/sse/parse.js';
import { TokenAccumulator } from '../accumulate.js';
import { extractVllmChunk, extractVllmCompletion } from './extract.js';

const FIXTURES = path.resolve(__dirname, '../../../fixtures/vllm');
const completionFixture = () => JSON.parse(fs.readFileSync(path.join(FIXTURES, 'chat-completion.json'), 'utf8'));
const streamFixture = () =>
  new SseParser()
    .push(fs.readFileSync(path.join(FIXTURES, 'chat-stream.sse')))
    .filter((e) => e.data !== '[DONE]')
    .map((e) => JSON.parse(e.data));

describe('vLLM extraction', () => {
  it('reads prompt ids (top level), sampled ids (choice) and logprobs from a non-streaming reply', () => {
    const { completion, tokens } = extractVllmCompletion(completionFixture());
    expect(tokens).toEqual({
      source: 'upstream',
      promptIds: [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198],
      sampledIds: [32713, 385, 0, 151645],
      // biome-ignore lint/correctness/noPrecisionLoss: full-precision logprobs as vLLM prints them, to show they pass through unrounded
      // biome-ignore lint/suspicious/noApproximativeNumericConstant: an arbitrary logprob, not e
      logprobs: [-0.3141592653589793, -1.2345678901234567e-5, -2.718281828459045, -9999],
    });
    // Training fields are gone from what goes on to the harness; everything else stays.
    expect(completion).not.toHaveProperty('prompt_token_ids');
    expect(completion).not.toHaveProperty('kv_transfer_params');
    expect(completion.choices[0]).not.toHaveProperty('token_ids');
    expect(completion.choices[0]!.message.content).toBe('Hello!');
    expect(completion.usage).toMatchObject({ prompt_tokens: 9, completion_tokens: 4 });
  });

  it('accumulates a stream: prompt ids from the first chunk, ids and logprobs from every chunk', () => {
    const acc = new TokenAccumulator('upstream');
    const chunks = streamFixture().map(extractVllmChunk);
    for (const c of chunks) acc.add(c.tokens);
    expect(acc.result()).toEqual(extractVllmCompletion(completionFixture()).tokens);
    expect(chunks[0]!.chunk).not.toHaveProperty('prompt_token_ids');
    expect(chunks.every((c) => !('token_ids' in (c.chunk.choices[0] ?? {})))).toBe(true);
    expect(chunks[chunks.length - 1]!.chunk).toMatchObject({ choices: [], usage: { completion_tokens: 4 } });
  });

  it('a server that ignored return_token_ids gives token_source none, not empty upstream ids', () => {
    const reply = completionFixture();
    delete reply.prompt_token_ids;
    delete reply.choices[0].token_ids;
    expect(extractVllmCompletion(reply).tokens).toEqual({ source: 'none', promptIds: null, sampledIds: null, logprobs: null });
    const acc = new TokenAccumulator('upstream');
    for (const e of streamFixture()) {
      delete e.prompt_token_ids;
      for (const c of e.choices) delete c.token_ids;
      acc.add(extractVllmChunk(e).tokens);
    }
    expect(acc.result().source).toBe('none');
  });

  it('renames vLLM `reasoning` to the canonical `reasoning_content`', () => {
    const reply = completionFixture();
    reply.choices[0].message.reasoning = 'think';
    expect(extractVllmCompletion(reply).completion.choices[0]!.message).toMatchObject({ reasoning_content: 'think' });
    const chunk = extractVllmChunk({
      id: 'c',
      object: 'chat.completion.chunk',
      created: 0,
      model: 'm',
      choices: [{ index: 0, delta: { reasoning: 'hm' }, finish_reason: null }],
    });
    expect(chunk.chunk.choices[0]!.delta).toEqual({ reasoning_content: 'hm' });
  });

  it('keeps a logprob that is not a number as NaN so verification names it, rather than dropping it', () => {
    const reply = completionFixture();
    reply.choices[0].logprobs.content[1].logprob = null;
    expect(extractVllmCompletion(reply).tokens.logprobs![1]).toBeNaN();
  });

  it('rejects malformed token ids and non-completions with a protocol error', () => {
    const reply = completionFixture();
    reply.choices[0].token_ids = [1, -2];
    expect(() => extractVllmCompletion(reply)).toThrow(/not a token id/);
    expect(() => extractVllmCompletion({ object: 'error' })).toThrow(/no choices array/);
    expect(() => extractVllmChunk({ error: { message: 'boom' } })).toThrow(/mid-stream: boom/);
  });
});
