import type { CanonicalRequest } from '../core/chat.js';

/**
 * The canonical request a non-Chat codec builds: the caller asked for none of Chat's extras
 * (logprobs, token ids, usage chunks), and its own reply details travel in `codecState`.
 */
export function canonicalRequest(fields: {
  model: string;
  stream: boolean;
  body: Record<string, unknown>;
  thinking: boolean | undefined;
  codecState: unknown;
}): CanonicalRequest {
  const req: CanonicalRequest = {
    requestedModel: fields.model,
    stream: fields.stream,
    body: fields.body as CanonicalRequest['body'],
    client: { logprobs: false, tokenIds: false, includeUsage: false },
    codecState: fields.codecState,
  };
  if (fields.thinking !== undefined) req.thinking = fields.thinking;
  return req;
}
