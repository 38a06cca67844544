import { describe, expect, it } from 'vitest';
import type { RolloutRow } from '../../store/rollouts.js';
import { storedSettings } from '../../rollout/queue/worker.js';
import { type GymAgentOptions, rolloutConfig } from './options.js';

const base: GymAgentOptions = {
  harness: 'claude-code',
  dbPath: 'polar.db',
  host: '127.0.0.1',
  port: 0,
  upstreams: ['http://gpu:8000/v1'],
  upstreamKind: 'nemo-rl',
  model: null,
  concurrency: 2,
  timeoutSec: 60,
  sandbox: 'bwrap',
  outDir: '/tmp/polar-agent',
};

describe('--reward-key reaches the rollout config wherever a rollout is configured', () => {
  it("gym-agent (and so train grpo, which passes it on): the agent's rollout scores by the named metric", () => {
    expect(rolloutConfig({ ...base, rewardKey: 'correctness' }).rewardKey).toBe('correctness');
    expect(rolloutConfig(base)).not.toHaveProperty('rewardKey');
  });

  it("a queue worker scores a sample by its rollout's stored --reward-key, not by anything of its own", () => {
    const rollout = { config: { rewardKey: 'quality', timeoutSec: 30, samples: 2, accept: null }, samplesPerTask: 2 } as unknown as RolloutRow;
    const local = rolloutConfig(base);
    expect(storedSettings(rollout, local)).toMatchObject({ rewardKey: 'quality', timeoutSec: 30, samples: 2 });
    // --keep-compaction reaches every worker: a queued sample's harness compacts as its rollout said.
    expect(storedSettings({ ...rollout, config: { ...rollout.config, compaction: 'harness' } }, local).compaction).toBe('harness');
    expect(storedSettings(rollout, { ...local, compaction: 'harness' }).compaction).toBeUndefined();
    const plain = { config: { timeoutSec: 30 }, samplesPerTask: 2 } as unknown as RolloutRow;
    expect({ ...rolloutConfig({ ...base, rewardKey: 'local' }), ...storedSettings(plain, local) }.rewardKey).toBeUndefined();
  });

  it("--reward-range likewise: gym-agent's rollout takes it, a queue worker the rollout's stored one (reward-range.ts)", () => {
    expect(rolloutConfig({ ...base, rewardRange: [-1, 1] }).rewardRange).toEqual([-1, 1]);
    expect(rolloutConfig(base)).not.toHaveProperty('rewardRange');
    const local = rolloutConfig({ ...base, rewardRange: [0, 100] });
    const stored = (rewardRange: unknown) => ({ config: { rewardRange, timeoutSec: 30 }, samplesPerTask: 2 }) as unknown as RolloutRow;
    expect({ ...local, ...storedSettings(stored([0, 10]), local) }.rewardRange).toEqual([0, 10]);
    // None stored (an older rollout), or one that is not a range: the default [0, 1], never the worker's own.
    for (const bad of [undefined, [1, 0], [0, 'x'], [0, 1e308], 'wide'])
      expect({ ...local, ...storedSettings(stored(bad), local) }.rewardRange, JSON.stringify(bad)).toBeUndefined();
  });
});
