import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxy } from '../../src/proxy/server.js';
import { openDb } from '../../src/store/db.js';
import { openStore } from '../../src/store/open.js';
import { Postgres, type PgQueryable } from '../../src/store/postgres/client.js';
import { mirrorPath } from '../../src/store/postgres/journal.js';
import { pullScoped } from '../../src/store/postgres/scoped.js';
import { createUpstream } from '../../src/upstream/create.js';
import { nodeAgentHarness, polarCli } from '../support/polar-cli.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Readers that name what they read (`export --rollout R`, `export --session S`, `rollout status R`,
 * `rollout show R`) pull only those rows from PostgreSQL (store/postgres/scoped.ts), not the whole
 * store into the mirror: two rollouts in one store, each read alone, with what PostgreSQL returned
 * counted row by row.
 */

let server: TestPostgres;
let upstream: ReferenceUpstream;
let dir: string;
let url: string;
const state = () => path.join(dir, 'state');
const env = (): NodeJS.ProcessEnv => ({ ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: state() });
const polar = (args: string[]) => polarCli(args, { env: env(), timeout: patient(120_000), maxBuffer: 64 * 1024 * 1024 });

/** Makes `calls` model calls through polar, then writes its answer. */
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
}
fs.writeFileSync('answer.txt', /answer:([\\d.]+)/.exec(prompt)[1] + '\\n');
`;

/** A local rollout recorded into the shared store: 2 tasks × 2 samples, `calls` calls each. */
async function rollout(name: string, answers: [string, string], calls = 2): Promise<string> {
  const agent = path.join(dir, 'agent.mjs');
  fs.writeFileSync(agent, AGENT);
  const tasks = path.join(dir, `${name}.jsonl`);
  fs.writeFileSync(
    tasks,
    answers
      .map((r, i) =>
        JSON.stringify({
          id: `${name}${i}`,
          prompt: `calls=${calls} answer:${r}`,
          workspace: { empty: true },
          evaluator: { type: 'command', command: 'cat answer.txt' },
        }),
      )
      .join('\n'),
  );
  const r = await polar([
    'rollout',
    '--tasks',
    tasks,
    ...nodeAgentHarness(agent),
    '--upstream',
    upstream.url,
    '--samples',
    '2',
    '--sandbox',
    'none',
    '--db',
    url,
    '--json',
  ]);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { rolloutId: string }).rolloutId;
}

/** What PostgreSQL holds of a rollout: its sessions' and calls' ids. */
async function rowsOf(pg: Postgres, rolloutId: string): Promise<{ sessions: string[]; calls: string[] }> {
  const sessions = (await pg.query(`SELECT session_id FROM samples WHERE rollout_id = $1 ORDER BY session_id`, [rolloutId])).rows.map((r) =>
    String(r.session_id),
  );
  const calls = (await pg.query(`SELECT id FROM requests WHERE session_id = ANY($1::text[]) ORDER BY id`, [sessions])).rows.map((r) => String(r.id));
  return { sessions, calls };
}

interface TableReads {
  seq_scan: number;
  seq_tup_read: number;
  idx_tup_fetch: number;
}

/**
 * The pool, with every row PostgreSQL returns to a transaction's statements kept, and what the
 * transaction read of each table (pg_stat_xact_user_tables: rows read by sequential scans and
 * fetched through indexes, this transaction's alone). Sequential scans are priced out, as a
 * large store prices them: on tables of a few rows PostgreSQL would scan them whole whatever the
 * statement, and the test could not tell a lookup from a scan.
 */
function counting(pg: Postgres): { pg: Postgres; returned: Record<string, unknown>[][]; reads: Map<string, TableReads> } {
  const returned: Record<string, unknown>[][] = [];
  const reads = new Map<string, TableReads>();
  const wrapped = Object.create(pg) as Postgres;
  wrapped.transaction = <T>(fn: (tx: PgQueryable) => Promise<T>) =>
    pg.transaction(async (tx) => {
      // A backend's counts reach these views in batches, so what earlier transactions on this
      // connection read may still be counted in them: what this one read is the difference.
      const stats = async () =>
        new Map(
          (await tx.query(`SELECT relname, seq_scan, seq_tup_read, idx_tup_fetch FROM pg_stat_xact_user_tables`)).rows.map((r) => [
            String(r.relname),
            { seq_scan: Number(r.seq_scan), seq_tup_read: Number(r.seq_tup_read), idx_tup_fetch: Number(r.idx_tup_fetch) },
          ]),
        );
      let before = new Map<string, TableReads>();
      const out = await fn({
        query: async (sql, values) => {
          const r = await tx.query(sql, values);
          // After SET TRANSACTION, which must come first.
          if (sql.startsWith('SET TRANSACTION')) {
            await tx.query('SET LOCAL enable_seqscan = off');
            before = await stats();
          }
          returned.push(r.rows);
          return r;
        },
      });
      for (const [table, after] of await stats()) {
        const was = before.get(table) ?? { seq_scan: 0, seq_tup_read: 0, idx_tup_fetch: 0 };
        reads.set(table, {
          seq_scan: after.seq_scan - was.seq_scan,
          seq_tup_read: after.seq_tup_read - was.seq_tup_read,
          idx_tup_fetch: after.idx_tup_fetch - was.idx_tup_fetch,
        });
      }
      return out;
    });
  return { pg: wrapped, returned, reads };
}

/** The ids a polar SQLite file holds in one table. */
function idsIn(file: string, table: string, column = 'id'): string[] {
  const db = openDb(file, { readonly: true });
  try {
    return (db.prepare(`SELECT ${column} FROM ${table} ORDER BY ${column}`).pluck().all() as string[]).map(String);
  } finally {
    db.close();
  }
}

const lines = (file: string) =>
  fs
    .readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-pg-scoped-'));
  process.env.POLAR_STATE_DIR = state();
  [server, upstream] = await Promise.all([startTestPostgres(), startReferenceUpstream()]);
  url = await server.database('scoped');
}, patient(120_000));

afterAll(async () => {
  await upstream?.close();
  await server?.close();
  delete process.env.POLAR_STATE_DIR;
  removeTree(dir);
});

describe('a reader that names what it reads', () => {
  it(
    "export --rollout A reads only A's rows, and writes what the whole-store mirror's export writes for A",
    async () => {
      const a = await rollout('a', ['1', '0.5']);
      const b = await rollout('b', ['0', '1'], 6);
      const pg = new Postgres(url);
      try {
        const [ofA, ofB] = [await rowsOf(pg, a), await rowsOf(pg, b)];
        expect(ofA.sessions).toHaveLength(4);
        expect(ofA.calls).toHaveLength(8);

        // What PostgreSQL returned to a scoped read of A: A's rows, and nothing of B's.
        const file = path.join(dir, 'scoped-a.db');
        const { pg: counted, returned, reads } = counting(pg);
        const copied = await pullScoped(counted, file, { rollouts: [a] });
        expect(copied).toMatchObject({ rollouts: 1, rollout_tasks: 2, samples: 4, groups: 2, sessions: 4, requests: 8, request_bodies: 8, audit: 0 });
        const text = JSON.stringify(returned.flat());
        for (const id of [b, ...ofB.sessions, ...ofB.calls]) expect(text).not.toContain(id);
        // And what it read: no table scanned, and no more rows fetched than A's (each looked up at
        // most twice: its key by the index on what names it, then the row by key). B has 24 calls.
        for (const [table, read] of reads) expect({ table, seq_scan: read.seq_scan }).toEqual({ table, seq_scan: 0 });
        expect(reads.get('requests')!.idx_tup_fetch).toBeLessThanOrEqual(2 * ofA.calls.length);
        expect(reads.get('request_bodies')!.idx_tup_fetch).toBeLessThanOrEqual(2 * ofA.calls.length);
        expect(reads.get('samples')!.idx_tup_fetch).toBeLessThanOrEqual(2 * ofA.sessions.length);
        expect(ofB.calls.length).toBeGreaterThan(2 * ofA.calls.length);
        expect(idsIn(file, 'sessions')).toEqual(ofA.sessions);
        expect(idsIn(file, 'requests')).toEqual(ofA.calls);
        expect(idsIn(file, 'rollouts')).toEqual([a]);

        // The CLI: --rollout A from its own scoped read, the same lines as the mirror's export of everything has for A.
        const scopedOut = path.join(dir, 'a-scoped.jsonl');
        const scoped = await polar(['export', '--db', url, '--rollout', a, '--out', scopedOut]);
        expect(scoped.code, scoped.stderr).toBe(0);
        // A scoped read never touches the mirror (it is not even made), and leaves no file behind.
        expect(fs.existsSync(mirrorPath(url, env()))).toBe(false);
        expect(fs.readdirSync(path.join(state(), 'scoped'))).toEqual([]);
        const allOut = path.join(dir, 'all.jsonl');
        const all = await polar(['export', '--db', url, '--out', allOut]);
        expect(all.code, all.stderr).toBe(0);
        expect(fs.existsSync(mirrorPath(url, env()))).toBe(true);
        const fromMirror = lines(allOut).filter((l) => l.rollout_id === a);
        // Two traces a session: its two calls' prompts do not extend each other.
        expect(fromMirror).toHaveLength(8);
        expect(lines(scopedOut)).toEqual(fromMirror);
        expect(lines(allOut).filter((l) => l.rollout_id === b)).toHaveLength(24);

        // --session: that session only, with its sample's reward and group.
        const one = path.join(dir, 'one.jsonl');
        const bySession = await polar(['export', '--db', url, '--session', ofA.sessions[0]!, '--out', one]);
        expect(bySession.code, bySession.stderr).toBe(0);
        expect(lines(one)).toEqual(fromMirror.filter((l) => l.session_id === ofA.sessions[0]));

        // rollout status and rollout show read A alone, as from the mirror.
        const status = await polar(['rollout', 'status', a, '--db', url, '--json']);
        expect(status.code, status.stderr).toBe(0);
        expect(JSON.parse(status.stdout)).toMatchObject({ rolloutId: a, status: 'completed', samples: 4, ended: 4, byStatus: { completed: 4 } });
        const show = await polar(['rollout', 'show', a, '--db', url, '--json']);
        expect(show.code, show.stderr).toBe(0);
        const shown = JSON.parse(show.stdout) as { summary: { meanReward: number; groups: { rewards: number[] }[] }; samples: unknown[] };
        expect(shown.samples).toHaveLength(4);
        expect(shown.summary.groups.map((g) => g.rewards)).toEqual([
          [1, 1],
          [0.5, 0.5],
        ]);
      } finally {
        await pg.close();
      }
    },
    patient(240_000),
  );

  it(
    "a call that reaches one of A's sessions after a scoped read is in the next one, and the mirror's bookkeeping is untouched",
    async () => {
      const pg = new Postgres(url);
      try {
        const a = String((await pg.query(`SELECT id FROM rollouts ORDER BY created_at LIMIT 1`)).rows[0]!.id);
        const { sessions, calls } = await rowsOf(pg, a);
        const mirror = openDb(mirrorPath(url, env()), { readonly: true });
        const xmin = () => mirror.prepare(`SELECT value FROM polar_mirror WHERE key = 'xmin'`).pluck().get();
        const before = xmin();
        try {
          expect((await pullScoped(pg, path.join(dir, 'first.db'), { rollouts: [a] })).requests).toBe(calls.length);
          // One more call in A's first session, recorded on this machine and shipped.
          const store = await openStore(url);
          const up = await createUpstream('vllm', { baseUrl: upstream.url });
          const proxy = await startProxy({ store, upstream: up, servedModel: 'Qwen/Qwen3-8B', defaultSession: sessions[0]! });
          try {
            await new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'x', maxRetries: 0 }).chat.completions.create({
              model: 'm',
              messages: [{ role: 'user', content: 'a late call' }],
            });
          } finally {
            await proxy.close(2000);
            await up.close();
            await store.closeAsync();
          }
          const again = path.join(dir, 'again.db');
          expect((await pullScoped(pg, again, { rollouts: [a] })).requests).toBe(calls.length + 1);
          expect(idsIn(again, 'requests')).toHaveLength(calls.length + 1);
          // Scoped reads never move the mirror's mark; the mirror's next pull still finds the late call.
          expect(xmin()).toBe(before);
        } finally {
          mirror.close();
        }
        const listed = await polar(['sessions', '--db', url, '--json']);
        expect(listed.code, listed.stderr).toBe(0);
        expect((JSON.parse(listed.stdout) as { sessions: unknown[] }).sessions).toHaveLength(8);
        expect(idsIn(mirrorPath(url, env()), 'requests')).toHaveLength(8 + 24 + 1);
      } finally {
        await pg.close();
      }
    },
    patient(120_000),
  );
});
