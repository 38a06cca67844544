import type { Healthcheck } from './types.js';

/** One attempt's end: passed, or why not (its exit status, or a timeout), for the failure's message. */
export type Attempt = { ok: true } | { ok: false; why: string };

export interface HealthcheckClock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

const realClock: HealthcheckClock = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
};

/**
 * Harbor's healthcheck loop (environments/base.py:1154-1206): the command until it passes; a
 * failure within the start period (from the first attempt) is not counted and retried after
 * `startIntervalSec`; after it, `retries` consecutive failures end it, each `intervalSec` apart.
 * Returns null once it passes, else why it failed (Harbor's HealthcheckError: the environment is
 * not ready, the trial ends without a reward, trial.py:321-326).
 */
export async function runHealthcheck(
  hc: Healthcheck,
  attempt: (timeoutMs: number) => Promise<Attempt>,
  clock: HealthcheckClock = realClock,
): Promise<string | null> {
  const startPeriodEnd = clock.now() + hc.startPeriodSec * 1000;
  let failures = 0;
  let last = '';
  for (;;) {
    const inStartPeriod = clock.now() < startPeriodEnd;
    const r = await attempt(hc.timeoutSec * 1000);
    if (r.ok) return null;
    last = r.why;
    if (inStartPeriod) {
      await clock.sleep(hc.startIntervalSec * 1000);
      continue;
    }
    failures += 1;
    if (failures >= hc.retries)
      return `the task's healthcheck failed after ${hc.retries} consecutive ${hc.retries === 1 ? 'try' : 'tries'} (${last}): ${hc.command}`;
    await clock.sleep(hc.intervalSec * 1000);
  }
}
