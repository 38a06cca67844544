import { ChatCompletionsUpstream, type ChatDialect } from '../openai-compatible.js';
import type { UpstreamHttpOptions } from '../http.js';
import { extractVllmChunk, extractVllmCompletion } from './extract.js';
import { vllmChatBody, vllmTokenizeBody } from './flags.js';

export const vllmDialect: ChatDialect = {
  kind: 'vllm',
  capturesTokens: true,
  body: vllmChatBody,
  completion: extractVllmCompletion,
  chunk: extractVllmChunk,
  tokenize: { path: '/tokenize', body: vllmTokenizeBody },
};

export function createVllmUpstream(options: UpstreamHttpOptions): ChatCompletionsUpstream {
  return new ChatCompletionsUpstream(vllmDialect, options);
}

export { vllmChatBody, vllmTokenizeBody } from './flags.js';
export { extractVllmChunk, extractVllmCompletion } from './extract.js';
