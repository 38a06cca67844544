import { describe, expect, it } from 'vitest';
import { classifyFailure, FailureWindow } from './failures.js';

const sample = (status: string, errorStage: string | null = null, error: string | null = null) =>
  ({ status, errorStage, error }) as Parameters<typeof classifyFailure>[0];

describe('classifyFailure', () => {
  it('retries what is outside the policy: a failed workspace or setup, a harness that never got an answer', () => {
    expect(classifyFailure(sample('error', 'init', 'setup command exited 3'), 0)).toEqual({
      kind: 'infra',
      reason: 'the workspace or its setup failed: setup command exited 3',
    });
    expect(classifyFailure(sample('error', 'run', 'spawn ENOENT'), 0)?.kind).toBe('infra');
    expect(classifyFailure(sample('failed'), 0)?.kind).toBe('infra');
  });

  it('counts a broken evaluator and a session with no answered call as configuration failures, without retrying', () => {
    expect(classifyFailure(sample('error', 'post', 'evaluator not found'), 3)).toMatchObject({ kind: 'config' });
    expect(classifyFailure(sample('completed'), 0)).toMatchObject({ kind: 'config' });
  });

  it("leaves the policy's own outcomes alone: a timeout, a sandbox cap, a failing harness after real calls", () => {
    expect(classifyFailure(sample('timeout'), 4)).toBeNull();
    expect(classifyFailure(sample('error', 'run', 'memory limit 4 GiB reached'), 5)).toBeNull();
    expect(classifyFailure(sample('failed'), 2)).toBeNull();
    expect(classifyFailure(sample('completed'), 2)).toBeNull();
  });
});

describe('FailureWindow', () => {
  const bad = { kind: 'config' as const, reason: 'the workspace or its setup failed: no such folder /data/x' };

  it('trips once more than the share of a full window failed, naming the commonest reasons, and stays tripped', () => {
    const w = new FailureWindow(4, 0.5);
    expect(w.record(bad)).toBeNull();
    expect(w.record(bad)).toBeNull();
    expect(w.record(null)).toBeNull();
    // 3 of 4 > 0.5
    const trip = w.record(bad);
    expect(trip).toMatch(
      /^3 of the last 4 rows failed for reasons outside the policy \(more than --max-failed-share 0\.5\).*Most common: 3× the workspace or its setup failed: no such folder \/data\/x$/,
    );
    expect(w.tripped).toBe(trip);
    expect(w.record(null)).toBe(trip);
  });

  it('does not trip on half, on a window not yet full, or with a share of 1', () => {
    const half = new FailureWindow(4, 0.5);
    for (const f of [bad, null, bad, null, bad, null]) expect(half.record(f)).toBeNull();
    const short = new FailureWindow(8, 0.5);
    for (let i = 0; i < 7; i++) expect(short.record(bad)).toBeNull();
    const never = new FailureWindow(2, 1);
    for (let i = 0; i < 5; i++) expect(never.record(bad)).toBeNull();
  });

  it('slides: old failures leave the window', () => {
    const w = new FailureWindow(3, 0.5);
    w.record(bad);
    w.record(null);
    w.record(null);
    expect(w.record(bad)).toBeNull(); // [null, null, bad]
    expect(w.record(bad)).not.toBeNull(); // [null, bad, bad]
  });
});
