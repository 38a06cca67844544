import { PolarError } from '../core/errors.js';
import { type ProxyOptions, type RunningProxy, startProxy } from '../proxy/server.js';
import { createUpstream, type UpstreamOptions } from '../upstream/create.js';
import type { ServedModel, Upstream } from '../upstream/types.js';

/** The upstream, its model and that model's window: what a proxy is started with. */
export interface Served {
  upstream: Upstream;
  /** Null only where the caller allows it (`polar proxy`: each call's requested name passes through). */
  model: string | null;
  contextWindow: number | null;
}

/** What a proxy needs beyond the upstream and its model. */
export type CaptureProxyOptions = Omit<ProxyOptions, 'upstream' | 'servedModel' | 'contextWindow'>;

export interface CaptureOptions {
  /** The upstream kind (`--upstream-kind`) and its options (`baseUrl` at least). */
  kind: string;
  upstream: UpstreamOptions;
  /** `--model`: served as named, listed by the upstream or not. Else the upstream's first. */
  model?: string | null;
  /** `--context-window`: wins over what the upstream lists. */
  contextWindow?: number | null;
  /**
   * The window must be known (`contextWindow`, or the served model's `max_model_len`): a rollout,
   * worker or gym-agent, whose harnesses render their window settings into every sample's first
   * prompt. Without it a model list that failed once (a restarting server) would silently give one
   * worker no window and its samples another first prompt. `polar run` and `polar proxy` go without.
   */
  requireContextWindow?: boolean;
  /**
   * The message of the POLAR_USAGE error thrown when no model is named and the upstream lists none;
   * left out, the proxy serves each call's requested model instead.
   */
  noModel?: string;
  /** Why the model list could not be read, when no model was named (the caller decides whether to say so). */
  onModelsError?: (err: Error) => void;
  /**
   * Whether the upstream may be unreachable when the capture opens (default: no). A harness started
   * against a server nobody answers at only retries 502s until its own timeout, minutes later, so
   * `run`, `rollout`, `worker` and `gym-agent` fail here with the cause. `polar proxy` may come up
   * before its server does: it says so and serves.
   */
  allowUnreachable?: boolean;
  /**
   * The proxy's other options, or a step that makes them once the model is known (a session row to
   * write first, a store to open only after the upstream was made).
   */
  proxy: CaptureProxyOptions | ((served: Served) => CaptureProxyOptions | Promise<CaptureProxyOptions>);
}

export interface Capture extends Served {
  proxy: RunningProxy;
  /** Stops the proxy (in-flight calls get `drainMs`) and closes the upstream. */
  close(drainMs?: number): Promise<void>;
}

/**
 * The model a capture serves and its context window. A named model is served as named even when the
 * upstream lists it not (a server without /v1/models, a served alias), with its own listed window or
 * none, never another model's; no name takes the first listed.
 */
export function resolveServed(
  listed: readonly ServedModel[],
  wanted: string | null | undefined,
  explicitWindow: number | null | undefined,
): { model: string | null; contextWindow: number | null } {
  const match = wanted ? listed.find((m) => m.id === wanted) : listed[0];
  return { model: wanted || (match?.id ?? null), contextWindow: explicitWindow ?? match?.maxModelLen ?? null };
}

/** Why a capture that needs the served model's window has none, and the two ways out. */
export function unknownWindow(url: string, model: string | null, listError: Error | null): string {
  const why = listError
    ? `its model list (${url} /v1/models) could not be read: ${listError.message}`
    : `${url} /v1/models lists no max_model_len for ${model ?? 'it'}`;
  return `the context window of the served model is not known: ${why}. Harnesses write their window into their first prompt (tool descriptions, compaction settings), so it must be the same for every sample of a group on every machine: pass --context-window TOKENS (the server's max_model_len), or fix the upstream so it lists max_model_len`;
}

/** How long the model list may take before the upstream counts as not answering. */
export const MODELS_TIMEOUT_MS = 5000;

/**
 * The error for an upstream that could not be reached at all (refused, no such host, no answer within
 * the model list's timeout), with the cause; null for one that answered, even with an error status
 * (a server without /v1/models is served all the same).
 */
export function cannotReach(url: string, err: Error): PolarError | null {
  const e = err as PolarError;
  const timedOut = e.code === 'POLAR_CLIENT_ABORTED' || e.name === 'TimeoutError' || e.name === 'AbortError';
  if (e.code !== 'POLAR_UPSTREAM_CONNECT' && !timedOut) return null;
  const cause = (e.cause as { code?: unknown } | undefined)?.code;
  const why = timedOut ? `no answer within ${MODELS_TIMEOUT_MS / 1000} s` : typeof cause === 'string' ? cause : e.message;
  return new PolarError(
    'POLAR_UPSTREAM_CONNECT',
    `cannot reach ${url} (${why}): start the inference server there or correct --upstream; nothing was started`,
    502,
    { cause: err },
  );
}

/** Makes the upstream, learns its model and window, and starts the capture proxy in front of it. */
export async function openCapture(options: CaptureOptions): Promise<Capture> {
  const upstream = await createUpstream(options.kind, options.upstream);
  try {
    let listError: Error | null = null;
    const listed = await upstream.models(AbortSignal.timeout(MODELS_TIMEOUT_MS)).catch((err: unknown) => {
      listError = err as Error;
      if (!options.model) options.onModelsError?.(err as Error);
      return [];
    });
    if (listError && !options.allowUnreachable) {
      const unreachable = cannotReach(options.upstream.baseUrl, listError);
      if (unreachable) throw unreachable;
    }
    const { model, contextWindow } = resolveServed(listed, options.model, options.contextWindow);
    if (!model && options.noModel !== undefined) throw new PolarError('POLAR_USAGE', options.noModel);
    if (contextWindow === null && options.requireContextWindow) throw new PolarError('POLAR_USAGE', unknownWindow(options.upstream.baseUrl, model, listError));
    const served: Served = { upstream, model, contextWindow };
    const rest = typeof options.proxy === 'function' ? await options.proxy(served) : options.proxy;
    const proxy = await startProxy({ ...rest, upstream, servedModel: model, contextWindow });
    return {
      ...served,
      proxy,
      close: async (drainMs?: number) => {
        await proxy.close(drainMs);
        await upstream.close();
      },
    };
  } catch (err) {
    await upstream.close();
    throw err;
  }
}
