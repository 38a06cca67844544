import { describe, expect, it } from 'vitest';
import { type Attempt, type HealthcheckClock, runHealthcheck } from './healthcheck.js';
import type { Healthcheck } from './types.js';

/** A clock that moves only when the loop sleeps: no real waiting, and every sleep is recorded. */
function fakeClock(): HealthcheckClock & { slept: number[] } {
  let t = 0;
  const slept: number[] = [];
  return {
    slept,
    now: () => t,
    sleep: async (ms) => {
      slept.push(ms);
      t += ms;
    },
  };
}

const hc = (over: Partial<Healthcheck> = {}): Healthcheck => ({
  command: 'test -f /ready',
  intervalSec: 2,
  timeoutSec: 5,
  startPeriodSec: 0,
  startIntervalSec: 1,
  retries: 3,
  ...over,
});

/** Attempts that fail `n` times, then pass; the timeouts they were given. */
function passAfter(n: number) {
  const timeouts: number[] = [];
  let calls = 0;
  const attempt = async (timeoutMs: number): Promise<Attempt> => {
    timeouts.push(timeoutMs);
    calls += 1;
    return calls > n ? { ok: true } : { ok: false, why: 'exit 1' };
  };
  return { attempt, timeouts, calls: () => calls };
}

describe("Harbor's healthcheck loop (environments/base.py:1154-1206)", () => {
  it('passes at once when the first attempt passes, giving each attempt timeout_sec', async () => {
    const clock = fakeClock();
    const a = passAfter(0);
    expect(await runHealthcheck(hc(), a.attempt, clock)).toBeNull();
    expect(a.timeouts).toEqual([5000]);
    expect(clock.slept).toEqual([]);
  });

  it('fails after `retries` consecutive failures, interval_sec apart, naming the command', async () => {
    const clock = fakeClock();
    const a = passAfter(100);
    const why = await runHealthcheck(hc({ retries: 3 }), a.attempt, clock);
    expect(why).toMatch(/failed after 3 consecutive tries \(exit 1\): test -f \/ready/);
    expect(a.calls()).toBe(3);
    expect(clock.slept).toEqual([2000, 2000]);
  });

  it('does not count failures within the start period (retried every start_interval_sec)', async () => {
    const clock = fakeClock();
    // 10 s start period at 1 s: ten uncounted failures; then two counted ones, then it passes.
    const a = passAfter(12);
    expect(await runHealthcheck(hc({ startPeriodSec: 10, retries: 3 }), a.attempt, clock)).toBeNull();
    expect(clock.slept.slice(0, 10)).toEqual(Array(10).fill(1000));
    expect(clock.slept.slice(10)).toEqual([2000, 2000]);
  });

  it('a failure after the start period counts: retries = 1 ends at the first one', async () => {
    const clock = fakeClock();
    const a = passAfter(100);
    expect(await runHealthcheck(hc({ startPeriodSec: 3, retries: 1 }), a.attempt, clock)).toMatch(/after 1 consecutive try/);
    // three uncounted tries in the start period (t = 0, 1, 2), the fourth (t = 3) counts.
    expect(a.calls()).toBe(4);
  });
});
