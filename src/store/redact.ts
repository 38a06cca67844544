/**
 * Secrets never reach the database or a log. Headers and query parameters are matched by name:
 * any name containing auth, key, token, secret, passw(ord), credential, cookie or session is
 * redacted, so a harness's own credential header (`x-auth-token`, `openai-api-key`, …) is covered
 * without a list to keep current. The values of credential-bearing ones are also scrubbed from
 * bodies and paths, so a harness that echoes its key elsewhere does not leak it either. Session
 * identifiers are redacted where they are named but not scrubbed from bodies: they are not
 * credentials, and scrubbing them would change the request polar records as sent.
 */

const SECRET_NAME = /auth|key|token|secret|passw|credential|cookie|session/i;
const CREDENTIAL_NAME = /auth|key|token|secret|passw|credential|cookie/i;

export const REDACTED = '[redacted]';

export type HeaderBag = Record<string, string | string[] | undefined>;

/** Whether a header or query parameter of this name is stored as `[redacted]`. */
export function isSecretName(name: string): boolean {
  return SECRET_NAME.test(name);
}

export function redactHeaders(headers: HeaderBag): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    out[lower] = isSecretName(lower) ? REDACTED : Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** The credential values a request carries, for scrubbing them from other fields. Short values are ignored. */
export function secretValues(headers: HeaderBag, url?: string): string[] {
  const values = new Set<string>();
  const add = (v: string) => {
    const scheme = /^(bearer|basic)\s+/i.exec(v);
    const raw = scheme ? v.slice(scheme[0].length) : v;
    if (raw.length >= 8) values.add(raw);
    // A polar session key's secret (`polar-<session>~<secret>`, proxy/session-keys.ts) is scrubbed
    // on its own too, so text quoting just the secret does not keep it either.
    const secret = /^polar-[^~]+~(.{8,})$/.exec(raw)?.[1];
    if (secret) values.add(secret);
  };
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || !CREDENTIAL_NAME.test(name)) continue;
    for (const v of Array.isArray(value) ? value : [value]) add(v);
  }
  if (url) {
    const q = url.indexOf('?');
    if (q >= 0) {
      for (const [name, value] of new URLSearchParams(url.slice(q + 1))) {
        if (CREDENTIAL_NAME.test(name)) add(value);
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

/** A request path with secret-named query parameters replaced. */
export function redactPath(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  let changed = false;
  for (const name of [...params.keys()]) {
    if (isSecretName(name)) {
      params.set(name, REDACTED);
      changed = true;
    }
  }
  return changed ? `${url.slice(0, q)}?${params.toString()}` : url;
}
