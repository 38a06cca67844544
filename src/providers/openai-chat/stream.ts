import type { ReplyRequest } from '../../core/chat.js';
import type { SseEvent } from '../../core/sse/parse.js';
import { formatSseComment, formatSseEvent } from '../../core/sse/write.js';
import type { StreamEvent } from '../stream-step.js';
import type { StreamTranslator } from '../types.js';
import { openaiErrorBody } from './errors.js';
import { encodeChatChunk } from './response.js';

/**
 * OpenAI Chat streams are the canonical chunks themselves, one `data:` line each, ended by
 * `data: [DONE]`. Errors after the headers go out as a `data: {"error": …}` line, which the
 * official SDKs raise as an APIError, then `[DONE]`.
 */
export function createChatStream(req: ReplyRequest): StreamTranslator {
  return {
    push({ chunk, tokens, events }) {
      const out = encodeChatChunk(chunk, req, tokens, mintedIds(events));
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

/** Tool-call ids by upstream index, for the calls this chunk opened (minted where the server gave none). */
function mintedIds(events: readonly StreamEvent[]): Map<number, string> | null {
  let out: Map<number, string> | null = null;
  for (const e of events) {
    if (e.kind === 'tool-start') (out ??= new Map()).set(e.index, e.id);
  }
  return out;
}
