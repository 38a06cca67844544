import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { timingSafeEqual } from 'node:crypto';
import { PolarError } from '../core/errors.js';
import { isValidSessionName, newId } from '../core/ids.js';
import { CODECS } from '../providers/codecs.js';
import { openaiChatCodec } from '../providers/openai-chat/index.js';
import { callIdFromResponseId } from '../providers/openai-responses/index.js';
import type { RecordedExchange } from '../providers/types.js';
import { redactHeaders, redactPath, secretValues } from '../store/redact.js';
import type { Store } from '../store/store.js';
import type { Upstream } from '../upstream/types.js';
import { CallRecord, type CallSummary } from './call-record.js';
import { apiKey, DEFAULT_AGENT_HEADERS, identifyCaller, type CallerIdentity } from './identity.js';
import { readBody } from './body.js';
import { handleCountTokens } from './count-tokens.js';
import { handleModelCall } from './model-call.js';
import { sendJson, toPolarError } from './reply.js';
import { detectProvider, matchRoute, SUPPORTED_ROUTES, type Route } from './route.js';

export interface ProxyOptions {
  store: Store;
  upstream: Upstream;
  /** The model every call is served by; null passes the requested name through. */
  servedModel: string | null;
  /** The served model's context length, for clamping `max_tokens`; null when unknown. */
  contextWindow?: number | null;
  /** Session for calls that name none. Created if it does not exist. */
  defaultSession: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  maxBodyBytes?: number;
  /** Required when binding a non-loopback host: every call must present it. */
  authToken?: string;
  agentHeaders?: readonly string[];
  keepAliveMs?: number;
  onCall?: (summary: CallSummary) => void;
}

export interface RunningProxy {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** The base URL an OpenAI-style client should use, optionally pinned to a session. */
  baseUrl(session?: string): string;
  /** Calls being served right now. */
  inFlight(): number;
  /** Stops accepting, lets in-flight calls finish (up to `graceMs`), then closes connections. */
  close(graceMs?: number): Promise<void>;
}


export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024;

export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export async function startProxy(options: ProxyOptions): Promise<RunningProxy> {
  const host = options.host ?? '127.0.0.1';
  if (!isLoopbackHost(host) && !options.authToken) {
    throw new PolarError(
      'POLAR_USAGE',
      `binding ${host} exposes the proxy beyond this machine; pass --auth-token TOKEN so every call must present it`,
      2,
    );
  }
  const { store, upstream } = options;
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const agentHeaders = options.agentHeaders ?? DEFAULT_AGENT_HEADERS;
  const upstreamUrl = upstream.baseUrl;
  store.sessions.ensure(options.defaultSession, {
    upstreamUrl,
    servedModel: options.servedModel,
    cwd: process.cwd(),
  });

  const active = new Set<Promise<void>>();
  const modelCtx = {
    upstream,
    servedModel: options.servedModel,
    contextWindow: options.contextWindow ?? null,
    maxBodyBytes,
    keepAliveMs: options.keepAliveMs ?? 15_000,
    lookupResponse: (responseId: string) => lookupResponse(store, responseId),
  };

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const task = dispatch(req, res).catch((err) => {
      // dispatch records and answers its own failures; this is the last line of defence.
      process.emitWarning(`polar proxy: ${(err as Error)?.stack ?? String(err)}`);
      if (!res.headersSent) sendJson(res, 500, JSON.stringify({ error: { message: 'internal proxy error', type: 'api_error' } }));
      else if (!res.writableEnded) res.end();
    });
    active.add(task);
    void task.finally(() => active.delete(task));
  }

  async function dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const route = matchRoute(req.method ?? 'GET', url);
    if (route.kind === 'health') {
      sendJson(res, 200, JSON.stringify({ ok: true, inFlight: active.size - 1 }));
      return;
    }
    if (route.kind === 'probe') {
      // Warm-up probes (Claude Code's HEAD /api/hello): answered, not recorded.
      res.writeHead(200).end();
      return;
    }
    const identity = identifyCaller(req.headers, route.pathSession, options.defaultSession, agentHeaders);
    const codec = route.kind === 'model-call' || route.kind === 'count-tokens' ? CODECS[route.provider] : openaiChatCodec;
    const refuse = (err: PolarError, call: CallRecord) => {
      req.resume();
      const reply = codec.renderError(err);
      const text = JSON.stringify(reply.body);
      call.end({ status: 'error', httpStatus: reply.status, reply: text, error: err.message, errorCode: err.code });
      sendJson(res, reply.status, text);
    };
    if (options.authToken && !authorized(req, options.authToken)) {
      refuse(new PolarError('POLAR_UNAUTHORIZED', 'missing or wrong polar auth token (send it as the API key or x-polar-auth-token)', 401), newCall(req, route, identity, 'unknown'));
      return;
    }
    if (!isValidSessionName(identity.sessionId)) {
      // newCall files this call under the default session; the caller learns why.
      const name = JSON.stringify(identity.sessionId);
      refuse(new PolarError('POLAR_BAD_REQUEST', `invalid session name ${name}: use letters, digits, . _ : - (max 128)`, 400), newCall(req, route, identity, 'unknown'));
      return;
    }
    switch (route.kind) {
      case 'models':
        req.resume();
        sendJson(res, 200, JSON.stringify(modelList(options.servedModel, route.flavor)));
        return;
      case 'count-tokens':
        await handleCountTokens(req, res, { codec, upstream, model: options.servedModel, apiPath: route.apiPath, maxBodyBytes });
        return;
      case 'model-call':
        await handleModelCall(req, res, newCall(req, route, identity, route.provider), { ...modelCtx, codec, apiPath: route.apiPath });
        return;
      case 'detect': {
        // A POST to a path no provider uses: the headers or the body's shape say which API it is.
        const call = newCall(req, route, identity, 'unknown');
        let body: string;
        try {
          body = await readBody(req, maxBodyBytes);
        } catch (err) {
          refuse(toPolarError(err), call);
          return;
        }
        const provider = detectProvider(req.headers, safeParse(body));
        if (!provider) {
          refuse(new PolarError('POLAR_NOT_FOUND', `no route for POST ${route.apiPath}; supported routes: ${SUPPORTED_ROUTES.join(', ')}`, 404), call);
          return;
        }
        call.setProvider(provider);
        await handleModelCall(req, res, call, { ...modelCtx, codec: CODECS[provider], apiPath: route.apiPath }, body);
        return;
      }
      default: {
        const message = route.methodNotAllowed
          ? `${req.method} is not supported on ${route.apiPath}; supported routes: ${SUPPORTED_ROUTES.join(', ')}`
          : `no route for ${req.method} ${route.apiPath}; supported routes: ${SUPPORTED_ROUTES.join(', ')}`;
        refuse(new PolarError('POLAR_NOT_FOUND', message, route.methodNotAllowed ? 405 : 404), newCall(req, route, identity, 'unknown'));
      }
    }
  }

  function newCall(req: IncomingMessage, route: Route, identity: CallerIdentity, provider: string): CallRecord {
    const sessionId = isValidSessionName(identity.sessionId) ? identity.sessionId : options.defaultSession;
    if (sessionId !== options.defaultSession) {
      store.sessions.ensure(sessionId, {
        upstreamUrl,
        servedModel: options.servedModel,
        metadata: { created_by: 'proxy', session_source: identity.sessionSource },
      });
    }
    return new CallRecord(
      store,
      {
        id: newId('req'),
        sessionId,
        agentId: identity.agentId,
        provider,
        method: req.method ?? 'GET',
        path: redactPath(req.url ?? '/'),
        startedAt: Date.now(),
        streamed: false,
        requestHeaders: redactHeaders(req.headers),
        originalRequest: null,
        upstreamRequest: null,
        requestedModel: null,
        servedModel: null,
      },
      secretValues(req.headers, req.url),
      options.onCall,
    );
  }

  const server = http.createServer({ keepAliveTimeout: 75_000 }, handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const urlHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${urlHost}:${address.port}`;

  return {
    url,
    host: address.address,
    port: address.port,
    baseUrl: (session?: string) => (session ? `${url}/s/${encodeURIComponent(session)}/v1` : `${url}/v1`),
    inFlight: () => active.size,
    async close(graceMs = 30_000) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const drained = Promise.allSettled([...active]);
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, graceMs);
        timer.unref();
      });
      await Promise.race([drained, timedOut]);
      if (timer) clearTimeout(timer);
      server.closeAllConnections();
      await closed;
      await Promise.allSettled([...active]);
    },
  };
}

/** The model list in the shape each SDK expects: OpenAI and Anthropic share one, Google has its own. */
function modelList(served: string | null, flavor: 'openai' | 'google'): unknown {
  const id = served ?? 'polar';
  if (flavor === 'google') {
    return { models: [{ name: `models/${id}`, displayName: id, supportedGenerationMethods: ['generateContent', 'streamGenerateContent', 'countTokens'] }] };
  }
  return {
    object: 'list',
    data: [{ id, object: 'model', type: 'model', display_name: id, created: 0, created_at: '1970-01-01T00:00:00Z', owned_by: 'polar' }],
    has_more: false,
    first_id: id,
    last_id: id,
  };
}

/** A Responses reply this proxy recorded, by the response id it gave (`resp_…` names the call). */
function lookupResponse(store: Store, responseId: string): RecordedExchange | undefined {
  const callId = callIdFromResponseId(responseId);
  const row = callId ? store.requests.get(callId) : undefined;
  if (!row || row.status !== 'ok' || row.provider !== 'openai-responses' || !row.originalRequest || !row.reply) return undefined;
  return { request: safeParse(row.originalRequest), reply: row.reply, streamed: row.streamed };
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function authorized(req: IncomingMessage, token: string): boolean {
  const presented = (req.headers['x-polar-auth-token'] as string | undefined) ?? apiKey(req.headers);
  if (!presented) return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}
