import path from 'node:path';
import { scrubSecrets } from '../../store/redact.js';
import { StageError } from '../stage-error.js';
import { removeWorkspace } from '../workspace.js';
import { bounded } from './output.js';
import { DEFAULT_TEST_FILES, withoutTestFiles } from './test-files.js';
import type { Evaluator } from './types.js';
import { forfeit } from './verdict.js';

type TestResult = { command: string; kind: 'fail_to_pass' | 'pass_to_pass'; exit_code: number | null };

/**
 * `tests` (SWE-bench style): a fresh copy of the workspace, prepared from the task as at INIT, with
 * the agent's diff applied except what it changed in the task's test files (test-files.ts: they
 * run as the task wrote them); reward 1 only if every fail_to_pass and pass_to_pass command exits 0.
 * A command the agent's code cut short, or a diff that does not apply, scores 0 with the reason.
 */
export const testsEvaluator: Evaluator<'tests'> = {
  type: 'tests',
  async evaluate(input, spec) {
    const { verification: place } = input;
    const fresh = await place
      .freshWorkspace(path.join(input.scratch, `eval-${input.sessionId}`), Date.now() + spec.timeout * 1000, input.env)
      .catch((err: unknown) => {
        throw err instanceof StageError ? err : new StageError('post', `could not prepare a fresh workspace for the tests: ${(err as Error).message}`);
      });
    try {
      const { kept, reset } = withoutTestFiles(input.diff, spec.test_files ?? DEFAULT_TEST_FILES);
      const base = { type: spec.type, ...(reset.length > 0 ? { reset_test_files: reset } : {}) };
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
      const results: TestResult[] = [];
      let output = '';
      for (const [kind, commands] of [
        ['fail_to_pass', spec.fail_to_pass],
        ['pass_to_pass', spec.pass_to_pass],
      ] as const) {
        for (const command of commands) {
          const what = `test command ${JSON.stringify(command)}`;
          const r = await place.run({
            command,
            what,
            workspace: fresh.dir,
            env: { ...input.env, POLAR_WORKSPACE: place.workspaceInside(fresh.dir) },
            timeoutMs: Math.max(1, deadline - Date.now()),
            readOnly: [],
            rewardDir: false,
            network: 'none',
          });
          results.push({ command, kind, exit_code: r.exitCode });
          output += `$ ${command}\n${r.stdout}${r.stderr}`;
          const lost = forfeit(r, what, spec.timeout);
          const record = { ...base, passed: false, results, output: bounded(scrubSecrets(output, input.secrets)) };
          if (lost) return { reward: 0, traceRewards: null, record: { ...record, forfeit: lost } };
        }
      }
      const passed = results.every((r) => r.exit_code === 0);
      return { reward: passed ? 1 : 0, traceRewards: null, record: { ...base, passed, results, output: bounded(scrubSecrets(output, input.secrets)) } };
    } finally {
      await removeWorkspace(fresh.dir);
    }
  },
};
