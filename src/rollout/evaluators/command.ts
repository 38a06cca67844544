import { commandReward } from '../reward.js';
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
      rewardDir: false,
      network: 'none',
    });
    const record: Record<string, unknown> = {
      type: spec.type,
      command: spec.command,
      exit_code: r.exitCode,
      output: keptOutput(r.stdout, r.stderr, input.secrets),
    };
    const lost = forfeit(r, what, spec.timeout);
    if (lost) return { reward: 0, traceRewards: null, record: { ...record, forfeit: lost } };
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
