import { PgBoss } from 'pg-boss';
import { v5 as uuidv5 } from 'uuid';
import { PolarError } from '../../core/errors.js';
import { isUnreachable, type Postgres, poolSize, whileUnreachable } from '../../store/postgres/client.js';
import { JOBS_CHANNEL } from './notify.js';
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

/**
 * How often a worker looks for lost leases to expire (s): `POLAR_QUEUE_SUPERVISE_S`, default 30.
 * A sample whose worker died is handed on within its heartbeat plus this interval.
 */
export function superviseSeconds(): number {
  const v = Number(process.env.POLAR_QUEUE_SUPERVISE_S);
  return Number.isFinite(v) && v >= 1 ? v : 30;
}

export interface QueueOptions {
  /** Reported lost connections (a restarting server); pg-boss reconnects by itself. */
  onError?: (err: Error) => void;
  /**
   * A pool to run pg-boss's statements on (the worker's one pool for its store and queue, when both
   * are one database); pg-boss then opens no connection of its own and leaves the pool open at stop.
   */
  pool?: Postgres;
  /** Connections of pg-boss's own pool when no `pool` is given (default: poolSize(), `POLAR_PG_POOL`). */
  max?: number;
}

/**
 * pg-boss with nothing of its own running in the background: no supervision timer (workers expire
 * lost leases with keepLeases, only while there are leases), no cron (`schedule`), no instance
 * registry heartbeat, no flow polling (polar queues no job flows), and the queue list refreshed
 * rarely (a queue missing from it is read on first use). Its statements are plain ones with
 * transaction-scoped locks, so it works behind PgBouncer in transaction mode.
 */
function newBoss(url: string, options: QueueOptions): PgBoss {
  const pool = options.pool;
  const boss = new PgBoss({
    ...(pool
      ? { db: { executeSql: (text: string, values?: unknown[]) => pool.pool.query(text, values) } }
      : { connectionString: connectionUrl(url), max: options.max ?? poolSize(), application_name: 'polar-queue' }),
    supervise: false,
    schedule: false,
    registerInstance: false,
    // The claim that gates lease expiry in a supervise() call is stamped at this interval.
    superviseIntervalSeconds: superviseSeconds(),
    monitorIntervalSeconds: superviseSeconds(),
    flowIntervalSeconds: 3600,
    queueCacheIntervalSeconds: 600,
  });
  boss.on('error', (err) => options.onError?.(err));
  return boss;
}

/**
 * pg-boss on the queue's database, started: through a PostgreSQL restart (whileUnreachable: a worker started while the
 * server is away waits for it instead of exiting), and through another process creating pg-boss's
 * schema at the same moment (its CREATE SCHEMA races ours on a new database: 23505 on
 * pg_namespace; the next try finds the schema made). Each try is a new PgBoss: a failed start
 * leaves one that cannot start again.
 */
export async function openQueue(url: string, options: QueueOptions = {}, log?: (line: string) => void): Promise<PgBoss> {
  for (let raced = 0; ; raced++) {
    try {
      return await whileUnreachable(
        async () => {
          const boss = newBoss(url, options);
          try {
            await boss.start();
            return boss;
          } catch (err) {
            await boss.stop({ graceful: false, close: !options.pool }).catch(() => undefined);
            throw asUnreachable(err);
          }
        },
        undefined,
        log,
      );
    } catch (err) {
      if ((err as { code?: string }).code !== '23505' || raced >= 3) throw err;
    }
  }
}

/** pg-boss's own connection errors, as the store's: POLAR_STORE_UNREACHABLE when the server is away. */
function asUnreachable(err: unknown): unknown {
  if (!isUnreachable(err)) return err;
  return new PolarError('POLAR_STORE_UNREACHABLE', `PostgreSQL (the queue) is unreachable: ${(err as Error).message}`, 503, { cause: err });
}

/** Whether any job of queue `name` is out on a lease now: only then is there a lease to expire. */
export async function hasLeases(boss: PgBoss, name: string): Promise<boolean> {
  const { rows } = await boss.getDb().executeSql(`SELECT EXISTS (SELECT 1 FROM pgboss.job WHERE name = $1 AND state = 'active') AS leased`, [name]);
  return rows[0]?.leased === true;
}

/**
 * Expires lost leases of queue `name` (a worker killed or cut off stops heartbeating; its sample is
 * retried elsewhere) every superviseSeconds(), while any job of it is leased. Every worker does
 * this (a coordinator may have exited, so workers are the only processes sure to run while jobs
 * are out), and pg-boss claims each pass in the database, so the fleet makes one expiry pass per
 * interval however many workers it has. A pass is some 25 statements; with nothing leased a worker
 * pays one statement per interval instead. Returns what stops it.
 */
export function keepLeases(boss: PgBoss, name: string, onError: (err: Error) => void): { stop(): Promise<void> } {
  let running: Promise<void> | null = null;
  const timer = setInterval(() => {
    if (running) return;
    running = (async () => {
      if (!(await hasLeases(boss, name))) return;
      await boss.supervise(name);
      // A lease this pass expired put its job back: idle workers sleep until a NOTIFY or their
      // back-off (up to 30 s), so wake them now, as a queued rollout does.
      await boss
        .getDb()
        .executeSql(`SELECT pg_notify($1, $2) FROM (SELECT 1 FROM pgboss.job WHERE name = $2 AND state = 'retry' LIMIT 1) AS waiting`, [JOBS_CHANNEL, name]);
    })()
      .catch((err: unknown) => onError(err as Error))
      .finally(() => {
        running = null;
      });
  }, superviseSeconds() * 1000);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
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
