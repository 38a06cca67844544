import type { IncomingHttpHeaders, IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PolarError } from '../errors.js';
import { sameSecret } from '../same-secret.js';
import { hostPolicy, originProblem, type HostPolicy } from './origin.js';

/**
 * The door every HTTP server polar starts shares (the proxy's admin routes, `gym-agent`,
 * `replay --serve`, `mock-server`): the proxy's browser checks (origin.ts: a foreign `Host`, a web
 * page's `Origin` or `Sec-Fetch-Site`), a token whenever the server listens beyond this machine, and,
 * where a route asks for it, a JSON body. A `text/plain` POST is a CORS "simple request": a page
 * may send it cross-origin with no preflight (Fetch standard §4.1, CORS-safelisted request headers),
 * so a route that acts on its body must refuse every other content type. None of these servers sends
 * `Access-Control-Allow-*`, so a browser never lets a page read an answer either.
 */
export interface Refusal {
  status: 401 | 403 | 415;
  code: 'POLAR_UNAUTHORIZED' | 'POLAR_FORBIDDEN' | 'POLAR_BAD_REQUEST';
  message: string;
}

export interface GuardOptions {
  /** The address the server binds. */
  host: string;
  /** Required on every guarded request when set; required to exist when `host` is not loopback. */
  token?: string | null;
  /** Host names, besides the bound address and loopback names, callers may reach the server by. */
  allowHosts?: readonly string[];
  /** Who refuses, for messages: `polar gym-agent`. */
  what: string;
  /** The flag that sets the token, for messages (default `--auth-token`). */
  tokenFlag?: string;
  /**
   * Only connections from these source addresses are answered (`gym-agent --allow-from`): for a
   * caller that can send no token, it stands in for the token beyond loopback. With a token too,
   * both are required.
   */
  allowFrom?: SourceFilter | null;
}

/** The addresses a server answers, by the connection's source (`socket.remoteAddress`). */
export interface SourceFilter {
  allows(address: string | undefined): boolean;
  /** What was allowed, for messages. */
  readonly described: string;
  /** The flag that sets it, for messages (`--allow-from`). */
  readonly flag: string;
}

export class HttpGuard {
  private policy: HostPolicy;
  readonly token: string | null;

  constructor(private readonly options: GuardOptions) {
    this.token = options.token || null;
    if (!options.allowFrom) requireTokenBeyondLoopback(options.host, this.token, options.what, options.tokenFlag);
    this.policy = hostPolicy(options.host, 0, options.allowHosts);
  }

  /** Once the port is known (a server asked for port 0): an Origin must name this port. */
  listening(port: number): void {
    this.policy = hostPolicy(this.options.host, port, this.options.allowHosts);
  }

  /** Why a request is refused, or null. `token: false` skips the token (a readiness probe). */
  check(req: IncomingMessage, need: { token?: boolean; json?: boolean } = {}): Refusal | null {
    const from = this.options.allowFrom;
    if (from && !from.allows(req.socket.remoteAddress)) {
      return {
        status: 403,
        code: 'POLAR_FORBIDDEN',
        message: `${this.options.what}: a call from ${req.socket.remoteAddress ?? 'an unknown address'} is refused: it answers only ${from.flag} ${from.described} (and this machine); add the caller's address or subnet to ${from.flag}`,
      };
    }
    const foreign = originProblem(req.headers, this.policy);
    if (foreign) return { status: 403, code: 'POLAR_FORBIDDEN', message: `${this.options.what}: ${foreign}` };
    if (this.token && need.token !== false && !tokenPresented(req.headers, this.token)) {
      return {
        status: 401,
        code: 'POLAR_UNAUTHORIZED',
        message: `${this.options.what}: missing or wrong token (send it as Authorization: Bearer TOKEN or x-polar-auth-token)`,
      };
    }
    if (need.json && !isJsonContentType(req.headers['content-type'])) {
      return {
        status: 415,
        code: 'POLAR_BAD_REQUEST',
        message: `${this.options.what}: send the body as Content-Type: application/json (got ${JSON.stringify(req.headers['content-type'] ?? 'none')})`,
      };
    }
    return null;
  }
}

export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** Listening beyond this machine without a token would let any stranger on the network in. */
export function requireTokenBeyondLoopback(host: string, token: string | null | undefined, what: string, flag = '--auth-token'): void {
  if (!isLoopbackHost(host) && !token) {
    throw new PolarError(
      'POLAR_USAGE',
      `${what}: binding ${host} exposes it beyond this machine; pass ${flag} TOKEN (or set $POLAR_AUTH_TOKEN) so every request must present it`,
    );
  }
}

/** The credentials a request carries for polar itself: `Authorization: Bearer T`, `x-polar-auth-token: T`. */
export function presentedTokens(headers: IncomingHttpHeaders): string[] {
  const out: string[] = [];
  const own = headers['x-polar-auth-token'];
  for (const v of Array.isArray(own) ? own : own ? [own] : []) out.push(v.trim());
  const auth = headers.authorization;
  const bearer = typeof auth === 'string' ? /^Bearer\s+(.+)$/i.exec(auth.trim()) : null;
  if (bearer) out.push(bearer[1]!.trim());
  return out;
}

/** Whether any presented credential is `token` (compared in constant time). */
export function tokenPresented(headers: IncomingHttpHeaders, token: string): boolean {
  return presentedTokens(headers).some((p) => sameSecret(p, token));
}

/** `application/json`, `application/json; charset=utf-8`, `application/x+json` (RFC 6839 §3.1). */
export function isJsonContentType(value: string | undefined): boolean {
  if (!value) return false;
  const type = value.split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/** Listens, then tells the guard the port. */
export async function listenGuarded(server: Server, guard: HttpGuard, host: string, port: number): Promise<AddressInfo> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  guard.listening(address.port);
  return address;
}
