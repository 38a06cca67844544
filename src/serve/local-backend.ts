import fsp from 'node:fs/promises';
import path from 'node:path';
import { newId } from '../core/ids.js';
import { Semaphore } from '../core/semaphore.js';
import type { HarnessName } from '../harness/types.js';
import type { PauseGate } from '../proxy/pause.js';
import type { RolloutConfig } from '../rollout/config.js';
import { localLedger } from '../rollout/ledger.js';
import { startCapture } from '../rollout/run-rollout.js';
import { initStage, postStage, runStage, type StageContext } from '../rollout/stages.js';
import type { RolloutTask } from '../rollout/task-file.js';
import type { Store } from '../store/store.js';
import type { InferenceState, TaskBackend } from './backend.js';
import type { ServedTask } from './request.js';
import { unsupported, writeRuntimeTask } from './runtime-task.js';
import type { Cut } from './results.js';
import type { ServedRun } from './served-run.js';

type Capture = Awaited<ReturnType<typeof startCapture>>;

export interface LocalBackendOptions {
  store: Store;
  dbPath: string;
  /** polar's side of every task: upstream, sandbox, environment, pools, out dir (the harness and samples come from each request). */
  config: Omit<RolloutConfig, 'harness' | 'samples'>;
  upstreamApiKey?: string;
  /** `--runtime-files DIR`: the only folder a request's uploads and tests_dir are read from; absent: none are. */
  runtimeFiles?: string;
  onNotice?: (line: string) => void;
}

/**
 * A served task's sessions on this machine: through the same INIT → RUNNING → POSTRUN stages and
 * pools as `polar rollout`, shared by every task (dispatch_priority orders who gets a free slot),
 * one capture proxy per harness, opened when its first task comes.
 */
export class LocalBackend implements TaskBackend {
  readonly store: Store;
  private readonly captures = new Map<HarnessName, Promise<Capture>>();
  /** Each running task's polar task (a runtime's: its Harbor folder's), by rollout. */
  private readonly tasks = new Map<string, RolloutTask>();
  private readonly slots: { init: Semaphore; run: Semaphore; post: Semaphore };
  private paused = false;

  constructor(private readonly options: LocalBackendOptions) {
    const { config } = options;
    this.store = options.store;
    this.slots = { init: new Semaphore(config.initWorkers), run: new Semaphore(config.concurrency), post: new Semaphore(config.postWorkers) };
  }

  async record(served: ServedTask): Promise<string> {
    const { config } = this.options;
    const rolloutId = newId('srv');
    let task = served.task;
    if (served.runtime) {
      // A runtime's image runs in a box; the host environment has no image to run.
      if (!config.environment)
        throw unsupported(
          ['runtime'],
          `a runtime image runs in a container: start polar serve with --environment podman (or docker); it runs each session in its sandbox on this machine now`,
        );
      task = await writeRuntimeTask(served, this.taskFolder(rolloutId), this.options.runtimeFiles ?? null);
    }
    this.store.rollouts.create(
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
      [{ id: task.id, json: JSON.stringify(task) }],
    );
    this.tasks.set(rolloutId, task);
    return rolloutId;
  }

  async run(run: ServedRun, ended: (sampleId: string) => void): Promise<void> {
    try {
      const capture = await this.capture(run.served.harness);
      const ctx = this.stageContext(run, capture);
      const priority = run.served.priority;
      await Promise.all(
        run.samples().map(async (sample) => {
          const prepared = await this.slots.init.run(async () => (ctx.stopping() ? null : initStage(ctx, sample)), priority);
          const ran = prepared ? await this.slots.run.run(() => runStage(ctx, prepared), priority) : null;
          if (ran) await this.slots.post.run(() => postStage(ctx, ran), priority);
          ended(sample.id);
        }),
      );
    } catch (err) {
      this.store.rollouts.end(run.rolloutId, 'failed');
      throw err;
    } finally {
      this.tasks.delete(run.rolloutId);
      await fsp.rm(this.taskFolder(run.rolloutId), { recursive: true, force: true }).catch(() => undefined);
    }
    this.store.rollouts.end(run.rolloutId, run.state === 'cancelling' ? 'interrupted' : 'completed');
  }

  async cut(run: ServedRun, cut: Cut): Promise<void> {
    for (const s of run.samples()) if (!run.hasResult(s)) run.cuts.set(s.id, cut);
    run.abort.abort();
  }

  /** Where a runtime's Harbor task folder is written for one task (removed when it ends; its image stays, built once per content). */
  private taskFolder(rolloutId: string): string {
    return path.join(this.options.config.outDir, 'tasks', rolloutId);
  }

  pending(): number {
    return this.slots.init.queued + this.slots.run.queued;
  }

  /**
   * Around a weight update, as Slime's bridge drives Polar's gateway (clients.md S7-S9): new model
   * calls wait at every capture proxy (PauseGate), and the answer comes once those in flight have
   * ended or the timeout passed. A harness keeps running while paused; only its model calls wait.
   */
  async pause(timeoutMs: number): Promise<InferenceState> {
    const gates = await this.gates();
    this.paused = true;
    for (const g of gates) g.pause();
    await Promise.all(gates.map((g) => g.drained(timeoutMs)));
    return this.state(gates);
  }

  async resume(): Promise<InferenceState> {
    const gates = await this.gates();
    this.paused = false;
    for (const g of gates) g.resume();
    return this.state(gates);
  }

  async inference(): Promise<InferenceState> {
    return this.state(await this.gates());
  }

  async close(): Promise<void> {
    for (const c of this.captures.values()) {
      const capture = await c.catch(() => null);
      await capture?.proxy.close(5000).catch(() => undefined);
      await capture?.socket?.remove();
      await capture?.upstream.close().catch(() => undefined);
    }
  }

  private state(gates: PauseGate[]): InferenceState {
    return { paused: this.paused, inflight: gates.reduce((n, g) => n + g.inFlight, 0) };
  }

  /** The pause gates of the capture proxies open now (a proxy opened while paused starts paused: capture()). */
  private async gates(): Promise<PauseGate[]> {
    const opened = await Promise.all([...this.captures.values()].map((c) => c.catch(() => null)));
    return opened.filter((c): c is Capture => c !== null).map((c) => c.proxy.admin.gate);
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
      tasks: new Map([[run.served.task.id, this.tasks.get(run.rolloutId) ?? run.served.task]]),
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
