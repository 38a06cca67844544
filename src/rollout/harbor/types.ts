/**
 * A Harbor task (harbor-framework/harbor) as polar runs it. Field meanings follow Harbor's own
 * models, read at the fork snapshot 15735640198/harbor f276a3b: task.toml is
 * src/harbor/models/task/config.py (TaskConfig :698, `version` renamed to `schema_version` :727-730;
 * [verifier] :464-467, [agent] :242-248, [environment] :324-380, [solution] :238-239), the task
 * folder's files are src/harbor/models/task/paths.py (:42-116), the in-environment paths
 * src/harbor/models/trial/paths.py (:35-43: /logs/agent, /logs/verifier, /tests, /solution,
 * /logs/verifier/reward.txt and reward.json).
 */
export interface HarborTrial {
  /** The task folder, absolute. */
  dir: string;
  /** [task].name (schema 1.1 and later) or the folder's name, as Harbor names a task (task.py:67-70). */
  name: string;
  schemaVersion: string;
  /** Where the workspace appears inside the sandbox: [environment].workdir, else the Dockerfile's WORKDIR, else /app. */
  workdir: string;
  /** Files the Dockerfile copies under `workdir`, from the build context (host paths) to paths relative to it. */
  copies: { from: string; to: string; dir: boolean }[];
  /** environment/.dockerignore's patterns, in order (`!` re-includes): what a copy leaves out. */
  ignore?: string[];
  /** The image the task names (FROM or [environment].docker_image): not reproduced on the host. */
  baseImage: string | null;
  /** Dockerfile lines the host does not reproduce (RUN steps, copies outside `workdir`). */
  skipped: string[];
  /** tests/ on the host: mounted read-only at /tests for the verifier only. */
  testsDir: string;
  /** solution/ on the host (null when absent): mounted at /solution for the oracle only. */
  solutionDir: string | null;
  /** [verifier].timeout_sec (Harbor's default 600). */
  verifierTimeoutSec: number;
  verifierEnv: Record<string, string>;
  solutionEnv: Record<string, string>;
  /**
   * The network task.toml asks for, where it says: `public` ([environment].allow_internet = true or
   * network_mode = "public"), `none` (false / "no-network"); null: it does not say.
   */
  agentNetwork: 'public' | 'none' | null;
  verifierNetwork: 'public' | 'none' | null;
  /** [environment].cpus: the container's `--cpus` (the host environment has no such cap). */
  cpus?: number;
  /**
   * [environment].memory_mb (or the deprecated `memory = "2G"`, config.py:419-435): the container's
   * memory cap, in bytes, under polar's own `--max-memory` where that is lower.
   */
  memoryBytes?: number;
  /** [agent].user / [verifier].user (config.py:244-247, :467-470): who the stage runs as in the container. */
  agentUser?: string;
  verifierUser?: string;
}
