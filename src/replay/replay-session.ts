import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { getHarness } from '../harness/registry.js';
import { runHarness, type RunHarnessResult } from '../session/run-harness.js';
import { baseEnvironment } from '../harness/env.js';
import type { RolloutTask } from '../rollout/task-file.js';
import { prepareWorkspace } from '../rollout/workspace.js';
import { openStore } from '../store/open.js';
import { startCassette, type Divergence } from './cassette.js';

export interface ReplayResult {
  session: string;
  replaySession: string;
  matched: number;
  total: number;
  divergence: Divergence | null;
  unplayed: { seq: number; id: string }[];
  run: RunHarnessResult;
  cwd: string;
}

/**
 * Replays a recorded session with no model: a cassette answers the harness's calls from the
 * recording (cassette.ts) while the harness runs again through polar in a fresh workspace, made from
 * the session's task when it was a rollout sample, else empty (or `cwd`). The replay is recorded as
 * a new session (metadata `replay_of`), so the two can be compared call by call.
 */
export async function replaySession(opts: {
  dbPath: string;
  session: string;
  harness: string;
  command?: string;
  harnessBin?: string;
  nodeBin?: string;
  cwd?: string;
  timeoutSec?: number;
}): Promise<ReplayResult> {
  const store = await openStore(opts.dbPath);
  let cassette: Awaited<ReturnType<typeof startCassette>> | undefined;
  /** A workspace polar made for the replay (not --cwd): removed when the replay ends. */
  let made: string | null = null;
  try {
    const recorded = store.sessions.get(opts.session)!;
    cassette = await startCassette(store, opts.session);
    const sample = store.rollouts.sampleForSession(opts.session);
    const task = sample
      ? (JSON.parse(store.rollouts.tasks(sample.rolloutId).find((t) => (JSON.parse(t) as RolloutTask).id === sample.taskId) ?? 'null') as RolloutTask | null)
      : null;
    made = opts.cwd ? null : await fs.mkdtemp(path.join(os.tmpdir(), 'polar-replay-'));
    let cwd = opts.cwd ? path.resolve(opts.cwd) : made!;
    if (!opts.cwd && task) cwd = (await prepareWorkspace(task, path.join(cwd, 'workspace'), Date.now() + 600_000, baseEnvironment())).dir;
    await fs.mkdir(cwd, { recursive: true });
    const prompt = typeof recorded?.metadata.prompt === 'string' ? recorded.metadata.prompt : (task?.prompt ?? null);
    const replaySessionId = `${opts.session}-replay-${Date.now().toString(36)}`;
    const run = await runHarness({
      harness: getHarness(opts.harness, opts.command !== undefined ? { command: opts.command } : {}),
      ...(opts.harnessBin ? { harnessBin: opts.harnessBin } : {}),
      ...(opts.nodeBin ? { nodeBin: opts.nodeBin } : {}),
      prompt: prompt ?? 'Continue.',
      cwd,
      dbPath: opts.dbPath,
      store,
      upstream: { url: cassette.url, kind: 'vllm' },
      model: cassette.model,
      // A rollout sample ran append-only unless its rollout kept compaction: replayed the same way.
      appendOnly: sample ? (store.rollouts.get(sample.rolloutId)?.config as { compaction?: string } | undefined)?.compaction !== 'harness' : false,
      session: replaySessionId,
      timeoutSec: opts.timeoutSec ?? 600,
      quiet: true,
      sessionMetadata: { replay_of: opts.session },
    });
    return {
      session: opts.session,
      replaySession: replaySessionId,
      matched: cassette.matched(),
      total: cassette.total(),
      divergence: cassette.divergence(),
      unplayed: cassette.unplayed(),
      run,
      cwd,
    };
  } finally {
    await cassette?.close();
    await store.closeAsync();
    if (made) await fs.rm(made, { recursive: true, force: true });
  }
}
