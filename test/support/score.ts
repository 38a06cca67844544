import { DEFAULT_LIMITS, type SandboxSettings } from '../../src/sandbox/index.js';
import type { EnvironmentDeps } from '../../src/rollout/environments/deps.js';
import { hostEnvironment } from '../../src/rollout/environments/host.js';
import { evaluate } from '../../src/rollout/evaluators/registry.js';
import type { Evaluation } from '../../src/rollout/evaluators/types.js';
import type { RolloutTask } from '../../src/rollout/task-file.js';
import type { PreparedWorkspace } from '../../src/rollout/workspace.js';

/** No sandbox: the host's own paths (JSONL tasks only). */
export const UNSANDBOXED: SandboxSettings = { kind: 'none', bwrap: '', network: 'host', limits: DEFAULT_LIMITS, extraReadOnly: [] };

/**
 * Scores a workspace with its task's evaluator in the host environment, as POSTRUN does: the
 * registry picks the evaluator, the host environment runs its commands.
 */
export function scoreOnHost(
  task: RolloutTask,
  workspace: PreparedWorkspace,
  diff: string,
  opts: {
    scratch: string;
    env: Record<string, string>;
    tasksDir?: string | null;
    sandbox?: SandboxSettings;
    sessionId?: string;
    traceCount?: number;
    rewardKey?: string | null;
  },
): Promise<Evaluation> {
  const deps: EnvironmentDeps = {
    sandbox: opts.sandbox ?? UNSANDBOXED,
    inside: null,
    tasksDir: opts.tasksDir ?? null,
    proxySocket: null,
    stateDir: opts.scratch,
    modelHarness: false,
    harnessBin: null,
    nodeBin: null,
    scratch: opts.scratch,
    onNotice: () => undefined,
  };
  const sessionId = opts.sessionId ?? 'ses-test';
  const environment = hostEnvironment(deps, { task, sampleId: 'test', sessionId, dir: workspace.dir });
  return evaluate({
    task,
    workspace,
    diff,
    sessionStatus: 'completed',
    sessionId,
    traceCount: opts.traceCount ?? 1,
    env: { ...opts.env, POLAR_TASK_ID: task.id, POLAR_SESSION_ID: sessionId, ...(opts.tasksDir ? { POLAR_TASKS_DIR: opts.tasksDir } : {}) },
    verification: environment.verification,
    verifierNetwork: 'none',
    rewardKey: opts.rewardKey ?? null,
    tasksDir: opts.tasksDir ?? null,
    scratch: opts.scratch,
    secrets: [],
  });
}
