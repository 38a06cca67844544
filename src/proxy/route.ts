import type { ProviderName } from '../core/chat.js';

/**
 * Maps a request line to what the proxy should do with it. A harness given the base URL
 * `http://127.0.0.1:PORT/s/<session>/v1` sends `/s/<session>/v1/chat/completions`: the prefix names
 * the session and the rest is the provider path.
 */
export type Route =
  | { kind: 'model-call'; provider: ProviderName; apiPath: string; pathSession: string | null }
  | { kind: 'models'; apiPath: string; pathSession: string | null }
  | { kind: 'health'; apiPath: string; pathSession: string | null }
  | { kind: 'not-found'; apiPath: string; pathSession: string | null; methodNotAllowed: boolean };

export const SUPPORTED_ROUTES: readonly string[] = [
  'POST /v1/chat/completions',
  'GET /v1/models',
  'GET /health',
  '(each also under /s/<session>/…)',
];

const SESSION_PREFIX = /^\/s\/([^/?#]+)(\/[^?#]*)?/;

export function matchRoute(method: string, url: string): Route {
  const q = url.indexOf('?');
  let path = q >= 0 ? url.slice(0, q) : url;
  let pathSession: string | null = null;
  const prefixed = SESSION_PREFIX.exec(path);
  if (prefixed) {
    pathSession = safeDecode(prefixed[1]!);
    path = prefixed[2] ?? '/';
  }
  path = path.replace(/\/{2,}/g, '/');
  if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);

  const on = (expected: string) => method === expected;
  if (path === '/v1/chat/completions' || path === '/chat/completions') {
    return on('POST')
      ? { kind: 'model-call', provider: 'openai-chat', apiPath: path, pathSession }
      : { kind: 'not-found', apiPath: path, pathSession, methodNotAllowed: true };
  }
  if (path === '/v1/models' || path === '/models') {
    return on('GET') ? { kind: 'models', apiPath: path, pathSession } : notFound(path, pathSession, true);
  }
  if (path === '/health' || path === '/healthz') {
    return on('GET') || on('HEAD') ? { kind: 'health', apiPath: path, pathSession } : notFound(path, pathSession, true);
  }
  return notFound(path, pathSession, false);
}

function notFound(apiPath: string, pathSession: string | null, methodNotAllowed: boolean): Route {
  return { kind: 'not-found', apiPath, pathSession, methodNotAllowed };
}

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
