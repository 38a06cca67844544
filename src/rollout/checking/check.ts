import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RolloutConfig } from '../config.js';
import { runRollout } from '../run-rollout.js';
import type { RolloutTask } from '../task-file.js';
import { openStore } from '../../store/open.js';
import type { SampleRow } from '../../store/rollouts.js';
import { FORGERIES, type ForgeryPlace } from '../forgeries/index.js';
import { judgeTask, NO_SOLUTION, settleVerdict, type Verdict } from './verdict.js';

/**
 * One task's validation: the oracle must reach the top reward, nop and every forgery must earn
 * none, and no forgery may end its sample in error. A Harbor task folder or a JSONL task alike.
 */
export interface TaskCheck {
  task: string;
  name: string;
  /**
   * valid; broken (a run of it as written says it is wrong); unverifiable (this machine could not
   * tell, or could not run it as written); unsupported (it needs what polar does not implement yet).
   */
  verdict: Verdict;
  /** The verdict is valid. */
  ok: boolean;
  /** Why the task is broken (empty unless broken). */
  problems: string[];
  /** Why it could not be checked here, each with the way out (empty unless unverifiable, or broken too). */
  unverifiable: string[];
  /** The Harbor features it needs that polar does not implement yet, by name (empty unless unsupported, or broken too). */
  unsupported: string[];
  oracle: AgentRun;
  nop: AgentRun;
  /** The forgeries its verifier paid more than nop's reward: the task can be won without the work. */
  hackable: string[];
  /** The forgeries whose sample ended `error` where nop's did not: the agent can leave its GRPO group. */
  escapes: string[];
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
  /** Its metrics, when the verifier reported several and none is the reward without --reward-key. */
  needsRewardKey: string[] | null;
  /** Why its verifier scored 0 without a verdict (killed, timed out, no reward). */
  forfeit: string | null;
  /** The tails of the files its verifier wrote under /logs/verifier besides the rewards (where it earned 0). */
  verifierFiles: Record<string, string> | null;
  /** Where polar's lack of network can explain the outcome (network-hint.ts). */
  networkHint: string | null;
}

/**
 * `polar tasks check`: every task once with `oracle` (a JSONL task only where it has "solution")
 * and once with `nop`, as rollouts (the same
 * stages, sandbox and verifier a training run uses) into a scratch database. Then, unless `forge` is
 * false, every forgery that applies to a task runs against it the same way (`forge:<name>`,
 * rollout/forgeries/): a verifier that pays a forgery more than nop is hackable, and a forger whose
 * sample ends `error` where nop's did not escapes its GRPO group (both broken). Each task gets a
 * verdict (verdict.ts): broken where the evidence says the task is wrong (the oracle ran and missed
 * its top reward, 1 or [metadata].max_reward; nop earned; hackable), unverifiable where this machine
 * could not tell (an image it cannot build or pull, a verifier that needs the network it did not
 * have, a start that failed for the machine's reason), each with the way out; else valid.
 */
export async function checkTasks(
  tasks: readonly RolloutTask[],
  base: Pick<RolloutConfig, 'sandbox' | 'limits' | 'timeoutSec' | 'initWorkers' | 'postWorkers' | 'concurrency'> & {
    network?: RolloutConfig['network'];
    environment?: RolloutConfig['environment'];
    rewardKey?: RolloutConfig['rewardKey'];
    rewardRange?: RolloutConfig['rewardRange'];
    /** A JSONL task file's path: its folder is $POLAR_TASKS_DIR (hidden checkers), as in a rollout of it. */
    tasksFile?: string;
  },
  onNotice?: (line: string) => void,
  forge = true,
): Promise<TaskCheck[]> {
  if (tasks.length === 0) return [];
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
      ...withoutFile(base),
    };
    const summary = await runRollout({
      dbPath,
      tasks: subset,
      ...(base.tasksFile ? { tasksFile: base.tasksFile } : {}),
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
    // A JSONL task without "solution" has no oracle to run: its verdict says so (NO_SOLUTION).
    const solvable = tasks.filter((t) => t.harbor !== undefined || t.solution !== undefined);
    const oracleRuns = solvable.length > 0 ? await runAgent('oracle', solvable) : new Map<string, SampleRow>();
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
    const ctx = { environment: base.environment ?? 'host' } as const;
    return tasks.map((t) => {
      const oracleRun = oracleRuns.get(t.id);
      const oracle = oracleRun ? agentRun(oracleRun) : noOracle(t);
      const nop = agentRun(nopRuns.get(t.id)!);
      const judged = judgeTask(t, oracle, nop, {
        ...ctx,
        verifierNetwork: verifierNetwork(base.network, t),
        ...(base.rewardRange ? { rewardRange: base.rewardRange } : {}),
      });
      const { problems } = judged;
      const forgeries: Record<string, ForgeryRun> = {};
      const hackable: string[] = [];
      const escapes: string[] = [];
      for (const [name, runs] of forged) {
        const sample = runs.get(t.id);
        if (!sample) continue;
        const run = agentRun(sample);
        forgeries[name] = { outcome: run.outcome, reward: run.reward, forfeit: run.forfeit, error: run.error?.split('\n')[0] ?? null };
        if (run.reward !== null && run.reward > (nop.reward ?? 0)) {
          hackable.push(name);
          problems.push(`hackable: forge:${name} earns ${run.reward} without solving it (${FORGERIES[name]!.description})`);
        } else if (run.outcome === 'error' && run.errorStage !== 'init' && nop.outcome !== 'error') {
          // An error drops the sample from its GRPO group instead of scoring it 0 (the escapes of
          // forgeries/escapes.ts): a policy that would score 0 is spared the penalty. The agent caused
          // it, so it is the task's pipeline that is wrong here, not the machine.
          escapes.push(name);
          problems.push(
            `escapes its group: forge:${name} ends error (${firstLine(run.error) ?? 'error'}) where it must score 0 (${FORGERIES[name]!.description})`,
          );
        }
      }
      // A forgery that wins is evidence however the task ran: training runs it the same way (verdict.ts settleVerdict).
      const settled = settleVerdict({ ...judged, problems });
      const verdict: Verdict = settled.verdict;
      return {
        task: t.id,
        name: t.harbor?.name ?? t.id,
        verdict,
        ok: verdict === 'valid',
        problems: settled.problems,
        unverifiable: settled.unverifiable,
        unsupported: settled.unsupported,
        oracle,
        nop,
        hackable,
        escapes,
        forgeries,
      };
    });
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/** The oracle of a JSONL task without "solution": not run, and said so (verdict.ts reads `outcome`). */
function noOracle(t: RolloutTask): AgentRun {
  return {
    outcome: NO_SOLUTION,
    reward: null,
    rewards: null,
    error: `task ${t.id} has no "solution" for the oracle`,
    errorStage: null,
    output: null,
    needsRewardKey: null,
    forfeit: null,
    verifierFiles: null,
    networkHint: null,
  };
}

function withoutFile<T extends { tasksFile?: string }>(base: T): Omit<T, 'tasksFile'> {
  const { tasksFile: _, ...rest } = base;
  return rest;
}

function firstLine(text: string | null): string | null {
  return text?.split('\n')[0] ?? null;
}

function agentRun(s: SampleRow): AgentRun {
  const ev = s.evaluator ?? {};
  const rewards = typeof ev.rewards === 'object' && ev.rewards !== null ? (ev.rewards as Record<string, number>) : null;
  const output = typeof ev.output === 'string' ? ev.output : s.error?.includes('its output:') ? s.error.slice(s.error.indexOf('its output:') + 12) : null;
  const needsRewardKey = Array.isArray(ev.needs_reward_key) ? (ev.needs_reward_key as string[]) : null;
  const files = typeof ev.verifier_files === 'object' && ev.verifier_files !== null ? (ev.verifier_files as Record<string, string>) : null;
  return {
    outcome: s.status,
    reward: s.reward,
    rewards,
    error: s.error,
    errorStage: s.errorStage,
    output,
    needsRewardKey,
    forfeit: typeof ev.forfeit === 'string' ? ev.forfeit : null,
    verifierFiles: files,
    networkHint: typeof ev.network_hint === 'string' ? ev.network_hint : null,
  };
}

/** The verifier's network in these runs, as rollout/sandboxing.ts decides it (its settings need a bwrap path this does not). */
function verifierNetwork(network: RolloutConfig['network'], task: RolloutTask): 'host' | 'none' {
  const asked = task.harbor?.verifierNetwork ?? null;
  if (asked !== null) return asked === 'public' ? 'host' : 'none';
  return network === 'host' ? 'host' : 'none';
}
