import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type MockServer, startMockServer } from '../../../src/mock-server/server.js';
import { makeHosts, type Hosts } from '../netns.js';
import { startTestPostgres, type TestPostgres } from '../postgres.js';
import { removeTree } from '../remove-tree.js';
import {
  type Check,
  budgetCheck,
  type CallRow,
  callsCheck,
  type Coordinator,
  coordinatorCheck,
  faultsCheck,
  groupCheck,
  leaseCheck,
  onceCheck,
  rewardCheck,
  type SampleRow,
  type WorkerEnds,
  workersCheck,
} from './checks.js';
import { cutFault, type FaultPlan, type FaultRecord, killFault, pgRestartFault } from './faults.js';
import { exited, type HostWorker, spawnHostWorker } from './hosts.js';
import { Observer } from './observe.js';
import { type FleetBouncer, startFleetBouncer } from './bouncer.js';
import { planTasks, writeTasks } from './tasks.js';

/**
 * The fleet check (issue 43): N simulated hosts, each a network namespace on a bridge with its own
 * hostname, $HOME, state folder and mount namespace (no disk shared with the coordinator), run a
 * queued rollout of `dir`, git and Harbor tasks through a host SIGKILLed mid-sample, a host cut off
 * past its lease and a PostgreSQL restart; then every verdict and measure in a FleetReport.
 */
export interface FleetOptions {
  hosts: number;
  /** Samples per host, about: the task count is sized from it. */
  perHost: number;
  /** Samples per task (a GRPO group). */
  group: number;
  /** Harbor tasks among them. */
  harbor: number;
  concurrency: number;
  /** The rollout's --heartbeat (the lease), seconds; 0: polar's default. */
  leaseS: number;
  pgDownS: number;
  /** POLAR_QUEUE_SUPERVISE_S for every process (how often expired leases are looked for); 0: polar's default. */
  superviseS: number;
  /** Seconds the agent waits after its first call. */
  sleepS: number;
  calls: number;
  /** The faults (off: a plain run, to tell the harness's own faults from polar's). */
  faults: boolean;
  /** Hosts see the coordinator's folder (off: the condition, no shared disk). */
  sharedDisk: boolean;
  /** PostgreSQL's max_connections (100: a stock server). */
  maxConnections: number;
  /** PgBouncer in transaction mode in front of PostgreSQL (the hosts' LISTEN connection straight to it, POLAR_LISTEN_URL). */
  pgbouncer: boolean;
  /** PgBouncer's server connections (default_pool_size). */
  bouncerPool: number;
  /** Each worker's pool (POLAR_PG_POOL); 0: polar's default (4). */
  pgPool: number;
  /** Keep the folder (logs, hosts' state) and say where. */
  keep: boolean;
  /** The bridge's subnet 10.OCTET.0.0/24. */
  octet: number;
  /** Seconds the whole rollout may take before the check gives up. */
  timeoutS: number;
  /** Seconds idle workers are watched for their transaction rate. */
  idleWindowS: number;
  log: (line: string) => void;
}

export const DEFAULTS: Omit<FleetOptions, 'log'> = {
  hosts: 16,
  perHost: 2,
  group: 2,
  harbor: 2,
  concurrency: 1,
  leaseS: 0,
  pgDownS: 4,
  superviseS: 0,
  sleepS: 2,
  calls: 2,
  faults: true,
  sharedDisk: false,
  maxConnections: 100,
  pgbouncer: false,
  bouncerPool: 20,
  pgPool: 0,
  keep: false,
  octet: 213,
  timeoutS: 1800,
  idleWindowS: 15,
};

export interface FleetReport {
  ok: boolean;
  options: Omit<FleetOptions, 'log'>;
  checks: Check[];
  metrics: {
    samples: number;
    wallS: number;
    sessionsPerMin: number;
    /** Per host: most connections held at once, idle statements/s (a floor), samples ended, restarts. */
    hosts: { host: number; name: string; address: string; fault: string | null; maxConnections: number; idleStatementsPerS: number; ended: number }[];
    peakConnections: number;
    idleXactPerS: number;
    idleXactPerWorkerPerS: number;
  };
  faults: FaultRecord[];
  dir: string | null;
  /** Which polar ran: the checkout's commit, whether it had uncommitted changes, when dist/ was built (the hosts run dist/). */
  polar: string;
}

const TOKEN = 'polar-fleet-check-token';
const BIN = fileURLToPath(new URL('../../../bin/polar.js', import.meta.url));

/** Everything made, so an error or Ctrl-C at any point removes it all (cleanup is idempotent). */
export class FleetRun {
  hosts: Hosts | null = null;
  pg: TestPostgres | null = null;
  mock: MockServer | null = null;
  observer: Observer | null = null;
  bouncer: FleetBouncer | null = null;
  workers: HostWorker[] = [];
  /** Every worker incarnation (a killed host's first one included). */
  incarnations: HostWorker[] = [];
  coordinators: ChildProcess[] = [];
  dir = '';
  private cleaned = false;

  constructor(readonly o: FleetOptions) {}

  async cleanup(): Promise<void> {
    if (this.cleaned) return;
    this.cleaned = true;
    for (const c of this.coordinators) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    for (const w of this.incarnations) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGTERM');
    await Promise.all(this.incarnations.map((w) => exited(w, 10_000)));
    await this.observer?.close();
    await this.bouncer?.close().catch(() => undefined);
    await this.mock?.close().catch(() => undefined);
    await this.pg?.close().catch(() => undefined);
    this.hosts?.remove();
    if (this.dir && !this.o.keep) removeTree(this.dir);
  }

  async run(): Promise<FleetReport> {
    const o = this.o;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-fleet-'));
    const coord = path.join(this.dir, 'coord');
    const code = path.join(this.dir, 'code');
    const hostDir = (i: number) => path.join(this.dir, 'hosts', String(i));
    for (const d of [coord, code, path.join(coord, 'state'), path.join(coord, 'home')]) fs.mkdirSync(d, { recursive: true });
    for (let i = 0; i < o.hosts; i++) fs.mkdirSync(hostDir(i), { recursive: true });
    o.log(`fleet: ${o.hosts} hosts in ${this.dir}`);

    this.hosts = makeHosts('polar-fleet', o.octet, o.hosts);
    const hosts = this.hosts;
    this.pg = await startTestPostgres({ network: { address: hosts.hub, subnet: hosts.subnet } });
    const url = await this.pg.database('fleet');
    const directHostUrl = url.replace('@127.0.0.1:', `@${hosts.hub}:`);
    if (o.pgbouncer) this.bouncer = await startFleetBouncer(url, hosts.hub, o.bouncerPool);
    const hostUrl = this.bouncer ? this.bouncer.hostUrl(directHostUrl) : directHostUrl;
    this.observer = new Observer(
      url,
      hosts.hosts.map((h) => h.address),
    );
    if (o.maxConnections !== 100) {
      await this.observer.query(`ALTER SYSTEM SET max_connections = ${Math.floor(o.maxConnections)}`);
      await this.pg.stop();
      await this.pg.start();
    }
    this.mock = await startMockServer({ host: hosts.hub, authToken: TOKEN });
    const mock = this.mock;

    const total = o.hosts * o.perHost;
    const plan = planTasks(total, o.group, o.harbor);
    const tasks = writeTasks(coord, code, { ...plan, sleepS: o.sleepS, calls: o.calls });
    const samples = Object.keys(tasks.rewards).length * o.group;
    o.log(`fleet: ${plan.jsonl} JSONL tasks (dir, git) + ${plan.harbor} Harbor tasks × ${o.group} = ${samples} samples`);

    const harness = ['--harness', 'custom', '--command', `${process.execPath} ${tasks.agent} {prompt}`];
    const upstream = ['--upstream', mock.url, '--upstream-kind', 'vllm-tito', '--tokenizer', 'bundled:qwen3'];
    const env: NodeJS.ProcessEnv = { ...process.env, POLAR_UPSTREAM_API_KEY: TOKEN };
    if (o.superviseS > 0) env.POLAR_QUEUE_SUPERVISE_S = String(o.superviseS);
    if (o.pgPool > 0) env.POLAR_PG_POOL = String(o.pgPool);
    // Behind PgBouncer in transaction mode LISTEN needs PostgreSQL itself: each host's one such connection goes straight there.
    const hostEnv: NodeJS.ProcessEnv = this.bouncer ? { ...env, POLAR_LISTEN_URL: directHostUrl } : env;
    const startWorker = (i: number) => {
      const hide = [...(o.sharedDisk ? [] : [coord]), ...hosts.hosts.map((_, j) => hostDir(j)).filter((_, j) => j !== i)];
      const argv = [process.execPath, BIN, 'worker', '--queue', hostUrl, ...harness, '--sandbox-ro', code, ...upstream];
      argv.push('--concurrency', String(o.concurrency), '--environment', 'host', '--out', path.join(hostDir(i), 'out'), '--json');
      const w = spawnHostWorker(hosts, i, hostDir(i), hide, argv, hostEnv);
      this.workers[i] = w;
      this.incarnations.push(w);
      return w;
    };
    const deadWorker = () => {
      const dead = this.workers.find((w) => w.child.exitCode !== null || w.child.signalCode !== null);
      return dead ? `host ${dead.index}'s worker exited (${dead.child.exitCode ?? dead.child.signalCode}):\n${dead.log.slice(-2000)}` : null;
    };
    // One worker first, the rest once it made the store's and the queue's tables: workers that all
    // start on an empty database race to create them ("duplicate key value violates unique
    // constraint pg_namespace_nspname_index", seen on 17ebb53), a fault of its own the faults below would hide.
    startWorker(0);
    await until('the first worker ready', () => this.workers[0]!.ready, deadWorker);
    for (let i = 1; i < o.hosts; i++) startWorker(i);
    await until('every worker ready', () => this.workers.every((w) => w.ready), deadWorker);
    o.log(`fleet: ${o.hosts} workers ready`);
    this.observer.start();

    // The coordinator goes through PgBouncer too, by the relay on the bridge address (this machine's own).
    const coordUrl = this.bouncer ? this.bouncer.hostUrl(directHostUrl) : url;
    const started = Date.now();
    const coordinators: Coordinator[] = [];
    const coordinate = (what: string, tasksPath: string) =>
      new Promise<void>((resolve) => {
        const args = ['rollout', '--queue', coordUrl, '--tasks', tasksPath, ...harness, ...upstream, '--samples', String(o.group)];
        if (o.leaseS > 0) args.push('--heartbeat', String(o.leaseS));
        args.push('--environment', 'host', '--wait', '--json');
        const c = spawn(process.execPath, [BIN, ...args], {
          stdio: ['ignore', 'pipe', 'pipe'],
          env: {
            ...env,
            ...(this.bouncer ? { POLAR_LISTEN_URL: url } : {}),
            HOME: path.join(coord, 'home'),
            POLAR_STATE_DIR: path.join(coord, 'state'),
            NO_COLOR: '1',
          },
        });
        this.coordinators.push(c);
        const rec: Coordinator = { what, code: null, signal: null, stdout: '', stderr: '' };
        coordinators.push(rec);
        c.stdout!.on('data', (d: Buffer) => (rec.stdout += d.toString()));
        c.stderr!.on('data', (d: Buffer) => (rec.stderr += d.toString()));
        c.once('exit', (code, signal) => {
          Object.assign(rec, { code, signal });
          fs.writeFileSync(path.join(coord, `${what.replace(/\W+/g, '-')}.log`), `${rec.stdout}\n---\n${rec.stderr}`);
          resolve();
        });
      });
    const waits = [coordinate('rollout --tasks tasks.jsonl', tasks.jsonl), ...(tasks.harbor ? [coordinate('rollout --tasks harbor/', tasks.harbor)] : [])];
    let finished = false;
    const done = Promise.all(waits).then(() => (finished = true));

    const faults: FaultRecord[] = [];
    let faultRun: Promise<unknown> = Promise.resolve();
    if (o.faults) {
      const plan: FaultPlan = {
        pg: this.pg,
        observer: this.observer,
        workers: () => this.workers,
        answered: (session) => mock.calls.filter((m) => m.headers['x-polar-session'] === session).length,
        calls: o.calls,
        pgDownS: o.pgDownS,
        superviseS: o.superviseS > 0 ? o.superviseS : Number(process.env.POLAR_QUEUE_SUPERVISE_S) || 30,
        restart: (i) => startWorker(i),
        done: () => finished,
        log: o.log,
      };
      const [killAt, cutAt] = [0, Math.min(1, o.hosts - 1)];
      faultRun = Promise.all([
        pgRestartFault(plan, [killAt, cutAt]).then(async (r) => {
          faults.push(r);
          faults.push(await killFault(plan, killAt));
        }),
        cutFault(plan, cutAt).then((c) => faults.push(c)),
      ]);
    }
    const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), o.timeoutS * 1000).unref());
    if ((await Promise.race([done, timeout])) === 'timeout') {
      o.log(`fleet: the rollout did not end within ${o.timeoutS} s; ending the coordinators`);
      for (const c of this.coordinators) c.kill('SIGTERM');
      await done;
    }
    const wallS = (Date.now() - started) / 1000;
    await faultRun;
    this.observer.stop();
    o.log(`fleet: coordinators exited after ${wallS.toFixed(0)} s; watching idle workers for ${o.idleWindowS} s`);
    const idle = await this.observer.idleRates(o.idleWindowS * 1000);
    const running = (w: HostWorker) => w.child.exitCode === null && w.child.signalCode === null;
    for (const w of this.incarnations) w.aliveAtEnd = running(w);
    const live = this.workers.filter(running).length;

    // Workers stopped as Ctrl-C stops them: each ships what its journal still holds.
    for (const w of this.incarnations) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGTERM');
    await Promise.all(this.incarnations.map((w) => exited(w, 60_000)));

    const rows = await this.observer.query<SampleRow>(`SELECT id, task_id, status, reward, attempt::text, worker, error FROM samples ORDER BY id`);
    const groups = await this.observer.query<{ task_id: string; samples: string; mean: number | null }>(`SELECT task_id, samples::text, mean FROM groups`);
    const calls = await this.observer.query<CallRow>(`SELECT id, session_id, status, token_source, sampled_ids, logprobs FROM requests`);
    const hostOf = (worker: string) => {
      const i = hosts.hosts.findIndex((h) => h.name === worker.split('/')[0]);
      return i < 0 ? null : i;
    };
    const ends: WorkerEnds[] = this.incarnations.map((w) => ({ host: w.index, pid: w.child.pid ?? 0, hostname: w.name, ended: w.ended }));
    const checks = [
      coordinatorCheck(coordinators),
      onceCheck(rows, samples, ends),
      rewardCheck(rows, tasks.rewards),
      groupCheck(groups, tasks.rewards, o.group),
      callsCheck(calls, mock.calls, faults),
      leaseCheck(rows, this.observer.attempts, faults, hostOf),
      workersCheck(
        this.incarnations.map((w) => ({
          host: w.index,
          pid: w.child.pid ?? 0,
          killed: w.killed,
          aliveAtEnd: w.aliveAtEnd,
          code: w.child.exitCode,
          signal: w.child.signalCode,
          tail: w.log.trim().split('\n').slice(-2).join(' | '),
        })),
      ),
      ...(o.faults ? [faultsCheck(faults, rows, hostOf)] : []),
      budgetCheck(
        hosts.hosts.map((h, i) => ({
          host: i,
          direct: this.observer!.maxConnections.get(h.address) ?? 0,
          pooled: this.bouncer?.maxByHost.get(h.address) ?? 0,
        })),
        (o.pgPool > 0 ? o.pgPool : 4) + 2,
        this.bouncer !== null,
      ),
    ];
    const faultOf = (i: number) =>
      faults
        .filter((f) => f.host === i)
        .map((f) => f.kind)
        .join(', ') || null;
    const completed = rows.filter((r) => r.status === 'completed').length;
    const { maxConnections, peakTotal } = this.observer;
    const options = { ...o } as Partial<FleetOptions>;
    delete options.log;
    return {
      ok: checks.every((c) => c.ok),
      options: options as Omit<FleetOptions, 'log'>,
      checks,
      metrics: {
        samples,
        wallS,
        sessionsPerMin: completed / (wallS / 60),
        hosts: hosts.hosts.map((h, i) => ({
          host: i,
          name: h.name,
          address: h.address,
          fault: faultOf(i),
          maxConnections: (maxConnections.get(h.address) ?? 0) + (this.bouncer?.maxByHost.get(h.address) ?? 0),
          idleStatementsPerS: idle.perHost.get(h.address) ?? 0,
          ended: rows.filter((r) => r.worker && hostOf(r.worker) === i).length,
        })),
        peakConnections: peakTotal,
        idleXactPerS: idle.totalXactPerS,
        idleXactPerWorkerPerS: live > 0 ? idle.totalXactPerS / live : 0,
      },
      faults,
      dir: o.keep ? this.dir : null,
      polar: polarVersion(),
    };
  }
}

/** The commit, dirty or not, and dist/'s build time: a report says what it measured, and dist/ may be newer or older than the commit. */
function polarVersion(): string {
  const root = fileURLToPath(new URL('../../../', import.meta.url));
  const git = (...args: string[]) => {
    try {
      return execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return '';
    }
  };
  const dirty = git('status', '--porcelain', '--untracked-files=no', '--', 'src') !== '';
  let built = 'not built';
  try {
    built = `built ${fs.statSync(path.join(root, 'dist', 'cli', 'index.js')).mtime.toISOString()}`;
  } catch {
    /* no dist */
  }
  return `${git('rev-parse', '--short', 'HEAD') || 'unknown commit'}${dirty ? ' + uncommitted changes in src/' : ''}, dist/ ${built}`;
}

/** Polls `ready` every 200 ms; throws what `stopIf` says once it says something. No deadline: the caller's timeout is the net. */
async function until(what: string, ready: () => boolean, stopIf: () => string | null): Promise<void> {
  for (;;) {
    if (ready()) return;
    const stop = stopIf();
    if (stop) throw new Error(`gave up waiting for ${what}: ${stop}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
