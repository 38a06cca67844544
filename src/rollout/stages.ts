import path from 'node:path';
import { newId } from '../core/ids.js';
import { baseEnvironment } from '../harness/env.js';
import { runHarness } from '../session/run-harness.js';
import type { InsidePaths } from '../sandbox/index.js';
import type { SampleEnd, SampleRow } from '../store/rollouts.js';
import type { Store } from '../store/store.js';
import { sessionTraces, usableCalls, emptyStats } from '../trajectory/reconstruct.js';
import { prefixMerging } from '../trajectory/strategies/prefix-merging.js';
import { evaluate } from './evaluators/registry.js';
import type { Evaluation } from './evaluators/types.js';
import { finishSteps, runSteps, type StepOps } from './step-stages.js';
import type { Prepared, Ran, StageContext } from './stage-types.js';
import type { RolloutTask } from './task-file.js';
import { harnessNetwork, rolloutInsidePaths, verifierNetwork } from './sandboxing.js';
import { isBuiltinAgent, runBuiltinAgent } from './agents/builtin.js';
import type { EnvironmentDeps } from './environments/deps.js';
import { openEnvironment } from './environments/registry.js';
import type { SampleEnvironment } from './environments/types.js';
import { localStateDir } from '../store/postgres/url.js';
import { DEFAULT_BUILD_TIMEOUT_SEC } from './harbor/toml-fields.js';
import { Forfeit, StageError } from './stage-error.js';
import { removeWorkspace, workspaceDir } from './workspace.js';

// The stages' shared shapes live in stage-types.ts, which step-stages.ts imports without this file.
export type { Prepared, Ran, StageContext } from './stage-types.js';

const toolEnv = () => baseEnvironment();

/**
 * INIT: a new attempt (a session id), the sample's environment opens and its workspace is
 * prepared, under a budget of its own (preparationMs). Returns null when the sample ended here (its
 * outcome recorded) or was already done.
 */
export async function initStage(ctx: StageContext, sample: SampleRow): Promise<Prepared | null> {
  const task = ctx.tasks.get(sample.taskId)!;
  const sessionId = newId('ses');
  const attempt = await ctx.ledger.start(sample, sessionId);
  if (attempt === null) return null;
  ctx.emit({ type: 'stage', sampleId: sample.id, taskId: sample.taskId, stage: 'init' });
  let startedAt = Date.now();
  const dir = workspaceDir(ctx.config.outDir, task.id, sample.sampleIndex, attempt);
  let environment: SampleEnvironment | null = null;
  try {
    environment = openEnvironment(ctx.config.environment, environmentDeps(ctx), { task, sampleId: sample.id, sessionId, dir });
    // The task's image is built (once, under its own build_timeout_sec) before the sample's clocks
    // start: a first sample that waited out the build had that much less time than the next.
    const provisionStart = Date.now();
    await environment.provision?.();
    const provisionMs = Date.now() - provisionStart;
    startedAt = Date.now();
    const deadline = ctx.sessionBudgetMs !== undefined ? startedAt + ctx.sessionBudgetMs : undefined;
    const workspace = await environment.prepare(Math.min(startedAt + preparationMs(ctx, task), deadline ?? Infinity));
    const timing = { init_ms: Date.now() - startedAt, ...(environment.provision ? { provision_ms: provisionMs } : {}) };
    await ctx.ledger.stage(sample.id, 'ready', timing);
    ctx.emit({ type: 'stage', sampleId: sample.id, taskId: sample.taskId, stage: 'ready' });
    // The agent's budget counts from the agent's start, as Harbor's agent.timeout_sec does
    // (asyncio.wait_for around agent.run, trial/trial.py:380-387): neither this preparation nor the
    // wait for a run slot is the agent's time.
    const agentTimeoutMs = (task.timeout ?? ctx.config.timeoutSec) * 1000;
    return { sample, task, sessionId, workspace, agentTimeoutMs, startedAt, timing, environment, ...(deadline !== undefined ? { deadline } : {}) };
  } catch (err) {
    await environment?.dispose(false);
    await removeWorkspace(dir);
    await finish(ctx, sample, stageFailure(err, 'init', startedAt));
    return null;
  }
}

/**
 * INIT's budget, the agent's never: a Harbor task's [environment].build_timeout_sec (600 unless
 * set, models/task/config.py:325), which Harbor starts its environment under
 * (trial/trial.py:988-999; its healthcheck is bounded by its own settings, environments/base.py:1154-1206,
 * and waits apart from the agent's clock, trial.py:321-327); a JSONL task's setup commands, its
 * build, get its `timeout` again on a clock of their own.
 */
function preparationMs(ctx: StageContext, task: RolloutTask): number {
  const sec = task.harbor ? (task.harbor.buildTimeoutSec ?? DEFAULT_BUILD_TIMEOUT_SEC) : (task.timeout ?? ctx.config.timeoutSec);
  return sec * 1000;
}

/** RUNNING: the harness through the rollout's proxy, in the sample's environment, for the agent's whole budget. */
export async function runStage(ctx: StageContext, p: Prepared): Promise<Ran | null> {
  const readyMs = Date.now() - p.startedAt - (p.timing.init_ms ?? 0);
  if (ctx.stopping()) {
    await interrupt(ctx, p);
    return null;
  }
  await ctx.ledger.stage(p.sample.id, 'running', { ready_ms: readyMs });
  ctx.emit({ type: 'stage', sampleId: p.sample.id, taskId: p.sample.taskId, stage: 'running' });
  const timing = { ...p.timing, ready_ms: readyMs };
  if (p.task.harbor?.steps) return runSteps(ctx, p, timing, stepOps);
  // With one budget for the sample, the agent gets what is left of it when that is less than its own.
  const left = p.deadline !== undefined ? Math.min(p.agentTimeoutMs, p.deadline - Date.now()) : p.agentTimeoutMs;
  return runAgent(ctx, p, p.task, timing, Math.max(1, left));
}

/**
 * The agent once, for `left` ms: the harness with `task`'s prompt (a multi-step task's step: its
 * instruction), or a built-in agent. null: the sample ended here (its outcome recorded).
 */
async function runAgent(ctx: StageContext, p: Prepared, task: RolloutTask, timing: Record<string, number>, left: number): Promise<Ran | null> {
  const started = Date.now();
  if (!ctx.harness) return runBuiltin(ctx, p, task, timing, left, started);
  try {
    const result = await runHarness({
      harness: ctx.harness,
      ...(ctx.config.harnessBin ? { harnessBin: ctx.config.harnessBin } : {}),
      ...(ctx.config.nodeBin ? { nodeBin: ctx.config.nodeBin } : {}),
      prompt: task.prompt,
      cwd: p.workspace.dir,
      dbPath: ctx.dbPath,
      store: ctx.store,
      proxyUrl: ctx.proxyUrl,
      sessionKeys: ctx.sessionKeys,
      model: ctx.model,
      ...(ctx.contextWindow ? { contextWindow: ctx.contextWindow } : {}),
      appendOnly: ctx.config.compaction !== 'harness',
      session: p.sessionId,
      ...(ctx.harnessVersion !== undefined ? { harnessVersion: ctx.harnessVersion } : {}),
      timeoutSec: left / 1000,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
      quiet: true,
      onNotice: ctx.onNotice,
      sandbox: {
        settings: ctx.sandbox,
        network: harnessNetwork(ctx.sandbox, p.task),
        ...(ctx.proxySocket ? { proxySocket: ctx.proxySocket } : {}),
        // One workspace and home path for every sample of a task: the first prompt names them.
        ...p.environment.harnessPlacement(),
      },
      sessionMetadata: { rollout_id: ctx.rolloutId, task_id: p.task.id, group_id: p.sample.groupId, sample_index: p.sample.sampleIndex },
    });
    ctx.harnessVersion ??= result.harnessVersion;
    const runTiming: Record<string, number> = { ...timing, run_ms: (timing.run_ms ?? 0) + Date.now() - started };
    // Whose limit ended it: 1 when the agent's own budget was the nearer (Polar's timeout_source
    // `agent`, gateway/node.py _active_timeout_source: the agent's deadline before the session's; a
    // tie is the session's), 0 when what was left of the sample's one budget was.
    if (result.status === 'timeout') runTiming.agent_timeout_own = p.deadline === undefined || started + p.agentTimeoutMs < p.deadline ? 1 : 0;
    if (result.status === 'aborted' && !result.limit) {
      await interrupt(ctx, { ...p, timing: runTiming });
      return null;
    }
    return {
      ...p,
      timing: runTiming,
      sessionStatus: result.status === 'completed' || result.status === 'timeout' ? result.status : 'failed',
      exitCode: result.exitCode,
      // A cap the agent hit (fork bomb, memory hog, huge file): this sample scores 0, nothing else is touched.
      ...(result.limit ? { forfeit: capHit(result.limit) } : {}),
    };
  } catch (err) {
    ctx.store.sessions.end(p.sessionId, 'failed');
    await finish(ctx, p.sample, stageFailure(err, 'run', p.startedAt, { ...timing, run_ms: Date.now() - started }));
    await cleanup(ctx, p);
    return null;
  }
}

/**
 * POSTRUN: the environment collects the agent's work (every process of the sample dead, its diff
 * taken), the evaluator scores it in a place the agent never had, the reward is recorded once with
 * the group's statistics, then cleanup.
 */
export async function postStage(ctx: StageContext, r: Ran): Promise<void> {
  await ctx.ledger.stage(r.sample.id, 'post');
  ctx.emit({ type: 'stage', sampleId: r.sample.id, taskId: r.sample.taskId, stage: 'post' });
  const started = Date.now();
  // POSTRUN's two phases: collecting the agent's work, then its verifier (the evaluator's own timeout).
  const phases: { collect_ms?: number; verify_ms?: number } = {};
  let diff: string | null = null;
  try {
    // What the agent did to itself (a cap it hit at RUNNING; here a workspace polar will not diff, a
    // link where polar collects, artifacts over their cap) scores 0 with the reason, never `error`
    // (stage-error.ts Forfeit). Its work is still collected where it can be, for the record.
    let lost: string | null = r.steps ? null : (r.forfeit ?? null);
    diff = await r.environment.collect().catch((err: unknown) => {
      if (!(err instanceof Forfeit)) throw err;
      lost = err.message;
      return null;
    });
    phases.collect_ms = Date.now() - started;
    const evaluation =
      lost !== null || diff === null
        ? forfeited(r.task, lost ?? 'the agent left nothing polar could collect')
        : r.steps
          ? await finishSteps(ctx, r, diff, stepOps)
          : await evaluateWith(ctx, r, r.task, diff);
    phases.verify_ms = Date.now() - started - phases.collect_ms;
    const accepted = ctx.accept ? ctx.accept({ reward: evaluation.reward, status: r.sessionStatus }) : null;
    await finish(ctx, r.sample, {
      status: r.sessionStatus,
      reward: evaluation.reward,
      traceRewards: evaluation.traceRewards,
      evaluator: evaluation.record,
      diff,
      accepted,
      timing: { ...r.timing, ...phases, post_ms: Date.now() - started, total_ms: Date.now() - r.startedAt },
    });
  } catch (err) {
    await finish(ctx, r.sample, { ...stageFailure(err, 'post', r.startedAt, { ...r.timing, ...phases, post_ms: Date.now() - started }), diff });
  } finally {
    await cleanup(ctx, r);
  }
}

/** A sample scored 0 unevaluated, `why` its evaluator's `forfeit` (the shape every evaluator's forfeit has, which the summary and `tasks check` read). */
function forfeited(task: RolloutTask, why: string): Evaluation {
  return { reward: 0, traceRewards: null, record: { type: task.evaluator.type, forfeit: why } };
}

/** The forfeit of an agent whose sandbox hit a cap (the jail's reason: "process limit 256 reached", …). */
function capHit(limit: string): string {
  return `the agent hit its own cap: ${limit}`;
}

/** The evaluator on the collected work, `task` being the sample's (or one step's of a multi-step task). */
async function evaluateWith(ctx: StageContext, r: Ran, task: RolloutTask, diff: string): Promise<Evaluation> {
  const traces = traceCount(ctx.store, r.sessionId);
  return evaluate({
    task,
    workspace: r.workspace,
    diff,
    sessionStatus: r.sessionStatus,
    sessionId: r.sessionId,
    traceCount: traces,
    env: {
      ...toolEnv(),
      POLAR_TASK_ID: r.task.id,
      POLAR_SESSION_ID: r.sessionId,
      POLAR_TRACE_COUNT: String(traces),
      ...(ctx.tasksDir ? { POLAR_TASKS_DIR: ctx.tasksDir } : {}),
    },
    verification: r.environment.verification,
    verifierNetwork: verifierNetwork(ctx.sandbox, r.task),
    rewardKey: ctx.config.rewardKey ?? null,
    ...(ctx.config.rewardRange ? { rewardRange: ctx.config.rewardRange } : {}),
    // The task file's folder (hidden checkers) appears to evaluators only, after the agent has ended.
    tasksDir: ctx.tasksDir,
    scratch: path.join(ctx.config.outDir, 'scratch'),
    secrets: ctx.secrets,
  });
}

/** What a multi-step sample's steps need of the stages (step-stages.ts). */
const stepOps: StepOps = {
  runAgent,
  evaluate: evaluateWith,
  fail: async (ctx, p, err, timing) => {
    await finish(ctx, p.sample, stageFailure(err, 'post', p.startedAt, timing));
    await cleanup(ctx, p);
  },
  interrupt,
};

/**
 * RUNNING for the built-in agents (`oracle`, `nop`): no model, no session calls. Their network is
 * the harness's (the task's, else the rollout's --network), with no way out at all in place of the
 * proxy: they have no use for it.
 */
async function runBuiltin(
  ctx: StageContext,
  p: Prepared,
  task: RolloutTask,
  timing: Record<string, number>,
  left: number,
  started: number,
): Promise<Ran | null> {
  const agent = ctx.config.harness;
  try {
    if (!isBuiltinAgent(agent)) throw new StageError('run', `--harness ${agent} is not a built-in agent`);
    const network = harnessNetwork(ctx.sandbox, p.task) === 'host' ? 'host' : 'none';
    const r = await runBuiltinAgent(agent, task, p.environment, toolEnv(), network, left);
    const runTiming = { ...timing, run_ms: (timing.run_ms ?? 0) + Date.now() - started };
    return { ...p, timing: runTiming, sessionStatus: r.status, exitCode: r.exitCode, ...(r.limit ? { forfeit: capHit(r.limit) } : {}) };
  } catch (err) {
    await finish(ctx, p.sample, stageFailure(err, 'run', p.startedAt, { ...timing, run_ms: Date.now() - started }));
    await cleanup(ctx, p);
    return null;
  }
}

/** The number of traces prefix-merging makes of a session: what per-trace rewards must match. */
function traceCount(store: Store, sessionId: string): number {
  const session = store.sessions.get(sessionId);
  if (!session) return 0;
  const calls = usableCalls(store.requests.tokens(sessionId), false, emptyStats(prefixMerging.name));
  return sessionTraces(session, prefixMerging, calls).traces.length;
}

type End = SampleEnd;

function stageFailure(err: unknown, stage: 'init' | 'run' | 'post', startedAt: number, timing: Record<string, number> = {}): End {
  const e = err instanceof StageError ? err : new StageError(stage, (err as Error)?.message ?? String(err), { cause: err });
  return {
    status: e.timedOut && e.stage !== 'post' ? 'timeout' : 'error',
    errorStage: e.stage,
    error: e.message,
    timing: { ...timing, total_ms: Date.now() - startedAt },
  };
}

export async function finish(ctx: Pick<StageContext, 'ledger' | 'emit'>, sample: SampleRow, end: End): Promise<void> {
  const recorded = await ctx.ledger.finish(sample.id, end);
  if (!recorded) {
    // The store refused this end: the sample ended elsewhere or is another attempt's now (a queued
    // sample whose lease this worker lost while it was scored). Saying `completed` here would
    // contradict the store, whose end is the one that counts.
    ctx.emit({
      type: 'done',
      sampleId: sample.id,
      taskId: sample.taskId,
      outcome: 'interrupted',
      reward: null,
      error: `this run's end (${end.status}) was not recorded: the sample ended elsewhere or another attempt holds it`,
    });
    return;
  }
  ctx.emit({ type: 'done', sampleId: sample.id, taskId: sample.taskId, outcome: end.status, reward: end.reward ?? null, error: end.error ?? null });
}

/** Ctrl-C reached this sample: it stays unfinished (a resume runs it again). */
async function interrupt(ctx: StageContext, p: Prepared): Promise<void> {
  await ctx.ledger.interrupt(p.sample.id);
  ctx.emit({ type: 'done', sampleId: p.sample.id, taskId: p.sample.taskId, outcome: 'interrupted', reward: null, error: 'interrupted' });
  void cleanup(ctx, p);
}

async function cleanup(ctx: StageContext, p: Prepared): Promise<void> {
  await p.environment.dispose(ctx.config.keepWorkspaces === true);
}

/**
 * The fixed paths a sample's harness sees its workspace and home at (sandbox/fixed-paths.ts): the
 * same for every sample, so a task's first prompt is one token sequence, one GRPO group. None
 * with `--sandbox none`, which runs the harness on the host's paths.
 */
function insideFor(ctx: StageContext): InsidePaths | null {
  // Constant for a context (its sandbox, task folder and binaries): worked out once, not per stage.
  if (!insideByContext.has(ctx))
    insideByContext.set(ctx, rolloutInsidePaths(ctx.sandbox, { tasksDir: ctx.tasksDir, harnessBin: ctx.config.harnessBin, nodeBin: ctx.config.nodeBin }));
  return insideByContext.get(ctx)!;
}
const insideByContext = new WeakMap<StageContext, InsidePaths | null>();

/** What every sample's environment shares: worked out once per context. */
function environmentDeps(ctx: StageContext): EnvironmentDeps {
  if (!depsByContext.has(ctx)) {
    depsByContext.set(ctx, {
      sandbox: ctx.sandbox,
      inside: insideFor(ctx),
      tasksDir: ctx.tasksDir,
      proxySocket: ctx.proxySocket,
      stateDir: localStateDir(ctx.dbPath),
      modelHarness: ctx.harness !== null,
      harnessBin: ctx.config.harnessBin ?? null,
      nodeBin: ctx.config.nodeBin ?? null,
      scratch: path.join(ctx.config.outDir, 'scratch'),
      onNotice: ctx.onNotice,
    });
  }
  return depsByContext.get(ctx)!;
}
const depsByContext = new WeakMap<StageContext, EnvironmentDeps>();
