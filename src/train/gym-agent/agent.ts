import { MaskedShare } from './masked-share.js';
import os from 'node:os';
import path from 'node:path';
import { PolarError } from '../../core/errors.js';
import { newId } from '../../core/ids.js';
import { getHarness } from '../../harness/registry.js';
import { HttpGuard, isLoopbackHost } from '../../core/http/guard.js';
import { DEFAULT_AGENT_HEADERS } from '../../proxy/identity.js';
import { SessionKeys } from '../../proxy/session-keys.js';
import { sandboxSettings } from '../../rollout/sandboxing.js';
import { requireBwrap } from '../../sandbox/index.js';
import { openStore } from '../../store/open.js';
import type { SourceAllowList } from './allow-from.js';
import { FailureWindow } from './failures.js';
import { DEFAULT_FAILURE_WINDOW, DEFAULT_MAX_FAILED_SHARE, type GymAgentOptions, rolloutConfig, taskCatalog } from './options.js';
import { RowRunner } from './row-runner.js';
import { runHandler } from './run-handler.js';
import { SiblingPrompts } from './sibling-prompts.js';
import { firstPromptText } from '../../rollout/group-first-prompts.js';
import { startGymServer } from './server.js';
import { SessionCache } from './session-cache.js';
import { AGENT_NAME } from './wiring.js';
import { parseYaml, type Yaml } from '../yaml.js';

export { DEFAULT_FAILURE_WINDOW, DEFAULT_INFRA_RETRIES, DEFAULT_MAX_FAILED_SHARE, type GymAgentOptions } from './options.js';

export interface RunningGymAgent {
  url: string;
  rolloutId: string;
  close(): Promise<void>;
}

/** The agent's own host/port and the policy server Gym told it about (NEMO_GYM_CONFIG_DICT). */
export interface GymEnvironment {
  host: string | null;
  port: number | null;
  policyBaseUrls: string[];
  policyModel: string | null;
}

/**
 * Reads the merged config NeMo Gym gives every server it starts: the instance named by
 * NEMO_GYM_CONFIG_PATH holds this server's host and port (`<name>.responses_api_agents.<impl>`),
 * the top level NeMo-RL's `policy_base_url` (a list, one per vLLM data-parallel worker, each
 * ending in /v1) and `policy_model_name`.
 */
export function gymEnvironment(env: NodeJS.ProcessEnv = process.env): GymEnvironment {
  const dict = env.NEMO_GYM_CONFIG_DICT;
  if (!dict) throw new PolarError('POLAR_USAGE', '--from-gym: NEMO_GYM_CONFIG_DICT is not set; NeMo Gym sets it when it starts an agent server');
  const config = parseYaml(dict);
  const name = env.NEMO_GYM_CONFIG_PATH ?? AGENT_NAME;
  const instance = get(config, name);
  const typed = isMap(instance) ? Object.values(instance)[0] : undefined;
  const impl = isMap(typed) ? Object.values(typed)[0] : undefined;
  const server = isMap(impl) ? impl : {};
  const urls = get(config, 'policy_base_url');
  return {
    host: typeof server.host === 'string' ? server.host : null,
    port: typeof server.port === 'number' ? server.port : null,
    policyBaseUrls: (Array.isArray(urls) ? urls : typeof urls === 'string' ? [urls] : []).filter((u): u is string => typeof u === 'string'),
    policyModel: typeof get(config, 'policy_model_name') === 'string' ? (get(config, 'policy_model_name') as string) : null,
  };
}

/**
 * `polar gym-agent`: NeMo Gym's agent-server contract for NeMo-RL. One `/run` row is one session:
 * its `task` (a rollout task: workspace, setup, evaluator, timeout) goes through the rollout stages
 * (workspace, the harness through polar's capture proxy against the policy server, evaluation),
 * recorded in the database under one rollout per agent process; the answer is result.ts's.
 * Sampling follows the row (NeMo-RL puts the training or validation temperature and top_p in it), so
 * each (server, temperature, top_p, max_output_tokens) gets its own upstream and proxy, the row's
 * output cap on every call. NeMo-RL stops the run on any non-2xx answer, so a sample that failed
 * comes back 200 and masked, after infrastructure failures were run again (failures.ts); only a
 * row polar cannot run at all, or a window of rows that mostly failed outside the policy, is
 * answered 400, to stop a run that would train on nothing.
 */
export async function startGymAgent(options: GymAgentOptions): Promise<RunningGymAgent> {
  if (options.upstreams.length === 0) throw new PolarError('POLAR_USAGE', 'gym-agent needs the policy server: --upstream URL, or --from-gym under NeMo Gym');
  const catalog = taskCatalog(options);
  // Before anything is opened: a server beyond loopback with neither a token nor --allow-from is refused here.
  requireDoorBeyondLoopback(options.host, options.authToken ?? null, options.allowFrom ?? null);
  const guard = new HttpGuard({
    host: options.host,
    token: options.authToken ?? null,
    allowHosts: options.allowHosts ?? [],
    allowFrom: options.allowFrom ?? null,
    what: 'polar gym-agent',
  });
  const store = await openStore(options.dbPath, { onNotice: (line) => options.onNotice?.(line) });
  const harness = getHarness(options.harness, options.command !== undefined ? { command: options.command } : {});
  const bwrap = requireBwrap(options.sandbox);
  const rolloutId = newId('gym');
  const config = rolloutConfig(options);
  const sandbox = sandboxSettings(config, bwrap);
  store.rollouts.create(
    {
      id: rolloutId,
      harness: options.harness,
      upstreamUrl: options.upstreams.join(' '),
      upstreamKind: options.upstreamKind,
      servedModel: options.model,
      samplesPerTask: 1,
      tasksFile: null,
      accept: null,
      config: { ...config, source: 'gym-agent' } as unknown as Record<string, unknown>,
    },
    [],
  );
  const sessionKeys = SessionKeys.random();
  const agentHeaders = [...harness.agentHeaders, ...DEFAULT_AGENT_HEADERS];
  const sessions = new SessionCache({ options, store, sandbox, sessionKeys, agentHeaders, rolloutId });
  const runner = new RowRunner({ options, store, rolloutId, config, harness, sandbox, sessionKeys, catalog, sessions });
  const window = new FailureWindow(options.failureWindow ?? DEFAULT_FAILURE_WINDOW, options.maxFailedShare ?? DEFAULT_MAX_FAILED_SHARE);
  const siblings = new SiblingPrompts(
    (line) => options.onNotice?.(line),
    (session) => firstPromptText(store, store.requests.tokens(session)),
  );
  const masked = new MaskedShare(options.failureWindow ?? DEFAULT_FAILURE_WINDOW, options.maxMaskedShare ?? null);
  const run = runHandler({ options, catalog, runner, window, siblings, masked });
  const { server, address } = await startGymServer({
    host: options.host,
    port: options.port,
    guard,
    rolloutId,
    run,
    ...(options.onNotice ? { onNotice: options.onNotice } : {}),
  });
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    rolloutId,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await sessions.close();
      store.rollouts.end(rolloutId, 'completed');
      await store.closeAsync();
    },
  };
}

/**
 * A gym-agent that other machines reach needs a door: `--auth-token` (for callers that can send
 * one) or `--allow-from` (NeMo Gym sends no token: allow-from.ts). Neither is refused, naming both.
 */
export function requireDoorBeyondLoopback(host: string, token: string | null, allowFrom: SourceAllowList | null): void {
  if (isLoopbackHost(host) || token || allowFrom) return;
  throw new PolarError(
    'POLAR_USAGE',
    `polar gym-agent: binding ${host} exposes it beyond this machine; pass --allow-from ADDRESS|SUBNET|HOST (the trainer node: NeMo Gym calls /run and sends no token) or --auth-token TOKEN (a caller that can send it), or both`,
  );
}

function get(config: Yaml, key: string): Yaml | undefined {
  return isMap(config) ? config[key] : undefined;
}

function isMap(v: Yaml | undefined): v is { [key: string]: Yaml } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Where an agent under Gym works: beside the database's folder, not in Gym's venv. */
export function defaultAgentOutDir(): string {
  return path.join(os.tmpdir(), `polar-gym-agent-${process.pid}`);
}
