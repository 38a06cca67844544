import http from 'node:http';
import type https from 'node:https';
import { createRequire } from 'node:module';
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

/** A whole reply: its bytes, and (decoded on first use) its text. */
export class JsonReply {
  private decoded: string | null = null;
  constructor(
    readonly status: number,
    readonly bytes: Buffer,
  ) {}

  get text(): string {
    this.decoded ??= this.bytes.toString('utf8');
    return this.decoded;
  }
}

type Body = string | Buffer;

/**
 * The one place polar talks HTTP to an inference server: keep-alive connections to the upstream
 * origin (node:http, whose parser is the runtime's own: an HTTP client library would add ~20 MiB to
 * every proxy process for the same work). Bodies are always consumed or destroyed, the caller's
 * AbortSignal travels with each request, and failures come out as PolarErrors whose code names the
 * phase that failed, because each phase has a different fix (connect: wrong URL or server down;
 * headers: generation slower than the timeout; body: the server stalled mid-stream).
 */
export class UpstreamHttp {
  readonly origin: string;
  readonly pathPrefix: string;
  private readonly agent: http.Agent;
  private readonly client: typeof http | typeof https;
  private readonly host: string;
  private readonly port: number;
  private readonly headers: Record<string, string>;
  private readonly connectMs: number;
  private readonly headersMs: number;
  private readonly bodyMs: number;

  constructor(options: UpstreamHttpOptions) {
    const url = new URL(options.baseUrl);
    this.origin = url.origin;
    this.pathPrefix = url.pathname.replace(/\/+$/, '');
    // TLS is loaded only for an https upstream: a local inference server never pays for it.
    this.client = url.protocol === 'https:' ? (createRequire(import.meta.url)('node:https') as typeof https) : http;
    this.host = url.hostname.replace(/^\[|\]$/g, '');
    this.port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
    this.agent = new this.client.Agent({ keepAlive: true, keepAliveMsecs: 60_000, maxSockets: 256, maxFreeSockets: 64, scheduling: 'lifo' });
    this.connectMs = options.connectTimeoutMs ?? 10_000;
    this.headersMs = options.headersTimeoutMs ?? 900_000;
    this.bodyMs = options.bodyTimeoutMs ?? 900_000;
    this.headers = { 'content-type': 'application/json', accept: 'application/json' };
    if (options.apiKey) this.headers.authorization = `Bearer ${options.apiKey}`;
  }

  url(path: string): string {
    return `${this.origin}${this.pathPrefix}${path}`;
  }

  async getJson(path: string, signal?: AbortSignal): Promise<JsonReply> {
    return this.send('GET', path, undefined, signal);
  }

  async postJson(path: string, body: Body, signal?: AbortSignal, extra?: Record<string, string>): Promise<JsonReply> {
    return this.send('POST', path, body, signal, extra);
  }

  /**
   * POSTs and hands a 2xx reply's whole body to `read`, returning what it made; any other status
   * is thrown as the UpstreamStatusError it is. The bytes `read` gets are valid only while it runs
   * (a view of a buffer every reply reuses: see `gather`), so it must copy what it keeps; parsing
   * them into values does.
   */
  async postAndRead<T>(
    path: string,
    body: Body,
    signal: AbortSignal | undefined,
    extra: Record<string, string> | undefined,
    read: (bytes: Buffer) => T,
  ): Promise<T> {
    const { status, chunks } = await this.exchange('POST', path, body, signal, extra);
    if (status < 200 || status >= 300) throw new UpstreamStatusError(status, Buffer.concat(chunks).toString('utf8'));
    return read(gather(chunks));
  }

  /**
   * Starts a streaming POST and resolves once a 2xx status arrived: before that point every
   * failure is an ordinary HTTP error for the caller; after it, the body is the caller's to read.
   */
  async postStream(path: string, body: Body, signal: AbortSignal, extra?: Record<string, string>): Promise<UpstreamBody> {
    const res = await this.dispatch('POST', path, body, signal, { ...this.headers, ...extra, accept: 'text/event-stream' });
    const status = res.statusCode ?? 0;
    if (status < 200 || status >= 300) {
      const text = await readChunks(res)
        .then((chunks) => Buffer.concat(chunks).toString('utf8'))
        .catch(() => '');
      throw new UpstreamStatusError(status, text);
    }
    return guardBody(res);
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }

  private async send(method: 'GET' | 'POST', path: string, body: Body | undefined, signal?: AbortSignal, extra?: Record<string, string>): Promise<JsonReply> {
    const { status, chunks } = await this.exchange(method, path, body, signal, extra);
    return new JsonReply(status, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
  }

  /** A request and its whole reply, as the chunks it arrived in. */
  private async exchange(
    method: 'GET' | 'POST',
    path: string,
    body: Body | undefined,
    signal: AbortSignal | undefined,
    extra: Record<string, string> | undefined,
  ): Promise<{ status: number; chunks: Buffer[] }> {
    const res = await this.dispatch(method, path, body, signal, extra ? { ...this.headers, ...extra } : this.headers);
    try {
      return { status: res.statusCode ?? 0, chunks: await readChunks(res) };
    } catch (err) {
      throw mapUpstreamError(err);
    }
  }

  /**
   * Sends a request; resolves with the response once its headers arrived, within the timeouts.
   * A request that fails on a kept-alive socket before any response byte is sent again on another
   * one: servers close idle connections (uvicorn, in front of vLLM, after 5 s), and one that does so
   * just as polar reuses the socket resets it with the request unread. Node's documented remedy
   * (`request.reusedSocket`); a failure on a fresh connection is the server's answer and is final.
   */
  private async dispatch(
    method: 'GET' | 'POST',
    path: string,
    body: Body | undefined,
    signal: AbortSignal | undefined,
    headers: Record<string, string>,
  ): Promise<http.IncomingMessage> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.dispatchOnce(method, path, body, signal, headers);
      } catch (err) {
        if (!(err instanceof StaleSocketError) || attempt >= MAX_STALE_RETRIES || signal?.aborted)
          throw mapUpstreamError(err instanceof StaleSocketError ? err.cause : err);
      }
    }
  }

  private dispatchOnce(
    method: 'GET' | 'POST',
    path: string,
    body: Body | undefined,
    signal: AbortSignal | undefined,
    headers: Record<string, string>,
  ): Promise<http.IncomingMessage> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(headersTimer);
        const code = (err as { code?: string })?.code;
        reject(req.reusedSocket && !signal?.aborted && (code === 'ECONNRESET' || code === 'EPIPE') ? new StaleSocketError(err) : err);
      };
      const req = this.client.request({
        agent: this.agent,
        host: this.host,
        port: this.port,
        method,
        path: `${this.pathPrefix}${path}`,
        headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        ...(signal ? { signal } : {}),
      });
      const headersTimer = setTimeout(() => req.destroy(phaseError('UND_ERR_HEADERS_TIMEOUT')), this.headersMs);
      req.once('socket', (socket) => {
        if (!socket.connecting) return;
        const connectTimer = setTimeout(() => req.destroy(phaseError('UND_ERR_CONNECT_TIMEOUT')), this.connectMs);
        socket.once('connect', () => clearTimeout(connectTimer));
        socket.once('close', () => clearTimeout(connectTimer));
      });
      req.once('response', (res) => {
        clearTimeout(headersTimer);
        if (settled) {
          res.destroy();
          return;
        }
        settled = true;
        // The longest silence allowed between two body chunks; the timer and its listener go when
        // the body ends, so a kept-alive socket carries neither into its next request.
        const socket = res.socket;
        const onIdle = () => res.destroy(phaseError('UND_ERR_BODY_TIMEOUT'));
        socket.setTimeout(this.bodyMs);
        socket.on('timeout', onIdle);
        const done = () => {
          socket.setTimeout(0);
          socket.off('timeout', onIdle);
        };
        res.once('end', done);
        res.once('close', done);
        resolve(res);
      });
      req.once('error', fail);
      req.end(body);
    });
  }
}

/** How many kept-alive sockets a request may find closed before the error is the caller's. */
const MAX_STALE_RETRIES = 4;

/** A request that failed on a reused socket before any response: sent again (dispatch). */
class StaleSocketError extends Error {
  constructor(override readonly cause: unknown) {
    super('kept-alive socket closed by the server');
  }
}

function phaseError(code: string): Error {
  return Object.assign(new Error(code), { code });
}

async function readChunks(res: http.IncomingMessage): Promise<Buffer[]> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return chunks;
}

/** Replies up to this size are gathered into the one reused buffer; larger ones get their own. */
const GATHER_MAX = 2 * 1024 * 1024;
let gathered = Buffer.alloc(0);

/**
 * A reply's chunks as one run of bytes, for synchronous use only (postAndRead). A reply arrives in
 * several socket reads; concatenating them made a second copy of every reply (~160 KB for one
 * carrying 35,000 prompt ids) that lived only until it was parsed. The chunks are copied into a
 * buffer kept for the purpose instead, grown to the largest reply seen (up to GATHER_MAX). No
 * await comes between the copy and the end of its use, so replies finishing at once never share it.
 */
function gather(chunks: Buffer[]): Buffer {
  if (chunks.length === 1) return chunks[0]!;
  let size = 0;
  for (const chunk of chunks) size += chunk.length;
  if (size > GATHER_MAX) return Buffer.concat(chunks, size);
  if (gathered.length < size) gathered = Buffer.allocUnsafeSlow(Math.min(GATHER_MAX, Math.max(size, gathered.length * 2)));
  let at = 0;
  for (const chunk of chunks) at += chunk.copy(gathered, at);
  return gathered.subarray(0, size);
}

/**
 * A streamed reply's bytes. A reader that stops early because the reply is complete (`[DONE]`)
 * calls `release()` first: the rest (the chunked encoding's terminator) is then drained so the
 * kept-alive socket goes back to the pool instead of being closed, and the next call does not pay
 * for a new connection. Leaving early without it (harness gone, parse error) closes the socket,
 * which is how the server learns to stop generating.
 */
export interface UpstreamBody extends AsyncIterable<Uint8Array> {
  release(): void;
}

/** How long a released reply may take to deliver its last bytes before its socket is closed. */
const DRAIN_MS = 1000;

function guardBody(res: http.IncomingMessage): UpstreamBody {
  let released = false;
  async function* chunks(): AsyncGenerator<Uint8Array> {
    try {
      for await (const chunk of res.iterator({ destroyOnReturn: false })) yield chunk as Uint8Array;
    } catch (err) {
      throw mapUpstreamError(err);
    } finally {
      // Leaving the loop early must release the socket, never leak it.
      if (!res.destroyed && !res.complete) {
        if (released) drain(res);
        else res.destroy();
      }
    }
  }
  const iterator = chunks();
  return {
    [Symbol.asyncIterator]: () => iterator,
    release: () => {
      released = true;
    },
  };
}

function drain(res: http.IncomingMessage): void {
  const timer = setTimeout(() => res.destroy(), DRAIN_MS);
  timer.unref();
  const done = () => clearTimeout(timer);
  res.once('end', done);
  res.once('close', done);
  res.resume();
}

/** Turns socket errors and timeouts into PolarErrors with a code per failure phase. */
export function mapUpstreamError(err: unknown): PolarError {
  if (err instanceof PolarError) return err;
  const e = err as { code?: string; name?: string; message?: string };
  if (e?.name === 'AbortError' || e?.code === 'ABORT_ERR' || e?.code === 'UND_ERR_ABORTED') {
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
      return new PolarError('POLAR_UPSTREAM_CONNECT', `upstream connection failed: ${e?.message ?? String(err)}${e?.code ? ` (${e.code})` : ''}`, 502, {
        cause: err,
      });
  }
}
