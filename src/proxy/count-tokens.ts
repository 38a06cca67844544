import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ProviderCodec } from '../providers/types.js';
import { estimatePromptTokens } from '../providers/normalize.js';
import type { Upstream } from '../upstream/types.js';
import { parseJsonBody, readBody } from '../core/http/body.js';
import { renderError, sendError } from './render-error.js';
import { sendJson } from '../core/http/send.js';
import { toPolarError } from './reply.js';

/**
 * Anthropic `count_tokens` and Gemini `countTokens`, answered here: the request is decoded like a
 * model call and counted by the upstream's tokenizer (vLLM `/tokenize`), else estimated from its
 * size. Not a model call, so not recorded; harnesses call it often and expect it fast. Each codec
 * owns its endpoint's request and reply shapes.
 */
export async function handleCountTokens(
  req: IncomingMessage,
  res: ServerResponse,
  opts: { codec: ProviderCodec; upstream: Upstream; model: string | null; apiPath: string; maxBodyBytes: number },
): Promise<void> {
  const shape = opts.codec.countTokens!;
  try {
    const body = parseJsonBody(await readBody(req, opts.maxBodyBytes));
    const canonical = opts.codec.decodeRequest(shape.request(body), { path: shape.path(opts.apiPath) });
    let count: number | null = null;
    try {
      count = await opts.upstream.countTokens(canonical, opts.model ?? canonical.requestedModel, AbortSignal.timeout(10_000));
    } catch {
      count = null; // the estimate below is still a useful answer
    }
    count ??= estimatePromptTokens(canonical.body.messages, canonical.body.tools);
    sendJson(res, 200, shape.reply(count));
  } catch (err) {
    sendError(res, renderError(opts.codec, toPolarError(err)));
  }
}
