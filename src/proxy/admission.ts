import type { IncomingMessage, ServerResponse } from 'node:http';
import { originProblem } from '../core/http/origin.js';
import { PolarError } from '../core/errors.js';
import { isValidSessionName } from '../core/ids.js';
import { sameSecret } from '../core/same-secret.js';
import { CODECS } from '../providers/codecs.js';
import type { ProviderCodec } from '../providers/types.js';
import { adminAuthorized } from './admin.js';
import type { CallRecord } from './call-record.js';
import { auditRefusal, capabilityProblem, refusalMessage } from './capability.js';
import type { Exchange } from './context.js';
import { apiKey, type CallerIdentity } from './identity.js';
import { renderError, sendError } from './render-error.js';
import { toPolarError } from './reply.js';
import { detectProvider, type Route } from './route.js';
import { newCall } from './session-row.js';

/**
 * What the proxy lets in, in the order server.ts asks: a request from a foreign Host or a web
 * page's Origin (before anything is read), an admin call without its token, a caller without its
 * session's key (capability mode) or the auth token, a session name that cannot be one, and a model
 * call while the proxy is paused. Each check that turns a request away answers it itself; the
 * caller only learns that it did. Body size is enforced where bodies are read (core/http/body.ts,
 * with the proxy's `maxBodyBytes`).
 */

/** A foreign Host or a web page's Origin: refused 403 before anything is read or recorded (a web page must not reach the training database). */
export function foreignRefused({ ctx, req, res, codec }: Exchange): boolean {
  const foreign = originProblem(req.headers, ctx.policy);
  if (!foreign) return false;
  req.resume();
  ctx.options.onRefused?.(foreign);
  sendError(res, renderError(codec, new PolarError('POLAR_FORBIDDEN', foreign, 403)));
  return true;
}

/** `/admin/*` without a token (admin.ts): loopback callers include sandboxed agents and web pages. */
export function adminRefused({ ctx, req, res, codec }: Exchange): boolean {
  if (adminAuthorized(req, [ctx.options.authToken, ctx.options.adminToken])) return false;
  req.resume();
  const message =
    'admin routes need the polar auth token or the admin token polar proxy wrote (its path is in the banner), as x-polar-auth-token or Authorization: Bearer';
  sendError(res, renderError(codec, new PolarError('POLAR_UNAUTHORIZED', message, 401)));
  return true;
}

/**
 * Whether the caller was turned away (and answered): without its session's key (capability mode),
 * without the auth token, or naming a session that cannot be one.
 */
export function callerRefused(ex: Exchange, identity: CallerIdentity): boolean {
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

/**
 * A model call past the pause gate: its `leave` (to call when the call ends), or null when it
 * waited out the pause limit and was answered 503 with Retry-After (recorded).
 */
export async function admitModelCall(ex: Exchange<Extract<Route, { kind: 'model-call' | 'detect' }>>, identity: CallerIdentity): Promise<(() => void) | null> {
  const { ctx, route, req, res, codec } = ex;
  try {
    return await ctx.admin.gate.admit();
  } catch (err) {
    const provider = route.kind === 'model-call' ? route.provider : 'unknown';
    refuse(res, req, codec, newCall(ctx, req, identity, provider), toPolarError(err), { 'retry-after': '30' });
    return null;
  }
}

/** Answers a call the proxy will not serve, recording it with the error the caller got. */
export function refuse(
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

/** A session name polar can file rows under; else the call is answered 400 (filed under the default session). */
function validSession({ ctx, req, res, codec }: Exchange, identity: CallerIdentity): boolean {
  if (isValidSessionName(identity.sessionId)) return true;
  const message = `invalid session name ${JSON.stringify(identity.sessionId)}: use letters, digits, . _ : - (max 128)`;
  refuse(res, req, codec, newCall(ctx, req, identity, 'unknown'), new PolarError('POLAR_BAD_REQUEST', message, 400));
  return false;
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
