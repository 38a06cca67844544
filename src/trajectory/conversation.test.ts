import { describe, expect, it } from 'vitest';
import type { RequestRecord } from '../store/requests.js';
import { callConversation, type ResponseLookup } from './conversation.js';

/** A Responses call recorded with token ids sent upstream (no chat messages there), continuing `resp_a`. */
const row = {
  sessionId: 'ses_b',
  provider: 'openai-responses',
  path: '/v1/responses',
  upstreamRequest: JSON.stringify({ prompt: [1, 2, 3] }),
  originalRequest: JSON.stringify({ model: 'm', previous_response_id: 'resp_a', input: 'and then?' }),
} as unknown as RequestRecord;

describe('callConversation', () => {
  it("resolves a previous_response_id within the call's own session only, as the proxy does", () => {
    const asked: [string, string][] = [];
    const lookup: ResponseLookup = (responseId, sessionId) => {
      asked.push([responseId, sessionId]);
      return undefined;
    };
    const got = callConversation(row, lookup);
    expect(asked).toEqual([['resp_a', 'ses_b']]);
    // Another session's response is not this call's history: no conversation, a reason instead.
    expect('problem' in got && got.problem).toMatch(/previous_response_id resp_a/);
  });
});
