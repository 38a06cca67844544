import { openCapture } from '../capture/open.js';
import { PolarError } from '../core/errors.js';
import type { CallSummary } from '../proxy/call-record.js';
import { DEFAULT_AGENT_HEADERS } from '../proxy/identity.js';
import type { RunningProxy } from '../proxy/server.js';
import type { SessionKeys } from '../proxy/session-keys.js';
import { startRelay } from '../sandbox/index.js';
import type { Store } from '../store/store.js';
import type { Upstream } from '../upstream/types.js';
import type { RunHarnessOptions } from './options.js';

/** The proxy a run's harness calls: one started for the run, or a running `polar proxy`. */
export interface ProxyLink {
  /** Its origin (no trailing slash, no `/v1`). */
  url: string;
  /** The served model; null when the upstream would not say and none was given. */
  model: string | null;
  contextWindow: number | null;
  /** The upstream and proxy this run started (the caller closes them); absent with `proxyUrl`. */
  upstream?: Upstream;
  proxy?: RunningProxy;
}

/**
 * Starts a proxy against `opts.upstream` recording into `store` (listening from here on; the harness
 * reaches it only once its config is written), or links to the running one at `opts.proxyUrl`.
 */
export async function openProxyLink(
  opts: RunHarnessOptions,
  session: string,
  store: Store,
  keys: SessionKeys | null,
  socketPath: string | undefined,
  onCall: ((summary: CallSummary) => void) | undefined,
): Promise<ProxyLink> {
  const model = opts.model ?? null;
  const contextWindow = opts.contextWindow ?? null;
  if (opts.proxyUrl) return { url: proxyOrigin(opts.proxyUrl), model, contextWindow };
  if (!opts.upstream) {
    throw new PolarError('POLAR_USAGE', 'polar run needs --upstream URL (an inference server) or --proxy URL (a running polar proxy)');
  }
  const { url, kind, timeoutMs, ...rest } = opts.upstream;
  const capture = await openCapture({
    kind,
    upstream: { ...rest, baseUrl: url, ...(timeoutMs ? { headersTimeoutMs: timeoutMs, bodyTimeoutMs: timeoutMs } : {}) },
    model,
    contextWindow,
    noModel: 'could not learn the served model from the upstream; pass --model NAME',
    proxy: {
      store,
      defaultSession: session,
      ...(keys ? { sessionKeys: keys } : {}),
      agentHeaders: [...opts.harness.agentHeaders, ...DEFAULT_AGENT_HEADERS],
      ...(onCall ? { onCall } : {}),
      ...(socketPath ? { unixSocket: socketPath } : {}),
      ...(opts.sampling ? { sampling: opts.sampling } : {}),
    },
  });
  return { url: capture.proxy.url, model: capture.model, contextWindow: capture.contextWindow, upstream: capture.upstream, proxy: capture.proxy };
}

/** A running proxy's origin as the user gave it, without a trailing slash or `/v1`. */
export function proxyOrigin(url: string): string {
  return url.replace(/\/+$/, '').replace(/\/v1$/, '');
}

/**
 * A proxy-only sandbox reaches a running `polar proxy` through a Unix socket this run relays to it;
 * only a proxy on this machine can be reached that way.
 */
export async function relayToProxy(proxyUrl: string, socketPath: string): Promise<{ close(): Promise<void> }> {
  const target = new URL(proxyUrl);
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(target.hostname)) {
    throw new PolarError(
      'POLAR_USAGE',
      `a sandbox with --network proxy-only reaches a proxy on this machine only (--proxy ${proxyUrl}); use a local proxy, or --network host`,
    );
  }
  return startRelay(socketPath, target.hostname === 'localhost' ? '127.0.0.1' : target.hostname.replace(/^\[|\]$/g, ''), Number(target.port || 80));
}
