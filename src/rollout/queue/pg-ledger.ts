import { isUnreachable, type PgQueryable, type Postgres } from '../../store/postgres/client.js';
import { WORKER, type SampleEnd, type SampleRow } from '../../store/rollouts.js';
import type { SampleLedger } from '../ledger.js';
import { groupStats } from '../stats.js';

const FINAL = `('completed', 'failed', 'timeout', 'error')`;

/**
 * A queued rollout's samples in the shared store, moved by workers on many machines. Each attempt
 * is numbered when it starts, and every later write names its attempt: a worker whose lease expired
 * (presumed dead, its sample handed to another) can no longer move or end the sample, so no sample
 * is rewarded twice, even when the first worker was only slow. A group's statistics are written by
 * whichever finish ends the group, under a lock on the group, so two last samples ending at once on
 * two machines cannot both miss it. While PostgreSQL is unreachable each write waits and retries
 * (up to `retryForMs`).
 */
export class PgSampleLedger implements SampleLedger {
  private readonly attempts = new Map<string, number>();

  constructor(
    private readonly pg: Postgres,
    private readonly retryForMs = 120_000,
  ) {}

  async start(sample: SampleRow, sessionId: string): Promise<number | null> {
    const { rows } = await this.retry(() =>
      this.pg.query(
        `UPDATE samples SET status = 'init', attempt = attempt + 1, session_id = $2, started_at = $3, ended_at = NULL,
                            error = NULL, error_stage = NULL, timing = '{}', worker = $4
          WHERE id = $1 AND status NOT IN ${FINAL} RETURNING attempt`,
        [sample.id, sessionId, Date.now(), WORKER],
      ),
    );
    const attempt = rows[0] ? Number(rows[0].attempt) : null;
    if (attempt !== null) this.attempts.set(sample.id, attempt);
    return attempt;
  }

  async stage(sampleId: string, status: string, timing: Record<string, number> = {}): Promise<void> {
    await this.retry(() =>
      this.pg.query(
        `UPDATE samples SET status = $2, timing = (timing::jsonb || $3::jsonb)::text
          WHERE id = $1 AND attempt = $4 AND status NOT IN ${FINAL}`,
        [sampleId, status, JSON.stringify(timing), this.attempts.get(sampleId) ?? -1],
      ),
    );
  }

  async finish(sampleId: string, end: SampleEnd): Promise<boolean> {
    const attempt = this.attempts.get(sampleId) ?? -1;
    const done = await this.retry(() => this.pg.transaction((tx) => finishSample(tx, sampleId, attempt, end)));
    this.attempts.delete(sampleId);
    return done;
  }

  async interrupt(sampleId: string): Promise<void> {
    await this.retry(() =>
      this.pg.query(`UPDATE samples SET status = 'interrupted' WHERE id = $1 AND attempt = $2 AND status NOT IN ${FINAL}`, [
        sampleId,
        this.attempts.get(sampleId) ?? -1,
      ]),
    );
    this.attempts.delete(sampleId);
  }

  private async retry<T>(fn: () => Promise<T>): Promise<T> {
    const until = Date.now() + this.retryForMs;
    for (let wait = 250; ; wait = Math.min(wait * 2, 4000)) {
      try {
        return await fn();
      } catch (err) {
        if (!isUnreachable(err) || Date.now() + wait > until) throw err;
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }
}

async function finishSample(tx: PgQueryable, sampleId: string, attempt: number, end: SampleEnd): Promise<boolean> {
  const group = (await tx.query(`SELECT rollout_id, task_id, group_id FROM samples WHERE id = $1`, [sampleId])).rows[0] as
    | { rollout_id: string; task_id: string; group_id: string }
    | undefined;
  if (!group) return false;
  // One finisher per group at a time: the last two samples of a group may end at once on two machines.
  await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`polar-group:${group.group_id}`]);
  const changed = await tx.query(
    `UPDATE samples SET status = $3, error_stage = $4, error = $5, reward = $6, trace_rewards = $7, evaluator = $8, diff = $9,
                        accepted = $10, timing = (timing::jsonb || $11::jsonb)::text, ended_at = $12
      WHERE id = $1 AND attempt = $2 AND status NOT IN ${FINAL}`,
    [
      sampleId,
      attempt,
      end.status,
      end.errorStage ?? null,
      end.error ?? null,
      end.reward ?? null,
      end.traceRewards ? JSON.stringify(end.traceRewards) : null,
      end.evaluator ? JSON.stringify(end.evaluator) : null,
      end.diff ?? null,
      end.accepted === undefined || end.accepted === null ? null : end.accepted ? 1 : 0,
      JSON.stringify(end.timing ?? {}),
      Date.now(),
    ],
  );
  if (!changed.rowCount) return false;
  await writeGroupIfComplete(tx, group.rollout_id, group.task_id, group.group_id);
  // The rollout is done when its last sample is: whichever worker ends it says so.
  await tx.query(
    `UPDATE rollouts SET status = 'completed', ended_at = $2
      WHERE id = $1 AND status = 'running' AND NOT EXISTS (SELECT 1 FROM samples WHERE rollout_id = $1 AND status NOT IN ${FINAL})`,
    [group.rollout_id, Date.now()],
  );
  return true;
}

/** When every sample of the group has ended: its statistics, and each member's advantages. */
async function writeGroupIfComplete(tx: PgQueryable, rolloutId: string, taskId: string, groupId: string): Promise<void> {
  const members = (
    await tx.query(`SELECT id, status, reward, accepted FROM samples WHERE rollout_id = $1 AND task_id = $2 ORDER BY sample_index`, [rolloutId, taskId])
  ).rows as {
    id: string;
    status: string;
    reward: number | null;
    accepted: number | null;
  }[];
  if (!members.every((m) => ['completed', 'failed', 'timeout', 'error'].includes(m.status))) return;
  const s = groupStats(members.map((m) => m.reward));
  for (let i = 0; i < members.length; i++) {
    await tx.query(`UPDATE samples SET advantage = $2, loo_advantage = $3 WHERE id = $1`, [
      members[i]!.id,
      s.advantages[i] ?? null,
      s.looAdvantages[i] ?? null,
    ]);
  }
  await tx.query(
    `INSERT INTO groups (rollout_id, task_id, group_id, samples, rewarded, mean, std, accepted, completed_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (rollout_id, task_id) DO UPDATE SET samples = EXCLUDED.samples, rewarded = EXCLUDED.rewarded, mean = EXCLUDED.mean,
       std = EXCLUDED.std, accepted = EXCLUDED.accepted, completed_at = EXCLUDED.completed_at`,
    [rolloutId, taskId, groupId, members.length, s.rewarded, s.mean, s.std, members.filter((m) => m.accepted === 1).length, Date.now()],
  );
}
