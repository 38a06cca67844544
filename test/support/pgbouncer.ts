import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { removeTree } from './remove-tree.js';
import { waitUntil } from './wait.js';

/**
 * Debian's PgBouncer (`apt-get install pgbouncer`; .ci/run installs it, best effort) in front of a
 * test PostgreSQL (postgres.ts), in transaction mode, the way a fleet of many workers would reach
 * one server. Tests that need it skip with `PGBOUNCER_MISSING` as their reason where it is absent.
 */
export const PGBOUNCER_BIN = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => fs.existsSync(p)) ?? null;
export const PGBOUNCER_MISSING = PGBOUNCER_BIN ? null : "Debian's pgbouncer is not installed (apt-get install -y pgbouncer)";

export interface TestPgBouncer {
  /** `directUrl` (a URL of the test PostgreSQL) through PgBouncer: same user, password and database. */
  url(directUrl: string): string;
  /** The last lines of PgBouncer's log, for a failure's message. */
  log(): string;
  close(): Promise<void>;
}

export interface PgBouncerOptions {
  /** Server connections PgBouncer opens per database and user (`default_pool_size`). */
  poolSize: number;
  /** Client connections it accepts in all (`max_client_conn`). */
  maxClientConn?: number;
}

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

/** PgBouncer will not run as root: as root it runs as the `postgres` user the test PostgreSQL made. */
function runAs(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string) => spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
  if (id('-u').status !== 0) throw new Error('running as root, PgBouncer needs the postgres user: start the test PostgreSQL (startTestPostgres) first');
  return { uid: Number(id('-u').stdout.trim()), gid: Number(id('-g').stdout.trim()) };
}

/**
 * Starts PgBouncer on a free loopback port for the server that `directUrl` names (any database of
 * it), `pool_mode = transaction`, md5 logins with the URL's user and password. Resolves once a
 * query goes through it; a start that fails says why with PgBouncer's log.
 */
export async function startPgBouncer(directUrl: string, options: PgBouncerOptions): Promise<TestPgBouncer> {
  if (!PGBOUNCER_BIN) throw new Error(PGBOUNCER_MISSING!);
  const direct = new URL(directUrl);
  const user = decodeURIComponent(direct.username);
  const password = decodeURIComponent(direct.password);
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-pgbouncer-'));
  const owner = runAs();
  const logFile = path.join(dir, 'pgbouncer.log');
  const ini = [
    '[databases]',
    `* = host=${direct.hostname} port=${direct.port}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = md5',
    `auth_file = ${path.join(dir, 'users.txt')}`,
    'pool_mode = transaction',
    `default_pool_size = ${options.poolSize}`,
    'min_pool_size = 0',
    'reserve_pool_size = 0',
    `max_client_conn = ${options.maxClientConn ?? 200}`,
    'ignore_startup_parameters = extra_float_digits,options',
    `logfile = ${logFile}`,
    `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
    '',
  ].join('\n');
  fs.writeFileSync(path.join(dir, 'pgbouncer.ini'), ini);
  fs.writeFileSync(path.join(dir, 'users.txt'), `"${user}" "${password}"\n`, { mode: 0o600 });
  if (owner) for (const f of ['', 'pgbouncer.ini', 'users.txt']) fs.chownSync(path.join(dir, f), owner.uid, owner.gid);
  let child: ChildProcess | null = spawn(PGBOUNCER_BIN, [path.join(dir, 'pgbouncer.ini')], { ...(owner ?? {}), stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const log = () => {
    const text = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '';
    return `${text}${stderr}`.trim().split('\n').slice(-15).join('\n');
  };
  const url = (target: string) => {
    const u = new URL(target);
    u.hostname = '127.0.0.1';
    u.port = String(port);
    return u.toString();
  };
  const close = async () => {
    const running = child;
    child = null;
    if (running && running.exitCode === null && running.signalCode === null) {
      const exited = new Promise((r) => running.once('exit', r));
      running.kill('SIGINT');
      await exited;
    }
    removeTree(dir);
  };
  try {
    const started = child;
    await waitUntil(
      'PgBouncer to answer a query',
      async () => {
        const client = new pg.Client({ connectionString: url(directUrl), connectionTimeoutMillis: 2000 });
        try {
          await client.connect();
          await client.query('SELECT 1');
          return true;
        } catch {
          return false;
        } finally {
          await client.end().catch(() => undefined);
        }
      },
      { everyMs: 100, stopIf: () => (started.exitCode !== null ? `pgbouncer exited (${started.exitCode}):\n${log()}` : null) },
    );
  } catch (err) {
    await close();
    throw err;
  }
  return { url, log, close };
}
