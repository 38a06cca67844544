import type { CanonicalRequest, ChatCompletion, ChatCompletionChunk } from '../core/chat.js';
import { isRecord } from '../core/chat.js';
import { PolarError, UpstreamStatusError } from '../core/errors.js';
import type { CapturedTokens } from '../core/tokens.js';
import { isDone, SseDataReader } from '../core/sse/data-reader.js';
import { parseUpstreamJson } from './chat-shape.js';
import { UpstreamHttp, type UpstreamBody, type UpstreamHttpOptions } from './http.js';
import type { TokenDelta } from '../core/tokens.js';
import type { PreparedBody, ServedModel, Upstream, UpstreamChunk, UpstreamCompletion, UpstreamKind, UpstreamRequest } from './types.js';

/** What differs between servers that speak OpenAI Chat: the request flags and where token data sits. */
export interface ChatDialect {
  kind: UpstreamKind;
  capturesTokens: boolean;
  body(req: CanonicalRequest, model: string): Record<string, unknown>;
  completion(json: unknown): { completion: ChatCompletion; tokens: CapturedTokens };
  chunk(json: unknown): { chunk: ChatCompletionChunk; tokens: TokenDelta | null };
  /** The server's tokenizer endpoint for chat requests, if it has one (vLLM: `/tokenize`). */
  tokenize?: { path: string; body(req: CanonicalRequest, model: string): Record<string, unknown> };
}

const CHAT_PATH = '/v1/chat/completions';

/** An upstream reached over `/v1/chat/completions`; the dialect supplies flags and extraction. */
export class ChatCompletionsUpstream implements Upstream {
  readonly kind: UpstreamKind;
  readonly capturesTokens: boolean;
  readonly baseUrl: string;
  private readonly http: UpstreamHttp;
  private noTokenizer = false;

  constructor(
    private readonly dialect: ChatDialect,
    options: UpstreamHttpOptions,
  ) {
    this.kind = dialect.kind;
    this.capturesTokens = dialect.capturesTokens;
    this.http = new UpstreamHttp({ ...options, baseUrl: normalizeBaseUrl(options.baseUrl) });
    this.baseUrl = this.http.url('');
  }

  prepare(req: CanonicalRequest, model: string): UpstreamRequest {
    const prepared = this.prepareBody(req, model);
    return { ...prepared, text: JSON.stringify(prepared.body) };
  }

  /** The dialects add flags and rename fields; they never read a message's text. */
  prepareBody(req: CanonicalRequest, model: string): PreparedBody {
    return { path: CHAT_PATH, stream: req.stream, body: this.dialect.body(req, model) };
  }

  async complete(req: UpstreamRequest, signal: AbortSignal): Promise<UpstreamCompletion> {
    return this.http.postAndRead(req.path, req.bytes ?? req.text, signal, req.headers, (bytes) => this.dialect.completion(parseUpstreamJson(bytes, 'reply')));
  }

  async stream(req: UpstreamRequest, signal: AbortSignal): Promise<AsyncIterable<UpstreamChunk>> {
    const body = await this.http.postStream(req.path, req.bytes ?? req.text, signal, req.headers);
    return readChunks(body, this.dialect);
  }

  models(signal?: AbortSignal): Promise<ServedModel[]> {
    return listModels(this.http, signal);
  }

  async countTokens(req: CanonicalRequest, model: string, signal?: AbortSignal): Promise<number | null> {
    const tokenize = this.dialect.tokenize;
    if (!tokenize || this.noTokenizer) return null;
    const reply = await this.http.postJson(tokenize.path, JSON.stringify(tokenize.body(req, model)), signal);
    if (reply.status === 404 || reply.status === 405) {
      this.noTokenizer = true; // remembered: an upstream without the endpoint is not asked again
      return null;
    }
    if (reply.status !== 200) throw new UpstreamStatusError(reply.status, reply.text);
    const json = parseUpstreamJson(reply.text, 'tokenize reply');
    return isRecord(json) && typeof json.count === 'number' ? json.count : null;
  }

  close(): Promise<void> {
    return this.http.close();
  }
}

/** `GET /v1/models`, with vLLM's `max_model_len` when the server gives it. */
export async function listModels(http: UpstreamHttp, signal?: AbortSignal): Promise<ServedModel[]> {
  const reply = await http.getJson('/v1/models', signal);
  if (reply.status !== 200) throw new UpstreamStatusError(reply.status, reply.text);
  const json = parseUpstreamJson(reply.text, 'model list');
  if (!isRecord(json) || !Array.isArray(json.data)) return [];
  return json.data.flatMap((m) => {
    if (!isRecord(m) || typeof m.id !== 'string') return [];
    return [typeof m.max_model_len === 'number' ? { id: m.id, maxModelLen: m.max_model_len } : { id: m.id }];
  });
}

async function* readChunks(body: UpstreamBody, dialect: ChatDialect): AsyncGenerator<UpstreamChunk> {
  const reader = new SseDataReader();
  let finished = false;
  for await (const bytes of body) {
    for (const data of reader.push(bytes)) {
      if (isDone(data)) {
        body.release();
        return;
      }
      const extracted = dialect.chunk(parseUpstreamJson(data, 'stream chunk'));
      if (extracted.chunk.choices.some((c) => c.finish_reason)) finished = true;
      yield extracted;
    }
  }
  // Some OpenAI-compatible servers close without `[DONE]`; that is complete only once a choice finished.
  if (!finished) {
    throw new PolarError('POLAR_UPSTREAM_PROTOCOL', 'upstream stream ended before the reply finished', 502);
  }
}

/** Accepts `http://host:8000`, `http://host:8000/` and `http://host:8000/v1` alike. */
export function normalizeBaseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new PolarError('POLAR_USAGE', `--upstream must be a URL like http://127.0.0.1:8000, got ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new PolarError('POLAR_USAGE', `--upstream must be an http(s) URL, got ${raw}`);
  }
  url.pathname = url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
  url.search = '';
  url.hash = '';
  return url.toString().replace(/\/+$/, '');
}
