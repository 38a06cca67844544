import { callIdFromResponseId } from '../providers/openai-responses/index.js';
import type { RecordedExchange } from '../providers/types.js';
import type { Store } from '../store/store.js';

/**
 * A Responses reply this proxy recorded, by the response id it gave (`resp_…` names the call). With
 * `sessionId`, only one recorded in that session: a response id is not a secret (it travels in
 * replies and logs), and a session that could continue another's response would train on a prompt
 * it never built and read what the other session was told.
 */
export function lookupResponse(store: Store, responseId: string, sessionId?: string): RecordedExchange | undefined {
  const callId = callIdFromResponseId(responseId);
  const row = callId ? store.requests.get(callId) : undefined;
  if (row?.status !== 'ok' || row.provider !== 'openai-responses' || !row.originalRequest || !row.reply) return undefined;
  if (sessionId !== undefined && row.sessionId !== sessionId) return undefined;
  return { request: safeParse(row.originalRequest), reply: row.reply, streamed: row.streamed };
}

export function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
