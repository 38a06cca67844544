/**
 * The request checks vLLM's OpenAI server makes before it renders anything (its pydantic models):
 * a body that is not JSON, not an object, or has a field of the wrong type is a 400 naming the
 * field, never a 500 from deep inside the template or the sampler.
 */
export class MockBadRequest extends Error {
  constructor(
    message: string,
    readonly param: string | null = null,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The body as a JSON object, or a MockBadRequest. */
export function parseRequestBody(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new MockBadRequest(`JSON decode error: ${(err as Error).message}`, null, { cause: err });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new MockBadRequest('Input should be a valid dictionary');
  return value as Record<string, unknown>;
}

/** vLLM's ChatCompletionRequest field types, for the fields the mock reads. */
export function chatRequestError(body: Record<string, unknown>): MockBadRequest | null {
  const messages = body.messages;
  if (!Array.isArray(messages)) return new MockBadRequest('messages: Input should be a valid list', 'messages');
  for (const [i, m] of messages.entries()) {
    if (!isObject(m) || typeof m.role !== 'string')
      return new MockBadRequest(`messages.${i}: Input should be a valid dictionary with a string role`, 'messages');
    if (m.content !== undefined && m.content !== null && typeof m.content !== 'string' && !Array.isArray(m.content)) {
      return new MockBadRequest(`messages.${i}.content: Input should be a valid string or list`, 'messages');
    }
    if (Array.isArray(m.content) && !m.content.every(isObject))
      return new MockBadRequest(`messages.${i}.content: each part should be a valid dictionary`, 'messages');
    if (m.tool_calls !== undefined && m.tool_calls !== null && !(Array.isArray(m.tool_calls) && m.tool_calls.every(isObject))) {
      return new MockBadRequest(`messages.${i}.tool_calls: Input should be a valid list of dictionaries`, 'messages');
    }
  }
  if (body.tools !== undefined && body.tools !== null && !(Array.isArray(body.tools) && body.tools.every(isObject))) {
    return new MockBadRequest('tools: Input should be a valid list of dictionaries', 'tools');
  }
  for (const field of ['max_tokens', 'max_completion_tokens']) {
    const v = body[field];
    if (v !== undefined && v !== null && !(Number.isInteger(v) && (v as number) >= 1))
      return new MockBadRequest(`${field}: Input should be a positive integer`, field);
  }
  return null;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
