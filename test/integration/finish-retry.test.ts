import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { groupStats } from '../../src/rollout/stats.js';
import { Postgres } from '../../src/store/postgres/client.js';
import { finishAttempt, getSample, insertQueuedRollout, startAttempt } from '../../src/store/postgres/queue.js';
import { migratePostgres } from '../../src/store/postgres/schema.js';
import { patient } from '../support/patience.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';

/**
 * A sample's end written again after its COMMIT landed but its reply was lost (PostgreSQL restarted
 * at that moment; the ledger tries again through whileUnreachable): the retry finds the sample
 * ended and must say the end is recorded, not that another attempt holds it, or the worker reports
 * `interrupted` for a sample the store has completed and rewarded (review of issue 43).
 */

let server: TestPostgres;
let pg: Postgres;

beforeAll(async () => {
  server = await startTestPostgres();
  pg = new Postgres(await server.database('finish_retry'));
  await migratePostgres(pg);
  await insertQueuedRollout(
    pg,
    {
      id: 'rol_r',
      createdAt: 1000,
      harness: 'custom',
      upstreamUrl: null,
      upstreamKind: 'vllm',
      servedModel: null,
      samplesPerTask: 1,
      tasksFile: null,
      accept: null,
      config: {},
      origin: 'queue:test',
    },
    [{ id: 't', json: '{"id":"t"}' }],
  );
}, patient(120_000));

afterAll(async () => {
  await pg?.close();
  await server?.close();
});

describe('finishAttempt tried again', () => {
  it('the same end of the same attempt is recorded; any other end is not', async () => {
    const attempt = (await startAttempt(pg, 'rol_r:t:0', 'ses_1', 'host/1', Date.now()))!;
    const end = { status: 'completed' as const, reward: 0.5 };
    expect(await finishAttempt(pg, 'rol_r:t:0', attempt, end, groupStats)).toBe(true);
    // The reply of that COMMIT was lost: the ledger sends it again.
    expect(await finishAttempt(pg, 'rol_r:t:0', attempt, end, groupStats)).toBe(true);
    // Another end, or another attempt's, changes nothing and is refused.
    expect(await finishAttempt(pg, 'rol_r:t:0', attempt, { status: 'completed', reward: 1 }, groupStats)).toBe(false);
    expect(await finishAttempt(pg, 'rol_r:t:0', attempt + 1, end, groupStats)).toBe(false);
    expect(await getSample(pg, 'rol_r:t:0')).toMatchObject({ status: 'completed', reward: 0.5, attempt });
  });
});
