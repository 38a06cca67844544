import { type CanonicalRequest, type ChatMessage, isTokenBudget } from '../core/chat.js';

export interface NormalizeOptions {
  /** The served model's context length (vLLM's `max_model_len`, or `--context-window`); null: unknown. */
  contextWindow: number | null;
  /** Strings hold UTF-8 bytes one per character (proxy/wire-body.ts). */
  byteStrings?: boolean;
  /** A cap on every call's output tokens (a NeMo Gym row's `max_output_tokens`); null: none. */
  maxTokens?: number | null;
}

/**
 * Normalization every provider's request gets on its way upstream:
 * - role `developer` → `system` (Qwen3's template silently drops roles it does not know);
 * - `max_completion_tokens` → `max_tokens` (one name for the adapters);
 * - `max_tokens` is dropped when it cannot fit: harnesses ask for 32,000-64,000 output tokens, and
 *   vLLM rejects a request whose prompt plus `max_tokens` exceeds the context, while a request
 *   without `max_tokens` gets exactly what the context leaves after the prompt. The prompt length
 *   is estimated on the high side (3 bytes a token), so a request near the limit loses its
 *   `max_tokens` rather than gets rejected;
 * - with a cap (`maxTokens`), `max_tokens` is at most the cap, and set to it when the harness sent
 *   none; near the context limit it is lowered to what the estimate leaves rather than dropped (a
 *   dropped one would let the reply run past the cap), or kept at the cap when the estimate leaves
 *   nothing (NeMo-RL's server clamps it to the context itself, vllm_worker_async.py:436-447);
 *   under a cap, a `max_tokens` that is not a positive whole number (`-1`, `0`, `1.5`) is the cap
 *   too: it asks for no budget a server can keep, and the cap must hold.
 * A `max_tokens` no server could take as sent (over the context window itself, or replaced by the
 * cap because it was no budget at all) is named in `outOfRange`, so a trainer's record lists it as
 * dropped; one that merely does not fit beside this prompt is not: that is the usual harness asking
 * for 32,000 of a 40,960-token window, not a request to record.
 */
export function normalizeRequest(req: CanonicalRequest, options: NormalizeOptions): CanonicalRequest {
  const body = { ...req.body };
  let changed = false;
  if (body.messages.some((m) => m.role === 'developer')) {
    body.messages = body.messages.map((m): ChatMessage => (m.role === 'developer' ? { ...m, role: 'system' } : m));
    changed = true;
  }
  if (body.max_completion_tokens !== undefined) {
    if (body.max_tokens === undefined) body.max_tokens = body.max_completion_tokens;
    delete body.max_completion_tokens;
    changed = true;
  }
  const cap = options.maxTokens && options.maxTokens > 0 ? options.maxTokens : null;
  const sent = body.max_tokens;
  const outOfRange =
    sent !== undefined &&
    sent !== null &&
    ((typeof sent === 'number' && !!options.contextWindow && sent > options.contextWindow) || (cap !== null && !isTokenBudget(sent)));
  if (cap !== null && !(isTokenBudget(body.max_tokens) && body.max_tokens <= cap)) {
    body.max_tokens = cap;
    changed = true;
  }
  if (options.contextWindow && typeof body.max_tokens === 'number') {
    const estimate = estimatePromptTokens(body.messages, body.tools, options.byteStrings);
    if (body.max_tokens + estimate > options.contextWindow) {
      const room = options.contextWindow - estimate;
      if (cap === null) delete body.max_tokens;
      else if (room >= 1) body.max_tokens = room;
      changed = true;
    }
  }
  if (outOfRange) return { ...req, body, outOfRange: ['max_tokens'] };
  return changed ? { ...req, body } : req;
}

/** A deliberately high estimate of prompt tokens: serialized UTF-8 bytes / 3, measured without serializing. */
export function estimatePromptTokens(messages: unknown, tools?: unknown, byteStrings = false): number {
  let bytes = jsonLength(messages, byteStrings);
  if (tools) bytes += jsonLength(tools, byteStrings);
  return Math.ceil(bytes / 3);
}

/**
 * About the UTF-8 byte length of JSON.stringify(value) (escapes not counted), by walking the value.
 * Bytes, not characters, so a body read as bytes (`byteStrings`: a string's length is its bytes)
 * gets the same estimate, and the same `max_tokens` decision, as the same body read as text.
 */
export function jsonLength(value: unknown, byteStrings = false): number {
  switch (typeof value) {
    case 'string':
      return (byteStrings ? value.length : Buffer.byteLength(value)) + 2;
    case 'number':
    case 'boolean':
      return String(value).length;
    case 'object': {
      if (value === null) return 4;
      // Brackets, plus a comma between items: one per item, less one.
      let n = 1;
      if (Array.isArray(value)) {
        for (const item of value) n += (item === undefined ? 4 : jsonLength(item, byteStrings)) + 1;
        return Math.max(2, n);
      }
      for (const key in value) {
        const v = (value as Record<string, unknown>)[key];
        if (v !== undefined && typeof v !== 'function') n += jsonLength(key, byteStrings) + 1 + jsonLength(v, byteStrings) + 1;
      }
      return Math.max(2, n);
    }
    default:
      return 0;
  }
}
