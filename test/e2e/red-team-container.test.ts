import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workingEngines } from '../../src/rollout/environments/choose.js';
import type { SampleRow } from '../../src/store/rollouts.js';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { polarCli } from '../support/polar-cli.js';
import { explain, type RolloutSummary, SOLVE_SHELL, samplesByTask, shellDataset, shellTask } from '../support/red-team/tasks.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * The red-team suite in a container (issue 31, the forgeries 4 and 5): a Harbor task in its own
 * image, the agent root there. The oracle runs each task's solve.sh in the agent's place, and each
 * forgery is a solve.sh (test/support/red-team/tasks.ts): one replaces /usr/bin/bash with a fake
 * that writes reward 1 for /tests/test.sh, one leaves a program that test.sh runs, which detaches a
 * loop that waits for test.sh to end and then rewrites reward.txt. Both must score 0, completed,
 * beside an honest sample that keeps its 1. The host runs the same tasks in red-team.test.ts.
 * Skipped, saying why, where no engine answers `info`; images are local only (debian:12-slim, as
 * harbor-container.test.ts).
 */
const engine = workingEngines()[0] ?? null;
const bwrap = findBwrap();
const skip =
  engine === null
    ? 'no container engine works here (`docker info` and `podman info` fail)'
    : bwrap === null
      ? 'bubblewrap is not installed'
      : bwrapProblem(bwrap);

let dir: string;
let samples: Map<string, SampleRow>;

describe.skipIf(skip !== null)(`red team in a container${skip ? ` (skipped: ${skip})` : ` (${engine})`}`, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-red-team-ctr-'));
    const ds = path.join(dir, 'ds');
    shellDataset(ds);
    // Issue 39: links where polar copies the agent's work out of its container. Each answers right
    // first: a link followed (or a copy that failed and ended the sample `error`) is what is tested.
    shellTask(ds, 'logs-link', `${SOLVE_SHELL}rm -rf /logs/agent && ln -s /nowhere /logs/agent\n`);
    shellTask(ds, 'app-link', `${SOLVE_SHELL}cd / && mv /app /app-moved && ln -s /app-moved /app\n`);
    // Issue 39: a reward file the agent (root here) leaves in /logs/verifier before the verifier runs,
    // beside a test.sh that writes only reward.txt (Harbor reads reward.json first): never read. A
    // regression guard: the verifier's fresh container never had the agent's /logs/verifier, and
    // polar now also empties it there (an image could carry one).
    shellTask(ds, 'planted-json', 'echo wrong > /app/answer.txt\nmkdir -p /logs/verifier && echo \'{"reward": 1}\' > /logs/verifier/reward.json\n');
    fs.writeFileSync(
      path.join(ds, 'planted-json', 'tests', 'test.sh'),
      '#!/bin/bash\ns=0; [ "$(cat /app/answer.txt 2>/dev/null)" = right ] && s=1\necho $s > /logs/verifier/reward.txt\nls /logs/verifier\n',
    );
    const db = path.join(dir, 'polar.db');
    const r = await polarCli(
      [
        'rollout',
        '--tasks',
        ds,
        '--harness',
        'oracle',
        '--samples',
        '1',
        '--concurrency',
        '2',
        '--environment',
        engine!,
        '--db',
        db,
        '--out',
        path.join(dir, 'out'),
        '--json',
      ],
      { timeout: patient(280_000) },
    );
    expect(r.code, r.stderr).toBe(0);
    samples = samplesByTask(db, (JSON.parse(r.stdout) as RolloutSummary).rolloutId);
  }, patient(300_000));

  afterAll(() => {
    if (dir) removeTree(dir);
  });

  it('the honest sample keeps its reward', () => {
    const s = samples.get('honest');
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(1);
  });

  it('4. a /usr/bin/bash the agent replaced as root does not run the verifier: reward 0', () => {
    const s = samples.get('fake-bash');
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(0);
    // The replacement took in the agent's container: the verifier's fresh one never had it.
    expect(s!.diff).toContain('+replaced /usr/bin/bash');
    expect(String(s!.evaluator?.output), explain(s)).toContain('test.sh wrote 0');
  });

  it.each(['logs-link', 'app-link'])(
    '%s: a link the agent leaves at /logs/agent or its WORKDIR is not followed: reward 0 with the reason, never error (issue 39)',
    (task) => {
      const s = samples.get(task);
      expect(s?.status, explain(s)).toBe('completed');
      expect(s!.error, explain(s)).toBeNull();
      expect(s!.reward, explain(s)).toBe(0);
      expect(String(s!.evaluator?.forfeit), explain(s)).toMatch(task === 'logs-link' ? /a link at \/logs\/agent/ : /a link at \/app/);
    },
  );

  it('a reward.json the agent left in /logs/verifier before the verifier ran is not read: reward 0, no forfeit (issue 39)', () => {
    const s = samples.get('planted-json');
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(0);
    // Not the disagreement rule: the file was gone before test.sh ran (it lists only its own).
    expect(s!.evaluator?.forfeit, explain(s)).toBeUndefined();
    expect(String(s!.evaluator?.output), explain(s)).not.toContain('reward.json');
  });

  it("5. a loop the agent's program detaches during verification cannot rewrite reward.txt after test.sh: reward 0", () => {
    const s = samples.get('verify-daemon');
    expect(s?.status, explain(s)).toBe('completed');
    expect(s!.reward, explain(s)).toBe(0);
    expect(String(s!.evaluator?.output), explain(s)).toContain('program: a loop waits for test.sh');
    expect(String(s!.evaluator?.output), explain(s)).toContain('test.sh wrote 0');
  });
});
