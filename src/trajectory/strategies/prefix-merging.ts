import type { TokenIds } from '../../core/tokens.js';
import { classifyBreak } from '../breaks.js';
import { numberArray, sameIds } from '../../core/tokens.js';
import { grown } from '../../core/grown.js';
import type { Break, CallTokens, Strategy, StrategyResult, TokenText } from '../types.js';

/**
 * One trace being built. Its tokens (first prompt, then every response and context token) are held
 * in typed buffers that grow by appending, so checking that a call extends the chain is one native
 * comparison of bytes and adding a call writes its new tokens only; the trace's JS arrays are made
 * once, at the end.
 */
interface Chain {
  agentId: string;
  /** The last call's recorded prompt ids (what --allow-rerender matches against). */
  tip: TokenIds;
  /** Whether the last call's sampled ids ended with the end-of-turn token. */
  endedWithEot: boolean;
  /** Boundaries joined on a re-render that differs from what was sampled (--allow-rerender). */
  drift: number;
  requestIds: string[];
  /** The first prompt, then the responses: `length` tokens used. */
  ids: Uint32Array;
  length: number;
  promptLength: number;
  /** Per response token (position - promptLength): 1 sampled, 0 context. */
  mask: Uint8Array;
  /** Per response token; null once a call came without a logprob for each sampled id. */
  logprobs: Float64Array | null;
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
      const { class: cls, position } = classifyBreak(latest.ids.subarray(0, latest.length), latest.lastPromptEnd, call.promptIds, text);
      breaks.push({ requestId: call.requestId, seq: call.seq, agentId: call.agentId, previousRequestId: latest.lastRequestId, class: cls, position });
      latest.breaks++;
    }
    chains.push(start(call, eot));
  }
  return {
    traces: chains.map((c) => ({
      agent_id: c.agentId,
      request_ids: c.requestIds,
      prompt_ids: numberArray(c.ids.subarray(0, c.promptLength)),
      response_ids: numberArray(c.ids.subarray(c.promptLength, c.length)),
      loss_mask: numberArray(c.mask.subarray(0, c.length - c.promptLength) as ArrayLike<0 | 1>),
      response_logprobs: c.logprobs && numberArray(c.logprobs.subarray(0, c.length - c.promptLength)),
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

function startsWith(prompt: TokenIds, head: TokenIds): boolean {
  return head.length > 0 && head.length <= prompt.length && sameIds(head, 0, prompt, 0, head.length);
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
  const responses = chain.length - chain.promptLength;
  const lastSampledEnd = chain.endedWithEot ? responses - 1 : responses;
  // Drift: the re-rendered answer is not the ids the model sampled (the last call's mask-1 run).
  let runStart = lastSampledEnd;
  while (runStart > 0 && chain.mask[runStart - 1] === 1) runStart--;
  if (k !== lastSampledEnd - runStart || !sameIds(tail, 0, chain.ids, chain.promptLength + runStart, k)) chain.drift++;
  // The interstitial after the re-rendered answer (from its end-of-turn token, or after it when the
  // sampled ids already ended with one) is context.
  pushContext(chain, call.promptIds, chain.tip.length + (chain.endedWithEot ? k + 1 : k));
  chain.lastPromptEnd = chain.length;
  pushSampled(chain, call, eot);
  return true;
}

/** The number of tokens of `prompt` the chain accounts for, or -1 when the prompt does not extend it. */
function coveredBy(chain: Chain, prompt: TokenIds): number {
  if (prompt.length < chain.length) return -1;
  return sameIds(chain.ids, 0, prompt, 0, chain.length) ? chain.length : -1;
}

/** Adds a call whose prompt extends the chain (`covered` = the chain's length, from coveredBy). */
function append(chain: Chain, call: CallTokens, covered: number, eot: number | null): void {
  // Context between turns (the tool result, the next user message, the end-of-turn token a
  // length-cut turn lacked): tokens the model read but did not sample.
  pushContext(chain, call.promptIds, covered);
  chain.lastPromptEnd = chain.length;
  pushSampled(chain, call, eot);
}

function start(call: CallTokens, eot: number | null = null): Chain {
  const n = call.promptIds.length + call.sampledIds.length;
  const chain: Chain = {
    agentId: call.agentId,
    tip: call.promptIds,
    endedWithEot: false,
    drift: 0,
    requestIds: [],
    ids: new Uint32Array(n + 16),
    length: 0,
    promptLength: call.promptIds.length,
    mask: new Uint8Array(call.sampledIds.length + 16),
    logprobs: new Float64Array(call.sampledIds.length + 16),
    finishReason: null,
    lastPromptEnd: call.promptIds.length,
    lastRequestId: call.requestId,
    breaks: 0,
  };
  putIds(chain, call.promptIds, 0);
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
  const at = chain.length - chain.promptLength;
  putIds(chain, call.sampledIds, 0);
  chain.mask.fill(1, at, at + call.sampledIds.length);
  if (chain.logprobs && lps) for (let i = 0; i < lps.length; i++) chain.logprobs[at + i] = lps[i]!;
}

/** `prompt[from, end)` as context: mask 0, logprob 0. */
function pushContext(chain: Chain, prompt: TokenIds, from: number): void {
  const at = chain.length - chain.promptLength;
  putIds(chain, prompt, from);
  chain.mask.fill(0, at, at + prompt.length - from);
  chain.logprobs?.fill(0, at, at + prompt.length - from);
}

/**
 * Appends `src[from, end)` to the chain's tokens (the response buffers made to fit). Ids reach the
 * store as uint32 (core/token-packing.ts); one that is not cannot be held here without changing it,
 * so it is refused rather than written.
 */
function putIds(chain: Chain, src: TokenIds, from: number): void {
  const n = src.length - from;
  if (n <= 0) return;
  const need = chain.length + n;
  if (need > chain.ids.length) chain.ids = grown(chain.ids, need, chain.length);
  const responses = need - chain.promptLength;
  if (responses > chain.mask.length) {
    chain.mask = grown(chain.mask, responses, chain.length - chain.promptLength);
    if (chain.logprobs) chain.logprobs = grown(chain.logprobs, responses, chain.length - chain.promptLength);
  }
  if (src instanceof Uint32Array) chain.ids.set(src.subarray(from), chain.length);
  else
    for (let i = from; i < src.length; i++) {
      const id = src[i]!;
      if (!Number.isInteger(id) || id < 0 || id > 0xffffffff) throw new RangeError(`token id at position ${i} is not a uint32: ${id}`);
      chain.ids[chain.length + i - from] = id;
    }
  chain.length = need;
}
