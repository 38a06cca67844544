import { isRecord } from '../core/chat.js';
import { PolarError, UpstreamStatusError } from '../core/errors.js';
import { UpstreamHttp } from './http.js';
import { logprobValue } from './token-fields.js';

/**
 * The logprobs a server gives *recorded* tokens: the call's prompt ids followed by its sampled ids,
 * sent as a token-id prompt (never re-tokenized), scored position by position.
 * - vLLM (`vllm`, `vllm-tito`): `POST /v1/completions` with `prompt` = ids, `prompt_logprobs: 0`,
 *   `max_tokens: 1`, `return_token_ids`; `choices[0].prompt_logprobs[i]` holds the given token's
 *   logprob keyed by its id (entry 0 is null); `prompt_token_ids` must come back as sent.
 * - SGLang (`sglang-tito`): `POST /generate` with `input_ids`, `return_logprob`,
 *   `logprob_start_len` = prompt length − 1, `max_new_tokens: 0`; `meta_info.input_token_logprobs`
 *   is `[[logprob, id, _], …]` from that position, its first entry null.
 * Prompt logprobs are computed at temperature 1 with no processors, like vLLM's default
 * `raw_logprobs` capture; a capture made with processed logprobs at another temperature will differ
 * for that reason alone.
 */
export type RescoreKind = 'vllm' | 'vllm-tito' | 'sglang-tito';

export function rescoreRequest(
  kind: RescoreKind,
  model: string,
  promptIds: readonly number[],
  sampledIds: readonly number[],
): { path: string; body: Record<string, unknown> } {
  const ids = [...promptIds, ...sampledIds];
  if (kind === 'sglang-tito') {
    return {
      path: '/generate',
      body: { input_ids: ids, return_logprob: true, logprob_start_len: promptIds.length - 1, sampling_params: { max_new_tokens: 0, temperature: 1.0 } },
    };
  }
  return {
    path: '/v1/completions',
    body: { model, prompt: ids, max_tokens: 1, prompt_logprobs: 0, return_token_ids: true, add_special_tokens: false, temperature: 1.0, stream: false },
  };
}

/** The rescored logprob of each sampled id, from a server's reply. */
export function rescoredLogprobs(kind: RescoreKind, reply: unknown, promptIds: readonly number[], sampledIds: readonly number[]): number[] {
  const p = promptIds.length;
  if (kind === 'sglang-tito') {
    const meta = isRecord(reply) && isRecord(reply.meta_info) ? reply.meta_info : null;
    const entries = meta && Array.isArray(meta.input_token_logprobs) ? meta.input_token_logprobs : null;
    if (!entries) throw protocol('SGLang sent no meta_info.input_token_logprobs (is return_logprob honoured?)');
    return sampledIds.map((id, i) => {
      const entry = entries[1 + i];
      if (!Array.isArray(entry) || entry[1] !== id) throw protocol(`SGLang scored another token at sampled position ${i} (expected ${id})`);
      return logprobValue(entry[0]);
    });
  }
  const choice = isRecord(reply) && Array.isArray(reply.choices) && isRecord(reply.choices[0]) ? reply.choices[0] : null;
  if (!choice) throw protocol('the server sent no choices');
  const sent = [...promptIds, ...sampledIds];
  if (Array.isArray(choice.prompt_token_ids) && (choice.prompt_token_ids.length !== sent.length || choice.prompt_token_ids.some((id, i) => id !== sent[i]))) {
    throw protocol('the server scored other prompt ids than it was sent (a BOS added?)');
  }
  const entries = Array.isArray(choice.prompt_logprobs) ? choice.prompt_logprobs : null;
  if (!entries || entries.length < sent.length) throw protocol('the server sent no prompt_logprobs (vLLM ≥ 0.5.4 with prompt_logprobs on /v1/completions)');
  return sampledIds.map((id, i) => {
    const entry = entries[p + i];
    const value = isRecord(entry) ? entry[String(id)] : undefined;
    if (!isRecord(value)) throw protocol(`no logprob for token ${id} at position ${p + i}`);
    return logprobValue(value.logprob);
  });
}

/** Scores one call's tokens on a server; one keep-alive client for all of them. */
export class Rescorer {
  private readonly http: UpstreamHttp;

  constructor(
    private readonly kind: RescoreKind,
    baseUrl: string,
    private readonly model: string,
    apiKey?: string,
  ) {
    const url = new URL(baseUrl);
    url.pathname = url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
    this.http = new UpstreamHttp({ baseUrl: url.toString().replace(/\/$/, ''), ...(apiKey ? { apiKey } : {}) });
  }

  async score(promptIds: readonly number[], sampledIds: readonly number[], signal?: AbortSignal): Promise<number[]> {
    const req = rescoreRequest(this.kind, this.model, promptIds, sampledIds);
    const reply = await this.http.postJson(req.path, JSON.stringify(req.body), signal);
    if (reply.status < 200 || reply.status >= 300) throw new UpstreamStatusError(reply.status, reply.text);
    let json: unknown;
    try {
      json = JSON.parse(reply.text);
    } catch {
      throw protocol('the reply is not JSON');
    }
    return rescoredLogprobs(this.kind, json, promptIds, sampledIds);
  }

  close(): Promise<void> {
    return this.http.close();
  }
}

function protocol(message: string): PolarError {
  return new PolarError('POLAR_UPSTREAM_PROTOCOL', `rescoring: ${message}`, 502);
}
