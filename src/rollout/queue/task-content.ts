import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PolarError } from '../../core/errors.js';
import { isDir, isFile } from '../../core/fs-kind.js';
import { runCommand } from '../../core/process/command.js';
import { commandFailure } from '../../core/process/failure.js';
import type { Postgres } from '../../store/postgres/client.js';
import { putContent } from '../../store/postgres/content.js';
import type { RolloutTask } from '../task-file.js';
import { mib, packTar, TooBigError } from './tar-pack.js';

/**
 * What a queued task needs from the coordinator's disk, sent through the shared store (issue 43):
 * workers on other machines see neither the task's `workspace.dir`, nor a local `workspace.git`,
 * nor a Harbor task folder, nor the task file's folder its evaluators read as $POLAR_TASKS_DIR.
 * Each is packed (tar-pack.ts), stored once by digest (store/postgres/content.ts) and named in the
 * stored task as `content`; a worker fetches it once per machine (content-cache.ts). A git source
 * that is a URL stays one: each worker clones it.
 */

/** One packed folder or file in the shared store; `source` is the coordinator's path, kept for messages. */
export interface ContentRef {
  digest: string;
  bytes: number;
  source: string;
  /** The path inside the unpacked content that stands for `source` (a workspace inside the task file's folder, a bundle file). */
  sub?: string;
}

export interface TaskContent {
  workspace?: ContentRef;
  harbor?: ContentRef;
  tasksDir?: ContentRef;
}

/** A task as a queued rollout stores it: what the task file said, and where its files are in the store. */
export type StoredTask = RolloutTask & { content?: TaskContent };

export const DEFAULT_CONTENT_MAX_MB = 256;

/** The cap on one packed folder, `POLAR_CONTENT_MAX_MB` (default 256), in bytes; a bad value is refused by name. */
export function contentMaxBytes(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.POLAR_CONTENT_MAX_MB;
  if (raw === undefined || raw === '') return DEFAULT_CONTENT_MAX_MB * 1024 ** 2;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || n > 64 * 1024)
    throw new PolarError('POLAR_USAGE', `POLAR_CONTENT_MAX_MB must be a size in MiB from 1 to 65536 (got ${JSON.stringify(raw)})`);
  return Math.floor(n * 1024 ** 2);
}

/**
 * `POLAR_QUEUE_CONTENT=shared`: every worker sees the coordinator's paths (a shared disk), so
 * nothing is packed and tasks keep their paths, as before issue 43. Anything else: `store`.
 */
export function contentMode(env: NodeJS.ProcessEnv = process.env): 'store' | 'shared' {
  const raw = env.POLAR_QUEUE_CONTENT;
  if (raw === undefined || raw === '' || raw === 'store') return 'store';
  if (raw === 'shared') return 'shared';
  throw new PolarError(
    'POLAR_USAGE',
    `POLAR_QUEUE_CONTENT is "store" (the default: task folders travel through the shared store) or "shared" (every worker sees this disk)`,
  );
}

/** A git source polar leaves to git on each worker: a URL (`https://…`, `ssh://…`, `git@host:path`). */
export function isGitUrl(source: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(source) || /^[^/]+@[^:]+:/.test(source);
}

/**
 * Packs and stores every local folder the tasks name, each once (the same folder for many tasks is
 * one digest), and returns the tasks with `content` set. `tasksFile` is the JSONL file or the Harbor
 * folder the rollout read; the JSONL file's folder travels when an evaluator, setup or solution
 * names $POLAR_TASKS_DIR: hidden checkers live there, and nothing else reads it.
 * A folder over `maxBytes` is a usage error naming the task and the path, before anything is queued.
 */
export async function shipTaskContent(
  pg: Postgres,
  tasks: readonly RolloutTask[],
  tasksFile: string | null,
  opts: { maxBytes: number; notice?: (line: string) => void },
): Promise<StoredTask[]> {
  const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'polar-pack-'));
  const packed = new Map<string, ContentRef>();
  const ship = async (task: RolloutTask | null, what: string, source: string, root = source, sub?: string): Promise<ContentRef> => {
    const key = `${root}\0${sub ?? ''}`;
    const known = packed.get(key);
    if (known) return { ...known, source };
    const file = path.join(tmp, `${packed.size}.tar`);
    let p: Awaited<ReturnType<typeof packTar>>;
    try {
      p = await packTar(root, file, opts.maxBytes);
    } catch (err) {
      if (err instanceof TooBigError) throw tooBig(task, what, source, err.message, opts.maxBytes);
      throw new PolarError('POLAR_USAGE', `${whose(task)} ${what} ${source} cannot be packed: ${(err as Error).message}`, undefined, { cause: err });
    }
    for (const s of p.skipped) opts.notice?.(`notice: ${whose(task)} ${what}: ${s} is not a file, folder or link; left out of what workers get`);
    await putContent(pg, p.digest, file, p.bytes);
    await fs.rm(file, { force: true });
    const ref: ContentRef = { digest: p.digest, bytes: p.bytes, source, ...(sub ? { sub } : {}) };
    packed.set(key, ref);
    return ref;
  };
  try {
    // Real paths: a task file or workspace reached through a link (`data -> /mnt/ds`) is compared by where it is.
    const tasksDir = tasksFile && isFile(tasksFile) ? await realPath(path.dirname(path.resolve(tasksFile))) : null;
    let tasksRef: ContentRef | undefined;
    if (tasksDir && tasks.some(namesTasksDir)) tasksRef = await ship(null, "task file's folder", tasksDir);
    const out: StoredTask[] = [];
    for (const task of tasks) {
      const content: TaskContent = tasksRef ? { tasksDir: tasksRef } : {};
      const ws = task.workspace;
      if (task.harbor) content.harbor = await ship(task, 'Harbor task folder', task.harbor.dir);
      else if ('dir' in ws) {
        const rel = tasksDir ? path.relative(tasksDir, await realPath(ws.dir)) : '..';
        // Inside the task file's folder, already packed: the workspace is a path in it.
        content.workspace =
          tasksRef && rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel)
            ? { ...tasksRef, source: ws.dir, sub: rel }
            : await ship(task, 'workspace folder', ws.dir);
      } else if ('git' in ws && !isGitUrl(ws.git)) {
        const repo = await gitPayload(ws.git, tmp, packed.size);
        content.workspace = await ship(task, 'git repository', ws.git, repo.root, repo.sub);
      }
      out.push(Object.keys(content).length > 0 ? { ...task, content } : task);
    }
    return out;
  } finally {
    await fs.rm(tmp, { recursive: true, force: true });
  }
}

/** `p` with its links resolved; as given when it does not exist (packing it then says so). */
async function realPath(p: string): Promise<string> {
  return fs.realpath(p).catch(() => path.resolve(p));
}

/**
 * Whether a task's commands read the task file's folder: they name $POLAR_TASKS_DIR, which a worker
 * sets to its copy. (A command that writes the coordinator's path out would not find it on a worker
 * anyway, so a path is no reason to send the folder.)
 */
function namesTasksDir(task: RolloutTask): boolean {
  return JSON.stringify([task.evaluator, task.setup, task.solution ?? []]).includes('POLAR_TASKS_DIR');
}

/**
 * What of a local git source a worker clones from, with its whole history and refs (the commit may
 * be on any branch, or on none): a bundle file as it is; a repository's own git folder (`.git`, or
 * a bare repository); anything else (a worktree's `gitdir:` file, a repository borrowing objects
 * through alternates) as a mirror clone made here, which holds every ref's objects itself.
 */
async function gitPayload(source: string, tmp: string, n: number): Promise<{ root: string; sub?: string }> {
  if (isFile(source)) return { root: source, sub: path.basename(source) };
  const dotGit = path.join(source, '.git');
  const gitDir = isDir(dotGit) ? dotGit : isFile(path.join(source, 'HEAD')) && isDir(path.join(source, 'objects')) ? source : null;
  if (gitDir && !isFile(path.join(gitDir, 'objects', 'info', 'alternates'))) return { root: gitDir };
  const mirror = path.join(tmp, `mirror-${n}.git`);
  const r = await runCommand('git', ['clone', '--quiet', '--mirror', '--', source, mirror], {
    env: { ...(process.env as Record<string, string>), GIT_TERMINAL_PROMPT: '0' },
    timeoutMs: 600_000,
  });
  if (r.failed || r.exitCode !== 0) throw new PolarError('POLAR_USAGE', `cannot pack the git repository ${source}: ${commandFailure('git clone --mirror', r)}`);
  return { root: mirror };
}

/** "task ID's" for a task's own folder, "the" for the task file's. */
function whose(task: RolloutTask | null): string {
  return task ? `task ${task.id}'s` : 'the';
}

function tooBig(task: RolloutTask | null, what: string, source: string, detail: string, maxBytes: number): PolarError {
  const url = what === 'git repository' ? ' give the repository as a URL each worker clones ({"git": "https://…", "commit": …}),' : '';
  const own = task ? '' : ' (it travels because an evaluator reads $POLAR_TASKS_DIR: keep the task file and its checkers in a folder of their own)';
  return new PolarError(
    'POLAR_USAGE',
    `${whose(task)} ${what} ${source} is too big to send to workers through the shared store (${detail}; the cap is ${mib(maxBytes)})${own}. ` +
      `Make it smaller (leave out build outputs, caches, virtual environments),${url} or raise POLAR_CONTENT_MAX_MB; ` +
      'if every worker sees this path (a shared disk), POLAR_QUEUE_CONTENT=shared sends paths instead. Nothing was queued.',
  );
}
