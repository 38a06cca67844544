import type { PgBoss } from 'pg-boss';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureQueue, keepLeases, openQueue } from '../../src/rollout/queue/boss.js';
import { JOBS_CHANNEL } from '../../src/rollout/queue/notify.js';
import { connectionUrl } from '../../src/store/postgres/password.js';
import { patient } from '../support/patience.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { waitUntil } from '../support/wait.js';

/**
 * Idle workers sleep until a NOTIFY or their back-off (up to 30 s). A sample whose worker died goes
 * back to the queue when a worker's expiry pass (keepLeases) finds its lease lapsed: that pass
 * wakes the fleet as a queued rollout does, so the sample runs again at once, not up to 30 s later.
 */

let server: TestPostgres;
let boss: PgBoss;
let listener: pg.Client;
const QUEUE = 'polar-samples-expiry-notify';
const supervise = process.env.POLAR_QUEUE_SUPERVISE_S;
const heard: string[] = [];

beforeAll(async () => {
  process.env.POLAR_QUEUE_SUPERVISE_S = '1';
  server = await startTestPostgres();
  const url = await server.database('expiry');
  boss = await openQueue(url);
  await ensureQueue(boss, QUEUE);
  listener = new pg.Client({ connectionString: connectionUrl(url) });
  await listener.connect();
  listener.on('notification', (n) => {
    if (n.channel === JOBS_CHANNEL) heard.push(n.payload ?? '');
  });
  await listener.query(`LISTEN ${JOBS_CHANNEL}`);
}, patient(120_000));

afterAll(async () => {
  if (supervise === undefined) delete process.env.POLAR_QUEUE_SUPERVISE_S;
  else process.env.POLAR_QUEUE_SUPERVISE_S = supervise;
  await listener?.end().catch(() => undefined);
  await boss?.stop({ graceful: false, close: true }).catch(() => undefined);
  await server?.close();
});

describe("a worker's expiry pass", () => {
  it(
    'wakes the listening workers when it puts a lapsed job back, and not while leases hold',
    async () => {
      await boss.send(QUEUE, {}, { heartbeatSeconds: 10, retryLimit: 2, retryDelay: 0 });
      const [job] = await boss.fetch<object>(QUEUE);
      expect(job).toBeDefined();
      const keeper = keepLeases(boss, QUEUE, (err) => {
        throw err;
      });
      try {
        // Passes run every second while the lease holds: none of them wakes anyone.
        await new Promise((r) => setTimeout(r, 4000));
        expect(heard).toEqual([]);
        // Nobody touches the job: past its 10 s lease a pass expires it, back to the queue.
        await waitUntil('a notification that the lapsed job is queued again', async () => heard.length > 0, { everyMs: 200, timeoutMs: 60_000 });
        expect(heard[0]).toBe(QUEUE);
        const { rows } = await boss.getDb().executeSql('SELECT state FROM pgboss.job WHERE id = $1', [job!.id]);
        expect(rows[0]).toMatchObject({ state: 'retry' });
      } finally {
        await keeper.stop();
      }
    },
    patient(120_000),
  );
});
