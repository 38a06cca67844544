import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { lookupResponse } from '../proxy/recorded-response.js';
import { Store } from '../store/store.js';
import { callConversation, isConversation } from './conversation.js';

/**
 * A call continuing an earlier Responses reply (`previous_response_id`) whose upstream request
 * holds only token ids (vllm-tito, sglang-tito): its conversation comes from decoding the harness's
 * request, and the reply it continues is looked up in a real store, as export and inspect do.
 */
let store: Store;

/** Records a finished Responses call in `sessionId`: its upstream request token ids only, as polar sends them token-in. */
function recordResponsesCall(id: string, sessionId: string, request: Record<string, unknown>, reply?: Record<string, unknown>): void {
  store.sessions.ensure(sessionId, { harness: 'custom', servedModel: 'm' });
  store.requests.beginWithBodies(
    {
      id,
      sessionId,
      agentId: 'main',
      provider: 'openai-responses',
      method: 'POST',
      path: '/v1/responses',
      startedAt: Date.now(),
      streamed: false,
      requestHeaders: { 'content-type': 'application/json' },
      requestedModel: 'm',
      servedModel: 'm',
    },
    { originalRequest: JSON.stringify(request), upstreamRequest: JSON.stringify({ prompt: [1, 2, 3] }) },
  );
  store.requests.end(id, { endedAt: Date.now(), status: 'ok', httpStatus: 200, reply: JSON.stringify(reply ?? { object: 'response', output: [] }) });
}

beforeEach(() => {
  store = Store.open(':memory:');
  // Session A's first call, answered; its response id names the call (resp_a1 is req_a1's reply).
  recordResponsesCall(
    'req_a1',
    'ses_a',
    { model: 'm', input: 'The secret word is zebra.' },
    {
      id: 'resp_a1',
      object: 'response',
      output: [
        { type: 'message', id: 'msg_a1_0', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Noted: zebra.', annotations: [] }] },
      ],
    },
  );
  // Both sessions continue A's response: B by its id alone, A as its own.
  recordResponsesCall('req_b1', 'ses_b', { model: 'm', previous_response_id: 'resp_a1', input: 'What was the word?' });
  recordResponsesCall('req_a2', 'ses_a', { model: 'm', previous_response_id: 'resp_a1', input: 'What was the word?' });
});
afterEach(() => store.close());

const lookup = (id: string, sessionId: string) => lookupResponse(store, id, sessionId);

describe('callConversation', () => {
  it("resolves a previous_response_id within the call's own session only, as the proxy does", () => {
    // Another session's response is not this call's history: no conversation, a reason instead.
    const stolen = callConversation(store.requests.get('req_b1')!, lookup);
    expect(stolen).toEqual({ problem: expect.stringMatching(/previous_response_id resp_a1 is not a response this proxy recorded in this session/) });

    // The same continuation in the session that recorded it has A's conversation before its own turn.
    const own = callConversation(store.requests.get('req_a2')!, lookup);
    expect(isConversation(own), JSON.stringify(own)).toBe(true);
    const messages = isConversation(own) ? own.messages : [];
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ['user', 'The secret word is zebra.'],
      ['assistant', 'Noted: zebra.'],
      ['user', 'What was the word?'],
    ]);
  });
});
