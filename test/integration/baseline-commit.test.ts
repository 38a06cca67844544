import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnvironment } from '../../src/harness/env.js';
import type { RolloutTask } from '../../src/rollout/task-file.js';
import { prepareWorkspace } from '../../src/rollout/workspace.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Two samples of a task get the same baseline commit: Claude Code's first prompt lists the recent
 * commits (git status), and NeMo-RL groups samples by their first prompt's token ids. Committed with
 * the wall clock, samples prepared a second apart got different hashes.
 */
let dir: string;
const task = (workspace: RolloutTask['workspace']): RolloutTask => ({
  id: 't',
  prompt: 'p',
  workspace,
  setup: [],
  evaluator: { type: 'command', command: 'true', timeout: 60 },
  timeout: null,
  metadata: {},
});

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-baseline-'));
  const src = path.join(dir, 'src');
  fs.mkdirSync(src);
  fs.writeFileSync(path.join(src, 'main.py'), 'print(1)\n');
  const repo = path.join(dir, 'repo');
  fs.mkdirSync(repo);
  fs.writeFileSync(path.join(repo, 'a.txt'), 'a\n');
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: repo });
  git('init', '--quiet');
  git('add', '.');
  git('commit', '--quiet', '-m', 'one');
});
afterAll(() => removeTree(dir));

describe('the baseline commit', () => {
  it.each([
    ['a folder', () => task({ dir: path.join(dir, 'src') })],
    ['an empty workspace', () => task({ empty: true })],
    ['a git clone', () => task({ git: path.join(dir, 'repo'), commit: 'HEAD' })],
  ])('of %s is the same commit in two samples prepared at different times', async (name, make) => {
    const t = make();
    const first = await prepareWorkspace(t, path.join(dir, `${name}-0`), Date.now() + patient(60_000), baseEnvironment());
    const second = await prepareWorkspace(t, path.join(dir, `${name}-1`), Date.now() + patient(60_000), baseEnvironment());
    expect(second.baseline).toBe(first.baseline);
    // Both commits carry the fixed author and committer, dated 2000-01-01, not the clock: a date taken
    // from the clock shows here at once, without waiting for the second to change between samples.
    for (const sample of [first, second]) {
      const log = execFileSync('git', ['log', '-1', '--format=%an <%ae> %aI|%cn <%ce> %cI'], { cwd: sample.dir, encoding: 'utf8' }).trim();
      expect(log, sample.dir).toBe('polar <polar@localhost> 2000-01-01T00:00:00+00:00|polar <polar@localhost> 2000-01-01T00:00:00+00:00');
    }
  });
});
