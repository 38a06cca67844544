import { CREATED, decodeText, tokenText, vllmError, type ReplyContext } from './context.js';
import { policyLogprobs, type PolicyShift } from './policy.js';
import type { SseReply } from './sse.js';
import { pieces, pyLen, type TokenOut } from './token-out.js';

/**
 * vLLM's `/v1/completions` with a token-id prompt, shaped as vLLM's `CompletionResponse` /
 * `CompletionStreamResponse` (vllm/entrypoints/openai/completion/protocol.py and serving.py):
 * - `choices[0].text`: the sampled text, special tokens skipped unless `skip_special_tokens: false`,
 *   the stop token's text left out unless `include_stop_str_in_output`;
 * - `choices[0].logprobs` (with `logprobs: N`): `text_offset`, `token_logprobs`, `tokens`,
 *   `top_logprobs` (the sampled token only: the mock has no alternatives);
 * - `finish_reason` `stop` | `length`, `stop_reason` the stopping id when it was one of
 *   `stop_token_ids` rather than the end-of-turn token;
 * - with `return_token_ids`: `choices[0].prompt_token_ids` (streaming: first chunk only) and
 *   `choices[0].token_ids` (streaming: the chunk's ids).
 */
export interface CompletionRequest {
  model?: string;
  prompt?: unknown;
  max_tokens?: number | null;
  stream?: boolean;
  stream_options?: { include_usage?: boolean } | null;
  logprobs?: number | null;
  return_token_ids?: boolean | null;
  return_tokens_as_token_ids?: boolean | null;
  skip_special_tokens?: boolean;
  include_stop_str_in_output?: boolean;
  stop_token_ids?: number[] | null;
  [k: string]: unknown;
}

/** vLLM's `CompletionRequest.max_tokens` default (a null is read as it too). */
export const COMPLETIONS_DEFAULT_MAX_TOKENS = 16;

/** Why vLLM (or this mock, which cannot tokenize a text prompt) would answer 400, or null. */
export function completionRequestError(body: CompletionRequest): string | null {
  if (typeof body.prompt === 'string' || (Array.isArray(body.prompt) && body.prompt.some((p) => typeof p === 'string'))) {
    return 'polar mock-server takes token-id prompts only on /v1/completions (a list of ints); send the rendered prompt ids';
  }
  if (!Array.isArray(body.prompt) || body.prompt.length === 0) return 'Either prompt or prompt_embeds must be provided and non-empty.';
  if (!body.prompt.every((p) => Number.isInteger(p) && (p as number) >= 0)) {
    return 'polar mock-server takes one prompt per request on /v1/completions: a flat list of non-negative ints';
  }
  if (body.stream_options && !body.stream) return 'Stream options can only be defined when `stream=True`.';
  if (typeof body.logprobs === 'number' && body.logprobs < 0 && body.logprobs !== -1) return '`logprobs` must be a positive value or -1.';
  return null;
}

export function completionResponse(ctx: ReplyContext, body: CompletionRequest, id: string, promptIds: number[], out: TokenOut) {
  const text = decodeText(ctx, textIds(body, out), body.skip_special_tokens !== false);
  return {
    id,
    object: 'text_completion',
    created: CREATED,
    model: ctx.model,
    choices: [
      {
        index: 0,
        text,
        logprobs: typeof body.logprobs === 'number' ? logprobs(ctx, body, out.ids, out.logprobs, 0) : null,
        finish_reason: out.finish,
        stop_reason: stopReason(ctx, out),
        token_ids: body.return_token_ids ? out.ids : null,
        prompt_logprobs: null,
        prompt_token_ids: body.return_token_ids ? promptIds : null,
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage: usage(promptIds, out, true),
    kv_transfer_params: null,
  };
}

export function completionStream(ctx: ReplyContext, body: CompletionRequest, id: string, promptIds: number[], out: TokenOut): SseReply {
  const base = { id, object: 'text_completion', created: CREATED, model: ctx.model };
  const skip = body.skip_special_tokens !== false;
  const parts = pieces(out, ctx.chunkTokens, (ids) => decodeText(ctx, ids, skip), !body.include_stop_str_in_output);
  let textLen = 0;
  const chunks = parts.map((part, p) => {
    const last = p === parts.length - 1;
    const choice = {
      index: 0,
      text: part.text,
      logprobs: typeof body.logprobs === 'number' ? logprobs(ctx, body, part.ids, part.logprobs, textLen) : null,
      finish_reason: last ? out.finish : null,
      stop_reason: last ? stopReason(ctx, out) : null,
      prompt_token_ids: p === 0 && body.return_token_ids ? promptIds : null,
      token_ids: body.return_token_ids ? part.ids : null,
    };
    textLen += pyLen(part.text);
    return { ...base, choices: [choice] };
  });
  return {
    head: chunks.slice(0, 1),
    body: chunks.slice(1),
    // Serialized with exclude_none: no prompt_tokens_details, no system_fingerprint.
    tail: body.stream_options?.include_usage ? [{ ...base, choices: [], usage: usage(promptIds, out, false) }] : [],
    errorEvent: vllmError('generation failed: CUDA error', 'InternalServerError', 500),
    brokenData: '{"id": "cmpl-broken", "choices": [',
  };
}

/** The ids whose text is reported: the stop token adds none unless asked to. */
function textIds(body: CompletionRequest, out: TokenOut): number[] {
  return out.matched !== null && !body.include_stop_str_in_output ? out.ids.slice(0, -1) : out.ids;
}

/** vLLM reports the id only for a `stop_token_ids` hit; the end-of-turn token stops with null. */
function stopReason(ctx: ReplyContext, out: TokenOut): number | null {
  return out.matched !== null && out.matched !== ctx.qwen?.eosId ? out.matched : null;
}

/** `_create_completion_logprobs`: offsets count Python characters of each token's text. */
function logprobs(ctx: ReplyContext, body: CompletionRequest, ids: number[], lps: number[], initialOffset: number) {
  const textOffset: number[] = [];
  const tokens: string[] = [];
  let at = initialOffset;
  for (const id of ids) {
    const token = tokenText(ctx, id, body.return_tokens_as_token_ids ?? undefined);
    textOffset.push(at);
    at += pyLen(token);
    tokens.push(token);
  }
  const tokenLogprobs = lps.map((lp) => Math.max(lp, -9999));
  return {
    text_offset: textOffset,
    token_logprobs: tokenLogprobs,
    tokens,
    top_logprobs: tokens.map((t, i) => ({ [t]: tokenLogprobs[i]! })),
  };
}

function usage(promptIds: number[], out: TokenOut, details: boolean) {
  const u: Record<string, unknown> = { prompt_tokens: promptIds.length, total_tokens: promptIds.length + out.ids.length, completion_tokens: out.ids.length };
  if (details) u.prompt_tokens_details = null;
  return u;
}

/**
 * `prompt_logprobs` (or `echo` with `logprobs`) on a token-id prompt: the logprob of every prompt
 * token given the ones before it, as vLLM returns them (`choices[0].prompt_logprobs`: null for the
 * first position, then `{"<token id>": {logprob, rank, decoded_token}}` holding at least the given
 * token); one token is generated and reported as vLLM would, but a scorer ignores it.
 */
export function completionScores(ctx: ReplyContext, body: CompletionRequest, promptIds: number[], shift?: PolicyShift) {
  const lps = policyLogprobs(promptIds.slice(0, 1), promptIds.slice(1), shift);
  const entries = [
    null,
    ...promptIds.slice(1).map((id, i) => ({ [String(id)]: { logprob: Math.max(lps[i]!, -9999), rank: 1, decoded_token: tokenText(ctx, id, false) } })),
  ];
  const next = ctx.qwen?.eosId ?? 0;
  return {
    id: `cmpl-score-${promptIds.length}`,
    object: 'text_completion',
    created: CREATED,
    model: ctx.model,
    choices: [
      {
        index: 0,
        text: '',
        logprobs: body.echo
          ? {
              text_offset: [],
              token_logprobs: [null, ...lps],
              tokens: promptIds.map((id) => tokenText(ctx, id, body.return_tokens_as_token_ids ?? undefined)),
              top_logprobs: entries.map((e) => (e ? Object.fromEntries(Object.entries(e).map(([k, v]) => [k, v.logprob])) : null)),
            }
          : null,
        finish_reason: 'length',
        stop_reason: null,
        token_ids: body.return_token_ids ? [next] : null,
        prompt_logprobs: entries,
        prompt_token_ids: body.return_token_ids ? promptIds : null,
      },
    ],
    usage: { prompt_tokens: promptIds.length, total_tokens: promptIds.length + 1, completion_tokens: 1, prompt_tokens_details: null },
  };
}
