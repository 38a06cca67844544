import type { PgQueryable } from '../../store/postgres/client.js';

/**
 * "Jobs were queued" in the queue's database: the coordinator sends it in the transaction that
 * queues a rollout's jobs, so PostgreSQL delivers it on commit, never before the jobs are there.
 * Each idle worker LISTENs on the connection it already holds for the fleet's inference pause
 * (inference-follower.ts) and fetches at once, instead of polling the queue on a timer: an idle
 * worker costs no transaction. The payload is the pg-boss queue's name (one per harness), so a
 * worker of another harness stays asleep. A lost notification costs only latency: the worker
 * still polls, with a back-off (worker.ts).
 */
export const JOBS_CHANNEL = 'polar_jobs';

/** Tells listening workers that `queue` has new jobs, when `tx`'s transaction commits. */
export async function notifyJobsQueued(tx: PgQueryable, queue: string): Promise<void> {
  await tx.query(`SELECT pg_notify($1, $2)`, [JOBS_CHANNEL, queue]);
}
