import type { IncomingHttpHeaders } from 'node:http';
import { parseSessionKey, SESSION_KEY_PREFIX } from './session-keys.js';

/**
 * Who is calling: which session a call belongs to and which agent inside it made it.
 * Session, first hit wins: the `/s/<session>` path prefix; the `x-polar-session` header; an API key
 * that starts with `polar-` (`Authorization: Bearer`, `x-api-key`, `x-goog-api-key`; the session is
 * the part before a `~secret`, see session-keys.ts); else the proxy's default session. Naming a
 * session is not permission to write to it: a proxy with session keys checks that separately. A harness that can only be given a base URL and a key can therefore be
 * pointed at a session either way.
 */
export type SessionSource = 'path' | 'header' | 'api-key' | 'default';

export interface CallerIdentity {
  sessionId: string;
  sessionSource: SessionSource;
  agentId: string;
}

export const SESSION_HEADER = 'x-polar-session';
export { SESSION_KEY_PREFIX };

/**
 * Headers that name the agent (sub-agent) making a call, in priority order. `x-polar-agent` is
 * polar's own, for custom harnesses; harness adapters add theirs (see the harness layer).
 */
export const DEFAULT_AGENT_HEADERS: readonly string[] = ['x-polar-agent'];

export function identifyCaller(
  headers: IncomingHttpHeaders,
  pathSession: string | null,
  defaultSession: string,
  agentHeaders: readonly string[] = DEFAULT_AGENT_HEADERS,
): CallerIdentity {
  const agentId = agentFromHeaders(headers, agentHeaders);
  if (pathSession) return { sessionId: pathSession, sessionSource: 'path', agentId };
  const header = firstValue(headers[SESSION_HEADER]);
  if (header) return { sessionId: header, sessionSource: 'header', agentId };
  const key = apiKey(headers);
  const named = key ? parseSessionKey(key) : null;
  if (named && named.session.length > 0) return { sessionId: named.session, sessionSource: 'api-key', agentId };
  return { sessionId: defaultSession, sessionSource: 'default', agentId };
}

export function agentFromHeaders(headers: IncomingHttpHeaders, agentHeaders: readonly string[]): string {
  for (const name of agentHeaders) {
    const value = firstValue(headers[name]);
    if (value) return value;
  }
  return 'main';
}

/** The API key a client presented, from whichever header its SDK uses. */
export function apiKey(headers: IncomingHttpHeaders): string | undefined {
  const auth = firstValue(headers.authorization);
  if (auth) {
    const m = /^bearer\s+(.+)$/i.exec(auth.trim());
    if (m) return m[1]!.trim();
  }
  return firstValue(headers['x-api-key']) ?? firstValue(headers['x-goog-api-key']) ?? undefined;
}

/**
 * Every credential a call presents, wherever an SDK or polar puts one: `Authorization: Bearer`,
 * `x-api-key`, `x-goog-api-key`, `x-polar-auth-token` and Google's `?key=`. A capability check
 * accepts the call when any of them proves the session, so a client that sends its key twice, or
 * with another header beside it, is not refused for the order it sends them in.
 */
export function presentedCredentials(headers: IncomingHttpHeaders, url: string | undefined): string[] {
  const out: string[] = [];
  const auth = firstValue(headers.authorization);
  const bearer = auth ? /^bearer\s+(.+)$/i.exec(auth.trim()) : null;
  if (bearer) out.push(bearer[1]!.trim());
  for (const name of ['x-api-key', 'x-goog-api-key', 'x-polar-auth-token']) {
    const v = firstValue(headers[name]);
    if (v) out.push(v);
  }
  const q = url?.indexOf('?') ?? -1;
  if (url && q >= 0) {
    const key = new URLSearchParams(url.slice(q + 1)).get('key');
    if (key) out.push(key);
  }
  return out;
}

function firstValue(value: string | string[] | undefined): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  return v && v.length > 0 ? v : undefined;
}
