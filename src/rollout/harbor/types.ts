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
  /** tests/ on the host: mounted read-only at /tests for the verifier only (a separate verifier's image holds it itself). */
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
  /** In separate mode, the separate environment's: [verifier].network_mode over [verifier.environment]'s (or the inherited [environment]'s). */
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
  /**
   * [verifier].environment_mode (config.py:457-479): `separate` also when only [verifier.environment]
   * is given, as Harbor resolves it (verifier_mode.py:10-26); null: the task does not say (Harbor
   * then runs the verifier in the agent's environment, `shared`).
   */
  verifierMode: 'shared' | 'separate' | null;
  /** Present exactly when verifierMode is `separate`: the environment the verifier runs in instead of the agent's. */
  separateVerifier?: SeparateVerifier;
  /** task.toml's top-level `artifacts`: what a separate verifier gets from the agent's environment (with /logs/artifacts, see carriedPaths). */
  artifacts: HarborArtifact[];
  /** [[verifier.collect]]: commands run in the agent's environment after it, before artifacts are copied out. */
  collect: HarborCollect[];
}

/**
 * Harbor's separate verifier environment (trial/trial.py:463-592): an image built from tests/ as its
 * build context (tests/Dockerfile), or the environment's docker_image; it has /tests itself (Harbor
 * uploads nothing there, verifier/verifier.py:132-139), an emptied /logs/verifier, and the artifacts.
 */
export interface SeparateVerifier {
  /** tests/, absolute: the verifier image's build context. */
  context: string;
  /** tests/Dockerfile, absolute; null when absent (then `image` is set). */
  dockerfile: string | null;
  /**
   * docker_image of the verifier's environment ([verifier.environment], else the inherited
   * [environment]): Harbor runs it prebuilt even when tests/Dockerfile exists (definition.py:26-36,
   * trial.py:561 starts it with force_build=False).
   */
  image: string | null;
  /** No [verifier.environment]: a fresh copy of [environment] is the verifier's (verifier_mode.py:60-64). */
  inherited: boolean;
  /** Where test.sh runs: the environment's workdir, else tests/Dockerfile's WORKDIR; null: the image's own. */
  workdir: string | null;
  /** The verifier's network: [verifier].network_mode over the verifier environment's (network_policy.py:91-131); null: not said. */
  network: 'public' | 'none' | null;
  cpus?: number;
  memoryBytes?: number;
}

/** One `artifacts` entry (config.py:542-625): a path in the agent's environment, carried to the verifier at the same path. */
export interface HarborArtifact {
  /** Absolute (a relative one is taken from /, as `docker cp` does); no `..`. */
  source: string;
  /** Where Harbor keeps its copy under the trial's artifacts/ (host side only); null: mirrors `source`. */
  destination: string | null;
  /** Patterns left out of a folder (Harbor passes them to tar --exclude). */
  exclude: string[];
}

/** One [[verifier.collect]] hook (config.py:628-659), for the agent's container ("main"); best-effort: a failure is only noted (trial.py:788-818). */
export interface HarborCollect {
  command: string;
  /** timeout_sec, Harbor's default 60. */
  timeoutSec: number;
  /** Who runs it; absent: the container's default user. */
  user?: string;
}
