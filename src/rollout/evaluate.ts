import path from 'node:path';
import { runShell, type ShellResult } from '../core/process/shell.js';
import type { HarnessCommand } from '../harness/types.js';
import type { OpenSandbox } from './workspace.js';
import { scrubSecrets } from '../store/redact.js';
import { commandReward } from './reward.js';
import type { RolloutTask } from './task-file.js';
import { runVerifier } from './harbor/trial.js';
import type { SampleContainer } from './harbor/container.js';
import { runContainerVerifier } from './harbor/container-trial.js';
import type { SandboxSettings } from '../sandbox/index.js';
import { StageError } from './stage-error.js';
import { applyDiff, prepareWorkspace, removeWorkspace, type PreparedWorkspace } from './workspace.js';

/** What POSTRUN records for a sample's evaluation. */
export interface Evaluation {
  reward: number;
  traceRewards: number[] | null;
  /** The evaluator's own account: type, commands and their exit codes, its output (bounded, scrubbed). */
  record: Record<string, unknown>;
}

export interface EvaluationContext {
  task: RolloutTask;
  workspace: PreparedWorkspace;
  diff: string;
  /** How the harness run ended. */
  sessionStatus: string;
  sessionId: string;
  /** The session's trace count (prefix-merging), for evaluators that give per-trace rewards. */
  traceCount: number;
  env: Record<string, string>;
  /** The evaluator's sandbox for a command in a folder (no network, the task file's folder read-only); null: none. */
  sandbox: OpenSandbox | null;
  /** Where `sandbox` mounts the workspace (sandboxing.ts workspaceInside), for $POLAR_WORKSPACE; absent: its own path. */
  workspaceInside?: string | null;
  /** The setup commands' sandbox, for a `tests` evaluator's fresh copy. */
  setupSandbox: OpenSandbox | null;
  /** A sandbox with no network, for polar's git after those setup commands. */
  gitSandbox?: OpenSandbox | null;
  /** Where a `tests` evaluator may build its fresh copy. */
  scratch: string;
  /** Values never to store (upstream keys, auth tokens). */
  secrets: readonly string[];
  /** For a Harbor task's verifier: the process's sandbox settings and the verifier's network. */
  harbor?: { settings: SandboxSettings; network: 'host' | 'none'; container?: SampleContainer };
}

const OUTPUT_KEPT = 8 * 1024;

/**
 * Scores a finished session. `command`: the command in the agent's workspace, its reward read from
 * its last stdout line or its exit status (reward.ts). `tests` (SWE-bench style): a fresh copy of
 * the workspace, prepared from the task as at INIT, with the agent's diff applied; reward 1 only if
 * every fail_to_pass and pass_to_pass command exits 0. `session-completed`: 1 if the harness ended
 * on its own with exit 0. An evaluator that times out, dies by a signal, cannot start, or prints a
 * malformed reward throws StageError('post'): the sample ends `error`, not with a reward.
 */
export async function evaluate(ctx: EvaluationContext): Promise<Evaluation> {
  const { task } = ctx;
  const ev = task.evaluator;
  if (ev.type === 'session-completed') {
    return { reward: ctx.sessionStatus === 'completed' ? 1 : 0, traceRewards: null, record: { type: ev.type, session_status: ctx.sessionStatus } };
  }
  const env = { ...ctx.env, POLAR_TASK_ID: task.id, POLAR_SESSION_ID: ctx.sessionId, POLAR_TRACE_COUNT: String(ctx.traceCount) };
  if (ev.type === 'harbor') {
    if (!task.harbor || !ctx.harbor) throw new StageError('post', 'a Harbor verifier needs its task folder and the sandbox');
    const out = ctx.harbor.container
      ? await runContainerVerifier(task.harbor, ctx.harbor.container, ctx.workspace.dir, ctx.env, ctx.secrets)
      : await runVerifier(task.harbor, ctx.workspace.dir, { settings: ctx.harbor.settings, env: ctx.env, secrets: ctx.secrets }, ctx.harbor.network);
    // The task's name, metadata and named rewards travel with the sample into exports and reports.
    return { reward: out.reward, traceRewards: null, record: { ...out.record, metadata: task.metadata } };
  }
  if (ev.type === 'command') {
    const r = await sandboxedShell(
      ctx.sandbox,
      ev.command,
      { cwd: ctx.workspace.dir, env: { ...env, POLAR_WORKSPACE: seen(ctx, ctx.workspace.dir) }, timeoutMs: ev.timeout * 1000 },
      'the evaluator command',
    );
    broken(r, `the evaluator command`, ev.timeout);
    const scored = commandReward(r.stdout, r.exitCode!);
    const record = {
      type: ev.type,
      command: ev.command,
      exit_code: r.exitCode,
      output: kept(r, ctx.secrets),
      ...('details' in scored && scored.details ? { details: scored.details } : {}),
    };
    if ('problem' in scored) throw new StageError('post', scored.problem);
    if (scored.traceRewards && scored.traceRewards.length !== ctx.traceCount) {
      throw new StageError('post', `the evaluator gave ${scored.traceRewards.length} trace rewards for a session of ${ctx.traceCount} traces`);
    }
    return { reward: scored.reward, traceRewards: scored.traceRewards, record };
  }
  const fresh = await prepareWorkspace(
    task,
    path.join(ctx.scratch, `eval-${ctx.sessionId}`),
    Date.now() + ev.timeout * 1000,
    ctx.env,
    ctx.setupSandbox ?? undefined,
    ctx.gitSandbox ?? undefined,
  ).catch((err: unknown) => {
    throw new StageError('post', `could not prepare a fresh workspace for the tests: ${(err as Error).message}`);
  });
  try {
    await applyDiff(fresh, ctx.diff, ctx.env);
    const deadline = Date.now() + ev.timeout * 1000;
    const results: { command: string; kind: 'fail_to_pass' | 'pass_to_pass'; exit_code: number | null }[] = [];
    let output = '';
    for (const [kind, commands] of [
      ['fail_to_pass', ev.fail_to_pass],
      ['pass_to_pass', ev.pass_to_pass],
    ] as const) {
      for (const command of commands) {
        const r = await sandboxedShell(
          ctx.sandbox,
          command,
          { cwd: fresh.dir, env: { ...env, POLAR_WORKSPACE: seen(ctx, fresh.dir) }, timeoutMs: Math.max(1, deadline - Date.now()) },
          `test command ${JSON.stringify(command)}`,
        );
        broken(r, `test command ${JSON.stringify(command)}`, ev.timeout);
        results.push({ command, kind, exit_code: r.exitCode });
        output += `$ ${command}\n${r.stdout}${r.stderr}`;
      }
    }
    const passed = results.every((r) => r.exit_code === 0);
    return { reward: passed ? 1 : 0, traceRewards: null, record: { type: ev.type, passed, results, output: bounded(scrubSecrets(output, ctx.secrets)) } };
  } finally {
    await removeWorkspace(fresh.dir);
  }
}

/** A workspace folder as the evaluator's command sees it: at the sandbox's fixed path when it has one. */
function seen(ctx: EvaluationContext, dir: string): string {
  return ctx.sandbox && ctx.workspaceInside ? ctx.workspaceInside : dir;
}

/** A command in its own sandbox; a cap it hit (the agent's code under test fork-bombed, say) ends the sample. */
async function sandboxedShell(
  sandbox: OpenSandbox | null,
  command: string,
  opts: { cwd: string; env: Record<string, string>; timeoutMs: number },
  what: string,
): Promise<ShellResult> {
  const jail = sandbox ? await sandbox(opts.cwd) : null;
  const r = await runShell(command, { ...opts, ...(jail ? { wrap: (c: HarnessCommand) => jail.wrap(c) } : {}) });
  const limit = (await jail?.close({ exitCode: r.exitCode, signal: r.signal })) ?? null;
  if (limit) throw new StageError('post', `${what}: ${limit}`);
  return r;
}

/** A run that says nothing about the agent's work: the evaluator itself broke. */
function broken(r: ShellResult, what: string, timeoutSec: number): void {
  if (r.timedOut) throw new StageError('post', `${what} timed out after ${timeoutSec} s`, true);
  if (r.failedToStart) throw new StageError('post', `${what} could not start: ${r.failedToStart}`);
  if (r.signal) throw new StageError('post', `${what} was killed by ${r.signal}`);
}

function kept(r: ShellResult, secrets: readonly string[]): string {
  return bounded(scrubSecrets(`${r.stdout}${r.stderr ? `\n[stderr]\n${r.stderr}` : ''}`, secrets));
}

function bounded(text: string): string {
  return text.length > OUTPUT_KEPT ? `…${text.slice(text.length - OUTPUT_KEPT)}` : text;
}
