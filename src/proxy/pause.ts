import { PolarError } from '../core/errors.js';

/**
 * Pausing model calls around a weight update. While paused, a new model call waits (up to
 * `limitMs`) for `resume()`, then gets 503 with Retry-After; calls already admitted run to the end.
 * `drained()` resolves once none are running, so a trainer can pause, wait for the drain, load new
 * weights, set the policy version and resume: no call is served by two policies.
 */
export class PauseGate {
  private paused = false;
  private running = 0;
  private readonly resumed = new Set<() => void>();
  private readonly idle = new Set<() => void>();
  /** When the current pause began (ms since the epoch). */
  pausedAt: number | null = null;

  constructor(readonly limitMs: number) {}

  get isPaused(): boolean {
    return this.paused;
  }

  get inFlight(): number {
    return this.running;
  }

  /** Waits while paused; resolves with a `leave` to call when the call ends. */
  async admit(signal?: AbortSignal): Promise<() => void> {
    if (this.paused) await this.waitForResume(signal);
    this.running++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.running--;
      if (this.running === 0) for (const w of [...this.idle]) w();
    };
  }

  pause(): void {
    if (!this.paused) this.pausedAt = Date.now();
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    this.pausedAt = null;
    for (const w of [...this.resumed]) w();
  }

  /** Resolves true once no admitted call is running, false if `timeoutMs` passes first. */
  drained(timeoutMs: number): Promise<boolean> {
    if (this.running === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.idle.delete(onIdle);
        resolve(ok);
      };
      const onIdle = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.idle.add(onIdle);
    });
  }

  private waitForResume(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const cleanup = () => {
        clearTimeout(timer);
        this.resumed.delete(onResume);
        signal?.removeEventListener('abort', onAbort);
      };
      const onResume = () => {
        cleanup();
        resolve();
      };
      const onAbort = () => {
        cleanup();
        reject(new PolarError('POLAR_CLIENT_ABORTED', 'harness disconnected while the proxy was paused', 499));
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(
          new PolarError(
            'POLAR_PAUSED',
            `the proxy is paused for a weight update and did not resume within ${Math.round(this.limitMs / 1000)} s; retry later`,
            503,
          ),
        );
      }, this.limitMs);
      this.resumed.add(onResume);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
