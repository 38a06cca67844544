import { isRecord } from '../../core/chat.js';
import type { ProviderCodec } from '../types.js';
import { renderGeminiError } from './errors.js';
import { decodeGeminiRequest } from './request.js';
import { encodeGeminiResponse } from './response.js';
import { createGeminiStream } from './stream.js';

export const googleGenerateContentCodec: ProviderCodec = {
  name: 'google-generate-content',
  decodeRequest: decodeGeminiRequest,
  encodeResponse: encodeGeminiResponse,
  createStream: createGeminiStream,
  renderError: renderGeminiError,
  // countTokens bodies are generateContent bodies, or wrap one in `generateContentRequest`.
  countTokens: {
    request: (body) => (isRecord(body) && isRecord(body.generateContentRequest) ? body.generateContentRequest : body),
    path: (apiPath) => apiPath.replace(':countTokens', ':generateContent'),
    reply: (count) => ({ totalTokens: count }),
  },
};
