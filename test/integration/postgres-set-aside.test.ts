import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxy } from '../../src/proxy/server.js';
import { openDb } from '../../src/store/db.js';
import { openStore } from '../../src/store/open.js';
import type { Store } from '../../src/store/store.js';
import { Postgres } from '../../src/store/postgres/client.js';
import { journalPath } from '../../src/store/postgres/journal.js';
import { migratePostgres } from '../../src/store/postgres/schema.js';
import { isRowRefusal, Shipper } from '../../src/store/postgres/ship.js';
import { createUpstream } from '../../src/upstream/create.js';
import { polarCli } from '../support/polar-cli.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';
import { waitUntil } from '../support/wait.js';
import { holdJournal } from '../support/journal-lock.js';

/**
 * The shipper against a real PostgreSQL: a row the server refuses for a reason of its own is set
 * aside with the error, and the rows behind it arrive; `polar db set-aside` shows it and ships it
 * again once the cause is gone; an idle shipper opens no transaction.
 */

let server: TestPostgres;
let upstream: ReferenceUpstream;
let dir: string;
const env = (): NodeJS.ProcessEnv => ({ ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: path.join(dir, 'state') });
const polar = (args: string[]) => polarCli(args, { env: env(), timeout: patient(120_000) });

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-pg-aside-'));
  process.env.POLAR_STATE_DIR = path.join(dir, 'state');
  [server, upstream] = await Promise.all([startTestPostgres(), startReferenceUpstream()]);
}, patient(120_000));

afterAll(async () => {
  await upstream?.close();
  await server?.close();
  delete process.env.POLAR_STATE_DIR;
  removeTree(dir);
});

/** A capture proxy recording into the shared store at `url` while `use` runs; closed after, its notices kept. */
async function withProxy<T>(url: string, session: string, notices: string[], use: (client: OpenAI, store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(url, { onNotice: (line) => notices.push(line) });
  const up = await createUpstream('vllm', { baseUrl: upstream.url });
  const proxy = await startProxy({ store, upstream: up, servedModel: 'Qwen/Qwen3-8B', defaultSession: session });
  try {
    return await use(new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'x', maxRetries: 0 }), store);
  } finally {
    await proxy.close(2000);
    await up.close();
    await store.closeAsync();
  }
}

/** A pool whose transactions are counted: what the shipper costs PostgreSQL. */
function countingPostgres(url: string): { pg: Postgres; transactions: () => number } {
  const pg = new Postgres(url);
  let n = 0;
  const real = pg.transaction.bind(pg);
  pg.transaction = (fn) => {
    n++;
    return real(fn);
  };
  return { pg, transactions: () => n };
}

describe('rows PostgreSQL refuses', () => {
  it('tells a refused row from a refusing server', () => {
    expect(isRowRefusal(Object.assign(new Error('check'), { code: '23514' }))).toBe(true);
    expect(isRowRefusal(Object.assign(new Error('no column'), { code: '42703' }))).toBe(true);
    expect(isRowRefusal(Object.assign(new Error('out of range'), { code: '22003' }))).toBe(true);
    // A role that may not write, a read-only standby, a full disk, a serialization failure: every row alike.
    for (const code of ['42501', '25006', '53100', '40001', '57014']) expect(isRowRefusal(Object.assign(new Error(code), { code }))).toBe(false);
    expect(isRowRefusal(Object.assign(new Error('gone'), { code: 'ECONNRESET' }))).toBe(false);
  });

  it(
    'a refused row is set aside with its error, the rows behind it in the same batch arrive, and polar db set-aside shows it and ships it again once fixed',
    async () => {
      const url = await server.database('set_aside');
      const pg = new Postgres(url);
      const inPg = async () => (await pg.query(`SELECT seq FROM requests WHERE session_id = 'aside' ORDER BY seq`)).rows.map((r) => Number(r.seq)) as number[];
      const notices: string[] = [];
      let release = () => {};
      try {
        await migratePostgres(pg);
        // A constraint the journal's rows do not know about: the session's second call breaks it.
        await pg.query(`ALTER TABLE requests ADD CONSTRAINT no_second_call CHECK (seq <> 2)`);
        await withProxy(url, 'aside', notices, async (client, store) => {
          // All three calls go in one batch: the shipper must find the bad row inside it.
          const held = await holdJournal(pg, store);
          release = held.release;
          for (const text of ['one', 'two', 'three']) await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: text }] });
          release();
          await held.done;
          // Committed rows reach PostgreSQL (shipCommitted does not fail as "unreachable").
          await store.shipCommitted!(patient(60_000));
          expect(await inPg()).toEqual([1, 3]);
        });
        const bodies = await pg.query(`SELECT count(*)::int AS n FROM request_bodies b JOIN requests r ON r.id = b.request_id WHERE r.session_id = 'aside'`);
        expect(bodies.rows[0]!.n).toBe(2);
        // Closing said how many are set aside and how to see them.
        expect(notices.some((l) => /refused a row of requests .*23514/.test(l))).toBe(true);
        expect(notices.some((l) => /1 row PostgreSQL refused is set aside in .*polar db set-aside --db/.test(l))).toBe(true);
        expect(notices.join('\n')).not.toMatch(/unreachable|still waiting/);

        const shown = await polar(['db', 'set-aside', '--db', url, '--json']);
        expect(shown.code, shown.stderr).toBe(0);
        const out = JSON.parse(shown.stdout) as {
          count: number;
          journal: string;
          rows: { tbl: string; key: string; code: string; message: string; at: string }[];
        };
        const second = (await polar(['db', 'set-aside', '--db', url])).stdout;
        expect(out.journal).toBe(journalPath(url));
        expect(out.count).toBe(1);
        expect(out.rows[0]).toMatchObject({ tbl: 'requests', code: '23514' });
        expect(out.rows[0]!.message).toContain('no_second_call');
        expect(Date.parse(out.rows[0]!.at)).toBeGreaterThan(0);
        expect(second).toContain('1 row PostgreSQL refused is set aside');
        expect(second).toContain(out.rows[0]!.key);
        expect(second).toContain('--retry');
        const migrate = await polar(['db', 'migrate', '--db', url]);
        expect(migrate.stdout).toMatch(/1 row of this machine's journal PostgreSQL refused: polar db set-aside --db/);
        expect(JSON.parse((await polar(['db', 'migrate', '--db', url, '--json'])).stdout)).toMatchObject({ setAside: 1 });

        // Retried while the cause is still there: set aside again, nothing lost.
        const early = JSON.parse((await polar(['db', 'set-aside', '--db', url, '--retry', '--json'])).stdout) as { retried: number; count: number };
        expect(early).toMatchObject({ retried: 1, count: 1 });
        expect(await inPg()).toEqual([1, 3]);

        await pg.query(`ALTER TABLE requests DROP CONSTRAINT no_second_call`);
        const retried = await polar(['db', 'set-aside', '--db', url, '--retry', '--json']);
        expect(retried.code, retried.stderr).toBe(0);
        expect(JSON.parse(retried.stdout)).toMatchObject({ retried: 1, count: 0 });
        expect(await inPg()).toEqual([1, 2, 3]);
        // The row as the journal holds it now: the call's end, not the row it had when refused.
        const row = (await pg.query(`SELECT status, sampled_ids IS NOT NULL AS has_ids FROM requests WHERE session_id = 'aside' AND seq = 2`)).rows[0]!;
        expect(row).toMatchObject({ status: 'ok' });
        const none = await polar(['db', 'set-aside', '--db', url]);
        expect(none.stdout).toContain('no rows set aside');
      } finally {
        release();
        await pg.close();
      }
    },
    patient(180_000),
  );

  it(
    'a column PostgreSQL lacks sets aside every row of that table, and every other table ships',
    async () => {
      const url = await server.database('dropped_column');
      const pg = new Postgres(url);
      const notices: string[] = [];
      try {
        await migratePostgres(pg);
        await pg.query(`ALTER TABLE request_bodies DROP COLUMN upstream_request`);
        await withProxy(url, 'dropped', notices, async (client) => {
          for (const text of ['one', 'two']) await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: text }] });
        });
        const n = async (sql: string) => Number((await pg.query(sql)).rows[0]!.n);
        expect(await n(`SELECT count(*) AS n FROM requests WHERE session_id = 'dropped' AND status = 'ok'`)).toBe(2);
        expect(await n(`SELECT count(*) AS n FROM request_bodies`)).toBe(0);
        const out = JSON.parse((await polar(['db', 'set-aside', '--db', url, '--json'])).stdout) as { count: number; rows: { tbl: string; code: string }[] };
        expect(out.count).toBe(2);
        expect(out.rows.map((r) => [r.tbl, r.code])).toEqual([
          ['request_bodies', '42703'],
          ['request_bodies', '42703'],
        ]);
        expect(notices.some((l) => /2 rows PostgreSQL refused are set aside/.test(l))).toBe(true);
        // The column is back and one of the rows is written again: it ships, and is set aside no more.
        await pg.query(`ALTER TABLE request_bodies ADD COLUMN upstream_request TEXT`);
        const store = await openStore(url);
        try {
          store.db
            .prepare(`UPDATE request_bodies SET upstream_request = upstream_request WHERE request_id = (SELECT MIN(request_id) FROM request_bodies)`)
            .run();
          await store.shipCommitted!(patient(60_000));
        } finally {
          await store.closeAsync();
        }
        expect(await n(`SELECT count(*) AS n FROM request_bodies`)).toBe(1);
        expect(JSON.parse((await polar(['db', 'set-aside', '--db', url, '--json'])).stdout)).toMatchObject({ count: 1 });
      } finally {
        await pg.close();
      }
    },
    patient(180_000),
  );

  it(
    'a server that refuses every row (a role that may not write) sets nothing aside: the rows wait and say why',
    async () => {
      const url = await server.database('no_write');
      const admin = new Postgres(url);
      const notices: string[] = [];
      try {
        await migratePostgres(admin);
        await admin.query(`CREATE ROLE polar_ro LOGIN PASSWORD 'ro-pw'`);
        await admin.query(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO polar_ro`);
        const ro = url.replace(/\/\/postgres:[^@]*@/, '//polar_ro:ro-pw@');
        process.env.POLAR_SHIP_TIMEOUT_MS = '1500';
        let failure: unknown = null;
        await withProxy(ro, 'ro', notices, async (client, store) => {
          await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'one' }] });
          failure = await store.shipCommitted!(1500).catch((e: unknown) => e);
        });
        expect(failure).toMatchObject({ code: 'POLAR_STORE_WRITE' });
        expect(String((failure as Error).message)).toContain('permission denied');
        expect(notices.some((l) => /refuses this journal's rows: permission denied/.test(l))).toBe(true);
        const out = JSON.parse((await polar(['db', 'set-aside', '--db', ro, '--json'])).stdout) as { count: number };
        expect(out.count).toBe(0);
      } finally {
        delete process.env.POLAR_SHIP_TIMEOUT_MS;
        await admin.close();
      }
    },
    patient(180_000),
  );
});

describe('an idle shipper', () => {
  it(
    'opens no PostgreSQL transaction while the outbox is empty, and one pass when a row is written',
    async () => {
      const url = await server.database('idle');
      await withProxy(url, 'idle', [], async (client) => {
        await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'one' }] });
      });
      const file = journalPath(url);
      const journal = openDb(file, { reconcileOnly: true });
      const origin = journal.prepare(`SELECT value FROM polar_journal WHERE key = 'origin'`).pluck().get() as string;
      const { pg, transactions } = countingPostgres(url);
      const shipper = new Shipper(file, pg, origin, { intervalMs: 5 });
      // Passes counted through the instance, as the shipper's own timer calls it.
      let passes = 0;
      const pass = shipper.shipAll.bind(shipper);
      shipper.shipAll = () => {
        passes++;
        return pass();
      };
      try {
        expect(shipper.pending()).toBe(0);
        shipper.start();
        await waitUntil('50 shipping passes', () => passes >= 50, { everyMs: 10 });
        expect(transactions()).toBe(0);
        // A row written: the next pass ships it, in one transaction, then idles again.
        journal.prepare(`UPDATE sessions SET metadata = '{"renamed":true}' WHERE id = 'idle'`).run();
        await waitUntil(
          'the renamed session in PostgreSQL',
          async () => (await pg.query(`SELECT metadata FROM sessions WHERE id = 'idle'`)).rows[0]?.metadata === '{"renamed":true}',
          {
            everyMs: 20,
          },
        );
        const after = transactions();
        expect(after).toBeGreaterThanOrEqual(1);
        const from = passes;
        await waitUntil('50 more passes', () => passes >= from + 50, { everyMs: 10 });
        expect(transactions()).toBe(after);
      } finally {
        await shipper.stop();
        journal.close();
        await pg.close();
      }
    },
    patient(120_000),
  );
});
