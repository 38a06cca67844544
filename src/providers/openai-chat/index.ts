import { formatSseComment } from '../../core/sse/write.js';
import type { ProviderCodec } from '../types.js';
import { renderChatError } from './errors.js';
import { decodeChatRequest } from './request.js';
import { encodeChatResponse } from './response.js';
import { createChatStream } from './stream.js';

export const openaiChatCodec: ProviderCodec = {
  name: 'openai-chat',
  decodeRequest: decodeChatRequest,
  encodeResponse: encodeChatResponse,
  createStream: createChatStream,
  keepAlive: () => formatSseComment('keep-alive'),
  renderError: renderChatError,
};
