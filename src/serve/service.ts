import { PolarError } from '../core/errors.js';
import type { InferenceState, TaskBackend } from './backend.js';
import { postCallback } from './callback.js';
import { parseTaskRequest, type RequestError } from './request.js';
import type { Cut, Json } from './results.js';
import { ServedRun } from './served-run.js';

export interface ServiceOptions {
  /** Where the sessions run: this machine (LocalBackend) or `polar worker`s through a queue (QueueBackend). */
  backend: TaskBackend;
  /** The agent's own budget (s) when a task's metadata gives none. */
  timeoutSec: number;
  nodeId: string;
  /** How long a DELETE with register_if_missing blocks a later submit of that id (Polar: 300 s, manager.py:31). */
  tombstoneMs?: number;
  onNotice?: (line: string) => void;
}

export type Answer = { status: number; body: unknown };

/**
 * The rollout service behind `polar serve`: Polar's RolloutManager contract (manager.py) over polar's
 * rollouts. Each TaskRequest is one rollout of one task × num_samples (one GRPO group: one first
 * prompt), run by the backend (here, or on workers); early stop, cancellation, results and the
 * callback are the same wherever the sessions ran. Tasks are kept for the server's life, as Polar
 * keeps them (manager.py:135).
 */
export class RolloutService {
  private readonly runs = new Map<string, ServedRun>();
  /** Ids whose rollout is being made: a second submit of one is refused as a running one is. */
  private readonly starting = new Set<string>();
  private readonly tombstones = new Map<string, number>();
  private readonly running = new Set<Promise<void>>();
  private readonly backend: TaskBackend;
  private closing = false;
  private paused = false;

  constructor(private readonly options: ServiceOptions) {
    this.backend = options.backend;
  }

  /** POST /rollout/task/submit: `{task_id, status: "running"}` once the task is recorded (server.py:139-156); the sessions run in the background. */
  async submit(body: unknown): Promise<Answer> {
    if (this.closing) return { status: 503, body: { detail: 'polar serve is shutting down' } };
    const parsed = parseTaskRequest(body, this.options.timeoutSec);
    if ('detail' in parsed) return { status: (parsed as RequestError).status, body: { detail: parsed.detail } };
    const served = parsed;
    const previous = this.runs.get(served.taskId);
    if (this.starting.has(served.taskId) || (previous && (previous.state === 'running' || previous.state === 'cancelling')))
      return { status: 409, body: { detail: `task ${served.taskId} is already running` } };
    const tomb = this.tombstones.get(served.taskId);
    if (tomb !== undefined && tomb > Date.now()) return { status: 409, body: { detail: `task ${served.taskId} was cancelled before submission` } };
    this.tombstones.delete(served.taskId);
    this.starting.add(served.taskId);
    let rolloutId: string;
    try {
      rolloutId = await this.backend.record(served);
    } catch (err) {
      const loc = (err as { loc?: (string | number)[] }).loc;
      // A request the backend does not run, named by field as request.ts names them.
      if (err instanceof PolarError && err.status === 400 && loc)
        return { status: 400, body: { detail: [{ type: 'polar_unsupported', loc: ['body', ...loc], msg: err.message }] } };
      const status = err instanceof PolarError && err.status >= 400 ? err.status : 503;
      return { status, body: { detail: `task ${served.taskId} could not be recorded: ${(err as Error).message}` } };
    } finally {
      this.starting.delete(served.taskId);
    }
    for (const line of served.notices) this.options.onNotice?.(`task ${served.taskId}: ${line}`);
    const run = new ServedRun(served, rolloutId, Date.now(), this.options.nodeId, this.backend.store);
    this.runs.set(served.taskId, run);
    const work = this.execute(run).finally(() => this.running.delete(work));
    this.running.add(work);
    // A DELETE of this id (its tombstone) or a shutdown while the rollout was being made: it is cancelled at once.
    const tombstoned = (this.tombstones.get(served.taskId) ?? 0) > Date.now();
    if (tombstoned || this.closing) {
      this.tombstones.delete(served.taskId);
      await this.cancel(served.taskId, false);
    }
    return { status: 200, body: { task_id: served.taskId, status: 'running' } };
  }

  /** GET /rollout/task/{id}: TaskStatus, or 404 (server.py:159-164). */
  get(taskId: string): Answer {
    const run = this.runs.get(taskId);
    if (!run) return { status: 404, body: { detail: 'Task not found' } };
    return { status: 200, body: run.status() };
  }

  /**
   * DELETE /rollout/task/{id}: a running task is cancelled (its harnesses ended as Ctrl-C ends them,
   * samples not started never start), answered `cancelling`; a finished one is returned as it is;
   * an unknown one with register_if_missing is a tombstone that refuses its submit for a while
   * (manager.py:234-277).
   */
  async cancel(taskId: string, registerIfMissing: boolean): Promise<Answer> {
    const run = this.runs.get(taskId);
    if (!run) {
      if (!registerIfMissing) return { status: 404, body: { detail: 'Task not found' } };
      this.tombstones.set(taskId, Date.now() + (this.options.tombstoneMs ?? 300_000));
      return { status: 200, body: { task_id: taskId, status: 'cancelled', total_sessions: 0, completed_sessions: 0, results: [], result_paths: [] } };
    }
    if (run.state === 'running') {
      run.state = 'cancelling';
      await this.cut(run, { kind: 'cancelled' });
    }
    return { status: 200, body: run.status() };
  }

  /** GET /rollout/status (server.py:182-184): every task's state, and the sessions waiting for a slot. */
  async overview(): Promise<Json> {
    return {
      tasks: Object.fromEntries([...this.runs].map(([id, r]) => [id, r.state])),
      pipeline: { pending_sessions: await this.backend.pending() },
      nodes: [this.options.nodeId],
    };
  }

  /** The view `polar serve` prints and /health carries: tasks by state, callbacks not delivered. */
  counts(): Record<string, number> {
    const out: Record<string, number> = { running: 0, completed: 0, failed: 0, cancelling: 0, cancelled: 0, callbacks_undelivered: 0 };
    for (const r of this.runs.values()) {
      out[r.state] = (out[r.state] ?? 0) + 1;
      if (r.callback && !r.callback.delivered) out.callbacks_undelivered!++;
    }
    return out;
  }

  /**
   * Around a weight update, as Slime's bridge drives Polar's gateway (`POST
   * /admin/inference/pause?timeout_seconds=N`, then `/resume`; clients.md S7-S9): `inflight` is what
   * is still running when the answer comes; the bridge resumes and fails the update unless it is 0.
   */
  pauseInference(timeoutMs: number): Promise<InferenceState> {
    this.paused = true;
    return this.backend.pause(timeoutMs);
  }

  resumeInference(): Promise<InferenceState> {
    this.paused = false;
    return this.backend.resume();
  }

  inferenceStatus(): Promise<InferenceState> {
    return this.backend.inference();
  }

  /** Cancels every running task and waits for them; then closes the backend. */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.allSettled([...this.runs.keys()].map((id) => this.cancel(id, false)));
    await Promise.allSettled([...this.running]);
    if (this.paused) await this.backend.resume().catch(() => undefined);
    await this.backend.close();
  }

  /** Every sample run by the backend, then the task's end: results in sample order, the callback. */
  private async execute(run: ServedRun): Promise<void> {
    try {
      await this.backend.run(run, (sampleId) => {
        run.ended.push(sampleId);
        void this.earlyStop(run);
      });
      // A cut still being written decides which sessions were cut: the results wait for it.
      await run.cutting;
      run.finish(run.state === 'cancelling' ? 'cancelled' : 'completed');
    } catch (err) {
      // Polar's 'failed': the batch itself could not run (manager.py:214-222), here the harness's capture or the queue.
      run.error = (err as Error).message;
      this.options.onNotice?.(`task ${run.served.taskId} failed: ${run.error}`);
      run.finish('failed');
      return;
    }
    if (run.state === 'completed' && run.served.callbackUrl) {
      run.callback = await postCallback(run.served.callbackUrl, run.taskResult());
      if (!run.callback.delivered)
        this.options.onNotice?.(
          `task ${run.served.taskId}: the callback to ${run.served.callbackUrl} was not delivered after ${run.callback.attempts} attempts (${run.callback.lastError}); the trainer can still poll GET /rollout/task/${run.served.taskId}`,
        );
    }
  }

  /** Once enough sessions are usable, the rest are cut off (rollout/pipeline.py:208-227): still num_samples results, the stragglers ERROR and flagged. */
  private async earlyStop(run: ServedRun): Promise<void> {
    const threshold = run.served.earlyStop;
    if (threshold === null || run.state !== 'running' || run.abort.signal.aborted) return;
    const usable = run.usable();
    if (usable < threshold) return;
    const left = run.samples().filter((s) => !run.hasResult(s)).length;
    if (left === 0) return;
    this.options.onNotice?.(
      `task ${run.served.taskId}: ${usable} of ${threshold} usable sessions; ${left} still running cut off (early_stop_min_usable_sessions)`,
    );
    await this.cut(run, { kind: 'early_stop', usable, threshold, elapsedMs: Date.now() - run.submittedAt });
  }

  /** Cuts the run's samples without a result; a failure to reach the store is said, and the next poll of the backend sees what ended. */
  private async cut(run: ServedRun, cut: Cut): Promise<void> {
    const cutting = this.backend
      .cut(run, cut)
      .catch((err: unknown) => this.options.onNotice?.(`task ${run.served.taskId}: cutting its sessions off failed: ${(err as Error).message}`));
    run.cutting = cutting;
    await cutting;
  }
}
