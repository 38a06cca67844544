import type { CanonicalRequest } from '../../core/chat.js';
import { isRecord } from '../../core/chat.js';
import { NO_TOKENS } from '../../core/tokens.js';
import { expectChunkShape, expectCompletionShape } from '../chat-shape.js';
import { ChatCompletionsUpstream, type ChatDialect } from '../openai-compatible.js';
import type { UpstreamHttpOptions } from '../http.js';

/**
 * Any OpenAI-compatible server without token ids (Ollama, LM Studio, hosted APIs). The text is
 * recorded; `token_source` is `none`, so nothing from these calls is ever trainable.
 */
export function openaiChatBody(req: CanonicalRequest, model: string): Record<string, unknown> {
  const body: Record<string, unknown> = { ...req.body, model, stream: req.stream };
  if (req.stream) {
    const streamOptions = isRecord(req.body.stream_options) ? req.body.stream_options : {};
    body.stream_options = { ...streamOptions, include_usage: true };
  } else {
    delete body.stream_options;
  }
  return body;
}

export const openaiDialect: ChatDialect = {
  kind: 'openai',
  capturesTokens: false,
  body: openaiChatBody,
  completion: (json) => ({ completion: expectCompletionShape(json), tokens: NO_TOKENS }),
  chunk: (json) => ({ chunk: expectChunkShape(json), tokens: null }),
};

export function createOpenAIUpstream(options: UpstreamHttpOptions): ChatCompletionsUpstream {
  return new ChatCompletionsUpstream(openaiDialect, options);
}
