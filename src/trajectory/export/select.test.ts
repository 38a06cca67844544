import { describe, expect, it } from 'vitest';
import { groupStats } from '../../rollout/stats.js';
import { Store } from '../../store/store.js';
import { emptyStats } from '../reconstruct.js';
import { getStrategy } from '../registry.js';
import { exportLines } from './select.js';

/** A session of sample `index`'s attempt with one call of token ids, ended with `status`. */
function attempt(store: Store, session: string, index: number, status: 'completed' | 'aborted'): void {
  store.sessions.ensure(session, { metadata: { rollout_id: 'rol_1', task_id: 't', group_id: 'grp', sample_index: index } });
  store.requests.begin({
    id: `req_${session}`,
    sessionId: session,
    agentId: 'main',
    provider: 'openai-chat',
    method: 'POST',
    path: '/v1/chat/completions',
    startedAt: 1,
    streamed: false,
    requestHeaders: {},
    requestedModel: 'm',
    servedModel: 'm',
  });
  store.requests.end(`req_${session}`, {
    endedAt: 2,
    status: 'ok',
    httpStatus: 200,
    reply: '',
    tokens: { source: 'upstream', promptIds: [1, 2, 3], sampledIds: [4, 5], logprobs: [-0.5, -0.25] },
  });
  store.sessions.end(session, status);
}

describe('the default export and a sample that ran twice', () => {
  it("keeps the sample's final attempt with its reward and leaves the earlier one out as what it is, however it ended", () => {
    const store = Store.open(':memory:');
    store.rollouts.create(
      {
        id: 'rol_1',
        harness: 'custom',
        upstreamUrl: null,
        upstreamKind: 'vllm',
        servedModel: null,
        samplesPerTask: 2,
        tasksFile: null,
        accept: null,
        config: {},
      },
      [{ id: 't', json: '{"id":"t"}' }],
    );
    // Sample 0: its first attempt was stopped (a lost lease), the second completed.
    // Sample 1: its first attempt ran to its end anyway (fenced), the second completed.
    for (const [index, first] of [
      [0, 'aborted'],
      [1, 'completed'],
    ] as const) {
      const id = `rol_1:t:${index}`;
      store.rollouts.start(id, `ses_${index}_a`);
      attempt(store, `ses_${index}_a`, index, first);
      store.rollouts.start(id, `ses_${index}_b`);
      attempt(store, `ses_${index}_b`, index, 'completed');
      expect(store.rollouts.finish(id, { status: 'completed', reward: index + 0.5 }, groupStats)).toBe(true);
    }
    const out = [
      ...exportLines(
        store,
        { format: 'tokens', strategy: getStrategy('prefix-merging'), minReward: null, accepted: false, includePartial: false },
        emptyStats('prefix-merging'),
      ),
    ];
    const lines = out.flatMap((o) => ('line' in o ? [o.line as { session_id: string; reward: number | null }] : []));
    expect(lines.map((l) => [l.session_id, l.reward])).toEqual([
      ['ses_0_b', 0.5],
      ['ses_1_b', 1.5],
    ]);
    expect(out.flatMap((o) => ('leftOut' in o ? [o] : []))).toEqual([
      { kind: 'earlier attempt', leftOut: expect.stringMatching(/^earlier attempt of sample rol_1:t:0, which ran again: its trace is session ses_0_b's/) },
      { kind: 'earlier attempt', leftOut: expect.stringMatching(/^earlier attempt of sample rol_1:t:1, which ran again: its trace is session ses_1_b's/) },
    ]);
    // Named one by one, an earlier attempt is exported as asked (a session of no sample: no reward).
    const named = [
      ...exportLines(
        store,
        { format: 'tokens', strategy: getStrategy('prefix-merging'), sessions: ['ses_1_a'], minReward: null, accepted: false, includePartial: false },
        emptyStats('prefix-merging'),
      ),
    ];
    expect(named).toEqual([{ line: expect.objectContaining({ session_id: 'ses_1_a', reward: null, rollout_id: null }) }]);
    store.close();
  });
});
