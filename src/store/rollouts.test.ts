import { describe, expect, it } from 'vitest';
import { openDb } from './db.js';
import { endValues, type GroupStatsFn, groupWrites, RolloutsTable } from './rollouts.js';

/** A stand-in for rollout/stats.ts (the store takes its statistics from above): mean, and r − mean as both advantages. */
const groupStats: GroupStatsFn = (rewards) => {
  const scored = rewards.filter((r): r is number => r !== null);
  const mean = scored.length ? scored.reduce((a, b) => a + b, 0) / scored.length : null;
  const adv = rewards.map((r) => (r === null || mean === null ? null : r - mean));
  return { rewarded: scored.length, mean, std: 0, advantages: adv, looAdvantages: adv };
};

const GROUP = { rolloutId: 'rol_1', taskId: 't', groupId: 'rol_1/t' };

describe('groupWrites: the one group bookkeeping of the local store and the queue', () => {
  it('writes nothing while a member has not ended', () => {
    const members = [
      { id: 'a', status: 'completed', reward: 1, accepted: true },
      { id: 'b', status: 'running', reward: null, accepted: null },
    ];
    expect(groupWrites(GROUP, members, groupStats, 5)).toBeNull();
  });

  it('once every member ended: the statistics, each member’s advantages in order, accepted counted', () => {
    const members = [
      { id: 'a', status: 'completed', reward: 1, accepted: true },
      { id: 'b', status: 'failed', reward: 0, accepted: false },
      { id: 'c', status: 'error', reward: null, accepted: null },
    ];
    const w = groupWrites(GROUP, members, groupStats, 42)!;
    expect(w.group).toEqual({ ...GROUP, samples: 3, rewarded: 2, mean: 0.5, std: 0, accepted: 1, completedAt: 42 });
    expect(w.advantages).toEqual([
      { id: 'a', advantage: 0.5, looAdvantage: 0.5 },
      { id: 'b', advantage: -0.5, looAdvantage: -0.5 },
      { id: 'c', advantage: null, looAdvantage: null },
    ]);
  });

  it('an interrupted member keeps the group open (it will run again)', () => {
    expect(groupWrites(GROUP, [{ id: 'a', status: 'interrupted', reward: null, accepted: null }], groupStats, 1)).toBeNull();
  });
});

describe('endValues', () => {
  it('turns an end into the column values both stores write', () => {
    expect(endValues({ status: 'completed', reward: 0.5, traceRewards: [0.5], accepted: false, timing: { run_ms: 3 } })).toEqual({
      status: 'completed',
      errorStage: null,
      error: null,
      reward: 0.5,
      traceRewards: '[0.5]',
      evaluator: null,
      diff: null,
      accepted: 0,
      timing: '{"run_ms":3}',
    });
  });
});

describe('RolloutsTable.finish', () => {
  it('writes the group and every advantage when the last member ends, once', () => {
    const db = openDb(':memory:');
    try {
      const t = new RolloutsTable(db);
      t.create(
        {
          id: 'rol_1',
          harness: 'custom',
          upstreamUrl: null,
          upstreamKind: null,
          servedModel: null,
          samplesPerTask: 2,
          tasksFile: null,
          accept: null,
          config: {},
        },
        [{ id: 't', json: '{"id":"t"}' }],
      );
      const [a, b] = t.samples('rol_1');
      t.start(a!.id, 'ses_a');
      t.start(b!.id, 'ses_b');
      expect(t.finish(a!.id, { status: 'completed', reward: 1, accepted: true }, groupStats)).toBe(true);
      expect(t.groups('rol_1')).toEqual([]);
      expect(t.finish(b!.id, { status: 'completed', reward: 0 }, groupStats)).toBe(true);
      expect(t.finish(b!.id, { status: 'completed', reward: 1 }, groupStats)).toBe(false);
      expect(t.groups('rol_1')).toMatchObject([{ taskId: 't', samples: 2, rewarded: 2, mean: 0.5, accepted: 1 }]);
      expect(t.samples('rol_1').map((s) => [s.reward, s.advantage, s.looAdvantage])).toEqual([
        [1, 0.5, 0.5],
        [0, -0.5, -0.5],
      ]);
    } finally {
      db.close();
    }
  });
});
