import type { Stats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { runCommand } from '../core/process/command.js';
import { commandFailure } from '../core/process/failure.js';
import { runShell } from '../core/process/shell.js';
import type { HarnessCommand } from '../harness/types.js';
import type { Bind, Jail } from '../sandbox/index.js';
import type { RolloutTask } from './task-file.js';
import { buildStartingState, logsDir } from './harbor/trial.js';
import { Forfeit, StageError } from './stage-error.js';

/**
 * A session's workspace: prepared at INIT from the task (a copy of a folder, a clone at a commit,
 * or an empty folder), then the task's setup commands, then a baseline commit of everything, so the
 * agent's changes are exactly `git diff` against it whatever the workspace was. The same preparation
 * makes the fresh copy a `tests` evaluator applies the diff to.
 */
/** Paths a harness may leave in the workspace that are not the agent's work. */
export const HARNESS_DIRS = ['.claude', '.codex', '.gemini', '.qwen', '.pi', '.opencode', '.polar'];

/** Opens a sandbox for one command run in `cwd` (setup, polar's git on an agent's workspace), with `binds` besides. */
export type OpenSandbox = (cwd: string, binds?: readonly Bind[]) => Promise<Jail>;

// Hooks and an fsmonitor are commands a workspace's own config could make polar's git run; an
// attributes file outside the repository could name a filter driver for the workspace's files.
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
  '-c',
  'core.attributesFile=/dev/null',
];
const GIT_ENV = { GIT_TERMINAL_PROMPT: '0' };
/**
 * polar's git on workspace content (the baseline commit, the agent's diff, its application) reads
 * no configuration but the repository's own, which polar wrote: no /etc/gitconfig, ~/.gitconfig or
 * XDG config (a filter or diff driver defined there runs on files a `.gitattributes` in the task or
 * the agent's diff selects: `* filter=evil`), no system attributes, and none of the caller's GIT_*
 * variables (GIT_DIR, GIT_EXTERNAL_DIFF, GIT_CONFIG_PARAMETERS would each redirect or run something).
 * The one exception is the clone and checkout of a `git` workspace: they are the task's, not the
 * agent's, and a private repository needs the user's credential helper.
 */
const NEUTRAL_ENV = { GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_ATTR_NOSYSTEM: '1' };
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
  /**
   * polar's own copy of the baseline repository, outside the workspace (keepBaseline): the agent's
   * diff is taken with it, whatever the agent did to the workspace's .git. Absent: the workspace's.
   */
  gitDir?: string;
}

/**
 * What polar diffs of an agent's work, at most: the files that changed or are new (untracked and
 * not ignored), their count and their total size. The patch is stored in the database and applied
 * to a fresh copy; without a cap, 1.4 GB of sparse files kept `git add` busy past its timeout and the
 * sample ended `error` (issue 39). Past either, the sample forfeits with the largest files named.
 */
export const DIFF_MAX_BYTES = 256 * 1024 ** 2;
export const DIFF_MAX_FILES = 100_000;
/** Where polar's baseline repository appears inside the sandbox its git runs in (its private /tmp). */
const BASELINE_INSIDE = '/tmp/polar-baseline.git';

/**
 * Builds the workspace in `dest` (which must not exist) within `deadline` (ms since the epoch). The
 * task's setup commands run in `sandbox` when given; the copy and clone are polar's own, on what the
 * task names, and run outside it. After setup commands the baseline commit runs in `gitSandbox`:
 * a setup command could have left a clean filter or an fsmonitor in .git/config.
 *
 * The workspace's git history is the baseline commit alone (freshBaseline): whatever .git the
 * clone, the folder, the Harbor environment or a setup command left is replaced, so the agent finds
 * no later commit, ref, reflog or pack of the source repository (the fix, in a benchmark's repo).
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
    if (ms <= 0) throw new StageError('init', 'preparing the workspace ran past its budget', { timedOut: true });
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
    await git(['clone', '--quiet', '--no-checkout', ws.git, dest], path.dirname(dest), env, left(), 'clone', { userConfig: true, said: true });
    await git(['checkout', '--quiet', '--detach', ws.commit], dest, env, left(), 'checkout', { userConfig: true, said: true });
  } else {
    await fs.mkdir(dest, { recursive: true });
  }
  for (const [i, command] of task.setup.entries()) {
    const jail = sandbox ? await sandbox(dest) : null;
    const r = await runShell(command, { cwd: dest, env, timeoutMs: left(), ...(jail ? { wrap: (c: HarnessCommand) => jail.wrap(c) } : {}) });
    const limit = (await jail?.close({ exitCode: r.exitCode, signal: r.signal })) ?? null;
    if (limit) throw new StageError('init', `setup command ${i + 1} (${command}): ${limit}`);
    if (r.timedOut) throw new StageError('init', `setup command ${i + 1} (${command}) ran past the workspace's preparation budget`, { timedOut: true });
    if (r.failedToStart || r.exitCode !== 0)
      throw new StageError('init', commandFailure(`setup command ${i + 1}`, { ...r, startError: r.failedToStart }, command));
  }
  // A Harbor task's files come from a downloaded dataset: a .git/config among them could name a
  // clean filter, so polar's git on them runs sandboxed too.
  const jail = (task.setup.length > 0 || task.harbor) && gitSandbox ? await gitSandbox(dest) : null;
  const wrap = jail ? (c: HarnessCommand) => jail.wrap(c) : undefined;
  try {
    return { dir: dest, baseline: await freshBaseline(dest, env, left, wrap) };
  } finally {
    await jail?.close();
  }
}

/**
 * Replaces `dir`'s .git (a folder, a `gitdir:` file or a symlink: removed, never followed) with a
 * new repository holding one commit of the files as they are, on one branch: the baseline. Its hash
 * depends on the files alone (fixed identity and dates, no parent), so two samples of a task get
 * the same one. Files the old repository tracked although its .gitignore matches them (added with
 * --force upstream) stay in the baseline, as they were when it was a commit on top of the source's.
 */
async function freshBaseline(dir: string, env: Record<string, string>, left: () => number, wrap?: (c: HarnessCommand) => HarnessCommand): Promise<string> {
  const dotGit = path.join(dir, '.git');
  const old = await fs.lstat(dotGit).catch(() => null);
  let forced: string[] = [];
  if (old?.isDirectory()) {
    // A folder named .git that is no repository has nothing tracked to keep.
    const listed = await git(
      ['ls-files', '-z', '--cached', '--ignored', '--exclude-standard', '--', '.', ...excludes()],
      dir,
      env,
      left(),
      'ls-files (the tracked files)',
      {
        wrap,
      },
    ).catch(() => '');
    // One a setup command removed is not the agent's to see (and `git add` would refuse it).
    const present = await Promise.all(
      listed.split('\0').map((f) =>
        f === ''
          ? null
          : fs.lstat(path.join(dir, f)).then(
              () => f,
              () => null,
            ),
      ),
    );
    forced = present.filter((f): f is string => f !== null);
  }
  await fs.rm(dotGit, { recursive: true, force: true });
  const init = ['init', '--quiet'];
  const add = ['add', '--all', '--', '.', ...excludes()];
  const commit = ['commit', '--quiet', '--allow-empty', '--no-verify', '-m', 'polar baseline'];
  const head = ['rev-parse', 'HEAD'];
  if (forced.length === 0) {
    // One command line for the four steps: in the sandbox each command is a sandbox start.
    const out = await gitSteps([init, add, commit, head], dir, env, left(), 'init, add and commit (the baseline)', { wrap, commitEnv: BASELINE_COMMIT_ENV });
    return out.trim();
  }
  await git(init, dir, env, left(), 'init (the baseline)', { wrap });
  await git(add, dir, env, left(), 'add (the baseline)', { wrap });
  // Files the old repository tracked although ignored: the agent gets them as the task had them.
  const list = path.join(dotGit, 'polar-forced');
  await fs.writeFile(list, forced.join('\0'));
  try {
    const addForced = ['--literal-pathspecs', 'add', '--force', '--pathspec-from-file=.git/polar-forced', '--pathspec-file-nul'];
    await git(addForced, dir, env, left(), 'add --force (the tracked ignored files)', { wrap });
  } finally {
    await fs.rm(list, { force: true });
  }
  await git(commit, dir, env, left(), 'commit (the baseline)', { wrap, commitEnv: BASELINE_COMMIT_ENV });
  return (await git(head, dir, env, left(), 'rev-parse HEAD (the baseline)', { wrap })).trim();
}

/** Where keepBaseline keeps polar's copy of a workspace's baseline repository: beside it, never inside. */
export function baselineGitDir(dir: string): string {
  return `${dir}-baseline.git`;
}

/**
 * A copy of the baseline repository polar just made (freshBaseline), kept outside the workspace
 * before the agent starts, for captureDiff. The agent owns the workspace's .git: it can remove it
 * (`rm -rf .git`), corrupt HEAD or the index, replace it with a `gitdir:` file, or add a clean
 * filter that fails (`filter.x.required`), and with the diff taken there each ended its sample
 * `error`. A copy, not hard links: the agent could write through a shared inode into polar's objects.
 */
export async function keepBaseline(ws: PreparedWorkspace): Promise<PreparedWorkspace> {
  const gitDir = baselineGitDir(ws.dir);
  await fs.rm(gitDir, { recursive: true, force: true });
  await fs.cp(path.join(ws.dir, '.git'), gitDir, { recursive: true, verbatimSymlinks: true });
  return { ...ws, gitDir };
}

/**
 * The agent's changes since the baseline, as a binary-safe patch (harness folders left out): `git
 * add --all` then `git diff --cached --binary` against the baseline commit, untracked files included
 * and the workspace's .gitignore honoured. With keepBaseline's copy (`ws.gitDir`) git reads polar's
 * repository, never the workspace's .git: not its config (filter, diff and fsmonitor commands, a
 * required filter that fails), not its index, HEAD or objects. A `.gitattributes` the agent wrote
 * still names drivers, but only configuration defines one, and polar's defines none. The agent's
 * files are still its content (a nested repository's .git file), so with a sandbox this git runs
 * inside one too.
 *
 * What the agent caused is a Forfeit, never `error`: more to diff than DIFF_MAX_BYTES or
 * DIFF_MAX_FILES, or a file it made unreadable to polar.
 */
export async function captureDiff(ws: PreparedWorkspace, env: Record<string, string>, sandbox?: OpenSandbox): Promise<string> {
  const binds: Bind[] = ws.gitDir && sandbox ? [{ source: ws.gitDir, dest: BASELINE_INSIDE, readOnly: false }] : [];
  const own = ws.gitDir ? ['--git-dir', sandbox ? BASELINE_INSIDE : ws.gitDir, '--work-tree', '.'] : [];
  const jail = sandbox ? await sandbox(ws.dir, binds) : null;
  const wrap = jail ? (c: HarnessCommand) => jail.wrap(c) : undefined;
  try {
    // What `git add` would read, before it reads it: listing reads no file's content.
    const listed = await git(
      [...own, 'ls-files', '-z', '--others', '--modified', '--exclude-standard', '--', '.', ...excludes()],
      ws.dir,
      env,
      60_000,
      'ls-files (the changes)',
      {
        stage: 'post',
        wrap,
      },
    );
    await checkDiffInput(ws.dir, listed);
    const add = [...own, 'add', '--all', '--', '.', ...excludes()];
    // git's own patch: no external diff or textconv driver the agent's .git/config names.
    const diff = [...own, 'diff', '--cached', '--binary', '--no-ext-diff', '--no-textconv', ws.baseline, '--', '.', ...excludes()];
    // One command line for both: `git add` prints nothing, so the output is the patch.
    return await gitSteps([add, diff], ws.dir, env, 60_000, 'add and diff (the changes)', { stage: 'post', wrap }).catch(async (err: unknown) => {
      // A repository the agent made inside its workspace (ls-files lists it as `sub/`) whose own
      // .git is broken or has no commit stops `git add`: the agent's doing, not the machine's.
      const nested = await nestedRepositories(ws.dir, listed);
      if (nested.length > 0)
        throw new Forfeit(`the agent left git repositories in its workspace that polar cannot add: ${nested.slice(0, 5).join(', ')}`, { cause: err });
      throw err;
    });
  } finally {
    await jail?.close();
  }
}

/** The entries of `listed` (ls-files -z) that are folders holding a `.git`: repositories of their own. */
async function nestedRepositories(dir: string, listed: string): Promise<string[]> {
  const out: string[] = [];
  for (const name of new Set(listed.split('\0').filter((n) => n.endsWith('/')))) {
    if (await fs.lstat(path.join(dir, name, '.git')).catch(() => null)) out.push(name);
  }
  return out;
}

/**
 * The files `git add` is about to read (`listed`: ls-files -z of the new and modified), checked
 * against the diff's caps and for readability, on the host where the agent's processes are all
 * dead. Sizes are apparent sizes (a sparse file is diffed at its full length). Throws Forfeit.
 */
async function checkDiffInput(dir: string, listed: string): Promise<void> {
  const names = [...new Set(listed.split('\0').filter((n) => n !== ''))];
  if (names.length > DIFF_MAX_FILES)
    throw new Forfeit(`the agent left ${names.length} new or changed files in its workspace; polar diffs at most ${DIFF_MAX_FILES}`);
  let total = 0;
  const sizes: [string, number][] = [];
  const unreadable: string[] = [];
  for (const name of names) {
    const file = path.join(dir, name);
    const st = await fs.lstat(file).catch(() => null);
    if (!st?.isFile()) continue;
    total += st.size;
    sizes.push([name, st.size]);
    if (!(await readable(file, st))) unreadable.push(name);
  }
  if (unreadable.length > 0) throw new Forfeit(`the agent left files polar cannot read, so its work cannot be diffed: ${unreadable.slice(0, 5).join(', ')}`);
  if (total > DIFF_MAX_BYTES) {
    const largest = sizes
      .sort((a, b) => b[1] - a[1])
      .slice(0, 5)
      .map(([n, b]) => `${n} (${b} bytes)`);
    throw new Forfeit(`the agent's new and changed files total ${total} bytes; polar diffs at most ${DIFF_MAX_BYTES}: ${largest.join(', ')}`);
  }
}

/**
 * Whether polar's git can read a file. By its owner's mode bits when polar's user owns it: as root
 * on the host access() says yes to anything, while polar's git runs in a sandbox with every
 * capability dropped, where a file the agent made mode 000 fails `git add` ("Permission denied").
 */
async function readable(file: string, st: Stats): Promise<boolean> {
  if (st.uid === process.getuid?.()) return (st.mode & 0o400) !== 0;
  return fs.access(file, fs.constants.R_OK).then(
    () => true,
    () => false,
  );
}

/**
 * Applies a captured diff to a freshly prepared workspace. The diff is the agent's content: git
 * reads no configuration of the caller's (NEUTRAL_ENV) and, with a sandbox, runs inside one. The
 * patch waits in the fresh copy's .git, polar's own and inside the sandbox's view (git apply refuses
 * paths under .git), and is gone before any test runs.
 */
export async function applyDiff(ws: PreparedWorkspace, diff: string, env: Record<string, string>, sandbox?: OpenSandbox): Promise<void> {
  if (diff.trim() === '') return;
  const file = path.join(ws.dir, '.git', 'polar-agent.patch');
  await fs.writeFile(file, diff);
  const jail = sandbox ? await sandbox(ws.dir) : null;
  const wrap = jail ? (c: HarnessCommand) => jail.wrap(c) : undefined;
  try {
    await git(['apply', '--whitespace=nowarn', '--binary', '.git/polar-agent.patch'], ws.dir, env, 60_000, "apply (the agent's diff)", { stage: 'post', wrap });
  } finally {
    await jail?.close();
    await fs.rm(file, { force: true });
  }
}

export async function removeWorkspace(dir: string): Promise<void> {
  for (const d of workspacePaths(dir)) await fs.rm(d, { recursive: true, force: true });
}

/** A workspace's folder and what is kept beside it: polar's baseline copy and a Harbor task's /logs. */
export function workspacePaths(dir: string): string[] {
  return [dir, baselineGitDir(dir), logsDir(dir)];
}

/** Where one attempt of a sample works: each attempt its own folder, so a retry never sees the last one's files. */
export function workspaceDir(outDir: string, taskId: string, sampleIndex: number, attempt: number): string {
  return path.join(outDir, 'workspaces', `${taskId}-${sampleIndex}-a${attempt}`);
}

function excludes(): string[] {
  return HARNESS_DIRS.map((d) => `:(exclude)${d}`);
}

interface GitOptions {
  stage?: 'init' | 'post';
  wrap?: (c: HarnessCommand) => HarnessCommand;
  /** The user's git configuration and GIT_* variables (the clone and checkout only); else NEUTRAL_ENV. */
  userConfig?: boolean;
  /** Set after the caller's variables are dropped (the baseline commit's identity and dates). */
  commitEnv?: Record<string, string>;
  /** A failure also says the command polar ran (`args` without polar's `-c` settings): a clone's source and folder. */
  said?: boolean;
}

/** `git ARGS`; a failure is a StageError saying `git WHAT failed (exit N): ` and git's own reason (commandFailure). */
async function git(args: string[], cwd: string, env: Record<string, string>, timeoutMs: number, what: string, opts: GitOptions = {}): Promise<string> {
  return runGit({ file: 'git', args: [...GIT, ...args] }, cwd, env, timeoutMs, what, opts.said ? { ...opts, ran: ['git', ...args].join(' ') } : opts);
}

/**
 * Several git commands as one command line (`git … && git …`), the output of them all: one sandbox
 * start instead of one per step (each costs a bwrap start, tens of milliseconds under load).
 */
async function gitSteps(steps: string[][], cwd: string, env: Record<string, string>, timeoutMs: number, what: string, opts: GitOptions = {}): Promise<string> {
  const line = steps.map((s) => ['git', ...GIT, ...s].map(shellQuote).join(' ')).join(' && ');
  return runGit({ file: '/bin/sh', args: ['-c', line] }, cwd, env, timeoutMs, what, opts);
}

function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

async function runGit(
  command: { file: string; args: string[] },
  cwd: string,
  env: Record<string, string>,
  timeoutMs: number,
  what: string,
  opts: GitOptions & { ran?: string },
): Promise<string> {
  const { stage = 'init', wrap, userConfig = false, commitEnv = {} } = opts;
  const own = userConfig ? env : Object.fromEntries(Object.entries(env).filter(([name]) => !name.startsWith('GIT_')));
  const plain: HarnessCommand = { ...command, env: { ...own, ...GIT_ENV, ...(userConfig ? {} : NEUTRAL_ENV), ...commitEnv } };
  const cmd = wrap ? wrap(plain) : plain;
  const r = await runCommand(cmd.file, cmd.args, { cwd, env: cmd.env, timeoutMs });
  if (r.failed || r.exitCode !== 0) throw new StageError(stage, commandFailure(`git ${what}`, r, opts.ran), { cause: r.error ?? undefined });
  return r.stdout;
}
