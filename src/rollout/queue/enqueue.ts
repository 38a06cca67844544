import os from 'node:os';
import path from 'node:path';
import { newId } from '../../core/ids.js';
import type { Postgres } from '../../store/postgres/client.js';
import { insertQueuedRollout, interruptAbandoned as interruptAbandonedSamples } from '../../store/postgres/queue.js';
import { migratePostgres } from '../../store/postgres/schema.js';
import { sampleId } from '../../store/rollouts.js';
import type { RolloutConfig } from '../config.js';
import type { RolloutTask } from '../task-file.js';
import { ensureQueue, jobId, openQueue, queueName, type SampleJob } from './boss.js';
import { contentMaxBytes, contentMode, shipTaskContent } from './task-content.js';
import { notifyJobsQueued } from './notify.js';

export interface QueueSettings {
  /** Times a lost or failed sample is handed to another worker before it is marked interrupted. */
  retries: number;
  /** A worker that has not touched its sample for this long has lost it (s, ≥ 10). */
  heartbeatSec: number;
  /** The jobs' priority: higher is taken first by a free worker (pg-boss `priority`); `polar serve` passes dispatch_priority. */
  priority?: number;
  /** The largest packed task folder sent through the shared store (bytes); default POLAR_CONTENT_MAX_MB's. */
  contentMaxBytes?: number;
}

/**
 * Creates a rollout in the shared store (its tasks, and every sample `queued`, in one transaction)
 * and puts one job per sample on the harness's queue. Each sample's lease is capped at its session
 * budget plus its evaluator's, plus a margin, so even a worker that keeps heartbeating cannot hold
 * one forever.
 */
export async function enqueueRollout(
  pg: Postgres,
  url: string,
  tasks: readonly RolloutTask[],
  tasksFile: string | null,
  config: RolloutConfig,
  settings: QueueSettings,
): Promise<string> {
  await migratePostgres(pg);
  const rolloutId = newId('rol');
  const stored: RolloutConfig = { ...config, outDir: config.outDir ? path.resolve(config.outDir) : '' };
  // The tasks' folders and local repositories go into the shared store first (issue 43): workers
  // on other machines do not see this disk. One too big stops here, before anything is queued.
  const shipped =
    contentMode() === 'shared'
      ? tasks
      : await shipTaskContent(pg, tasks, tasksFile, {
          maxBytes: settings.contentMaxBytes ?? contentMaxBytes(),
          notice: (line) => process.stderr.write(`${line}\n`),
        });
  // The queue first: a queue that cannot be opened leaves nothing behind, and the rollout's rows and
  // its jobs go in one transaction, so a rollout whose samples could not all be queued is never
  // recorded, to be listed and waited on forever (issue 40).
  // On the coordinator's pool: the jobs go through its transaction anyway (below), so they are in its database.
  const boss = await openQueue(url, { pool: pg });
  try {
    const name = queueName(config.harness);
    await ensureQueue(boss, name);
    await insertQueuedRollout(
      pg,
      {
        id: rolloutId,
        createdAt: Date.now(),
        harness: config.harness,
        upstreamUrl: config.upstream.url,
        upstreamKind: config.upstream.kind,
        servedModel: config.model,
        samplesPerTask: config.samples,
        tasksFile: tasksFile ? path.resolve(tasksFile) : null,
        accept: config.accept,
        config: { ...stored, queue: settings },
        origin: `queue:${os.hostname()}`,
      },
      shipped.map((task) => ({ id: task.id, json: JSON.stringify(task) })),
      async (tx) => {
        // pg-boss writes each job through this transaction's connection.
        const db = { executeSql: (text: string, values?: unknown[]) => tx.query(text, values) };
        for (const task of tasks) {
          const evaluatorSec = task.evaluator.type === 'command' ? (task.evaluator.timeout ?? 600) : task.evaluator.type === 'tests' ? 1800 : 0;
          // A served task's one budget (timeout_seconds) bounds preparation and agent together.
          const beforePost = config.sessionBudgetMs !== undefined ? config.sessionBudgetMs / 1000 : (task.timeout ?? config.timeoutSec);
          const expireInSeconds = Math.ceil(beforePost + evaluatorSec + 300);
          for (let i = 0; i < config.samples; i++) {
            const id = sampleId(rolloutId, task.id, i);
            const job: SampleJob = { rolloutId, sampleId: id };
            await boss.send(name, job, {
              id: jobId(id),
              retryLimit: settings.retries,
              retryDelay: 0,
              expireInSeconds,
              heartbeatSeconds: settings.heartbeatSec,
              ...(settings.priority ? { priority: settings.priority } : {}),
              db,
            });
          }
        }
        // Delivered when this commits: idle workers fetch at once instead of at their next poll.
        await notifyJobsQueued(tx, name);
      },
    );
  } finally {
    await boss.stop({ graceful: false, close: true });
  }
  return rolloutId;
}

/**
 * Samples whose job pg-boss gave up on (every retry lost or failed) can no longer end by
 * themselves: they are marked `interrupted`, the policy when retries run out. Returns how many.
 */
export async function interruptAbandoned(pg: Postgres, rolloutId: string, harness: string): Promise<number> {
  return interruptAbandonedSamples(pg, rolloutId, queueName(harness));
}
