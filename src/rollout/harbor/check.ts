import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RolloutConfig } from '../config.js';
import { runRollout } from '../run-rollout.js';
import type { RolloutTask } from '../task-file.js';
import { openStore } from '../../store/open.js';
import type { SampleRow } from '../../store/rollouts.js';
import { FORGERIES, type ForgeryPlace } from '../forgeries/index.js';
import { topReward } from './trial.js';

/** One task's validation: the oracle must reach the top reward, nop and every forgery must earn none. */
export interface TaskCheck {
  task: string;
  name: string;
  ok: boolean;
  /** Why the task is broken (empty when ok). */
  problems: string[];
  oracle: AgentRun;
  nop: AgentRun;
  /** The forgeries its verifier paid more than nop's reward: the task can be won without the work. */
  hackable: string[];
  /** Each forgery tried on it (those that do not apply are not), by name. */
  forgeries: Record<string, ForgeryRun>;
}

/** A forger's run, briefly: what it earned, and why a verifier that was cut short scored 0. */
export interface ForgeryRun {
  outcome: string;
  reward: number | null;
  forfeit: string | null;
  error: string | null;
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
 * when nop ends with any reward above 0 (a task that pays for nothing teaches nothing). Then, unless
 * `forge` is false, every forgery that applies to a task runs against it the same way (`forge:<name>`,
 * rollout/forgeries/): a verifier that pays a forgery more than nop is hackable, and the task broken.
 */
export async function checkTasks(
  tasks: readonly RolloutTask[],
  base: Pick<RolloutConfig, 'sandbox' | 'limits' | 'timeoutSec' | 'initWorkers' | 'postWorkers' | 'concurrency'> & {
    network?: RolloutConfig['network'];
    environment?: RolloutConfig['environment'];
  },
  onNotice?: (line: string) => void,
  forge = true,
): Promise<TaskCheck[]> {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-tasks-check-'));
  const dbPath = path.join(scratch, 'check.db');
  /** One built-in agent on the given tasks, one sample each: its run per task id. */
  const runAgent = async (agent: string, subset: readonly RolloutTask[]): Promise<Map<string, SampleRow>> => {
    const config: RolloutConfig = {
      harness: agent,
      upstream: { url: 'none', kind: 'vllm' },
      model: null,
      samples: 1,
      outDir: path.join(scratch, agent.replace(':', '-')),
      accept: null,
      keepWorkspaces: false,
      ...base,
    };
    const summary = await runRollout({
      dbPath,
      tasks: subset,
      config,
      // The host notices are the same for every run: said once, with the oracle's.
      onNotice: (line) => {
        if (agent === 'oracle' || !line.startsWith('notice: task ')) onNotice?.(line);
      },
    });
    const store = await openStore(dbPath);
    try {
      return new Map(store.rollouts.samples(summary.rolloutId).map((s) => [s.taskId, s]));
    } finally {
      await store.closeAsync();
    }
  };
  try {
    const oracleRuns = await runAgent('oracle', tasks);
    const nopRuns = await runAgent('nop', tasks);
    // Forgery by forgery (a rollout has one harness), each on the tasks it applies to, at the same
    // concurrency; not where nop could not even start (an image that cannot be built).
    const place: ForgeryPlace = { environment: base.environment ?? 'host' };
    const started = tasks.filter((t) => nopRuns.get(t.id)?.errorStage !== 'init');
    const forged = new Map<string, Map<string, SampleRow>>();
    if (forge)
      for (const f of Object.values(FORGERIES)) {
        const subset = started.filter((t) => f.applies(t, place));
        if (subset.length > 0) forged.set(f.name, await runAgent(`forge:${f.name}`, subset));
      }
    return tasks.map((t) => {
      const oracle = agentRun(oracleRuns.get(t.id)!);
      const nop = agentRun(nopRuns.get(t.id)!);
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
      const forgeries: Record<string, ForgeryRun> = {};
      const hackable: string[] = [];
      for (const [name, runs] of forged) {
        const sample = runs.get(t.id);
        if (!sample) continue;
        const run = agentRun(sample);
        const lost = sample.evaluator?.forfeit;
        forgeries[name] = { outcome: run.outcome, reward: run.reward, forfeit: typeof lost === 'string' ? lost : null, error: firstLine(run) };
        if (run.reward !== null && run.reward > (nop.reward ?? 0)) {
          hackable.push(name);
          problems.push(`hackable: forge:${name} earns ${run.reward} without solving it (${FORGERIES[name]!.description})`);
        }
      }
      return { task: t.id, name: t.harbor?.name ?? t.id, ok: problems.length === 0, problems, oracle, nop, hackable, forgeries };
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
