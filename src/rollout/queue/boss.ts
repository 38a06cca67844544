import { PgBoss } from 'pg-boss';
import { v5 as uuidv5 } from 'uuid';
import { connectionUrl } from '../../store/postgres/password.js';

/**
 * The work queue of a rollout spread over many machines: pg-boss, a maintained PostgreSQL job
 * queue, in the same database as the shared store. It gives each sample a lease (`heartbeatSeconds`:
 * a worker that stops touching its job, killed or cut off, loses it; `expireInSeconds`: a hard cap),
 * retries a lost or failed sample up to `retryLimit` times on whichever worker asks next, and keeps
 * its state in tables that survive any worker. A sample's own outcome lives in the store
 * (pg-ledger.ts), so a retried job never rewards a sample twice.
 */

export interface SampleJob {
  rolloutId: string;
  sampleId: string;
}

/** One queue per harness: a worker takes only samples of the harness it runs. */
export function queueName(harness: string): string {
  return `polar-samples-${harness}`;
}

/**
 * A sample's job id: the same sample always gets the same job, so enqueueing twice queues it once.
 * A v5 UUID (the `uuid` package) of SHA-1 over `polar-sample:<sample id>`. v5 hashes the namespace's
 * 16 bytes followed by the name, so the first 16 bytes of that string serve as the namespace and the
 * rest as the name: the ids stay those polar stored in pg-boss queues before it used the library
 * (boss.test.ts). A sample id (`<rollout>:<task>:<index>`) has at least 3 bytes, enough for 16.
 */
export function jobId(sampleId: string): string {
  const bytes = Buffer.from(`polar-sample:${sampleId}`, 'utf8');
  return uuidv5(bytes.subarray(16), bytes.subarray(0, 16));
}

/** How often pg-boss looks for expired leases and refreshes its counts (s); `POLAR_QUEUE_SUPERVISE_S`. */
function superviseSeconds(): number {
  const v = Number(process.env.POLAR_QUEUE_SUPERVISE_S);
  return Number.isFinite(v) && v >= 1 ? v : 5;
}

export async function openQueue(url: string, onError?: (err: Error) => void): Promise<PgBoss> {
  const boss = new PgBoss({
    connectionString: connectionUrl(url),
    superviseIntervalSeconds: superviseSeconds(),
    monitorIntervalSeconds: superviseSeconds(),
    application_name: 'polar-queue',
  });
  // pg-boss reports lost connections (a restarting server) as events; it reconnects by itself.
  boss.on('error', (err) => onError?.(err));
  await boss.start();
  return boss;
}

export async function ensureQueue(boss: PgBoss, name: string): Promise<void> {
  if (await boss.getQueue(name)) return;
  try {
    await boss.createQueue(name, { retryDelay: 0 });
  } catch (err) {
    // Two processes creating it at once: the other one won.
    if (!(await boss.getQueue(name))) throw err;
  }
}
