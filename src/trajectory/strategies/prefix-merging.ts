import { classifyBreak, commonPrefix } from '../breaks.js';
import type { Break, CallTokens, Strategy, StrategyResult, TokenText } from '../types.js';

interface Chain {
  agentId: string;
  /** The last call's recorded prompt ids (what --allow-rerender matches against). */
  tip: readonly number[];
  /** Whether the last call's sampled ids ended with the end-of-turn token. */
  endedWithEot: boolean;
  /** Boundaries joined on a re-render that differs from what was sampled (--allow-rerender). */
  drift: number;
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
export interface PrefixMergingOptions {
  /**
   * The reference design's looser rule: a call also joins when the previous call's *prompt* is a
   * prefix of its prompt, although the server re-rendered the previous answer differently from what
   * was sampled. The interstitial after the re-rendered answer (found by its end-of-turn token)
   * becomes context; each re-rendered boundary that differs from the sampled ids is counted as
   * context drift — later turns were sampled on a context the trace does not contain.
   */
  allowRerender?: boolean;
}

export function createPrefixMerging(options: PrefixMergingOptions = {}): Strategy {
  return {
    name: 'prefix-merging',
    run: (calls, text) => merge(calls, text, options),
  };
}

export const prefixMerging: Strategy = createPrefixMerging();

function merge(calls: readonly CallTokens[], text: TokenText | undefined, options: PrefixMergingOptions): StrategyResult {
  const chains: Chain[] = [];
  const breaks: Break[] = [];
  const eot = options.allowRerender ? endOfTurnId(calls) : null;
  for (const call of calls) {
    const mine = chains.filter((c) => c.agentId === call.agentId);
    let joined = false;
    for (let i = mine.length - 1; i >= 0 && !joined; i--) {
      const covered = coveredBy(mine[i]!, call.promptIds);
      if (covered >= 0) {
        append(mine[i]!, call, covered, eot);
        joined = true;
      }
    }
    if (joined) continue;
    const rerendered = eot !== null ? [...mine].reverse().find((c) => startsWith(call.promptIds, c.tip)) : undefined;
    if (rerendered && appendRerendered(rerendered, call, eot!)) continue;
    const latest = mine[mine.length - 1];
    if (latest) {
      const tokens = [...latest.promptIds, ...latest.responseIds];
      const { class: cls, position } = classifyBreak(tokens, latest.lastPromptEnd, call.promptIds, text);
      breaks.push({ requestId: call.requestId, seq: call.seq, agentId: call.agentId, previousRequestId: latest.lastRequestId, class: cls, position });
      latest.breaks++;
    }
    chains.push(start(call, eot));
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
      metadata: { calls: c.requestIds.length, breaks_after: c.breaks, ...(options.allowRerender ? { allow_rerender: true, context_drift: c.drift } : {}) },
    })),
    breaks,
  };
}

/** The end-of-turn id: the last sampled token of the first call that stopped on its own. */
function endOfTurnId(calls: readonly CallTokens[]): number | null {
  const done = calls.find((c) => (c.finishReason === 'stop' || c.finishReason === 'tool_calls') && c.sampledIds.length > 0);
  return done ? done.sampledIds[done.sampledIds.length - 1]! : null;
}

function startsWith(prompt: readonly number[], head: readonly number[]): boolean {
  return head.length > 0 && head.length <= prompt.length && commonPrefix(head, prompt) === head.length;
}

/**
 * Joins `call` after a re-rendered answer: the tail of its prompt after the previous prompt is the
 * server's re-render of the previous answer, up to its end-of-turn token, then the context. Returns
 * false (a break) when the tail has no end-of-turn token to split at.
 */
function appendRerendered(chain: Chain, call: CallTokens, eot: number): boolean {
  const tail = call.promptIds.slice(chain.tip.length);
  const k = tail.indexOf(eot);
  if (k < 0) return false;
  const interstitial = chain.endedWithEot ? tail.slice(k + 1) : tail.slice(k);
  const lastSampledEnd = chain.endedWithEot ? chain.responseIds.length - 1 : chain.responseIds.length;
  const rerender = tail.slice(0, k);
  // Drift: the re-rendered answer is not the ids the model sampled (the last call's mask-1 run).
  let runStart = lastSampledEnd;
  while (runStart > 0 && chain.mask[runStart - 1] === 1) runStart--;
  const sampled = chain.responseIds.slice(runStart, lastSampledEnd);
  if (rerender.length !== sampled.length || rerender.some((id, i) => id !== sampled[i])) chain.drift++;
  for (const id of interstitial) {
    chain.responseIds.push(id);
    chain.mask.push(0);
    chain.logprobs?.push(0);
  }
  chain.lastPromptEnd = chain.promptIds.length + chain.responseIds.length;
  pushSampled(chain, call, eot);
  return true;
}

/** The number of tokens of `prompt` the chain accounts for, or -1 when the prompt does not extend it. */
function coveredBy(chain: Chain, prompt: readonly number[]): number {
  const length = chain.promptIds.length + chain.responseIds.length;
  if (prompt.length < length) return -1;
  const head = chain.promptIds.length;
  if (commonPrefix(chain.promptIds, prompt) < head) return -1;
  for (let i = 0; i < chain.responseIds.length; i++) if (prompt[head + i] !== chain.responseIds[i]) return -1;
  return length;
}

/** Adds a call whose prompt extends the chain (`covered` = the chain's length, from coveredBy). */
function append(chain: Chain, call: CallTokens, covered: number, eot: number | null): void {
  // Context between turns (the tool result, the next user message, the end-of-turn token a
  // length-cut turn lacked): tokens the model read but did not sample.
  for (let i = covered; i < call.promptIds.length; i++) {
    chain.responseIds.push(call.promptIds[i]!);
    chain.mask.push(0);
    chain.logprobs?.push(0);
  }
  chain.lastPromptEnd = chain.promptIds.length + chain.responseIds.length;
  pushSampled(chain, call, eot);
}

function start(call: CallTokens, eot: number | null = null): Chain {
  const chain: Chain = {
    agentId: call.agentId,
    tip: call.promptIds,
    endedWithEot: false,
    drift: 0,
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
  pushSampled(chain, call, eot);
  return chain;
}

function pushSampled(chain: Chain, call: CallTokens, eot: number | null): void {
  chain.tip = call.promptIds;
  chain.endedWithEot = eot !== null && call.sampledIds[call.sampledIds.length - 1] === eot;
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
