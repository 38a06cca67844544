import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgSampleLedger } from '../../src/rollout/queue/pg-ledger.js';
import { Postgres } from '../../src/store/postgres/client.js';
import { getSample, insertQueuedRollout, LEASE_LOST } from '../../src/store/postgres/queue.js';
import { migratePostgres } from '../../src/store/postgres/schema.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { patient } from '../support/patience.js';

/**
 * Two runs of one sample in one worker: the queue hands a sample whose lease lapsed (a loaded
 * machine, a PostgreSQL restart) to whichever worker asks next, which can be the one still running
 * it. The worker's one ledger kept one attempt per sample, so the earlier run wrote as the later
 * attempt: it ended the sample with its own reward while the sample named the later run's session,
 * which the worker then stopped as "ended elsewhere" (status `aborted`). `polar export` leaves an
 * aborted session's traces out as partial: a completed, rewarded sample missing from the export
 * (issue 43). Each run now has a ledger of its own (PgSampleLedger.forRun): its writes name its attempt.
 */

let server: TestPostgres;
let pg: Postgres;

beforeAll(async () => {
  server = await startTestPostgres();
  pg = new Postgres(await server.database('attempts'));
  await migratePostgres(pg);
  await insertQueuedRollout(
    pg,
    {
      id: 'rol_a',
      createdAt: 1000,
      harness: 'custom',
      upstreamUrl: null,
      upstreamKind: 'vllm',
      servedModel: null,
      samplesPerTask: 2,
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

describe('one worker running a sample twice (its lease lapsed and the queue gave it back)', () => {
  it("the earlier run's end is fenced: the sample ends once, by the run whose session it names", async () => {
    const worker = new PgSampleLedger(pg);
    const [earlier, later] = [worker.forRun(), worker.forRun()];
    const sample = (await getSample(pg, 'rol_a:t:0'))!;
    expect(await earlier.start(sample, 'ses_earlier')).toBe(1);
    expect(await later.start(sample, 'ses_later')).toBe(2);
    // The earlier run gets to the end first (it started first): nothing it writes lands.
    await earlier.stage(sample.id, 'post', { post_ms: 1 });
    expect(await earlier.finish(sample.id, { status: 'completed', reward: 1 })).toBe(false);
    expect(await getSample(pg, sample.id)).toMatchObject({ status: 'init', attempt: 2, sessionId: 'ses_later', reward: null });
    // So the later run is not cut off ("ended elsewhere"), and its end is the sample's.
    await later.stage(sample.id, 'post');
    expect(await later.finish(sample.id, { status: 'completed', reward: 0.5 })).toBe(true);
    expect(await getSample(pg, sample.id)).toMatchObject({ status: 'completed', attempt: 2, sessionId: 'ses_later', reward: 0.5 });
  });

  it('the earlier run stopped for its lost lease leaves the later attempt running, and says why on its own attempt only', async () => {
    const worker = new PgSampleLedger(pg);
    const [earlier, later] = [worker.forRun(), worker.forRun()];
    const sample = (await getSample(pg, 'rol_a:t:1'))!;
    expect(await earlier.start(sample, 'ses_1')).toBe(1);
    expect(await later.start(sample, 'ses_2')).toBe(2);
    // What the lease thread says goes to the run's own ledger; its interrupt names attempt 1, which is gone.
    earlier.leaseLost(sample.id);
    await earlier.interrupt(sample.id);
    expect(await getSample(pg, sample.id)).toMatchObject({ status: 'init', attempt: 2, sessionId: 'ses_2', error: null });
    expect(await later.finish(sample.id, { status: 'completed', reward: 1 })).toBe(true);
    expect(await getSample(pg, sample.id)).toMatchObject({ status: 'completed', sessionId: 'ses_2', reward: 1 });

    // A lost lease of a run that still holds the latest attempt is recorded on it.
    const again = await insertAgain(pg);
    const run = worker.forRun();
    expect(await run.start(again, 'ses_3')).toBe(1);
    run.leaseLost(again.id);
    await run.interrupt(again.id);
    expect(await getSample(pg, again.id)).toMatchObject({ status: 'interrupted', error: LEASE_LOST });
  });

  it("a run's lost lease is its own: another run of the sample interrupted first records a plain interrupt", async () => {
    const worker = new PgSampleLedger(pg);
    const sample = await insertAgain(pg, 'rol_c');
    const [earlier, later] = [worker.forRun(), worker.forRun()];
    expect(await earlier.start(sample, 'ses_c1')).toBe(1);
    // The later run loses its lease; the earlier one is stopped by Ctrl-C and interrupts first.
    later.leaseLost(sample.id);
    await earlier.interrupt(sample.id);
    expect(await getSample(pg, sample.id)).toMatchObject({ status: 'interrupted', error: null });
    expect(await later.start(sample, 'ses_c2')).toBe(2);
    await later.interrupt(sample.id);
    expect(await getSample(pg, sample.id)).toMatchObject({ status: 'interrupted', error: LEASE_LOST, sessionId: 'ses_c2' });
  });
});

/** A second rollout's one sample, for a run of its own. */
async function insertAgain(pg: Postgres, id = 'rol_b') {
  await insertQueuedRollout(
    pg,
    {
      id,
      createdAt: 2000,
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
  return (await getSample(pg, `${id}:t:0`))!;
}
