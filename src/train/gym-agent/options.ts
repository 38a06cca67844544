import path from 'node:path';
import { PolarError } from '../../core/errors.js';
import type { RolloutConfig } from '../../rollout/config.js';
import type { RolloutTask } from '../../rollout/task-file.js';
import type { SandboxKind, SandboxLimits } from '../../sandbox/index.js';
import type { SourceAllowList } from './allow-from.js';
import type { GymRunResult } from './result.js';
import type { TaskCatalog } from './task.js';
import type { ThinkingSetting } from '../../upstream/sampling-policy.js';
import type { EnvironmentName } from '../../rollout/environments/names.js';

export interface GymAgentOptions {
  harness: string;
  command?: string;
  harnessBin?: string;
  nodeBin?: string;
  dbPath: string;
  host: string;
  port: number;
  /** The policy server(s); from NeMo Gym's `policy_base_url` when Gym started this agent. */
  upstreams: string[];
  upstreamKind: string;
  tokenizer?: string;
  model: string | null;
  /** The policy's context length, when the server lists none (NeMo-RL's does not): `polar train grpo` passes max_model_len. */
  contextWindow?: number | null;
  /**
   * The trainer's sampling where a row gives none (`--temperature` / `--top-p`; `polar train grpo`
   * passes policy.generation's): every call is pinned to the row's pair, else to these, else 1.0 / 1.0.
   */
  temperature?: number;
  topP?: number;
  /** The chat template's thinking switch every call renders with (`--thinking`; absent: `template`, NeMo-RL's). */
  thinking?: ThinkingSetting;
  /** Sessions at once (RUNNING); NeMo-RL posts every row of a step at once, the rest wait. */
  concurrency: number;
  timeoutSec: number;
  sandbox: SandboxKind;
  /** The harness's network in the sandbox (default proxy-only; a task may ask for host). */
  network?: 'proxy-only' | 'host';
  limits?: SandboxLimits;
  /** Extra read-only paths in every sandbox (`--sandbox-ro`). */
  sandboxReadOnly?: string[];
  /** Where Harbor tasks' trials run: a container engine, or host (the default) in the sandbox. */
  environment?: EnvironmentName;
  /** Which metric of a Harbor verifier's reward.json is the reward (`--reward-key`; harbor-rewards.ts). */
  rewardKey?: string;
  /** The rewards the rollout takes (`--reward-range`; absent: [0, 1]; rollout/reward-range.ts). */
  rewardRange?: [number, number];
  outDir: string;
  /** The tasks `/run` rows may name (`task_id`), from `--tasks FILE`. */
  tasks?: { file: string; tasks: readonly RolloutTask[] };
  /** Rows may define their task inline (`task`); they still run sandboxed. */
  allowInlineTasks?: boolean;
  /** Every request but the readiness probe must present it; required beyond loopback unless `allowFrom`. */
  authToken?: string | null;
  /** Host names besides the bound address and loopback names that callers may use. */
  allowHosts?: readonly string[];
  /**
   * Only these source addresses (and loopback) are answered (`--allow-from`, allow-from.ts): beyond
   * loopback it stands in for the token NeMo Gym cannot send. With `authToken` too, both are required.
   */
  allowFrom?: SourceAllowList | null;
  /** Infrastructure failures (failures.ts) are run again up to this many times before answering (default 2). */
  infraRetries?: number;
  /** Stop NeMo-RL when more than this share of the last `failureWindow` rows failed outside the policy (default 0.5). */
  maxFailedShare?: number;
  /** Rows the share is taken over: about one NeMo-RL step (default 8; `polar train grpo` passes prompts × group size). */
  failureWindow?: number;
  /** Stop NeMo-RL when more than this share of a step's rows (`failureWindow`) is masked; absent: only warn (masked-share.ts). */
  maxMaskedShare?: number | null;
  onNotice?: (line: string) => void;
  onRun?: (result: GymRunResult) => void;
}

export const DEFAULT_INFRA_RETRIES = 2;
export const DEFAULT_MAX_FAILED_SHARE = 0.5;
export const DEFAULT_FAILURE_WINDOW = 8;

/**
 * The tasks rows may name. Without `--tasks` only inline tasks could run, so `--allow-inline-tasks`
 * is then required; inline tasks are the network's code, so they need a sandbox.
 */
export function taskCatalog(options: GymAgentOptions): TaskCatalog {
  if (!options.tasks && !options.allowInlineTasks) {
    throw new PolarError('POLAR_USAGE', 'gym-agent needs --tasks FILE: the rollout tasks /run rows name by task_id (polar train grpo passes it)');
  }
  if (options.allowInlineTasks && options.sandbox === 'none') {
    throw new PolarError('POLAR_USAGE', '--allow-inline-tasks runs task definitions that arrive over the network: it needs --sandbox bwrap');
  }
  return {
    tasks: new Map((options.tasks?.tasks ?? []).map((t) => [t.id, t])),
    file: options.tasks ? path.resolve(options.tasks.file) : null,
    allowInline: options.allowInlineTasks === true,
  };
}

/** The rollout the agent records its rows under: one sample per row, the stages' pools sized to `concurrency`. */
export function rolloutConfig(options: GymAgentOptions): RolloutConfig {
  return {
    harness: options.harness,
    ...(options.command !== undefined ? { command: options.command } : {}),
    ...(options.harnessBin ? { harnessBin: options.harnessBin } : {}),
    ...(options.nodeBin ? { nodeBin: options.nodeBin } : {}),
    upstream: { url: options.upstreams[0]!, kind: options.upstreamKind, ...(options.tokenizer ? { tokenizer: options.tokenizer } : {}) },
    model: options.model,
    samples: 1,
    concurrency: options.concurrency,
    initWorkers: options.concurrency,
    postWorkers: options.concurrency,
    timeoutSec: options.timeoutSec,
    outDir: path.resolve(options.outDir),
    accept: null,
    keepWorkspaces: false,
    sandbox: options.sandbox,
    ...(options.network ? { network: options.network } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.sandboxReadOnly?.length ? { sandboxReadOnly: options.sandboxReadOnly } : {}),
    ...(options.environment && options.environment !== 'host' ? { environment: options.environment } : {}),
    ...(options.rewardKey !== undefined ? { rewardKey: options.rewardKey } : {}),
    ...(options.rewardRange !== undefined ? { rewardRange: options.rewardRange } : {}),
  };
}
