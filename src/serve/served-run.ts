import type { SampleRow } from '../store/rollouts.js';
import { SAMPLE_OUTCOMES } from '../store/rollouts.js';
import type { Store } from '../store/store.js';
import type { ServedTask } from './request.js';
import { type Cut, type Json, sessionResult, sessionTraces } from './results.js';

/** A task's status as Polar's RolloutManager writes it (manager.py:171,210,219,256,262,275,394,401). */
export type TaskState = 'running' | 'completed' | 'failed' | 'cancelling' | 'cancelled';

/**
 * One submitted TaskRequest while polar serves it: its rollout (one task, num_samples samples: one
 * GRPO group), the samples cut off (cancel, early stop), and its results as Polar reports them.
 */
export class ServedRun {
  state: TaskState = 'running';
  readonly abort = new AbortController();
  readonly cuts = new Map<string, Cut>();
  /** Sample ids in the order they ended (Polar lists a running task's results in completion order, manager.py:368). */
  readonly ended: string[] = [];
  /** The TaskResult posted to callback_url, when it was: what the trainer answered. */
  callback: { delivered: boolean; attempts: number; lastError: string | null } | null = null;
  error: string | null = null;
  /** A cut (early stop, DELETE) being written: the results wait for it to know which sessions it cut. */
  cutting: Promise<void> | null = null;
  private final: Json[] | null = null;

  constructor(
    readonly served: ServedTask,
    readonly rolloutId: string,
    readonly submittedAt: number,
    readonly nodeId: string,
    private readonly store: Store,
  ) {}

  samples(): SampleRow[] {
    return this.store.rollouts.samples(this.rolloutId);
  }

  /** A sample that ended on its own, or was cut off: it has a result. */
  hasResult(s: SampleRow): boolean {
    return this.cuts.has(s.id) || (SAMPLE_OUTCOMES as readonly string[]).includes(s.status);
  }

  /** Usable as Polar counts for early stop (rollout/pipeline.py:47-54): COMPLETED with a trace that has a trainable token. */
  usable(): number {
    return this.samples().filter(
      (s) => !this.cuts.has(s.id) && s.status === 'completed' && s.sessionId && sessionTraces(this.store, this.served, s).some((t) => t.loss_mask.includes(1)),
    ).length;
  }

  result(s: SampleRow): Json {
    return sessionResult(this.store, this.served, s, this.nodeId, this.cuts.get(s.id) ?? null, this.submittedAt);
  }

  /** Every sample's result in sample order, made once when the task ends. */
  finish(state: 'completed' | 'cancelled' | 'failed'): void {
    this.final = this.samples().map((s) => this.result(s));
    this.state = state;
  }

  /** TaskStatus (rollout/models.py:210-218): a running task's results so far in the order they ended, a finished one's in sample order. */
  status(): Json {
    const rows = new Map(this.samples().map((s) => [s.id, s]));
    const results =
      this.final ??
      this.ended
        .map((id) => rows.get(id))
        .filter((s): s is SampleRow => s !== undefined && this.hasResult(s))
        .map((s) => this.result(s));
    return {
      task_id: this.served.taskId,
      status: this.state,
      total_sessions: this.served.samples,
      completed_sessions: results.length,
      results,
      result_paths: [],
    };
  }

  /** The callback's body, TaskResult (rollout/models.py:201-207). */
  taskResult(): Json {
    const { task_id, status, results, result_paths } = this.status();
    return { task_id, status, results, result_paths };
  }
}
