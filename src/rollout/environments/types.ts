import type { Bind } from '../../sandbox/index.js';
import type { Jail } from '../../sandbox/index.js';
import type { HarborHealthcheck } from '../harbor/types.js';
import type { PreparedWorkspace } from '../workspace.js';

/**
 * Where one sample lives, from its starting state to its verdict: the host sandbox (bubblewrap) or
 * a container of the task's image. The stages call these five steps in order and never ask which
 * environment they hold; a new one (a remote sandbox, Kubernetes) is one new file in this folder and
 * one line in registry.ts.
 */
export interface SampleEnvironment {
  readonly kind: string;
  /**
   * Before INIT's budget starts: what the environment needs once per task, not per sample (a
   * container image's build, under the task's build_timeout_sec as Harbor gives it apart from the
   * agent's timeout). Shared by the task's samples; its failure is theirs, not retried per sample.
   */
  provision?(): Promise<void>;
  /** INIT: the starting state in the host folder the sample's diff is taken from, setup, the baseline commit. */
  prepare(deadline: number): Promise<PreparedWorkspace>;
  /** RUNNING: where runHarness puts the harness (runHarness's `sandbox` fields besides settings and network). */
  harnessPlacement(): HarnessPlacement;
  /**
   * RUNNING without a model: one shell command in the agent's place (the oracle's solve.sh, a
   * scripted forger), with host folders shown read-only at the given paths.
   */
  runAgentCommand(command: string, opts: AgentCommandOptions): Promise<AgentCommandEnd>;
  /**
   * After the agent: every process of the sample is dead, its files are on the host (the
   * workspace folder; a container's artifacts too), and the diff against the baseline is taken.
   * Nothing the agent left can run from here on.
   */
  collect(): Promise<string>;
  /**
   * Between the steps of a multi-step task: as collect (everything the agent left running is dead,
   * its files are on the host, the diff against the baseline is taken), but the environment stays
   * for the next step, which Harbor runs in the same one (trial/multi_step.py:36-59). The step's
   * verifier then runs through `verification` as after collect.
   */
  checkpoint(): Promise<string>;
  /**
   * Before a step of a multi-step task: a host folder's files put into the workspace as the agent's
   * own (steps/<name>/workdir/, which Harbor uploads into the workdir, multi_step.py:513-522).
   */
  addWorkspaceFiles(hostDir: string): Promise<void>;
  /**
   * A healthcheck in the agent's environment now (a step's, multi_step.py:550-562, as the agent's
   * user): null once it passes, else why not. An environment without the task's image says it cannot.
   */
  healthcheck(hc: HarborHealthcheck): Promise<string | null>;
  /** Where the evaluator's commands run: a place whose system files the agent never had. */
  readonly verification: Verification;
  /** Removes what the sample made (its container; its workspace unless kept). */
  dispose(keepWorkspace: boolean): Promise<void>;
}

export interface HarnessPlacement {
  cwdInside?: string;
  homeInside?: string;
  /** polar's install and the time zone of a fixed-path sandbox (sandbox/fixed-paths.ts fixedPlacement). */
  polarInside?: string;
  tz?: string;
  binds?: readonly Bind[];
  container?: (proxyPort: number) => Jail;
}

export interface AgentCommandOptions {
  env: Record<string, string>;
  timeoutMs: number;
  /** Host folders shown read-only inside (solution/ at /solution). */
  readOnly: readonly { source: string; dest: string }[];
  /** `host`: the machine's network; `none`: no way out at all (a built-in agent needs no model). */
  network: 'host' | 'none';
}

export interface AgentCommandEnd {
  status: 'completed' | 'failed' | 'timeout';
  exitCode: number | null;
  /** A cap the command hit (memory, processes, file size): the sample ends in error. */
  limit: string | null;
}

/** One verifier command: after the agent, in a place it never touched. */
export interface VerifierCommand {
  command: string;
  /** Named in reasons and errors: "the verifier (tests/test.sh)", "test command \"node test.js\"". */
  what: string;
  /** The host folder the command works in: the agent's collected workspace, or a fresh copy of the task's. */
  workspace: string;
  env: Record<string, string>;
  timeoutMs: number;
  /** Host folders shown read-only inside, at the given paths (the task file's folder, tests/ at /tests). */
  readOnly: readonly { source: string; dest: string }[];
  /** A Harbor verifier: /logs/verifier is made empty for it and its files come back after its tree is dead. */
  rewardDir: boolean;
  network: 'host' | 'none';
  /** Who the command runs as (a container's [verifier].user); absent: the environment's default. */
  user?: string;
}

/** How a verifier command ended. When this is returned, everything the command started is dead. */
export interface VerifierRun {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  /** polar could not start it (a missing engine, a sandbox that would not open): the machine's failure. */
  failedToStart: string | null;
  /** A cap the command (the agent's code under test) hit. */
  limit: string | null;
  stdout: string;
  stderr: string;
  /** With `rewardDir`: the host folder holding what the verifier left in /logs/verifier (read once, then removed). */
  rewardDir: string | null;
}

export interface Verification {
  /** The environment's name (host, podman, docker). */
  readonly environment: string;
  /** Where its verifiers run, for the record ("host sandbox", "a fresh container of the task's image"). */
  readonly place: string;
  /** The workspace path the evaluator's commands see (for $POLAR_WORKSPACE). */
  workspaceInside(hostDir: string): string;
  run(cmd: VerifierCommand): Promise<VerifierRun>;
  /**
   * A fresh copy of the task's starting state in `dest`, prepared as at INIT (setup, baseline), for
   * a `tests` evaluator; then the agent's diff applied by polar's git in a sandbox with a neutral
   * config. Environments that cannot build one refuse with the reason.
   */
  freshWorkspace(dest: string, deadline: number, env: Record<string, string>): Promise<PreparedWorkspace>;
  applyDiff(ws: PreparedWorkspace, diff: string, env: Record<string, string>): Promise<void>;
}
