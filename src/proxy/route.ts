import type { IncomingHttpHeaders } from 'node:http';
import type { ProviderName } from '../core/chat.js';
import { isRecord } from '../core/chat.js';

/**
 * Maps a request line to what the proxy should do with it. A harness given the base URL
 * `http://127.0.0.1:PORT/s/<session>/v1` sends `/s/<session>/v1/messages`: the prefix names the
 * session and the rest is the provider path. Detection goes by path first (a known endpoint, also
 * under an extra prefix such as `/openai/v1/chat/completions`), then, for a POST to any other
 * path, by headers and body shape (see `detectProvider`). This, not the shared core/http/router.ts (which
 * mock-server, replay and gym-agent use), is what the proxy routes with: a method + path-pattern
 * table cannot say "this suffix under any prefix" or "this body's shape".
 */
export type Route =
  | { kind: 'model-call'; provider: ProviderName; apiPath: string; pathSession: string | null; stream?: boolean }
  | { kind: 'count-tokens'; provider: 'anthropic-messages' | 'google-generate-content'; apiPath: string; pathSession: string | null }
  | { kind: 'models'; flavor: 'openai' | 'google'; apiPath: string; pathSession: string | null }
  | { kind: 'health'; apiPath: string; pathSession: string | null }
  | { kind: 'admin'; action: 'pause' | 'resume' | 'policy-version' | 'status'; apiPath: string; pathSession: string | null }
  | { kind: 'probe'; apiPath: string; pathSession: string | null }
  | { kind: 'detect'; apiPath: string; pathSession: string | null }
  /** `provider`: the API the path belongs to, so the error comes in that API's shape. */
  | { kind: 'not-found'; provider: ProviderName; apiPath: string; pathSession: string | null; methodNotAllowed: boolean };

export const SUPPORTED_ROUTES: readonly string[] = [
  'POST /v1/chat/completions',
  'POST /v1/messages',
  'POST /v1/messages/count_tokens',
  'POST /v1/responses',
  'POST /v1beta/models/{model}:generateContent',
  'POST /v1beta/models/{model}:streamGenerateContent',
  'POST /v1beta/models/{model}:countTokens',
  'GET /v1/models',
  'GET /health',
  'POST /admin/pause, /admin/resume, /admin/policy-version; GET /admin/status',
  '(each also under /s/<session>/…)',
];

const SESSION_PREFIX = /^\/s\/([^/?#]+)(\/[^?#]*)?/;
/** OpenAI endpoints that are not model calls polar serves: never guessed from their bodies. */
const OTHER_OPENAI_ENDPOINTS = /\/(embeddings|completions|moderations|audio\/[^/]+|images\/[^/]+|files|batches|fine_tuning\/[^/]+)$/;
const GOOGLE = /^(?:.*)\/(?:v1|v1beta|v1alpha)\/models\/[^/:]+(?:\/[^/:]+)*:(generateContent|streamGenerateContent|countTokens)$/;

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
  const base = { apiPath: path, pathSession };
  const post = method === 'POST';

  if (method === 'HEAD') return { kind: 'probe', ...base };
  if (path === '/health' || path === '/healthz') return method === 'GET' ? { kind: 'health', ...base } : notFound(base, true);
  const admin = /^\/admin\/(pause|resume|policy-version|status)$/.exec(path);
  if (admin && !pathSession) {
    const action = admin[1] as 'pause' | 'resume' | 'policy-version' | 'status';
    return (action === 'status' ? method === 'GET' : post) ? { kind: 'admin', action, ...base } : notFound(base, true);
  }
  if (path.endsWith('/messages/count_tokens')) return post ? { kind: 'count-tokens', provider: 'anthropic-messages', ...base } : notFound(base, true);
  if (path.endsWith('/chat/completions')) return post ? { kind: 'model-call', provider: 'openai-chat', ...base } : notFound(base, true);
  if (path.endsWith('/messages')) return post ? { kind: 'model-call', provider: 'anthropic-messages', ...base } : notFound(base, true);
  if (path.endsWith('/responses')) return post ? { kind: 'model-call', provider: 'openai-responses', ...base } : notFound(base, true);
  const google = GOOGLE.exec(path);
  if (google) {
    if (!post) return notFound(base, true);
    if (google[1] === 'countTokens') return { kind: 'count-tokens', provider: 'google-generate-content', ...base };
    return { kind: 'model-call', provider: 'google-generate-content', stream: google[1] === 'streamGenerateContent', ...base };
  }
  if (/\/(v1|v1beta)\/models$/.test(path) || path === '/models') {
    if (method !== 'GET') return notFound(base, true);
    return { kind: 'models', flavor: path.endsWith('/v1beta/models') ? 'google' : 'openai', ...base };
  }
  if (post && !OTHER_OPENAI_ENDPOINTS.test(path)) return { kind: 'detect', ...base };
  return notFound(base, false);
}

/**
 * The provider of a POST to an unknown path: an `anthropic-version` header means Anthropic; else
 * the body's shape (`contents`: Google; `input` items, or `input` text with `instructions`:
 * Responses; `messages`: Chat). Null: none of these.
 */
export function detectProvider(headers: IncomingHttpHeaders, body: unknown): ProviderName | null {
  if (headers['anthropic-version']) return 'anthropic-messages';
  if (!isRecord(body)) return null;
  if (Array.isArray(body.contents)) return 'google-generate-content';
  const items = Array.isArray(body.input) && body.input.every((i) => isRecord(i) && (typeof i.type === 'string' || typeof i.role === 'string'));
  if (items || (typeof body.input === 'string' && typeof body.instructions === 'string')) return 'openai-responses';
  if (Array.isArray(body.messages)) return 'openai-chat';
  return null;
}

function notFound(base: { apiPath: string; pathSession: string | null }, methodNotAllowed: boolean): Route {
  return { kind: 'not-found', provider: providerOfPath(base.apiPath), ...base, methodNotAllowed };
}

/**
 * The API a path belongs to, for answering a wrong method or an unknown path in that API's error
 * shape: Anthropic under `/messages`, Google under `/v1beta` or `/v1alpha` (or a `:method` model
 * path), Responses under `/responses`, else OpenAI's.
 */
export function providerOfPath(path: string): ProviderName {
  if (/\/messages(\/|$)/.test(path)) return 'anthropic-messages';
  if (/\/(v1beta|v1alpha)(\/|$)/.test(path) || /\/models\/[^/]+:[A-Za-z]+$/.test(path)) return 'google-generate-content';
  if (/\/responses(\/|$)/.test(path)) return 'openai-responses';
  return 'openai-chat';
}

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
