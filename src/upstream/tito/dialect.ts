import type { CanonicalRequest } from '../../core/chat.js';
import type { TokenIds } from '../../core/tokens.js';
import type { UpstreamKind } from '../types.js';

/** What a token-in/token-out server returned for one reply, or one piece of a streamed reply. */
export interface Generation {
  sampledIds: number[];
  logprobs: number[] | null;
  /** The prompt ids the server reports it saw, when it reports them. */
  promptIds: TokenIds | null;
  /** `stop` / `length` (or the server's word), on the last piece. */
  finishReason: string | null;
  /** What stopped it, when the server says: the matched stop string, or a stop token id. */
  stopReason: string | number | null;
  usage: { promptTokens?: number; completionTokens?: number } | null;
}

/** One server's token-in endpoint: its request body and where it puts ids and logprobs. */
export interface TokenInDialect {
  kind: UpstreamKind;
  path: string;
  /**
   * Tokens of the context the server keeps out of reach of prompt + reply: vLLM takes
   * prompt + max_tokens up to the context length (0); SGLang only strictly below it (1, see
   * sglang/generate.ts). replyBudget leaves them free so a harness that sets no budget of its own
   * is not turned away on its first call.
   */
  contextSlack: number;
  /** `maxTokens`: the reply budget polar worked out (see replyBudget in upstream.ts). */
  body(promptIds: readonly number[], req: CanonicalRequest, model: string, stopIds: readonly number[], maxTokens: number): Record<string, unknown>;
  completion(json: unknown): Generation;
  /** A reader for one stream: each event's new ids and logprobs (some servers resend all so far). */
  streamReader(): (json: unknown) => Generation;
}

/** The harness's sampling settings that carry over to a token-in request, by their chat names. */
export function samplingOf(req: CanonicalRequest): SamplingSettings {
  const b = req.body;
  const params: SamplingSettings['params'] = {};
  for (const key of SAMPLING_KEYS) {
    const v = numberOr(b[key]);
    if (v !== undefined) params[key] = v;
  }
  const stop = typeof b.stop === 'string' ? [b.stop] : Array.isArray(b.stop) ? b.stop.filter((s): s is string => typeof s === 'string') : [];
  return { params, stop };
}

const SAMPLING_KEYS = ['temperature', 'top_p', 'top_k', 'min_p', 'presence_penalty', 'frequency_penalty', 'repetition_penalty', 'seed'] as const;

export interface SamplingSettings {
  params: Partial<Record<(typeof SAMPLING_KEYS)[number], number>>;
  stop: string[];
}

/** The harness's own reply budget, if it set one. */
export function requestedMaxTokens(req: CanonicalRequest): number | undefined {
  return numberOr(req.body.max_completion_tokens) ?? numberOr(req.body.max_tokens);
}

function numberOr(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}
