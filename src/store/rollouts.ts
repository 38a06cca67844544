import os from 'node:os';
import type { Db } from './db.js';

export type RolloutStatus = 'running' | 'completed' | 'interrupted' | 'failed';
/** Where a sample is: queued, in a stage, or ended (the last four), or `interrupted` by a crash. */
export type SampleStatus = 'queued' | 'init' | 'ready' | 'running' | 'post' | SampleOutcome | 'interrupted';
export type SampleOutcome = 'completed' | 'failed' | 'timeout' | 'error';
export const SAMPLE_OUTCOMES: readonly SampleOutcome[] = ['completed', 'failed', 'timeout', 'error'];
export const ACTIVE_STAGES = ['init', 'ready', 'running', 'post'] as const;

export interface RolloutRow {
  id: string;
  createdAt: number;
  endedAt: number | null;
  status: RolloutStatus;
  harness: string;
  upstreamUrl: string | null;
  upstreamKind: string | null;
  servedModel: string | null;
  samplesPerTask: number;
  tasksFile: string | null;
  accept: string | null;
  config: Record<string, unknown>;
}

export interface SampleRow {
  id: string;
  rolloutId: string;
  taskId: string;
  sampleIndex: number;
  groupId: string;
  attempt: number;
  sessionId: string | null;
  status: SampleStatus;
  errorStage: string | null;
  error: string | null;
  reward: number | null;
  traceRewards: number[] | null;
  evaluator: Record<string, unknown> | null;
  diff: string | null;
  accepted: boolean | null;
  advantage: number | null;
  looAdvantage: number | null;
  timing: Record<string, number>;
  startedAt: number | null;
  endedAt: number | null;
  /** The process that ran the latest attempt, `host/pid`. */
  worker: string | null;
}

export interface GroupRow {
  rolloutId: string;
  taskId: string;
  groupId: string;
  samples: number;
  rewarded: number;
  mean: number | null;
  std: number | null;
  accepted: number;
  completedAt: number;
}

/** How a sample ended, as POSTRUN (or a failed stage) reports it. */
export interface SampleEnd {
  status: SampleOutcome;
  errorStage?: string | null;
  error?: string | null;
  reward?: number | null;
  traceRewards?: number[] | null;
  evaluator?: Record<string, unknown> | null;
  diff?: string | null;
  accepted?: boolean | null;
  timing?: Record<string, number>;
}

/** The group statistics for one group's rewards, computed by the rollout layer (rollout/stats.ts). */
export type GroupStatsFn = (rewards: readonly (number | null)[]) => {
  rewarded: number;
  mean: number | null;
  std: number | null;
  advantages: (number | null)[];
  looAdvantages: (number | null)[];
};

/** This process, as a sample's `worker` names it. */
export const WORKER = `${os.hostname()}/${process.pid}`;

/** The ended statuses, as SQL (the same text in SQLite and PostgreSQL). */
export const FINAL_SQL = `('completed', 'failed', 'timeout', 'error')`;

/** Every status a sample row may hold, to check a row read back. */
export const SAMPLE_STATUSES: readonly SampleStatus[] = ['queued', ...ACTIVE_STAGES, ...SAMPLE_OUTCOMES, 'interrupted'];
export const ROLLOUT_STATUSES: readonly RolloutStatus[] = ['running', 'completed', 'interrupted', 'failed'];

/**
 * The columns a sample, rollout or group row is read from, named once for both stores (this SQLite
 * table and the queue's PostgreSQL statements, postgres/queue.ts): a column added to one schema is
 * not read until it is named here, and per-machine columns (`owner_id`, `origin`) are never read.
 */
export const SAMPLE_COLUMNS =
  'id, rollout_id, task_id, sample_index, group_id, attempt, session_id, status, error_stage, error, reward, trace_rewards, evaluator, diff, accepted, advantage, loo_advantage, timing, started_at, ended_at, worker';
export const ROLLOUT_COLUMNS =
  'id, created_at, ended_at, status, harness, upstream_url, upstream_kind, served_model, samples_per_task, tasks_file, accept, config';
const GROUP_COLUMNS = 'rollout_id, task_id, group_id, samples, rewarded, mean, std, accepted, completed_at';

/**
 * Rollouts, their tasks, samples and groups (migration 5). Every sample row exists from the start
 * (status `queued`), so a crash loses no sample: a resumed rollout finds what did not end and runs it
 * again as a new attempt. `finish` sets a sample's outcome and reward only if it has none yet, in one
 * transaction with its group's statistics once the group is whole.
 */
export class RolloutsTable {
  private readonly stmts;

  constructor(
    private readonly db: Db,
    private readonly ownerId: number | null = null,
  ) {
    this.stmts = {
      insertRollout: db.prepare(
        `INSERT INTO rollouts (id, created_at, harness, upstream_url, upstream_kind, served_model, samples_per_task, tasks_file, accept, config, owner_id)
         VALUES (@id, @createdAt, @harness, @upstreamUrl, @upstreamKind, @servedModel, @samplesPerTask, @tasksFile, @accept, @config, @ownerId)`,
      ),
      insertTask: db.prepare(`INSERT INTO rollout_tasks (rollout_id, task_id, position, task) VALUES (?, ?, ?, ?)`),
      insertSample: db.prepare(`INSERT INTO samples (id, rollout_id, task_id, sample_index, group_id) VALUES (?, ?, ?, ?, ?)`),
      getRollout: db.prepare(`SELECT ${ROLLOUT_COLUMNS} FROM rollouts WHERE id = ?`),
      listRollouts: db.prepare(`SELECT ${ROLLOUT_COLUMNS} FROM rollouts ORDER BY created_at, id`),
      tasks: db.prepare(`SELECT task FROM rollout_tasks WHERE rollout_id = ? ORDER BY position`),
      samples: db.prepare(`SELECT ${SAMPLE_COLUMNS} FROM samples WHERE rollout_id = ? ORDER BY task_id, sample_index`),
      sample: db.prepare(`SELECT ${SAMPLE_COLUMNS} FROM samples WHERE id = ?`),
      bySession: db.prepare(`SELECT ${SAMPLE_COLUMNS} FROM samples WHERE session_id = ?`),
      groupSamples: db.prepare(`SELECT id, status, reward, accepted FROM samples WHERE rollout_id = ? AND task_id = ? ORDER BY sample_index`),
      groups: db.prepare(`SELECT ${GROUP_COLUMNS} FROM groups WHERE rollout_id = ? ORDER BY task_id`),
      stage: db.prepare(`UPDATE samples SET status = @status, timing = json_patch(timing, @timing) WHERE id = @id AND status NOT IN ${FINAL_SQL}`),
      start: db.prepare(
        `UPDATE samples SET status = 'init', attempt = attempt + 1, session_id = @sessionId, started_at = @now, ended_at = NULL,
                            error = NULL, error_stage = NULL, timing = '{}', owner_id = @ownerId, worker = @worker
          WHERE id = @id AND status NOT IN ${FINAL_SQL} RETURNING attempt`,
      ),
      finish: db.prepare(
        `UPDATE samples SET status = @status, error_stage = @errorStage, error = @error, reward = @reward, trace_rewards = @traceRewards,
                            evaluator = @evaluator, diff = @diff, accepted = @accepted, timing = json_patch(timing, @timing), ended_at = @now
          WHERE id = @id AND status NOT IN ${FINAL_SQL}`,
      ),
      advantage: db.prepare(`UPDATE samples SET advantage = ?, loo_advantage = ? WHERE id = ?`),
      upsertGroup: db.prepare(
        `INSERT INTO groups (rollout_id, task_id, group_id, samples, rewarded, mean, std, accepted, completed_at)
         VALUES (@rolloutId, @taskId, @groupId, @samples, @rewarded, @mean, @std, @accepted, @completedAt)
         ON CONFLICT (rollout_id, task_id) DO UPDATE SET samples = excluded.samples, rewarded = excluded.rewarded, mean = excluded.mean,
           std = excluded.std, accepted = excluded.accepted, completed_at = excluded.completed_at`,
      ),
      addTask: db.prepare(
        `INSERT OR IGNORE INTO rollout_tasks (rollout_id, task_id, position, task)
         VALUES (?, ?, (SELECT COUNT(*) FROM rollout_tasks WHERE rollout_id = ?), ?)`,
      ),
      nextIndex: db.prepare(`SELECT COALESCE(MAX(sample_index) + 1, 0) AS n FROM samples WHERE rollout_id = ? AND task_id = ?`),
      interrupt: db.prepare(`UPDATE samples SET status = 'interrupted' WHERE id = ? AND status NOT IN ${FINAL_SQL}`),
      requeue: db.prepare(`UPDATE samples SET status = 'queued' WHERE rollout_id = ? AND status NOT IN ${FINAL_SQL} AND status <> 'queued'`),
      endRollout: db.prepare(`UPDATE rollouts SET status = ?, ended_at = ? WHERE id = ?`),
      claimRollout: db.prepare(`UPDATE rollouts SET status = 'running', ended_at = NULL, owner_id = ? WHERE id = ?`),
    };
  }

  /** Creates a rollout with its tasks and every sample (queued), in one transaction. */
  create(rollout: Omit<RolloutRow, 'createdAt' | 'endedAt' | 'status'>, tasks: readonly { id: string; json: string }[]): void {
    this.db.transaction(() => {
      this.stmts.insertRollout.run({ ...rollout, createdAt: Date.now(), config: JSON.stringify(rollout.config), ownerId: this.ownerId });
      tasks.forEach((task, position) => {
        this.stmts.insertTask.run(rollout.id, task.id, position, task.json);
        for (let i = 0; i < rollout.samplesPerTask; i++) {
          this.stmts.insertSample.run(sampleId(rollout.id, task.id, i), rollout.id, task.id, i, groupId(rollout.id, task.id));
        }
      });
    })();
  }

  /**
   * A sample added to a running rollout (the gym agent gets its tasks one `/run` at a time): the task
   * is stored the first time it is seen, and the sample takes the task's next index.
   */
  addSample(rolloutId: string, task: { id: string; json: string }): SampleRow {
    return this.db
      .transaction((): SampleRow => {
        this.stmts.addTask.run(rolloutId, task.id, rolloutId, task.json);
        const { n } = this.stmts.nextIndex.get(rolloutId, task.id) as { n: number };
        const id = sampleId(rolloutId, task.id, n);
        this.stmts.insertSample.run(id, rolloutId, task.id, n, groupId(rolloutId, task.id));
        return this.sample(id)!;
      })
      .immediate();
  }

  get(id: string): RolloutRow | undefined {
    const raw = this.stmts.getRollout.get(id) as RawRollout | undefined;
    return raw ? toRollout(raw) : undefined;
  }

  list(): RolloutRow[] {
    return (this.stmts.listRollouts.all() as RawRollout[]).map(toRollout);
  }

  /** The task objects a rollout ran, as stored (JSON text), in task-file order. */
  tasks(id: string): string[] {
    return (this.stmts.tasks.all(id) as { task: string }[]).map((r) => r.task);
  }

  samples(rolloutId: string): SampleRow[] {
    return (this.stmts.samples.all(rolloutId) as RawSample[]).map(toSample);
  }

  sample(id: string): SampleRow | undefined {
    const raw = this.stmts.sample.get(id) as RawSample | undefined;
    return raw ? toSample(raw) : undefined;
  }

  /** The sample a session was an attempt of, if any. */
  sampleForSession(sessionId: string): SampleRow | undefined {
    const raw = this.stmts.bySession.get(sessionId) as RawSample | undefined;
    return raw ? toSample(raw) : undefined;
  }

  groups(rolloutId: string): GroupRow[] {
    return (this.stmts.groups.all(rolloutId) as RawGroup[]).map(toGroup);
  }

  /** Starts a new attempt of a sample under `sessionId`; returns its attempt number, or null if it already ended. */
  start(id: string, sessionId: string): number | null {
    // all(), not get(): a COMMIT that fails at get()'s reset is not reported (requests.ts begin).
    const [row] = this.stmts.start.all({ id, sessionId, now: Date.now(), ownerId: this.ownerId, worker: WORKER }) as { attempt: number }[];
    return row ? row.attempt : null;
  }

  /** Moves an unfinished sample to a stage, merging stage timings (ms). */
  stage(id: string, status: (typeof ACTIVE_STAGES)[number], timing: Record<string, number> = {}): void {
    this.stmts.stage.run({ id, status, timing: JSON.stringify(timing) });
  }

  /**
   * Ends a sample, once: returns false (and writes nothing) if it had already ended, so a sample is
   * never rewarded twice. When this completes its group, the group's statistics and every member's
   * advantages are written in the same transaction.
   */
  finish(id: string, end: SampleEnd, stats: GroupStatsFn): boolean {
    return this.db
      .transaction((): boolean => {
        const changed = this.stmts.finish.run({ id, now: Date.now(), ...endValues(end) }).changes;
        if (changed === 0) return false;
        const sample = this.sample(id)!;
        const members = (this.stmts.groupSamples.all(sample.rolloutId, sample.taskId) as RawMember[]).map(toMember);
        const writes = groupWrites(sample, members, stats, Date.now());
        if (writes) {
          for (const a of writes.advantages) this.stmts.advantage.run(a.advantage, a.looAdvantage, a.id);
          this.stmts.upsertGroup.run(writes.group);
        }
        return true;
      })
      .immediate();
  }

  /** A sample stopped before it ended (Ctrl-C): left for a resume to run again. */
  interrupt(id: string): void {
    this.stmts.interrupt.run(id);
  }

  /** Puts every sample that did not end back in the queue (for --resume); returns how many. */
  requeueUnfinished(rolloutId: string): number {
    return this.stmts.requeue.run(rolloutId).changes;
  }

  /** This process takes over a rollout (a resume). */
  claim(rolloutId: string): void {
    this.stmts.claimRollout.run(this.ownerId, rolloutId);
  }

  end(rolloutId: string, status: Exclude<RolloutStatus, 'running'>): void {
    this.stmts.endRollout.run(status, Date.now(), rolloutId);
  }
}

/** A sample's end as column values, the same for both stores (JSON text, accepted as 0/1). */
export function endValues(end: SampleEnd) {
  return {
    status: end.status,
    errorStage: end.errorStage ?? null,
    error: end.error ?? null,
    reward: end.reward ?? null,
    traceRewards: end.traceRewards ? JSON.stringify(end.traceRewards) : null,
    evaluator: end.evaluator ? JSON.stringify(end.evaluator) : null,
    diff: end.diff ?? null,
    accepted: end.accepted === undefined || end.accepted === null ? null : end.accepted ? 1 : 0,
    timing: JSON.stringify(end.timing ?? {}),
  };
}

/** A group member as the bookkeeping reads it. */
export interface GroupMember {
  id: string;
  status: string;
  reward: number | null;
  accepted: boolean | null;
}

/** What completing a group writes: each member's advantages (in member order) and the group's row. */
export interface GroupWrites {
  advantages: { id: string; advantage: number | null; looAdvantage: number | null }[];
  group: GroupRow;
}

/**
 * The group bookkeeping of both stores (this table, and the queue's PostgreSQL in
 * postgres/queue.ts): once every member of a group has ended, its statistics and each member's
 * advantages; null while one has not. Pure: each store writes the result in its own dialect, in
 * the transaction that ended the last member.
 */
export function groupWrites(
  group: { rolloutId: string; taskId: string; groupId: string },
  members: readonly GroupMember[],
  stats: GroupStatsFn,
  now: number,
): GroupWrites | null {
  if (!members.every((m) => (SAMPLE_OUTCOMES as readonly string[]).includes(m.status))) return null;
  const s = stats(members.map((m) => m.reward));
  return {
    advantages: members.map((m, i) => ({ id: m.id, advantage: s.advantages[i] ?? null, looAdvantage: s.looAdvantages[i] ?? null })),
    group: {
      rolloutId: group.rolloutId,
      taskId: group.taskId,
      groupId: group.groupId,
      samples: members.length,
      rewarded: s.rewarded,
      mean: s.mean,
      std: s.std,
      accepted: members.filter((m) => m.accepted === true).length,
      completedAt: now,
    },
  };
}

/** A group member's columns as both stores give them (`accepted` as 0/1). */
export interface RawMember {
  id: string;
  status: string;
  reward: number | null;
  accepted: number | null;
}

export function toMember(r: RawMember): GroupMember {
  return { id: r.id, status: r.status, reward: r.reward, accepted: r.accepted === null ? null : r.accepted === 1 };
}

export function sampleId(rolloutId: string, taskId: string, index: number): string {
  return `${rolloutId}:${taskId}:${index}`;
}

/** A GRPO group: one task's samples within one rollout. */
export function groupId(rolloutId: string, taskId: string): string {
  return `${rolloutId}/${taskId}`;
}

export interface RawRollout {
  id: string;
  created_at: number;
  ended_at: number | null;
  status: RolloutStatus;
  harness: string;
  upstream_url: string | null;
  upstream_kind: string | null;
  served_model: string | null;
  samples_per_task: number;
  tasks_file: string | null;
  accept: string | null;
  config: string;
}

export interface RawSample {
  id: string;
  rollout_id: string;
  task_id: string;
  sample_index: number;
  group_id: string;
  attempt: number;
  session_id: string | null;
  status: SampleStatus;
  error_stage: string | null;
  error: string | null;
  reward: number | null;
  trace_rewards: string | null;
  evaluator: string | null;
  diff: string | null;
  accepted: number | null;
  advantage: number | null;
  loo_advantage: number | null;
  timing: string;
  started_at: number | null;
  ended_at: number | null;
  worker: string | null;
}

export interface RawGroup {
  rollout_id: string;
  task_id: string;
  group_id: string;
  samples: number;
  rewarded: number;
  mean: number | null;
  std: number | null;
  accepted: number;
  completed_at: number;
}

export function toRollout(r: RawRollout): RolloutRow {
  return {
    id: r.id,
    createdAt: r.created_at,
    endedAt: r.ended_at,
    status: r.status,
    harness: r.harness,
    upstreamUrl: r.upstream_url,
    upstreamKind: r.upstream_kind,
    servedModel: r.served_model,
    samplesPerTask: r.samples_per_task,
    tasksFile: r.tasks_file,
    accept: r.accept,
    config: JSON.parse(r.config) as Record<string, unknown>,
  };
}

export function toSample(r: RawSample): SampleRow {
  return {
    id: r.id,
    rolloutId: r.rollout_id,
    taskId: r.task_id,
    sampleIndex: r.sample_index,
    groupId: r.group_id,
    attempt: r.attempt,
    sessionId: r.session_id,
    status: r.status,
    errorStage: r.error_stage,
    error: r.error,
    reward: r.reward,
    traceRewards: r.trace_rewards ? (JSON.parse(r.trace_rewards) as number[]) : null,
    evaluator: r.evaluator ? (JSON.parse(r.evaluator) as Record<string, unknown>) : null,
    diff: r.diff,
    accepted: r.accepted === null ? null : r.accepted === 1,
    advantage: r.advantage,
    looAdvantage: r.loo_advantage,
    timing: JSON.parse(r.timing) as Record<string, number>,
    startedAt: r.started_at,
    endedAt: r.ended_at,
    worker: r.worker ?? null,
  };
}

export function toGroup(r: RawGroup): GroupRow {
  return {
    rolloutId: r.rollout_id,
    taskId: r.task_id,
    groupId: r.group_id,
    samples: r.samples,
    rewarded: r.rewarded,
    mean: r.mean,
    std: r.std,
    accepted: r.accepted,
    completedAt: r.completed_at,
  };
}
