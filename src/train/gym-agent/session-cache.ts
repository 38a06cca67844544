import { samplingPolicy } from '../../upstream/sampling-policy.js';
import { openCapture } from '../../capture/open.js';
import type { RunningProxy } from '../../proxy/server.js';
import type { SessionKeys } from '../../proxy/session-keys.js';
import { privateSocketPath, type SandboxSettings } from '../../sandbox/index.js';
import type { Store } from '../../store/store.js';
import type { Upstream } from '../../upstream/types.js';
import type { GymAgentOptions } from './options.js';

/** One sampling profile's capture: its upstream and proxy, the proxy's socket for proxy-only sandboxes, and the served model. */
export interface Profile {
  upstream: Upstream;
  proxy: RunningProxy;
  socket: { path: string; remove(): Promise<void> } | null;
  model: string;
  contextWindow: number | null;
}

/** What a row asks of the policy: which server, its sampling, and its output cap. */
export interface ProfileKey {
  url: string;
  temperature: number | undefined;
  topP: number | undefined;
  maxTokens: number | undefined;
}

export interface SessionCacheDeps {
  options: Pick<GymAgentOptions, 'harness' | 'upstreamKind' | 'tokenizer' | 'model' | 'contextWindow' | 'temperature' | 'topP' | 'thinking'>;
  store: Store;
  sandbox: SandboxSettings;
  /** One master for every profile's proxy, in this process's memory only (session-keys.ts). */
  sessionKeys: SessionKeys;
  agentHeaders: readonly string[];
  rolloutId: string;
}

/**
 * The upstream+proxy pairs the agent's sessions run through, made on first use and kept until the
 * agent closes: one per (server, temperature, top_p, max_output_tokens), since NeMo-RL puts the
 * training or validation sampling in each row and the row's output cap goes on every call. Each is
 * the one capture wiring (capture/open.ts).
 */
export class SessionCache {
  private readonly profiles = new Map<string, Promise<Profile>>();

  constructor(private readonly deps: SessionCacheDeps) {}

  get(key: ProfileKey): Promise<Profile> {
    const name = `${key.url}|${key.temperature ?? ''}|${key.topP ?? ''}|${key.maxTokens ?? ''}`;
    let p = this.profiles.get(name);
    if (!p) {
      const opening = this.open(key);
      // A server that could not be reached is asked again by the next row, not refused for good.
      opening.catch(() => {
        if (this.profiles.get(name) === opening) this.profiles.delete(name);
      });
      this.profiles.set(name, opening);
      p = opening;
    }
    return p;
  }

  /** Stops every proxy (in-flight calls get a second), removes its socket, closes its upstream. */
  async close(): Promise<void> {
    for (const p of this.profiles.values()) {
      const { proxy, upstream, socket } = await p.catch(() => ({ proxy: null, upstream: null, socket: null }));
      await proxy?.close(1000);
      await socket?.remove();
      await upstream?.close();
    }
  }

  private async open({ url, temperature: rowTemperature, topP: rowTopP, maxTokens }: ProfileKey): Promise<Profile> {
    const { options, store, sandbox, sessionKeys, agentHeaders, rolloutId } = this.deps;
    // NeMo-RL writes the row's sampling (training or validation pair), not the session: it wins.
    const temperature = rowTemperature ?? options.temperature;
    const topP = rowTopP ?? options.topP;
    // Each profile's proxy has its own socket for proxy-only sandboxes, made once the model is known.
    const made: { socket: Profile['socket'] } = { socket: null };
    const capture = await openCapture({
      kind: options.upstreamKind,
      upstream: {
        baseUrl: url,
        ...(options.tokenizer ? { tokenizer: options.tokenizer } : {}),
        ...(temperature !== undefined ? { temperature } : {}),
        ...(topP !== undefined ? { topP } : {}),
        ...(options.thinking !== undefined ? { thinking: options.thinking } : {}),
      },
      model: options.model,
      contextWindow: options.contextWindow ?? null,
      // As a rollout: a custom command is never told the window, the harnesses polar configures are.
      requireContextWindow: options.harness !== 'custom',
      noModel: `no model for ${url}: pass --model (NeMo-RL's server lists none)`,
      proxy: async () => {
        made.socket = sandbox.kind === 'bwrap' ? await privateSocketPath() : null;
        return {
          store,
          maxTokens: maxTokens ?? null,
          defaultSession: `${rolloutId}-unattributed`,
          sessionKeys,
          agentHeaders: [...agentHeaders],
          ...(made.socket ? { unixSocket: made.socket.path } : {}),
          // The agent under training never chooses its own sampling (upstream/sampling-policy.ts).
          sampling: samplingPolicy('trainer', options.upstreamKind, temperature, topP, options.thinking),
        };
      },
    });
    return { upstream: capture.upstream, proxy: capture.proxy, socket: made.socket, model: capture.model!, contextWindow: capture.contextWindow };
  }
}
