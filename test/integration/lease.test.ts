import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import type { Job, PgBoss } from 'pg-boss';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureQueue, openQueue } from '../../src/rollout/queue/boss.js';
import { fenceLease, holdLease, type Lease, LeaseKeeper } from '../../src/rollout/queue/lease.js';
import { PgSampleLedger } from '../../src/rollout/queue/pg-ledger.js';
import { Postgres } from '../../src/store/postgres/client.js';
import { getSample, insertQueuedRollout, LEASE_LOST, sampleHasEnded, sampleProgress, startAttempt } from '../../src/store/postgres/queue.js';
import { migratePostgres } from '../../src/store/postgres/schema.js';
import { patient } from '../support/patience.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { waitUntil } from '../support/wait.js';

/**
 * A queued sample's lease (rollout/queue/lease.ts) against a real PostgreSQL and a real pg-boss
 * supervisor in another process, the one that expires jobs whose heartbeat lapsed: a blocked event
 * loop keeps it, a job the queue took away is reported lost, and a restart shorter than the lease
 * is no loss while an outage longer than the lease is.
 */

let server: TestPostgres;
let url: string;
let boss: PgBoss;
let supervisor: ChildProcess;
const QUEUE = 'polar-samples-lease-test';

beforeAll(async () => {
  server = await startTestPostgres();
  url = await server.database('lease');
  boss = await openQueue(url);
  await ensureQueue(boss, QUEUE);
  // Expiry is pg-boss's supervision, every second here, in a process whose event loop is free.
  supervisor = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import { PgBoss } from 'pg-boss';
       const b = new PgBoss({ connectionString: process.argv[1], superviseIntervalSeconds: 1, monitorIntervalSeconds: 1 });
       b.on('error', () => {});
       await b.start();
       process.stdout.write('supervising\\n');`,
      url,
    ],
    { cwd: path.resolve(__dirname, '../..'), stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve) => supervisor.stdout!.once('data', () => resolve()));
}, patient(120_000));

afterAll(async () => {
  supervisor?.kill('SIGKILL');
  await boss?.stop({ graceful: false, close: true }).catch(() => undefined);
  await server?.close();
});

/** A job on the test queue with a 10 s lease, fetched as a worker fetches it. */
async function fetched(): Promise<Job<object>> {
  await boss.send(QUEUE, {}, { heartbeatSeconds: 10, retryLimit: 2, retryDelay: 0 });
  const [job] = await boss.fetch<object>(QUEUE);
  if (!job) throw new Error('no job fetched');
  return job;
}

async function jobState(id: string): Promise<{ state: string; retry_count: number }> {
  const { rows } = await boss.getDb().executeSql('SELECT state, retry_count FROM pgboss.job WHERE id = $1', [id]);
  return rows[0] as { state: string; retry_count: number };
}

/** The main thread busy for `ms`, as a worker's is under a harness's load: no timer of its runs. */
function busy(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // spin
  }
}

describe('a lease on its own thread', () => {
  it(
    'holds through an event loop blocked past the lease, where a main-thread heartbeat loses it',
    async () => {
      const keeper = new LeaseKeeper(url);
      const kept = await fetched();
      const timed = await fetched();
      const lost: string[] = [];
      const release = keeper.hold({ queue: QUEUE, id: kept.id, attempt: kept.retryCount, heartbeatSeconds: 10 }, (r) => lost.push(r));
      // What a worker did before: touch from a main-thread timer every heartbeat / 3.
      const timer = setInterval(() => void boss.touch(QUEUE, timed).catch(() => undefined), 10_000 / 3);
      try {
        busy(16_000);
        // The supervisor ran every second while this thread was busy: the main-thread lease lapsed.
        await waitUntil('the main-thread lease to lapse', async () => (await jobState(timed.id)).state !== 'active');
        expect(await jobState(kept.id)).toMatchObject({ state: 'active', retry_count: kept.retryCount });
        expect(lost).toEqual([]);
      } finally {
        clearInterval(timer);
        release();
        await keeper.close();
      }
    },
    patient(90_000),
  );

  it(
    'says the lease is lost once the queue expired the job or another worker runs it',
    async () => {
      const keeper = new LeaseKeeper(url);
      try {
        for (const [take, said] of [
          [`UPDATE pgboss.job SET state = 'retry' WHERE id = $1`, /the queue expired it and hands it to another worker/],
          [`UPDATE pgboss.job SET retry_count = retry_count + 1 WHERE id = $1`, /another worker runs attempt \d+ of it/],
        ] as const) {
          const job = await fetched();
          let reason: string | null = null;
          keeper.hold({ queue: QUEUE, id: job.id, attempt: job.retryCount, heartbeatSeconds: 10 }, (r) => (reason = r));
          await boss.getDb().executeSql(take, [job.id]);
          await waitUntil('the lease to be reported lost', () => reason !== null);
          expect(reason).toMatch(said);
        }
      } finally {
        await keeper.close();
      }
    },
    patient(60_000),
  );

  it(
    'keeps the lease through a PostgreSQL restart shorter than the lease, and loses it to an outage longer than it',
    async () => {
      const keeper = new LeaseKeeper(url);
      const job = await fetched();
      let reason: string | null = null;
      const release = keeper.hold({ queue: QUEUE, id: job.id, attempt: job.retryCount, heartbeatSeconds: 10 }, (r) => (reason = r));
      const pg = new Postgres(url, { max: 1 });
      try {
        const beat = async () =>
          Number((await pg.query(`SELECT extract(epoch FROM heartbeat_on) * 1000 AS at FROM pgboss.job WHERE id = $1`, [job.id])).rows[0]!.at);
        await server.stop();
        await server.start();
        const back = await pg.query('SELECT extract(epoch FROM now()) * 1000 AS at').then((r) => Number(r.rows[0]!.at));
        await waitUntil('a touch after the restart', async () => (await beat().catch(() => 0)) >= back, { everyMs: 200 });
        expect(reason).toBeNull();
        expect(await jobState(job.id)).toMatchObject({ state: 'active' });
        await server.stop();
        try {
          await waitUntil('the lease to be lost while PostgreSQL is down', () => reason !== null, { everyMs: 200 });
        } finally {
          await server.start();
        }
        expect(reason).toMatch(/^no heartbeat for 1\d s: /);
      } finally {
        release();
        await pg.close();
        await keeper.close();
      }
    },
    patient(120_000),
  );
});

describe("a lost lease's interrupt", () => {
  it(
    'is recorded `interrupted: lease lost` on an attempt still its own, never over a newer one, and is not an end',
    async () => {
      const pg = new Postgres(url);
      try {
        await migratePostgres(pg);
        await insertQueuedRollout(
          pg,
          {
            id: 'rol_lease',
            createdAt: 1000,
            harness: 'custom',
            upstreamUrl: 'http://gpu:8000',
            upstreamKind: 'vllm',
            servedModel: null,
            samplesPerTask: 2,
            tasksFile: null,
            accept: null,
            config: { timeoutSec: 60 },
            origin: 'queue:test',
          },
          [{ id: 't', json: '{"id":"t"}' }],
        );
        const first = new PgSampleLedger(pg);
        const second = new PgSampleLedger(pg);
        // Sample 0: its lease lost while the attempt is still this worker's: recorded so.
        await first.start((await getSample(pg, 'rol_lease:t:0'))!, 's0');
        first.leaseLost('rol_lease:t:0');
        await first.interrupt('rol_lease:t:0');
        expect(await getSample(pg, 'rol_lease:t:0')).toMatchObject({ status: 'interrupted', error: LEASE_LOST, attempt: 1 });
        // Sample 1: another worker started it again first: the lost attempt writes nothing over it.
        await first.start((await getSample(pg, 'rol_lease:t:1'))!, 's1a');
        expect(await startAttempt(pg, 'rol_lease:t:1', 's1b', 'other', Date.now())).toBe(2);
        first.leaseLost('rol_lease:t:1');
        await first.interrupt('rol_lease:t:1');
        expect(await getSample(pg, 'rol_lease:t:1')).toMatchObject({ status: 'init', error: null, attempt: 2, sessionId: 's1b' });
        // A waiting coordinator waits on for the retry of a lost lease.
        const progress = await sampleProgress(pg, 'rol_lease');
        expect(progress.map(sampleHasEnded)).toEqual([false, false]);
        // And the retry of sample 0 runs from a clean row.
        await second.start((await getSample(pg, 'rol_lease:t:0'))!, 's0b');
        expect(await getSample(pg, 'rol_lease:t:0')).toMatchObject({ status: 'init', error: null, attempt: 2 });
      } finally {
        await pg.close();
      }
    },
    patient(60_000),
  );
});

/** When the queue's database says the job was last touched (ms since the epoch). */
async function heartbeatOn(id: string): Promise<number> {
  const { rows } = await boss.getDb().executeSql('SELECT extract(epoch FROM heartbeat_on) * 1000 AS at FROM pgboss.job WHERE id = $1', [id]);
  return Number((rows[0] as { at: string }).at);
}

async function dbNow(): Promise<number> {
  const { rows } = await boss.getDb().executeSql('SELECT extract(epoch FROM now()) * 1000 AS at');
  return Number((rows[0] as { at: string }).at);
}

describe('two runs of one job in one worker (its lease lapsed, the queue handed its retry back)', () => {
  it(
    "the earlier run's release, however often it comes, leaves the retry's heartbeat running",
    async () => {
      const job = await fetched();
      const earlier: Lease = { queue: QUEUE, id: job.id, attempt: job.retryCount, heartbeatSeconds: 10 };
      const lostLater: string[] = [];
      const releaseEarlier = holdLease(url, earlier, () => undefined);
      // The queue gives the same job (same id: jobId(sampleId)) as its next attempt to this worker.
      await boss.getDb().executeSql('UPDATE pgboss.job SET retry_count = retry_count + 1 WHERE id = $1', [job.id]);
      const releaseLater = holdLease(url, { ...earlier, attempt: job.retryCount + 1 }, (r) => lostLater.push(r));
      try {
        // The earlier run stops: released after POSTRUN, in its catch and in finally.
        releaseEarlier();
        releaseEarlier();
        releaseEarlier();
        const released = await dbNow();
        await waitUntil('a touch of the retry after the earlier run released', async () => (await heartbeatOn(job.id)) > released, { everyMs: 200 });
        const first = await heartbeatOn(job.id);
        await waitUntil('another touch of the retry', async () => (await heartbeatOn(job.id)) > first, { everyMs: 200 });
        expect(await jobState(job.id)).toMatchObject({ state: 'active', retry_count: job.retryCount + 1 });
        expect(lostLater).toEqual([]);
      } finally {
        releaseLater();
      }
    },
    patient(60_000),
  );
});

describe('the fenced touch before an attempt starts (a worker resumed after a stall)', () => {
  it(
    'starts no attempt for a job no longer active in its attempt and leaves the sample row untouched; starts one for a job still its own',
    async () => {
      const pg = new Postgres(url);
      try {
        await migratePostgres(pg);
        await insertQueuedRollout(
          pg,
          {
            id: 'rol_fence',
            createdAt: 3000,
            harness: 'custom',
            upstreamUrl: null,
            upstreamKind: 'vllm',
            servedModel: null,
            samplesPerTask: 3,
            tasksFile: null,
            accept: null,
            config: {},
            origin: 'queue:test',
          },
          [{ id: 't', json: '{"id":"t"}' }],
        );
        const worker = new PgSampleLedger(pg);
        const cases = [
          // The queue expired the job while this worker was stopped.
          [`UPDATE pgboss.job SET state = 'retry' WHERE id = $1`, /the queue marked its job retry/],
          // Another worker fetched the job's next attempt.
          [`UPDATE pgboss.job SET retry_count = retry_count + 1 WHERE id = $1`, /another worker runs attempt \d+ of it/],
        ] as const;
        for (const [i, [take, said]] of cases.entries()) {
          const job = await fetched();
          const lease: Lease = { queue: QUEUE, id: job.id, attempt: job.retryCount, heartbeatSeconds: 10 };
          await boss.getDb().executeSql(take, [job.id]);
          let reason: string | null = null;
          const run = worker.forRun(async () => (reason = await fenceLease(boss.getDb(), lease)));
          const before = (await getSample(pg, `rol_fence:t:${i}`))!;
          expect(await run.start(before, `ses_stale_${i}`)).toBeNull();
          expect(reason).toMatch(said);
          expect(await getSample(pg, before.id)).toEqual(before);
          // Its interrupt, if the run made one, finds no attempt of its own to write over.
          await run.interrupt(before.id);
          expect(await getSample(pg, before.id)).toEqual(before);
        }
        const job = await fetched();
        const touchedBefore = await heartbeatOn(job.id);
        const run = worker.forRun(() => fenceLease(boss.getDb(), { queue: QUEUE, id: job.id, attempt: job.retryCount, heartbeatSeconds: 10 }));
        expect(await run.start((await getSample(pg, 'rol_fence:t:2'))!, 'ses_held')).toBe(1);
        expect(await heartbeatOn(job.id)).toBeGreaterThan(touchedBefore);
        expect(await getSample(pg, 'rol_fence:t:2')).toMatchObject({ status: 'init', attempt: 1, sessionId: 'ses_held' });
      } finally {
        await pg.close();
      }
    },
    patient(60_000),
  );
});
