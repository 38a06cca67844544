import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxy } from '../../src/proxy/server.js';
import { groupStats } from '../../src/rollout/stats.js';
import { forgedSessionKey, SessionKeys } from '../../src/proxy/session-keys.js';
import { openDb } from '../../src/store/db.js';
import { openStore } from '../../src/store/open.js';
import type { Store } from '../../src/store/store.js';
import { Postgres } from '../../src/store/postgres/client.js';
import { journalPath, mirrorPath } from '../../src/store/postgres/journal.js';
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
import { migratePostgres, PG_MIGRATIONS } from '../../src/store/postgres/schema.js';
import { sharedColumns, SHARED_TABLES } from '../../src/store/postgres/tables.js';
import { workerLedger } from '../../src/rollout/queue/worker.js';
import { createUpstream } from '../../src/upstream/create.js';
import { nodeAgentHarness, POLAR_BIN as BIN, polarCli } from '../support/polar-cli.js';
import { queuedJobs, startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';
import { waitUntil } from '../support/wait.js';
import { holdJournal } from '../support/journal-lock.js';

/**
 * The shared PostgreSQL store and queue, against a real PostgreSQL server started here: the same
 * rows read back from PostgreSQL as the writing machine's journal holds, bit for bit; a capture
 * that goes on while PostgreSQL is down; `db copy` twice; and a queued rollout over three worker
 * processes, one of them killed mid-session.
 */

let server: TestPostgres;
let upstream: ReferenceUpstream;
let dir: string;
const env = (): NodeJS.ProcessEnv => ({ ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: path.join(dir, 'state'), POLAR_QUEUE_SUPERVISE_S: '1' });

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-pg-test-'));
  process.env.POLAR_STATE_DIR = path.join(dir, 'state');
  [server, upstream] = await Promise.all([startTestPostgres(), startReferenceUpstream()]);
}, patient(120_000));

afterAll(async () => {
  await upstream?.close();
  await server?.close();
  delete process.env.POLAR_STATE_DIR;
  removeTree(dir);
});

const polar = (args: string[]) => polarCli(args, { env: env(), timeout: patient(120_000), maxBuffer: 64 * 1024 * 1024 });

/**
 * A capture proxy recording `session`'s calls into `db` (a URL or a file) from the reference
 * upstream, while `use` runs; then closed, a shared store's last rows shipped.
 */
async function withProxy<T>(
  db: string,
  opts: { session: string; sessionKeys?: SessionKeys },
  use: (proxy: { url: string }, store: Store) => Promise<T>,
): Promise<T> {
  const store = await openStore(db);
  const up = await createUpstream('vllm', { baseUrl: upstream.url });
  const proxy = await startProxy({
    store,
    upstream: up,
    servedModel: 'Qwen/Qwen3-8B',
    defaultSession: opts.session,
    ...(opts.sessionKeys ? { sessionKeys: opts.sessionKeys } : {}),
  });
  try {
    return await use(proxy, store);
  } finally {
    await proxy.close(2000);
    await up.close();
    await store.closeAsync();
  }
}

/** Every shared table of a polar SQLite database, less per-machine columns, keyed and sorted. */
function tables(file: string): Record<string, Record<string, unknown>[]> {
  const db = openDb(file, { reconcileOnly: true });
  try {
    const out: Record<string, Record<string, unknown>[]> = {};
    for (const spec of SHARED_TABLES) {
      const cols = sharedColumns(db, spec.name);
      out[spec.name] = db.prepare(`SELECT ${cols.join(', ')} FROM ${spec.name} ORDER BY ${spec.key.join(', ')}`).all() as Record<string, unknown>[];
    }
    return out;
  } finally {
    db.close();
  }
}

describe('shared PostgreSQL store', () => {
  it('has the SQLite schema: every shared column, with binary token arrays', async () => {
    const url = await server.database('schema');
    const pg = new Postgres(url);
    try {
      await migratePostgres(pg);
      await migratePostgres(pg); // twice: a no-op
      const sqlite = openDb(':memory:');
      for (const spec of SHARED_TABLES) {
        const { rows } = await pg.query(`SELECT column_name, data_type FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position`, [
          spec.name,
        ]);
        expect(
          rows.map((r) => r.column_name),
          spec.name,
        ).toEqual(
          [...sharedColumns(sqlite, spec.name), 'origin', '_xid']
            .filter((c, i, a) => a.indexOf(c) === i)
            .sort((a, b) => rows.findIndex((r) => r.column_name === a) - rows.findIndex((r) => r.column_name === b)),
        );
        expect(new Set(rows.map((r) => r.column_name))).toEqual(new Set([...sharedColumns(sqlite, spec.name), 'origin', '_xid']));
      }
      const { rows } = await pg.query(
        `SELECT data_type FROM information_schema.columns WHERE table_name = 'requests' AND column_name IN ('prompt_ids', 'sampled_ids', 'logprobs')`,
      );
      expect(rows.map((r) => r.data_type)).toEqual(['bytea', 'bytea', 'bytea']);
      sqlite.close();
    } finally {
      await pg.close();
    }
  });

  it(
    'reads back exactly what the journal recorded, including calls made while PostgreSQL was down',
    async () => {
      const url = await server.database('capture');
      await withProxy(url, { session: 'pg-session' }, async (proxy) => {
        const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'sk-secret-do-not-store', maxRetries: 0 });
        const ask = async (text: string, stream: boolean) => {
          if (!stream) return (await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: text }] })).choices[0]!.message.content;
          let out = '';
          for await (const c of await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: text }], stream: true }))
            out += c.choices[0]?.delta.content ?? '';
          return out;
        };
        await ask('first, not streamed', false);
        await ask('second, streamed', true);
        await server.stop();
        // The harness sees no difference: calls commit to the journal, PostgreSQL is not on the path.
        expect(await ask('third, while PostgreSQL is down', false)).toBeTruthy();
        expect(await ask('fourth, while PostgreSQL is down, streamed', true)).toBeTruthy();
        await server.start();
      });
      const journal = tables(journalPath(url));
      expect(journal.requests).toHaveLength(4);
      const reader = await openStore(url, { readonly: true });
      const mirrorFile = reader.db.name;
      reader.close();
      const mirrored = tables(mirrorFile);
      // Every row and every column (token blobs, logprob bits, bodies, deltas) as the journal holds it.
      expect(mirrored).toEqual(journal);
      expect(JSON.stringify(mirrored)).not.toContain('sk-secret-do-not-store');
      const pg = new Postgres(url);
      try {
        const { rows } = await pg.query(`SELECT count(*)::int AS n FROM requests WHERE request_headers LIKE '%sk-secret%' OR prompt_ids IS NULL`);
        expect(rows[0]!.n).toBe(0);
      } finally {
        await pg.close();
      }
      // Readers take the URL wherever they take a file.
      const verify = await polar(['verify-faithfulness', '--db', url, '--json']);
      expect(verify.code, verify.stdout + verify.stderr).toBe(0);
      const sessions = JSON.parse((await polar(['sessions', '--db', url, '--json'])).stdout);
      expect(sessions.sessions.find((s: { id: string }) => s.id === 'pg-session')).toMatchObject({ requests: 4, failed: 0 });
    },
    patient(120_000),
  );

  it(
    'shipCommitted: once it resolves, every call committed before it is in PostgreSQL, though another process held the journal meanwhile',
    async () => {
      const url = await server.database('ship-committed');
      const pg = new Postgres(url);
      const inPg = async () => Number((await pg.query(`SELECT count(*) AS n FROM requests WHERE session_id = 'ship-session'`)).rows[0]!.n);
      let release = () => {};
      try {
        await withProxy(url, { session: 'ship-session' }, async (proxy, store) => {
          const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'x', maxRetries: 0 });
          // Another worker on this machine is shipping the same journal: it holds the lock the shipper takes.
          const held = await holdJournal(pg, store);
          release = held.release;
          for (const text of ['one', 'two', 'three']) await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: text }] });
          let resolved = false;
          const shipping = store.shipCommitted!(patient(60_000)).then(() => (resolved = true));
          // It waits for the lock, not returning as if the rows were there (a check that a slow
          // machine can only make weaker, never fail).
          await new Promise((r) => setTimeout(r, 300));
          expect(resolved).toBe(false);
          expect(await inPg()).toBe(0);
          release();
          await held.done;
          await shipping;
          expect(await inPg()).toBe(3);
        });
      } finally {
        release();
        await pg.close();
      }
    },
    patient(120_000),
  );

  it(
    "a worker's ledger ends a sample only once its journal's calls are in PostgreSQL, waiting for another process that holds the journal",
    async () => {
      const url = await server.database('ledger_ships');
      const pg = new Postgres(url);
      let release = () => {};
      try {
        await withProxy(url, { session: 'ledger-session' }, async (proxy, store) => {
          await insertQueuedRollout(
            pg,
            {
              id: 'rol_l',
              createdAt: 1000,
              harness: 'custom',
              upstreamUrl: upstream.url,
              upstreamKind: 'vllm',
              servedModel: null,
              samplesPerTask: 1,
              tasksFile: null,
              accept: null,
              config: { timeoutSec: 60 },
              origin: 'queue:test',
            },
            [{ id: 't', json: '{"id":"t"}' }],
          );
          const ledger = workerLedger(pg, store);
          await ledger.start((await getSample(pg, 'rol_l:t:0'))!, 'ledger-session');
          const held = await holdJournal(pg, store);
          release = held.release;
          await new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'x', maxRetries: 0 }).chat.completions.create({
            model: 'm',
            messages: [{ role: 'user', content: 'the call behind the sample' }],
          });
          const finishing = ledger.finish('rol_l:t:0', { status: 'completed', reward: 1 });
          // Not ended while its call cannot ship (a check a slow machine can only make weaker).
          await new Promise((r) => setTimeout(r, 300));
          expect(await getSampleStatus(pg, 'rol_l:t:0')).not.toBe('completed');
          release();
          await held.done;
          expect(await finishing).toBe(true);
          expect(await getSampleStatus(pg, 'rol_l:t:0')).toBe('completed');
          const { rows } = await pg.query(`SELECT count(*)::int AS n FROM requests WHERE session_id = 'ledger-session'`);
          expect(rows[0]!.n).toBe(1);
        });
      } finally {
        release();
        await pg.close();
      }
    },
    patient(120_000),
  );

  it(
    "a reader's mirror starts again when the database at its URL is another one (dropped and made again)",
    async () => {
      const url = await server.database('remade');
      const sessionsAt = async () => {
        const r = await polar(['sessions', '--db', url, '--json']);
        expect(r.code, r.stderr).toBe(0);
        return (JSON.parse(r.stdout) as { sessions: { id: string }[] }).sessions.map((x) => x.id).sort();
      };
      const record = (session: string) =>
        withProxy(url, { session }, (proxy) =>
          new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'x', maxRetries: 0 }).chat.completions.create({
            model: 'm',
            messages: [{ role: 'user', content: session }],
          }),
        );
      await record('before-drop');
      expect(await sessionsAt()).toEqual(['before-drop']);
      const admin = new Postgres(url.replace(/\/remade$/, '/postgres'));
      try {
        await admin.query('DROP DATABASE remade WITH (FORCE)');
        await admin.query('CREATE DATABASE remade');
      } finally {
        await admin.close();
      }
      // The writer's journal shipped everything before, so only the new call is new.
      await record('after-drop');
      expect(await sessionsAt()).toEqual(['after-drop']);
      // A dump restored on another server keeps the store's id, but its transaction ids went back:
      // the mirror's last pull is past every new row's.
      const mirror = openDb(mirrorPath(url));
      try {
        mirror.prepare(`UPDATE polar_mirror SET value = '999999999' WHERE key = 'xmin'`).run();
      } finally {
        mirror.close();
      }
      await record('after-restore');
      expect(await sessionsAt()).toEqual(['after-drop', 'after-restore']);
    },
    patient(120_000),
  );

  it(
    'a reader whose role may only read reads a store that a writer has not brought to the latest schema',
    async () => {
      const url = await server.database('read_only');
      await withProxy(url, { session: 'read-only-session' }, (proxy) =>
        new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'x', maxRetries: 0 }).chat.completions.create({
          model: 'm',
          messages: [{ role: 'user', content: 'read me' }],
        }),
      );
      const pg = new Postgres(url);
      try {
        // As the previous polar left it: schema 3, no store id; and a role that can only SELECT.
        await pg.query(`DELETE FROM polar_meta WHERE key = 'store_id'`);
        await pg.query(`UPDATE polar_meta SET value = '3' WHERE key = 'schema_version'`);
        await pg.query(`CREATE ROLE polar_reader LOGIN PASSWORD 'reader-pw'`);
        await pg.query(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO polar_reader`);
      } finally {
        await pg.close();
      }
      const reader = url.replace(/\/\/postgres:[^@]*@/, '//polar_reader:reader-pw@');
      const r = await polar(['sessions', '--db', reader, '--json']);
      expect(r.code, r.stderr).toBe(0);
      expect((JSON.parse(r.stdout) as { sessions: { id: string }[] }).sessions.map((x) => x.id)).toEqual(['read-only-session']);
    },
    patient(120_000),
  );

  it(
    'a refused call (a guessed session key) is shipped to the audit table and read back by polar audit, in no session',
    async () => {
      const url = await server.database('audit');
      await withProxy(url, { session: 'pg-default', sessionKeys: SessionKeys.random() }, async (proxy) => {
        const r = await fetch(`${proxy.url}/s/pg-victim/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${forgedSessionKey('pg-victim')}` },
          body: '{}',
        });
        expect(r.status).toBe(401);
      });
      const audit = JSON.parse((await polar(['audit', '--db', url, '--json'])).stdout) as { refused: unknown[] };
      expect(audit.refused).toMatchObject([{ reason: 'bad-secret', claimedSession: 'pg-victim', requestHeaders: { authorization: '[redacted]' } }]);
      const sessions = JSON.parse((await polar(['sessions', '--db', url, '--json'])).stdout) as { sessions: { id: string }[] };
      expect(sessions.sessions.map((s) => s.id)).not.toContain('pg-victim');
    },
    patient(120_000),
  );

  it(
    'db copy moves a local database into the shared store, and a second copy changes nothing',
    async () => {
      const url = await server.database('copy');
      const file = path.join(dir, 'local.db');
      await withProxy(file, { session: 'local-session' }, async (proxy) => {
        const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'x', maxRetries: 0 });
        for (const text of ['one', 'two', 'three']) await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: text }] });
      });
      const first = await polar(['db', 'copy', '--from', file, '--to', url, '--json']);
      expect(first.code, first.stderr).toBe(0);
      expect(JSON.parse(first.stdout).copied).toMatchObject({ sessions: 1, requests: 3, request_bodies: 3 });
      const reader = await openStore(url, { readonly: true });
      const mirrorFile = reader.db.name;
      reader.close();
      expect(tables(mirrorFile)).toEqual(tables(file));
      const again = await polar(['db', 'copy', '--from', file, '--to', url, '--json']);
      expect(again.code).toBe(0);
      const pg = new Postgres(url);
      try {
        expect((await pg.query(`SELECT count(*)::int AS n FROM requests`)).rows[0]!.n).toBe(3);
      } finally {
        await pg.close();
      }
      const migrate = await polar(['db', 'migrate', '--db', url, '--json']);
      expect(JSON.parse(migrate.stdout)).toMatchObject({ ok: true, schemaVersion: PG_MIGRATIONS.length });
    },
    patient(120_000),
  );
});

/** Makes `calls` model calls through polar, sleeps if told, then writes its answer. */
const AGENT = `
import fs from 'node:fs';
const prompt = process.argv[2] ?? '';
const calls = Number(/calls=(\\d+)/.exec(prompt)?.[1] ?? 1);
for (let i = 0; i < calls; i++) {
  const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
    body: JSON.stringify({ model: 'any', messages: [{ role: 'user', content: prompt + ' #' + i }] }),
  });
  if (!res.ok) process.exit(3);
  await res.json();
  if (i === 0 && prompt.includes('sleep:')) await new Promise((r) => setTimeout(r, Number(/sleep:([\\d.]+)/.exec(prompt)[1]) * 1000));
}
const answer = /answer:([\\d.]+)/.exec(prompt)?.[1];
if (answer) fs.writeFileSync('answer.txt', answer + '\\n');
`;

describe('the same commands, unchanged, on a shared store', () => {
  it(
    'a local rollout with --db postgres://… lands in PostgreSQL; rollouts, export and reconstruct read it by URL as from a file',
    async () => {
      const url = await server.database('local_rollout');
      const agent = path.join(dir, 'agent-local.mjs');
      fs.writeFileSync(agent, AGENT);
      const tasks = path.join(dir, 'local-tasks.jsonl');
      fs.writeFileSync(
        tasks,
        ['1', '0.5']
          .map((r, i) =>
            JSON.stringify({
              id: `t${i}`,
              prompt: `calls=2 answer:${r}`,
              workspace: { empty: true },
              evaluator: { type: 'command', command: 'cat answer.txt' },
            }),
          )
          .join('\n'),
      );
      const common = ['--tasks', tasks, ...nodeAgentHarness(agent), '--upstream', upstream.url, '--samples', '2', '--sandbox', 'none', '--json'];
      const file = path.join(dir, 'local-rollout.db');
      const onFile = await polar(['rollout', ...common, '--db', file]);
      const onPg = await polar(['rollout', ...common, '--db', url]);
      expect(onPg.code, onPg.stderr).toBe(0);
      const [a, b] = [JSON.parse(onFile.stdout), JSON.parse(onPg.stdout)];
      // The same outcomes, rewards and group statistics, whichever store.
      for (const key of ['status', 'tasks', 'samplesPerTask', 'outcomes', 'meanReward']) expect(b[key], key).toEqual(a[key]);
      expect(b.groups.map((g: { rewards: number[]; mean: number }) => [g.rewards, g.mean])).toEqual(
        a.groups.map((g: { rewards: number[]; mean: number }) => [g.rewards, g.mean]),
      );
      const listed = JSON.parse((await polar(['rollouts', '--db', url, '--json'])).stdout);
      expect(listed.rollouts.map((r: { rolloutId: string }) => r.rolloutId)).toContain(b.rolloutId);
      const out = path.join(dir, 'pg-export.jsonl');
      const exported = await polar(['export', '--db', url, '--rollout', b.rolloutId, '--out', out]);
      expect(exported.code, exported.stderr).toBe(0);
      const fileOut = path.join(dir, 'file-export.jsonl');
      expect((await polar(['export', '--db', file, '--rollout', a.rolloutId, '--out', fileOut])).code).toBe(0);
      const rewards = (f: string) =>
        fs
          .readFileSync(f, 'utf8')
          .trim()
          .split('\n')
          .map((l) => (JSON.parse(l) as { reward: number }).reward)
          .sort();
      expect(rewards(out).length).toBeGreaterThanOrEqual(4);
      expect(new Set(rewards(out))).toEqual(new Set([0.5, 1]));
      expect(rewards(out)).toEqual(rewards(fileOut));
      const reconstructed = await polar(['reconstruct', '--db', url, '--out', path.join(dir, 'pg-traces.jsonl')]);
      expect(reconstructed.code, reconstructed.stderr).toBe(0);
    },
    patient(180_000),
  );
});

describe('the queue in the shared store', () => {
  let pg: Postgres;
  beforeAll(async () => {
    pg = new Postgres(await server.database('queue_store'));
    await migratePostgres(pg);
  });
  afterAll(async () => {
    await pg?.close();
  });

  // The queue's statements (store/postgres/queue.ts): typed rows read back, an attempt superseded
  // by a retry can no longer end its sample, and the group's statistics and the rollout's end are
  // written by whichever finish ends them.
  it(
    'moves samples by attempt, ends each once, and writes the group and the rollout end with the last one',
    async () => {
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
    },
    patient(60_000),
  );
  it(
    "the rollout ends when its last samples end at once in different groups (two workers, two tasks' last samples)",
    async () => {
      const ids = Array.from({ length: 12 }, (_, i) => `rol_race${i}`);
      for (const id of ids) {
        await insertQueuedRollout(
          pg,
          {
            id,
            createdAt: 1000,
            harness: 'custom',
            upstreamUrl: 'http://gpu:8000',
            upstreamKind: 'vllm',
            servedModel: null,
            samplesPerTask: 1,
            tasksFile: null,
            accept: null,
            config: { timeoutSec: 60 },
            origin: 'queue:test',
          },
          [
            { id: 'a', json: '{"id":"a"}' },
            { id: 'b', json: '{"id":"b"}' },
          ],
        );
      }
      // Each pair ends on two connections at once: each finish sees the other's sample unfinished
      // in its own snapshot unless the rollout's end is decided one finish at a time.
      await Promise.all(
        ids.map(async (id) => {
          const [a, b] = [await startAttempt(pg, `${id}:a:0`, `${id}-a`, 'host/1', 2000), await startAttempt(pg, `${id}:b:0`, `${id}-b`, 'host/2', 2000)];
          await Promise.all([
            finishAttempt(pg, `${id}:a:0`, a!, { status: 'completed', reward: 1 }, groupStats),
            finishAttempt(pg, `${id}:b:0`, b!, { status: 'completed', reward: 0 }, groupStats),
          ]);
        }),
      );
      const statuses = await Promise.all(ids.map(async (id) => (await getRollout(pg, id))!.status));
      expect(statuses).toEqual(ids.map(() => 'completed'));
    },
    patient(60_000),
  );
});

describe('queued rollout over three workers', () => {
  const workers: ChildProcess[] = [];
  afterAll(() => {
    for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
  });

  it(
    'every sample ends exactly once with its reward, though one worker is SIGKILLed mid-session; nothing it captured is lost',
    async () => {
      const url = await server.database('queue');
      const agent = path.join(dir, 'agent.mjs');
      fs.writeFileSync(agent, AGENT);
      const tasks = path.join(dir, 'queue-tasks.jsonl');
      const rewards: Record<string, number> = { a: 1, b: 0.5, c: 0, d: 0.25 };
      fs.writeFileSync(
        tasks,
        Object.entries(rewards)
          .map(([id, r]) =>
            JSON.stringify({
              id,
              prompt: `calls=2 sleep:1.5 answer:${r}`,
              workspace: { empty: true },
              evaluator: { type: 'command', command: 'cat answer.txt' },
            }),
          )
          .join('\n'),
      );
      // The rollout first, so the workers find its jobs; --wait in the background.
      const waiting = polar([
        'rollout',
        '--queue',
        url,
        '--tasks',
        tasks,
        ...nodeAgentHarness(agent),
        '--upstream',
        upstream.url,
        '--samples',
        '3',
        '--heartbeat',
        '10',
        '--wait',
        '--json',
      ]);
      const startWorker = (name: string) => {
        const w = spawn(
          process.execPath,
          [
            BIN,
            'worker',
            '--queue',
            url,
            ...nodeAgentHarness(agent),
            '--upstream',
            upstream.url,
            '--concurrency',
            '2',
            '--sandbox',
            'none',
            '--idle-exit',
            '15',
            '--json',
            '--out',
            path.join(dir, `w-${name}`),
          ],
          { env: env(), stdio: ['ignore', 'pipe', 'pipe'] },
        );
        workers.push(w);
        let err = '';
        w.stderr!.on('data', (d: Buffer) => (err += d.toString()));
        w.once('exit', () => stderrs.push(err));
        return w;
      };
      const stderrs: string[] = [];
      // Workers idle out after 15 s with nothing to take: they start once the samples are queued.
      await queuedJobs(url, 'custom', 12);
      const victim = startWorker('victim');
      // Kill the first worker as soon as it holds a session with a call captured.
      const pg = new Postgres(url);
      let killedSession: string | null = null;
      try {
        await waitUntil(
          'a call captured by the first worker',
          async () => {
            const { rows } = await pg
              .query(`SELECT session_id FROM requests WHERE status = 'ok' LIMIT 1`)
              .catch(() => ({ rows: [] as Record<string, unknown>[] }));
            if (rows[0]) killedSession = String(rows[0].session_id);
            return killedSession !== null;
          },
          { stopIf: () => (victim.exitCode !== null ? `the worker exited (${victim.exitCode}) first` : null), everyMs: 100 },
        );
        victim.kill('SIGKILL');
        startWorker('one');
        startWorker('two');
        startWorker('three');
        const done = await waiting;
        expect(done.code, done.stderr).toBe(0);
        const summary = JSON.parse(done.stdout);
        expect(summary).toMatchObject({ status: 'completed', outcomes: { completed: 12, error: 0, interrupted: 0 } });
        const samples = (await pg.query(`SELECT id, task_id, status, reward, attempt, session_id, worker FROM samples ORDER BY id`)).rows;
        expect(samples).toHaveLength(12);
        for (const s of samples) expect(s.reward, String(s.id)).toBe(rewards[String(s.task_id)]);
        // The killed worker's sample ran again elsewhere, as a new attempt in a new session.
        const retried = samples.filter((s) => Number(s.attempt) > 1);
        expect(retried.length).toBeGreaterThan(0);
        expect(new Set(samples.map((s) => s.session_id)).size).toBe(12);
        expect(new Set(samples.map((s) => s.worker)).size).toBeGreaterThan(1);
        const groups = (await pg.query(`SELECT task_id, samples, mean FROM groups ORDER BY task_id`)).rows;
        expect(groups.map((g) => [g.task_id, g.samples, g.mean])).toEqual(Object.entries(rewards).map(([id, r]) => [id, 3, r]));
        // Nothing the killed worker captured is lost: its session's calls are in the shared store
        // (shipped by the workers that share its machine's journal), its session marked interrupted.
        await waitUntil(
          "the killed worker's session to be marked interrupted",
          async () => (await pg.query(`SELECT status FROM sessions WHERE id = $1`, [killedSession])).rows[0]?.status === 'interrupted',
          { everyMs: 200 },
        ).catch(() => undefined); // the expect below says what it is instead
        expect((await pg.query(`SELECT status FROM sessions WHERE id = $1`, [killedSession])).rows[0]).toMatchObject({ status: 'interrupted' });
        expect(
          Number((await pg.query(`SELECT count(*) AS n FROM requests WHERE session_id = $1 AND status = 'ok'`, [killedSession])).rows[0]!.n),
        ).toBeGreaterThanOrEqual(1);
        // Every completed session's calls are all there, token for token as the server sampled them.
        const calls = Number(
          (
            await pg.query(
              `SELECT count(*) AS n FROM requests r JOIN samples s ON s.session_id = r.session_id WHERE s.status = 'completed' AND r.status = 'ok'`,
            )
          ).rows[0]!.n,
        );
        expect(calls).toBe(24);
        const status = JSON.parse((await polar(['rollout', 'status', summary.rolloutId, '--db', url, '--json'])).stdout);
        expect(status).toMatchObject({ status: 'completed', samples: 12, ended: 12 });
        expect(status.workers.length).toBeGreaterThan(1);
        // Each worker polled the queue for 15 s after its last sample (--idle-exit): a listener per
        // poll on the stop signal reached Node's limit of 10 and printed MaxListenersExceededWarning.
        for (const w of workers) if (w.exitCode === null && w.signalCode === null) await new Promise((r) => w.once('exit', r));
        await new Promise((r) => setImmediate(r));
        expect(stderrs.length).toBe(4);
        for (const text of stderrs) expect(text).not.toMatch(/MaxListenersExceededWarning|Warning:/);
      } finally {
        await pg.close();
      }
    },
    patient(240_000),
  );
});

// Issue 40: a worker whose inference server nobody answers at took samples and let its harness retry
// 502s; it now stops before it takes any, with the cause (port 9 refuses connections here).
describe('a worker whose upstream cannot be reached', () => {
  it(
    'stops before taking a sample, with the cause, its model named or not',
    async () => {
      const url = await server.database('unreachable');
      for (const model of [[], ['--model', 'm']]) {
        const r = await polarCli(
          [
            'worker',
            '--queue',
            url,
            '--harness',
            'custom',
            '--command',
            'true',
            '--upstream',
            'http://127.0.0.1:9',
            ...model,
            '--sandbox',
            'none',
            '--idle-exit',
            '5',
            '--out',
            path.join(dir, 'w-unreachable'),
          ],
          { env: env(), timeout: patient(60_000) },
        );
        expect(r.code, r.stderr).toBe(1);
        expect(r.stderr).toMatch(/error\[POLAR_UPSTREAM_CONNECT\]: cannot reach http:\/\/127\.0\.0\.1:9 \(ECONNREFUSED\)/);
      }
    },
    patient(120_000),
  );
});
