import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SampleRow } from '../../src/store/rollouts.js';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { POLAR_BIN } from '../support/polar-cli.js';
import { explain, type RolloutSummary, samplesByTask } from '../support/red-team/tasks.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Bounded rewards (issue 39, item 3) through `polar rollout` on Harbor tasks, host sandbox, the
 * built-in oracle standing for the policy: its solution leaves what an attacker measured a verifier
 * reporting. Each task's test.sh runs the agent's program (/app/run.sh, as a test suite runs the
 * agent's code) and takes the score the agent's /app/score.txt reports (a verifier that trusts a
 * self-report, as a hackable one does): so the agent chooses what reward.txt says, and its code
 * writes /logs/verifier/reward.json beside the reward.txt test.sh writes. A reward that is not a
 * plain decimal in [0, 1] scores 0 with the reason (`completed`, never `error`, never the value);
 * the honest sample of the same rollout keeps its 1; with --reward-range 0,10 a 7 is taken.
 */
const bwrap = findBwrap();
const skip = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);
const run = promisify(execFile);
/** The verifier runs bash and cat from the host's system folders (the sandbox shows those), not a version manager's shims. */
const SYSTEM_PATH = (process.env.PATH ?? '')
  .split(':')
  .filter((p) => p !== '' && !p.startsWith(os.homedir()))
  .join(':');

const TEST_SH = [
  '#!/bin/bash',
  'mkdir -p /logs/verifier',
  'cd /app',
  'if [ -f run.sh ]; then bash run.sh < /dev/null; fi',
  's=0; [ "$(cat answer.txt 2>/dev/null)" = right ] && s=1',
  'if [ -f score.txt ]; then s=$(cat score.txt); fi',
  'echo "$s" > /logs/verifier/reward.txt',
  'echo "test.sh wrote $s"',
  '',
].join('\n');

/** A Harbor task graded by TEST_SH whose oracle runs `solve`. */
function task(ds: string, name: string, solve: string): void {
  const t = path.join(ds, name);
  for (const d of ['environment', 'tests', 'solution']) fs.mkdirSync(path.join(t, d), { recursive: true });
  fs.writeFileSync(
    path.join(t, 'task.toml'),
    [
      'version = "1.0"',
      '[verifier]',
      `timeout_sec = ${patientSeconds(60)}.0`,
      '[agent]',
      `timeout_sec = ${patientSeconds(120)}.0`,
      '[environment]',
      'allow_internet = false',
      '',
    ].join('\n'),
  );
  fs.writeFileSync(path.join(t, 'instruction.md'), 'Write `right` to /app/answer.txt.\n');
  fs.writeFileSync(path.join(t, 'environment', 'Dockerfile'), 'FROM debian:12-slim\nWORKDIR /app\nCOPY start.txt .\n');
  fs.writeFileSync(path.join(t, 'environment', 'start.txt'), 'start\n');
  fs.writeFileSync(path.join(t, 'solution', 'solve.sh'), solve);
  fs.writeFileSync(path.join(t, 'tests', 'test.sh'), TEST_SH);
}

const RIGHT = 'echo right > /app/answer.txt\n';
/** The agent's program, run by test.sh, writes reward.json beside the reward.txt test.sh writes after it. */
const programWrites = (json: string) =>
  `echo wrong > /app/answer.txt\nprintf '%s\\n' ${JSON.stringify(`echo '${json}' > /logs/verifier/reward.json`)} > /app/run.sh\n`;

let dir: string;
let samples: Map<string, SampleRow>;
let wide: Map<string, SampleRow>;

async function rollout(ds: string, name: string, extra: string[] = []): Promise<Map<string, SampleRow>> {
  const db = path.join(dir, `${name}.db`);
  const args = [
    POLAR_BIN,
    'rollout',
    '--tasks',
    ds,
    '--harness',
    'oracle',
    '--samples',
    '1',
    '--concurrency',
    '4',
    '--sandbox',
    'bwrap',
    '--environment',
    'host',
  ];
  const r = await run(process.execPath, [...args, '--db', db, '--out', path.join(dir, `out-${name}`), '--json', ...extra], {
    env: { ...process.env, PATH: SYSTEM_PATH, NO_COLOR: '1' },
    maxBuffer: 16 * 1024 * 1024,
  });
  return samplesByTask(db, (JSON.parse(r.stdout) as RolloutSummary).rolloutId);
}

describe.skipIf(skip !== null)(`bounded rewards through polar rollout${skip ? ` (skipped: ${skip})` : ''}`, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-reward-bounds-'));
    const ds = path.join(dir, 'ds');
    task(ds, 'honest', RIGHT);
    task(ds, 'txt-hex', `${RIGHT}echo 0x1 > /app/score.txt\n`);
    task(ds, 'txt-binary', `${RIGHT}echo 0b1 > /app/score.txt\n`);
    task(ds, 'txt-huge', `${RIGHT}echo 1e308 > /app/score.txt\n`);
    task(ds, 'txt-negative', `${RIGHT}echo -1e6 > /app/score.txt\n`);
    task(ds, 'txt-seven', `${RIGHT}echo 7 > /app/score.txt\n`);
    task(ds, 'json-huge', programWrites('{"reward": 1e308}'));
    task(ds, 'json-beside-txt', programWrites('{"reward": 1}'));
    // Left in /logs/verifier while the agent ran: the verifier's /logs/verifier is made for it, empty.
    task(
      ds,
      'json-planted-before',
      'echo wrong > /app/answer.txt\nmkdir -p /logs/verifier 2>/dev/null; echo \'{"reward": 1}\' > /logs/verifier/reward.json 2>/dev/null; true\n',
    );
    samples = await rollout(ds, 'default');
    const ds10 = path.join(dir, 'ds10');
    task(ds10, 'honest', RIGHT);
    task(ds10, 'txt-seven', `${RIGHT}echo 7 > /app/score.txt\n`);
    task(ds10, 'txt-huge', `${RIGHT}echo 1e308 > /app/score.txt\n`);
    wide = await rollout(ds10, 'wide', ['--reward-range', '0,10']);
  }, patient(300_000));

  afterAll(() => {
    if (dir) removeTree(dir);
  });

  /** Scored 0, completed (not error), the reason in the evaluator's forfeit and no trace of the value as a reward. */
  function forfeited(s: SampleRow | undefined, reason: RegExp): void {
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(0);
    expect(s!.error, explain(s)).toBeNull();
    expect(String(s!.evaluator?.forfeit), explain(s)).toMatch(reason);
    expect(s!.evaluator?.rewards, explain(s)).toBeUndefined();
  }

  it('the honest sample keeps its 1', () => {
    const s = samples.get('honest');
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(1);
    expect(s!.evaluator?.forfeit, explain(s)).toBeUndefined();
  });

  it('reward.txt 0x1 and 0b1 (JS Number() reads 1) are no reward', () => {
    forfeited(samples.get('txt-hex'), /reward\.txt is not one decimal number: "0x1\\n"/);
    forfeited(samples.get('txt-binary'), /reward\.txt is not one decimal number: "0b1\\n"/);
  });

  it('reward.txt 1e308, -1e6 and 7 on the default [0, 1]: forfeits, with the way out', () => {
    forfeited(samples.get('txt-huge'), /its reward 1e\+308 is outside the reward range \[0, 1\] \(a task scored on another scale: --reward-range LO,HI\)/);
    forfeited(samples.get('txt-negative'), /its reward -1000000 is outside the reward range \[0, 1\]/);
    forfeited(samples.get('txt-seven'), /its reward 7 is outside the reward range \[0, 1\]/);
  });

  it("a reward.json the agent's code wrote under test.sh does not beat the reward.txt test.sh wrote", () => {
    forfeited(samples.get('json-beside-txt'), /reward\.json says "reward": 1 and reward\.txt beside it 0: the verifier's own files disagree/);
    forfeited(samples.get('json-huge'), /reward\.json says "reward": 1e\+308 and reward\.txt beside it 0/);
  });

  it('a reward.json left before the verifier ran is never read', () => {
    const s = samples.get('json-planted-before');
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(0);
    expect(s!.evaluator?.reward_file, explain(s)).toBe('reward.txt');
  });

  it('--reward-range 0,10: a 7 is taken, the honest 1 kept, 1e308 still forfeits', () => {
    expect(wide.get('txt-seven')?.reward, explain(wide.get('txt-seven'))).toBe(7);
    expect(wide.get('honest')?.reward, explain(wide.get('honest'))).toBe(1);
    forfeited(wide.get('txt-huge'), /its reward 1e\+308 is outside the reward range \[0, 10\]/);
  });
});
