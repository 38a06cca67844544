import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HostPolicy } from '../core/http/origin.js';
import type { ProviderCodec } from '../providers/types.js';
import type { Store } from '../store/store.js';
import type { SamplingPolicy } from '../upstream/sampling-policy.js';
import type { Upstream } from '../upstream/types.js';
import type { AdminState } from './admin.js';
import type { CallSummary } from './call-record.js';
import type { ModelCallContext } from './model-call.js';
import type { Route } from './route.js';
import type { SessionKeys } from './session-keys.js';

/**
 * The types the proxy's parts share: its options, the per-proxy context every handler gets, and
 * one request as a handler sees it. Apart from server.ts so that admission.ts and session-row.ts
 * can take them without importing the module that imports them.
 */

export interface ProxyOptions {
  store: Store;
  upstream: Upstream;
  /** The model every call is served by; null passes the requested name through. */
  servedModel: string | null;
  /** The served model's context length, for clamping `max_tokens`; null when unknown. */
  contextWindow?: number | null;
  /** A cap on every call's output tokens (`max_tokens` at most this); null: the harness's own. */
  maxTokens?: number | null;
  /** Session for calls that name none. Created if it does not exist. */
  defaultSession: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /**
   * Also serve on this Unix socket (a path in a private folder; the file is made 0600 and removed on
   * close): a sandbox without network reaches the proxy through it. Its callers are not loopback
   * callers (admin routes still need the token).
   */
  unixSocket?: string;
  maxBodyBytes?: number;
  /** Required when binding a non-loopback host: every call must present it. */
  authToken?: string;
  /** Opens /admin/* too (besides authToken); with neither, admin routes answer 401 to everyone. */
  adminToken?: string;
  /**
   * Capability mode: a call into session S must present S's key (`sessionKeys.keyFor(S)`) or the
   * operator token; any other call gets 401 and an audit row, never a row in a session.
   */
  sessionKeys?: SessionKeys;
  /** Host names (besides the listening address and loopback names) callers may reach the proxy by. */
  allowHosts?: readonly string[];
  agentHeaders?: readonly string[];
  keepAliveMs?: number;
  onCall?: (summary: CallSummary) => void;
  /** A request refused before it was read (foreign Host, a web page's Origin, no session key); never recorded in a session. */
  onRefused?: (reason: string) => void;
  /** How long a model call waits while the proxy is paused before it gets 503 (default 300 s). */
  pauseLimitMs?: number;
  /** The policy version recorded on calls until a trainer sets another. */
  policyVersion?: string | null;
  /** Who chooses each call's sampling (upstream/sampling-policy.ts); left out: pass-through. */
  sampling?: SamplingPolicy;
}

/** Everything a request handler needs, built once per proxy: no state outside it. */
export interface ProxyContext {
  readonly options: ProxyOptions;
  readonly store: Store;
  readonly agentHeaders: readonly string[];
  readonly maxBodyBytes: number;
  /** The model-call context, less the codec and path each call adds. */
  readonly modelCall: Omit<ModelCallContext, 'codec' | 'apiPath'>;
  /** Set once the port is known, before the first request is handled. */
  policy: HostPolicy;
  /** Requests being served (not counting health checks and probes). */
  inFlight: number;
  readonly tasks: Set<Promise<void>>;
  /** Pause/drain and the policy version (admin.ts). */
  readonly admin: AdminState;
  /** Capability refusals so far. */
  refused: number;
}

/** One request as the proxy's route handlers see it: the route it matched and the API shape its errors take. */
export interface Exchange<R extends Route = Route> {
  readonly ctx: ProxyContext;
  readonly route: R;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly codec: ProviderCodec;
}
