import { isRecord } from '../../core/chat.js';
import { throwIfErrorBody } from '../chat-shape.js';
import { idArray, logprobValue, promptIdArray, protocolError } from '../token-fields.js';
import { samplingOf, type Generation, type TokenInDialect } from '../tito/dialect.js';

/**
 * vLLM's `/v1/completions` with a token-id prompt (vLLM ≥ 0.10.2 for `return_token_ids`):
 * - request: `prompt` = ids, `add_special_tokens: false` (the ids are the whole prompt),
 *   `logprobs: 0` (the sampled token's logprob, no alternatives), `return_token_ids: true`,
 *   `skip_special_tokens: false`, `stop_token_ids` = the template's turn ends;
 * - reply: `choices[0].prompt_token_ids` (streaming: on the first chunk), `choices[0].token_ids`
 *   (streaming: per chunk), `choices[0].logprobs.token_logprobs` beside them, usage last.
 */
export const vllmCompletionsDialect: TokenInDialect = {
  kind: 'vllm-tito',
  path: '/v1/completions',
  // vLLM turns a request away only when prompt + max_tokens is above max_model_len.
  contextSlack: 0,
  body(promptIds, req, model, stopIds, maxTokens) {
    const s = samplingOf(req);
    const body: Record<string, unknown> = { model, prompt: promptIds, stream: req.stream };
    // Without it vLLM's completions endpoint stops after 16 tokens (its default, unlike chat's).
    body.max_tokens = maxTokens;
    Object.assign(body, s.params);
    if (s.stop.length > 0) body.stop = s.stop;
    body.stop_token_ids = [...stopIds];
    body.logprobs = 0;
    body.return_token_ids = true;
    body.add_special_tokens = false;
    body.skip_special_tokens = false;
    if (req.stream) body.stream_options = { include_usage: true };
    return body;
  },
  completion(json) {
    const choice = firstChoice(json, true);
    return { ...readChoice(choice!), usage: readUsage(json) };
  },
  streamReader() {
    return (json) => {
      const choice = firstChoice(json, false);
      const usage = readUsage(json);
      if (!choice) return { sampledIds: [], logprobs: null, promptIds: null, finishReason: null, stopReason: null, usage };
      return { ...readChoice(choice), usage };
    };
  },
};

function firstChoice(json: unknown, required: boolean): Record<string, unknown> | null {
  throwIfErrorBody(json);
  if (!isRecord(json) || !Array.isArray(json.choices)) throw protocolError('upstream reply is not a completion (no choices array)');
  const choice = json.choices[0];
  if (choice === undefined) {
    if (required) throw protocolError('upstream completion has no choices');
    return null;
  }
  if (!isRecord(choice)) throw protocolError('choices[0] is not an object');
  return choice;
}

function readChoice(choice: Record<string, unknown>): Omit<Generation, 'usage'> {
  const sampledIds = idArray(choice.token_ids, 'choices[0].token_ids');
  if (!sampledIds) throw protocolError('the completion has no token_ids: this vLLM does not support return_token_ids (needs ≥ 0.10.2)');
  const lp = isRecord(choice.logprobs) ? choice.logprobs.token_logprobs : undefined;
  const logprobs = Array.isArray(lp) ? lp.map(logprobValue) : null;
  return {
    sampledIds,
    logprobs,
    promptIds: promptIdArray(choice.prompt_token_ids, 'choices[0].prompt_token_ids'),
    finishReason: typeof choice.finish_reason === 'string' ? choice.finish_reason : null,
    stopReason: typeof choice.stop_reason === 'string' || typeof choice.stop_reason === 'number' ? choice.stop_reason : null,
  };
}

function readUsage(json: unknown): Generation['usage'] {
  if (!isRecord(json) || !isRecord(json.usage)) return null;
  const u = json.usage;
  const out: NonNullable<Generation['usage']> = {};
  if (typeof u.prompt_tokens === 'number') out.promptTokens = u.prompt_tokens;
  if (typeof u.completion_tokens === 'number') out.completionTokens = u.completion_tokens;
  return out;
}
