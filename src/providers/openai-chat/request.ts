import type { CanonicalRequest, ChatMessage, ChatRequestBody } from '../../core/chat.js';
import { isRecord } from '../../core/chat.js';
import { PolarError } from '../../core/errors.js';

/** Fields the upstream adapter owns: it sets them from the canonical request. */
const ADAPTER_FIELDS = ['model', 'stream', 'stream_options', 'return_token_ids'];

export function decodeChatRequest(body: unknown): CanonicalRequest {
  if (!isRecord(body)) throw badRequest('request body must be a JSON object');
  const { messages } = body;
  if (!Array.isArray(messages) || messages.length === 0) throw badRequest('`messages` must be a non-empty array', 'messages');
  messages.forEach((m, i) => {
    if (!isRecord(m) || typeof m.role !== 'string') throw badRequest(`messages[${i}] must be an object with a string \`role\``, 'messages');
  });
  if (body.model !== undefined && typeof body.model !== 'string') throw badRequest('`model` must be a string', 'model');
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') {
    throw badRequest('`stream` must be a boolean', 'stream');
  }
  if (body.n !== undefined && body.n !== null && body.n !== 1) {
    throw badRequest('polar records one sample per call: send `n` separate calls instead of `n > 1`', 'n');
  }
  const rest: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) {
    if (!ADAPTER_FIELDS.includes(key)) rest[key] = value;
  }
  return {
    requestedModel: typeof body.model === 'string' ? body.model : '',
    stream: body.stream === true,
    body: { ...rest, messages: messages as ChatMessage[] } as ChatRequestBody,
    client: {
      logprobs: body.logprobs === true,
      tokenIds: body.return_token_ids === true,
      includeUsage: isRecord(body.stream_options) && body.stream_options.include_usage === true,
    },
  };
}

function badRequest(message: string, param?: string): PolarError {
  return new PolarError('POLAR_BAD_REQUEST', message, 400, param ? { param } : undefined);
}
