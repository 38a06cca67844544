import { PolarError } from '../../core/errors.js';
import {
  type GroupMember,
  ROLLOUT_STATUSES,
  type RolloutRow,
  type RolloutStatus,
  SAMPLE_STATUSES,
  type SampleRow,
  type SampleStatus,
  toMember,
  toRollout,
  toSample,
} from '../rollouts.js';

/**
 * Typed readers for rows PostgreSQL gives back (`Record<string, unknown>`): each column is checked
 * against the type the schema gives it (BIGINT and DOUBLE PRECISION arrive as numbers, client.ts),
 * so a schema that drifted fails here naming the table and column, not later as a wrong value.
 * The checked columns then go through the same mappers as SQLite rows (rollouts.ts).
 */
export class PgRow {
  constructor(
    private readonly row: Record<string, unknown>,
    private readonly table: string,
  ) {}

  text(column: string): string {
    return this.read(column, (v): v is string => typeof v === 'string', 'text');
  }

  textOrNull(column: string): string | null {
    return this.row[column] === null ? null : this.text(column);
  }

  number(column: string): number {
    return this.read(column, (v): v is number => typeof v === 'number', 'a number');
  }

  numberOrNull(column: string): number | null {
    return this.row[column] === null ? null : this.number(column);
  }

  oneOf<T extends string>(column: string, allowed: readonly T[]): T {
    const v = this.text(column);
    const found = allowed.find((a) => a === v);
    if (found === undefined) throw this.mismatch(column, allowed.join(' | '));
    return found;
  }

  private read<T>(column: string, is: (v: unknown) => v is T, expected: string): T {
    const v = this.row[column];
    if (!is(v)) throw this.mismatch(column, expected);
    return v;
  }

  private mismatch(column: string, expected: string): PolarError {
    return new PolarError(
      'POLAR_INTERNAL',
      `${this.table}.${column} in PostgreSQL is ${JSON.stringify(this.row[column]) ?? 'missing'}, expected ${expected}: is the shared store's schema this polar's?`,
    );
  }
}

export function pgSample(row: Record<string, unknown>): SampleRow {
  const r = new PgRow(row, 'samples');
  return toSample({
    id: r.text('id'),
    rollout_id: r.text('rollout_id'),
    task_id: r.text('task_id'),
    sample_index: r.number('sample_index'),
    group_id: r.text('group_id'),
    attempt: r.number('attempt'),
    session_id: r.textOrNull('session_id'),
    status: r.oneOf<SampleStatus>('status', SAMPLE_STATUSES),
    error_stage: r.textOrNull('error_stage'),
    error: r.textOrNull('error'),
    reward: r.numberOrNull('reward'),
    trace_rewards: r.textOrNull('trace_rewards'),
    evaluator: r.textOrNull('evaluator'),
    diff: r.textOrNull('diff'),
    accepted: r.numberOrNull('accepted'),
    advantage: r.numberOrNull('advantage'),
    loo_advantage: r.numberOrNull('loo_advantage'),
    timing: r.text('timing'),
    started_at: r.numberOrNull('started_at'),
    ended_at: r.numberOrNull('ended_at'),
    worker: r.textOrNull('worker'),
  });
}

export function pgRollout(row: Record<string, unknown>): RolloutRow {
  const r = new PgRow(row, 'rollouts');
  return toRollout({
    id: r.text('id'),
    created_at: r.number('created_at'),
    ended_at: r.numberOrNull('ended_at'),
    status: r.oneOf<RolloutStatus>('status', ROLLOUT_STATUSES),
    harness: r.text('harness'),
    upstream_url: r.textOrNull('upstream_url'),
    upstream_kind: r.textOrNull('upstream_kind'),
    served_model: r.textOrNull('served_model'),
    samples_per_task: r.number('samples_per_task'),
    tasks_file: r.textOrNull('tasks_file'),
    accept: r.textOrNull('accept'),
    config: r.text('config'),
  });
}

export function pgMember(row: Record<string, unknown>): GroupMember {
  const r = new PgRow(row, 'samples');
  return toMember({ id: r.text('id'), status: r.text('status'), reward: r.numberOrNull('reward'), accepted: r.numberOrNull('accepted') });
}
