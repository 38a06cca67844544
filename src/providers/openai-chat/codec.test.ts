import { describe, expect, it } from 'vitest';
import { PolarError } from '../../core/errors.js';
import type { ChatCompletion, ChatCompletionChunk } from '../../core/chat.js';
import { StreamEventReader } from '../stream-events.js';
import { openaiChatCodec } from './index.js';

const completion: ChatCompletion = {
  id: 'c1',
  object: 'chat.completion',
  created: 1,
  model: 'Qwen/Qwen3-8B',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop', logprobs: { content: [{ token: 'hi', logprob: -0.1 }] } }],
  usage: { prompt_tokens: 2, completion_tokens: 1 },
};
const CTX = { path: '/v1/chat/completions' };
const ENC = { callId: 'req_1', created: 1 };
const tokens = { source: 'upstream' as const, promptIds: [1, 2], sampledIds: [3], logprobs: [-0.1] };

describe('openai-chat codec: requests', () => {
  it('keeps every field but the ones the upstream adapter owns, and notes what the caller asked for', () => {
    const req = openaiChatCodec.decodeRequest(
      {
        model: 'claude-opus-4-8',
        stream: true,
        stream_options: { include_usage: true },
        logprobs: true,
        top_logprobs: 2,
        return_token_ids: true,
        messages: [{ role: 'user', content: 'x' }],
        tools: [{ type: 'function', function: { name: 'f' } }],
        seed: 7,
        chat_template_kwargs: { enable_thinking: false },
      },
      CTX,
    );
    expect(req.requestedModel).toBe('claude-opus-4-8');
    expect(req.stream).toBe(true);
    expect(req.client).toEqual({ logprobs: true, tokenIds: true, includeUsage: true });
    expect(req.body).toEqual({
      logprobs: true,
      top_logprobs: 2,
      messages: [{ role: 'user', content: 'x' }],
      tools: [{ type: 'function', function: { name: 'f' } }],
      seed: 7,
      chat_template_kwargs: { enable_thinking: false },
    });
  });

  it.each([
    ['a non-object body', [1, 2], /JSON object/],
    ['no messages', { model: 'm' }, /non-empty array/],
    ['a message without a role', { messages: [{ content: 'x' }] }, /string `role`/],
    ['a non-string model', { model: 3, messages: [{ role: 'user' }] }, /`model`/],
    ['a non-boolean stream', { stream: 'yes', messages: [{ role: 'user' }] }, /`stream`/],
  ])('refuses %s with POLAR_BAD_REQUEST', (_name, body, message) => {
    expect(() => openaiChatCodec.decodeRequest(body, CTX)).toThrow(message);
    try {
      openaiChatCodec.decodeRequest(body, CTX);
    } catch (err) {
      expect(err).toMatchObject({ code: 'POLAR_BAD_REQUEST', status: 400 });
    }
  });
});

describe('openai-chat codec: replies', () => {
  const plain = openaiChatCodec.decodeRequest({ model: 'asked', messages: [{ role: 'user' }] }, CTX);
  const wants = openaiChatCodec.decodeRequest({ model: 'asked', logprobs: true, return_token_ids: true, messages: [{ role: 'user' }] }, CTX);

  it('echoes the requested model and strips logprobs the caller did not ask for', () => {
    const out = openaiChatCodec.encodeResponse(completion, plain, tokens, ENC) as ChatCompletion;
    expect(out.model).toBe('asked');
    expect(out.choices[0]).not.toHaveProperty('logprobs');
    expect(out).not.toHaveProperty('prompt_token_ids');
    expect(completion.choices[0]!.logprobs).toBeDefined(); // the input is not mutated
  });

  it('gives logprobs and token ids to a caller that asked for them', () => {
    const out = openaiChatCodec.encodeResponse(completion, wants, tokens, ENC) as ChatCompletion;
    expect(out.choices[0]!.logprobs).toEqual(completion.choices[0]!.logprobs);
    expect(out.prompt_token_ids).toEqual([1, 2]);
    expect(out.choices[0]!.token_ids).toEqual([3]);
  });

  it('streams chunks as data lines, drops the usage-only chunk unless asked, ends with [DONE]', () => {
    const chunk: ChatCompletionChunk = {
      id: 'c',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'served',
      choices: [{ index: 0, delta: { content: 'a' }, finish_reason: null }],
    };
    const usage: ChatCompletionChunk = { ...chunk, choices: [], usage: { prompt_tokens: 1 } };
    const s = openaiChatCodec.createStream(plain, ENC);
    const reader = new StreamEventReader(ENC.callId);
    const events = [...s.push(reader.step(chunk, null)), ...s.push(reader.step(usage, null)), ...s.end(reader.counts())];
    expect(events.map((e) => e.data)).toEqual([JSON.stringify({ ...chunk, model: 'asked' }), '[DONE]']);
    const withUsage = openaiChatCodec.createStream(
      openaiChatCodec.decodeRequest({ messages: [{ role: 'user' }], stream_options: { include_usage: true } }, CTX),
      ENC,
    );
    expect(withUsage.push(new StreamEventReader(ENC.callId).step(usage, null))).toHaveLength(1);
  });

  it('renders errors in the OpenAI shape, before and inside a stream', () => {
    const err = new PolarError('POLAR_UPSTREAM_CONNECT', 'cannot reach', 502);
    expect(openaiChatCodec.renderError(err)).toEqual({
      status: 502,
      body: { error: { message: 'cannot reach', type: 'api_error', param: null, code: 'polar_upstream_connect' } },
    });
    const text = openaiChatCodec.createStream(plain, ENC).error(err);
    const events = text.split('\n\n').filter(Boolean);
    expect(JSON.parse(events[0]!.slice('data: '.length)).error.message).toBe('cannot reach');
    expect(events[1]).toBe('data: [DONE]');
    expect(openaiChatCodec.createStream(plain, ENC).keepAlive()).toMatch(/^: /);
  });
});
