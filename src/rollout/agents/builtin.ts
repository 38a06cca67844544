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

/**
 * RUNNING for a built-in agent, in the sample's environment: the oracle runs solution/solve.sh in the
 * agent's place (Harbor's agents/oracle.py:93-124: solution/ at /solution, its output in
 * /logs/agent/oracle.txt, [solution].env, under the agent's timeout), or a JSONL task's "solution"
 * commands; `nop` does nothing (agents/nop.py:25-31); a forger runs its forgery's script. Each in
 * the task's own workspace, Harbor or JSONL. No model: its network is the task's, or none at all.
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
  if (agent.startsWith('forge:')) return runForger(agent.slice('forge:'.length), task, environment, env, timeoutMs);
  const trial = task.harbor;
  if (!trial) return runSolution(task, environment, env, network, timeoutMs);
  if (!trial.solutionDir) throw new StageError('run', `task ${trial.name} has no solution/ for the oracle`);
  return environment.runAgentCommand('bash /solution/solve.sh > /logs/agent/oracle.txt 2>&1', {
    env: { ...env, DEBIAN_FRONTEND: 'noninteractive', ...resolveEnv(trial.solutionEnv, 'run') },
    timeoutMs,
    readOnly: [{ source: trial.solutionDir, dest: '/solution' }],
    network,
  });
}

/** Where a JSONL task's solution or a forger's script is shown, read-only, for the length of its run. */
const SCRIPT_DIR = '/polar-forge';

/**
 * The oracle of a JSONL task: its "solution" commands, as one bash script in the workspace (as
 * solve.sh runs in Harbor's WORKDIR; a command may span lines: a heredoc), its output in the
 * sandbox's private /tmp (a JSONL workspace has no /logs, and a file in the workspace would be part
 * of the diff). A task without one has no oracle: tasks check says so instead of running it.
 */
async function runSolution(
  task: RolloutTask,
  environment: SampleEnvironment,
  env: Record<string, string>,
  network: 'host' | 'none',
  timeoutMs: number,
): Promise<AgentCommandEnd> {
  if (!task.solution) throw new StageError('run', `task ${task.id} has no "solution" for the oracle`);
  return withScript(`${task.solution.join('\n')}\n`, 'solve.sh', (readOnly) =>
    environment.runAgentCommand(`bash ${SCRIPT_DIR}/solve.sh > /tmp/oracle.txt 2>&1`, { env, timeoutMs, readOnly, network }),
  );
}

/**
 * A forger: the forgery's bash in the agent's place, as a policy with a shell tool would type it
 * (its WORKDIR, or a JSONL task's workspace; no network: no forgery needs one; its output in
 * /logs/agent/forge.txt, or the private /tmp where the task has no /logs). No /solution: it gets
 * what any agent gets, and its script.
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
  const log = task.harbor ? '/logs/agent/forge.txt' : '/tmp/forge.txt';
  return withScript(forgery.script(task), 'forge.sh', (readOnly) =>
    environment.runAgentCommand(`bash ${SCRIPT_DIR}/forge.sh > ${log} 2>&1`, { env, timeoutMs, readOnly, network: 'none' }),
  );
}

/** A script in a temporary folder shown read-only at SCRIPT_DIR while `run` runs. */
async function withScript<T>(text: string, name: string, run: (readOnly: { source: string; dest: string }[]) => Promise<T>): Promise<T> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'polar-forge-'));
  try {
    // Readable by the task's agent user too, in a container it is copied into.
    await fs.chmod(dir, 0o755);
    await fs.writeFile(path.join(dir, name), text, { mode: 0o644 });
    return await run([{ source: dir, dest: SCRIPT_DIR }]);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
