import fs from 'node:fs/promises';
import { commandReward } from '../reward.js';
import { gradeNamed } from './named-tests/grade.js';
import { junitCovers, readJunit } from './named-tests/junit.js';
import type { TestOutcome } from './named-tests/types.js';
import type { Evaluator } from './types.js';
import { keptOutput } from './output.js';
import { forfeit } from './verdict.js';

/**
 * `command`: the task's command in the agent's collected workspace (no network, the task file's
 * folder read-only for hidden checkers), its reward its last stdout line or its exit status
 * (reward.ts). A run the agent's code could have cut short scores 0 with the reason (verdict.ts);
 * so does a reward line that does not parse: the agent's code may have written it on the checker's
 * stdout.
 */
export const commandEvaluator: Evaluator<'command'> = {
  type: 'command',
  async evaluate(input, spec) {
    const { verification: place } = input;
    const what = 'the evaluator command';
    const r = await place.run({
      command: spec.command,
      what,
      workspace: input.workspace.dir,
      env: { ...input.env, POLAR_WORKSPACE: place.workspaceInside(input.workspace.dir) },
      timeoutMs: spec.timeout * 1000,
      readOnly: input.tasksDir ? [{ source: input.tasksDir, dest: input.tasksDir }] : [],
      // With a report: a folder made empty for it, read after every process of the command is dead.
      rewardDir: spec.report !== undefined,
      network: 'none',
    });
    const record: Record<string, unknown> = {
      type: spec.type,
      command: spec.command,
      exit_code: r.exitCode,
      output: keptOutput(r.stdout, r.stderr, input.secrets),
    };
    let report: Map<string, TestOutcome> | Error | null = null;
    try {
      if (spec.report) report = await readJunit(r.rewardDir!).catch((err: Error) => err);
    } finally {
      if (r.rewardDir) await fs.rm(r.rewardDir, { recursive: true, force: true });
    }
    const lost = forfeit(r, what, spec.timeout);
    if (lost) return { reward: 0, traceRewards: null, record: { ...record, forfeit: lost } };
    if (spec.report) {
      // Graded by the tests the report says passed; a test it does not name did not run.
      const named = spec.report.tests.map((id) => ({ id, kind: null }));
      const tests = gradeNamed(junitCovers, named, report instanceof Map ? report : new Map()).map(({ kind: _, ...t }) => t);
      const passed = tests.every((t) => t.outcome === 'passed');
      return {
        reward: passed ? 1 : 0,
        traceRewards: null,
        record: { ...record, graded_by: 'report', passed, tests, ...(report instanceof Error ? { report_problem: report.message } : {}) },
      };
    }
    const scored = commandReward(r.stdout, r.exitCode!);
    if ('problem' in scored) return { reward: 0, traceRewards: null, record: { ...record, forfeit: scored.problem } };
    if (scored.details) record.details = scored.details;
    if (scored.traceRewards && scored.traceRewards.length !== input.traceCount) {
      const problem = `the evaluator gave ${scored.traceRewards.length} trace rewards for a session of ${input.traceCount} traces`;
      return { reward: 0, traceRewards: null, record: { ...record, forfeit: problem } };
    }
    return { reward: scored.reward, traceRewards: scored.traceRewards, record };
  },
};
