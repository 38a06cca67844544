import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { chooseReward, readRewards } from './harbor-rewards.js';
import { removeTree } from '../../../test/support/remove-tree.js';

const made: string[] = [];
afterAll(() => {
  for (const d of made) removeTree(d);
});

/** A /logs/verifier as a verifier left it. */
function dir(files: Record<string, string>): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-reward-'));
  made.push(d);
  for (const [f, t] of Object.entries(files)) fs.writeFileSync(path.join(d, f), t);
  return d;
}

describe('Harbor reward files: every numeric field is a metric (verifier.py:102-130)', () => {
  it('reward.txt is one number; reward.json wins and keeps its metrics', async () => {
    expect(await readRewards(dir({ 'reward.txt': '0.25\n' }))).toEqual({ all: { reward: 0.25 }, file: 'reward.txt' });
    expect(await readRewards(dir({ 'reward.json': '{"reward": 0.5, "style": 1, "note": "text is dropped", "ok": true}' }))).toEqual({
      all: { reward: 0.5, style: 1 },
      file: 'reward.json',
    });
    // Both, agreeing (as a verifier that writes both does): reward.json's, as Harbor reads it (:263-264).
    expect(await readRewards(dir({ 'reward.json': '{"reward": 0.5, "style": 1, "note": "text is dropped", "ok": true}', 'reward.txt': '0.50\n' }))).toEqual({
      all: { reward: 0.5, style: 1 },
      file: 'reward.json',
    });
    // No "reward" key: reward.txt gives it, beside the metrics.
    expect((await readRewards(dir({ 'reward.json': '{"acc": 0.75}', 'reward.txt': '1' }))).all).toEqual({ acc: 0.75, reward: 1 });
  });

  it('a reward.json of metrics only is read, not refused (rewardkit writes one such: runner.py:345-354)', async () => {
    expect(await readRewards(dir({ 'reward.json': '{"correctness": 0.5, "structure": 1, "quality": 0.25}' }))).toEqual({
      all: { correctness: 0.5, structure: 1, quality: 0.25 },
      file: 'reward.json',
    });
    // A reward.txt that does not parse is no fallback, as in Harbor (:121-129): the metrics stand.
    expect((await readRewards(dir({ 'reward.json': '{"a": 1, "b": 0}', 'reward.txt': 'passed' }))).all).toEqual({ a: 1, b: 0 });
    // A metric named like an Object field is a metric, not a prototype.
    expect((await readRewards(dir({ 'reward.json': '{"__proto__": 1, "constructor": 0}' }))).all).toEqual(
      Object.fromEntries([
        ['__proto__', 1],
        ['constructor', 0],
      ]),
    );
  });

  it('a missing or malformed reward file is an error that says which', async () => {
    await expect(readRewards(dir({}))).rejects.toThrow(/neither \/logs\/verifier\/reward\.txt nor/);
    await expect(readRewards(dir({ 'reward.txt': 'passed' }))).rejects.toThrow(/reward\.txt is not one decimal number/);
    await expect(readRewards(dir({ 'reward.txt': '' }))).rejects.toThrow(/reward\.txt is not one decimal number/);
    await expect(readRewards(dir({ 'reward.json': '{"reward": ' }))).rejects.toThrow(/reward\.json is not JSON/);
    await expect(readRewards(dir({ 'reward.json': '[1]' }))).rejects.toThrow(/reward\.json must be an object/);
  });

  it('reward.txt is a plain decimal: what JS Number() (or Python float()) takes beyond it is no reward (issue 39)', async () => {
    for (const bad of ['0x1', '0b1', '0o1', 'Infinity', '-Infinity', 'NaN', 'inf', 'nan', '1_0', '1e999', '', ' ', '1 1', '+', '.', 'e1', '1e', '0x1p0', '١'])
      await expect(readRewards(dir({ 'reward.txt': bad })), bad).rejects.toThrow(/reward\.txt is not one decimal number/);
    // Space around the number, a sign, a fraction, an exponent: as a verifier's echo or printf writes it.
    for (const [good, n] of [
      [' 1 \n', 1],
      ['0.5', 0.5],
      ['-0', 0],
      ['+1', 1],
      ['.5', 0.5],
      ['1.', 1],
      ['1e-3', 0.001],
      ['2.5E+2', 250],
      ['1e308', 1e308],
    ] as const)
      expect((await readRewards(dir({ 'reward.txt': good }))).all.reward, good).toBe(n);
    // Beside a reward.json without "reward", a bad reward.txt is no fallback (Harbor's float() refuses 0x1 too).
    expect((await readRewards(dir({ 'reward.json': '{"acc": 0.5}', 'reward.txt': '0x1' }))).all).toEqual({ acc: 0.5 });
  });

  it('a reward.json metric that is not finite (1e999 parses to Infinity) is no reward, not a dropped metric', async () => {
    await expect(readRewards(dir({ 'reward.json': '{"reward": 1e999}' }))).rejects.toThrow(/reward\.json's reward is not a finite number/);
    await expect(readRewards(dir({ 'reward.json': '{"reward": 1, "style": -1e999}' }))).rejects.toThrow(/reward\.json's style is not a finite number/);
    // JSON has no Infinity or NaN (Python's json.loads takes them): not JSON.
    await expect(readRewards(dir({ 'reward.json': '{"reward": Infinity}' }))).rejects.toThrow(/reward\.json is not JSON/);
    await expect(readRewards(dir({ 'reward.json': '{"reward": NaN}' }))).rejects.toThrow(/reward\.json is not JSON/);
  });

  it('reward.json and reward.txt that disagree on "reward": no reward (the agent\'s code under test.sh could have written either)', async () => {
    // The attack: test.sh runs the agent's program, which writes reward.json; test.sh then writes reward.txt.
    const both = readRewards(dir({ 'reward.json': '{"reward": 1}', 'reward.txt': '0\n' }));
    await expect(both).rejects.toThrow(/reward\.json says "reward": 1 and reward\.txt beside it 0: the verifier's own files disagree/);
    await expect(readRewards(dir({ 'reward.json': '{"reward": 1}', 'reward.txt': 'garbage' }))).rejects.toThrow(/reward\.txt beside it "garbage"/);
    await expect(readRewards(dir({ 'reward.json': '{"reward": 0}', 'reward.txt': '' }))).rejects.toThrow(/disagree/);
    // -0 and 0 are one reward.
    expect((await readRewards(dir({ 'reward.json': '{"reward": 0}', 'reward.txt': '-0' }))).all).toEqual({ reward: 0 });
  });

  it('a reward file that is a symlink (to a host file) is refused, not read', async () => {
    const d = dir({ secret: 'host secret\n' });
    fs.symlinkSync(path.join(d, 'secret'), path.join(d, 'reward.txt'));
    const err = await readRewards(d).catch((e: Error) => e);
    expect(String(err)).toMatch(/reward\.txt is not a regular file/);
    expect(String(err)).not.toMatch(/host secret/);
  });
});

describe('which metric is the reward (chooseReward)', () => {
  it('without --reward-key: "reward", else the only metric', () => {
    expect(chooseReward({ reward: 0.5, style: 1 }, null)).toEqual({ reward: 0.5, key: 'reward' });
    expect(chooseReward({ acc: 0.75 }, null)).toEqual({ reward: 0.75, key: 'acc' });
    expect(chooseReward({ acc: 0.75, reward: 1 }, null)).toEqual({ reward: 1, key: 'reward' });
  });

  it('several metrics and no "reward": no reward, and the metrics to choose from (pass --reward-key)', () => {
    const r = chooseReward({ correctness: 0.5, quality: 1 }, null);
    expect(r).toEqual({
      problem: expect.stringMatching(/several metrics \(correctness, quality\) and no "reward": pass --reward-key NAME/),
      needsKey: ['correctness', 'quality'],
    });
    // None at all is the verifier's failure to report, not a choice to make.
    expect(chooseReward({}, null)).toEqual({ problem: expect.stringMatching(/no numeric field/), needsKey: null });
  });

  it('--reward-key NAME: that metric, over "reward" and over an only one', () => {
    expect(chooseReward({ correctness: 0.5, quality: 1 }, 'quality')).toEqual({ reward: 1, key: 'quality' });
    expect(chooseReward({ reward: 1, correctness: 0 }, 'correctness')).toEqual({ reward: 0, key: 'correctness' });
    expect(chooseReward({ reward: 1 }, 'reward')).toEqual({ reward: 1, key: 'reward' });
  });

  it('--reward-key NAME on a plain task (its only metric is "reward") gives that: one flag serves a mixed suite', () => {
    expect(chooseReward({ reward: 0.25 }, 'correctness')).toEqual({ reward: 0.25, key: 'reward' });
  });

  it('--reward-key NAME that the verifier did not report: no reward, never another metric in its place', () => {
    // A verifier the agent's code ran under could drop the metric it scores badly on: falling back
    // to another (here a flattering one) would pay for that.
    const r = chooseReward({ compiled: 1 }, 'tests');
    expect(r).toEqual({ problem: expect.stringMatching(/reported the metrics compiled but not tests, which --reward-key names/), needsKey: null });
    expect(chooseReward({ reward: 1, compiled: 1 }, 'tests')).toMatchObject({ needsKey: null });
    expect(chooseReward({}, 'tests')).toMatchObject({ problem: expect.stringMatching(/reported no metric/) });
    // A name that is an Object field is looked up as a metric only.
    expect(chooseReward({ a: 1, b: 2 }, 'constructor')).toMatchObject({ needsKey: null });
  });
});
