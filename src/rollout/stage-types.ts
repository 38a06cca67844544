import type { SandboxSettings } from '../sandbox/index.js';
import type { SessionKeys } from '../proxy/session-keys.js';
import type { Harness } from '../harness/types.js';
import type { SampleRow } from '../store/rollouts.js';
import type { Store } from '../store/store.js';
import type { AcceptFacts } from './accept.js';
import type { RolloutConfig, RolloutEvent } from './config.js';
import type { SampleEnvironment } from './environments/types.js';
import type { StepOutcome } from './multi-step.js';
import type { SampleLedger } from './ledger.js';
import type { RolloutTask } from './task-file.js';
import type { PreparedWorkspace } from './workspace.js';

/**
 * The shapes the rollout stages share: the context a rollout builds once and a sample as it moves
 * past INIT and RUNNING. Apart from stages.ts so that step-stages.ts (a multi-step task's RUNNING,
 * which stages.ts calls) can name them without importing the module that imports it.
 */

/** What every stage shares: no globals; a rollout builds one and passes it in. */
export interface StageContext {
  rolloutId: string;
  /** Where the session's calls are captured (and read back for the evaluator). */
  store: Store;
  /** Where samples move through their stages and end. */
  ledger: SampleLedger;
  dbPath: string;
  config: RolloutConfig;
  tasks: ReadonlyMap<string, RolloutTask>;
  /** null for the built-in agents (`oracle`, `nop`), which run without a model. */
  harness: Harness | null;
  proxyUrl: string;
  /** Mints each session's key for the proxy at `proxyUrl`, which accepts a session's calls only with it. */
  sessionKeys: SessionKeys;
  model: string;
  contextWindow: number | null;
  accept: ((facts: AcceptFacts) => boolean) | null;
  /** How every command of a sample is isolated (sandboxing.ts says which network each gets). */
  sandbox: SandboxSettings;
  /** The proxy's Unix socket, for proxy-only sandboxes (null with `--sandbox none`). */
  proxySocket: string | null;
  secrets: readonly string[];
  /** The task file's folder, for evaluators' own files (`$POLAR_TASKS_DIR`). */
  tasksDir: string | null;
  emit: (event: RolloutEvent) => void;
  onNotice: (line: string) => void;
  /** Set on Ctrl-C: no new work starts; what runs is recorded as interrupted. */
  stopping: () => boolean;
  /**
   * Ends what runs as Ctrl-C would, for this context's samples alone (\`polar serve\`: a task
   * cancelled, or stopped early once enough sessions are usable); with it \`stopping()\` should say true.
   */
  signal?: AbortSignal;
  /**
   * One budget for the whole sample from its INIT start (Polar's TaskRequest.timeout_seconds: the
   * gateway sets the deadline when INIT starts, gateway/node.py:391,1676-1681): preparation and the
   * agent each get at most what is left of it. Absent: each phase has its own budget only.
   */
  sessionBudgetMs?: number;
  /** The harness's version, learned from the first session (undefined until then). */
  harnessVersion?: string | null;
}

/** A sample past INIT: its prepared workspace and its agent's budget. */
export interface Prepared {
  sample: SampleRow;
  task: RolloutTask;
  sessionId: string;
  workspace: PreparedWorkspace;
  /** The agent's budget, counted from the agent's start (a multi-step task's: its first step's). */
  agentTimeoutMs: number;
  /** When INIT's preparation began (after the image's build): `total_ms` counts from here. */
  startedAt: number;
  /** When the sample's one budget runs out (StageContext.sessionBudgetMs); absent: it has none. */
  deadline?: number;
  timing: Record<string, number>;
  /** Where the sample lives from INIT to its verdict (environments/: the host sandbox or a container). */
  environment: SampleEnvironment;
}

/** A sample past RUNNING: how its harness run ended. */
export interface Ran extends Prepared {
  sessionStatus: 'completed' | 'failed' | 'timeout';
  exitCode: number | null;
  /** A multi-step task's steps verified during RUNNING (all but the last), and why the rest were not run. */
  steps?: StepsSoFar;
  /** The cap the agent hit (stage-error.ts Forfeit): the sample scores 0 with it, unevaluated. */
  forfeit?: string;
}

/** The steps verified during RUNNING, and why the rest were not run (null: all ran). */
export interface StepsSoFar {
  done: StepOutcome[];
  stopped: string | null;
}
