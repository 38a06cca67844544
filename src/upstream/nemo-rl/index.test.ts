import { describe, expect, it } from 'vitest';
import type { CanonicalRequest } from '../../core/chat.js';
import { completionChunks } from './chunks.js';
import { extractNemoRlCompletion, nemoRlDialect } from './index.js';

const req = (body: Record<string, unknown>): CanonicalRequest => ({
  requestedModel: 'm',
  stream: true,
  body: { messages: [{ role: 'user', content: 'hi' }], ...body },
  client: { logprobs: false, tokenIds: false, includeUsage: false },
});

describe('nemo-rl dialect', () => {
  it('keeps the token ids polar pinned on the reply it continues, past the message allow-list, and nothing else unknown', () => {
    const ids = { prompt_token_ids: [1, 2], generation_token_ids: [3], generation_log_probs: [-0.5] };
    const body = nemoRlDialect({ baseUrl: 'http://x' }).body(
      req({
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'yo', reasoning_content: 'r', prefix: true, ...ids },
          { role: 'user', content: 'again' },
        ],
      }),
      'm',
    );
    const messages = body.messages as Record<string, unknown>[];
    expect(messages[1]).toMatchObject(ids);
    expect(messages[1]).not.toHaveProperty('prefix');
    expect(messages[0]).toEqual({ role: 'user', content: 'hi' });
  });

  it('asks for the token fields unstreamed, with the training sampling pair and nothing that changes the distribution', () => {
    const body = nemoRlDialect({ baseUrl: 'http://x', temperature: 0.7, topP: 0.9 }).body(
      req({
        temperature: 0.2,
        top_p: 0.5,
        top_k: 20,
        min_p: 0.1,
        presence_penalty: 1,
        frequency_penalty: 1,
        repetition_penalty: 1.1,
        logit_bias: { 1: 2 },
        max_tokens: 100,
        response_format: { type: 'json_object' },
        min_tokens: 5,
        tool_choice: 'required',
      }),
      'Qwen/Qwen3-8B',
    );
    expect(body).toMatchObject({
      model: 'Qwen/Qwen3-8B',
      stream: false,
      logprobs: true,
      top_logprobs: 0,
      temperature: 0.7,
      top_p: 0.9,
      max_tokens: 100,
      tool_choice: 'auto',
    });
    // The session's own top_k and penalties are replaced by the neutral values (vLLM would otherwise
    // take the model's generation_config.json ones); top_k -1 is what NeMo-RL itself sets
    // (vllm_worker_async.py:737-740).
    expect(body).toMatchObject({ top_k: -1, min_p: 0, presence_penalty: 0, frequency_penalty: 0, repetition_penalty: 1 });
    for (const k of ['logit_bias', 'stream_options', 'response_format', 'min_tokens']) expect(body).not.toHaveProperty(k);
    // NeMo-RL's own default pair when none is given.
    expect(nemoRlDialect({ baseUrl: 'http://x' }).body(req({}), 'm')).toMatchObject({ temperature: 1, top_p: 1 });
  });

  it('reads the ids and logprobs off the message and takes them out of what the harness gets', () => {
    const { completion, tokens } = extractNemoRlCompletion({
      id: 'x',
      object: 'chat.completion',
      created: 0,
      model: 'm',
      choices: [
        {
          index: 0,
          finish_reason: 'stop',
          message: {
            role: 'assistant',
            content: 'hi',
            reasoning: 'r',
            prompt_token_ids: [1, 2],
            generation_token_ids: [3, 4],
            generation_log_probs: [-0.5, -0.25],
          },
        },
      ],
    });
    expect(tokens).toEqual({ source: 'upstream', promptIds: [1, 2], sampledIds: [3, 4], logprobs: [-0.5, -0.25] });
    expect(completion.choices[0]!.message).toEqual({ role: 'assistant', content: 'hi', reasoning_content: 'r' });
  });

  it('a finished reply as a stream keeps its finish and stop reason', async () => {
    const chunks = [];
    const done = {
      id: 'x',
      object: 'chat.completion',
      created: 0,
      model: 'm',
      choices: [{ index: 0, finish_reason: 'stop', stop_reason: 'END', message: { role: 'assistant', content: 'hi' } }],
      usage: { prompt_tokens: 2, completion_tokens: 1 },
    };
    for await (const c of completionChunks(done, { source: 'upstream', promptIds: [1, 2], sampledIds: [3], logprobs: [-1] })) chunks.push(c);
    expect(chunks[0]!.chunk.choices[0]!.delta).toEqual({ role: 'assistant', content: 'hi' });
    expect(chunks[0]!.tokens).toEqual({ promptIds: [1, 2], sampledIds: [3], logprobs: [-1] });
    expect(chunks[1]!.chunk.choices[0]).toMatchObject({ finish_reason: 'stop', stop_reason: 'END' });
    expect(chunks[2]!.chunk.usage).toEqual(done.usage);
  });
});
