import path from 'node:path';
import { newId } from '../core/ids.js';
import { Semaphore } from '../core/semaphore.js';
import type { HarnessName } from '../harness/types.js';
import type { RolloutConfig } from '../rollout/config.js';
import { localLedger } from '../rollout/ledger.js';
import { startCapture } from '../rollout/run-rollout.js';
import { initStage, postStage, runStage, type StageContext } from '../rollout/stages.js';
import type { SampleRow } from '../store/rollouts.js';
import type { Store } from '../store/store.js';
import type { PauseGate } from '../proxy/pause.js';
import { postCallback } from './callback.js';
import { parseTaskRequest, type RequestError, type ServedTask } from './request.js';
import type { Json } from './results.js';
import { ServedRun } from './served-run.js';

type Capture = Awaited<ReturnType<typeof startCapture>>;

export interface ServiceOptions {
  store: Store;
  dbPath: string;
  /** polar's side of every task: upstream, sandbox, environment, pools, out dir (the harness and samples come from each request). */
  config: Omit<RolloutConfig, 'harness' | 'samples'>;
  nodeId: string;
  upstreamApiKey?: string;
  /** How long a DELETE with register_if_missing blocks a later submit of that id (Polar: 300 s, manager.py:31). */
  tombstoneMs?: number;
  onNotice?: (line: string) => void;
}

export type Answer = { status: number; body: unknown };

/**
 * The rollout service behind `polar serve`: Polar's RolloutManager contract (manager.py) over polar's
 * rollout stages. Each TaskRequest is one rollout of one task × num_samples (one GRPO group: one
 * first prompt), its sessions through the same INIT → RUNNING → POSTRUN stages and pools as `polar
 * rollout`, shared by every task (dispatch_priority orders who gets a free slot), one capture proxy
 * per harness. Tasks are kept for the server's life, as Polar keeps them (manager.py:135).
 */
export class RolloutService {
  private readonly runs = new Map<string, ServedRun>();
  private readonly tombstones = new Map<string, number>();
  private readonly captures = new Map<HarnessName, Promise<Capture>>();
  private readonly slots: { init: Semaphore; run: Semaphore; post: Semaphore };
  private readonly running = new Set<Promise<void>>();
  private closing = false;
  private paused = false;

  constructor(private readonly options: ServiceOptions) {
    const { config } = options;
    this.slots = { init: new Semaphore(config.initWorkers), run: new Semaphore(config.concurrency), post: new Semaphore(config.postWorkers) };
  }

  /** POST /rollout/task/submit: `{task_id, status: "running"}` at once (server.py:139-156); the sessions run in the background. */
  submit(body: unknown): Answer {
    if (this.closing) return { status: 503, body: { detail: 'polar serve is shutting down' } };
    const parsed = parseTaskRequest(body, this.options.config.timeoutSec);
    if ('detail' in parsed) return { status: (parsed as RequestError).status, body: { detail: parsed.detail } };
    const served = parsed;
    const previous = this.runs.get(served.taskId);
    if (previous && (previous.state === 'running' || previous.state === 'cancelling'))
      return { status: 409, body: { detail: `task ${served.taskId} is already running` } };
    const tomb = this.tombstones.get(served.taskId);
    if (tomb !== undefined && tomb > Date.now()) return { status: 409, body: { detail: `task ${served.taskId} was cancelled before submission` } };
    this.tombstones.delete(served.taskId);
    for (const line of served.notices) this.options.onNotice?.(`task ${served.taskId}: ${line}`);
    const run = this.record(served);
    this.runs.set(served.taskId, run);
    const work = this.execute(run).finally(() => this.running.delete(work));
    this.running.add(work);
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
  cancel(taskId: string, registerIfMissing: boolean): Answer {
    const run = this.runs.get(taskId);
    if (!run) {
      if (!registerIfMissing) return { status: 404, body: { detail: 'Task not found' } };
      this.tombstones.set(taskId, Date.now() + (this.options.tombstoneMs ?? 300_000));
      return { status: 200, body: { task_id: taskId, status: 'cancelled', total_sessions: 0, completed_sessions: 0, results: [], result_paths: [] } };
    }
    if (run.state === 'running') {
      run.state = 'cancelling';
      for (const s of run.samples()) if (!run.hasResult(s)) run.cuts.set(s.id, { kind: 'cancelled' });
      run.abort.abort();
    }
    return { status: 200, body: run.status() };
  }

  /** GET /rollout/status (server.py:182-184): every task's state, and the sessions waiting for a slot. */
  overview(): Json {
    return {
      tasks: Object.fromEntries([...this.runs].map(([id, r]) => [id, r.state])),
      pipeline: { pending_sessions: this.slots.init.queued + this.slots.run.queued },
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
   * /admin/inference/pause?timeout_seconds=N`, then `/resume`; clients.md S7-S9): new model calls
   * wait at every capture proxy (PauseGate), and the answer comes once those in flight have ended
   * or N seconds passed. `inflight` is what is still running: the bridge resumes and fails the
   * update unless it is 0. A harness keeps running while paused; only its model calls wait.
   */
  async pauseInference(timeoutMs: number): Promise<{ paused: boolean; inflight: number }> {
    const gates = await this.gates();
    this.paused = true;
    for (const g of gates) g.pause();
    await Promise.all(gates.map((g) => g.drained(timeoutMs)));
    return this.inference(gates);
  }

  async resumeInference(): Promise<{ paused: boolean; inflight: number }> {
    const gates = await this.gates();
    this.paused = false;
    for (const g of gates) g.resume();
    return this.inference(gates);
  }

  async inferenceStatus(): Promise<{ paused: boolean; inflight: number }> {
    return this.inference(await this.gates());
  }

  private inference(gates: PauseGate[]): { paused: boolean; inflight: number } {
    return { paused: this.paused, inflight: gates.reduce((n, g) => n + g.inFlight, 0) };
  }

  /** The pause gates of the capture proxies open now (a proxy opened while paused starts paused: capture()). */
  private async gates(): Promise<PauseGate[]> {
    const opened = await Promise.all([...this.captures.values()].map((c) => c.catch(() => null)));
    return opened.filter((c): c is Capture => c !== null).map((c) => c.proxy.admin.gate);
  }

  /** Cancels every running task and waits for them; then closes the capture proxies. */
  async close(): Promise<void> {
    this.closing = true;
    for (const id of this.runs.keys()) this.cancel(id, false);
    await Promise.allSettled([...this.running]);
    for (const c of this.captures.values()) {
      const capture = await c.catch(() => null);
      await capture?.proxy.close(5000).catch(() => undefined);
      await capture?.socket?.remove();
      await capture?.upstream.close().catch(() => undefined);
    }
  }

  /** The task's rollout row: one task, num_samples samples queued. */
  private record(served: ServedTask): ServedRun {
    const { store, config } = this.options;
    const rolloutId = newId('srv');
    store.rollouts.create(
      {
        id: rolloutId,
        harness: served.harness,
        upstreamUrl: config.upstream.url,
        upstreamKind: config.upstream.kind,
        servedModel: config.model,
        samplesPerTask: served.samples,
        tasksFile: null,
        accept: null,
        config: { ...config, harness: served.harness, samples: served.samples, source: 'serve', polar_task_id: served.taskId } as unknown as Record<
          string,
          unknown
        >,
      },
      [{ id: served.task.id, json: JSON.stringify(served.task) }],
    );
    return new ServedRun(served, rolloutId, Date.now(), this.options.nodeId, store);
  }

  /** Every sample through the stages, then the task's end: results in sample order, the callback. */
  private async execute(run: ServedRun): Promise<void> {
    try {
      const capture = await this.capture(run.served.harness);
      const ctx = this.stageContext(run, capture);
      await Promise.all(run.samples().map((s) => this.sample(run, ctx, s)));
      this.options.store.rollouts.end(run.rolloutId, run.state === 'cancelling' ? 'interrupted' : 'completed');
      run.finish(run.state === 'cancelling' ? 'cancelled' : 'completed');
    } catch (err) {
      // Polar's 'failed': the batch itself could not run (manager.py:214-222), here the harness's capture.
      run.error = (err as Error).message;
      this.options.onNotice?.(`task ${run.served.taskId} failed: ${run.error}`);
      this.options.store.rollouts.end(run.rolloutId, 'failed');
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

  /** One sample: INIT, RUNNING, POSTRUN in the shared pools, at the task's priority; then early stop. */
  private async sample(run: ServedRun, ctx: StageContext, sample: SampleRow): Promise<void> {
    const priority = run.served.priority;
    const prepared = await this.slots.init.run(async () => (ctx.stopping() ? null : initStage(ctx, sample)), priority);
    const ran = prepared ? await this.slots.run.run(() => runStage(ctx, prepared), priority) : null;
    if (ran) await this.slots.post.run(() => postStage(ctx, ran), priority);
    run.ended.push(sample.id);
    this.earlyStop(run);
  }

  /** Once enough sessions are usable, the rest are cut off (rollout/pipeline.py:208-227): still num_samples results, the stragglers ERROR and flagged. */
  private earlyStop(run: ServedRun): void {
    const threshold = run.served.earlyStop;
    if (threshold === null || run.state !== 'running' || run.abort.signal.aborted) return;
    const usable = run.usable();
    if (usable < threshold) return;
    const elapsedMs = Date.now() - run.submittedAt;
    const left = run.samples().filter((s) => !run.hasResult(s));
    if (left.length === 0) return;
    for (const s of left) run.cuts.set(s.id, { kind: 'early_stop', usable, threshold, elapsedMs });
    this.options.onNotice?.(
      `task ${run.served.taskId}: ${usable} of ${threshold} usable sessions; ${left.length} still running cut off (early_stop_min_usable_sessions)`,
    );
    run.abort.abort();
  }

  private capture(harness: HarnessName): Promise<Capture> {
    let c = this.captures.get(harness);
    if (!c) {
      const { store, config } = this.options;
      c = startCapture(store, { ...config, harness, samples: 1 } as RolloutConfig, `serve-${harness}`, this.options.upstreamApiKey).then((opened) => {
        if (this.paused) opened.proxy.admin.gate.pause();
        return opened;
      });
      // A capture that failed to open is tried again by the next task, not cached.
      c.catch(() => this.captures.delete(harness));
      this.captures.set(harness, c);
    }
    return c;
  }

  private stageContext(run: ServedRun, capture: Capture): StageContext {
    const { store, config, dbPath } = this.options;
    return {
      rolloutId: run.rolloutId,
      store,
      ledger: localLedger(store),
      dbPath,
      config: { ...config, harness: run.served.harness, samples: run.served.samples, outDir: path.join(config.outDir, run.rolloutId) },
      tasks: new Map([[run.served.task.id, run.served.task]]),
      harness: capture.harness,
      proxyUrl: capture.proxy.url,
      sessionKeys: capture.sessionKeys,
      model: capture.model,
      contextWindow: capture.contextWindow,
      accept: null,
      sandbox: capture.sandbox,
      proxySocket: capture.socket?.path ?? null,
      secrets: this.options.upstreamApiKey ? [this.options.upstreamApiKey] : [],
      tasksDir: null,
      emit: () => {},
      onNotice: (line) => this.options.onNotice?.(`task ${run.served.taskId}: ${line}`),
      stopping: () => run.abort.signal.aborted,
      signal: run.abort.signal,
      sessionBudgetMs: run.served.budgetMs,
    };
  }
}
