import type { ProviderName } from '../core/chat.js';
import { anthropicMessagesCodec } from './anthropic-messages/index.js';
import { googleGenerateContentCodec } from './google-generate-content/index.js';
import { openaiChatCodec } from './openai-chat/index.js';
import { openaiResponsesCodec } from './openai-responses/index.js';
import type { ProviderCodec } from './types.js';

/** Every provider codec, by name. */
export const CODECS: Readonly<Record<ProviderName, ProviderCodec>> = {
  'openai-chat': openaiChatCodec,
  'anthropic-messages': anthropicMessagesCodec,
  'openai-responses': openaiResponsesCodec,
  'google-generate-content': googleGenerateContentCodec,
};
