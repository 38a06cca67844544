import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { GroupStatsFn } from './rollouts.js';
import { Store } from './store.js';
import { recentSessions } from './train-runs.js';
import { removeTree } from '../../test/support/remove-tree.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) removeTree(d);
});

function tempDb(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-train-runs-'));
  dirs.push(dir);
  return path.join(dir, 'polar.db');
}

const noStats: GroupStatsFn = (rewards) => ({
  rewarded: 0,
  mean: null,
  std: null,
  advantages: rewards.map(() => null),
  looAdvantages: rewards.map(() => null),
});

describe('recentSessions: what `train grpo` shows of the agent’s latest samples', () => {
  it('the ended samples since the run started, newest first, at most the limit; unstarted and earlier ones are not shown', () => {
    const file = tempDb();
    const store = Store.open(file);
    try {
      store.rollouts.create(
        {
          id: 'rol_1',
          harness: 'custom',
          upstreamUrl: null,
          upstreamKind: null,
          servedModel: null,
          samplesPerTask: 5,
          tasksFile: null,
          accept: null,
          config: {},
        },
        [{ id: 't', json: '{"id":"t"}' }],
      );
      const samples = store.rollouts.samples('rol_1');
      const endedAt = [100, 300, 200, 50];
      for (const [i, s] of samples.slice(0, 4).entries()) {
        store.rollouts.start(s.id, `ses_${i}`);
        store.rollouts.finish(
          s.id,
          i === 1 ? { status: 'error', errorStage: 'post', error: 'evaluator timed out' } : { status: 'completed', reward: i },
          noStats,
        );
        // ended_at pinned, so the order does not hang on the clock.
        store.db.prepare('UPDATE samples SET ended_at = ? WHERE id = ?').run(endedAt[i], s.id);
      }
    } finally {
      store.close();
    }
    expect(recentSessions(file, 100)).toEqual([
      { sessionId: 'ses_1', taskId: 't', reward: null, status: 'error' },
      { sessionId: 'ses_2', taskId: 't', reward: 2, status: 'completed' },
      { sessionId: 'ses_0', taskId: 't', reward: 0, status: 'completed' },
    ]);
    expect(recentSessions(file, 0, 2).map((s) => s.sessionId)).toEqual(['ses_1', 'ses_2']);
  });

  it('no database yet reads as no sessions', () => {
    expect(recentSessions(path.join(tempDb(), 'missing.db'), 0)).toEqual([]);
  });
});
