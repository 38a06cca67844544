import type { RolloutConfig } from '../rollout/config.js';
import { enqueueRollout, interruptAbandoned, type QueueSettings } from '../rollout/queue/enqueue.js';
import { groupStats } from '../rollout/stats.js';
import { Postgres, whileUnreachable } from '../store/postgres/client.js';
import { inferenceControl, liveWorkers, setInferencePause, workersWithSessions } from '../store/postgres/inference.js';
import { mirrorPath } from '../store/postgres/journal.js';
import { syncMirror } from '../store/postgres/mirror.js';
import { cutQueuedSamples, type SampleProgress, sampleHasEnded, sampleProgress } from '../store/postgres/queue.js';
import { openStore } from '../store/open.js';
import type { Store } from '../store/store.js';
import type { InferenceState, TaskBackend } from './backend.js';
import type { ServedTask } from './request.js';
import { unsupported } from './runtime-task.js';
import type { Cut } from './results.js';
import type { ServedRun } from './served-run.js';

export interface QueueBackendOptions {
  /** The shared store and queue: postgres://… */
  url: string;
  /** What every served task's rollout stores (the workers take its budgets; their harness, upstream and sandbox are their own). */
  config: Omit<RolloutConfig, 'harness' | 'samples'>;
  settings: Omit<QueueSettings, 'priority'>;
  onNotice?: (line: string) => void;
}

/** How often a running task's samples are read from PostgreSQL. */
const POLL_MS = 1000;
/** How often a pause reads the workers' word while they drain. */
const PAUSE_POLL_MS = 200;

/**
 * A served task's sessions on `polar worker`s anywhere (Polar's gateway nodes): its rollout goes to
 * the shared store and its samples onto the harness's queue, with dispatch_priority as the jobs'
 * priority and timeout_seconds as the rollout's session budget, which every worker applies
 * (worker.ts storedSettings). The coordinator reads each sample's status from PostgreSQL, and the
 * results from its mirror of the shared store, brought up to date when a sample ends: a worker
 * writes a sample's end only once its calls are shipped (PgSampleLedger), so an ended sample's
 * traces are whole. Early stop and DELETE end the samples in PostgreSQL (cutQueuedSamples); a
 * queued one is never started and a running one's worker stops its harness.
 */
export class QueueBackend implements TaskBackend {
  private readonly pg: Postgres;
  private readonly mirror: string;
  private readonly rollouts = new Set<string>();
  private syncing: Promise<void> | null = null;
  /** Where a PostgreSQL outage is said: one function, so one outage is said once (whileUnreachable). */
  private readonly log: (line: string) => void;

  private constructor(
    private readonly options: QueueBackendOptions,
    readonly store: Store,
  ) {
    this.pg = new Postgres(options.url, { max: 2, applicationName: 'polar-serve' });
    this.mirror = mirrorPath(options.url);
    this.log = options.onNotice ?? ((line) => process.stderr.write(`polar serve: ${line}\n`));
  }

  /** Opens the shared store's mirror (PostgreSQL migrated, the mirror pulled up to date). */
  static async open(options: QueueBackendOptions): Promise<QueueBackend> {
    const store = await openStore(options.url, { readonly: true, ...(options.onNotice ? { onNotice: options.onNotice } : {}) });
    const backend = new QueueBackend(options, store);
    // A pause an earlier serve left (it stopped between pause and resume) would hold every worker's calls for good.
    if ((await inferenceControl(backend.pg).catch(() => ({ paused: false }))).paused) {
      options.onNotice?.('inference pause: the fleet was left paused (a polar serve stopped before resuming it); resuming it');
      await setInferencePause(backend.pg, false);
    }
    return backend;
  }

  async record(served: ServedTask): Promise<string> {
    if (served.runtime)
      throw unsupported(
        ['runtime'],
        "a runtime's image is built from a folder polar serve writes on this machine, which workers on other machines cannot read yet: serve it without --queue (with --environment podman)",
      );
    const config = {
      ...this.options.config,
      harness: served.harness,
      samples: served.samples,
      sessionBudgetMs: served.budgetMs,
      source: 'serve',
      polar_task_id: served.taskId,
    } as RolloutConfig;
    return enqueueRollout(this.pg, this.options.url, [served.task], null, config, { ...this.options.settings, priority: served.priority });
  }

  async run(run: ServedRun, ended: (sampleId: string) => void): Promise<void> {
    const reported = new Set<string>();
    this.rollouts.add(run.rolloutId);
    try {
      for (;;) {
        // A sample whose every attempt was lost (its retries used up) can no longer end by itself.
        await interruptAbandoned(this.pg, run.rolloutId, run.served.harness).catch(() => 0);
        // Workers carry on through an outage, and so does the wait for them.
        const rows = await this.retry(() => sampleProgress(this.pg, run.rolloutId), Number.POSITIVE_INFINITY);
        const done = rows.filter(hasEnded);
        const fresh = done.filter((r) => !reported.has(r.id));
        if (fresh.length > 0) {
          await this.sync(Number.POSITIVE_INFINITY);
          for (const r of fresh) {
            reported.add(r.id);
            ended(r.id);
          }
        }
        if (done.length === rows.length) return;
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    } finally {
      this.rollouts.delete(run.rolloutId);
    }
  }

  async cut(run: ServedRun, cut: Cut): Promise<void> {
    run.abort.abort();
    const open = (await this.retry(() => sampleProgress(this.pg, run.rolloutId))).filter((r) => !hasEnded(r) && !run.cuts.has(r.id)).map((r) => r.id);
    // Recorded before the write: the poll that sees them ended must find them cut.
    for (const id of open) run.cuts.set(id, cut);
    const reason =
      cut.kind === 'early_stop'
        ? `cut off: ${cut.usable} of ${cut.threshold} usable sessions reached (early_stop_min_usable_sessions)`
        : `cancelled: DELETE /rollout/task/${run.served.taskId}`;
    const rolloutEnd = cut.kind === 'early_stop' ? 'completed' : 'interrupted';
    let done: Set<string>;
    try {
      done = new Set(await this.retry(() => cutQueuedSamples(this.pg, { rolloutId: run.rolloutId, ids: open, reason, rolloutEnd }, groupStats)));
    } catch (err) {
      // Not cut: they run on, and end with their own outcomes.
      for (const id of open) run.cuts.delete(id);
      throw err;
    }
    // One that ended by itself meanwhile keeps its own outcome.
    for (const id of open) if (!done.has(id)) run.cuts.delete(id);
  }

  async pending(): Promise<number> {
    if (this.rollouts.size === 0) return 0;
    const { rows } = await this.retry(() =>
      this.pg.query(`SELECT count(*)::int AS n FROM samples WHERE rollout_id = ANY($1::text[]) AND status = 'queued'`, [[...this.rollouts]]),
    );
    return Number((rows[0] as { n: number } | undefined)?.n ?? 0);
  }

  /**
   * The fleet paused (setInferencePause: every worker's capture proxy told at once), answered once
   * every worker alive has applied it with no call left running, or when `timeoutMs` ran out; then
   * `inflight` counts the calls still running, and at least one for a worker that has not said it
   * paused, so the bridge does not swap weights under a call it cannot see.
   */
  async pause(timeoutMs: number): Promise<InferenceState> {
    const epoch = await this.retry(() => setInferencePause(this.pg, true));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const live = await this.retry(() => liveWorkers(this.pg));
      const waiting = live.filter((w) => !(w.epoch >= epoch && w.paused && w.inflight === 0));
      // A worker running a session that is not listening (a lost listener, an older polar) cannot be said to have paused.
      const heard = new Set(live.filter((w) => w.epoch >= epoch && w.paused).map((w) => w.worker));
      const unheard = (await this.retry(() => workersWithSessions(this.pg))).filter((w) => !heard.has(w));
      if ((waiting.length === 0 && unheard.length === 0) || Date.now() >= deadline) {
        for (const w of waiting)
          this.options.onNotice?.(`inference pause: worker ${w.worker} has ${w.epoch >= epoch ? `${w.inflight} calls in flight` : 'not paused yet'}`);
        for (const w of unheard) this.options.onNotice?.(`inference pause: worker ${w} runs a session and has not said it paused`);
        const unheardOnly = unheard.filter((w) => !waiting.some((x) => x.worker === w)).length;
        return { paused: true, inflight: waiting.reduce((n, w) => n + (w.epoch >= epoch ? w.inflight : Math.max(1, w.inflight)), 0) + unheardOnly };
      }
      await new Promise((r) => setTimeout(r, PAUSE_POLL_MS));
    }
  }

  async resume(): Promise<InferenceState> {
    await this.retry(() => setInferencePause(this.pg, false));
    return this.inference();
  }

  async inference(): Promise<InferenceState> {
    const [control, workers] = await this.retry(() => Promise.all([inferenceControl(this.pg), liveWorkers(this.pg)]));
    return { paused: control.paused, inflight: workers.reduce((n, w) => n + w.inflight, 0) };
  }

  async close(): Promise<void> {
    await this.pg.close().catch(() => undefined);
    this.store.close();
  }

  /**
   * `fn` through a PostgreSQL restart or failover (whileUnreachable), up to `forMs` (default
   * POLAR_PG_RETRY_S), the wait said through serve's notices.
   */
  private retry<T>(fn: () => Promise<T>, forMs?: number): Promise<T> {
    return whileUnreachable(fn, forMs, this.log);
  }

  /** The mirror pulled up to date; calls at once share one pull. */
  private sync(forMs?: number): Promise<void> {
    this.syncing ??= this.retry(() => syncMirror(this.pg, this.mirror), forMs)
      .then(() => undefined)
      .finally(() => {
        this.syncing = null;
      });
    return this.syncing;
  }
}

/** Ended: an outcome, or given up on (sampleHasEnded: a sample interrupted by Ctrl-C or a lost lease goes back to the queue). */
function hasEnded(r: SampleProgress): boolean {
  return sampleHasEnded(r);
}
