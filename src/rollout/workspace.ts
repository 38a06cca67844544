import fs from 'node:fs/promises';
import path from 'node:path';
import { runCommand } from '../core/process/command.js';
import { runShell } from '../core/process/shell.js';
import type { HarnessCommand } from '../harness/types.js';
import type { Jail } from '../sandbox/index.js';
import type { RolloutTask } from './task-file.js';
import { buildStartingState, logsDir } from './harbor/trial.js';
import { StageError } from './stage-error.js';

/**
 * A session's workspace: prepared at INIT from the task (a copy of a folder, a clone at a commit,
 * or an empty folder), then the task's setup commands, then a baseline commit of everything, so the
 * agent's changes are exactly `git diff` against it whatever the workspace was. The same preparation
 * makes the fresh copy a `tests` evaluator applies the diff to.
 */
/** Paths a harness may leave in the workspace that are not the agent's work. */
export const HARNESS_DIRS = ['.claude', '.codex', '.gemini', '.qwen', '.pi', '.opencode', '.polar'];

/** Opens a sandbox for one command run in `cwd` (setup, polar's git on an agent's workspace). */
export type OpenSandbox = (cwd: string) => Promise<Jail>;

// Hooks and an fsmonitor are commands a workspace's own config could make polar's git run.
const GIT = [
  '-c',
  'user.name=polar',
  '-c',
  'user.email=polar@localhost',
  '-c',
  'commit.gpgsign=false',
  '-c',
  'core.hooksPath=/dev/null',
  '-c',
  'core.fsmonitor=false',
  '-c',
  'init.defaultBranch=main',
];
// The user's own git config stays in effect (a clone of a private repository needs its credential
// helper); on the agent's workspace polar's git runs sandboxed, where that config is not visible.
const GIT_ENV = { GIT_TERMINAL_PROMPT: '0' };
/**
 * The baseline commit's identity and dates, fixed: two samples of a task with the same files get
 * the same commit hash, and harnesses put it in their first prompt (Claude Code's git status lists
 * recent commits), which NeMo-RL groups samples by. The wall clock would make each sample its own.
 */
export const BASELINE_COMMIT_ENV = {
  GIT_AUTHOR_NAME: 'polar',
  GIT_AUTHOR_EMAIL: 'polar@localhost',
  GIT_COMMITTER_NAME: 'polar',
  GIT_COMMITTER_EMAIL: 'polar@localhost',
  GIT_AUTHOR_DATE: '2000-01-01T00:00:00Z',
  GIT_COMMITTER_DATE: '2000-01-01T00:00:00Z',
};

export interface PreparedWorkspace {
  dir: string;
  /** The commit holding the workspace as the agent got it. */
  baseline: string;
}

/**
 * Builds the workspace in `dest` (which must not exist) within `deadline` (ms since the epoch). The
 * task's setup commands run in `sandbox` when given; the copy and clone are polar's own, on what the
 * task names, and run outside it. After setup commands the baseline commit runs in `gitSandbox`:
 * a setup command could have left a clean filter or an fsmonitor in .git/config.
 */
export async function prepareWorkspace(
  task: RolloutTask,
  dest: string,
  deadline: number,
  env: Record<string, string>,
  sandbox?: OpenSandbox,
  gitSandbox?: OpenSandbox,
  /** Fills `dest` instead of the task's own starting state (a container sample: its WORKDIR copied out). */
  fill?: (dest: string) => Promise<void>,
): Promise<PreparedWorkspace> {
  const left = () => {
    const ms = deadline - Date.now();
    if (ms <= 0) throw new StageError('init', 'the session budget ran out while preparing the workspace', true);
    return ms;
  };
  await fs.mkdir(path.dirname(dest), { recursive: true });
  const ws = task.workspace;
  if (fill) {
    await fill(dest);
  } else if (task.harbor) {
    await buildStartingState(task.harbor, dest);
  } else if ('dir' in ws) {
    await fs.cp(ws.dir, dest, { recursive: true, verbatimSymlinks: true });
  } else if ('git' in ws) {
    await git(['clone', '--quiet', '--no-checkout', ws.git, dest], path.dirname(dest), env, left(), 'clone');
    await git(['checkout', '--quiet', '--detach', ws.commit], dest, env, left(), `check out ${ws.commit}`);
  } else {
    await fs.mkdir(dest, { recursive: true });
  }
  for (const [i, command] of task.setup.entries()) {
    const jail = sandbox ? await sandbox(dest) : null;
    const r = await runShell(command, { cwd: dest, env, timeoutMs: left(), ...(jail ? { wrap: (c: HarnessCommand) => jail.wrap(c) } : {}) });
    const limit = (await jail?.close({ exitCode: r.exitCode, signal: r.signal })) ?? null;
    if (limit) throw new StageError('init', `setup command ${i + 1} (${command}): ${limit}`);
    if (r.timedOut) throw new StageError('init', `setup command ${i + 1} (${command}) ran past the session budget`, true);
    if (r.failedToStart || r.exitCode !== 0) {
      throw new StageError(
        'init',
        `setup command ${i + 1} (${command}) failed: ${r.failedToStart ?? `exit ${r.exitCode ?? r.signal}`}${lastLines(r.stderr || r.stdout)}`,
      );
    }
  }
  // A Harbor task's files come from a downloaded dataset: a .git/config among them could name a
  // clean filter, so polar's git on them runs sandboxed too.
  const jail = (task.setup.length > 0 || task.harbor) && gitSandbox ? await gitSandbox(dest) : null;
  const wrap = jail ? (c: HarnessCommand) => jail.wrap(c) : undefined;
  try {
    if (!(await exists(path.join(dest, '.git')))) await git(['init', '--quiet'], dest, env, left(), 'init', 'init', wrap);
    await git(['add', '--all', '--', '.', ...excludes()], dest, env, left(), 'stage the baseline', 'init', wrap);
    await git(
      ['commit', '--quiet', '--allow-empty', '--no-verify', '-m', 'polar baseline'],
      dest,
      { ...env, ...BASELINE_COMMIT_ENV },
      left(),
      'commit the baseline',
      'init',
      wrap,
    );
    const baseline = (await git(['rev-parse', 'HEAD'], dest, env, left(), 'read the baseline', 'init', wrap)).trim();
    return { dir: dest, baseline };
  } finally {
    await jail?.close();
  }
}

/**
 * The agent's changes since the baseline, as a binary-safe patch (harness folders left out). The
 * agent had the workspace, its `.git` included (a clean filter or a `.git` file pointing elsewhere
 * would be commands or paths of its choosing), so with a sandbox this git runs inside one too.
 */
export async function captureDiff(ws: PreparedWorkspace, env: Record<string, string>, sandbox?: OpenSandbox): Promise<string> {
  const jail = sandbox ? await sandbox(ws.dir) : null;
  const wrap = jail ? (c: HarnessCommand) => jail.wrap(c) : undefined;
  try {
    await git(['add', '--all', '--', '.', ...excludes()], ws.dir, env, 60_000, 'stage the changes', 'post', wrap);
    return await git(['diff', '--cached', '--binary', ws.baseline, '--', '.', ...excludes()], ws.dir, env, 60_000, 'diff', 'post', wrap);
  } finally {
    await jail?.close();
  }
}

/** Applies a captured diff to a freshly prepared workspace. */
export async function applyDiff(ws: PreparedWorkspace, diff: string, env: Record<string, string>): Promise<void> {
  if (diff.trim() === '') return;
  const file = path.join(path.dirname(ws.dir), `${path.basename(ws.dir)}.patch`);
  await fs.writeFile(file, diff);
  try {
    await git(['apply', '--whitespace=nowarn', '--binary', file], ws.dir, env, 60_000, "apply the agent's diff", 'post');
  } finally {
    await fs.rm(file, { force: true });
  }
}

export async function removeWorkspace(dir: string): Promise<void> {
  await fs.rm(dir, { recursive: true, force: true });
  // A Harbor task's /logs, kept beside its workspace.
  await fs.rm(logsDir(dir), { recursive: true, force: true });
}

/** Where one attempt of a sample works: each attempt its own folder, so a retry never sees the last one's files. */
export function workspaceDir(outDir: string, taskId: string, sampleIndex: number, attempt: number): string {
  return path.join(outDir, 'workspaces', `${taskId}-${sampleIndex}-a${attempt}`);
}

function excludes(): string[] {
  return HARNESS_DIRS.map((d) => `:(exclude)${d}`);
}

async function git(
  args: string[],
  cwd: string,
  env: Record<string, string>,
  timeoutMs: number,
  what: string,
  stage: 'init' | 'post' = 'init',
  wrap?: (c: HarnessCommand) => HarnessCommand,
): Promise<string> {
  const plain: HarnessCommand = { file: 'git', args: [...GIT, ...args], env: { ...env, ...GIT_ENV } };
  const cmd = wrap ? wrap(plain) : plain;
  const r = await runCommand(cmd.file, cmd.args, { cwd, env: cmd.env, timeoutMs });
  if (r.failed || r.exitCode !== 0) throw new StageError(stage, `git could not ${what}: ${r.failed ?? `exit ${r.exitCode}`}${lastLines(r.output)}`);
  return r.stdout;
}

function lastLines(text: string): string {
  const lines = text.trim().split('\n').slice(-3).join(' | ');
  return lines ? ` — ${lines.slice(0, 500)}` : '';
}

async function exists(p: string): Promise<boolean> {
  try {
    await fs.access(p);
    return true;
  } catch {
    return false;
  }
}
