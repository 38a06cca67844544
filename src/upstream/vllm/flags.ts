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
  applyChatConventions(body, req);
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

/**
 * What vLLM's chat templates need beyond the OpenAI shape, shared by the chat and tokenize bodies:
 * - the thinking switch as `chat_template_kwargs.enable_thinking` (Qwen3 and most reasoning
 *   templates read it);
 * - earlier reasoning under both names: current vLLM reads an assistant message's `reasoning`,
 *   older versions and the templates themselves `reasoning_content`.
 */
export function applyChatConventions(body: Record<string, unknown>, req: CanonicalRequest): void {
  if (req.thinking !== undefined) {
    const kwargs = typeof body.chat_template_kwargs === 'object' && body.chat_template_kwargs ? body.chat_template_kwargs : {};
    body.chat_template_kwargs = { ...kwargs, enable_thinking: req.thinking };
  }
  if (req.body.messages.some((m) => m.role === 'assistant' && typeof m.reasoning_content === 'string')) {
    body.messages = req.body.messages.map((m) =>
      m.role === 'assistant' && typeof m.reasoning_content === 'string' && m.reasoning === undefined ? { ...m, reasoning: m.reasoning_content } : m,
    );
  }
}

/** vLLM's `/tokenize` body for a chat request: the prompt as the chat endpoint would render it. */
export function vllmTokenizeBody(req: CanonicalRequest, model: string): Record<string, unknown> {
  const body: Record<string, unknown> = { model, messages: req.body.messages, add_generation_prompt: true };
  if (req.body.tools) body.tools = req.body.tools;
  if (req.body.chat_template_kwargs) body.chat_template_kwargs = req.body.chat_template_kwargs;
  applyChatConventions(body, req);
  return body;
}
