import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnvironment } from '../../src/harness/env.js';
import type { RolloutTask } from '../../src/rollout/task-file.js';
import { prepareWorkspace, type PreparedWorkspace } from '../../src/rollout/workspace.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 31: the agent's workspace git history holds only polar's baseline. A `git` workspace was a
 * clone checked out at the task's commit, so the source's later commits (the fix), its branches,
 * tags, reflog and packs were all in the agent's .git; a `dir` workspace carried its own .git the
 * same way. Here the source repository holds the fix in a later commit on a branch and a tag, packed
 * (`git gc`), and after INIT nothing of it may be found by any git command or in .git's files.
 */
const SECRET = 'THE-FIX-IS-HERE-3f9a';
let dir: string;
let repo: string;
let first: string;
let fix: string;

const task = (workspace: RolloutTask['workspace']): RolloutTask => ({
  id: 't',
  prompt: 'p',
  workspace,
  setup: [],
  evaluator: { type: 'command', command: 'true', timeout: 60 },
  timeout: null,
  metadata: {},
});

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'init.defaultBranch=main', ...args], { cwd, encoding: 'utf8' });
}

/**
 * A repository with the task's commit, then the fix on a later commit, branch and tag, all packed;
 * with `older`, an unrelated commit comes first (the same files at the task's commit, another hash).
 */
function sourceRepo(at: string, older = false): { first: string; fix: string } {
  fs.mkdirSync(at, { recursive: true });
  git(at, 'init', '--quiet');
  if (older) {
    fs.writeFileSync(path.join(at, 'old.txt'), 'older history\n');
    git(at, 'add', 'old.txt');
    git(at, 'commit', '--quiet', '-m', 'older history');
    git(at, 'rm', '--quiet', 'old.txt');
  }
  fs.writeFileSync(path.join(at, 'a.txt'), 'bug\n');
  fs.writeFileSync(path.join(at, '.gitignore'), '*.log\n');
  fs.writeFileSync(path.join(at, 'kept.log'), 'tracked although ignored\n');
  git(at, 'add', '.gitignore', 'a.txt');
  git(at, 'add', '--force', 'kept.log');
  git(at, 'commit', '--quiet', '-m', 'the task');
  const firstCommit = git(at, 'rev-parse', 'HEAD').trim();
  fs.writeFileSync(path.join(at, 'a.txt'), `${SECRET}\n`);
  git(at, 'commit', '--quiet', '-am', `fix: ${SECRET}`);
  const fixCommit = git(at, 'rev-parse', 'HEAD').trim();
  git(at, 'branch', `solution-${SECRET}`);
  git(at, 'tag', `v-${SECRET}`);
  git(at, 'gc', '--quiet');
  return { first: firstCommit, fix: fixCommit };
}

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-history-'));
  repo = path.join(dir, 'repo');
  ({ first, fix } = sourceRepo(repo));
});
afterAll(() => removeTree(dir));

/** Everything a policy could ask git or read in .git, checked for the source's history. */
function expectOnlyBaseline(ws: PreparedWorkspace): void {
  const g = (...args: string[]) => git(ws.dir, ...args);
  expect(g('log', '--all', '--format=%H').trim().split('\n')).toEqual([ws.baseline]);
  expect(g('log', '--all', '--format=%s')).not.toContain(SECRET);
  expect(g('for-each-ref', '--format=%(refname)').trim().split('\n')).toEqual(['refs/heads/main']);
  const reflog = g('reflog', '--all', '--format=%H %gs');
  for (const hash of [first, fix]) expect(reflog).not.toContain(hash);
  const objects = g('cat-file', '--batch-all-objects', '--batch-check=%(objectname)').trim().split('\n').sort();
  expect(objects).toEqual(
    g('rev-list', '--objects', '--all')
      .trim()
      .split('\n')
      .map((l) => l.split(' ')[0]!)
      .sort(),
  );
  const contents = execFileSync('git', ['cat-file', '--batch-all-objects', '--batch'], { cwd: ws.dir, encoding: 'utf8' });
  expect(contents).not.toContain(SECRET);
  for (const hash of [first, fix]) expect(() => execFileSync('git', ['cat-file', '-e', hash], { cwd: ws.dir, stdio: 'ignore' })).toThrow();
  // .git's own files, uncompressed ones included (packed-refs, logs, config, FETCH_HEAD, ORIG_HEAD).
  const grep = spawnSync('grep', ['-rl', SECRET, '.git'], { cwd: ws.dir, encoding: 'utf8' });
  expect(grep.status, grep.stdout).toBe(1);
  expect(fs.existsSync(path.join(ws.dir, '.git', 'packed-refs'))).toBe(false);
  expect(fs.readdirSync(path.join(ws.dir, '.git', 'objects', 'pack'))).toEqual([]);
  // The files are the task's commit, the force-added ignored one among them, and git sees them clean.
  expect(fs.readFileSync(path.join(ws.dir, 'a.txt'), 'utf8')).toBe('bug\n');
  expect(g('ls-files').trim().split('\n').sort()).toEqual(['.gitignore', 'a.txt', 'kept.log']);
  expect(g('status', '--porcelain')).toBe('');
}

describe("the agent's workspace history", () => {
  it('of a git clone at an earlier commit holds only the baseline: no later commit, branch, tag, reflog or pack', async () => {
    const ws = await prepareWorkspace(task({ git: repo, commit: first }), path.join(dir, 'clone'), Date.now() + patient(60_000), baseEnvironment());
    expectOnlyBaseline(ws);
  });

  it("of a folder carrying its own .git holds only the baseline, the folder's history left out", async () => {
    const folder = path.join(dir, 'folder');
    const own = sourceRepo(folder, true);
    git(folder, 'checkout', '--quiet', own.first);
    const ws = await prepareWorkspace(task({ dir: folder }), path.join(dir, 'from-folder'), Date.now() + patient(60_000), baseEnvironment());
    expectOnlyBaseline(ws);
    for (const hash of [own.first, own.fix]) expect(() => execFileSync('git', ['cat-file', '-e', hash], { cwd: ws.dir, stdio: 'ignore' })).toThrow();
    // The same files as the clone's at its task commit, from another history: the same baseline.
    const fromClone = await prepareWorkspace(task({ git: repo, commit: first }), path.join(dir, 'clone-2'), Date.now() + patient(60_000), baseEnvironment());
    expect(own.first).not.toBe(first);
    expect(ws.baseline).toBe(fromClone.baseline);
  });

  it("a tracked ignored file a setup command removed stays out, and the setup's own .git goes too", async () => {
    const t = {
      ...task({ git: repo, commit: first }),
      // The commit first: kept.log stays in the old index, missing on disk.
      setup: [`git -c user.name=s -c user.email=s@s commit --quiet --allow-empty -m "setup: ${SECRET}"`, 'rm kept.log'],
    };
    const ws = await prepareWorkspace(t, path.join(dir, 'setup-removed'), Date.now() + patient(60_000), baseEnvironment());
    expect(git(ws.dir, 'ls-files').trim().split('\n').sort()).toEqual(['.gitignore', 'a.txt']);
    expect(git(ws.dir, 'log', '--all', '--format=%H %s').trim()).toBe(`${ws.baseline} polar baseline`);
  });

  it('a .git symlink to a repository on the host is replaced, not followed: the host repository gets no commit', async () => {
    const folder = path.join(dir, 'linked');
    fs.mkdirSync(folder);
    fs.writeFileSync(path.join(folder, 'a.txt'), 'bug\n');
    fs.symlinkSync(path.join(repo, '.git'), path.join(folder, '.git'));
    const before = git(repo, 'rev-parse', '--all');
    const ws = await prepareWorkspace(task({ dir: folder }), path.join(dir, 'from-linked'), Date.now() + patient(60_000), baseEnvironment());
    expect(fs.lstatSync(path.join(ws.dir, '.git')).isDirectory()).toBe(true);
    expect(git(ws.dir, 'log', '--all', '--format=%H').trim()).toBe(ws.baseline);
    expect(git(repo, 'rev-parse', '--all')).toBe(before);
  });
});
