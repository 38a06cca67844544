import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { Store } from '../../src/store/store.js';
import { BIN } from './support.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * A Harbor task whose verifier writes metrics only (no "reward"), as Harbor's rewardkit does
 * (packages/rewardkit/src/rewardkit/runner.py:345-354): the metrics are kept, the reward is the one
 * `--reward-key` names, and without it the sample scores 0 with a forfeit that says to pass it and
 * `polar tasks check` says so for the task (issue 32, 4). On the host environment (bubblewrap).
 */
const run = promisify(execFile);
const bwrap = findBwrap();
const noSandbox = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);
let dir: string;
let task: string;

const FILES: Record<string, string> = {
  'task.toml': `version = "1.0"\n\n[verifier]\ntimeout_sec = ${patientSeconds(60)}.0\n\n[agent]\ntimeout_sec = ${patientSeconds(60)}.0\n`,
  'instruction.md': 'Create the file /app/done.\n',
  'environment/Dockerfile': 'FROM debian:12\nWORKDIR /app\n',
  'solution/solve.sh': '#!/bin/bash\necho yes > /app/done\n',
  // correctness follows the work; style is 0.5 whatever the agent did.
  'tests/test.sh':
    '#!/bin/bash\nmkdir -p /logs/verifier\nc=0\n[ -f /app/done ] && c=1\nprintf \'{"correctness": %s, "style": 0.5, "note": "text"}\' "$c" > /logs/verifier/reward.json\n',
};

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-reward-key-'));
  task = path.join(dir, 'metrics-only');
  for (const [file, text] of Object.entries(FILES)) {
    fs.mkdirSync(path.dirname(path.join(task, file)), { recursive: true });
    fs.writeFileSync(path.join(task, file), text, { mode: 0o755 });
  }
});
afterAll(() => removeTree(dir));

async function polar(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1' }, timeout: patient(240_000) });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** One oracle sample of the task; its summary and its stored evaluator record. */
async function oracle(db: string, extra: string[]) {
  const r = await polar(['rollout', '--environment', 'host', '--tasks', task, '--harness', 'oracle', '--samples', '1', '--db', db, '--json', ...extra]);
  expect(r.code, r.stderr).toBe(0);
  const summary = JSON.parse(r.stdout) as { rolloutId: string; forfeited: number; groups: { rewards: number[] }[] };
  const store = Store.open(db, { readonly: true });
  try {
    const [sample] = store.rollouts.samples(summary.rolloutId);
    return { summary, sample: sample! };
  } finally {
    store.close();
  }
}

describe.skipIf(noSandbox !== null)(`a reward.json of metrics only${noSandbox ? ` (skipped: ${noSandbox})` : ''}`, () => {
  it("with --reward-key: that metric is the reward; every metric is kept in the record; the rollout's config stores the key", async () => {
    const db = path.join(dir, 'keyed.db');
    const { summary, sample } = await oracle(db, ['--reward-key', 'correctness']);
    expect(summary.forfeited).toBe(0);
    expect(summary.groups[0]!.rewards).toEqual([1]);
    expect(sample.evaluator).toMatchObject({ rewards: { correctness: 1, style: 0.5 }, reward_key: 'correctness', reward_file: 'reward.json' });
    expect(sample.evaluator).not.toHaveProperty('forfeit');
    const show = await polar(['rollout', 'show', summary.rolloutId, '--db', db, '--json']);
    expect(JSON.parse(show.stdout).rollout.config.rewardKey, show.stderr).toBe('correctness');
  });

  it('without it: 0 with a forfeit that names the metrics and --reward-key; the metrics are still kept', async () => {
    const { summary, sample } = await oracle(path.join(dir, 'plain.db'), []);
    expect(summary.forfeited).toBe(1);
    expect(summary.groups[0]!.rewards).toEqual([0]);
    expect(sample.evaluator).toMatchObject({
      rewards: { correctness: 1, style: 0.5 },
      needs_reward_key: ['correctness', 'style'],
      forfeit: expect.stringMatching(/several metrics \(correctness, style\) and no "reward": pass --reward-key NAME/),
    });
    // The task's shape, which the verifier's lack of network does not explain: no network hint.
    expect(sample.evaluator).not.toHaveProperty('network_hint');
  });

  it('polar tasks check says the task needs --reward-key (unverifiable here, not broken), and checks it with one', async () => {
    const without = await polar(['tasks', 'check', task, '--environment', 'host', '--no-forge', '--json']);
    type Run = { reward: number; needsRewardKey: string[] | null; networkHint: string | null };
    const out = JSON.parse(without.stdout) as {
      unverifiable: string[];
      results: { verdict: string; problems: string[]; unverifiable: string[]; oracle: Run }[];
    };
    expect(out.unverifiable, without.stderr).toEqual(['metrics-only']);
    expect(out.results[0]!.verdict).toBe('unverifiable');
    expect(out.results[0]!.problems).toEqual([]);
    expect(out.results[0]!.unverifiable).toEqual([expect.stringMatching(/several metrics \(correctness, style\) and no "reward": pass --reward-key NAME/)]);
    expect(out.results[0]!.oracle.needsRewardKey).toEqual(['correctness', 'style']);
    // The verifier's network explains nothing here: no hint.
    expect(out.results[0]!.oracle.networkHint).toBeNull();
    const keyed = await polar(['tasks', 'check', task, '--environment', 'host', '--no-forge', '--reward-key', 'correctness', '--json']);
    expect(keyed.code, keyed.stdout + keyed.stderr).toBe(0);
    expect(JSON.parse(keyed.stdout)).toMatchObject({ valid: ['metrics-only'], results: [{ verdict: 'valid', oracle: { reward: 1 }, nop: { reward: 0 } }] });
  });
});
