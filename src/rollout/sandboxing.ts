import path from 'node:path';
import {
  DEFAULT_LIMITS,
  fixedPlacement,
  openJail,
  sandboxInsidePaths,
  type Bind,
  type InsidePaths,
  type Jail,
  type NetworkMode,
  type SandboxSettings,
} from '../sandbox/index.js';
import { nodePrefix } from '../sandbox/runtime-mounts.js';
import type { RolloutConfig } from './config.js';
import type { RolloutTask } from './task-file.js';

/**
 * Which sandbox each of a sample's commands gets. The harness: the rollout's network (proxy-only
 * unless the rollout or its task says `host`). Setup: the same file system, the task's
 * `setup_network` (default host: `npm ci` needs it). Evaluator: no network at all, plus the task
 * file's folder read-only (hidden checkers), which no earlier stage ever sees. Polar's own git on a
 * workspace the agent had: no network, nothing else writable.
 */
export function sandboxSettings(config: RolloutConfig, bwrap: string): SandboxSettings {
  return {
    kind: config.sandbox,
    bwrap,
    network: config.network ?? 'proxy-only',
    limits: config.limits ?? DEFAULT_LIMITS,
    extraReadOnly: config.sandboxReadOnly ?? [],
  };
}

/**
 * A Harbor task's verifier: the host network where task.toml allows the internet
 * ([environment].allow_internet = true, network_mode = "public", or [verifier].network_mode), none
 * where it forbids it. Where it does not say (Harbor's default is public), the rollout's --network
 * decides: host gives Harbor's default, proxy-only (polar's) gives none, like every evaluator,
 * since the agent's code runs under test.sh.
 */
export function verifierNetwork(settings: SandboxSettings, task: RolloutTask): 'host' | 'none' {
  const asked = task.harbor?.verifierNetwork ?? null;
  if (asked !== null) return asked === 'public' ? 'host' : 'none';
  return settings.network === 'host' ? 'host' : 'none';
}

export function harnessNetwork(settings: SandboxSettings, task: RolloutTask): NetworkMode {
  if (settings.kind === 'none') return 'host';
  // A Harbor task that forbids the internet keeps its harness to the proxy even under --network host.
  if (task.harbor?.agentNetwork === 'none') return 'proxy-only';
  return task.network === 'host' ? 'host' : settings.network;
}

/**
 * Opens the sandbox for one setup command in `cwd`, mounted where the harness will see it (the fixed
 * workspace path, `workspace`): what setup writes with its own path in it (a virtualenv's scripts)
 * still works for the agent, and reads the same in every sample.
 */
export function setupSandbox(settings: SandboxSettings, task: RolloutTask, inside: InsidePaths | null): (cwd: string) => Promise<Jail> {
  const cwdInside = task.harbor ? undefined : (inside?.workspace ?? undefined);
  return (cwd) =>
    openJail(settings, {
      cwd,
      network: task.setup_network === 'none' ? 'none' : 'host',
      ...(cwdInside ? { cwdInside } : {}),
      // The private home (and polar's install, and the time zone) fixed too: what setup writes there names no host folder.
      ...(inside ? fixedPlacement(inside) : {}),
    });
}

/**
 * Opens the sandbox for one evaluator command (or polar's git) in `cwd`, at the fixed workspace path
 * too: what the agent built there with its path in it (an editable install, a virtualenv) still
 * resolves when the evaluator runs it.
 */
export function evaluatorSandbox(
  settings: SandboxSettings,
  tasksDir: string | null,
  inside: InsidePaths | null,
): (cwd: string, binds?: readonly Bind[]) => Promise<Jail> {
  return (cwd, binds) =>
    openJail(settings, {
      cwd,
      network: 'none',
      readOnly: tasksDir ? [tasksDir] : [],
      ...(inside ? { cwdInside: inside.workspace, ...fixedPlacement(inside) } : {}),
      // polar's own copy of the baseline repository, for the agent's diff (workspace.ts captureDiff).
      ...(binds && binds.length > 0 ? { binds } : {}),
    });
}

/** What a rollout mounts into its sandboxes besides the host view. */
export interface RolloutMounts {
  /** The task file's folder, mounted read-only for evaluators (hidden checkers). */
  tasksDir: string | null;
  /** A harness binary given by path (`--harness-bin`). */
  harnessBin?: string | null | undefined;
  /** A Node runtime given by path (`--node`). */
  nodeBin?: string | null | undefined;
}

/**
 * The fixed paths every sandboxed command of a rollout sees its workspace and home at
 * (sandbox/fixed-paths.ts): the harness, setup, the evaluator and polar's git alike, and the
 * first-prompt probe, all from this one computation. Every host path the rollout mounts counts as
 * taken: a task folder at /workspace (a tasks file in an NGC container's working directory), mounted
 * under the sample's workspace, would let the agent's files stand in for the hidden checkers. Null
 * without a sandbox (host paths).
 */
export function rolloutInsidePaths(settings: SandboxSettings, mounts: RolloutMounts): InsidePaths | null {
  if (settings.kind === 'none') return null;
  return sandboxInsidePaths([
    ...settings.extraReadOnly,
    ...(mounts.tasksDir ? [path.resolve(mounts.tasksDir)] : []),
    ...(mounts.harnessBin ? [path.resolve(mounts.harnessBin)] : []),
    ...(mounts.nodeBin ? [nodePrefix(path.resolve(mounts.nodeBin))] : []),
  ]);
}
