import type { CallTokens, Strategy, StrategyResult } from '../types.js';

/** One trace per call: the prompt it saw, the ids it sampled, every response token trainable. */
export const perRequest: Strategy = {
  name: 'per-request',
  run(calls: readonly CallTokens[]): StrategyResult {
    return {
      traces: calls.map((c) => ({
        agent_id: c.agentId,
        request_ids: [c.requestId],
        prompt_ids: [...c.promptIds],
        response_ids: [...c.sampledIds],
        loss_mask: c.sampledIds.map(() => 1 as const),
        response_logprobs: c.logprobs && c.logprobs.length === c.sampledIds.length ? [...c.logprobs] : null,
        finish_reason: c.finishReason,
        metadata: { calls: 1 },
      })),
      breaks: [],
    };
  },
};
