import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RolloutConfig } from '../config.js';
import { runRollout } from '../run-rollout.js';
import type { RolloutTask } from '../task-file.js';
import { openStore } from '../../store/open.js';
import type { SampleRow } from '../../store/rollouts.js';
import { topReward } from './trial.js';

/** One task's validation: the oracle must reach the top reward, nop must earn none. */
export interface TaskCheck {
  task: string;
  name: string;
  ok: boolean;
  /** Why the task is broken (empty when ok). */
  problems: string[];
  oracle: AgentRun;
  nop: AgentRun;
}

export interface AgentRun {
  outcome: string;
  reward: number | null;
  rewards: Record<string, number> | null;
  error: string | null;
  /** The stage an error ended the sample in (init: before the agent ran). */
  errorStage: string | null;
  /** The verifier's output (bounded), for a reader working out why. */
  output: string | null;
}

/**
 * `polar tasks check`: every task once with `oracle` and once with `nop`, as rollouts (the same
 * stages, sandbox and verifier a training run uses) into a scratch database. A task is broken when
 * the oracle ends without its top reward (1, or [metadata].max_reward) or in error, or
 * when nop ends with any reward above 0 (a task that pays for nothing teaches nothing).
 */
export async function checkTasks(
  tasks: readonly RolloutTask[],
  base: Pick<RolloutConfig, 'sandbox' | 'limits' | 'timeoutSec' | 'initWorkers' | 'postWorkers' | 'concurrency'> & {
    network?: RolloutConfig['network'];
    environment?: RolloutConfig['environment'];
  },
  onNotice?: (line: string) => void,
): Promise<TaskCheck[]> {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-tasks-check-'));
  const dbPath = path.join(scratch, 'check.db');
  try {
    const runs: Record<'oracle' | 'nop', Map<string, AgentRun>> = { oracle: new Map(), nop: new Map() };
    for (const agent of ['oracle', 'nop'] as const) {
      const config: RolloutConfig = {
        harness: agent,
        upstream: { url: 'none', kind: 'vllm' },
        model: null,
        samples: 1,
        outDir: path.join(scratch, agent),
        accept: null,
        keepWorkspaces: false,
        ...base,
      };
      const summary = await runRollout({
        dbPath,
        tasks,
        config,
        // The host notices are the same for both runs: said once.
        onNotice: (line) => {
          if (agent === 'oracle' || !line.startsWith('notice: task ')) onNotice?.(line);
        },
      });
      const store = await openStore(dbPath);
      try {
        for (const s of store.rollouts.samples(summary.rolloutId)) runs[agent].set(s.taskId, agentRun(s));
      } finally {
        await store.closeAsync();
      }
    }
    return tasks.map((t) => {
      const oracle = runs.oracle.get(t.id)!;
      const nop = runs.nop.get(t.id)!;
      const problems: string[] = [];
      const top = topReward(t.metadata);
      // A verifier that installs its test runner needs the network Harbor gives by default.
      const silent =
        t.harbor && t.harbor.verifierNetwork === null && base.network !== 'host'
          ? " (task.toml does not say whether it may use the internet, so its verifier had no network; --network host gives Harbor's default)"
          : '';
      const firstLine = (run: AgentRun) => run.error?.split('\n')[0] ?? null;
      if (oracle.errorStage === 'init' && nop.errorStage === 'init' && firstLine(oracle) !== null && firstLine(oracle) === firstLine(nop)) {
        // The same failure before either agent ran (an image that cannot be built): said once.
        problems.push(`neither the oracle nor nop could run: ${firstLine(oracle)}`);
      } else {
        if (oracle.outcome === 'error' || oracle.reward === null)
          problems.push(`the oracle ended in ${oracle.outcome}${oracle.error ? `: ${firstLine(oracle)}` : ''}${silent}`);
        else if (oracle.reward < top) problems.push(`the oracle (solution/solve.sh) earned ${oracle.reward}, not the top reward ${top}`);
        if (nop.reward !== null && nop.reward > 0) problems.push(`doing nothing (nop) already earns ${nop.reward}`);
        if (nop.outcome === 'error') problems.push(`the verifier fails on the untouched workspace (nop): ${firstLine(nop) ?? 'error'}`);
      }
      return { task: t.id, name: t.harbor?.name ?? t.id, ok: problems.length === 0, problems, oracle, nop };
    });
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

function agentRun(s: SampleRow): AgentRun {
  const ev = s.evaluator ?? {};
  const rewards = typeof ev.rewards === 'object' && ev.rewards !== null ? (ev.rewards as Record<string, number>) : null;
  const output = typeof ev.output === 'string' ? ev.output : s.error?.includes('its output:') ? s.error.slice(s.error.indexOf('its output:') + 12) : null;
  return { outcome: s.status, reward: s.reward, rewards, error: s.error, errorStage: s.errorStage, output };
}
