import type { Qwen3 } from './qwen3.js';

/** What every endpoint's reply writer needs to know about the server. */
export interface ReplyContext {
  model: string;
  /** Undefined in benchmark mode (no tokenizer work). */
  qwen: Qwen3 | undefined;
  /** Sampled tokens per streamed chunk. */
  chunkTokens: number;
  /** vLLM ≥ 0.10 names it `reasoning`; older versions `reasoning_content`. */
  reasoningField: 'reasoning' | 'reasoning_content';
  /** The server was started with `return_tokens_as_token_ids` (NeMo-RL's is). */
  tokensAsIds: boolean;
}

/**
 * A logprob entry's `token`: the token's own text (special tokens kept, a lone byte of a split
 * UTF-8 sequence as U+FFFD), or `token_id:N` with vLLM's `return_tokens_as_token_ids`.
 */
export function tokenText(ctx: ReplyContext, id: number, asIds: boolean | undefined): string {
  if (asIds ?? ctx.tokensAsIds) return `token_id:${id}`;
  return ctx.qwen ? ctx.qwen.decode([id]) : `t${id}`;
}

/** Text of ids; without a tokenizer (benchmark mode), one `x` per id. */
export function decodeText(ctx: ReplyContext, ids: number[], skipSpecialTokens: boolean): string {
  return ctx.qwen ? ctx.qwen.decode(ids, { skipSpecialTokens }) : 'x'.repeat(ids.length);
}

export const CREATED = 1_760_000_000;

/** vLLM's error body (`ErrorResponse`). */
export function vllmError(message: string, type: string, code: number, param: string | null = null) {
  return { error: { message, type, param, code } };
}
