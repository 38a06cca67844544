import { type Postgres, pgRetryMs, type RetryLog, whileUnreachable } from '../../store/postgres/client.js';
import { finishAttempt, interruptAttempt, LEASE_LOST, stageAttempt, startAttempt } from '../../store/postgres/queue.js';
import { type ACTIVE_STAGES, type SampleEnd, type SampleRow, WORKER } from '../../store/rollouts.js';
import type { SampleLedger } from '../ledger.js';
import { groupStats } from '../stats.js';

/**
 * A queued rollout's samples in the shared store, moved by workers on many machines (the
 * statements are store/postgres/queue.ts). Each attempt is numbered when it starts, and every later
 * write names its attempt: a worker whose lease expired (presumed dead, its sample handed to
 * another) can no longer move or end the sample, so no sample is rewarded twice, even when the
 * first worker was only slow. While PostgreSQL is unreachable each write waits and retries (up to
 * `retryForMs`, POLAR_PG_RETRY_S), saying so through `log`.
 */
export class PgSampleLedger implements SampleLedger {
  private readonly attempts = new Map<string, number>();
  /** Samples whose job this worker no longer holds (leaseLost): their interrupt says so. */
  private readonly lost = new Set<string>();

  constructor(
    private readonly pg: Postgres,
    /**
     * Runs before a sample's end is written: the worker ships its journal's calls first, so whoever
     * sees the sample ended (`rollout --wait`, a trainer) finds every call of its session there.
     */
    private readonly beforeEnd: () => Promise<void> = async () => undefined,
    private readonly retryForMs = pgRetryMs(),
    private readonly log?: RetryLog,
  ) {}

  /** Asked right before an attempt starts (forRun): null while the run still holds its job, else why not. */
  private fence: (() => Promise<string | null>) | null = null;

  /**
   * A ledger for one run of a sample (one job the worker took), holding that run's attempt only.
   * One ledger for all of a worker's runs kept one attempt per sample: when the queue handed a
   * sample whose lease had lapsed back to the same worker, the earlier run wrote as the later
   * attempt, so it ended the sample with its reward while the sample named the later run's
   * session, which was then stopped ("ended elsewhere"): a completed, rewarded sample whose
   * session is `aborted`, left out of every export as partial (issue 43). Now the earlier run's
   * writes name its own attempt and are fenced. A lost lease is said to the run's ledger, not the
   * worker's: there, whichever run of the sample interrupted first took it.
   *
   * `fence` (lease.ts fenceLease) is asked right before the attempt starts: a run whose job is no
   * longer its own starts nothing (start answers null) and the sample is left as it was.
   */
  forRun(fence?: () => Promise<string | null>): PgSampleLedger {
    const run = new PgSampleLedger(this.pg, this.beforeEnd, this.retryForMs, this.log);
    run.fence = fence ?? null;
    return run;
  }

  /** The queue took `sampleId`'s job from this run: the harness is being stopped, and its interrupt is recorded as LEASE_LOST. */
  leaseLost(sampleId: string): void {
    this.lost.add(sampleId);
  }

  async start(sample: SampleRow, sessionId: string): Promise<number | null> {
    const fence = this.fence;
    if (fence && (await this.retry(fence)) !== null) {
      this.lost.add(sample.id);
      return null;
    }
    const attempt = await this.retry(() => startAttempt(this.pg, sample.id, sessionId, WORKER, Date.now()));
    if (attempt !== null) this.attempts.set(sample.id, attempt);
    return attempt;
  }

  async stage(sampleId: string, status: (typeof ACTIVE_STAGES)[number], timing: Record<string, number> = {}): Promise<void> {
    await this.retry(() => stageAttempt(this.pg, sampleId, this.attempt(sampleId), status, timing));
  }

  async finish(sampleId: string, end: SampleEnd): Promise<boolean> {
    // Shipped and ended in one try: while PostgreSQL is down neither happens, and when it is back
    // the calls go first.
    const done = await this.retry(async () => {
      await this.beforeEnd();
      return finishAttempt(this.pg, sampleId, this.attempt(sampleId), end, groupStats);
    });
    this.attempts.delete(sampleId);
    this.lost.delete(sampleId);
    return done;
  }

  async interrupt(sampleId: string): Promise<void> {
    const error = this.lost.delete(sampleId) ? LEASE_LOST : null;
    // Fenced by the attempt: once another worker has started the sample again, this writes nothing.
    await this.retry(() => interruptAttempt(this.pg, sampleId, this.attempt(sampleId), error));
    this.attempts.delete(sampleId);
  }

  /** This worker's attempt of a sample; -1 (matching no row) when it started none. */
  private attempt(sampleId: string): number {
    return this.attempts.get(sampleId) ?? -1;
  }

  private retry<T>(fn: () => Promise<T>): Promise<T> {
    return whileUnreachable(fn, this.retryForMs, this.log);
  }
}
