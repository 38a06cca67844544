import type { IncomingHttpHeaders } from 'node:http';

/**
 * Who is calling: which session a call belongs to and which agent inside it made it.
 * Session, first hit wins: the `/s/<session>` path prefix; the `x-polar-session` header; an API key
 * that starts with `polar-` (`Authorization: Bearer`, `x-api-key`, `x-goog-api-key`); else the
 * proxy's default session. A harness that can only be given a base URL and a key can therefore be
 * pointed at a session either way.
 */
export type SessionSource = 'path' | 'header' | 'api-key' | 'default';

export interface CallerIdentity {
  sessionId: string;
  sessionSource: SessionSource;
  agentId: string;
}

export const SESSION_HEADER = 'x-polar-session';
export const SESSION_KEY_PREFIX = 'polar-';

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
  if (key && key.startsWith(SESSION_KEY_PREFIX) && key.length > SESSION_KEY_PREFIX.length) {
    return { sessionId: key.slice(SESSION_KEY_PREFIX.length), sessionSource: 'api-key', agentId };
  }
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

function firstValue(value: string | string[] | undefined): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  return v && v.length > 0 ? v : undefined;
}
