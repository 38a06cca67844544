import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Store } from '../store/store.js';
import type { RolloutEvent } from './config.js';
import { localLedger } from './ledger.js';
import { finish } from './stages.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/**
 * What a run says when it ends a sample: the store's answer, not its own. A queued sample whose
 * lease its worker lost while it was scored is another attempt's by then, and the store refuses the
 * run's end; the worker's `--json` line said `completed` with a reward all the same (issue 43's
 * fleet check), contradicting the store.
 */
describe("a sample's end as the run reports it", () => {
  it('is the outcome when the store records it, and interrupted, naming why, when it refuses it', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-finish-'));
    dirs.push(dir);
    const store = Store.open(path.join(dir, 'polar.db'));
    try {
      store.rollouts.create(
        {
          id: 'rol_f',
          harness: 'custom',
          upstreamUrl: null,
          upstreamKind: 'vllm',
          servedModel: null,
          samplesPerTask: 1,
          tasksFile: null,
          accept: null,
          config: {},
        },
        [{ id: 't', json: '{"id":"t"}' }],
      );
      store.sessions.ensure('ses_1', { harness: 'custom' });
      store.rollouts.start('rol_f:t:0', 'ses_1');
      const sample = store.rollouts.sample('rol_f:t:0')!;
      const events: RolloutEvent[] = [];
      const ctx = { ledger: localLedger(store), emit: (e: RolloutEvent) => events.push(e) };
      await finish(ctx, sample, { status: 'completed', reward: 1 });
      // A second end of the same sample: the store keeps the first.
      await finish(ctx, sample, { status: 'completed', reward: 0.5 });
      expect(events).toEqual([
        { type: 'done', sampleId: 'rol_f:t:0', taskId: 't', outcome: 'completed', reward: 1, error: null },
        {
          type: 'done',
          sampleId: 'rol_f:t:0',
          taskId: 't',
          outcome: 'interrupted',
          reward: null,
          error: expect.stringMatching(/this run's end \(completed\) was not recorded/),
        },
      ]);
      expect(store.rollouts.sample('rol_f:t:0')).toMatchObject({ status: 'completed', reward: 1 });
    } finally {
      store.close();
    }
  });
});
