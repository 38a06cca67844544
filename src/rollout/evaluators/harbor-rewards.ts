import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parseDecimal } from '../reward-range.js';

/** A verifier's reward file, read: every numeric field of it (Harbor's metrics) and which file it was. */
export interface VerifierRewards {
  /** Each metric, as Harbor keeps them (verifier.py:102-108: numbers only, booleans not). */
  all: Record<string, number>;
  file: 'reward.json' | 'reward.txt';
}

/**
 * Reads a Harbor verifier's reward files as Harbor does, at the fork snapshot 15735640198/harbor
 * f276a3b, src/harbor/verifier/verifier.py: reward.json when it exists (:263-264), else reward.txt
 * (:265-266), else no reward (:267-272). reward.txt is one number (:67-80, Python's float() of the
 * whole file); reward.json's numeric fields are the metrics (:102-108), and only when it has no
 * `reward` is a reward.txt beside it read as the `reward`, if it parses (:121-129). Every numeric
 * field is a metric: Harbor keeps them all and averages each across trials (metrics/base.py:14-35),
 * so a reward.json need not have `reward`. Throws a plain Error saying what is wrong; which metric
 * is the sample's reward is chooseReward's, and whether it is in range reward-range.ts's.
 *
 * Stricter than Harbor, on purpose (issue 39, item 3), because test.sh may run the agent's code as
 * its own user (a test suite importing the agent's module), which can write /logs/verifier too:
 * - reward.txt must be a plain decimal (reward-range.ts parseDecimal): `0x1`, `0b1`, `Infinity`,
 *   `1_0` are no reward (JS Number() took the first three; Python's float() refuses them but
 *   takes `1_0` and `inf`).
 * - A reward.json metric that is a JSON number but not finite (`1e999` parses to Infinity) is no
 *   reward at all, not a metric dropped: the file is not what a verifier writes.
 * - Harbor's precedence lets a reward.json win over the reward.txt beside it (:263-266), so the
 *   agent's code writing {"reward": 1} under a test.sh that writes reward.txt would set the reward.
 *   Where both hold a `reward` and they differ, there is no reward: polar cannot tell which one the
 *   verifier wrote, so neither is believed (a verifier that writes both agrees with itself).
 * What polar cannot tell apart: a file the agent's code wrote while test.sh ran, as the same user,
 * from one test.sh wrote. A reward.json the agent's code writes where the verifier writes none (or
 * one the verifier writes without `reward` while the agent's code adds a reward.txt) reads as the
 * verifier's; only a verifier that runs the agent's code apart from /logs/verifier (a child with
 * its own view, as fixtures/harbor's do) closes that. What it can: nothing written before the
 * verifier started is read, since every verifier run gets a /logs/verifier made for it, empty
 * (environments/host.ts: a new folder bound there; container.ts: a fresh container, the folder
 * emptied after the agent's work is copied in).
 */
export async function readRewards(verifierDir: string): Promise<VerifierRewards> {
  const json = await readIf(path.join(verifierDir, 'reward.json'));
  const text = await readIf(path.join(verifierDir, 'reward.txt'));
  if (json === null && text === null) throw new Error('the verifier wrote no reward: neither /logs/verifier/reward.txt nor /logs/verifier/reward.json');
  const fromText = text === null ? null : parseDecimal(text);
  if (json === null) {
    if (fromText === null) throw new Error(`/logs/verifier/reward.txt is not one decimal number: ${JSON.stringify(text!.slice(0, 100))}`);
    return { all: { reward: fromText }, file: 'reward.txt' };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (err) {
    throw new Error(`/logs/verifier/reward.json is not JSON: ${JSON.stringify(json.slice(0, 100))}`, { cause: err });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new Error('/logs/verifier/reward.json must be an object ({"reward": x, …} or named metrics)');
  // fromEntries defines own fields: a metric named __proto__ stays a metric, not a prototype.
  const all: Record<string, number> = Object.fromEntries(Object.entries(parsed).filter(([, v]) => typeof v === 'number'));
  const infinite = Object.keys(all).filter((k) => !Number.isFinite(all[k]));
  if (infinite.length > 0) throw new Error(`/logs/verifier/reward.json's ${infinite.join(', ')} is not a finite number`);
  if (!Object.hasOwn(all, 'reward')) {
    // Harbor falls back to reward.txt only when it parses (:121-129); a bad one is then no reward here.
    if (fromText !== null) all.reward = fromText;
  } else if (text !== null && fromText !== all.reward) {
    throw new Error(
      `/logs/verifier/reward.json says "reward": ${all.reward} and reward.txt beside it ${fromText === null ? JSON.stringify(text.slice(0, 100)) : fromText}: the verifier's own files disagree, and the agent's code may have written either`,
    );
  }
  return { all, file: 'reward.json' };
}

/** The sample's reward and the metric it is; or why there is none, and whether --reward-key would say. */
export type RewardChoice = { reward: number; key: string } | { problem: string; needsKey: string[] | null };

/**
 * Which of a verifier's metrics is the sample's one reward (the number its advantages come from).
 * Harbor itself never picks one: it aggregates each metric apart (metrics/base.py:30-35), and its
 * tools read `reward` (e.g. trial/multi_step.py:254-258). So, in order:
 * 1. `--reward-key NAME`: the metric NAME. A file whose only metric is `reward` (reward.txt, or a
 *    plain {"reward": x}) gives that, so one flag serves a suite mixing plain and multi-metric tasks;
 *    any other file without NAME did not report what the rollout scores: no reward (a forfeit, as a
 *    missing reward is: the agent's code ran under the verifier, so it must not be a way out).
 * 2. `reward` (reward.txt fills it in for a reward.json without one).
 * 3. The only metric, when there is one.
 * 4. Several metrics and no `reward`: no reward, and `needsKey` lists them (the task's shape, not
 *    the agent's doing: `polar tasks check` reports such a task as needing --reward-key).
 */
export function chooseReward(all: Record<string, number>, rewardKey: string | null): RewardChoice {
  const keys = Object.keys(all);
  const has = (k: string) => Object.hasOwn(all, k);
  if (rewardKey !== null) {
    if (has(rewardKey)) return { reward: all[rewardKey]!, key: rewardKey };
    if (keys.length === 1 && keys[0] === 'reward') return { reward: all.reward!, key: 'reward' };
    return {
      problem: `the verifier reported ${keys.length === 0 ? 'no metric' : `the metrics ${keys.join(', ')}`} but not ${rewardKey}, which --reward-key names as the reward`,
      needsKey: null,
    };
  }
  if (has('reward')) return { reward: all.reward!, key: 'reward' };
  if (keys.length === 1) return { reward: all[keys[0]!]!, key: keys[0]! };
  if (keys.length === 0) return { problem: '/logs/verifier/reward.json has no numeric field', needsKey: null };
  return {
    problem: `/logs/verifier/reward.json has several metrics (${keys.join(', ')}) and no "reward": pass --reward-key NAME to say which is the sample's reward`,
    needsKey: keys,
  };
}

/**
 * A reward file as the verifier left it. The agent's code may have run under test.sh, so a symlink
 * there could point at any host file polar can read (and polar would quote it in an error): only a
 * regular file is read, opened without following a link.
 */
async function readIf(file: string): Promise<string | null> {
  let st: Awaited<ReturnType<typeof fs.lstat>>;
  try {
    st = await fs.lstat(file);
  } catch {
    return null;
  }
  if (!st.isFile()) throw new Error(`/logs/verifier/${path.basename(file)} is not a regular file`);
  const handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
  try {
    return (await handle.read({ buffer: Buffer.alloc(Math.min(st.size, 1024 * 1024)), position: 0 })).buffer.toString('utf8');
  } finally {
    await handle.close();
  }
}
