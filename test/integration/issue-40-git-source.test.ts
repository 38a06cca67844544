import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnvironment } from '../../src/harness/env.js';
import { readTaskFile, type RolloutTask } from '../../src/rollout/task-file.js';
import { prepareWorkspace } from '../../src/rollout/workspace.js';
import { StageError } from '../../src/rollout/stage-error.js';
import { startRolloutBench, type RolloutBench } from '../support/agent-rollout.js';
import { polarCli } from '../support/polar-cli.js';
import { patient } from '../support/patience.js';

/**
 * Issue 40, item 3: a task whose local `workspace.git` is no repository. It was accepted, every
 * sample then ended `error` at INIT, and the error shown was 200 characters of polar's own git
 * command line (execa's "Command failed with exit code 128: git -c user.name=polar …"), never git's
 * reason. Now the task file is refused before anything starts, naming the task, the path and git's
 * reason; and a clone that fails anyway (the folder changed after the check) leads with git's reason.
 */
const polar = (args: string[]) => polarCli(args, { timeout: patient(120_000), maxBuffer: 64 * 1024 * 1024 });
const FIXTURE_TASKS = path.resolve(__dirname, '../../fixtures/tasks/tasks.jsonl');
const COMMIT = '0123456789abcdef0123456789abcdef01234567';

let bench: RolloutBench;
let plain: string;
let inner: string;
let repo: string;

beforeAll(async () => {
  bench = await startRolloutBench('polar-issue-40-git-');
  plain = path.join(bench.dir, 'plain');
  fs.mkdirSync(plain);
  fs.writeFileSync(path.join(plain, 'README.md'), 'not a repository\n');
  // A real repository with a plain folder inside: `git rev-parse` there finds the repository
  // above it, `git clone` of it does not.
  repo = path.join(bench.dir, 'repo');
  inner = path.join(repo, 'inner');
  fs.mkdirSync(inner, { recursive: true });
  fs.writeFileSync(path.join(inner, 'a.txt'), 'a\n');
  const git = (...args: string[]) => execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { stdio: 'ignore' });
  git('init', '--quiet');
  git('add', '.');
  git('commit', '--quiet', '-m', 'one');
}, patient(60_000));
afterAll(() => bench?.close());

function gitTask(name: string, source: string): string {
  return bench.taskFile(name, [{ id: 'not-a-repo', prompt: 'calls=1', workspace: { git: source, commit: COMMIT }, evaluator: { type: 'session-completed' } }]);
}

describe('a task whose workspace.git is a plain folder', () => {
  it(
    'polar rollout refuses it before anything starts, naming the task, the path and git’s reason',
    async () => {
      const tasks = gitTask('plain.jsonl', plain);
      const db = path.join(bench.dir, 'plain.db');
      const r = await polar(bench.args(tasks, db, ['--samples', '2']));
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain('nothing was started');
      expect(r.stderr).toContain(
        `task not-a-repo: git cannot clone ${plain}: git ls-remote failed (exit 128): fatal: '${plain}' does not appear to be a git repository`,
      );
      expect(r.stderr).not.toContain('Command failed');
      expect(r.stderr).not.toMatch(/polar rollout rol_/);
      expect(fs.existsSync(db)).toBe(false);
    },
    patient(120_000),
  );

  it(
    'polar tasks check refuses it the same way, before any oracle runs',
    async () => {
      const r = await polar(['tasks', 'check', gitTask('check.jsonl', plain), '--json']);
      expect(r.code, r.stdout).toBe(2);
      const { error } = JSON.parse(r.stdout);
      expect(error.code).toBe('POLAR_USAGE');
      expect(error.message).toContain(`task not-a-repo: git cannot clone ${plain}: git ls-remote failed (exit 128): fatal: '${plain}' does not appear`);
    },
    patient(120_000),
  );

  it('a plain folder inside another repository is refused too; a repository and a bundle pass', () => {
    const file = path.join(bench.dir, 'mixed.jsonl');
    fs.writeFileSync(
      file,
      `${JSON.stringify({ id: 'inner', prompt: 'p', workspace: { git: inner, commit: COMMIT }, evaluator: { type: 'session-completed' } })}\n`,
    );
    expect(() => readTaskFile(file)).toThrow(`task inner: git cannot clone ${inner}: git ls-remote failed (exit 128): fatal: '${inner}' does not appear`);
    fs.writeFileSync(
      file,
      `${JSON.stringify({ id: 'repo', prompt: 'p', workspace: { git: repo, commit: COMMIT }, evaluator: { type: 'session-completed' } })}\n`,
    );
    expect(readTaskFile(file)[0]!.workspace).toEqual({ git: repo, commit: COMMIT });
    // The fixture tasks' py-stats task clones a bundle file (`git ls-remote` cannot read one).
    expect(readTaskFile(FIXTURE_TASKS).some((t) => 'git' in t.workspace && t.workspace.git.endsWith('.bundle'))).toBe(true);
  });

  it("a clone that fails after the check says git's reason first, whole, then what polar ran", async () => {
    const task: RolloutTask = {
      id: 'gone',
      prompt: 'p',
      workspace: { git: plain, commit: COMMIT },
      setup: [],
      evaluator: { type: 'session-completed' },
      timeout: null,
      metadata: {},
    };
    const dest = path.join(bench.dir, 'workspaces', 'gone-0-a1');
    const err = await prepareWorkspace(task, dest, Date.now() + patient(30_000), baseEnvironment()).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StageError);
    const message = (err as StageError).message;
    const lead = `git clone failed (exit 128): fatal: repository '${plain}' does not exist (polar ran: git clone `;
    expect(message.slice(0, lead.length)).toBe(lead);
    expect(message).not.toContain('user.email=polar');
  });
});
