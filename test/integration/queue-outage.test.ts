import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openQueue } from '../../src/rollout/queue/boss.js';
import { Postgres } from '../../src/store/postgres/client.js';
import { nodeAgentHarness, POLAR_BIN as BIN } from '../support/polar-cli.js';
import { queuedJobs, startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';
import { waitUntil } from '../support/wait.js';

/**
 * A queued rollout through the faults of issue 43, with real worker processes and a real
 * PostgreSQL: the waiting coordinator lives through a restart of PostgreSQL, and a worker whose
 * lease the queue took away (its process stopped past the lease, as a machine cut off is) stops its
 * harness as soon as it runs again and leaves the sample to the worker that took it over.
 */

let server: TestPostgres;
let upstream: ReferenceUpstream;
let dir: string;
let agent: string;
const children: ChildProcess[] = [];
const env = (): NodeJS.ProcessEnv => ({ ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: path.join(dir, 'state'), POLAR_QUEUE_SUPERVISE_S: '1' });

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-outage-test-'));
  [server, upstream] = await Promise.all([startTestPostgres(), startReferenceUpstream()]);
  agent = path.join(dir, 'agent.mjs');
  fs.writeFileSync(agent, AGENT);
}, patient(120_000));

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await upstream?.close();
  await server?.close();
  removeTree(dir);
});

/** `polar ARGS` in the background, its output kept as it comes. */
function polar(args: string[], extraEnv: NodeJS.ProcessEnv = {}): { child: ChildProcess; out: () => string; err: () => string; exit: Promise<number | null> } {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...env(), ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, out: () => out, err: () => err, exit };
}

function tasksFile(name: string, tasks: Record<string, string>): string {
  const file = path.join(dir, `${name}.jsonl`);
  fs.writeFileSync(
    file,
    Object.entries(tasks)
      .map(([id, prompt]) => JSON.stringify({ id, prompt, workspace: { empty: true }, evaluator: { type: 'command', command: 'cat answer.txt' } }))
      .join('\n'),
  );
  return file;
}

const worker = (url: string, name: string) =>
  polar([
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
    '20',
    '--out',
    path.join(dir, `w-${name}`),
  ]);

describe('a queued rollout through a PostgreSQL restart', () => {
  it(
    'the waiting coordinator says it waits, waits, and exits 0 with every sample completed; rollout status waits too, or says what to do',
    async () => {
      const url = await server.database('restart');
      const rewards: Record<string, number> = { a: 1, b: 0.5 };
      const tasks = tasksFile('restart', Object.fromEntries(Object.entries(rewards).map(([id, r]) => [id, `calls=2 sleep:2 answer:${r}`])));
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
        '2',
        '--wait',
        '--json',
      ]);
      await queuedJobs(url, 'custom', 4, () =>
        waiting.child.exitCode !== null ? `the rollout exited (${waiting.child.exitCode}): ${waiting.err()} ${waiting.out()}` : null,
      );
      const w = worker(url, 'restart');
      const pg = new Postgres(url, { max: 1 });
      try {
        await waitUntil(
          'a sample running',
          async () => (await pg.query(`SELECT 1 FROM samples WHERE status = 'running'`).catch(() => ({ rows: [] }))).rows.length > 0,
          { stopIf: () => (w.child.exitCode !== null ? `the worker exited (${w.err()})` : null), everyMs: 100 },
        );
        await server.stop();
        try {
          await waitUntil('the coordinator to say it waits for PostgreSQL', () => /waiting for it up to 300 s \(POLAR_PG_RETRY_S\)/.test(waiting.err()), {
            stopIf: () => (waiting.child.exitCode !== null ? `the coordinator exited (${waiting.err()})` : null),
            everyMs: 100,
          });
        } finally {
          await server.start();
        }
        const code = await waiting.exit;
        expect(code, waiting.err()).toBe(0);
        expect(waiting.err()).toMatch(/PostgreSQL is reachable again after \d+ s/);
        const summary = JSON.parse(waiting.out());
        expect(summary).toMatchObject({ status: 'completed', outcomes: { completed: 4, error: 0, interrupted: 0 } });
        const samples = (await pg.query(`SELECT task_id, status, reward FROM samples ORDER BY id`)).rows;
        expect(samples.map((s) => [s.task_id, s.status, s.reward])).toEqual([
          ['a', 'completed', 1],
          ['a', 'completed', 1],
          ['b', 'completed', 0.5],
          ['b', 'completed', 0.5],
        ]);
        // `rollout status` on the shared store waits out an outage as well, and says what to do when
        // it lasts longer than POLAR_PG_RETRY_S.
        await server.stop();
        let down = true;
        try {
          const impatient = polar(['rollout', 'status', summary.rolloutId, '--db', url, '--json'], { POLAR_PG_RETRY_S: '1' });
          expect(await impatient.exit).toBe(1);
          expect(impatient.out() + impatient.err()).toMatch(/POLAR_STORE_UNREACHABLE.*unreachable.*POLAR_PG_RETRY_S=SECONDS/s);
          const status = polar(['rollout', 'status', summary.rolloutId, '--db', url, '--json']);
          await waitUntil('rollout status to say it waits for PostgreSQL', () => /waiting for it/.test(status.err()), {
            stopIf: () => (status.child.exitCode !== null ? `rollout status exited (${status.err()})` : null),
            everyMs: 100,
          });
          await server.start();
          down = false;
          expect(await status.exit, status.err()).toBe(0);
          expect(JSON.parse(status.out())).toMatchObject({ status: 'completed', samples: 4, ended: 4 });
        } finally {
          if (down) await server.start();
        }
      } finally {
        w.child.kill('SIGTERM');
        await w.exit;
        await pg.close();
      }
    },
    patient(240_000),
  );
});

describe('a worker that loses its lease', () => {
  it(
    'stops its harness as soon as it runs again, says so, and the worker that took the sample over completes it',
    async () => {
      const url = await server.database('lease');
      const marker = path.join(dir, 'held-once.pid');
      // The first run of the sample holds on for 300 s (the worker that loses it); the retry does not.
      const tasks = tasksFile('lease', { t: `calls=2 hold:${marker} answer:1` });
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
        '1',
        '--heartbeat',
        '10',
        '--wait',
        '--json',
      ]);
      await queuedJobs(url, 'custom', 1, () =>
        waiting.child.exitCode !== null ? `the rollout exited (${waiting.child.exitCode}): ${waiting.err()} ${waiting.out()}` : null,
      );
      const first = worker(url, 'first');
      const pg = new Postgres(url, { max: 1 });
      const rows = async (sql: string) => (await pg.query(sql).catch(() => ({ rows: [] as Record<string, unknown>[] }))).rows;
      let second: ReturnType<typeof worker> | null = null;
      try {
        await waitUntil('the first attempt to hold on after its first call', () => fs.existsSync(marker) && fs.readFileSync(marker, 'utf8').includes('held'), {
          stopIf: () => (first.child.exitCode !== null ? `the worker exited (${first.err()})` : null),
          everyMs: 100,
        });
        const [firstRun] = await rows(`SELECT session_id, attempt FROM samples`);
        const agentPid = Number(fs.readFileSync(marker, 'utf8').split(' ')[0]);
        // Stopped past its lease, as a machine cut off is: its heartbeat stops with it. Another
        // worker (supervising the queue every second) sees the job expire and takes it over.
        first.child.kill('SIGSTOP');
        second = worker(url, 'second');
        await waitUntil('the second worker to start the sample again', async () => Number((await rows(`SELECT attempt FROM samples`))[0]?.attempt ?? 0) > 1, {
          stopIf: () => (second!.child.exitCode !== null ? `the second worker exited (${second!.err()})` : null),
          everyMs: 200,
        });
        first.child.kill('SIGCONT');
        await waitUntil('the first worker to notice its lease is lost', () => /lease lost \(.+\); harness stopped/.test(first.err()), {
          stopIf: () => (first.child.exitCode !== null ? `the worker exited (${first.err()})` : null),
        });
        expect(first.err()).toMatch(/sample \S+:t:0: lease lost \((the queue expired it|another worker runs attempt \d+ of it).*\); harness stopped/);
        // Its harness is gone (it would have held on for 300 s).
        await waitUntil("the first attempt's harness to end", () => !alive(agentPid));
        const code = await waiting.exit;
        expect(code, waiting.err()).toBe(0);
        expect(JSON.parse(waiting.out())).toMatchObject({ status: 'completed', outcomes: { completed: 1 } });
        // The sample is the second attempt's: completed, rewarded, not overwritten by the lost one.
        const [sample] = await rows(`SELECT status, error, reward, attempt, session_id FROM samples`);
        expect(sample).toMatchObject({ status: 'completed', error: null, reward: 1 });
        expect(Number(sample!.attempt)).toBeGreaterThan(Number(firstRun!.attempt));
        expect(sample!.session_id).not.toBe(firstRun!.session_id);
        // The first worker did not run its session to the end: it ended it interrupted, never completed.
        expect(first.err()).toMatch(/:t:0 interrupted/);
        expect(first.err()).not.toMatch(/:t:0 completed/);
      } finally {
        for (const w of [first, second]) {
          if (!w) continue;
          w.child.kill('SIGCONT');
          w.child.kill('SIGTERM');
          await w.exit;
        }
        await pg.close();
      }
    },
    patient(240_000),
  );
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Makes `calls` model calls through polar, sleeps if told, then writes its answer. With
 * `hold:FILE`, the first run to find no FILE writes its pid there and, after its first call,
 * "held" and holds on for 300 s; later runs do not.
 */
const AGENT = `
import fs from 'node:fs';
const prompt = process.argv[2] ?? '';
const calls = Number(/calls=(\\d+)/.exec(prompt)?.[1] ?? 1);
const hold = /hold:(\\S+)/.exec(prompt)?.[1];
const holding = hold !== undefined && !fs.existsSync(hold);
if (holding) fs.writeFileSync(hold, String(process.pid));
for (let i = 0; i < calls; i++) {
  const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
    body: JSON.stringify({ model: 'any', messages: [{ role: 'user', content: prompt + ' #' + i }] }),
  });
  if (!res.ok) process.exit(3);
  await res.json();
  if (i === 0 && holding) {
    fs.appendFileSync(hold, ' held');
    await new Promise((r) => setTimeout(r, 300_000));
  }
  if (i === 0 && prompt.includes('sleep:')) await new Promise((r) => setTimeout(r, Number(/sleep:([\\d.]+)/.exec(prompt)[1]) * 1000));
}
const answer = /answer:([\\d.]+)/.exec(prompt)?.[1];
if (answer) fs.writeFileSync('answer.txt', answer + '\\n');
`;

// The fleet check (issue 43) found these two at a worker's start: a host that came back while
// PostgreSQL was away exited 1 (ECONNREFUSED from pg-boss's start), and workers started at once on
// a new database raced to create pg-boss's schema (23505 on pg_namespace).
describe("a worker's start", () => {
  it(
    'while PostgreSQL is down waits for it, then takes samples',
    async () => {
      const url = await server.database('start-down');
      const tasks = tasksFile('start-down', { a: 'calls=1 answer:1' });
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
        '1',
        '--wait',
        '--json',
      ]);
      await queuedJobs(url, 'custom', 1);
      await server.stop();
      let w: ReturnType<typeof worker>;
      try {
        w = worker(url, 'start-down');
        await waitUntil('the worker to say it waits for PostgreSQL', () => /waiting for it up to \d+ s \(POLAR_PG_RETRY_S\)/.test(w.err()), {
          stopIf: () => (w.child.exitCode !== null ? `the worker exited ${w.child.exitCode}: ${w.err()}` : null),
          everyMs: 100,
        });
      } finally {
        await server.start();
      }
      expect(await waiting.exit, waiting.err()).toBe(0);
      expect(JSON.parse(waiting.out())).toMatchObject({ status: 'completed', outcomes: { completed: 1 } });
      expect(w!.err()).toMatch(/ready for polar-samples-custom samples/);
    },
    patient(180_000),
  );

  it(
    'beside others on a new database: twelve at once each open the queue',
    async () => {
      const url = await server.database('start-race');
      const bosses = await Promise.all(Array.from({ length: 12 }, () => openQueue(url)));
      try {
        for (const b of bosses) expect(await b.getQueues()).toBeInstanceOf(Array);
      } finally {
        await Promise.all(bosses.map((b) => b.stop({ graceful: false, close: true })));
      }
    },
    patient(60_000),
  );
});
