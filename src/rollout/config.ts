import type { MaskedCount } from './sample-mask.js';
import type { SandboxKind, SandboxLimits } from '../sandbox/index.js';
import type { SampleOutcome } from '../store/rollouts.js';
import type { FirstPromptCheck } from './first-prompts.js';
import type { ThinkingSetting } from '../upstream/sampling-policy.js';
import type { EnvironmentName } from './environments/names.js';

/**
 * Everything a rollout needs to run, and to be resumed from the database alone (stored as the
 * rollout's `config`; the upstream API key is never stored: it comes from the environment).
 */
export interface RolloutConfig {
  harness: string;
  /** For `--harness custom`. */
  command?: string;
  harnessBin?: string;
  nodeBin?: string;
  upstream: {
    url: string;
    kind: string;
    tokenizer?: string;
    toolParser?: string;
    temperature?: number;
    topP?: number;
    /** `--thinking` (sampling-policy.ts); absent: `template`. */
    thinking?: ThinkingSetting;
  };
  /** The served model; null: the upstream's first. */
  model: string | null;
  /**
   * `--context-window`: the served model's context length the harnesses are told; absent: the
   * upstream's `max_model_len` (a rollout with neither refuses to start). A queued rollout's wins on
   * every worker, so the whole fleet renders one first prompt.
   */
  contextWindow?: number;
  samples: number;
  /** RUNNING workers: harness sessions at once. */
  concurrency: number;
  initWorkers: number;
  postWorkers: number;
  /** The agent's budget in seconds, from the agent's start, when its task gives none. */
  timeoutSec: number;
  /**
   * One budget for a whole sample, preparation and agent, from its INIT's start (ms): Polar's
   * timeout_seconds, which `polar serve` sets per task (StageContext.sessionBudgetMs); absent: none.
   */
  sessionBudgetMs?: number;
  /** Holds workspaces (kept with keepWorkspaces) and evaluators' scratch copies. */
  outDir: string;
  accept: string | null;
  keepWorkspaces: boolean;
  sandbox: SandboxKind;
  /** The harness's network in the sandbox (a task may ask for `host`); absent in older rollouts: proxy-only. */
  network?: 'proxy-only' | 'host';
  /** Per-sample caps; absent in older rollouts: the defaults. */
  limits?: SandboxLimits;
  /** Extra read-only paths in every sandbox (`--sandbox-ro`). */
  sandboxReadOnly?: string[];
  /** Which metric of a Harbor verifier's reward.json is the reward (`--reward-key`); absent: `reward`, else the only one (harbor-rewards.ts). */
  rewardKey?: string;
  /** The rewards the rollout takes, [LO, HI] (`--reward-range`); absent: [0, 1] (reward-range.ts). Any other forfeits. */
  rewardRange?: [number, number];
  /**
   * `off` (absent: the default): each harness's compaction and history trimming switched off, so a
   * sample is one append-only chain, as NeMo-RL trains it (HarnessContext.appendOnly). `harness`:
   * its own defaults (`--keep-compaction`), for a trainer that trains each trace on its own.
   */
  compaction?: 'off' | 'harness';
  /** Where Harbor tasks run: `host` (the sandbox; absent in older rollouts) or their own image with this engine. */
  environment?: EnvironmentName;
}

/** What one sample's progress looks like to a watcher (the CLI's bars, a test). */
export type RolloutEvent =
  | { type: 'stage'; sampleId: string; taskId: string; stage: 'init' | 'ready' | 'running' | 'post' }
  | { type: 'done'; sampleId: string; taskId: string; outcome: SampleOutcome | 'interrupted'; reward: number | null; error: string | null };

export interface GroupSummary {
  taskId: string;
  groupId: string;
  rewards: (number | null)[];
  outcomes: string[];
  mean: number | null;
  std: number | null;
  advantages: (number | null)[];
  looAdvantages: (number | null)[];
  accepted: number;
  /**
   * Whether the group's samples share one first prompt, as NeMo-RL needs them to be one GRPO group
   * (first-prompts.ts); absent where the summary was made without it (`polar rollouts`' list).
   */
  firstPrompt?: FirstPromptCheck;
}

export interface RolloutSummary {
  rolloutId: string;
  status: string;
  harness: string;
  tasks: number;
  samplesPerTask: number;
  outcomes: Record<SampleOutcome | 'interrupted' | 'unfinished', number>;
  /**
   * Samples that scored 0 because their verifier did not end on its own terms (killed, timed out,
   * no reward file) or left no reward to use (several metrics and no --reward-key, or not the one
   * it names), or because the agent failed on its own (a cap it hit, work polar would not diff or
   * collect: stage-error.ts Forfeit): the agent's code could have caused it, so they are not `error`
   * (which is polar's or the machine's failure) and stay in their group. Each has its evaluator's `forfeit`.
   */
  forfeited: number;
  meanReward: number | null;
  /** Offline SFT generation: accepted / attempted (samples that ended with a reward). */
  accepted: number;
  attempted: number;
  groups: GroupSummary[];
  durationMs: number;
  /** Samples that ended in this run (after a resume: its own, not those that ended before it). */
  endedHere: number;
  /** endedHere per minute of durationMs. */
  sessionsPerMinute: number;
  /** Calls this run's proxy refused for want of a session key (each in the audit table); absent when not counted. */
  refusedCalls?: number;
  db: string;
  outDir: string;
  /** Samples whose harness had the machine's network, not only the proxy (a task's "network": "host", --network host, or --sandbox none). */
  hostNetwork: string[];
  /** Tasks whose samples did not share one first prompt: NeMo-RL would split each into several groups (absent: not checked). */
  firstPromptSplits?: string[];
  /**
   * Ended samples NeMo-RL would train nothing on (masked by `polar gym-agent`, left out of `export
   * --format nemo-gym`), by kind (sample-mask.ts); absent where not checked (`polar rollouts`' list).
   */
  masked?: MaskedCount;
}
