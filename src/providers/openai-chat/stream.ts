import type { CanonicalRequest } from '../../core/chat.js';
import type { SseEvent } from '../../core/sse/parse.js';
import { formatSseComment, formatSseEvent } from '../../core/sse/write.js';
import type { StreamTranslator } from '../types.js';
import { openaiErrorBody } from './errors.js';
import { encodeChatChunk } from './response.js';

/**
 * OpenAI Chat streams are the canonical chunks themselves, one `data:` line each, ended by
 * `data: [DONE]`. Errors after the headers go out as a `data: {"error": …}` line, which the
 * official SDKs raise as an APIError, then `[DONE]`.
 */
export function createChatStream(req: CanonicalRequest): StreamTranslator {
  return {
    push(chunk, tokens) {
      const out = encodeChatChunk(chunk, req, tokens);
      return out ? [{ data: JSON.stringify(out) }] : [];
    },
    end(): SseEvent[] {
      return [{ data: '[DONE]' }];
    },
    error(err) {
      return [{ data: JSON.stringify(openaiErrorBody(err)) }, { data: '[DONE]' }].map(formatSseEvent).join('');
    },
    keepAlive() {
      // A comment line: ignored by every SSE client, and it resets byte-idle watchdogs.
      return formatSseComment('keep-alive');
    },
  };
}
