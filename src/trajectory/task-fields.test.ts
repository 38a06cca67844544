import { describe, expect, it } from 'vitest';
import type { SampleRow } from '../store/rollouts.js';
import { sessionTraces } from './reconstruct.js';
import type { Strategy } from './types.js';

/** One trace, whatever the calls: what is asserted is the session-level metadata sessionTraces adds. */
const ONE_TRACE: Strategy = {
  name: 'stub',
  run: () => ({ traces: [{ request_ids: ['req_1'], metadata: {} } as never], breaks: [] }),
};

describe("exports carry a Harbor verifier's metrics and which one the reward is", () => {
  it('a reward.json of metrics only: every metric in metadata.rewards, the chosen one in metadata.reward_key', () => {
    const sample = {
      rolloutId: 'rol_1',
      taskId: 'metrics-only',
      groupId: 'grp_1',
      reward: 1,
      traceRewards: null,
      advantage: 0,
      looAdvantage: null,
      accepted: null,
      evaluator: { type: 'harbor', task: 'org/metrics-only', metadata: {}, rewards: { correctness: 1, style: 0.5 }, reward_key: 'correctness' },
    } as unknown as SampleRow;
    const { traces } = sessionTraces({ id: 'ses_1', status: 'completed' }, ONE_TRACE, [], undefined, sample);
    expect(traces[0]!.reward).toBe(1);
    expect(traces[0]!.metadata).toMatchObject({ task_name: 'org/metrics-only', rewards: { correctness: 1, style: 0.5 }, reward_key: 'correctness' });
    // A sample scored with no reward chosen (a forfeit): its metrics still travel, with no key.
    const forfeit = { ...sample, reward: 0, evaluator: { ...sample.evaluator, reward_key: undefined, forfeit: 'pass --reward-key' } } as SampleRow;
    expect(sessionTraces({ id: 'ses_2', status: 'completed' }, ONE_TRACE, [], undefined, forfeit).traces[0]!.metadata).toMatchObject({
      rewards: { correctness: 1, style: 0.5 },
      reward_key: null,
    });
  });
});
