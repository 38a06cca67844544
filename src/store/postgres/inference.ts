import type { PgQueryable } from './client.js';
import { PgRow } from './rows.js';

/**
 * The fleet's inference pause in the shared store (migration 5): `polar serve --queue` pauses and
 * resumes every worker's capture proxy around a trainer's weight update (Slime's bridge: pause,
 * swap weights, resume), and each worker says what its proxy holds. A change is one row's new
 * epoch and a NOTIFY on CHANNEL, which each worker LISTENs for on a connection of its own, named
 * `APP_PREFIX + its key`: so the coordinator knows which workers are alive (pg_stat_activity) and
 * waits for exactly those. An idle worker costs no transaction.
 */
export const CHANNEL = 'polar_inference';
export const APP_PREFIX = 'polar-inference ';
const SCOPE = 'fleet';

export interface InferenceControl {
  paused: boolean;
  epoch: number;
}

/** Pauses or resumes the fleet: the new epoch, told to every listening worker when this commits. */
export async function setInferencePause(pg: { transaction<T>(fn: (tx: PgQueryable) => Promise<T>): Promise<T> }, paused: boolean): Promise<number> {
  return pg.transaction(async (tx) => {
    const { rows } = await tx.query(
      `INSERT INTO inference_pause (scope, paused, epoch, changed_at) VALUES ($1, $2, 1, $3)
       ON CONFLICT (scope) DO UPDATE SET paused = EXCLUDED.paused, epoch = inference_pause.epoch + 1, changed_at = EXCLUDED.changed_at
       RETURNING epoch`,
      [SCOPE, paused, Date.now()],
    );
    const epoch = new PgRow(rows[0]!, 'inference_pause').number('epoch');
    await tx.query(`SELECT pg_notify($1, $2)`, [CHANNEL, String(epoch)]);
    return epoch;
  });
}

export async function inferenceControl(pg: PgQueryable): Promise<InferenceControl> {
  const row = (await pg.query(`SELECT paused, epoch FROM inference_pause WHERE scope = $1`, [SCOPE])).rows[0];
  if (!row) return { paused: false, epoch: 0 };
  return { paused: row.paused === true, epoch: new PgRow(row, 'inference_pause').number('epoch') };
}

export interface WorkerInference {
  workerKey: string;
  worker: string;
  epoch: number;
  paused: boolean;
  inflight: number;
}

/** A worker's word on its capture proxy: the epoch it applied, whether it holds calls, how many run. */
export async function reportWorkerInference(pg: PgQueryable, w: WorkerInference): Promise<void> {
  await pg.query(
    `INSERT INTO worker_inference (worker_key, worker, epoch, paused, inflight, reported_at) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (worker_key) DO UPDATE SET worker = EXCLUDED.worker, epoch = EXCLUDED.epoch, paused = EXCLUDED.paused,
       inflight = EXCLUDED.inflight, reported_at = EXCLUDED.reported_at`,
    [w.workerKey, w.worker, w.epoch, w.paused, w.inflight, Date.now()],
  );
}

/**
 * The workers alive now (their listening connection is open) with what each last said; one alive
 * that has said nothing yet has epoch -1. Rows of workers gone are removed.
 */
export async function liveWorkers(pg: PgQueryable): Promise<WorkerInference[]> {
  const { rows } = await pg.query(
    `SELECT substr(a.application_name, $2) AS worker_key, w.worker, w.epoch, w.paused, w.inflight
       FROM pg_stat_activity a LEFT JOIN worker_inference w ON w.worker_key = substr(a.application_name, $2)
      WHERE a.application_name LIKE $1 AND a.datname = current_database()`,
    [`${APP_PREFIX}%`, APP_PREFIX.length + 1],
  );
  await pg.query(
    `DELETE FROM worker_inference w
      WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = $1 || w.worker_key AND a.datname = current_database())`,
    [APP_PREFIX],
  );
  return rows.map((row) => {
    const r = new PgRow(row, 'worker_inference');
    const known = row.epoch !== null && row.epoch !== undefined;
    return {
      workerKey: r.text('worker_key'),
      worker: known ? r.text('worker') : '?',
      epoch: known ? r.number('epoch') : -1,
      paused: row.paused === true,
      inflight: known ? r.number('inflight') : 0,
    };
  });
}

/**
 * Workers that hold a sample at a stage that calls the model (init, ready, running) in this store:
 * a pause must hear from each, listening or not (an older polar, a lost listener), before it says
 * nothing is in flight.
 */
export async function workersWithSessions(pg: PgQueryable): Promise<string[]> {
  const { rows } = await pg.query(`SELECT DISTINCT worker FROM samples WHERE status IN ('init', 'ready', 'running') AND worker IS NOT NULL`);
  return rows.map((row) => new PgRow(row, 'samples').text('worker'));
}
