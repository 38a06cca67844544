import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { PolarError } from '../../core/errors.js';
import { isDir } from '../../core/fs-kind.js';
import { runCommand } from '../../core/process/command.js';
import { commandFailure } from '../../core/process/failure.js';
import { type PgQueryable, type RetryLog, whileUnreachable } from '../../store/postgres/client.js';
import { ContentUnavailable, readContent } from '../../store/postgres/content.js';
import type { HarborTrial } from '../harbor/types.js';
import { newId } from '../../core/ids.js';
import type { SampleRow } from '../../store/rollouts.js';
import type { RolloutEvent } from '../config.js';
import type { SampleLedger } from '../ledger.js';
import type { RolloutTask } from '../task-file.js';
import type { ContentRef, StoredTask } from './task-content.js';

/**
 * A worker's copy of the content a queued task names (task-content.ts), kept under the machine's
 * state folder, `<state dir>/content/<sha256>/`: fetched from the shared store once per machine
 * (every worker process there shares it), checked against its digest before it is unpacked, and
 * made visible whole, by a rename, only once unpacked. A task is then pointed at the local copy.
 */

export interface ContentCache {
  /** The machine's state folder (store/postgres/url.ts stateDir). */
  stateDir: string;
  /** The largest content this worker fetches (POLAR_CONTENT_MAX_MB). */
  maxBytes: number;
  /** Where a PostgreSQL outage during a download is said (the worker's notices; default stderr). */
  notice?: RetryLog;
}

/** A task with its paths on this machine, and the task file's folder there (null: not sent; undefined: the task was stored without content). */
export interface LocalTask {
  task: RolloutTask;
  tasksDir: string | null | undefined;
}

/**
 * The task with its workspace, git source and Harbor folder on this machine. A task stored without
 * `content` (a shared disk, or an older coordinator) is returned as it is. Throws ContentUnavailable
 * with the reason when no worker can have the content (missing, changed, a path leaving it); what
 * only this worker cannot do (over its cap, tar failing, a full disk) is thrown as another error,
 * so the sample is handed back to the queue.
 */
export async function localTask(pg: PgQueryable, stored: StoredTask, cache: ContentCache): Promise<LocalTask> {
  const { content, ...task } = stored;
  if (!content) return { task, tasksDir: undefined };
  const at = async (ref: ContentRef) => {
    try {
      return inside(await fetchContent(pg, ref.digest, cache), ref);
    } catch (err) {
      if (err instanceof ContentUnavailable) throw new ContentUnavailable(`${ref.source}: ${err.message}`);
      if (err instanceof PolarError) throw err;
      throw new Error(`${ref.source}: ${(err as Error).message}`, { cause: err });
    }
  };
  const out: RolloutTask = { ...task };
  if (content.workspace) {
    const local = await at(content.workspace);
    const ws = task.workspace;
    if ('dir' in ws) out.workspace = { dir: local };
    else if ('git' in ws) out.workspace = { git: local, commit: ws.commit };
  }
  if (content.harbor && task.harbor) out.harbor = rebase(task.harbor, task.harbor.dir, await at(content.harbor));
  return { task: out, tasksDir: content.tasksDir ? await at(content.tasksDir) : null };
}

/** Where a ref's path is in its unpacked content; a `sub` that would leave it is refused. */
function inside(root: string, ref: ContentRef): string {
  if (!ref.sub) return root;
  const p = path.resolve(root, ref.sub);
  if (!p.startsWith(`${root}${path.sep}`)) throw new ContentUnavailable(`its path ${JSON.stringify(ref.sub)} leaves the content`);
  return p;
}

/**
 * Every path in a Harbor trial under the coordinator's task folder, moved under `to`: the folder,
 * the Dockerfile's copies, tests/, solution/, a separate verifier's context and each step's folders.
 * Paths inside the task's environment (its workdir, /tests) do not start with the folder and stay.
 */
export function rebase(trial: HarborTrial, from: string, to: string): HarborTrial {
  const move = (v: unknown): unknown => {
    if (typeof v === 'string') return v === from ? to : v.startsWith(`${from}/`) ? to + v.slice(from.length) : v;
    if (Array.isArray(v)) return v.map(move);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, move(x)]));
    return v;
  };
  return move(trial) as HarborTrial;
}

/** In-flight fetches of this process, so samples of one task that start together download it once. */
const fetching = new Map<string, Promise<string>>();

/** The unpacked content of `digest` on this machine: the cached folder, else fetched, checked and unpacked into it. */
export async function fetchContent(pg: PgQueryable, digest: string, cache: ContentCache): Promise<string> {
  if (!/^[0-9a-f]{64}$/.test(digest)) throw new ContentUnavailable(`${JSON.stringify(digest)} is not a sha256 digest`);
  const dir = path.join(cache.stateDir, 'content', digest);
  if (isDir(dir)) return dir;
  let p = fetching.get(digest);
  if (!p) {
    p = download(pg, digest, dir, cache).finally(() => fetching.delete(digest));
    fetching.set(digest, p);
  }
  return p;
}

async function download(pg: PgQueryable, digest: string, dir: string, cache: ContentCache): Promise<string> {
  const parent = path.dirname(dir);
  await fs.mkdir(parent, { recursive: true });
  const tag = `.${digest.slice(0, 16)}-${process.pid}-${randomBytes(4).toString('hex')}`;
  const tar = path.join(parent, `${tag}.tar`);
  const tmp = path.join(parent, `${tag}.d`);
  try {
    await whileUnreachable(() => readContent(pg, digest, tar, cache.maxBytes), undefined, cache.notice);
    await fs.mkdir(tmp);
    const r = await runCommand('tar', ['-x', '--no-same-owner', '-f', tar, '-C', tmp], { timeoutMs: 600_000 });
    // This machine's fault (no tar, a full disk), not the content's: checked by digest, it is whole.
    if (r.failed || r.exitCode !== 0) throw new Error(`cannot unpack content sha256:${digest.slice(0, 12)}: ${commandFailure('tar -x', r)}`);
    try {
      await fs.rename(tmp, dir);
    } catch (err) {
      // Another worker on this machine unpacked it first: theirs is as good, being the same digest.
      if (!isDir(dir)) throw err;
    }
    return dir;
  } finally {
    await fs.rm(tar, { force: true });
    await fs.rm(tmp, { recursive: true, force: true });
  }
}

/**
 * Ends a sample whose content this worker could not get: an attempt started and ended `error` at
 * INIT with the reason, as a workspace that fails to prepare ends it (stages.ts initStage). Not
 * handed back to the queue: missing or altered content is the same for every worker.
 */
export async function endWithoutContent(ledger: SampleLedger, sample: SampleRow, reason: string, emit: (e: RolloutEvent) => void): Promise<void> {
  if ((await ledger.start(sample, newId('ses'))) === null) return;
  const error = `the task's files could not be had from the shared store: ${reason}`;
  await ledger.finish(sample.id, { status: 'error', errorStage: 'init', error });
  emit({ type: 'done', sampleId: sample.id, taskId: sample.taskId, outcome: 'error', reward: null, error });
}
