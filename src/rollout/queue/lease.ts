import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { connectionUrl } from '../../store/postgres/password.js';

/**
 * A queued sample's lease, kept on a timer that a busy event loop cannot hold up: a thread of its
 * own (worker_threads) with one PostgreSQL connection touches each held job as pg-boss's own
 * `touch()` does (plans.js touchJobs: `heartbeat_on = job_now()` where the job is still `active`
 * in this attempt, `id:retry_count`), and says a lease is lost when that finds no row: the queue
 * expired the job (its heartbeat lapsed: the machine was stopped, cut off, or too slow) or another
 * worker holds a newer attempt. The main thread of a worker runs a harness's capture, shipping and
 * evaluators; a loaded 2-core machine held its timers back past 10 s leases (issue 43), so the
 * heartbeat no longer waits for it.
 *
 * A touch that fails because PostgreSQL cannot be reached (a restart) does not lose the lease by
 * itself: it is lost once `heartbeatSeconds` pass without a successful touch, when the queue, back,
 * expires the job anyway.
 */

export interface Lease {
  /** The pg-boss queue. */
  queue: string;
  id: string;
  /** The attempt the worker fetched (the job's `retryCount`). */
  attempt: number;
  heartbeatSeconds: number;
}

/**
 * A hold's name, here and in the thread: the job and its attempt. pg-boss keeps a job's id for all
 * its retries (jobId(sampleId) too), so a worker can hold a retry of a job whose earlier run is still
 * stopping; keyed by id alone, that run's release dropped the retry's heartbeat (issue 43 review).
 */
export function leaseKey(lease: Pick<Lease, 'id' | 'attempt'>): string {
  return `${lease.id}:${lease.attempt}`;
}

type ToThread = { type: 'hold'; key: string; lease: Lease } | { type: 'release'; key: string };
type FromThread = { type: 'lost'; key: string; reason: string };

/** The thread's code, CommonJS, with `pg` loaded from this package's own copy (workerData.pg). */
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const pg = require(workerData.pg);
const schema = workerData.schema;
const held = new Map();
let client = null;
let busy = false;
const tables = new Map();

async function connection() {
  if (client) return client;
  const c = new pg.Client({ connectionString: workerData.url, application_name: 'polar-lease', connectionTimeoutMillis: 5000, query_timeout: 5000, keepAlive: true });
  c.on('error', () => { if (client === c) client = null; });
  await c.connect().catch((err) => { c.end().catch(() => {}); throw err; });
  client = c;
  return c;
}

async function table(c, queue) {
  if (!tables.has(queue)) {
    const { rows } = await c.query('SELECT table_name FROM ' + schema + '.queue WHERE name = $1', [queue]);
    tables.set(queue, rows[0] ? rows[0].table_name : 'job');
  }
  return schema + '.' + tables.get(queue);
}

function lost(key, reason) {
  if (!held.delete(key)) return;
  parentPort.postMessage({ type: 'lost', key, reason });
}

async function beat() {
  if (busy || held.size === 0) return;
  busy = true;
  const now = Date.now();
  const due = [...held.values()].filter((h) => now >= h.next);
  try {
    if (due.length === 0) return;
    const c = await connection();
    for (const queue of new Set(due.map((h) => h.lease.queue))) {
      const mine = due.filter((h) => h.lease.queue === queue);
      const t = await table(c, queue);
      const ids = mine.map((h) => h.lease.id);
      const { rows } = await c.query(
        'UPDATE ' + t + ' SET heartbeat_on = ' + schema + '.job_now() WHERE name = $1 AND id = ANY($2::uuid[]) AND state = ' + "'active'" +
          " AND (id::text || ':' || retry_count::text) = ANY($3::text[]) RETURNING id::text || ':' || retry_count::text AS key",
        [queue, ids, mine.map((h) => h.key)],
      );
      const touched = new Set(rows.map((r) => r.key));
      const at = Date.now();
      for (const h of mine) {
        if (touched.has(h.key)) {
          h.ok = at;
          h.next = at + h.every;
          continue;
        }
        if (held.get(h.key) !== h) continue;
        const { rows: found } = await c.query('SELECT state, retry_count FROM ' + t + ' WHERE id = $1', [h.lease.id]);
        const job = found[0];
        lost(h.key, !job ? 'its job is gone from the queue'
          : job.state === 'active' ? 'another worker runs attempt ' + (job.retry_count + 1) + ' of it'
          : 'the queue ' + (job.state === 'retry' || job.state === 'created' ? 'expired it and hands it to another worker' : 'marked its job ' + job.state) +
            ' (no heartbeat for ' + h.lease.heartbeatSeconds + ' s)');
      }
    }
  } catch (err) {
    if (client) client.end().catch(() => {});
    client = null;
    const at = Date.now();
    for (const h of due) {
      if (at - h.ok >= h.lease.heartbeatSeconds * 1000)
        lost(h.key, 'no heartbeat for ' + Math.round((at - h.ok) / 1000) + ' s: ' + (err && err.message ? err.message : String(err)));
      // Tried again each second while the server is away, not every tick: a fleet reconnecting at once is load enough.
      else h.next = at + Math.min(h.every, 1000);
    }
  } finally {
    busy = false;
  }
}

parentPort.on('message', (m) => {
  if (m.type === 'hold') {
    const every = Math.max(1000, (m.lease.heartbeatSeconds * 1000) / workerData.beats);
    held.set(m.key, { key: m.key, lease: m.lease, every, ok: Date.now(), next: Date.now() + every });
  } else if (m.type === 'release') held.delete(m.key);
  else if (m.type === 'close') {
    clearInterval(timer);
    const c = client;
    client = null;
    (c ? c.end() : Promise.resolve()).catch(() => {}).finally(() => parentPort.close());
  }
});
const timer = setInterval(() => void beat(), workerData.tickMs);
`;

/**
 * Touches per lease: a job is touched every heartbeatSeconds / BEATS (at least 1 s apart). Six, not
 * pg-boss's usual three, so a PostgreSQL restart of up to 5/6 of the lease is no loss: the lease is
 * lost only when a whole lease passes without a touch (bench/lease-heartbeat.ts: on its own thread
 * the gaps stay within a tick of the interval however loaded the machine).
 */
export const BEATS = 6;

/**
 * The lease thread of one queue database: started with the first lease held and ended with the
 * last released, so an idle worker holds no thread and no connection for it.
 */
export class LeaseKeeper {
  private readonly thread: Worker;
  private readonly lost = new Map<string, (reason: string) => void>();
  private closing: Promise<void> | null = null;
  private exited = false;

  constructor(url: string, options: { schema?: string; tickMs?: number; onError?: (err: Error) => void } = {}) {
    this.thread = new Worker(THREAD, {
      eval: true,
      workerData: {
        url: connectionUrl(url),
        pg: createRequire(import.meta.url).resolve('pg'),
        schema: options.schema ?? 'pgboss',
        beats: BEATS,
        tickMs: options.tickMs ?? 250,
      },
    });
    this.thread.on('message', (m: FromThread) => {
      const onLost = this.lost.get(m.key);
      this.lost.delete(m.key);
      onLost?.(m.reason);
    });
    // A thread that died keeps no lease: its samples stop rather than run on unleased.
    this.thread.on('error', (err) => {
      options.onError?.(err);
      const held = [...this.lost.values()];
      this.lost.clear();
      for (const onLost of held) onLost(`the lease thread failed: ${err.message}`);
    });
    this.thread.once('exit', () => {
      this.exited = true;
    });
    // The worker's own end decides when the process exits, not this thread.
    this.thread.unref();
  }

  /** Keeps `lease` until the returned function is called; `onLost` once if the queue no longer gives the job to this worker. */
  hold(lease: Lease, onLost: (reason: string) => void): () => void {
    const key = leaseKey(lease);
    // Its own function, so a release can tell its hold from a later one of the same key.
    const mine = (reason: string) => onLost(reason);
    this.lost.set(key, mine);
    this.post({ type: 'hold', key, lease });
    // Called as often as a run likes (after POSTRUN, on a failure, finally): only its own hold, once.
    return () => {
      // Forgotten here first: a loss the thread finds after the job was settled is no loss.
      if (this.lost.get(key) !== mine) return;
      this.lost.delete(key);
      this.post({ type: 'release', key });
    };
  }

  get held(): number {
    return this.lost.size;
  }

  close(): Promise<void> {
    this.closing ??= this.exited
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          this.thread.once('exit', () => resolve());
          this.thread.postMessage({ type: 'close' });
        });
    return this.closing;
  }

  private post(m: ToThread): void {
    this.thread.postMessage(m);
  }
}

const keepers = new Map<string, LeaseKeeper>();

/**
 * Holds `lease` on the queue at `url` with the process's one keeper for it (started if none); the
 * returned function releases it, ending the keeper's thread when it held the last lease.
 */
export function holdLease(url: string, lease: Lease, onLost: (reason: string) => void, onError?: (err: Error) => void): () => void {
  let keeper = keepers.get(url);
  if (!keeper) {
    keeper = new LeaseKeeper(url, onError ? { onError } : {});
    keepers.set(url, keeper);
  }
  const k = keeper;
  const done = () => {
    if (k.held > 0 || keepers.get(url) !== k) return;
    keepers.delete(url);
    void k.close();
  };
  const release = k.hold(lease, (reason) => {
    onLost(reason);
    done();
  });
  return () => {
    release();
    done();
  };
}

/** What fenceLease needs of a pg-boss instance: its database (PgBoss.getDb()). */
export interface QueueDb {
  executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/**
 * One touch of `lease`, now and fenced as the thread's are (the job still \`active\` in this
 * attempt): null when it held, else why the lease is lost. A worker makes it right before it starts
 * a sample's attempt: one resumed after a stall (SIGSTOP, a long content download) would otherwise
 * start attempt N+2 and take the sample from the worker that legitimately holds the job's next
 * attempt, before its lease thread noticed the loss. (startAttempt itself cannot be fenced by the
 * job's retryCount: a sample's attempts count starts, and a job run that failed before its start, or
 * a resume outside the queue, leaves the two apart.)
 */
export async function fenceLease(db: QueueDb, lease: Lease, schema = 'pgboss'): Promise<string | null> {
  const { rows } = await db.executeSql(
    `UPDATE ${schema}.job SET heartbeat_on = ${schema}.job_now() WHERE name = $1 AND id = $2 AND state = 'active' AND retry_count = $3 RETURNING id`,
    [lease.queue, lease.id, lease.attempt],
  );
  if (rows.length > 0) return null;
  const found = (await db.executeSql(`SELECT state, retry_count FROM ${schema}.job WHERE name = $1 AND id = $2`, [lease.queue, lease.id])).rows[0] as
    | { state: string; retry_count: number }
    | undefined;
  if (!found) return 'its job is gone from the queue';
  return found.state === 'active'
    ? `another worker runs attempt ${found.retry_count + 1} of it`
    : `the queue marked its job ${found.state} before this attempt started`;
}
