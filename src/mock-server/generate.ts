import { decodeText, tokenText, type ReplyContext } from './context.js';
import { policyLogprobs, type PolicyShift } from './policy.js';
import type { SseReply } from './sse.js';
import { pieces, type TokenOut } from './token-out.js';

/**
 * SGLang's native `/generate` with `input_ids`, shaped as its TokenizerManager builds results
 * (python/sglang/srt/managers/tokenizer_manager.py `_handle_batch_output`, schedule_batch.py
 * `FINISH_*`.to_json, sampling_params.py defaults):
 * - `{text, output_ids, meta_info: {id, finish_reason, prompt_tokens, weight_version,
 *   input_token_logprobs, output_token_logprobs, completion_tokens, cached_tokens, e2e_latency}}`;
 * - `finish_reason`: `{type: "stop", matched: <token id>}` or `{type: "length", length: N}`;
 * - `output_token_logprobs`: `[[logprob, token_id, null], …]` (the text instead of null with
 *   `return_text_in_logprobs`), present with `return_logprob`; the end-of-turn token is in
 *   `output_ids` and its logprobs, its text only with `no_stop_trim` and `skip_special_tokens: false`;
 * - streaming, SGLang's default (no `--incremental-streaming-output`): every event repeats the
 *   output so far (`text`, `output_ids`, `output_token_logprobs`), `completion_tokens` is the
 *   running count, `finish_reason` is null until the last event; then `data: [DONE]`.
 */
export interface GenerateRequest {
  input_ids?: unknown;
  text?: unknown;
  sampling_params?: {
    max_new_tokens?: number | null;
    stop_token_ids?: number[] | null;
    skip_special_tokens?: boolean | null;
    no_stop_trim?: boolean | null;
    [k: string]: unknown;
  };
  return_logprob?: boolean;
  return_text_in_logprobs?: boolean;
  stream?: boolean;
  rid?: string;
  [k: string]: unknown;
}

/** SGLang's `SamplingParams.max_new_tokens` default; an explicit null means no limit. */
export const GENERATE_DEFAULT_MAX_NEW_TOKENS = 128;

export function maxNewTokens(body: GenerateRequest): number | undefined {
  const v = body.sampling_params?.max_new_tokens;
  if (v === null) return undefined;
  return v ?? GENERATE_DEFAULT_MAX_NEW_TOKENS;
}

/** Why the mock answers 400 (SGLang's `{"error": {"message"}}`), or null. */
export function generateRequestError(body: GenerateRequest, contextLength: number): string | null {
  if (body.input_ids === undefined && body.text !== undefined) {
    return 'polar mock-server takes input_ids only on /generate (it cannot tokenize text); send the rendered prompt ids';
  }
  if (!Array.isArray(body.input_ids) || body.input_ids.length === 0) return 'Either text, input_ids or input_embeds should be provided.';
  if (!body.input_ids.every((p) => Number.isInteger(p) && (p as number) >= 0)) {
    return 'polar mock-server takes one prompt per request on /generate: input_ids as a flat list of non-negative ints';
  }
  return contextLengthError(body.input_ids.length, body.sampling_params?.max_new_tokens, contextLength);
}

/**
 * SGLang's length check (TokenizerManager._validate_one_request, see sglang/generate.ts in
 * src/upstream): the prompt and prompt + an explicit max_new_tokens must both stay strictly
 * below the context length. Unlike vLLM, a budget that fills the context exactly is refused.
 * A missing max_new_tokens is not checked here (SGLang applies its default of 128 later).
 */
export function contextLengthError(inputTokens: number, maxNew: number | null | undefined, contextLength: number): string | null {
  if (inputTokens >= contextLength) return `The input (${inputTokens} tokens) is longer than the model's context length (${contextLength} tokens).`;
  if (typeof maxNew === 'number' && maxNew + inputTokens >= contextLength) {
    // The first sentence is SGLang's (clients match on it); the rest says the numbers in our words.
    return `Requested token count exceeds the model's maximum context length of ${contextLength} tokens. (mock: ${inputTokens} input + ${maxNew} max_new_tokens = ${inputTokens + maxNew}, which must be below ${contextLength})`;
  }
  return null;
}

/** Every result the stream sends, in order; the last is the whole (non-streamed) result. */
export function generateResults(ctx: ReplyContext, body: GenerateRequest, rid: string, promptIds: number[], out: TokenOut, startedAt: number) {
  const params = body.sampling_params ?? {};
  const skip = params.skip_special_tokens !== false;
  const parts = pieces(out, ctx.chunkTokens, (ids) => decodeText(ctx, ids, skip), !params.no_stop_trim);
  const limit = maxNewTokens(body);
  let text = '';
  return parts.map((part, p) => {
    const last = p === parts.length - 1;
    const end = part.start + part.ids.length;
    text += part.text;
    const meta: Record<string, unknown> = {
      id: rid,
      finish_reason: last ? (out.finish === 'length' ? { type: 'length', length: limit ?? out.ids.length } : { type: 'stop', matched: out.matched }) : null,
      prompt_tokens: promptIds.length,
      weight_version: 'default',
    };
    if (body.return_logprob) {
      // logprob_start_len -1: the prompt's last token, with no logprob, and nothing before it.
      meta.input_token_logprobs = [[null, promptIds[promptIds.length - 1]!, null]];
      meta.output_token_logprobs = out.ids
        .slice(0, end)
        .map((id, i) => [out.logprobs[i]!, id, body.return_text_in_logprobs ? tokenText(ctx, id, false) : null]);
    }
    meta.completion_tokens = end;
    meta.cached_tokens = 0;
    if (last) meta.e2e_latency = (Date.now() - startedAt) / 1000;
    return { text, output_ids: out.ids.slice(0, end), meta_info: meta };
  });
}

export function generateStream(results: unknown[]): SseReply {
  return {
    head: results.slice(0, 1),
    body: results.slice(1),
    tail: [],
    errorEvent: { error: { message: 'generation failed: CUDA error' } },
    brokenData: '{"text": "broken", "meta_info": {',
  };
}

/** SGLang's error body. */
export function sglangError(message: string) {
  return { error: { message } };
}

/**
 * `return_logprob` with `logprob_start_len`: SGLang's `meta_info.input_token_logprobs` for the
 * prompt from that position on, `[[logprob, token_id, null], …]`, the first entry of the window
 * null (SGLang computes logprobs of tokens given what precedes them inside the window's prefill).
 */
export function generateScores(body: GenerateRequest, promptIds: number[], shift?: PolicyShift) {
  const start = Math.min(Math.max(0, Number(body.logprob_start_len)), promptIds.length - 1);
  const lps = policyLogprobs(promptIds.slice(0, start + 1), promptIds.slice(start + 1), shift);
  const input = [[null, promptIds[start]!, null], ...promptIds.slice(start + 1).map((id, i) => [lps[i]!, id, null])];
  return {
    text: '',
    output_ids: [],
    meta_info: {
      id: typeof body.rid === 'string' ? body.rid : `score-${promptIds.length}`,
      finish_reason: { type: 'length', length: 0 },
      prompt_tokens: promptIds.length,
      input_token_logprobs: input,
      output_token_logprobs: [],
      completion_tokens: 0,
      cached_tokens: 0,
    },
  };
}
