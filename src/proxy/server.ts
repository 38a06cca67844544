import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { chmodSync, rmSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import { PolarError } from '../core/errors.js';
import { sameSecret } from '../core/same-secret.js';
import { isValidSessionName, newId } from '../core/ids.js';
import { CODECS } from '../providers/codecs.js';
import type { ProviderCodec } from '../providers/types.js';
import { storeFileError } from '../store/file-errors.js';
import { redactHeaders, redactPath, secretValues } from '../store/redact.js';
import type { Store } from '../store/store.js';
import type { Upstream } from '../upstream/types.js';
import { CallRecord, type CallSummary } from './call-record.js';
import { apiKey, DEFAULT_AGENT_HEADERS, identifyCaller, type CallerIdentity } from './identity.js';
import { auditRefusal, capabilityProblem, refusalMessage } from './capability.js';
import type { SessionKeys } from './session-keys.js';
import { readBodyBytes } from '../core/http/body.js';
import { adminAuthorized, handleAdmin, type AdminState } from './admin.js';
import { handleCountTokens } from './count-tokens.js';
import { handleModelCall, type ModelCallContext } from './model-call.js';
import { modelList } from './models.js';
import { hostPolicy, originProblem, type HostPolicy } from '../core/http/origin.js';
import { PauseGate } from './pause.js';
import { lookupResponse, safeParse } from './recorded-response.js';
import { effectivePolicy, type SamplingPolicy } from '../upstream/sampling-policy.js';
import { renderError, sendError } from './render-error.js';
import { sendJson } from '../core/http/send.js';
import { toPolarError } from './reply.js';
import { detectProvider, matchRoute, SUPPORTED_ROUTES, type Route } from './route.js';

export interface ProxyOptions {
  store: Store;
  upstream: Upstream;
  /** The model every call is served by; null passes the requested name through. */
  servedModel: string | null;
  /** The served model's context length, for clamping `max_tokens`; null when unknown. */
  contextWindow?: number | null;
  /** A cap on every call's output tokens (`max_tokens` at most this); null: the harness's own. */
  maxTokens?: number | null;
  /** Session for calls that name none. Created if it does not exist. */
  defaultSession: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /**
   * Also serve on this Unix socket (a path in a private folder; the file is made 0600 and removed on
   * close): a sandbox without network reaches the proxy through it. Its callers are not loopback
   * callers (admin routes still need the token).
   */
  unixSocket?: string;
  maxBodyBytes?: number;
  /** Required when binding a non-loopback host: every call must present it. */
  authToken?: string;
  /** Opens /admin/* too (besides authToken); with neither, admin routes answer 401 to everyone. */
  adminToken?: string;
  /**
   * Capability mode: a call into session S must present S's key (`sessionKeys.keyFor(S)`) or the
   * operator token; any other call gets 401 and an audit row, never a row in a session.
   */
  sessionKeys?: SessionKeys;
  /** Host names (besides the listening address and loopback names) callers may reach the proxy by. */
  allowHosts?: readonly string[];
  agentHeaders?: readonly string[];
  keepAliveMs?: number;
  onCall?: (summary: CallSummary) => void;
  /** A request refused before it was read (foreign Host, a web page's Origin, no session key); never recorded in a session. */
  onRefused?: (reason: string) => void;
  /** How long a model call waits while the proxy is paused before it gets 503 (default 300 s). */
  pauseLimitMs?: number;
  /** The policy version recorded on calls until a trainer sets another. */
  policyVersion?: string | null;
  /** Who chooses each call's sampling (upstream/sampling-policy.ts); left out: pass-through. */
  sampling?: SamplingPolicy;
}

export interface RunningProxy {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** The base URL an OpenAI-style client should use, optionally pinned to a session. */
  baseUrl(session?: string): string;
  /** Calls being served right now. */
  inFlight(): number;
  /** Calls refused for want of a session key since the proxy started (each has an audit row). */
  refused(): number;
  /** The trainer's controls (also over HTTP at /admin/…). */
  readonly admin: AdminState;
  /** Stops accepting, lets in-flight calls finish (up to `graceMs`), then closes connections. */
  close(graceMs?: number): Promise<void>;
}

export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024;

export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** Everything a request handler needs, built once per proxy: no state outside it. */
interface ProxyContext {
  readonly options: ProxyOptions;
  readonly store: Store;
  readonly agentHeaders: readonly string[];
  readonly maxBodyBytes: number;
  /** The model-call context, less the codec and path each call adds. */
  readonly modelCall: Omit<ModelCallContext, 'codec' | 'apiPath'>;
  /** Set once the port is known, before the first request is handled. */
  policy: HostPolicy;
  /** Requests being served (not counting health checks and probes). */
  inFlight: number;
  readonly tasks: Set<Promise<void>>;
  /** Pause/drain and the policy version (admin.ts). */
  readonly admin: AdminState;
  /** Capability refusals so far. */
  refused: number;
}

export async function startProxy(options: ProxyOptions): Promise<RunningProxy> {
  const host = options.host ?? '127.0.0.1';
  if (!isLoopbackHost(host) && !options.authToken) {
    throw new PolarError('POLAR_USAGE', `binding ${host} exposes the proxy beyond this machine; pass --auth-token TOKEN so every call must present it`);
  }
  const { store, upstream } = options;
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const ctx: ProxyContext = {
    options,
    store,
    agentHeaders: options.agentHeaders ?? DEFAULT_AGENT_HEADERS,
    maxBodyBytes,
    modelCall: {
      upstream,
      servedModel: options.servedModel,
      contextWindow: options.contextWindow ?? null,
      maxTokens: options.maxTokens ?? null,
      maxBodyBytes,
      keepAliveMs: options.keepAliveMs ?? 15_000,
      lookupResponse: (responseId: string, sessionId: string) => lookupResponse(store, responseId, sessionId),
      sampling: effectivePolicy(options.sampling, upstream),
    },
    policy: hostPolicy(host, options.port ?? 0, options.allowHosts),
    inFlight: 0,
    tasks: new Set(),
    admin: { gate: new PauseGate(options.pauseLimitMs ?? 300_000), policyVersion: options.policyVersion ?? null },
    refused: 0,
  };

  const server = http.createServer({ keepAliveTimeout: 75_000 }, (req, res) => handle(ctx, req, res));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      ctx.policy = hostPolicy(host, (server.address() as AddressInfo).port, options.allowHosts);
      resolve();
    });
  });
  // The same HTTP server handles the socket's connections: one set of routes, checks and drains.
  const unix = options.unixSocket ? await listenUnix(options.unixSocket, (socket) => server.emit('connection', socket)) : undefined;
  const address = server.address() as AddressInfo;
  const urlHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${urlHost}:${address.port}`;

  return {
    url,
    host: address.address,
    port: address.port,
    baseUrl: (session?: string) => (session ? `${url}/s/${encodeURIComponent(session)}/v1` : `${url}/v1`),
    inFlight: () => ctx.inFlight,
    refused: () => ctx.refused,
    admin: ctx.admin,
    async close(graceMs = 30_000) {
      // Calls waiting out a pause are let through: closing finishes what was accepted.
      ctx.admin.gate.resume();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const drained = Promise.allSettled([...ctx.tasks]);
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, graceMs);
        timer.unref();
      });
      await Promise.race([drained, timedOut]);
      if (timer) clearTimeout(timer);
      server.closeAllConnections();
      if (unix) {
        await new Promise<void>((resolve) => unix.close(() => resolve()));
        rmSync(options.unixSocket!, { force: true });
      }
      await closed;
      await Promise.allSettled([...ctx.tasks]);
      // A last try for rows whose replies went out while the database refused them; any still
      // unwritten stay in_progress under this process, and the next opener marks them interrupted.
      CallRecord.writeUnrecorded(ctx.store);
    },
  };
}

function handle(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse): void {
  const route = matchRoute(req.method ?? 'GET', req.url ?? '/');
  const counted = route.kind !== 'health' && route.kind !== 'probe' && route.kind !== 'admin';
  if (counted) ctx.inFlight++;
  const task = dispatch(ctx, route, req, res)
    .catch((err) => {
      // dispatch records and answers its own failures; this is the last line of defence. A store
      // that refuses writes (a full disk) is said as such, in the caller's API shape; only an
      // unexpected error carries its stack.
      const error = storeFileError(ctx.store.file, err) ?? toPolarError(err);
      process.emitWarning(`polar proxy: ${error.code === 'POLAR_INTERNAL' ? ((err as Error)?.stack ?? String(err)) : error.message}`);
      if (!res.headersSent) sendError(res, renderError(codecFor(route), error));
      else if (!res.writableEnded) res.end();
    })
    .finally(() => {
      if (counted) ctx.inFlight--;
      ctx.tasks.delete(task);
    });
  ctx.tasks.add(task);
}

/** One request as the proxy's route handlers see it: the route it matched and the API shape its errors take. */
interface Exchange<R extends Route = Route> {
  readonly ctx: ProxyContext;
  readonly route: R;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly codec: ProviderCodec;
}

async function dispatch(ctx: ProxyContext, route: Route, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const ex: Exchange = { ctx, route, req, res, codec: codecFor(route) };
  // Before anything is read or recorded: a web page must not reach the training database.
  const foreign = originProblem(req.headers, ctx.policy);
  if (foreign) {
    req.resume();
    ctx.options.onRefused?.(foreign);
    sendError(res, renderError(ex.codec, new PolarError('POLAR_FORBIDDEN', foreign, 403)));
    return;
  }
  // Routes that are not model calls: answered before the caller is identified, never recorded.
  if (route.kind === 'health') {
    req.resume();
    sendJson(res, 200, { ok: true, inFlight: ctx.inFlight });
    return;
  }
  if (route.kind === 'probe') {
    // Warm-up probes (Claude Code's HEAD /api/hello): answered, not recorded.
    req.resume();
    res.writeHead(200).end();
    return;
  }
  if (route.kind === 'admin') return serveAdmin({ ...ex, route });
  const identity = identifyCaller(req.headers, route.pathSession, ctx.options.defaultSession, ctx.agentHeaders);
  if (callerRefused(ex, identity)) return;
  switch (route.kind) {
    case 'models':
      req.resume();
      sendJson(res, 200, modelList(ctx.options.servedModel, route.flavor));
      return;
    case 'count-tokens':
      await handleCountTokens(req, res, {
        codec: ex.codec,
        upstream: ctx.options.upstream,
        model: ctx.options.servedModel,
        apiPath: route.apiPath,
        maxBodyBytes: ctx.maxBodyBytes,
      });
      return;
    case 'model-call':
    case 'detect':
      return serveModelCall({ ...ex, route }, identity);
    case 'not-found':
      return serveNotFound({ ...ex, route }, identity);
  }
}

/** `/admin/*`: always behind a token (admin.ts), since loopback callers include sandboxed agents and web pages. */
async function serveAdmin({ ctx, route, req, res, codec }: Exchange<Extract<Route, { kind: 'admin' }>>): Promise<void> {
  if (!adminAuthorized(req, [ctx.options.authToken, ctx.options.adminToken])) {
    req.resume();
    const message =
      'admin routes need the polar auth token or the admin token polar proxy wrote (its path is in the banner), as x-polar-auth-token or Authorization: Bearer';
    sendError(res, renderError(codec, new PolarError('POLAR_UNAUTHORIZED', message, 401)));
    return;
  }
  await handleAdmin(req, res, route.action, ctx.admin).catch((err: unknown) => sendError(res, renderError(codec, toPolarError(err))));
}

/**
 * Whether the caller was turned away (and answered): without its session's key (capability mode),
 * without the auth token, or naming a session that cannot be one.
 */
function callerRefused(ex: Exchange, identity: CallerIdentity): boolean {
  const { ctx, route, req, res, codec } = ex;
  const { options } = ctx;
  if (options.sessionKeys) {
    const reason = capabilityProblem(req, identity, options.sessionKeys, options.authToken);
    if (!reason) return !validSession(ex, identity);
    // Not newCall: a refused call must not become a row in the session it named (or any other).
    req.resume();
    ctx.refused++;
    try {
      auditRefusal(ctx.store, req, identity, reason);
    } catch (err) {
      process.emitWarning(`polar proxy: could not record a refused call in the audit table: ${(err as Error).message}`);
    }
    options.onRefused?.(`${reason} ${identity.sessionSource === 'default' ? '(no session named)' : identity.sessionId}`);
    // A detected route's body is not read for a refused call; an Anthropic client still says so in a header.
    const shape = route.kind === 'detect' ? CODECS[detectProvider(req.headers, null) ?? 'openai-chat'] : codec;
    sendError(res, renderError(shape, new PolarError('POLAR_UNAUTHORIZED', refusalMessage(reason, identity), 401)));
    return true;
  }
  if (options.authToken && !authorized(req, options.authToken)) {
    const message = 'missing or wrong polar auth token (send it as the API key, x-polar-auth-token, or ?key=)';
    refuse(res, req, codec, newCall(ctx, req, identity, 'unknown'), new PolarError('POLAR_UNAUTHORIZED', message, 401));
    return true;
  }
  return !validSession(ex, identity);
}

/** A session name polar can file rows under; else the call is answered 400 (filed under the default session). */
function validSession({ ctx, req, res, codec }: Exchange, identity: CallerIdentity): boolean {
  if (isValidSessionName(identity.sessionId)) return true;
  const message = `invalid session name ${JSON.stringify(identity.sessionId)}: use letters, digits, . _ : - (max 128)`;
  refuse(res, req, codec, newCall(ctx, req, identity, 'unknown'), new PolarError('POLAR_BAD_REQUEST', message, 400));
  return false;
}

/** A model call, once the proxy is not paused for a weight update (else it waits for resume, or gets 503 and Retry-After). */
async function serveModelCall(ex: Exchange<Extract<Route, { kind: 'model-call' | 'detect' }>>, identity: CallerIdentity): Promise<void> {
  const { ctx, route, req, res, codec } = ex;
  let leave: () => void;
  try {
    leave = await ctx.admin.gate.admit();
  } catch (err) {
    const provider = route.kind === 'model-call' ? route.provider : 'unknown';
    refuse(res, req, codec, newCall(ctx, req, identity, provider), toPolarError(err), { 'retry-after': '30' });
    return;
  }
  try {
    if (route.kind === 'detect') await detectAndCall(ctx, route, req, res, identity);
    else await handleModelCall(req, res, newCall(ctx, req, identity, route.provider), { ...ctx.modelCall, codec, apiPath: route.apiPath });
  } finally {
    leave();
  }
}

/** No route (404), or a method the path does not take (405): recorded, in the path's own API's shape. */
function serveNotFound({ ctx, route, req, res, codec }: Exchange<Extract<Route, { kind: 'not-found' }>>, identity: CallerIdentity): void {
  const message = route.methodNotAllowed
    ? `${req.method} is not supported on ${route.apiPath}; supported routes: ${SUPPORTED_ROUTES.join(', ')}`
    : `no route for ${req.method} ${route.apiPath}; supported routes: ${SUPPORTED_ROUTES.join(', ')}`;
  refuse(res, req, codec, newCall(ctx, req, identity, 'unknown'), new PolarError('POLAR_NOT_FOUND', message, route.methodNotAllowed ? 405 : 404));
}

/** A POST to a path no provider uses: the headers or the body's shape say which API it is. */
async function detectAndCall(
  ctx: ProxyContext,
  route: Extract<Route, { kind: 'detect' }>,
  req: IncomingMessage,
  res: ServerResponse,
  identity: CallerIdentity,
): Promise<void> {
  const call = newCall(ctx, req, identity, 'unknown');
  let body: Buffer;
  try {
    body = await readBodyBytes(req, ctx.maxBodyBytes);
  } catch (err) {
    refuse(res, req, CODECS['openai-chat'], call, toPolarError(err));
    return;
  }
  const provider = detectProvider(req.headers, safeParse(body.toString('utf8')));
  if (!provider) {
    refuse(
      res,
      req,
      CODECS['openai-chat'],
      call,
      new PolarError('POLAR_NOT_FOUND', `no route for POST ${route.apiPath}; supported routes: ${SUPPORTED_ROUTES.join(', ')}`, 404),
    );
    return;
  }
  call.setProvider(provider);
  await handleModelCall(req, res, call, { ...ctx.modelCall, codec: CODECS[provider], apiPath: route.apiPath }, body);
}

/** The codec whose shape a route's replies and errors take. */
function codecFor(route: Route): ProviderCodec {
  if (route.kind === 'model-call' || route.kind === 'count-tokens' || route.kind === 'not-found') return CODECS[route.provider];
  return CODECS['openai-chat'];
}

/** Answers a call the proxy will not serve, recording it with the error the caller got. */
function refuse(
  res: ServerResponse,
  req: IncomingMessage,
  codec: ProviderCodec,
  call: CallRecord,
  err: PolarError,
  headers: Record<string, string> = {},
): void {
  req.resume();
  let reply = renderError(codec, err);
  try {
    call.end({ status: 'error', httpStatus: reply.status, reply: reply.text, error: err.message, errorCode: err.code });
  } catch (storeErr) {
    // The database refused the row (a full disk): the caller learns that, in its own API's shape.
    const refused = toPolarError(storeErr);
    reply = renderError(codec, refused);
    try {
      call.end({ status: 'error', httpStatus: reply.status, reply: reply.text, error: refused.message, errorCode: refused.code });
    } catch {
      // kept by the record and written once the database takes writes again
    }
    sendError(res, reply);
    return;
  }
  sendError(res, reply, headers);
}

/** Sessions served by a token-in upstream name the tokenizer that rendered them (verify reads it). */
export function tokenizerField(upstream: Upstream): { tokenizer?: string } {
  return upstream.tokenizer ? { tokenizer: upstream.tokenizer } : {};
}

function newCall(ctx: ProxyContext, req: IncomingMessage, identity: CallerIdentity, provider: string): CallRecord {
  const { options, store } = ctx;
  // Ends an earlier call could not write (a full disk since freed) go first.
  CallRecord.writeUnrecorded(store);
  const sessionId = isValidSessionName(identity.sessionId) ? identity.sessionId : options.defaultSession;
  if (sessionId === options.defaultSession) {
    // Made when a call first lands there, not at start: a rollout's `…-unattributed` session
    // stayed empty in `polar sessions` for every rollout whose calls all named their sessions.
    store.sessions.ensure(sessionId, {
      upstreamUrl: options.upstream.baseUrl,
      servedModel: options.servedModel,
      cwd: process.cwd(),
      metadata: tokenizerField(options.upstream),
    });
  } else {
    store.sessions.ensure(sessionId, {
      upstreamUrl: options.upstream.baseUrl,
      servedModel: options.servedModel,
      metadata: { created_by: 'proxy', session_source: identity.sessionSource, ...tokenizerField(options.upstream) },
    });
  }
  // The session may have been made before its first call without it (polar run --proxy, a rollout stage).
  if (options.upstream.tokenizer) store.sessions.recordTokenizer(sessionId, options.upstream.tokenizer);
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
      policyVersion: ctx.admin.policyVersion,
    },
    secretValues(req.headers, req.url),
    options.onCall,
  );
}

/** The token as an API key, in `x-polar-auth-token`, or (Google's SDKs) in `?key=`. */
function authorized(req: IncomingMessage, token: string): boolean {
  const presented = (req.headers['x-polar-auth-token'] as string | undefined) ?? apiKey(req.headers) ?? queryKey(req.url);
  if (!presented) return false;
  return sameSecret(presented, token);
}

function queryKey(url: string | undefined): string | undefined {
  const q = url?.indexOf('?') ?? -1;
  if (!url || q < 0) return undefined;
  return new URLSearchParams(url.slice(q + 1)).get('key') ?? undefined;
}

async function listenUnix(file: string, onConnection: (socket: net.Socket) => void): Promise<net.Server> {
  rmSync(file, { force: true });
  const unix = net.createServer(onConnection);
  await new Promise<void>((resolve, reject) => {
    unix.once('error', reject);
    unix.listen(file, () => {
      unix.off('error', reject);
      resolve();
    });
  });
  chmodSync(file, 0o600);
  return unix;
}
