/**
 * `npx tsx bench/lease-heartbeat.ts [--seconds=30] [--hogs=8] [--heartbeat=10]`: how far apart a
 * queued sample's heartbeats land under load, the old way (pg-boss `touch()` from the worker's main
 * thread, every heartbeat / BEATS) and the new (rollout/queue/lease.ts: a thread of its own), to choose
 * the lease (`--heartbeat`) and show that the thread keeps it (issue 43: 10 s leases lapsed on a
 * loaded 2-core machine with no fault).
 *
 * Each touch is timed by PostgreSQL itself (a trigger logs clock_timestamp() when heartbeat_on
 * moves), so the gaps are what the queue's supervisor sees, not what a loaded client thinks. A gap
 * longer than the lease is a lease the queue expires. Four loads, `--seconds` each:
 *  - idle;
 *  - blocked loop: the main thread busy in bursts of 0.5–4 s (a harness's capture, a big body's
 *    JSON, an evaluator's output), as a worker's event loop is;
 *  - loaded box: `--hogs` processes spinning on every core (16 workers on 2 cores, issue 43);
 *  - both.
 * Prints Markdown.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import os from 'node:os';
import type { Job } from 'pg-boss';
import { ensureQueue, openQueue } from '../src/rollout/queue/boss.js';
import { BEATS, LeaseKeeper } from '../src/rollout/queue/lease.js';
import { startTestPostgres } from '../test/support/postgres.js';

const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const SECONDS = arg('seconds', 30);
const HOGS = arg('hogs', 8);
const HEARTBEAT = arg('heartbeat', 10);
const QUEUE = 'polar-samples-bench';

const server = await startTestPostgres();
const url = await server.database('lease_bench');
const boss = await openQueue(url);
await ensureQueue(boss, QUEUE);
const db = boss.getDb();
const table = String((await db.executeSql('SELECT table_name FROM pgboss.queue WHERE name = $1', [QUEUE])).rows[0]!.table_name);
await db.executeSql(`
  CREATE TABLE touches (id uuid, at timestamptz);
  CREATE FUNCTION log_touch() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO touches VALUES (NEW.id, clock_timestamp()); RETURN NEW; END $$;
  CREATE TRIGGER log_touch AFTER UPDATE ON pgboss.${table} FOR EACH ROW
    WHEN (NEW.heartbeat_on IS DISTINCT FROM OLD.heartbeat_on) EXECUTE FUNCTION log_touch();`);

async function job(): Promise<Job<object>> {
  await boss.send(QUEUE, {}, { heartbeatSeconds: HEARTBEAT, expireInSeconds: 3600 });
  const [j] = await boss.fetch<object>(QUEUE);
  if (!j) throw new Error('no job');
  return j;
}

function busy(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // spin
  }
}

/** `n` processes spinning until killed. */
function hogs(n: number): ChildProcess[] {
  return Array.from({ length: n }, () => spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }));
}

interface Row {
  load: string;
  way: string;
  touches: number;
  p50: number;
  p99: number;
  max: number;
}

async function gaps(id: string, since: Date): Promise<number[]> {
  const { rows } = await db.executeSql('SELECT extract(epoch FROM at) * 1000 AS at FROM touches WHERE id = $1 AND at >= $2 ORDER BY at', [id, since]);
  const at = rows.map((r) => Number(r.at));
  return at.slice(1).map((t, i) => t - at[i]!);
}

function pct(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : Number.NaN;
}

async function run(load: string, blocked: boolean, hogCount: number): Promise<Row[]> {
  const main = await job();
  const threaded = await job();
  const keeper = new LeaseKeeper(url);
  const release = keeper.hold({ queue: QUEUE, id: threaded.id, attempt: threaded.retryCount, heartbeatSeconds: HEARTBEAT }, () => undefined);
  // The old way, as worker.ts did it before issue 43.
  const timer = setInterval(() => void boss.touch(QUEUE, main).catch(() => undefined), Math.max(1000, (HEARTBEAT * 1000) / BEATS));
  const procs = hogs(hogCount);
  const since = new Date();
  const until = Date.now() + SECONDS * 1000;
  while (Date.now() < until) {
    if (blocked) busy(500 + Math.random() * 3500);
    await new Promise((r) => setTimeout(r, blocked ? 20 : 250));
  }
  for (const p of procs) p.kill('SIGKILL');
  clearInterval(timer);
  release();
  await keeper.close();
  const rows: Row[] = [];
  for (const [way, j] of [
    ['main thread (before)', main],
    ['lease thread', threaded],
  ] as const) {
    const g = (await gaps(j.id, since)).sort((a, b) => a - b);
    rows.push({ load, way, touches: g.length + 1, p50: pct(g, 50), p99: pct(g, 99), max: g.at(-1) ?? Number.NaN });
  }
  return rows;
}

const results: Row[] = [];
results.push(...(await run('idle', false, 0)));
results.push(...(await run('blocked loop (0.5–4 s bursts)', true, 0)));
results.push(...(await run(`loaded box (${HOGS} spinning processes)`, false, HOGS)));
results.push(...(await run('both', true, HOGS)));
await boss.stop({ graceful: false, close: true });
await server.close();

const s = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : '–');
console.log(
  `Heartbeats every ${(HEARTBEAT / BEATS).toFixed(1)} s for a ${HEARTBEAT} s lease, ${SECONDS} s per load, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}), load average ${os.loadavg()[0]!.toFixed(1)} at the end; gaps between touches as PostgreSQL timed them\n`,
);
console.log('| load | heartbeat | touches | p50 gap | p99 gap | max gap | lease kept |');
console.log('|---|---|---|---|---|---|---|');
for (const r of results)
  console.log(`| ${r.load} | ${r.way} | ${r.touches} | ${s(r.p50)} | ${s(r.p99)} | ${s(r.max)} | ${r.max < HEARTBEAT * 1000 ? 'yes' : '**no**'} |`);
