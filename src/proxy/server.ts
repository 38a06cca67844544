import type { IncomingMessage, ServerResponse } from 'node:http';
import { PolarError } from '../core/errors.js';
import { CODECS } from '../providers/codecs.js';
import type { ProviderCodec } from '../providers/types.js';
import { storeFileError } from '../store/file-errors.js';
import { CallRecord } from './call-record.js';
import { DEFAULT_AGENT_HEADERS, identifyCaller, type CallerIdentity } from './identity.js';
import { readBodyBytes } from '../core/http/body.js';
import { handleAdmin, type AdminState } from './admin.js';
import { adminRefused, admitModelCall, callerRefused, foreignRefused, refuse } from './admission.js';
import type { Exchange, ProxyContext, ProxyOptions } from './context.js';
import { handleCountTokens } from './count-tokens.js';
import { isLoopbackHost, listen } from './listen.js';
import { handleModelCall } from './model-call.js';
import { modelList } from './models.js';
import { hostPolicy } from '../core/http/origin.js';
import { PauseGate } from './pause.js';
import { lookupResponse, safeParse } from './recorded-response.js';
import { effectivePolicy } from '../upstream/sampling-policy.js';
import { renderError, sendError } from './render-error.js';
import { sendJson } from '../core/http/send.js';
import { toPolarError } from './reply.js';
import { detectProvider, matchRoute, SUPPORTED_ROUTES, type Route } from './route.js';
import { newCall } from './session-row.js';

/**
 * The proxy, composed: listen.ts binds and closes its sockets, admission.ts decides what is let in,
 * session-row.ts files each call under its session, model-call.ts serves it. This file routes a
 * request through them and answers the routes that are not model calls.
 */

// The proxy's options are its public shape; they live in context.ts with the types its parts share.
export type { ProxyOptions } from './context.js';

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

  const listener = await listen(
    { host, port: options.port ?? 0, unixSocket: options.unixSocket },
    (req, res) => handle(ctx, req, res),
    (port) => {
      ctx.policy = hostPolicy(host, port, options.allowHosts);
    },
  );
  const { url, address } = listener;

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
      await listener.close(graceMs, ctx.tasks);
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

async function dispatch(ctx: ProxyContext, route: Route, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const ex: Exchange = { ctx, route, req, res, codec: codecFor(route) };
  if (foreignRefused(ex)) return;
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
  if (route.kind === 'admin') {
    if (adminRefused(ex)) return;
    await handleAdmin(req, res, route.action, ctx.admin).catch((err: unknown) => sendError(res, renderError(ex.codec, toPolarError(err))));
    return;
  }
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

/** A model call, once the proxy is not paused for a weight update (else it waits for resume, or gets 503 and Retry-After). */
async function serveModelCall(ex: Exchange<Extract<Route, { kind: 'model-call' | 'detect' }>>, identity: CallerIdentity): Promise<void> {
  const { ctx, route, req, res, codec } = ex;
  const leave = await admitModelCall(ex, identity);
  if (!leave) return;
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
