import fs from 'node:fs/promises';
import path from 'node:path';
import { scrubSecrets } from '../../store/redact.js';
import type { RolloutTask } from '../task-file.js';
import { StageError } from '../stage-error.js';
import { removeWorkspace, type PreparedWorkspace } from '../workspace.js';
import type { Verification } from '../environments/types.js';
import { gradeNamed, type NamedTestResult, type TestKind } from './named-tests/grade.js';
import { recogniseCommand } from './named-tests/recognise.js';
import { runnerFor } from './named-tests/registry.js';
import { RUNNER_NAMES, type RunnerName } from '../task-file.js';
import { bounded } from './output.js';
import { DEFAULT_TEST_FILES, withoutTestFiles } from './test-files.js';
import type { EvaluationInput, Evaluator } from './types.js';
import { forfeit } from './verdict.js';

type TestsSpec = Extract<RolloutTask['evaluator'], { type: 'tests' }>;

/** One run of the tests: a runner polar drives (graded by its report) or a task's own command (graded by exit status). */
type TestRun =
  | { command: string; label: string; runner: RunnerName; named: { id: string; kind: TestKind }[] }
  | { command: string; label: string; runner: null; kind: TestKind };

/** What the record keeps of each run. */
type RunRecord = {
  command: string;
  graded_by: 'report' | 'exit status';
  kind?: TestKind;
  exit_code: number | null;
  tests?: NamedTestResult[];
  problem?: string;
};

/**
 * `tests` (SWE-bench style): a fresh copy of the workspace, prepared from the task as at INIT, with
 * the agent's diff applied except what it changed in the task's test files (test-files.ts: they
 * run as the task wrote them) and in its runner's code files (a conftest.py).
 *
 * With `runner` (pytest, unittest, node-test), fail_to_pass and pass_to_pass are test ids: polar
 * runs them once with a configuration of its own (named-tests/) and reads each test's outcome from
 * the runner's report; reward 1 only if every named test ran and passed. Command-style entries that
 * are a plain runner invocation naming tests (`python3 -m unittest -q mod.Class.test`, `pytest
 * f.py::t`, `node --test f.js`) are graded the same way, by the tests they name. Any other command
 * is graded by its exit status, as before: the workspace may configure what it runs (`npm test`
 * runs a script the agent can rewrite), which `polar tasks check` tries to forge.
 *
 * A run the agent's code cut short, or a diff that does not apply, scores 0 with the reason.
 */
export const testsEvaluator: Evaluator<'tests'> = {
  type: 'tests',
  async evaluate(input, spec) {
    const { verification: place } = input;
    const runs = testRuns(spec);
    const fresh = await place
      .freshWorkspace(path.join(input.scratch, `eval-${input.sessionId}`), Date.now() + spec.timeout * 1000, input.env)
      .catch((err: unknown) => {
        throw err instanceof StageError
          ? err
          : new StageError('post', `could not prepare a fresh workspace for the tests: ${(err as Error).message}`, { cause: err });
      });
    try {
      const configFiles = [...new Set(runs.flatMap((r) => (r.runner ? runnerFor(r.runner).configFiles : [])))];
      const { kept, reset } = withoutTestFiles(input.diff, [...(spec.test_files ?? DEFAULT_TEST_FILES), ...configFiles]);
      const base = { type: spec.type, ...(spec.runner ? { runner: spec.runner } : {}), ...(reset.length > 0 ? { reset_test_files: reset } : {}) };
      try {
        await place.applyDiff(fresh, kept, input.env);
      } catch (err) {
        return {
          reward: 0,
          traceRewards: null,
          record: { ...base, passed: false, forfeit: `the agent's diff does not apply to a fresh copy: ${(err as Error).message}` },
        };
      }
      const deadline = Date.now() + spec.timeout * 1000;
      const results: RunRecord[] = [];
      let output = '';
      const record = () => ({ ...base, results, output: bounded(scrubSecrets(output, input.secrets)) });
      for (const run of runs) {
        const what = run.runner ? `the tests ${JSON.stringify(run.label)} (polar's ${run.runner} runner)` : `test command ${JSON.stringify(run.command)}`;
        const r = await runOnce(input, place, fresh, run, what, spec.timeout, Math.max(1, deadline - Date.now()));
        output += `$ ${run.label}\n${r.output}`;
        results.push(r.record);
        if (r.lost) return { reward: 0, traceRewards: null, record: { ...record(), passed: false, forfeit: r.lost } };
      }
      const passed = results.every((r) => (r.graded_by === 'report' ? r.tests!.every((t) => t.outcome === 'passed') : r.exit_code === 0));
      return { reward: passed ? 1 : 0, traceRewards: null, record: { ...record(), passed } };
    } finally {
      await removeWorkspace(fresh.dir);
    }
  },
};

/**
 * The runs a tests evaluator makes: with `runner`, one run of every named test; else each command,
 * as a runner polar drives where it is one (recognise.ts), else as the task's own command.
 */
export function testRuns(spec: TestsSpec): TestRun[] {
  const entries = [
    ...spec.fail_to_pass.map((c) => ({ c, kind: 'fail_to_pass' as const })),
    ...spec.pass_to_pass.map((c) => ({ c, kind: 'pass_to_pass' as const })),
  ];
  if (spec.runner) {
    const named = entries.map((e) => ({ id: e.c, kind: e.kind }));
    const args = spec.runner_args ?? [];
    const label = [spec.runner, ...args, ...named.map((n) => n.id)].join(' ');
    return [
      {
        command: runnerFor(spec.runner).command(
          named.map((n) => n.id),
          args,
        ),
        label,
        runner: spec.runner,
        named,
      },
    ];
  }
  return entries.map(({ c, kind }): TestRun => {
    const known = recogniseCommand(c);
    if (!known) return { command: c, label: c, runner: null, kind };
    return { command: runnerFor(known.runner).command(known.ids, []), label: c, runner: known.runner, named: known.ids.map((id) => ({ id, kind })) };
  });
}

async function runOnce(
  input: EvaluationInput,
  place: Verification,
  fresh: PreparedWorkspace,
  run: TestRun,
  what: string,
  timeoutSec: number,
  timeoutMs: number,
): Promise<{ record: RunRecord; output: string; lost: string | null }> {
  const r = await place.run({
    command: run.command,
    what,
    workspace: fresh.dir,
    env: { ...input.env, POLAR_WORKSPACE: place.workspaceInside(fresh.dir) },
    timeoutMs,
    readOnly: [],
    // A folder made empty for the run, its files read after every process of it is dead: the report's.
    rewardDir: run.runner !== null,
    network: 'none',
  });
  try {
    const output = `${r.stdout}${r.stderr}`;
    const lost = forfeit(r, what, timeoutSec);
    if (!run.runner) return { record: { command: run.label, graded_by: 'exit status', kind: run.kind, exit_code: r.exitCode }, output, lost };
    const runner = runnerFor(run.runner);
    const report = await runner.read(r.rewardDir!).catch((err: Error) => err);
    // No report: the run ended before the runner could write one; every named test did not run.
    const tests = gradeNamed(runner.covers, run.named, report instanceof Error ? new Map() : report);
    return {
      record: { command: run.label, graded_by: 'report', exit_code: r.exitCode, tests, ...(report instanceof Error ? { problem: report.message } : {}) },
      output,
      lost,
    };
  } finally {
    if (r.rewardDir) await fs.rm(r.rewardDir, { recursive: true, force: true });
  }
}

/**
 * Said once per task before a rollout starts: the tests commands graded by exit status, which the
 * workspace may configure (`npm test` runs the script package.json names; a runner reads its
 * config files from the folder it runs in), so a policy can learn to pass them without the fix.
 */
export function exitStatusNotices(tasks: readonly RolloutTask[]): string[] {
  const out: string[] = [];
  for (const t of tasks) {
    if (t.evaluator.type !== 'tests') continue;
    const byStatus = testRuns(t.evaluator).filter((r) => r.runner === null);
    if (byStatus.length === 0) continue;
    out.push(
      `notice: task ${t.id}: its tests evaluator grades ${byStatus.map((r) => JSON.stringify(r.command)).join(', ')} by exit status, which the agent's workspace can configure; name the tests with "runner" (${RUNNER_NAMES.join(', ')}) to grade by the runner's report (polar tasks check tries to forge it)`,
    );
  }
  return out;
}
