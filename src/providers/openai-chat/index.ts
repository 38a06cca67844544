import type { ProviderCodec } from '../types.js';
import { renderChatError } from './errors.js';
import { decodeChatRequest } from './request.js';
import { encodeChatResponse } from './response.js';
import { createChatStream } from './stream.js';

export const openaiChatCodec: ProviderCodec = {
  name: 'openai-chat',
  decodeRequest: (body) => decodeChatRequest(body),
  encodeResponse: (done, req, tokens) => encodeChatResponse(done, req, tokens),
  createStream: (req) => createChatStream(req),
  renderError: renderChatError,
  countTokens: null,
};
