import type { ChatBody } from './render.js';

/**
 * NeMo-RL's vLLM HTTP server (nemo_rl/models/generation/vllm/vllm_worker_async.py
 * `_setup_vllm_openai_api_server`, openai_server_utils.py `replace_prefix_tokens`; prefix splicing
 * came in NeMo-RL PR #1337), as far as a client can tell:
 * - only `POST /v1/chat/completions` and `POST /tokenize`: anything else is FastAPI's 404;
 * - every chat request must have `top_k` unset or -1, `top_p` set, and `(temperature, top_p)` equal
 *   to the training pair. These are `assert`s, so a violation is an unhandled AssertionError:
 *   Starlette's plain-text `500 Internal Server Error`;
 * - `logprobs: true` with `top_logprobs: null` is a 400 (the server returns token ids as tokens);
 * - `required_prefix_token_ids` (top level, else the last message's `prompt_token_ids` +
 *   `generation_token_ids`) is spliced into the rendered prompt.
 */
export interface NemoRlSampling {
  temperature: number;
  topP: number;
}

/** The assertion a request fails, or null. */
export function nemoRlSamplingError(body: ChatBody, sampling: NemoRlSampling): string | null {
  const topK = body.top_k;
  if (!(topK === undefined || topK === null || topK === -1)) return `Top k sampling parameter must be unset, empty, or -1. Got \`${String(topK)}\``;
  if (body.top_p === undefined || body.top_p === null) return 'top_p must be set explicitly on NeMo-RL requests';
  if (body.temperature !== sampling.temperature || body.top_p !== sampling.topP) {
    return `request sampling (temperature=${String(body.temperature)}, top_p=${String(body.top_p)}) matches neither the train sampling params (temperature=${sampling.temperature}, top_p=${sampling.topP}) nor the validation sampling params`;
  }
  return null;
}

export class NemoRlAssertion extends Error {}

/**
 * `NeMoRLOpenAIChatRequestMixin.model_post_init`: the top-level `required_prefix_token_ids`, else
 * the last message carrying `prompt_token_ids`, whose `prompt_token_ids + generation_token_ids` it
 * becomes (a message without `generation_token_ids` is a KeyError there: a 500 here).
 */
export function requiredPrefix(body: ChatBody): number[] | null {
  if (Array.isArray(body.required_prefix_token_ids)) return body.required_prefix_token_ids as number[];
  for (let i = body.messages.length - 1; i >= 0; i--) {
    const m = body.messages[i]!;
    if (!('prompt_token_ids' in m)) continue;
    if (!Array.isArray(m.prompt_token_ids) || !Array.isArray(m.generation_token_ids))
      throw new NemoRlAssertion('message has prompt_token_ids but no generation_token_ids list');
    return [...(m.prompt_token_ids as number[]), ...(m.generation_token_ids as number[])];
  }
  return null;
}

/** The messages NeMo-RL renders (without a generation prompt) to find where the prefix ends. */
export function messagesToLastAssistant(messages: ChatBody['messages']): ChatBody['messages'] {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.role === 'assistant') return messages.slice(0, i + 1);
  return messages;
}

/**
 * `replace_prefix_tokens`: the model's own tokens (its trailing end-of-turn token dropped) up to
 * the turn boundary, then the template's tokens from that boundary on. The boundary is the N-th
 * end-of-turn token of the full render, N being how many the prefix render (messages up to the
 * last assistant turn, no generation prompt) has: counting, not positions, so a template that drops
 * earlier reasoning still meets the same boundary. (PR #1337 first took the last end-of-turn token
 * inside the prefix render's length; current NeMo-RL counts.)
 */
export function replacePrefixTokens(eosId: number, modelPrefix: readonly number[], templatePrefix: readonly number[], template: readonly number[]): number[] {
  if (modelPrefix.length === 0) return [...template];
  const modelEnd = modelPrefix[modelPrefix.length - 1] === eosId ? modelPrefix.length - 1 : modelPrefix.length;
  const needed = templatePrefix.filter((id) => id === eosId).length;
  let seen = 0;
  let cut = -1;
  for (let i = 0; i < template.length; i++) {
    if (template[i] === eosId && ++seen === needed) {
      cut = i;
      break;
    }
  }
  if (cut < 0) throw new NemoRlAssertion(`EOS token #${needed} not found in template_token_ids (only found ${seen} EOS tokens total)!`);
  return [...modelPrefix.slice(0, modelEnd), ...template.slice(cut)];
}
