import { afterEach, describe, expect, it } from 'vitest';
import { poolSize } from '../../store/postgres/client.js';
import { backOff, POLL_MIN_MS, pollMaxMs, Wake } from './wake.js';

afterEach(() => {
  delete process.env.POLAR_QUEUE_POLL_MAX_S;
  delete process.env.POLAR_PG_POOL;
});

describe("the idle worker's queue loop", () => {
  it('backs off from 0.5 s, doubling, up to 30 s or POLAR_QUEUE_POLL_MAX_S', () => {
    const waits = [POLL_MIN_MS];
    while (waits.length < 10) waits.push(backOff(waits.at(-1)!, pollMaxMs()));
    expect(waits).toEqual([500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000, 30_000]);
    process.env.POLAR_QUEUE_POLL_MAX_S = '5';
    expect(pollMaxMs()).toBe(5000);
    process.env.POLAR_QUEUE_POLL_MAX_S = 'soon';
    expect(pollMaxMs()).toBe(30_000);
  });

  it('a ring during the fetch ends the wait after it at once; a ring before the fetch does not', async () => {
    const never = new AbortController().signal;
    const wake = new Wake();
    wake.ring();
    wake.clear(); // the fetch sees what that ring announced
    let ended = false;
    const waiting = wake.wait(60_000, never).then(() => (ended = true));
    await new Promise((r) => setImmediate(r));
    expect(ended).toBe(false);
    wake.ring();
    await waiting;
    // Rung while no wait runs (mid-fetch): the next wait returns at once.
    wake.clear();
    wake.ring();
    await wake.wait(60_000, never);
  });

  it('POLAR_PG_POOL sets the pool size; anything but a whole number from 1 to 1000 is refused by name', () => {
    expect(poolSize()).toBe(4);
    process.env.POLAR_PG_POOL = '2';
    expect(poolSize()).toBe(2);
    for (const bad of ['0', '2.5', 'many', '1001']) {
      process.env.POLAR_PG_POOL = bad;
      expect(() => poolSize()).toThrow(/POLAR_PG_POOL must be a whole number/);
    }
  });
});
