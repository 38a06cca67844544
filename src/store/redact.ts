/**
 * Secrets never reach the database or a log. Headers are matched by name; the values seen in
 * them are also scrubbed from bodies and paths, so a harness that echoes its key elsewhere
 * (a query string, a body field) does not leak it either.
 */

export const SECRET_HEADERS: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'x-api-key',
  'x-goog-api-key',
  'api-key',
  'cookie',
  'set-cookie',
  'x-polar-auth-token',
]);

/** Query parameters that carry credentials (Google's SDKs put the API key in `?key=`). */
const SECRET_QUERY_PARAMS: ReadonlySet<string> = new Set(['key', 'api_key', 'apikey', 'access_token', 'token']);

export const REDACTED = '[redacted]';

export type HeaderBag = Record<string, string | string[] | undefined>;

export function redactHeaders(headers: HeaderBag): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    out[lower] = SECRET_HEADERS.has(lower) ? REDACTED : Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** The secret values a request carries, for scrubbing them from other fields. Short values are ignored. */
export function secretValues(headers: HeaderBag, url?: string): string[] {
  const values = new Set<string>();
  const add = (v: string) => {
    const bearer = /^(bearer|basic)\s+/i.exec(v);
    const raw = bearer ? v.slice(bearer[0].length) : v;
    if (raw.length >= 8) values.add(raw);
  };
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || !SECRET_HEADERS.has(name.toLowerCase())) continue;
    for (const v of Array.isArray(value) ? value : [value]) add(v);
  }
  if (url) {
    const q = url.indexOf('?');
    if (q >= 0) {
      for (const [name, value] of new URLSearchParams(url.slice(q + 1))) {
        if (SECRET_QUERY_PARAMS.has(name.toLowerCase())) add(value);
      }
    }
  }
  return [...values];
}

export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  }
  return out;
}

/** A request path with credential query parameters replaced. */
export function redactPath(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  let changed = false;
  for (const name of [...params.keys()]) {
    if (SECRET_QUERY_PARAMS.has(name.toLowerCase())) {
      params.set(name, REDACTED);
      changed = true;
    }
  }
  return changed ? `${url.slice(0, q)}?${params.toString()}` : url;
}
