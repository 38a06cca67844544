import type { ProviderCodec } from '../types.js';
import { renderAnthropicError } from './errors.js';
import { decodeAnthropicRequest } from './request.js';
import { encodeAnthropicResponse } from './response.js';
import { createAnthropicStream } from './stream.js';

export const anthropicMessagesCodec: ProviderCodec = {
  name: 'anthropic-messages',
  decodeRequest: (body) => decodeAnthropicRequest(body),
  encodeResponse: encodeAnthropicResponse,
  createStream: createAnthropicStream,
  renderError: renderAnthropicError,
  // count_tokens bodies are Messages bodies without max_tokens.
  countTokens: {
    request: (body) => body,
    path: (apiPath) => apiPath.replace(/\/count_tokens$/, ''),
    reply: (count) => ({ input_tokens: count }),
  },
};
