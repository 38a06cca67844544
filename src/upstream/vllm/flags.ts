import type { CanonicalRequest } from '../../core/chat.js';

/**
 * The chat body for vLLM with the training fields turned on (vLLM ≥ 0.10.2):
 * - `return_token_ids`: top-level `prompt_token_ids` (first chunk when streaming) and
 *   `choices[].token_ids` (per chunk when streaming).
 * - `logprobs` + `top_logprobs`: `choices[].logprobs.content[].logprob`, one per sampled token;
 *   vLLM fills `content` only when `top_logprobs` is set, and 0 asks for no alternatives.
 *   A caller that asked for alternatives itself gets its own `top_logprobs`.
 * - `stream_options.include_usage`: a final usage chunk, to check counts against the ids.
 */
export function vllmChatBody(req: CanonicalRequest, model: string): Record<string, unknown> {
  const body: Record<string, unknown> = { ...req.body, model, stream: req.stream };
  body.logprobs = true;
  body.top_logprobs = req.client.logprobs && typeof req.body.top_logprobs === 'number' ? req.body.top_logprobs : 0;
  body.return_token_ids = true;
  if (req.stream) {
    const streamOptions = typeof req.body.stream_options === 'object' && req.body.stream_options ? req.body.stream_options : {};
    body.stream_options = { ...streamOptions, include_usage: true };
  } else {
    delete body.stream_options;
  }
  return body;
}
