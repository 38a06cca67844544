import type { SampledReply } from './sampler.js';

/**
 * A sampled reply as a token-in/token-out server reports it: the ids up to and including the first
 * stop token (the end-of-turn token, or one of the request's `stop_token_ids`), why it ended, and
 * which token stopped it. The chat layer's `tool_calls` finish reason does not exist here.
 */
export interface TokenOut {
  ids: number[];
  logprobs: number[];
  finish: 'stop' | 'length';
  /** The id that stopped generation, or null (cut by length, or no token to blame). */
  matched: number | null;
}

export function tokenOut(reply: SampledReply, stopIds: readonly number[], eosId: number | undefined): TokenOut {
  const stops = new Set(stopIds);
  if (eosId !== undefined) stops.add(eosId);
  const at = reply.ids.findIndex((id) => stops.has(id));
  if (at !== -1) return { ids: reply.ids.slice(0, at + 1), logprobs: reply.logprobs.slice(0, at + 1), finish: 'stop', matched: reply.ids[at]! };
  return { ids: reply.ids, logprobs: reply.logprobs, finish: reply.finishReason === 'length' ? 'length' : 'stop', matched: null };
}

export interface Piece {
  /** Offset of the piece's first id in the reply. */
  start: number;
  ids: number[];
  logprobs: number[];
  /** New text this piece adds. */
  text: string;
}

/**
 * Cuts a reply into streamed pieces of `chunkTokens` ids with the text each adds, as an incremental
 * detokenizer would: a split UTF-8 sequence is held back until its last byte, and with `dropStop`
 * the stop token that ended the reply adds no text (vLLM without `include_stop_str_in_output`,
 * SGLang without `no_stop_trim`). The pieces' texts join to the whole reply's text.
 */
export function pieces(out: TokenOut, chunkTokens: number, decode: (ids: number[]) => string, dropStop: boolean): Piece[] {
  const textIds = dropStop && out.matched !== null ? out.ids.slice(0, -1) : out.ids;
  const step = Math.max(1, chunkTokens);
  if (out.ids.length === 0) return [{ start: 0, ids: [], logprobs: [], text: '' }];
  const result: Piece[] = [];
  let emitted = '';
  for (let start = 0; start < out.ids.length; start += step) {
    const end = Math.min(start + step, out.ids.length);
    let text = decode(textIds.slice(0, Math.min(end, textIds.length)));
    if (end < out.ids.length) while (text.endsWith('\uFFFD')) text = text.slice(0, -1);
    result.push({ start, ids: out.ids.slice(start, end), logprobs: out.logprobs.slice(start, end), text: text.slice(emitted.length) });
    emitted = text;
  }
  return result;
}

/** Python's `len` of a string: code points, not UTF-16 units (vLLM's `text_offset` counts them). */
export function pyLen(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}
