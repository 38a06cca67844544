import type { IncomingMessage, ServerResponse } from 'node:http';
import { PolarError } from '../core/errors.js';
import type { ProviderCodec } from '../providers/types.js';
import { estimatePromptTokens } from '../providers/normalize.js';
import type { Upstream } from '../upstream/types.js';
import { readBody } from './body.js';
import { sendJson, toPolarError } from './reply.js';

/**
 * Anthropic `count_tokens` and Gemini `countTokens`, answered here: the request is decoded like a
 * model call and counted by the upstream's tokenizer (vLLM `/tokenize`), else estimated from its
 * size. Not a model call, so not recorded; harnesses call it often and expect it fast.
 */
export async function handleCountTokens(
  req: IncomingMessage,
  res: ServerResponse,
  opts: { codec: ProviderCodec; upstream: Upstream; model: string | null; apiPath: string; maxBodyBytes: number },
): Promise<void> {
  try {
    const text = await readBody(req, opts.maxBodyBytes);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (err) {
      throw new PolarError('POLAR_BAD_REQUEST', `request body is not valid JSON: ${(err as Error).message}`, 400);
    }
    // count_tokens bodies are Messages bodies without max_tokens; Gemini's may wrap the request.
    const inner = opts.codec.name === 'google-generate-content' && isObject(body) && isObject(body.generateContentRequest) ? body.generateContentRequest : body;
    const canonical = opts.codec.decodeRequest(inner, { path: opts.apiPath.replace(':countTokens', ':generateContent') });
    let count: number | null = null;
    try {
      count = await opts.upstream.countTokens(canonical, opts.model ?? canonical.requestedModel, AbortSignal.timeout(10_000));
    } catch {
      count = null; // the estimate below is still a useful answer
    }
    count ??= estimatePromptTokens(canonical.body.messages, canonical.body.tools);
    const reply = opts.codec.name === 'google-generate-content' ? { totalTokens: count } : { input_tokens: count };
    sendJson(res, 200, JSON.stringify(reply));
  } catch (err) {
    const error = toPolarError(err);
    const reply = opts.codec.renderError(error);
    sendJson(res, reply.status, JSON.stringify(reply.body));
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
