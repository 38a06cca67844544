import { isRecord } from '../../core/chat.js';
import { throwIfErrorBody } from '../chat-shape.js';
import { idArray, logprobValue, protocolError } from '../token-fields.js';
import { samplingOf, type TokenInDialect } from '../tito/dialect.js';

/**
 * SGLang's native `/generate` with `input_ids`:
 * - request: `input_ids`, `sampling_params` (`max_new_tokens`, `stop_token_ids`,
 *   `skip_special_tokens: false`, `no_stop_trim: true`), `return_logprob: true`;
 * - reply: `output_ids`, `meta_info.output_token_logprobs` = `[[logprob, id, text], …]`,
 *   `meta_info.finish_reason` = `{type: "stop" | "length" | "abort", …}`, prompt/completion counts.
 *   SGLang does not echo the input ids: the prompt is the ids polar sent.
 * - streaming: by default each event repeats the output so far (`output_ids`, logprobs);
 *   with `--incremental-streaming-output` it sends only the new part. `meta_info.completion_tokens`
 *   is the running total either way, so the new ids are the last (total − seen) of the event's.
 */
export const sglangGenerateDialect: TokenInDialect = {
  kind: 'sglang-tito',
  path: '/generate',
  // SGLang checks the length before it schedules a request: TokenizerManager._validate_one_request
  // (python/sglang/srt/managers/tokenizer_manager.py) answers 400 "Requested token count exceeds
  // the model's maximum context length" when input + max_new_tokens >= context_len in the releases
  // polar was measured against (sgl-project/sglang#6779, 2025-05, asked to allow equality); current
  // main (snapshot 001067f, tokenizer_manager.py:1163-1213, the sum check at :1190-1194) rejects
  // only a sum above context_len but counts the draft tokens EAGLE reserves into the input
  // (:1170, compute_num_reserved_tokens in managers/utils.py). One token free
  // passes both without EAGLE. vLLM takes the sum up to the context length; SGLang refused the
  // budget of context - prompt that vLLM takes.
  contextSlack: 1,
  body(promptIds, req, _model, stopIds, maxTokens) {
    const s = samplingOf(req);
    const params: Record<string, unknown> = { skip_special_tokens: false, no_stop_trim: true, stop_token_ids: [...stopIds] };
    // SGLang's own default is 128 new tokens.
    params.max_new_tokens = maxTokens;
    const { seed, ...rest } = s.params;
    Object.assign(params, rest);
    if (seed !== undefined) params.sampling_seed = seed;
    if (s.stop.length > 0) params.stop = s.stop;
    return { input_ids: promptIds, sampling_params: params, return_logprob: true, stream: req.stream };
  },
  completion(json) {
    const g = read(json);
    return { sampledIds: g.ids, logprobs: g.logprobs, promptIds: null, finishReason: g.finishReason, stopReason: g.stopReason, usage: g.usage };
  },
  streamReader() {
    let seen = 0;
    return (json) => {
      const g = read(json);
      // Without the running count, cumulative and incremental events cannot be told apart.
      if (g.usage.completionTokens === undefined) throw protocolError('SGLang stream event without meta_info.completion_tokens');
      const total = g.usage.completionTokens;
      const fresh = Math.max(0, total - seen);
      if (fresh > g.ids.length) throw protocolError(`stream event reports ${total} tokens so far but carries ${g.ids.length} after ${seen}`);
      seen = total;
      const sampledIds = g.ids.slice(g.ids.length - fresh);
      const logprobs = g.logprobs ? g.logprobs.slice(g.logprobs.length - fresh) : null;
      return { sampledIds, logprobs, promptIds: null, finishReason: g.finishReason, stopReason: g.stopReason, usage: g.usage };
    };
  },
};

function read(json: unknown): {
  ids: number[];
  logprobs: number[] | null;
  finishReason: string | null;
  stopReason: string | number | null;
  usage: { promptTokens?: number; completionTokens?: number };
} {
  throwIfErrorBody(json, 'in the reply');
  if (!isRecord(json) || !isRecord(json.meta_info)) throw protocolError('upstream reply is not an SGLang generate result (no meta_info)');
  const meta = json.meta_info;
  const entries = Array.isArray(meta.output_token_logprobs) ? meta.output_token_logprobs : null;
  let ids = idArray(json.output_ids, 'output_ids');
  if (!ids && entries)
    ids = idArray(
      entries.map((e) => (Array.isArray(e) ? e[1] : undefined)),
      'meta_info.output_token_logprobs[][1]',
    );
  if (!ids) throw protocolError('the SGLang reply has neither output_ids nor output_token_logprobs');
  const logprobs = entries ? entries.map((e) => logprobValue(Array.isArray(e) ? e[0] : undefined)) : null;
  const finish = isRecord(meta.finish_reason) && typeof meta.finish_reason.type === 'string' ? meta.finish_reason.type : null;
  const matched = isRecord(meta.finish_reason) ? meta.finish_reason.matched : null;
  const usage: { promptTokens?: number; completionTokens?: number } = {};
  if (typeof meta.prompt_tokens === 'number') usage.promptTokens = meta.prompt_tokens;
  if (typeof meta.completion_tokens === 'number') usage.completionTokens = meta.completion_tokens;
  return { ids, logprobs, finishReason: finish, stopReason: typeof matched === 'string' || typeof matched === 'number' ? matched : null, usage };
}
