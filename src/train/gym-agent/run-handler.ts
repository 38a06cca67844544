import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readBody } from '../../core/http/body.js';
import { sendJson } from '../../core/http/send.js';
import type { RolloutTask } from '../../rollout/task-file.js';
import type { FailureWindow } from './failures.js';
import type { MaskedShare } from './masked-share.js';
import type { GymRunResult } from './result.js';
import { RowRefused, taskForRow, type TaskCatalog } from './task.js';
import type { GymAgentOptions } from './options.js';
import type { RowOutcome, RowRunner } from './row-runner.js';
import { parseRow, refusedResult } from './rows.js';
import type { SiblingPrompts } from './sibling-prompts.js';

type GymAnswer = { result: GymRunResult } | { stop: string };

export interface RunHandlerDeps {
  options: Pick<GymAgentOptions, 'onNotice' | 'onRun'>;
  catalog: TaskCatalog;
  runner: RowRunner;
  /** Rows that failed outside the policy, over about one step (failures.ts). */
  window: FailureWindow;
  /** The live first-prompt check of each group's samples (sibling-prompts.ts). */
  siblings: SiblingPrompts;
  /** The masked share of each step of rows (masked-share.ts). */
  masked: MaskedShare;
}

/**
 * `POST /run`: one NeMo Gym row, one session. NeMo-RL stops the run on any non-2xx answer, so a
 * sample that failed comes back 200 and masked; only a row polar cannot run at all, or a window of
 * rows that mostly failed outside the policy, is answered 400, to stop a run that would train on
 * nothing. A dropped connection makes Gym send the same row again: while the first is running, the
 * two share it.
 */
export function runHandler(deps: RunHandlerDeps): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const inFlight = new Map<string, Promise<GymAnswer>>();
  return async (req, res) => {
    const text = await readBody(req, 64 * 1024 * 1024);
    const row = rowOrRefuse(deps, text, res);
    if (!row) return;
    const tripped = deps.window.tripped ?? deps.masked.tripped;
    if (tripped) {
      stopAnswer(res, tripped);
      return;
    }
    const key = createHash('sha256').update(text).digest('hex');
    let pending = inFlight.get(key);
    if (!pending) {
      // Siblings are decided as the row arrives (its _rowidx), compared once its result is ready.
      const taskId = row.task instanceof Error ? null : row.task.id;
      const siblings = { taskId, group: deps.siblings.join(taskId, row.row._rowidx) };
      pending = answerRow(deps, row.row, row.task, siblings).finally(() => inFlight.delete(key));
      inFlight.set(key, pending);
    }
    const answer = await pending;
    if ('stop' in answer) stopAnswer(res, answer.stop);
    else sendJson(res, 200, answer.result);
  };
}

/**
 * The row and its task (or why the task cannot run, answered masked later); null once a row polar
 * cannot run at all (not JSON, no such task, an inline task not allowed) was answered 400: a
 * misconfiguration, so NeMo-RL stops with the reason instead of training on masks.
 */
function rowOrRefuse(deps: RunHandlerDeps, text: string, res: ServerResponse): { row: Record<string, unknown>; task: RolloutTask | Error } | null {
  const misconfigured = (err: unknown) => {
    deps.options.onNotice?.(`polar gym-agent: refused a /run row: ${(err as Error).message}`);
    sendJson(res, 400, { error: { message: (err as Error).message, code: 'POLAR_BAD_REQUEST' } });
    return null;
  };
  let row: Record<string, unknown>;
  try {
    row = parseRow(text);
  } catch (err) {
    return misconfigured(err);
  }
  try {
    return { row, task: taskForRow(row, deps.catalog) };
  } catch (err) {
    if (err instanceof RowRefused) return misconfigured(err);
    // An inline task (--allow-inline-tasks) that does not validate: a row that cannot run, masked.
    return { row, task: err as Error };
  }
}

/** Runs the row (or masks it), counts its failure, and says whether the window now stops the run. */
async function answerRow(
  deps: RunHandlerDeps,
  row: Record<string, unknown>,
  task: RolloutTask | Error,
  siblings: { taskId: string | null; group: ReturnType<SiblingPrompts['join']> },
): Promise<GymAnswer> {
  let outcome: RowOutcome;
  try {
    if (task instanceof Error) throw task;
    outcome = await deps.runner.run(row, task);
  } catch (err) {
    const message = (err as Error).message;
    outcome = { result: refusedResult(row, message), failure: { kind: 'config', reason: `the row could not run: ${message}` } };
  }
  // On every answer, refused ones too: NeMo-RL logs the keys of a step's first result only (rollouts.py:2728).
  outcome.result = { ...outcome.result, ...deps.siblings.check(siblings.taskId, siblings.group, outcome.result) };
  deps.options.onRun?.(outcome.result);
  const trip = deps.window.record(outcome.failure);
  if (trip) {
    deps.options.onNotice?.(`polar gym-agent: ${trip}`);
    return { stop: trip };
  }
  const masked = deps.masked.record(outcome.result);
  if (masked) {
    deps.options.onNotice?.(`polar gym-agent: ${masked.line}`);
    if (masked.stop) return { stop: masked.line };
  }
  return { result: outcome.result };
}

/**
 * Too many rows failed outside the policy: a non-2xx /run answer makes NeMo-RL raise (Gym's
 * raise_for_status, rollout_collection.py:1038-1040 at c3bac96; nemo_gym.py:697-710 at 7ea279a
 * prints the body as "EXCEPTION RESULT" and re-raises a 4xx as a data failure, which the GRPO loop
 * does not retry), so the run stops with this message in its log instead of training on nothing.
 */
function stopAnswer(res: ServerResponse, message: string): void {
  sendJson(res, 400, { error: { message: `polar gym-agent: ${message}`, code: 'POLAR_TOO_MANY_FAILURES' } });
}
