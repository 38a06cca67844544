import {
  type ACTIVE_STAGES,
  endValues,
  FINAL_SQL,
  type GroupStatsFn,
  groupId,
  groupWrites,
  ROLLOUT_COLUMNS,
  type RolloutRow,
  SAMPLE_COLUMNS,
  SAMPLE_OUTCOMES,
  SAMPLE_STATUSES,
  type SampleEnd,
  type SampleRow,
  type SampleStatus,
  sampleId,
} from '../rollouts.js';
import type { PgQueryable, Postgres } from './client.js';
import { PgRow, pgMember, pgRollout, pgSample } from './rows.js';

/**
 * The statements of a queued rollout (rollout/queue/*) in the shared PostgreSQL store: the rollout
 * made with every sample queued, each sample's attempts moved and ended by workers on many
 * machines, and what a waiting `polar rollout --queue --wait` reads. The local store's counterpart
 * is rollouts.ts; both end a group through its one bookkeeping (`groupWrites`).
 *
 * Every write after `startAttempt` names its attempt: a worker whose lease expired (its sample
 * handed to another) can no longer move or end the sample, so no sample is rewarded twice.
 */

/** A rollout as the queue creates it; `origin` names the machine that enqueued it. */
export interface QueuedRollout extends Omit<RolloutRow, 'endedAt' | 'status'> {
  origin: string;
}

/**
 * Creates a rollout, its tasks (JSON text, in order) and every sample `queued`, in one transaction,
 * and runs `within` in it last (the samples' jobs: a rollout whose jobs could not be queued is not written).
 */
export async function insertQueuedRollout(
  pg: Postgres,
  rollout: QueuedRollout,
  tasks: readonly { id: string; json: string }[],
  within?: (tx: PgQueryable) => Promise<void>,
): Promise<void> {
  await pg.transaction(async (tx) => {
    await tx.query(
      `INSERT INTO rollouts (id, created_at, harness, upstream_url, upstream_kind, served_model, samples_per_task, tasks_file, accept, config, origin)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      [
        rollout.id,
        rollout.createdAt,
        rollout.harness,
        rollout.upstreamUrl,
        rollout.upstreamKind,
        rollout.servedModel,
        rollout.samplesPerTask,
        rollout.tasksFile,
        rollout.accept,
        JSON.stringify(rollout.config),
        rollout.origin,
      ],
    );
    for (const [position, task] of tasks.entries()) {
      await tx.query(`INSERT INTO rollout_tasks (rollout_id, task_id, position, task) VALUES ($1, $2, $3, $4)`, [rollout.id, task.id, position, task.json]);
      for (let i = 0; i < rollout.samplesPerTask; i++) {
        await tx.query(`INSERT INTO samples (id, rollout_id, task_id, sample_index, group_id) VALUES ($1, $2, $3, $4, $5)`, [
          sampleId(rollout.id, task.id, i),
          rollout.id,
          task.id,
          i,
          groupId(rollout.id, task.id),
        ]);
      }
    }
    await within?.(tx);
  });
}

export async function getSample(pg: PgQueryable, id: string): Promise<SampleRow | undefined> {
  const row = (await pg.query(`SELECT ${SAMPLE_COLUMNS} FROM samples WHERE id = $1`, [id])).rows[0];
  return row ? pgSample(row) : undefined;
}

export async function getRollout(pg: PgQueryable, id: string): Promise<RolloutRow | undefined> {
  const row = (await pg.query(`SELECT ${ROLLOUT_COLUMNS} FROM rollouts WHERE id = $1`, [id])).rows[0];
  return row ? pgRollout(row) : undefined;
}

/** One task of a rollout, as stored (JSON text). */
export async function getRolloutTask(pg: PgQueryable, rolloutId: string, taskId: string): Promise<string | undefined> {
  const row = (await pg.query(`SELECT task FROM rollout_tasks WHERE rollout_id = $1 AND task_id = $2`, [rolloutId, taskId])).rows[0];
  return row ? new PgRow(row, 'rollout_tasks').text('task') : undefined;
}

/** A sample's status alone: what a worker checks after running it. */
export async function getSampleStatus(pg: PgQueryable, id: string): Promise<SampleStatus | undefined> {
  const row = (await pg.query(`SELECT status FROM samples WHERE id = $1`, [id])).rows[0];
  return row ? new PgRow(row, 'samples').oneOf('status', SAMPLE_STATUSES) : undefined;
}

/** A new attempt of a sample under `sessionId` by `worker`: its number, or null if the sample already ended. */
export async function startAttempt(pg: PgQueryable, id: string, sessionId: string, worker: string, now: number): Promise<number | null> {
  const { rows } = await pg.query(
    `UPDATE samples SET status = 'init', attempt = attempt + 1, session_id = $2, started_at = $3, ended_at = NULL,
                        error = NULL, error_stage = NULL, timing = '{}', worker = $4
      WHERE id = $1 AND status NOT IN ${FINAL_SQL} RETURNING attempt`,
    [id, sessionId, now, worker],
  );
  return rows[0] ? new PgRow(rows[0], 'samples').number('attempt') : null;
}

/** Moves an unfinished attempt to a stage, merging stage timings (ms). */
export async function stageAttempt(
  pg: PgQueryable,
  id: string,
  attempt: number,
  status: (typeof ACTIVE_STAGES)[number],
  timing: Record<string, number>,
): Promise<void> {
  await pg.query(
    `UPDATE samples SET status = $2, timing = (timing::jsonb || $3::jsonb)::text
      WHERE id = $1 AND attempt = $4 AND status NOT IN ${FINAL_SQL}`,
    [id, status, JSON.stringify(timing), attempt],
  );
}

/**
 * Leaves an attempt that stopped before it ended for a retry, with why when it was not Ctrl-C
 * (LEASE_LOST); an attempt another worker has taken over is left alone.
 */
export async function interruptAttempt(pg: PgQueryable, id: string, attempt: number, error: string | null = null): Promise<void> {
  await pg.query(`UPDATE samples SET status = 'interrupted', error = $3 WHERE id = $1 AND attempt = $2 AND status NOT IN ${FINAL_SQL}`, [id, attempt, error]);
}

/** The error of an attempt whose worker lost its job's lease (rollout/queue/lease.ts): the queue retries it. */
export const LEASE_LOST = 'interrupted: lease lost';

/**
 * Whether a waiting coordinator is done with a sample: it has an outcome, or it was given up on
 * (interrupted with interruptAbandoned's reason). One interrupted by Ctrl-C (no error) or a lost
 * lease (LEASE_LOST) is handed back to the queue and runs again.
 */
export function sampleHasEnded(s: { status: SampleStatus; error: string | null }): boolean {
  if ((SAMPLE_OUTCOMES as readonly string[]).includes(s.status)) return true;
  return s.status === 'interrupted' && s.error !== null && s.error !== LEASE_LOST;
}

/**
 * Ends an attempt, once: false (nothing written) if the sample had ended or the attempt was
 * superseded. In the same transaction, under a lock on the rollout (its last samples may end at
 * once on two machines, in one group or in two, and none may miss that its group is whole or that
 * the rollout is done: under a lock on the group only, two tasks' last samples each saw the other
 * still running and the rollout never ended): the group's statistics when this completes it, and
 * the rollout's end when this was its last sample. Each statement after the lock reads what every
 * earlier finish committed.
 */
export async function finishAttempt(pg: Postgres, id: string, attempt: number, end: SampleEnd, stats: GroupStatsFn): Promise<boolean> {
  return pg.transaction(async (tx) => {
    // Each statement reads what committed before it (not one snapshot for the transaction, which a
    // server or role default could make it), so those after the lock see every earlier finish.
    await tx.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
    const found = (await tx.query(`SELECT rollout_id, task_id, group_id FROM samples WHERE id = $1`, [id])).rows[0];
    if (!found) return false;
    const r = new PgRow(found, 'samples');
    const group = { rolloutId: r.text('rollout_id'), taskId: r.text('task_id'), groupId: r.text('group_id') };
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`polar-rollout:${group.rolloutId}`]);
    const v = endValues(end);
    const changed = await tx.query(
      `UPDATE samples SET status = $3, error_stage = $4, error = $5, reward = $6, trace_rewards = $7, evaluator = $8, diff = $9,
                          accepted = $10, timing = (timing::jsonb || $11::jsonb)::text, ended_at = $12
        WHERE id = $1 AND attempt = $2 AND status NOT IN ${FINAL_SQL}`,
      [id, attempt, v.status, v.errorStage, v.error, v.reward, v.traceRewards, v.evaluator, v.diff, v.accepted, v.timing, Date.now()],
    );
    if (!changed.rowCount) {
      // This very end may be there already: a try whose COMMIT landed but whose reply was lost (a
      // restart at that moment) is tried again by the ledger (whileUnreachable). It is recorded.
      const same = await tx.query(
        `SELECT 1 FROM samples WHERE id = $1 AND attempt = $2 AND status = $3 AND reward IS NOT DISTINCT FROM $4 AND error IS NOT DISTINCT FROM $5`,
        [id, attempt, v.status, v.reward, v.error],
      );
      return (same.rowCount ?? 0) > 0;
    }
    await writeGroupIfComplete(tx, group, stats);
    await tx.query(
      `UPDATE rollouts SET status = 'completed', ended_at = $2
        WHERE id = $1 AND status = 'running' AND NOT EXISTS (SELECT 1 FROM samples WHERE rollout_id = $1 AND status NOT IN ${FINAL_SQL})`,
      [group.rolloutId, Date.now()],
    );
    return true;
  });
}

/**
 * Ends a queued rollout's samples that have not ended, from outside any worker (`polar serve`
 * cutting stragglers off at early stop, or cancelling on DELETE): each becomes `error` with
 * `reason`, fencing its worker (whose later writes name a sample that has ended, and change
 * nothing; the worker stops its harness when it reads the row: worker.ts). Under the rollout's
 * lock, as finishAttempt: the group's statistics, and the rollout's end (as `rolloutEnd`) when
 * these were its last samples.
 * Returns the samples it ended (one that ended meanwhile by itself is not among them).
 */
export async function cutQueuedSamples(
  pg: Postgres,
  cut: { rolloutId: string; ids: readonly string[]; reason: string; rolloutEnd: 'completed' | 'interrupted' },
  stats: GroupStatsFn,
): Promise<string[]> {
  const { rolloutId, ids, reason, rolloutEnd } = cut;
  return pg.transaction(async (tx) => {
    await tx.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`polar-rollout:${rolloutId}`]);
    const now = Date.now();
    const { rows } = await tx.query(
      `UPDATE samples SET status = 'error', error_stage = 'cancel', error = $3, ended_at = $4
        WHERE rollout_id = $1 AND id = ANY($2::text[]) AND status NOT IN ${FINAL_SQL} RETURNING id, task_id, group_id`,
      [rolloutId, ids, reason, now],
    );
    const groups = new Map<string, GroupKey>();
    for (const row of rows) {
      const r = new PgRow(row, 'samples');
      groups.set(r.text('task_id'), { rolloutId, taskId: r.text('task_id'), groupId: r.text('group_id') });
    }
    for (const group of groups.values()) await writeGroupIfComplete(tx, group, stats);
    await tx.query(
      `UPDATE rollouts SET status = $3, ended_at = $2
        WHERE id = $1 AND status = 'running' AND NOT EXISTS (SELECT 1 FROM samples WHERE rollout_id = $1 AND status NOT IN ${FINAL_SQL})`,
      [rolloutId, now, rolloutEnd],
    );
    return rows.map((row) => new PgRow(row, 'samples').text('id'));
  });
}

type GroupKey = { rolloutId: string; taskId: string; groupId: string };

async function writeGroupIfComplete(tx: PgQueryable, group: GroupKey, stats: GroupStatsFn): Promise<void> {
  const { rows } = await tx.query(`SELECT id, status, reward, accepted FROM samples WHERE rollout_id = $1 AND task_id = $2 ORDER BY sample_index`, [
    group.rolloutId,
    group.taskId,
  ]);
  const writes = groupWrites(group, rows.map(pgMember), stats, Date.now());
  if (!writes) return;
  for (const a of writes.advantages) {
    await tx.query(`UPDATE samples SET advantage = $2, loo_advantage = $3 WHERE id = $1`, [a.id, a.advantage, a.looAdvantage]);
  }
  const g = writes.group;
  await tx.query(
    `INSERT INTO groups (rollout_id, task_id, group_id, samples, rewarded, mean, std, accepted, completed_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (rollout_id, task_id) DO UPDATE SET samples = EXCLUDED.samples, rewarded = EXCLUDED.rewarded, mean = EXCLUDED.mean,
       std = EXCLUDED.std, accepted = EXCLUDED.accepted, completed_at = EXCLUDED.completed_at`,
    [g.rolloutId, g.taskId, g.groupId, g.samples, g.rewarded, g.mean, g.std, g.accepted, g.completedAt],
  );
}

/**
 * Samples whose job the queue gave up on (pg-boss's job table in the same database: every retry
 * lost or failed) can no longer end by themselves: they are marked `interrupted`, the policy when
 * retries run out. Returns how many.
 */
export async function interruptAbandoned(pg: PgQueryable, rolloutId: string, queueName: string): Promise<number> {
  const { rowCount } = await pg.query(
    `UPDATE samples SET status = 'interrupted',
            error = CASE WHEN error IS NULL OR error = '${LEASE_LOST}' THEN 'every attempt was lost or failed (queue retries used up)' ELSE error END
      WHERE rollout_id = $1 AND status NOT IN ('completed', 'failed', 'timeout', 'error', 'interrupted')
        AND id IN (SELECT data->>'sampleId' FROM pgboss.job WHERE name = $2 AND state = 'failed' AND data->>'rolloutId' = $1)`,
    [rolloutId, queueName],
  );
  return rowCount ?? 0;
}

/** Where one sample of a waited-on rollout stands: the few columns progress needs. */
export interface SampleProgress {
  id: string;
  taskId: string;
  status: SampleStatus;
  reward: number | null;
  error: string | null;
  worker: string | null;
}

/** One light query for a waiting `rollout --queue --wait`: every sample's status, no bodies, no mirror. */
export async function sampleProgress(pg: PgQueryable, rolloutId: string): Promise<SampleProgress[]> {
  const { rows } = await pg.query(`SELECT id, task_id, status, reward, error, worker FROM samples WHERE rollout_id = $1 ORDER BY task_id, sample_index`, [
    rolloutId,
  ]);
  return rows.map((row) => {
    const r = new PgRow(row, 'samples');
    return {
      id: r.text('id'),
      taskId: r.text('task_id'),
      status: r.oneOf('status', SAMPLE_STATUSES),
      reward: r.numberOrNull('reward'),
      error: r.textOrNull('error'),
      worker: r.textOrNull('worker'),
    };
  });
}
