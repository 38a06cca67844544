import fs from 'node:fs/promises';
import { StageError } from '../stage-error.js';
import { resolveEnv } from '../harbor/env.js';
import { readRewards } from './harbor-rewards.js';
import { keptOutput } from './output.js';
import type { Evaluator } from './types.js';
import { forfeit } from './verdict.js';

/**
 * A Harbor task's verifier: `bash /tests/test.sh` after the agent ended, tests/ shown at /tests only
 * now, under [verifier].timeout_sec, env and user, in the place the sample's environment gives
 * (one the agent never touched); its reward files read once from a /logs/verifier made empty for
 * it, after everything it started is dead. A verifier the agent's code could have cut short, or
 * that left no reward (or one that does not parse), scores 0 with the reason: its files are not
 * read. A task whose own verifier is broken shows in `polar tasks check` (the oracle misses).
 */
export const harborEvaluator: Evaluator<'harbor'> = {
  type: 'harbor',
  async evaluate(input) {
    const trial = input.task.harbor;
    if (!trial) throw new StageError('post', 'a Harbor verifier needs its task folder');
    const taskEnv = resolveEnv(trial.verifierEnv, 'post');
    const what = 'the verifier (tests/test.sh)';
    const r = await input.verification.run({
      command: 'bash /tests/test.sh',
      what,
      workspace: input.workspace.dir,
      env: { ...input.env, ...taskEnv },
      timeoutMs: trial.verifierTimeoutSec * 1000,
      readOnly: [{ source: trial.testsDir, dest: '/tests' }],
      rewardDir: true,
      network: input.verifierNetwork,
      ...(trial.verifierUser !== undefined ? { user: trial.verifierUser } : {}),
    });
    try {
      // Values taken from this machine's environment (an LLM judge's API key) are never stored.
      const fromHost = Object.entries(taskEnv)
        .filter(([k, v]) => v !== trial.verifierEnv[k])
        .map(([, v]) => v);
      const output = keptOutput(r.stdout, r.stderr, [...input.secrets, ...fromHost]);
      const record: Record<string, unknown> = {
        type: 'harbor',
        task: trial.name,
        ...(input.verification.environment === 'host' ? {} : { environment: input.verification.environment }),
        verifier_place: input.verification.place,
        exit_code: r.exitCode,
        output,
        metadata: input.task.metadata,
      };
      const lost = forfeit(r, what, trial.verifierTimeoutSec);
      if (lost) return { reward: 0, traceRewards: null, record: { ...record, forfeit: lost } };
      const rewards = await readRewards(r.rewardDir!).catch((err: Error) => err);
      if (rewards instanceof Error) return { reward: 0, traceRewards: null, record: { ...record, forfeit: rewards.message } };
      // The task's name, metadata and named rewards travel with the sample into exports and reports.
      return { reward: rewards.reward, traceRewards: null, record: { ...record, rewards: rewards.all, reward_file: rewards.file } };
    } finally {
      if (r.rewardDir) await fs.rm(r.rewardDir, { recursive: true, force: true });
    }
  },
};
