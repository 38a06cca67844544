import { waitFor } from '../../core/wait.js';

/** The shortest and, unless `POLAR_QUEUE_POLL_MAX_S` says otherwise, the longest wait between two empty fetches (ms). */
export const POLL_MIN_MS = 500;
const POLL_MAX_MS = 30_000;

/**
 * How long an idle worker waits at most before it looks at the queue again without being told
 * (`POLAR_QUEUE_POLL_MAX_S`, default 30 s): the fallback for a notification it could not hear (no
 * LISTEN connection, PgBouncer in the way) or that nobody sends (a lost sample's retry).
 */
export function pollMaxMs(): number {
  const v = Number(process.env.POLAR_QUEUE_POLL_MAX_S);
  return Number.isFinite(v) && v > 0 && process.env.POLAR_QUEUE_POLL_MAX_S !== '' ? Math.max(POLL_MIN_MS, v * 1000) : POLL_MAX_MS;
}

/** The wait after `ms` found nothing: doubled, up to `max`. */
export function backOff(ms: number, max: number): number {
  return Math.min(ms * 2, max);
}

/**
 * A doorbell for the queue loop: `ring()` (a "jobs queued" notification) ends the wait in progress,
 * or the next one when it rings while the loop is fetching, so no notification falls between a
 * fetch that found nothing and the wait after it.
 */
export class Wake {
  private rung = false;
  private resolve: (() => void) | null = null;

  ring(): void {
    this.rung = true;
    this.resolve?.();
  }

  /** Forgets earlier rings: called just before a fetch, which sees whatever they announced. */
  clear(): void {
    this.rung = false;
  }

  /** Waits until rung, `ms` pass, `signal` aborts or one of `others` settles, whichever is first. */
  async wait(ms: number, signal: AbortSignal, others: Iterable<Promise<unknown>> = []): Promise<void> {
    if (this.rung) return;
    const rung = new Promise<void>((r) => {
      this.resolve = r;
    });
    try {
      await waitFor(ms, signal, [...others, rung]);
    } finally {
      this.resolve = null;
    }
  }
}
