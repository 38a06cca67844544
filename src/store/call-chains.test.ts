import { afterEach, expect, it, vi } from 'vitest';
import { RecentCalls } from './call-chains.js';

/**
 * What the write side remembers of each agent's last bodies (for storing the next as a delta): a
 * small body is copied into the agent's reusable room; a large one is kept as it is, never copied
 * (a copy plus a quarter per body per agent held 4 concurrent 60 MB calls at ~600 MB after they ended).
 * Counted by allocations, not by RSS.
 */
afterEach(() => vi.restoreAllMocks());

const key = { sessionId: 's', agentId: 'main' };

function body(size: number, fill: number): Buffer {
  const b = Buffer.allocUnsafeSlow(size);
  b.fill(0x61);
  b.fill(fill, size - 10);
  return b;
}

it('a large body is remembered without a copy, and the next call still stores as a delta against it', () => {
  const recent = new RecentCalls();
  const first = body(8 * 1024 * 1024, 0x62);
  const alloc = vi.spyOn(Buffer, 'allocUnsafeSlow');
  recent.rememberBodies(key, 'req_1', { body: first }, { body: first });
  expect(alloc).not.toHaveBeenCalled();
  alloc.mockRestore();
  const second = Buffer.concat([first.subarray(0, first.length - 10), Buffer.from('the next turn, appended')]);
  const d = recent.bodyDelta(key, 'original', { body: second });
  expect(d).toMatchObject({ base: 'req_1', prefix: first.length - 10, suffix: 0 });
  expect(Buffer.from(d!.middle as Buffer).toString()).toBe('the next turn, appended');
});

it("a small body is copied into the agent's room (the call's own buffer is let go)", () => {
  const recent = new RecentCalls();
  const small = body(64 * 1024, 0x62);
  const alloc = vi.spyOn(Buffer, 'allocUnsafeSlow');
  recent.rememberBodies(key, 'req_1', { body: small }, null);
  expect(alloc).toHaveBeenCalledTimes(1);
  // Changing the call's buffer afterwards does not change what was remembered.
  small.fill(0x7a);
  const d = recent.bodyDelta(key, 'original', { body: body(64 * 1024, 0x62) });
  expect(d).toMatchObject({ base: 'req_1', suffix: 0 });
});
