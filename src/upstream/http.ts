import { Pool, errors as undiciErrors, type Dispatcher } from 'undici';
import { PolarError, UpstreamStatusError } from '../core/errors.js';

export interface UpstreamHttpOptions {
  /** Origin plus optional path prefix, e.g. `http://127.0.0.1:8000` or `http://gpu-box/vllm`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer` (hosted OpenAI-compatible APIs). Never recorded. */
  apiKey?: string;
  connectTimeoutMs?: number;
  /** Time allowed for the upstream's response headers: a non-streaming generation's whole duration. */
  headersTimeoutMs?: number;
  /** Longest silence allowed between two body chunks. */
  bodyTimeoutMs?: number;
}

export interface JsonReply {
  status: number;
  text: string;
}

/**
 * The one place polar talks HTTP to an inference server: a keep-alive undici Pool for the
 * upstream origin. Bodies are always consumed or destroyed, the caller's AbortSignal travels with
 * each request, and failures come out as PolarErrors whose code names the phase that failed,
 * because each phase has a different fix (connect: wrong URL or server down; headers: generation
 * slower than the timeout; body: the server stalled mid-stream).
 */
export class UpstreamHttp {
  readonly origin: string;
  readonly pathPrefix: string;
  private readonly pool: Pool;
  private readonly headers: Record<string, string>;

  constructor(private readonly options: UpstreamHttpOptions) {
    const url = new URL(options.baseUrl);
    this.origin = url.origin;
    this.pathPrefix = url.pathname.replace(/\/+$/, '');
    this.pool = new Pool(this.origin, {
      connect: { timeout: options.connectTimeoutMs ?? 10_000 },
      keepAliveTimeout: 60_000,
      keepAliveMaxTimeout: 600_000,
      headersTimeout: options.headersTimeoutMs ?? 900_000,
      bodyTimeout: options.bodyTimeoutMs ?? 900_000,
    });
    this.headers = { 'content-type': 'application/json', accept: 'application/json' };
    if (options.apiKey) this.headers.authorization = `Bearer ${options.apiKey}`;
  }

  url(path: string): string {
    return `${this.origin}${this.pathPrefix}${path}`;
  }

  async getJson(path: string, signal?: AbortSignal): Promise<JsonReply> {
    return this.send('GET', path, undefined, signal);
  }

  async postJson(path: string, body: string, signal?: AbortSignal, extra?: Record<string, string>): Promise<JsonReply> {
    return this.send('POST', path, body, signal, extra);
  }

  /**
   * Starts a streaming POST and resolves once a 2xx status arrived: before that point every
   * failure is an ordinary HTTP error for the caller; after it, the body is the caller's to read.
   */
  async postStream(path: string, body: string, signal: AbortSignal, extra?: Record<string, string>): Promise<AsyncIterable<Uint8Array>> {
    const res = await this.dispatch('POST', path, body, signal, { ...this.headers, ...extra, accept: 'text/event-stream' });
    if (res.statusCode < 200 || res.statusCode >= 300) {
      const text = await readText(res.body);
      throw new UpstreamStatusError(res.statusCode, text);
    }
    return guardBody(res.body);
  }

  async close(): Promise<void> {
    await this.pool.close();
  }

  private async send(method: 'GET' | 'POST', path: string, body: string | undefined, signal?: AbortSignal, extra?: Record<string, string>): Promise<JsonReply> {
    const res = await this.dispatch(method, path, body, signal, extra ? { ...this.headers, ...extra } : this.headers);
    let text: string;
    try {
      text = await res.body.text();
    } catch (err) {
      throw mapUpstreamError(err);
    }
    return { status: res.statusCode, text };
  }

  private async dispatch(
    method: 'GET' | 'POST',
    path: string,
    body: string | undefined,
    signal: AbortSignal | undefined,
    headers: Record<string, string>,
  ): Promise<Dispatcher.ResponseData> {
    try {
      return await this.pool.request({ method, path: `${this.pathPrefix}${path}`, headers, body, signal });
    } catch (err) {
      throw mapUpstreamError(err);
    }
  }
}

async function readText(body: Dispatcher.ResponseData['body']): Promise<string> {
  try {
    return await body.text();
  } catch {
    return '';
  }
}

async function* guardBody(body: Dispatcher.ResponseData['body']): AsyncGenerator<Uint8Array> {
  try {
    for await (const chunk of body) yield chunk as Uint8Array;
  } catch (err) {
    throw mapUpstreamError(err);
  } finally {
    // Leaving the loop early (client gone, parse error) must release the socket, not leak it.
    if (!body.destroyed) body.destroy();
  }
}

/** Turns undici and socket errors into PolarErrors with a code per failure phase. */
export function mapUpstreamError(err: unknown): PolarError {
  if (err instanceof PolarError) return err;
  const e = err as { code?: string; name?: string; message?: string };
  if (e?.name === 'AbortError' || e?.code === 'UND_ERR_ABORTED' || e instanceof undiciErrors.RequestAbortedError) {
    return new PolarError('POLAR_CLIENT_ABORTED', 'request aborted', 499, { cause: err });
  }
  switch (e?.code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
      return new PolarError('POLAR_UPSTREAM_CONNECT', 'timed out connecting to the upstream inference server', 504, {
        cause: err,
      });
    case 'UND_ERR_HEADERS_TIMEOUT':
      return new PolarError(
        'POLAR_UPSTREAM_HEADERS_TIMEOUT',
        'the upstream inference server did not answer in time (raise --upstream-timeout for long generations)',
        504,
        { cause: err },
      );
    case 'UND_ERR_BODY_TIMEOUT':
      return new PolarError('POLAR_UPSTREAM_BODY_TIMEOUT', 'the upstream inference server stalled mid-reply', 504, {
        cause: err,
      });
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return new PolarError('POLAR_UPSTREAM_CONNECT', `cannot reach the upstream inference server (${e.code})`, 502, {
        cause: err,
      });
    default:
      return new PolarError(
        'POLAR_UPSTREAM_CONNECT',
        `upstream connection failed: ${e?.message ?? String(err)}${e?.code ? ` (${e.code})` : ''}`,
        502,
        { cause: err },
      );
  }
}
