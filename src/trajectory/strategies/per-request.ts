import { numberArray } from '../../core/tokens.js';
import type { CallTokens, Strategy, StrategyResult } from '../types.js';

/** One trace per call: the prompt it saw, the ids it sampled, every response token trainable. */
export const perRequest: Strategy = {
  name: 'per-request',
  run(calls: readonly CallTokens[]): StrategyResult {
    return {
      traces: calls.map((c) => ({
        agent_id: c.agentId,
        request_ids: [c.requestId],
        // Copied into arrays of the trace's own: the call's may be views of the store's buffers.
        prompt_ids: numberArray(c.promptIds),
        response_ids: numberArray(c.sampledIds),
        loss_mask: new Array<0 | 1>(c.sampledIds.length).fill(1),
        response_logprobs: c.logprobs && c.logprobs.length === c.sampledIds.length ? numberArray(c.logprobs) : null,
        finish_reason: c.finishReason,
        metadata: { calls: 1 },
      })),
      breaks: [],
    };
  },
};
