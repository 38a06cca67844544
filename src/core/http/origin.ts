import type { IncomingHttpHeaders } from 'node:http';
import os from 'node:os';

/**
 * Browser-origin protection. A proxy on loopback is still reachable from any web page the user
 * opens: a cross-site `text/plain` POST needs no CORS preflight (Fetch standard, "CORS-safelisted
 * request-header"), and DNS rebinding lets a page's own host name resolve to 127.0.0.1. Either
 * would write attacker text into the training database and spend GPU time. So:
 * - `Host` must name the listening address, a loopback name, or a host the user allowed
 *   (`--allow-host`); a rebinding page's requests carry its own name (RFC 9110 §7.2).
 * - `Origin`, when present, must be the proxy's own origin; browsers send it on every cross-origin
 *   POST (Fetch standard §3.2.5), while harnesses, SDKs and curl send none.
 * - `Sec-Fetch-Site: cross-site | same-site` (Fetch Metadata) marks a request another site started.
 */
export interface HostPolicy {
  /** Lower-case host names and addresses, without ports or brackets. */
  readonly hosts: ReadonlySet<string>;
  readonly port: number;
}

export function hostPolicy(boundHost: string, port: number, allowHosts: readonly string[] = []): HostPolicy {
  const hosts = new Set<string>(['localhost', '127.0.0.1', '::1']);
  const bound = bareHost(boundHost);
  if (bound === '0.0.0.0' || bound === '::') {
    // A wildcard bind answers on every interface: each interface address, and the machine's name.
    hosts.add(os.hostname().toLowerCase());
    for (const list of Object.values(os.networkInterfaces())) {
      for (const info of list ?? []) hosts.add(info.address.toLowerCase());
    }
  } else {
    hosts.add(bound);
  }
  for (const h of allowHosts) hosts.add(bareHost(h));
  return { hosts, port };
}

/** Why a request is refused, or null when it may proceed. */
export function originProblem(headers: IncomingHttpHeaders, policy: HostPolicy): string | null {
  const host = headers.host;
  if (host !== undefined && !allowedHost(bareHost(host), policy)) {
    return `Host ${JSON.stringify(host)} is not this server's address; if you reach it by that name, start it with --allow-host ${hostOnly(host)}`;
  }
  const fetchSite = first(headers['sec-fetch-site']);
  if (fetchSite === 'cross-site' || fetchSite === 'same-site') {
    return `a browser marked this request ${fetchSite} (Sec-Fetch-Site); polar accepts calls from harnesses, not from web pages`;
  }
  const origin = first(headers.origin);
  if (origin !== undefined && !ownOrigin(origin, policy)) {
    return `Origin ${JSON.stringify(origin)} is not this server's own; polar accepts calls from harnesses, not from web pages`;
  }
  return null;
}

function allowedHost(host: string, policy: HostPolicy): boolean {
  return policy.hosts.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
}

function ownOrigin(origin: string, policy: HostPolicy): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false; // `null` (sandboxed frames, file:) included
  }
  if (url.protocol !== 'http:') return false;
  const port = url.port === '' ? 80 : Number(url.port);
  return port === policy.port && allowedHost(bareHost(url.hostname), policy);
}

/** `[::1]:8100` → `::1`, `LocalHost:80` → `localhost`. */
function bareHost(value: string): string {
  const v = value.trim().toLowerCase();
  if (v.startsWith('[')) {
    const end = v.indexOf(']');
    return end > 0 ? v.slice(1, end) : v;
  }
  const colons = v.split(':').length - 1;
  if (colons === 1) return v.slice(0, v.indexOf(':'));
  return v; // a bare IPv6 address, or a name without a port
}

function hostOnly(value: string): string {
  const bare = bareHost(value);
  return bare.includes(':') ? `[${bare}]` : bare;
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
