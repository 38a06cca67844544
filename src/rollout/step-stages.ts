import fs from 'node:fs/promises';
import path from 'node:path';
import type { Evaluation } from './evaluators/types.js';
import { combinedEvaluation, mergeStepTests, type StepOutcome, stepsRefusal, stepTask, stopAfter } from './multi-step.js';
import type { HarborStep } from './harbor/types.js';
import type { Prepared, Ran, StageContext } from './stage-types.js';
import type { RolloutTask } from './task-file.js';
import { baseEnvironment } from '../harness/env.js';
import { harnessNetwork } from './sandboxing.js';
import { Forfeit, StageError } from './stage-error.js';

/**
 * A multi-step Harbor task in one sample (trial/multi_step.py:36-59, at the fork snapshot
 * 15735640198/harbor f276a3b): its steps in order in the sample's one environment. RUNNING runs
 * each step's agent with that step's instruction, and verifies every step but the last in place
 * (the environment's checkpoint: the agent's processes dead, its work copied out, the environment
 * kept for the next step); POSTRUN verifies the last after collect and makes the sample's reward
 * from the steps' (multi-step.ts). The harness's runs share the sample's session: each step's
 * calls are its traces.
 */

/** What the stages lend the steps: the agent once, the evaluator once, a failure recorded. */
export interface StepOps {
  runAgent(ctx: StageContext, p: Prepared, task: RolloutTask, timing: Record<string, number>, left: number): Promise<Ran | null>;
  evaluate(ctx: StageContext, r: Ran, task: RolloutTask, diff: string): Promise<Evaluation>;
  /** Ends the sample in error (a step's verifier could not run) and cleans up. */
  fail(ctx: StageContext, p: Prepared, err: unknown, timing: Record<string, number>): Promise<void>;
  interrupt(ctx: StageContext, p: Prepared): Promise<void>;
}

/**
 * RUNNING for a multi-step task. Each step's agent has its own [steps.agent].timeout_sec (the
 * first's is the task's timeout, load.ts), else the task's (steps.ts), else the rollout's --timeout
 * (multi_step.py:581-595), from when that agent starts. A step that
 * leaves no reward, or falls below its min_reward, ends the run of steps (:180-210).
 */
export async function runSteps(ctx: StageContext, p: Prepared, timing: Record<string, number>, ops: StepOps): Promise<Ran | null> {
  const steps = p.task.harbor!.steps!;
  // What polar does not run in a step yet (steps.ts) is refused before the first step, not run otherwise.
  const refused = stepsRefusal(p.task.harbor!);
  if (refused !== null) {
    await ops.fail(ctx, p, new StageError('init', refused), timing);
    return null;
  }
  const done: StepOutcome[] = [];
  let t = timing;
  for (let i = 0; i < steps.length; i++) {
    const step = steps[i]!;
    if (i > 0 && ctx.stopping()) {
      await ops.interrupt(ctx, p);
      return null;
    }
    const task = stepTask(p.task, step, p.task.harbor!.testsDir);
    // The step's setup and healthcheck are not its agent's time (multi_step.py:111-118 runs them
    // before _run_agent_phase starts the agent's clock, trial/trial.py:380-387).
    const readyStarted = Date.now();
    let cause: unknown;
    const unready = await readyStep(ctx, p, task, step).catch((err: Error) => {
      cause = err;
      return err instanceof StageError ? err.message : `step ${step.name}: ${err.message}`;
    });
    t = { ...t, steps_prepare_ms: (t.steps_prepare_ms ?? 0) + Date.now() - readyStarted };
    if (unready !== null) {
      // Before the first step nothing of the agent ran: the task (or this machine) failed, not the
      // agent. Later, the agent may have broken what the step needs: the step earns 0 and ends the
      // run of steps, as Harbor's step exception does (multi_step.py:79-83, :185-187).
      if (i === 0) {
        await ops.fail(ctx, p, new StageError('run', unready, { cause }), t);
        return null;
      }
      done.push({ name: step.name, evaluation: { reward: 0, traceRewards: null, record: { type: 'harbor', step: step.name, forfeit: unready } } });
      return { ...p, timing: t, sessionStatus: 'failed', exitCode: null, steps: { done, stopped: unready } };
    }
    const left = i === 0 ? p.agentTimeoutMs : (step.agentTimeoutSec ?? ctx.config.timeoutSec) * 1000;
    const ran = await ops.runAgent(ctx, p, task, t, left);
    if (!ran) return null;
    t = ran.timing;
    // A cap the agent hit (stage-error.ts Forfeit): the step earns 0 and ends the run of steps.
    const capped = (why: string): Ran => {
      done.push({ name: step.name, evaluation: { reward: 0, traceRewards: null, record: { type: 'harbor', step: step.name, forfeit: why } } });
      return { ...ran, timing: t, forfeit: undefined, steps: { done, stopped: why } };
    };
    if (ran.forfeit) return capped(ran.forfeit);
    if (i === steps.length - 1) return { ...ran, steps: { done, stopped: null } };
    const verifyStarted = Date.now();
    let outcome: StepOutcome;
    try {
      const diff = await p.environment.checkpoint();
      outcome = { name: step.name, evaluation: await evaluateStep(ctx, ran, step, diff, ops) };
    } catch (err) {
      // A workspace the agent left undiffable is its step's 0, as a cap is.
      if (err instanceof Forfeit) return capped(err.message);
      await ops.fail(ctx, p, err, t);
      return null;
    }
    t = { ...t, steps_verify_ms: (t.steps_verify_ms ?? 0) + Date.now() - verifyStarted };
    done.push(outcome);
    const stopped = stopAfter(step, outcome);
    if (stopped) return { ...ran, timing: t, steps: { done, stopped } };
  }
  throw new Error('a multi-step task has at least one step');
}

/** POSTRUN for a multi-step task, after collect: the last step's verifier (unless the steps stopped early), then the sample's evaluation. */
export async function finishSteps(ctx: StageContext, r: Ran, diff: string, ops: StepOps): Promise<Evaluation> {
  const trial = r.task.harbor!;
  const so = r.steps!;
  const outcomes = [...so.done];
  if (so.stopped === null) {
    const last = trial.steps!.at(-1)!;
    outcomes.push({ name: last.name, evaluation: await evaluateStep(ctx, r, last, diff, ops) });
  }
  return combinedEvaluation(trial, outcomes, ctx.config.rewardKey ?? null, so.stopped, ctx.config.rewardRange);
}

/**
 * Before a step's agent (multi_step.py:111-118): its workdir/ files put into the workspace, its
 * setup.sh run there as the agent's user (its own 10 minutes: Harbor gives it no limit, and it is
 * not the agent's time), then its healthcheck. null when ready, else why not.
 */
async function readyStep(ctx: StageContext, p: Prepared, task: RolloutTask, step: HarborStep): Promise<string | null> {
  const trial = task.harbor!;
  if (step.workdirDir) {
    await p.environment.addWorkspaceFiles(step.workdirDir);
    const setup = await fs.stat(path.join(step.workdirDir, 'setup.sh')).then(
      (s) => s.isFile(),
      () => false,
    );
    if (setup) {
      const end = await p.environment.runAgentCommand(`bash '${trial.workdir.replace(/'/g, "'\\''").replace(/\/+$/, '')}/setup.sh'`, {
        env: baseEnvironment(),
        timeoutMs: SETUP_TIMEOUT_MS,
        readOnly: [],
        network: harnessNetwork(ctx.sandbox, p.task) === 'host' ? 'host' : 'none',
      });
      if (end.limit) return `step ${step.name}'s setup.sh: ${end.limit}`;
      if (end.status !== 'completed')
        return `step ${step.name}'s setup.sh (steps/${step.name}/workdir/setup.sh) ${end.status === 'timeout' ? `did not end within ${SETUP_TIMEOUT_MS / 1000} s` : `exited ${end.exitCode}`}`;
    }
  }
  return step.healthcheck ? p.environment.healthcheck(step.healthcheck) : null;
}

const SETUP_TIMEOUT_MS = 600_000;

/** One step's verifier: its /tests (tests/ with steps/<name>/tests/ over it), timeout and env. */
async function evaluateStep(ctx: StageContext, r: Ran, step: HarborStep, diff: string, ops: StepOps): Promise<Evaluation> {
  const trial = r.task.harbor!;
  const tests = await mergeStepTests(trial, step, path.join(ctx.config.outDir, 'scratch'));
  try {
    return await ops.evaluate(ctx, r, stepTask(r.task, step, tests.dir), diff);
  } finally {
    if (tests.made) await fs.rm(tests.dir, { recursive: true, force: true });
  }
}
