import { describe, expect, it } from 'vitest';
import { Semaphore } from './semaphore.js';

describe('Semaphore', () => {
  it('hands free slots to the highest priority first, first come first served among equals, never preempting', async () => {
    const s = new Semaphore(1);
    const order: string[] = [];
    let release!: () => void;
    const holder = s.run(() => new Promise<void>((r) => (release = r)).then(() => void order.push('holder')));
    const waiters = [
      s.run(async () => void order.push('low-a'), 0),
      s.run(async () => void order.push('high'), 100),
      s.run(async () => void order.push('low-b'), 0),
      s.run(async () => void order.push('mid'), 50),
    ];
    expect(s.queued).toBe(4);
    release();
    await Promise.all([holder, ...waiters]);
    expect(order).toEqual(['holder', 'high', 'mid', 'low-a', 'low-b']);
  });
});
