import type { CanonicalRequest, ChatMessage } from '../core/chat.js';

export interface NormalizeOptions {
  /** The served model's context length (vLLM's `max_model_len`, or `--context-window`); null: unknown. */
  contextWindow: number | null;
}

/**
 * Normalization every provider's request gets on its way upstream:
 * - role `developer` → `system` (Qwen3's template silently drops roles it does not know);
 * - `max_completion_tokens` → `max_tokens` (one name for the adapters);
 * - `max_tokens` is dropped when it cannot fit: harnesses ask for 32,000-64,000 output tokens, and
 *   vLLM rejects a request whose prompt plus `max_tokens` exceeds the context, while a request
 *   without `max_tokens` gets exactly what the context leaves after the prompt. The prompt length
 *   is estimated on the high side (3 bytes a token), so a request near the limit loses its
 *   `max_tokens` rather than gets rejected.
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
  if (options.contextWindow && typeof body.max_tokens === 'number') {
    const estimate = estimatePromptTokens(body.messages, body.tools);
    if (body.max_tokens + estimate > options.contextWindow) {
      delete body.max_tokens;
      changed = true;
    }
  }
  return changed ? { ...req, body } : req;
}

/** A deliberately high estimate of prompt tokens: serialized size / 3, measured without serializing. */
export function estimatePromptTokens(messages: unknown, tools?: unknown): number {
  let chars = jsonLength(messages);
  if (tools) chars += jsonLength(tools);
  return Math.ceil(chars / 3);
}

/** About JSON.stringify(value).length (escapes not counted), by walking the value. */
export function jsonLength(value: unknown): number {
  switch (typeof value) {
    case 'string':
      return value.length + 2;
    case 'number':
    case 'boolean':
      return String(value).length;
    case 'object': {
      if (value === null) return 4;
      // Brackets, plus a comma between items: one per item, less one.
      let n = 1;
      if (Array.isArray(value)) {
        for (const item of value) n += (item === undefined ? 4 : jsonLength(item)) + 1;
        return Math.max(2, n);
      }
      for (const key in value) {
        const v = (value as Record<string, unknown>)[key];
        if (v !== undefined && typeof v !== 'function') n += key.length + 3 + jsonLength(v) + 1;
      }
      return Math.max(2, n);
    }
    default:
      return 0;
  }
}
