import fs from 'node:fs/promises';
import { StageError } from '../stage-error.js';
import { resolveEnv } from '../harbor/env.js';
import { chooseReward, readRewards } from './harbor-rewards.js';
import { keptOutput } from './output.js';
import type { Evaluation, EvaluationInput, Evaluator } from './types.js';
import { verifierFiles } from './verifier-files.js';
import { networkHint } from '../harbor/network-hint.js';
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
    const seen: Seen = { files: {} };
    const evaluation = await runVerifier(input, seen);
    return explained(evaluation, seen.files, input);
  },
};

/** What the verifier left besides its rewards, read before its folder goes. */
interface Seen {
  files: Record<string, string>;
}

/**
 * A sample that earned 0 or was forfeited keeps the reasons the verifier's stdout may not give:
 * the tail of the files it wrote under /logs/verifier (verifier_files) and, where polar's lack of
 * network can explain it, the hint (network_hint).
 */
function explained(evaluation: Evaluation, files: Record<string, string>, input: EvaluationInput): Evaluation {
  const lost = typeof evaluation.record.forfeit === 'string' ? evaluation.record.forfeit : null;
  if (lost === null && evaluation.reward > 0) return evaluation;
  // A reward.json with several metrics and none named is the task's shape, not anything the network did.
  const shaped = evaluation.record.needs_reward_key !== undefined;
  const hint = input.task.harbor && !shaped ? networkHint(input.task.harbor, input.verifierNetwork, { reward: evaluation.reward, forfeit: lost }) : null;
  return {
    ...evaluation,
    record: { ...evaluation.record, ...(Object.keys(files).length > 0 ? { verifier_files: files } : {}), ...(hint ? { network_hint: hint } : {}) },
  };
}

async function runVerifier(input: EvaluationInput, seen: Seen): Promise<Evaluation> {
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
    if (r.rewardDir) seen.files = await verifierFiles(r.rewardDir, [...input.secrets, ...fromHost]);
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
    // The task's name, metadata and every metric travel with the sample into exports and reports,
    // with the metric its reward is (harbor-rewards.ts: chooseReward's rule), or why none is.
    const kept = { ...record, rewards: rewards.all, reward_file: rewards.file };
    const chosen = chooseReward(rewards.all, input.rewardKey);
    if ('problem' in chosen)
      return { reward: 0, traceRewards: null, record: { ...kept, forfeit: chosen.problem, ...(chosen.needsKey ? { needs_reward_key: chosen.needsKey } : {}) } };
    return { reward: chosen.reward, traceRewards: null, record: { ...kept, reward_key: chosen.key } };
  } finally {
    if (r.rewardDir) await fs.rm(r.rewardDir, { recursive: true, force: true });
  }
}
