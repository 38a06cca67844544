import path from 'node:path';
import type { Job, PgBoss } from 'pg-boss';
import { PolarError } from '../../core/errors.js';
import { waitFor } from '../../core/wait.js';
import { isUnreachable, Postgres, poolSize, whileUnreachable } from '../../store/postgres/client.js';
import { openSharedStore } from '../../store/postgres/open.js';
import { getRollout, getRolloutTask, getSample, getSampleStatus } from '../../store/postgres/queue.js';
import { type RolloutRow, SAMPLE_OUTCOMES, type SampleRow, WORKER } from '../../store/rollouts.js';
import type { Store } from '../../store/store.js';
import { parseAccept } from '../accept.js';
import { parseRewardRange } from '../reward-range.js';
import type { RolloutConfig, RolloutEvent } from '../config.js';
import { startCapture } from '../run-rollout.js';
import { initStage, postStage, runStage, type StageContext } from '../stages.js';
import { stateDir } from '../../store/postgres/url.js';
import { ContentUnavailable } from '../../store/postgres/content.js';
import { endWithoutContent, type LocalTask, localTask } from './content-cache.js';
import { contentMaxBytes, type StoredTask } from './task-content.js';
import { ensureQueue, keepLeases, openQueue, queueName, type SampleJob } from './boss.js';
import { InferenceFollower } from './inference-follower.js';
import { fenceLease, holdLease } from './lease.js';
import { PgSampleLedger } from './pg-ledger.js';
import { backOff, POLL_MIN_MS, pollMaxMs, Wake } from './wake.js';

export interface WorkerOptions {
  queueUrl: string;
  /** The shared store (default: the queue's database). */
  dbUrl: string;
  /** This machine's harness, upstream and sandbox; a sample's task and rollout come from the store. */
  config: RolloutConfig;
  upstreamApiKey?: string;
  /** Exit once the queue has had nothing for this process for this long (ms); null: run until stopped. */
  idleExitMs: number | null;
  /** Connections of the worker's pool (default: poolSize(), `POLAR_PG_POOL`); a queue in another database gets as many again. */
  pgConnections?: number;
  /**
   * Where the worker's one LISTEN connection goes (default: `dbUrl`): straight to PostgreSQL when
   * `dbUrl` goes through PgBouncer in transaction mode, where a LISTEN hears nothing.
   */
  listenUrl?: string;
  signal: AbortSignal;
  onEvent?: (e: RolloutEvent & { rolloutId: string }) => void;
  onNotice?: (line: string) => void;
}

/**
 * One machine's worker: takes samples of its harness from the queue, up to `concurrency` at once,
 * and runs each through the same stages as a local rollout (INIT → RUNNING → POSTRUN), capturing
 * into this machine's journal of the shared store (one capture proxy for all its sessions) and
 * moving the sample in the shared store. While a sample runs, its job is touched so the lease
 * holds; a worker that dies stops touching it and the queue hands the sample to another worker.
 * Ctrl-C: nothing new starts, samples in flight are interrupted and handed back. Returns the
 * samples it ran.
 */
export async function runWorker(opts: WorkerOptions): Promise<number> {
  const notice = (line: string) => opts.onNotice?.(line);
  // Read once, before anything starts: a bad POLAR_CONTENT_MAX_MB stops the worker here, by name,
  // instead of failing every job it takes.
  const maxBytes = contentMaxBytes();
  // One pool for the store's shipper, the ledger, the reads and (one database) the queue: a worker
  // holds at most `pgConnections` connections there, plus its one LISTEN connection.
  const connections = opts.pgConnections ?? poolSize();
  // Named, so pg_stat_activity tells a worker's connections (and its budget) from a coordinator's.
  const pg = new Postgres(opts.dbUrl, { max: connections, applicationName: 'polar-worker' });
  const oneDatabase = opts.queueUrl === opts.dbUrl;
  const listenUrl = opts.listenUrl ?? opts.dbUrl;
  const listenPg = listenUrl === opts.dbUrl ? pg : new Postgres(listenUrl, { max: 1 });
  const name = queueName(opts.config.harness);
  const wake = new Wake();
  let store: Store | null = null;
  let boss: PgBoss | null = null;
  let capture: Capture | null = null;
  let follower: InferenceFollower | null = null;
  let leases: { stop(): Promise<void> } | null = null;
  try {
    store = await openSharedStore(opts.dbUrl, { onNotice: notice }, pg);
    // A worker started while PostgreSQL is away waits for it, as one already running does.
    boss = await openQueue(
      opts.queueUrl,
      { onError: (err) => notice(`queue: ${err.message}`), ...(oneDatabase ? { pool: pg } : { max: connections }) },
      notice,
    );
    const started = boss;
    await whileUnreachable(() => ensureQueue(started, name), undefined, notice);
    leases = keepLeases(boss, name, (err) => notice(`queue: ${err.message}`));
    capture = await startCapture(store, opts.config, `worker-${process.pid}`, opts.upstreamApiKey);
    // Before the first job: a fleet paused for a weight update holds this worker's calls too. Its
    // connection also hears "jobs queued" (notify.ts), sent in the queue's database: heard only
    // when that is the store's, else the worker polls with back-off alone.
    const onJobs = oneDatabase ? (queue: string | null) => (queue === null || queue === name) && wake.ring() : undefined;
    follower = new InferenceFollower(listenPg, capture.proxy.admin.gate, WORKER, notice, onJobs);
    await follower.start();
    notice(`polar worker ${WORKER}: ready for ${name} samples`);
    return await pollQueue({ opts, store, pg, ledger: workerLedger(pg, store), boss, name, capture, notice, contentMaxBytes: maxBytes }, wake);
  } finally {
    await follower?.close();
    await capture?.proxy.close(5000).catch(() => undefined);
    await capture?.socket?.remove();
    await capture?.upstream.close().catch(() => undefined);
    await leases?.stop();
    await boss?.stop({ graceful: false, close: true }).catch(() => undefined);
    // The store ships what is left through the pool, so the pool closes after it.
    await store?.closeAsync();
    await pg.close().catch(() => undefined);
    if (listenPg !== pg) await listenPg.close().catch(() => undefined);
  }
}

/**
 * A worker's ledger: each sample's end is written only once every call its journal committed is in
 * PostgreSQL (Store.shipCommitted), so whoever sees the sample ended finds all its calls there.
 */
export function workerLedger(pg: Postgres, store: Store): PgSampleLedger {
  return new PgSampleLedger(pg, () => store.shipCommitted?.() ?? Promise.resolve());
}

type Capture = Awaited<ReturnType<typeof startCapture>>;

/** What a running worker holds: its options, the stores, the queue and its capture proxy. */
interface Worker {
  opts: WorkerOptions;
  store: Store;
  pg: Postgres;
  ledger: PgSampleLedger;
  boss: PgBoss;
  name: string;
  capture: Capture;
  notice: (line: string) => void;
  /** POLAR_CONTENT_MAX_MB, read when the worker started. */
  contentMaxBytes: number;
}

/**
 * Takes jobs while there is room, until stopped or idle for `idleExitMs`; returns how many it took.
 * While full it waits for a sample to end; with room and an empty queue, for a "jobs queued"
 * notification (`wake`) or a back-off from 0.5 s doubling up to pollMaxMs(), so an idle worker
 * fetches a couple of times a minute instead of twice a second.
 */
async function pollQueue(w: Worker, wake: Wake): Promise<number> {
  const { opts } = w;
  const active = new Set<Promise<void>>();
  const maxMs = pollMaxMs();
  let ran = 0;
  let idleSince = Date.now();
  let backoff = POLL_MIN_MS;
  while (!opts.signal.aborted) {
    const free = opts.config.concurrency - active.size;
    let got: Job<SampleJob>[] = [];
    if (free > 0) {
      wake.clear();
      got = await fetchJobs(w, free);
    }
    for (const job of got) {
      ran++;
      const p = runJob(w, job).finally(() => active.delete(p));
      active.add(p);
    }
    if (got.length > 0 || active.size > 0) idleSince = Date.now();
    else if (opts.idleExitMs !== null && Date.now() - idleSince >= opts.idleExitMs) break;
    if (active.size >= opts.config.concurrency) {
      // Full: the next fetch is worth making once a sample ends.
      await waitFor(maxMs, opts.signal, active);
      continue;
    }
    const wait = got.length > 0 ? POLL_MIN_MS : backoff;
    backoff = got.length > 0 ? POLL_MIN_MS : backOff(backoff, maxMs);
    // An idle worker leaves on time, however long its back-off has grown.
    const left = opts.idleExitMs !== null && active.size === 0 ? Math.max(0, opts.idleExitMs - (Date.now() - idleSince)) : wait;
    // A sample ending wakes it too: a sample handed back (failed here) is on the queue again at once.
    await wake.wait(Math.min(wait, left), opts.signal, active);
  }
  await Promise.all(active);
  return ran;
}

/** How often a running sample's row is read for an end written elsewhere (a `polar serve` coordinator's cut). */
const CUT_CHECK_MS = 2000;

/**
 * One job: the sample through its stages, its lease kept meanwhile (lease.ts: a thread of its own
 * touches the job, so a busy event loop cannot let it lapse), then completed or handed back.
 * A sample that another process ended while it ran (`polar serve` cutting stragglers off at early
 * stop or on DELETE: cutQueuedSamples) has its harness stopped within CUT_CHECK_MS, as Ctrl-C stops
 * it. So does a sample whose lease is lost (the queue expired the job, or another worker holds it):
 * its session is no longer this worker's to finish, and running it on would only waste it. Its
 * attempt is recorded `interrupted: lease lost` unless another worker has started it again.
 */
async function runJob(w: Worker, job: Job<SampleJob>): Promise<void> {
  const { boss, name } = w;
  const cut = new AbortController();
  const sampleId = job.data.sampleId;
  let lost: string | null = null;
  const lease = { queue: name, id: job.id, attempt: job.retryCount, heartbeatSeconds: job.heartbeatSeconds ?? 30 };
  // This run's own attempt and its own lost-lease mark: the queue may hand a lapsed sample back to this same worker.
  const ledger = w.ledger.forRun(async () => {
    // One fenced touch right before the attempt starts (fenceLease): a run resumed after a stall
    // takes nothing from the worker that holds the job now.
    const reason = await fenceLease(boss.getDb(), lease);
    if (reason !== null && lost === null) onLost(`${reason}; its attempt was not started`);
    return reason;
  });
  const onLost = (reason: string) => {
    lost = reason;
    ledger.leaseLost(sampleId);
    cut.abort();
    w.notice(`sample ${sampleId}: lease lost (${reason}); harness stopped`);
  };
  const release = holdLease(w.opts.queueUrl, lease, onLost, (err) => w.notice(`lease thread: ${err.message}`));
  const watch = setInterval(() => {
    void getSampleStatus(w.pg, sampleId)
      .then((status) => {
        if (status && isEnded(status) && !cut.signal.aborted) {
          w.notice(`sample ${sampleId} was ended elsewhere (${status}); stopping its harness`);
          cut.abort();
        }
      })
      // A missed check is made up by the next; an outage is said by the reads that wait it out.
      .catch(() => undefined);
  }, CUT_CHECK_MS);
  try {
    const found = await contextFor(w, job.data, ledger, cut.signal);
    if (!found) {
      release();
      if (lost === null) await boss.complete(name, job);
      return;
    }
    const { ctx, sample } = found;
    // Lost before it started: the sample is another worker's now, and an attempt started here would take it from that worker.
    if (lost !== null) return;
    const prepared = await initStage(ctx, sample);
    const ranStage = prepared ? await runStage(ctx, prepared) : null;
    if (ranStage) await postStage(ctx, ranStage);
    // Released before the job is settled: a settled job finds no row to touch, which is no loss.
    release();
    // The job is the queue's again (or another worker's): settling it here would fence nothing useful.
    if (lost !== null) return;
    const after = await whileUnreachable(() => getSampleStatus(w.pg, sample.id), undefined, w.notice);
    if (after && isEnded(after)) await boss.complete(name, job);
    else await boss.fail(name, job, { reason: `sample ${sample.id} did not end here (${after ?? 'missing'}); handed back to the queue` });
  } catch (err) {
    release();
    w.notice(`sample ${sampleId}: ${(err as Error).message}`);
    if (lost === null) await boss.fail(name, job, { reason: (err as Error).message }).catch(() => undefined);
  } finally {
    release();
    clearInterval(watch);
  }
}

/** Workers whose last fetch failed because PostgreSQL could not be reached: since when. */
const fetchOutage = new WeakMap<Worker, number>();

/**
 * Up to `n` jobs, or none while the queue's database cannot be reached: the loop polls on through
 * a restart (as the samples' reads and writes wait it out) and says once when it started and once
 * when it is over. Any other failure is said too, once per message, rather than swallowed.
 */
async function fetchJobs(w: Worker, n: number): Promise<Job<SampleJob>[]> {
  try {
    const got = await w.boss.fetch<SampleJob>(w.name, { batchSize: n });
    const since = fetchOutage.get(w);
    if (since !== undefined) {
      fetchOutage.delete(w);
      w.notice(`queue: PostgreSQL is reachable again after ${Math.round((Date.now() - since) / 1000)} s; taking samples`);
    }
    return got;
  } catch (err) {
    const message = (err as Error).message;
    if (isUnreachable(err)) {
      if (!fetchOutage.has(w)) {
        fetchOutage.set(w, Date.now());
        w.notice(`queue: PostgreSQL is unreachable (${message}); polling on until it is back`);
      }
    } else if (!fetchErrors.has(message)) {
      fetchErrors.add(message);
      w.notice(`queue: fetching samples failed: ${message}`);
    }
    return [];
  }
}
const fetchErrors = new Set<string>();

function isEnded(status: string): boolean {
  return (SAMPLE_OUTCOMES as readonly string[]).includes(status);
}

/** The sample, its task and its rollout's settings, from the store; null when the sample already ended. */
async function contextFor(w: Worker, job: SampleJob, ledger: PgSampleLedger, cut: AbortSignal): Promise<{ ctx: StageContext; sample: SampleRow } | null> {
  const { opts, pg, capture } = w;
  // Read again while PostgreSQL cannot be reached: a job that fails here is retried only a few
  // times before its sample is given up on, and a busy machine can take longer to connect than the pool waits.
  const sample = await whileUnreachable(() => getSample(pg, job.sampleId), undefined, w.notice);
  if (!sample) throw new PolarError('POLAR_USAGE', `sample ${job.sampleId} is not in the store ${pg.label}: is this worker's --db the rollout's?`);
  if (isEnded(sample.status)) return null;
  const rollout = await whileUnreachable(() => getRollout(pg, job.rolloutId), undefined, w.notice);
  const taskText = await whileUnreachable(() => getRolloutTask(pg, job.rolloutId, sample.taskId), undefined, w.notice);
  if (!rollout || taskText === undefined)
    throw new PolarError('POLAR_USAGE', `rollout ${job.rolloutId} or its task ${sample.taskId} is not in the store ${pg.label}`);
  // The task's folders from the shared store, this machine's copy (issue 43): content no worker can
  // have ends the sample with the reason, as INIT would, instead of failing on a missing path; what
  // only this worker cannot do (its cap, its disk) is thrown, and the job goes back to the queue.
  let local: LocalTask;
  try {
    local = await localTask(pg, JSON.parse(taskText) as StoredTask, { stateDir: stateDir(), maxBytes: w.contentMaxBytes, notice: w.notice });
  } catch (err) {
    if (!(err instanceof ContentUnavailable)) throw err;
    await endWithoutContent(ledger, sample, err.message, (e) => opts.onEvent?.({ ...e, rolloutId: job.rolloutId }));
    return null;
  }
  const { task } = local;
  const config: RolloutConfig = { ...opts.config, ...storedSettings(rollout, opts.config) };
  const ctx: StageContext = {
    rolloutId: job.rolloutId,
    store: w.store,
    ledger,
    dbPath: opts.dbUrl,
    config,
    tasks: new Map([[task.id, task]]),
    harness: capture.harness,
    proxyUrl: capture.proxy.url,
    sessionKeys: capture.sessionKeys,
    model: capture.model,
    // The rollout's own --context-window over this machine's: one window, one first prompt, fleet-wide.
    contextWindow: typeof rollout.config.contextWindow === 'number' ? rollout.config.contextWindow : capture.contextWindow,
    accept: config.accept ? parseAccept(config.accept) : null,
    sandbox: capture.sandbox,
    proxySocket: capture.socket?.path ?? null,
    secrets: opts.upstreamApiKey ? [opts.upstreamApiKey] : [],
    // This machine's copy of the task file's folder (null: none of its commands names it); a task
    // stored without content (a shared disk, an older coordinator) names the coordinator's.
    tasksDir: local.tasksDir !== undefined ? local.tasksDir : rollout.tasksFile ? path.dirname(rollout.tasksFile) : null,
    emit: (e) => opts.onEvent?.({ ...e, rolloutId: job.rolloutId }),
    onNotice: w.notice,
    stopping: () => opts.signal.aborted || cut.aborted,
    signal: cut,
    ...(config.sessionBudgetMs !== undefined ? { sessionBudgetMs: config.sessionBudgetMs } : {}),
  };
  return { ctx, sample };
}

/**
 * What a sample takes from its rollout's stored configuration rather than this machine's: its
 * acceptance rule, its budgets, its group size, which metric is its reward and whether its harness
 * keeps its compaction. Everything else (harness, upstream, sandbox, where Harbor tasks run) is
 * the worker's own.
 */
export function storedSettings(
  rollout: RolloutRow,
  local: RolloutConfig,
): Pick<RolloutConfig, 'accept' | 'timeoutSec' | 'samples' | 'rewardKey' | 'rewardRange' | 'compaction' | 'sessionBudgetMs'> {
  const c = rollout.config;
  return {
    // A served task's timeout_seconds: one budget from INIT's start, on whichever machine runs it.
    sessionBudgetMs: typeof c.sessionBudgetMs === 'number' && c.sessionBudgetMs > 0 ? c.sessionBudgetMs : undefined,
    // Whether the harness compacts is what a sample's trace is (one chain, or several): the rollout's (--keep-compaction).
    compaction: c.compaction === 'harness' ? 'harness' : undefined,
    // Which metric is the reward: what the rollout's groups are scored by (--reward-key), on every worker alike.
    rewardKey: typeof c.rewardKey === 'string' ? c.rewardKey : undefined,
    // Which rewards it takes (--reward-range), likewise; anything but a valid stored range is the default [0, 1].
    rewardRange: storedRange(c.rewardRange),
    accept: typeof c.accept === 'string' ? c.accept : null,
    timeoutSec: typeof c.timeoutSec === 'number' ? c.timeoutSec : local.timeoutSec,
    samples: typeof c.samples === 'number' ? c.samples : rollout.samplesPerTask,
  };
}

/** A rollout's stored --reward-range, checked as the flag checks it (reward-range.ts); undefined: the default. */
function storedRange(value: unknown): [number, number] | undefined {
  if (!Array.isArray(value) || value.length !== 2 || !value.every((v) => typeof v === 'number')) return undefined;
  try {
    return [...parseRewardRange(`${value[0]},${value[1]}`)];
  } catch {
    return undefined;
  }
}
