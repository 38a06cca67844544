import path from 'node:path';
import type { Job } from 'pg-boss';
import { PolarError } from '../../core/errors.js';
import { waitFor } from '../../core/wait.js';
import { Postgres } from '../../store/postgres/client.js';
import { openStore } from '../../store/open.js';
import { toRollout, toSample, type RawRollout, type RawSample } from '../../store/rollouts.js';
import { parseAccept } from '../accept.js';
import type { RolloutConfig, RolloutEvent } from '../config.js';
import { startCapture } from '../run-rollout.js';
import { initStage, postStage, runStage, type StageContext } from '../stages.js';
import type { RolloutTask } from '../task-file.js';
import { ensureQueue, openQueue, queueName, type SampleJob } from './boss.js';
import { PgSampleLedger } from './pg-ledger.js';

export interface WorkerOptions {
  queueUrl: string;
  /** The shared store (default: the queue's database). */
  dbUrl: string;
  /** This machine's harness, upstream and sandbox; a sample's task and rollout come from the store. */
  config: RolloutConfig;
  upstreamApiKey?: string;
  /** Exit once the queue has had nothing for this process for this long (ms); null: run until stopped. */
  idleExitMs: number | null;
  signal: AbortSignal;
  onEvent?: (e: RolloutEvent & { rolloutId: string }) => void;
  onNotice?: (line: string) => void;
}

/**
 * One machine's worker: takes samples of its harness from the queue, up to `concurrency` at once,
 * and runs each through the same stages as a local rollout (INIT → RUNNING → POSTRUN), capturing
 * into this machine's journal of the shared store (one capture proxy for all its sessions) and
 * moving the sample in the shared store. While a sample runs, its job is touched so the lease
 * holds; a worker that dies stops touching it and the queue hands the sample to another worker.
 * Ctrl-C: nothing new starts, samples in flight are interrupted and handed back. Returns the
 * samples it ran.
 */
export async function runWorker(opts: WorkerOptions): Promise<number> {
  const notice = (line: string) => opts.onNotice?.(line);
  const store = await openStore(opts.dbUrl, { onNotice: notice });
  const pg = new Postgres(opts.dbUrl);
  const ledger = new PgSampleLedger(pg);
  const name = queueName(opts.config.harness);
  let boss: Awaited<ReturnType<typeof openQueue>> | null = null;
  let capture: Awaited<ReturnType<typeof startCapture>> | null = null;
  let ran = 0;
  try {
    boss = await openQueue(opts.queueUrl, (err) => notice(`queue: ${err.message}`));
    await ensureQueue(boss, name);
    capture = await startCapture(store, opts.config, `worker-${process.pid}`, opts.upstreamApiKey);
    const active = new Set<Promise<void>>();
    let idleSince = Date.now();
    while (!opts.signal.aborted) {
      const free = opts.config.concurrency - active.size;
      let got: Job<SampleJob>[] = [];
      if (free > 0) got = await boss.fetch<SampleJob>(name, { batchSize: free }).catch(() => []);
      for (const job of got) {
        ran++;
        const p = runJob(job).finally(() => active.delete(p));
        active.add(p);
      }
      if (got.length > 0 || active.size > 0) idleSince = Date.now();
      else if (opts.idleExitMs !== null && Date.now() - idleSince >= opts.idleExitMs) break;
      if (got.length === 0 || active.size >= opts.config.concurrency) {
        await waitFor(500, opts.signal, active);
      }
    }
    await Promise.all(active);
  } finally {
    await capture?.proxy.close(5000).catch(() => undefined);
    await capture?.socket?.remove();
    await capture?.upstream.close().catch(() => undefined);
    await boss?.stop({ graceful: false, close: true }).catch(() => undefined);
    await pg.close().catch(() => undefined);
    await store.closeAsync();
  }
  return ran;

  async function runJob(job: Job<SampleJob>): Promise<void> {
    const touch = setInterval(() => void boss!.touch(name, job).catch(() => undefined), Math.max(1000, ((job.heartbeatSeconds ?? 30) * 1000) / 3));
    try {
      const ctx = await contextFor(job.data);
      if (!ctx) {
        await boss!.complete(name, job);
        return;
      }
      const sample = ctx.sample;
      const prepared = await initStage(ctx.ctx, sample);
      const ranStage = prepared ? await runStage(ctx.ctx, prepared) : null;
      if (ranStage) await postStage(ctx.ctx, ranStage);
      const after = (await pg.query(`SELECT status FROM samples WHERE id = $1`, [sample.id])).rows[0] as { status: string } | undefined;
      if (after && ['completed', 'failed', 'timeout', 'error'].includes(after.status)) await boss!.complete(name, job);
      else await boss!.fail(name, job, { reason: `sample ${sample.id} did not end here (${after?.status ?? 'missing'}); handed back to the queue` });
    } catch (err) {
      notice(`sample ${job.data.sampleId}: ${(err as Error).message}`);
      await boss!.fail(name, job, { reason: (err as Error).message }).catch(() => undefined);
    } finally {
      clearInterval(touch);
    }
  }

  /** The sample, its task and its rollout's settings, from the store; null when the sample already ended. */
  async function contextFor(job: SampleJob): Promise<{ ctx: StageContext; sample: ReturnType<typeof toSample> } | null> {
    const raw = (await pg.query(`SELECT * FROM samples WHERE id = $1`, [job.sampleId])).rows[0] as RawSample | undefined;
    if (!raw) throw new PolarError('POLAR_USAGE', `sample ${job.sampleId} is not in the store ${pg.label}: is this worker's --db the rollout's?`);
    const sample = toSample(raw);
    if (['completed', 'failed', 'timeout', 'error'].includes(sample.status)) return null;
    const rollout = toRollout((await pg.query(`SELECT * FROM rollouts WHERE id = $1`, [job.rolloutId])).rows[0] as unknown as RawRollout);
    const taskText = (await pg.query(`SELECT task FROM rollout_tasks WHERE rollout_id = $1 AND task_id = $2`, [job.rolloutId, sample.taskId])).rows[0] as {
      task: string;
    };
    const task = JSON.parse(taskText.task) as RolloutTask;
    const stored = rollout.config as unknown as RolloutConfig;
    const config: RolloutConfig = {
      ...opts.config,
      accept: stored.accept ?? null,
      timeoutSec: stored.timeoutSec ?? opts.config.timeoutSec,
      samples: stored.samples,
    };
    const ctx: StageContext = {
      rolloutId: job.rolloutId,
      store,
      ledger,
      dbPath: opts.dbUrl,
      config,
      tasks: new Map([[task.id, task]]),
      harness: capture!.harness,
      proxyUrl: capture!.proxy.url,
      sessionKeys: capture!.sessionKeys,
      model: capture!.model,
      contextWindow: capture!.contextWindow,
      accept: config.accept ? parseAccept(config.accept) : null,
      sandbox: capture!.sandbox,
      proxySocket: capture!.socket?.path ?? null,
      secrets: opts.upstreamApiKey ? [opts.upstreamApiKey] : [],
      tasksDir: rollout.tasksFile ? path.dirname(rollout.tasksFile) : null,
      emit: (e) => opts.onEvent?.({ ...e, rolloutId: job.rolloutId }),
      onNotice: notice,
      stopping: () => opts.signal.aborted,
    };
    return { ctx, sample };
  }
}
