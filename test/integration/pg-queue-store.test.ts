import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { groupStats } from '../../src/rollout/stats.js';
import { Postgres } from '../../src/store/postgres/client.js';
import {
  finishAttempt,
  getRollout,
  getRolloutTask,
  getSample,
  getSampleStatus,
  insertQueuedRollout,
  interruptAttempt,
  sampleProgress,
  stageAttempt,
  startAttempt,
} from '../../src/store/postgres/queue.js';
import { migratePostgres } from '../../src/store/postgres/schema.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';

/**
 * The queue's statements in the shared store (store/postgres/queue.ts) against a real PostgreSQL:
 * typed rows read back, an attempt superseded by a retry can no longer end its sample, and the
 * group's statistics and the rollout's end are written by whichever finish ends them.
 */
let server: TestPostgres;
let pg: Postgres;
let dir: string;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-pg-queue-'));
  process.env.POLAR_STATE_DIR = path.join(dir, 'state');
  server = await startTestPostgres();
  pg = new Postgres(await server.database('queue_store'));
  await migratePostgres(pg);
}, 120_000);

afterAll(async () => {
  await pg?.close();
  await server?.close();
  delete process.env.POLAR_STATE_DIR;
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('the queue in the shared store', () => {
  it('moves samples by attempt, ends each once, and writes the group and the rollout end with the last one', async () => {
    await insertQueuedRollout(
      pg,
      {
        id: 'rol_q',
        createdAt: 1000,
        harness: 'custom',
        upstreamUrl: 'http://gpu:8000',
        upstreamKind: 'vllm',
        servedModel: null,
        samplesPerTask: 2,
        tasksFile: null,
        accept: 'reward>=1',
        config: { timeoutSec: 60 },
        origin: 'queue:test',
      },
      [{ id: 't', json: '{"id":"t"}' }],
    );
    expect(await getRollout(pg, 'rol_q')).toMatchObject({ id: 'rol_q', status: 'running', samplesPerTask: 2, config: { timeoutSec: 60 } });
    expect(await getRolloutTask(pg, 'rol_q', 't')).toBe('{"id":"t"}');
    expect((await sampleProgress(pg, 'rol_q')).map((s) => [s.id, s.status])).toEqual([
      ['rol_q:t:0', 'queued'],
      ['rol_q:t:1', 'queued'],
    ]);

    // Sample 0: a first attempt is lost (lease expired), a retry starts; the first can neither move nor end it.
    const first = await startAttempt(pg, 'rol_q:t:0', 'ses_1', 'host/1', 2000);
    const retry = await startAttempt(pg, 'rol_q:t:0', 'ses_2', 'host/2', 3000);
    expect([first, retry]).toEqual([1, 2]);
    await stageAttempt(pg, 'rol_q:t:0', first!, 'running', { init_ms: 1 });
    expect(await getSampleStatus(pg, 'rol_q:t:0')).toBe('init');
    expect(await finishAttempt(pg, 'rol_q:t:0', first!, { status: 'completed', reward: 0 }, groupStats)).toBe(false);
    await stageAttempt(pg, 'rol_q:t:0', retry!, 'post', { run_ms: 5 });
    expect(await finishAttempt(pg, 'rol_q:t:0', retry!, { status: 'completed', reward: 1, accepted: true, timing: { post_ms: 2 } }, groupStats)).toBe(true);
    expect(await finishAttempt(pg, 'rol_q:t:0', retry!, { status: 'completed', reward: 0 }, groupStats)).toBe(false);
    expect(await getSample(pg, 'rol_q:t:0')).toMatchObject({
      attempt: 2,
      sessionId: 'ses_2',
      worker: 'host/2',
      status: 'completed',
      reward: 1,
      accepted: true,
      timing: { run_ms: 5, post_ms: 2 },
      advantage: null,
    });
    expect((await pg.query(`SELECT count(*)::int AS n FROM groups`)).rows[0]).toEqual({ n: 0 });

    // Sample 1: interrupted, then run again and ended: the group is whole, the rollout done.
    const a = await startAttempt(pg, 'rol_q:t:1', 'ses_3', 'host/1', 4000);
    await interruptAttempt(pg, 'rol_q:t:1', a!);
    expect(await getSampleStatus(pg, 'rol_q:t:1')).toBe('interrupted');
    const b = await startAttempt(pg, 'rol_q:t:1', 'ses_4', 'host/1', 5000);
    expect(await finishAttempt(pg, 'rol_q:t:1', b!, { status: 'failed', reward: 0, accepted: false }, groupStats)).toBe(true);
    const s = groupStats([1, 0]);
    expect((await getSample(pg, 'rol_q:t:0'))!.advantage).toBe(s.advantages[0]);
    expect((await getSample(pg, 'rol_q:t:1'))!.looAdvantage).toBe(s.looAdvantages[1]);
    const groups = (await pg.query(`SELECT task_id, group_id, samples, rewarded, mean, accepted FROM groups`)).rows;
    expect(groups).toEqual([{ task_id: 't', group_id: 'rol_q/t', samples: 2, rewarded: 2, mean: 0.5, accepted: 1 }]);
    expect(await getRollout(pg, 'rol_q')).toMatchObject({ status: 'completed' });
    expect(await startAttempt(pg, 'rol_q:t:1', 'ses_5', 'host/1', 6000)).toBeNull();
  }, 60_000);
});
