import type { Healthcheck } from '../boxes/types.js';
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
   * [environment].build_timeout_sec (Harbor's default 600, config.py:325): the image build's own
   * limit, before and apart from the agent's budget (absent: 600).
   */
  buildTimeoutSec?: number;
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
  /** [environment.healthcheck]: run until it passes once the task's container starts, before the agent (features.ts). */
  healthcheck?: HarborHealthcheck;
  /** The Dockerfile's ENTRYPOINT (its last stage): the image's own processes (services), which only a container runs. */
  entrypoint?: string;
  /** [[steps]]: a multi-step task (steps.ts); the task's prompt is the first step's instruction. */
  steps?: HarborStep[];
  /** multi_step_reward_strategy (config.py:691-721): how the steps' rewards make the sample's; `mean` when unset. */
  rewardStrategy?: 'mean' | 'final';
  /** [environment].gpus (config.py:341): GPUs the task asks for; absent or 0: none. */
  gpus?: number;
  /** [environment].gpu_types (config.py:342-346): the GPU types it accepts. */
  gpuTypes?: string[];
  /** [[environment.mcp_servers]] (config.py:352, MCPServerConfig :519-539): MCP servers Harbor gives the agent. */
  mcpServers?: HarborMcpServer[];
  /** [environment].env (config.py:353-357): variables Harbor sets for every command in the environment (base.py:218-221). */
  environmentEnv?: Record<string, string>;
  /** [environment].os = "windows" (config.py:334-340): a Windows container. */
  windows?: boolean;
  /** [environment].tpu (TpuSpec, config.py:281-322): a TPU slice, as `type topology`. */
  tpu?: string;
  /** [environment].skills_dir (config.py:358-362): copied to the agent's skills folder. */
  skillsDir?: string;
  /**
   * `network_mode = "allowlist"` with its `allowed_hosts` (config.py:35-176), by table ([environment],
   * [agent], [verifier]): polar cannot reach hosts by name from its sandbox, so such a phase runs
   * with no network (agentNetwork / verifierNetwork say `none`), the strictest reading of the list.
   */
  allowlists?: HarborAllowlist[];
  /**
   * Keys task.toml sets that Harbor's models do not define: pydantic ignores them (no model sets
   * `extra`, models/task/config.py), and so does polar, saying each once ("task.toml, field …").
   */
  ignored?: string[];
}

/** One `network_mode = "allowlist"` (config.py:35-41): the table that says it and the hosts it allows. */
export interface HarborAllowlist {
  table: string;
  hosts: string[];
}

/** One [[environment.mcp_servers]] entry (MCPServerConfig, config.py:519-539). */
export interface HarborMcpServer {
  name: string;
  /** `http` is read as `streamable-http` (config.py:528-531). */
  transport: 'stdio' | 'sse' | 'streamable-http';
  /** Required for sse and streamable-http. */
  url?: string;
  /** Required for stdio. */
  command?: string;
  args: string[];
}

/**
 * One of a multi-step task's steps (StepConfig, config.py:662-689; layout paths.py:140-189), run in
 * order in one environment (trial/multi_step.py:36-59): the agent gets only its instruction, then
 * its verifier runs.
 */
export interface HarborStep {
  name: string;
  /** steps/<name>/instruction.md, canary lines stripped (task.py:188-192). */
  instruction: string;
  /** steps/<name>/tests/, copied over tests/ at /tests (verifier.py:150-164); null: tests/ alone. */
  testsDir: string | null;
  /** steps/<name>/solution/ for the oracle, else the task's solution/ (agents/oracle.py:52-74). */
  solutionDir: string | null;
  /** [steps.agent].timeout_sec, else the task's [agent] one (multi_step.py:581-595); null: the rollout's. */
  agentTimeoutSec: number | null;
  /** [steps.verifier].timeout_sec, else the task's (multi_step.py:597-607). */
  verifierTimeoutSec: number;
  /** The task's [verifier].env with the step's over it (verifier.py:195-199). */
  verifierEnv: Record<string, string>;
  /** min_reward: below it (a missing metric is -inf) the remaining steps are not run (multi_step.py:180-210, :248-263). */
  minReward: Record<string, number> | null;
  /** steps/<name>/workdir/: put into the workdir before the step, then its setup.sh run there (multi_step.py:513-548). */
  workdirDir: string | null;
  /** The step's healthcheck, after its setup and before its agent, besides the task's (config.py:675-682, multi_step.py:550-562). */
  healthcheck?: HarborHealthcheck;
  /** The step's own `artifacts` (config.py:683-688), appended to the task's for this step's collection. */
  artifacts: HarborArtifact[];
  /**
   * What the step sets that polar does not run per step yet (a verifier environment of its own, its
   * own users, network or collect hooks), each named: the task loads, and its samples refuse it.
   */
  unsupported: string[];
}

/**
 * [environment.healthcheck] (Harbor's HealthcheckConfig, models/task/config.py:250-278), run as
 * environments/base.py:1154-1206 does: `command` until it exits 0; failures within `startPeriodSec`
 * of the first attempt do not count (retried every `startIntervalSec`); after it, `retries`
 * consecutive failures (each `intervalSec` apart) fail the environment.
 */
/** Harbor's [environment.healthcheck] (and a step's): the box layer's healthcheck. */
export type HarborHealthcheck = Healthcheck;

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
  /** The verifier environment's build_timeout_sec (absent: 600). */
  buildTimeoutSec?: number;
}

/** One `artifacts` entry (config.py:542-625): a path in the agent's environment, carried to the verifier at the same path. */
export interface HarborArtifact {
  /** Absolute (a relative one is taken from /, as `docker cp` does); no `..`. */
  source: string;
  /** Where Harbor keeps its copy under the trial's artifacts/ (host side only); null: mirrors `source`. */
  destination: string | null;
  /** Patterns left out of a folder (Harbor passes them to tar --exclude). */
  exclude: string[];
  /** The compose service it is taken from (config.py:550-561); absent or "main": the agent's container. */
  service?: string;
}

/** One [[verifier.collect]] hook (config.py:628-659), for the agent's container ("main"); best-effort: a failure is only noted (trial.py:788-818). */
export interface HarborCollect {
  command: string;
  /** timeout_sec, Harbor's default 60. */
  timeoutSec: number;
  /** Who runs it; absent: the container's default user. */
  user?: string;
  /** The compose service it runs in (config.py:637-640); absent or "main": the agent's container. */
  service?: string;
}
