import { classifyBreak, commonPrefix } from '../breaks.js';
import type { Break, CallTokens, Strategy, StrategyResult, TokenText } from '../types.js';

interface Chain {
  agentId: string;
  requestIds: string[];
  promptIds: number[];
  responseIds: number[];
  mask: (0 | 1)[];
  logprobs: number[] | null;
  finishReason: string | null;
  /** Where the last call's prompt ended in the chain's tokens (prompt + responses so far). */
  lastPromptEnd: number;
  lastRequestId: string;
  breaks: number;
}

/**
 * Faithful prefix merging: calls join the chain they extend, in sequence order, and only when the
 * call's prompt ids start with every token of the chain so far (its first prompt, then each
 * response and the context between), so each merged token is exactly what the model was
 * conditioned on. The one allowance: after a call cut by `length`, the end-of-turn token the
 * sampled ids lack may follow (it becomes context, mask 0). The prompt tokens after the chain are
 * context (mask 0); the call's sampled ids follow as sampled (mask 1, with their logprobs). A call
 * that extends no chain starts a new trace, so nothing is dropped, and the break is classified
 * against its agent's most recent chain. Agents (sub-agents) never share a chain.
 */
export const prefixMerging: Strategy = {
  name: 'prefix-merging',
  run(calls: readonly CallTokens[], text?: TokenText): StrategyResult {
    const chains: Chain[] = [];
    const breaks: Break[] = [];
    for (const call of calls) {
      const mine = chains.filter((c) => c.agentId === call.agentId);
      const target = [...mine].reverse().find((c) => extends_(c, call.promptIds));
      if (target) {
        append(target, call);
        continue;
      }
      const latest = mine[mine.length - 1];
      if (latest) {
        const tokens = [...latest.promptIds, ...latest.responseIds];
        const { class: cls, position } = classifyBreak(tokens, latest.lastPromptEnd, call.promptIds, text);
        breaks.push({ requestId: call.requestId, seq: call.seq, agentId: call.agentId, previousRequestId: latest.lastRequestId, class: cls, position });
        latest.breaks++;
      }
      chains.push(start(call));
    }
    return {
      traces: chains.map((c) => ({
        agent_id: c.agentId,
        request_ids: c.requestIds,
        prompt_ids: c.promptIds,
        response_ids: c.responseIds,
        loss_mask: c.mask,
        response_logprobs: c.logprobs,
        finish_reason: c.finishReason,
        metadata: { calls: c.requestIds.length, breaks_after: c.breaks },
      })),
      breaks,
    };
  },
};

/** The number of tokens of `prompt` the chain accounts for, or -1 when the prompt does not extend it. */
function coveredBy(chain: Chain, prompt: readonly number[]): number {
  const length = chain.promptIds.length + chain.responseIds.length;
  if (prompt.length < length) return -1;
  const head = chain.promptIds.length;
  if (commonPrefix(chain.promptIds, prompt) < head) return -1;
  for (let i = 0; i < chain.responseIds.length; i++) if (prompt[head + i] !== chain.responseIds[i]) return -1;
  return length;
}

function extends_(chain: Chain, prompt: readonly number[]): boolean {
  return coveredBy(chain, prompt) >= 0;
}

function append(chain: Chain, call: CallTokens): void {
  const covered = coveredBy(chain, call.promptIds);
  // Context between turns (the tool result, the next user message, the end-of-turn token a
  // length-cut turn lacked): tokens the model read but did not sample.
  for (let i = covered; i < call.promptIds.length; i++) {
    chain.responseIds.push(call.promptIds[i]!);
    chain.mask.push(0);
    chain.logprobs?.push(0);
  }
  chain.lastPromptEnd = chain.promptIds.length + chain.responseIds.length;
  pushSampled(chain, call);
}

function start(call: CallTokens): Chain {
  const chain: Chain = {
    agentId: call.agentId,
    requestIds: [],
    promptIds: [...call.promptIds],
    responseIds: [],
    mask: [],
    logprobs: [],
    finishReason: null,
    lastPromptEnd: call.promptIds.length,
    lastRequestId: call.requestId,
    breaks: 0,
  };
  pushSampled(chain, call);
  return chain;
}

function pushSampled(chain: Chain, call: CallTokens): void {
  chain.requestIds.push(call.requestId);
  chain.lastRequestId = call.requestId;
  chain.finishReason = call.finishReason;
  const lps = call.logprobs && call.logprobs.length === call.sampledIds.length ? call.logprobs : null;
  if (!lps) chain.logprobs = null;
  call.sampledIds.forEach((id, i) => {
    chain.responseIds.push(id);
    chain.mask.push(1);
    chain.logprobs?.push(lps![i]!);
  });
}
