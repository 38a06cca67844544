import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { PgBoss } from 'pg-boss';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RolloutConfig } from '../../src/rollout/config.js';
import { enqueueRollout } from '../../src/rollout/queue/enqueue.js';
import { readTaskFile } from '../../src/rollout/task-file.js';
import { Postgres } from '../../src/store/postgres/client.js';
import { Store } from '../../src/store/store.js';
import { startRolloutBench, type RolloutBench } from '../support/agent-rollout.js';
import { polarCli } from '../support/polar-cli.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { patient } from '../support/patience.js';

/**
 * Issue 40, item 4: a rollout refused before its first sample started (an upstream that lists no
 * model, one that cannot be reached) was recorded all the same, with every sample queued, and
 * `polar rollouts` listed it as `interrupted`, inviting a --resume that refused again. Now nothing
 * is recorded, in a SQLite store or a PostgreSQL one; a queued rollout's rows and jobs are written
 * together or not at all; and a resume refused at start leaves its rollout as it was.
 */
let bench: RolloutBench;
let noModel: http.Server;
let noModelUrl: string;
let closedUrl: string;
const env = () => ({ ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: path.join(bench.dir, 'state') });
const polar = (args: string[]) => polarCli(args, { env: env(), timeout: patient(120_000), maxBuffer: 64 * 1024 * 1024 });

/** A server that answers its model list with no model (a server still loading, a wrong URL's other service). */
function startNoModelServer(): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(req.url?.endsWith('/models') ? '{"object":"list","data":[]}' : '{}');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** A loopback URL nothing listens on. */
async function closedPortUrl(): Promise<string> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return `http://127.0.0.1:${port}`;
}

beforeAll(async () => {
  bench = await startRolloutBench('polar-issue-40-refused-');
  noModel = await startNoModelServer();
  noModelUrl = `http://127.0.0.1:${(noModel.address() as AddressInfo).port}`;
  closedUrl = await closedPortUrl();
}, patient(60_000));
afterAll(async () => {
  await new Promise((resolve) => noModel?.close(resolve));
  await bench?.close();
});

function tasksFile(name: string): string {
  return bench.taskFile(name, [
    { id: 'one', prompt: 'calls=1 write:answer.txt:1' },
    { id: 'two', prompt: 'calls=1 write:answer.txt:0' },
  ]);
}

/** `polar rollouts --json`'s list. */
async function listed(db: string): Promise<{ rolloutId: string; status: string }[]> {
  const r = await polar(['rollouts', '--db', db, '--json']);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout).rollouts;
}

describe('a rollout refused before its first sample (SQLite store)', () => {
  it(
    'against an upstream that lists no model: refused, and nothing is recorded for `polar rollouts` to call interrupted',
    async () => {
      const db = path.join(bench.dir, 'no-model.db');
      const r = await polar(bench.args(tasksFile('no-model.jsonl'), db, ['--samples', '2'], noModelUrl));
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(`could not learn the served model from ${noModelUrl}; pass --model NAME`);
      expect(r.stderr).not.toMatch(/polar rollout rol_/);
      expect(await listed(db)).toEqual([]);
      const store = Store.open(db, { readonly: true });
      try {
        expect(store.rollouts.list()).toEqual([]);
        expect(store.db.prepare('SELECT count(*) AS n FROM samples').get()).toEqual({ n: 0 });
      } finally {
        store.close();
      }
    },
    patient(120_000),
  );

  it(
    'against an upstream nothing listens on: refused, nothing recorded',
    async () => {
      const db = path.join(bench.dir, 'closed.db');
      const r = await polar(bench.args(tasksFile('closed.jsonl'), db, ['--samples', '2'], closedUrl));
      expect(r.code, r.stderr).not.toBe(0);
      expect(r.stderr).toContain(closedUrl);
      expect(await listed(db)).toEqual([]);
    },
    patient(120_000),
  );

  it(
    'a resume refused at start leaves its rollout interrupted, to be resumed once the upstream is back',
    async () => {
      // An interrupted rollout, as a Ctrl-C leaves one: recorded, its samples queued.
      const db = path.join(bench.dir, 'resume.db');
      const tasks = readTaskFile(tasksFile('resume.jsonl'));
      const store = Store.open(db);
      const config: RolloutConfig = {
        harness: 'custom',
        command: `${process.execPath} ${bench.agent} {prompt}`,
        upstream: { url: bench.upstream.url, kind: 'vllm' },
        model: null,
        samples: 1,
        concurrency: 1,
        initWorkers: 1,
        postWorkers: 1,
        timeoutSec: 60,
        outDir: path.join(bench.dir, 'out-resume'),
        accept: null,
        keepWorkspaces: false,
        sandbox: 'none',
      };
      try {
        store.rollouts.create(
          {
            id: 'rol_interrupted',
            harness: 'custom',
            upstreamUrl: bench.upstream.url,
            upstreamKind: 'vllm',
            servedModel: null,
            samplesPerTask: 1,
            tasksFile: null,
            accept: null,
            config: config as unknown as Record<string, unknown>,
          },
          tasks.map((t) => ({ id: t.id, json: JSON.stringify(t) })),
        );
        store.rollouts.end('rol_interrupted', 'interrupted');
      } finally {
        store.close();
      }
      const r = await polar(['rollout', '--resume', 'rol_interrupted', '--upstream', noModelUrl, '--db', db]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain('could not learn the served model');
      expect(await listed(db)).toMatchObject([{ rolloutId: 'rol_interrupted', status: 'interrupted' }]);
      const status = await polar(['rollout', 'status', 'rol_interrupted', '--db', db, '--json']);
      expect(JSON.parse(status.stdout)).toMatchObject({ status: 'interrupted', byStatus: { queued: 2 } });
    },
    patient(120_000),
  );
});

describe('a rollout refused before its first sample (PostgreSQL store)', () => {
  let server: TestPostgres;
  beforeAll(async () => {
    server = await startTestPostgres();
  }, patient(120_000));
  afterAll(async () => {
    await server?.close();
  });

  it(
    'polar rollout --db postgres://… against an upstream that lists no model records nothing in the shared store',
    async () => {
      const url = await server.database('refused_local');
      const r = await polar(bench.args(tasksFile('pg.jsonl'), url, ['--samples', '2'], noModelUrl));
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain('could not learn the served model');
      expect(await listed(url)).toEqual([]);
      const pg = new Postgres(url);
      try {
        expect((await pg.query('SELECT count(*)::int AS n FROM rollouts')).rows).toEqual([{ n: 0 }]);
        expect((await pg.query('SELECT count(*)::int AS n FROM samples')).rows).toEqual([{ n: 0 }]);
      } finally {
        await pg.close();
      }
    },
    patient(120_000),
  );

  it(
    'a queued rollout whose jobs could not all be queued is not recorded, and none of its jobs stays on the queue',
    async () => {
      const url = await server.database('refused_queue');
      const tasks = readTaskFile(tasksFile('queue.jsonl'));
      const config = {
        harness: 'custom',
        upstream: { url: noModelUrl, kind: 'vllm' },
        model: null,
        samples: 2,
        timeoutSec: 60,
        outDir: '',
        accept: null,
      } as unknown as RolloutConfig;
      // The queue refuses the third job (a lost connection, a full disk): two were sent before it.
      const send = PgBoss.prototype.send;
      let sent = 0;
      const spy = vi.spyOn(PgBoss.prototype, 'send').mockImplementation(function (this: PgBoss, ...args: Parameters<PgBoss['send']>) {
        if (++sent === 3) return Promise.reject(new Error('the queue refused a job'));
        return send.apply(this, args);
      });
      const pg = new Postgres(url);
      try {
        await expect(enqueueRollout(pg, url, tasks, null, config, { retries: 1, heartbeatSec: 30 })).rejects.toThrow('the queue refused a job');
        expect(sent).toBe(3);
        expect((await pg.query('SELECT count(*)::int AS n FROM rollouts')).rows).toEqual([{ n: 0 }]);
        expect((await pg.query('SELECT count(*)::int AS n FROM samples')).rows).toEqual([{ n: 0 }]);
        expect((await pg.query('SELECT count(*)::int AS n FROM pgboss.job')).rows).toEqual([{ n: 0 }]);
      } finally {
        spy.mockRestore();
        await pg.close();
      }
    },
    patient(120_000),
  );
});
