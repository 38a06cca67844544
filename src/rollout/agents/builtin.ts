import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { StageError } from '../stage-error.js';
import { FORGERIES } from '../forgeries/index.js';
import type { AgentCommandEnd, SampleEnvironment } from '../environments/types.js';
import { resolveEnv } from '../harbor/env.js';
import type { RolloutTask } from '../task-file.js';

/**
 * The agents polar runs without a model: Harbor's `oracle` (solution/solve.sh) and `nop` (nothing),
 * and `forge:<name>`, a scripted forger trying one of the known ways to a reward without the work
 * (rollout/forgeries/).
 */
export const BUILTIN_AGENTS = ['oracle', 'nop'] as const;
export type BuiltinAgent = (typeof BUILTIN_AGENTS)[number] | `forge:${string}`;

/** The `--harness` names of the forgers, one per forgery. */
export const FORGE_AGENTS: readonly string[] = Object.keys(FORGERIES).map((name) => `forge:${name}`);

export function isBuiltinAgent(name: string): name is BuiltinAgent {
  return (BUILTIN_AGENTS as readonly string[]).includes(name) || FORGE_AGENTS.includes(name);
}

/** Where a forger's script is shown to it, read-only, for the length of its run. */
const FORGE_DIR = '/polar-forge';

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
  if (agent.startsWith('forge:')) return runForger(agent.slice('forge:'.length), task, environment, env, timeoutMs);
  if (!trial.solutionDir) throw new StageError('run', `task ${trial.name} has no solution/ for the oracle`);
  return environment.runAgentCommand('bash /solution/solve.sh > /logs/agent/oracle.txt 2>&1', {
    env: { ...env, DEBIAN_FRONTEND: 'noninteractive', ...resolveEnv(trial.solutionEnv, 'run') },
    timeoutMs,
    readOnly: [{ source: trial.solutionDir, dest: '/solution' }],
    network,
  });
}

/**
 * A forger: the forgery's bash in the agent's place, as a policy with a shell tool would type it
 * (its WORKDIR, no network: no forgery needs one; its output in /logs/agent/forge.txt). No /solution: it
 * gets what any agent gets, and its script.
 */
async function runForger(
  name: string,
  task: RolloutTask,
  environment: SampleEnvironment,
  env: Record<string, string>,
  timeoutMs: number,
): Promise<AgentCommandEnd> {
  const forgery = FORGERIES[name];
  if (!forgery) throw new StageError('run', `--harness forge:${name}: no such forgery (known: ${Object.keys(FORGERIES).join(', ')})`);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'polar-forge-'));
  try {
    // Readable by the task's agent user too, in a container it is copied into.
    await fs.chmod(dir, 0o755);
    await fs.writeFile(path.join(dir, 'forge.sh'), forgery.script(task), { mode: 0o644 });
    return await environment.runAgentCommand(`bash ${FORGE_DIR}/forge.sh > /logs/agent/forge.txt 2>&1`, {
      env,
      timeoutMs,
      readOnly: [{ source: dir, dest: FORGE_DIR }],
      network: 'none',
    });
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
