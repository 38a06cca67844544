import type { TokenIds } from '../core/tokens.js';
import type { Logprobs } from './ids.js';

/**
 * The trajectory record: one trace per line of JSONL, the contract every exporter and checker
 * uses. `loss_mask` and `response_logprobs` run parallel to `response_ids`: mask 1 marks a token the
 * model sampled (with the logprob it had); mask 0 marks context between turns (logprob 0).
 */
export interface Trajectory {
  session_id: string;
  agent_id: string;
  strategy: string;
  trace_index: number;
  /** The calls merged into this trace, in order. */
  request_ids: string[];
  prompt_ids: number[];
  response_ids: number[];
  loss_mask: (0 | 1)[];
  /** null for the whole trace when some sampled token has no logprob. */
  response_logprobs: number[] | null;
  finish_reason: string | null;
  /** The evaluator's reward for this trace (its per-trace reward, else the sample's); null outside rollouts. */
  reward: number | null;
  /** The session's status. */
  status: string;
  /** The session did not end on its own (timeout, interrupted, aborted): kept, labelled, not trained on by default. */
  partial: boolean;
  /** Rollout fields, null for sessions outside a rollout: the GRPO group and the sample's advantages. */
  rollout_id: string | null;
  task_id: string | null;
  group_id: string | null;
  advantage: number | null;
  loo_advantage: number | null;
  accepted: boolean | null;
  metadata: Record<string, unknown>;
}

/**
 * One recorded call, as the strategies see it: only calls whose ids the server returned. Ids and
 * logprobs are typed arrays when read from the store (views of its columns, store/delta-read.ts),
 * JS arrays elsewhere; strategies must not change them.
 */
export interface CallTokens {
  requestId: string;
  agentId: string;
  seq: number;
  promptIds: TokenIds;
  sampledIds: TokenIds;
  logprobs: Logprobs | null;
  finishReason: string | null;
  /** The policy version that served the call, when the trainer announced one. */
  policyVersion?: string | null;
}

/**
 * Why a call could not extend the trace before it: `template` (the special-token sequence of the
 * re-rendered turn differs), `retoken` (the text matches but the ids differ: BPE split differently),
 * `rewrite` (the history itself changed: compaction, edited or stripped content such as earlier
 * thinking), `other` (no tokenizer to tell, or none of these).
 */
export type BreakClass = 'template' | 'retoken' | 'rewrite' | 'other';

export interface Break {
  requestId: string;
  seq: number;
  agentId: string;
  /** The call whose trace it could not extend. */
  previousRequestId: string;
  class: BreakClass;
  /** Index of the first token where the call's prompt differs from the trace so far. */
  position: number;
}

/** What a strategy returns for one session: traces without the session-level fields, and its breaks. */
/** Fields a trajectory takes from its session and rollout sample, not from the strategy. */
export type SessionFields =
  | 'session_id'
  | 'strategy'
  | 'trace_index'
  | 'reward'
  | 'status'
  | 'partial'
  | 'rollout_id'
  | 'task_id'
  | 'group_id'
  | 'advantage'
  | 'loo_advantage'
  | 'accepted';

export interface StrategyResult {
  traces: Omit<Trajectory, SessionFields>[];
  breaks: Break[];
}

/** Decoding help for break classification; optional, since ids alone cannot tell text apart. */
export interface TokenText {
  decode(ids: readonly number[]): string;
  isSpecial(id: number): boolean;
  /**
   * One token's own text, for display: where a token holds only part of a UTF-8 character (byte-level
   * BPE splits them), the bytes it holds as \xNN rather than a replacement character.
   */
  piece?(id: number): string;
}

export interface Strategy {
  readonly name: string;
  run(calls: readonly CallTokens[], text?: TokenText): StrategyResult;
}
