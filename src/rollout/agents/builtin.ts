import { StageError } from '../stage-error.js';
import type { AgentCommandEnd, SampleEnvironment } from '../environments/types.js';
import { resolveEnv } from '../harbor/env.js';
import type { RolloutTask } from '../task-file.js';

/** The agents polar runs without a model: Harbor's `oracle` (solution/solve.sh) and `nop` (nothing). */
export const BUILTIN_AGENTS = ['oracle', 'nop'] as const;
export type BuiltinAgent = (typeof BUILTIN_AGENTS)[number];

export function isBuiltinAgent(name: string): name is BuiltinAgent {
  return (BUILTIN_AGENTS as readonly string[]).includes(name);
}

/**
 * RUNNING for a built-in agent, in the sample's environment: the oracle runs solution/solve.sh in the
 * agent's place (Harbor's agents/oracle.py:93-124: solution/ at /solution, its output in
 * /logs/agent/oracle.txt, [solution].env, under the agent's timeout); `nop` does nothing
 * (agents/nop.py:25-31). No model: its network is the task's, or none at all.
 */
export async function runBuiltinAgent(
  agent: BuiltinAgent,
  task: RolloutTask,
  environment: SampleEnvironment,
  env: Record<string, string>,
  network: 'host' | 'none',
  timeoutMs: number,
): Promise<AgentCommandEnd> {
  if (agent === 'nop') return { status: 'completed', exitCode: 0, limit: null };
  const trial = task.harbor;
  if (!trial) throw new StageError('run', `--harness ${agent} runs Harbor tasks only (a task folder with solution/ and tests/)`);
  if (!trial.solutionDir) throw new StageError('run', `task ${trial.name} has no solution/ for the oracle`);
  return environment.runAgentCommand('bash /solution/solve.sh > /logs/agent/oracle.txt 2>&1', {
    env: { ...env, DEBIAN_FRONTEND: 'noninteractive', ...resolveEnv(trial.solutionEnv, 'run') },
    timeoutMs,
    readOnly: [{ source: trial.solutionDir, dest: '/solution' }],
    network,
  });
}
