import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceFollower } from '../../src/rollout/queue/inference-follower.js';
import { JOBS_CHANNEL, notifyJobsQueued } from '../../src/rollout/queue/notify.js';
import { PauseGate } from '../../src/proxy/pause.js';
import { Postgres } from '../../src/store/postgres/client.js';
import { endChild } from '../support/end-child.js';
import { patient } from '../support/patience.js';
import { PGBOUNCER_MISSING, startPgBouncer, type TestPgBouncer } from '../support/pgbouncer.js';
import { nodeAgentHarness, POLAR_BIN as BIN, polarCli } from '../support/polar-cli.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { removeTree } from '../support/remove-tree.js';
import { waitUntil } from '../support/wait.js';

/**
 * Issue 43's connection budget, on a real PostgreSQL (with pg_stat_statements, which counts every
 * statement the moment it ends) and Debian's PgBouncer: what an idle worker costs the server, that
 * "jobs queued" reaches a listening worker only once its transaction commits, and a queued rollout
 * over two workers through PgBouncer in transaction mode, the server's connections bounded by its pool.
 */

let server: TestPostgres;
let upstream: ReferenceUpstream;
let dir: string;
let admin: pg.Client;
const children: ChildProcess[] = [];

const AGENT = `
import fs from 'node:fs';
const prompt = process.argv[2] ?? '';
const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
  body: JSON.stringify({ model: 'any', messages: [{ role: 'user', content: prompt }] }),
});
if (!res.ok) process.exit(3);
await res.json();
fs.writeFileSync('answer.txt', /answer:([\\d.]+)/.exec(prompt)[1] + '\\n');
`;

const env = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({ ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: path.join(dir, 'state'), ...extra });

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-budget-test-'));
  [server, upstream] = await Promise.all([startTestPostgres(), startReferenceUpstream()]);
  // pg_stat_statements needs loading at start: set, restart, create.
  const postgres = (await server.database('budget_admin')).replace(/\/budget_admin$/, '/postgres');
  let c = new pg.Client({ connectionString: postgres });
  await c.connect();
  await c.query(`ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`);
  await c.end();
  await server.stop();
  await server.start();
  c = new pg.Client({ connectionString: postgres });
  await c.connect();
  await c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  admin = c;
}, patient(120_000));

afterAll(async () => {
  for (const child of children) await endChild(child);
  await admin?.end().catch(() => undefined);
  await upstream?.close();
  await server?.close();
  removeTree(dir);
});

/** A `polar worker` on `url` (queue and store), its stderr kept; resolves once it says it is ready. */
async function startWorker(
  name: string,
  url: string,
  args: string[] = [],
  extraEnv: NodeJS.ProcessEnv = {},
): Promise<{ child: ChildProcess; stderr: () => string }> {
  const agent = path.join(dir, 'agent.mjs');
  fs.writeFileSync(agent, AGENT);
  const child = spawn(
    process.execPath,
    [BIN, 'worker', '--queue', url, ...nodeAgentHarness(agent), '--upstream', upstream.url, '--sandbox', 'none', '--out', path.join(dir, `w-${name}`), ...args],
    { env: env(extraEnv), stdio: ['ignore', 'ignore', 'pipe'] },
  );
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  await waitUntil(`worker ${name} to be ready`, () => /ready for polar-samples-custom samples/.test(stderr), {
    stopIf: () => (child.exitCode !== null ? `worker ${name} exited (${child.exitCode}):\n${stderr}` : null),
    everyMs: 100,
  });
  return { child, stderr: () => stderr };
}

/** Every statement run in database `db` so far, by text: pg_stat_statements, exact at any moment. */
async function statements(db: string): Promise<Map<string, number>> {
  const { rows } = await admin.query(
    `SELECT s.query, sum(s.calls)::int AS calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1 GROUP BY s.query`,
    [db],
  );
  return new Map(rows.map((r) => [String(r.query), Number(r.calls)]));
}

function delta(before: Map<string, number>, after: Map<string, number>): { total: number; lines: string[] } {
  const lines: string[] = [];
  let total = 0;
  for (const [query, calls] of after) {
    const n = calls - (before.get(query) ?? 0);
    if (n <= 0) continue;
    total += n;
    lines.push(`${n} × ${query.replace(/\s+/g, ' ').slice(0, 160)}`);
  }
  return { total, lines };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('an idle worker', () => {
  it(
    'runs about no statements: over 30 s with nothing queued, at most 3 (back-off fetches and a look for leases to expire, each one statement)',
    async () => {
      const url = await server.database('idle');
      const w = await startWorker('idle', url);
      // Past its start and the first steps of its back-off (0.5, 1, 2, 4 s): the steady state, where
      // it fetches every 30 s at most and looks for leases every 30 s (POLAR_QUEUE_SUPERVISE_S).
      await sleep(10_000);
      const before = await statements('idle');
      await sleep(30_000);
      const after = await statements('idle');
      const { total, lines } = delta(before, after);
      expect(w.child.exitCode, w.stderr()).toBeNull();
      // An idle worker used to run 5–6 transactions a second (a fetch every 500 ms, pg-boss's
      // supervision every 5 s, an empty shipping transaction every 200 ms). Each statement here is a
      // transaction of its own: at most 1 per 10 s.
      expect(total, `statements in 30 s:\n${lines.join('\n')}`).toBeLessThanOrEqual(3);
      await endChild(w.child);
    },
    patient(120_000),
  );
});

/** Peak client connections to `db` whose application_name is LIKE one of `like`, sampled until `stop()`. */
function peakConnections(db: string, like: string[]): { stop(): Promise<number> } {
  let peak = 0;
  let sampling = true;
  const loop = (async () => {
    while (sampling) {
      const { rows } = await admin.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND application_name LIKE ANY($2::text[])`,
        [db, like],
      );
      peak = Math.max(peak, Number(rows[0]!.n));
      await sleep(50);
    }
  })();
  return {
    async stop() {
      sampling = false;
      await loop;
      return peak;
    },
  };
}

function writeTasks(file: string, rewards: Record<string, number>): void {
  fs.writeFileSync(
    file,
    Object.entries(rewards)
      .map(([id, r]) => JSON.stringify({ id, prompt: `answer:${r}`, workspace: { empty: true }, evaluator: { type: 'command', command: 'cat answer.txt' } }))
      .join('\n'),
  );
}

/** `polar rollout --queue URL --wait` of `tasks`, 2 samples a task, with the tests' agent. */
function queuedRollout(url: string, tasks: string) {
  return polarCli(
    [
      'rollout',
      '--queue',
      url,
      '--tasks',
      tasks,
      ...nodeAgentHarness(path.join(dir, 'agent.mjs')),
      '--upstream',
      upstream.url,
      '--samples',
      '2',
      '--wait',
      '--json',
    ],
    { env: env(), timeout: patient(180_000) },
  );
}

describe("a busy worker's connections", () => {
  it(
    'stay within --pg-connections + 1 LISTEN + 1 heartbeat while it runs a queued rollout',
    async () => {
      const url = await server.database('budget');
      const w = await startWorker('budget', url, ['--pg-connections', '2', '--concurrency', '3']);
      const peak = peakConnections('budget', ['polar-worker', 'polar-lease', 'polar-inference %']);
      const tasks = path.join(dir, 'budget-tasks.jsonl');
      writeTasks(tasks, { a: 1, b: 0.5, c: 0 });
      let most: number;
      try {
        const done = await queuedRollout(url, tasks);
        expect(done.code, `${done.stderr}\n${w.stderr()}`).toBe(0);
        expect(JSON.parse(done.stdout)).toMatchObject({ status: 'completed', outcomes: { completed: 6 } });
      } finally {
        most = await peak.stop();
      }
      // It used to open a pool of 4 for its store, 4 for its ledger and 10 for pg-boss.
      expect(most).toBeGreaterThanOrEqual(2);
      expect(most).toBeLessThanOrEqual(2 + 1 + 1);
      await endChild(w.child);
    },
    patient(240_000),
  );
});

describe('"jobs queued"', () => {
  it(
    'reaches a listening worker on the connection it holds for the fleet pause, once the transaction that queued them commits',
    async () => {
      const url = await server.database('notify');
      const pool = new Postgres(url, { max: 2 });
      const heard: (string | null)[] = [];
      const follower = new InferenceFollower(
        pool,
        new PauseGate(60_000),
        'test',
        () => undefined,
        (queue) => heard.push(queue),
      );
      try {
        // The inference pause's tables: a worker's store migrates them before its follower starts.
        const { migratePostgres } = await import('../../src/store/postgres/schema.js');
        await migratePostgres(pool);
        await follower.start();
        // Once on connecting: whatever was sent while it was away is looked for.
        await waitUntil('the follower to listen', () => follower.listening && heard.length === 1);
        expect(heard).toEqual([null]);
        let commit!: () => void;
        const committed = new Promise<void>((r) => (commit = r));
        let sent!: () => void;
        const isSent = new Promise<void>((r) => (sent = r));
        const tx = pool.transaction(async (q) => {
          await notifyJobsQueued(q, 'polar-samples-custom');
          sent();
          await committed;
        });
        await isSent;
        // A round trip on another connection: a notification sent before commit would be here by now.
        await pool.query('SELECT 1');
        expect(heard).toEqual([null]);
        commit();
        await tx;
        await waitUntil('the notification', () => heard.length === 2);
        expect(heard).toEqual([null, 'polar-samples-custom']);
        // The channel it listens on, by name, on the one LISTEN connection.
        const { rows } = await admin.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = 'notify' AND application_name LIKE 'polar-inference %'`,
        );
        expect(rows[0]!.n).toBe(1);
        expect(JOBS_CHANNEL).toBe('polar_jobs');
      } finally {
        await follower.close();
        await pool.close();
      }
    },
    patient(60_000),
  );
});
describe.skipIf(PGBOUNCER_MISSING !== null)(`through PgBouncer in transaction mode${PGBOUNCER_MISSING ? ` (skipped: ${PGBOUNCER_MISSING})` : ''}`, () => {
  let bouncer: TestPgBouncer | null = null;
  afterAll(async () => {
    await bouncer?.close();
  });

  it(
    'a queued rollout over two workers completes; their LISTEN connections go straight to PostgreSQL, everything else stays within the pool',
    async () => {
      const direct = await server.database('bounced');
      const POOL = 3;
      bouncer = await startPgBouncer(direct, { poolSize: POOL, maxClientConn: 100 });
      const url = bouncer.url(direct);
      const tasks = path.join(dir, 'bounced-tasks.jsonl');
      const rewards: Record<string, number> = { a: 1, b: 0.5, c: 0 };
      writeTasks(tasks, rewards);
      // Workers first: they wait for the rollout's NOTIFY on their direct --listen-url.
      const workers = [];
      for (const name of ['b1', 'b2'])
        workers.push(await startWorker(name, url, ['--listen-url', direct, '--pg-connections', '2', '--concurrency', '2'], { POLAR_QUEUE_SUPERVISE_S: '1' }));
      // Every client of the database, and of those the LISTEN connections: the rest came through PgBouncer.
      const all = peakConnections('bounced', ['%']);
      const listening = peakConnections('bounced', ['polar-inference %']);
      let most = 0;
      let listeners = 0;
      try {
        const done = await queuedRollout(url, tasks);
        expect(done.code, `${done.stderr}\n${workers.map((w) => w.stderr()).join('\n')}\n${bouncer.log()}`).toBe(0);
        expect(JSON.parse(done.stdout)).toMatchObject({ status: 'completed', outcomes: { completed: 6, error: 0, interrupted: 0 } });
      } finally {
        most = await all.stop();
        listeners = await listening.stop();
      }
      const check = new pg.Client({ connectionString: direct });
      await check.connect();
      try {
        const samples = (await check.query(`SELECT task_id, reward FROM samples ORDER BY id`)).rows;
        expect(samples).toHaveLength(6);
        for (const r of samples) expect(r.reward).toBe(rewards[String(r.task_id)]);
      } finally {
        await check.end();
      }
      // One LISTEN connection a worker, on the server itself (through PgBouncer a LISTEN hears nothing);
      // everything else went through PgBouncer: never more than its pool.
      expect(listeners).toBe(2);
      expect(most - listeners).toBeGreaterThan(0);
      expect(most - listeners).toBeLessThanOrEqual(POOL);
      for (const w of workers) expect(w.stderr()).not.toMatch(/Warning:/);
    },
    patient(240_000),
  );
});
