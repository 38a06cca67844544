import type { InsidePaths, SandboxSettings } from '../../sandbox/index.js';
import type { RolloutTask } from '../task-file.js';

/** What an environment needs from its rollout: the same for every sample of it. */
export interface EnvironmentDeps {
  sandbox: SandboxSettings;
  /** The fixed paths every sandboxed command sees the workspace and home at (null with --sandbox none). */
  inside: InsidePaths | null;
  /** The task file's folder (hidden checkers): evaluators only. */
  tasksDir: string | null;
  /** The capture proxy's Unix socket (null with --sandbox none or a built-in agent). */
  proxySocket: string | null;
  /** Where the sample's private home is made by runHarness (a container mounts it). */
  stateDir: string;
  /** A harness that calls the model (not a built-in agent): a container mounts its home and runtime. */
  modelHarness: boolean;
  harnessBin: string | null;
  nodeBin: string | null;
  /** Where verifier folders and fresh copies go, under the rollout's --out. */
  scratch: string;
  onNotice: (line: string) => void;
}

/** One sample's identity in its environment. */
export interface SampleSpec {
  task: RolloutTask;
  sampleId: string;
  sessionId: string;
  /** The host folder its workspace is prepared in, collected into, and its diff taken from. */
  dir: string;
}
