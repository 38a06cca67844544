import { describe, expect, it } from 'vitest';
import type { CanonicalRequest } from '../../core/chat.js';
import { openaiChatBody } from '../openai/index.js';
import { normalizeBaseUrl } from '../openai-compatible.js';
import { vllmChatBody } from './flags.js';

const req = (over: Partial<CanonicalRequest> = {}): CanonicalRequest => ({
  requestedModel: 'claude-opus-4-8',
  stream: false,
  body: { messages: [{ role: 'user', content: 'hi' }], temperature: 0.7 },
  client: { logprobs: false, tokenIds: false, includeUsage: false },
  ...over,
});

describe('vLLM request flags', () => {
  it('turns on token ids and one logprob per sampled token, with the served model', () => {
    expect(vllmChatBody(req(), 'Qwen/Qwen3-8B')).toEqual({
      messages: [{ role: 'user', content: 'hi' }],
      temperature: 0.7,
      model: 'Qwen/Qwen3-8B',
      stream: false,
      logprobs: true,
      top_logprobs: 0,
      return_token_ids: true,
    });
  });

  it('asks for a usage chunk when streaming, keeping other stream options', () => {
    const body = vllmChatBody(req({ stream: true, body: { messages: [], stream_options: { continuous_usage_stats: true } } }), 'm');
    expect(body.stream_options).toEqual({ continuous_usage_stats: true, include_usage: true });
  });

  it("keeps the caller's own top_logprobs when it asked for logprobs", () => {
    const body = vllmChatBody(req({ body: { messages: [], top_logprobs: 5 }, client: { logprobs: true, tokenIds: false, includeUsage: false } }), 'm');
    expect(body.top_logprobs).toBe(5);
  });

  it('the openai kind adds no token flags', () => {
    expect(openaiChatBody(req(), 'gpt')).toEqual({ messages: [{ role: 'user', content: 'hi' }], temperature: 0.7, model: 'gpt', stream: false });
  });

  it('normalises upstream base URLs with or without /v1', () => {
    expect(normalizeBaseUrl('http://127.0.0.1:8000/v1/')).toBe('http://127.0.0.1:8000');
    expect(normalizeBaseUrl('http://gpu/vllm/v1')).toBe('http://gpu/vllm');
    expect(() => normalizeBaseUrl('localhost:8000')).toThrow(/http/);
  });
});
