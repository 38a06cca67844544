import { callIdFromResponseId } from '../providers/openai-responses/index.js';
import type { RecordedExchange } from '../providers/types.js';
import type { Store } from '../store/store.js';

/** A Responses reply this proxy recorded, by the response id it gave (`resp_…` names the call). */
export function lookupResponse(store: Store, responseId: string): RecordedExchange | undefined {
  const callId = callIdFromResponseId(responseId);
  const row = callId ? store.requests.get(callId) : undefined;
  if (row?.status !== 'ok' || row.provider !== 'openai-responses' || !row.originalRequest || !row.reply) return undefined;
  return { request: safeParse(row.originalRequest), reply: row.reply, streamed: row.streamed };
}

export function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
