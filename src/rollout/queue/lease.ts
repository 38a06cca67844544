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

type ToThread = { type: 'hold'; lease: Lease } | { type: 'release'; id: string };
type FromThread = { type: 'lost'; id: string; reason: string };

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

function lost(id, reason) {
  if (!held.delete(id)) return;
  parentPort.postMessage({ type: 'lost', id, reason });
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
          " AND (id::text || ':' || retry_count::text) = ANY($3::text[]) RETURNING id",
        [queue, ids, mine.map((h) => h.lease.id + ':' + h.lease.attempt)],
      );
      const touched = new Set(rows.map((r) => r.id));
      const at = Date.now();
      for (const h of mine) {
        if (touched.has(h.lease.id)) {
          h.ok = at;
          h.next = at + h.every;
          continue;
        }
        if (!held.has(h.lease.id)) continue;
        const { rows: found } = await c.query('SELECT state, retry_count FROM ' + t + ' WHERE id = $1', [h.lease.id]);
        const job = found[0];
        lost(h.lease.id, !job ? 'its job is gone from the queue'
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
        lost(h.lease.id, 'no heartbeat for ' + Math.round((at - h.ok) / 1000) + ' s: ' + (err && err.message ? err.message : String(err)));
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
    held.set(m.lease.id, { lease: m.lease, every, ok: Date.now(), next: Date.now() + every });
  } else if (m.type === 'release') held.delete(m.lease ? m.lease.id : m.id);
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
      const onLost = this.lost.get(m.id);
      this.lost.delete(m.id);
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
    this.lost.set(lease.id, onLost);
    this.post({ type: 'hold', lease });
    return () => {
      // Forgotten here first: a loss the thread finds after the job was settled is no loss.
      if (!this.lost.delete(lease.id)) return;
      this.post({ type: 'release', id: lease.id });
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
