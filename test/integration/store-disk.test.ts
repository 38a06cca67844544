import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { PolarError } from '../../src/core/errors.js';
import { Store } from '../../src/store/store.js';
import { mountable, mountTmpfs, type Tmpfs } from '../support/tmpfs.js';

/**
 * A database on a read-only mount or a full disk, for real (a small tmpfs): polar names the file,
 * the cause and the fix, with a stable code and no stack trace.
 */
const BIN = path.resolve(__dirname, '../../bin/polar.js');
const run = promisify(execFile);
const mounts: Tmpfs[] = [];

afterEach(() => {
  for (const m of mounts.splice(0)) m.unmount();
});

function disk(sizeKiB: number): Tmpfs {
  const m = mountTmpfs(sizeKiB);
  mounts.push(m);
  return m;
}

async function polar(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1' } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

function openError(file: string, options?: { readonly?: boolean }): PolarError {
  try {
    Store.open(file, options).close();
  } catch (err) {
    expect(err).toBeInstanceOf(PolarError);
    return err as PolarError;
  }
  throw new Error(`${file} opened`);
}

describe.skipIf(mountable !== null)('a database on a read-only mount or a full disk', () => {
  it('a read-only mount: writers and readers are told the file, the cause and the fix', async () => {
    const m = disk(4096);
    const file = path.join(m.dir, 'polar.db');
    const store = Store.open(file);
    store.sessions.ensure('s1', { upstreamUrl: 'http://u', servedModel: 'm', metadata: {} });
    store.close();
    m.readOnly();
    for (const options of [undefined, { readonly: true }]) {
      const err = openError(file, options);
      expect(err.code).toBe('POLAR_STORE_WRITE');
      expect(err.message).toContain(`read-only file system: ${file}`);
      expect(err.message).toMatch(/remount the disk read-write, or copy the file/);
    }
    // As a user meets it: no POLAR_INTERNAL, no stack trace.
    const listed = await polar(['sessions', '--db', file]);
    expect(listed.code).toBe(1);
    expect(listed.stderr).toContain(`error[POLAR_STORE_WRITE]: read-only file system: ${file}`);
    expect(listed.stderr).not.toMatch(/\n\s+at /);
  });

  it('a new database on a read-only mount', () => {
    const m = disk(1024);
    m.readOnly();
    const file = path.join(m.dir, 'polar.db');
    expect(openError(file).message).toContain(`read-only file system: ${file}`);
  });

  it('a full disk at open: "disk full: <file>", status 507', () => {
    const m = disk(256);
    m.fill();
    const file = path.join(m.dir, 'polar.db');
    const err = openError(file);
    expect(err).toMatchObject({ code: 'POLAR_STORE_WRITE', status: 507 });
    expect(err.message).toContain(`disk full: ${file}`);
  });
});
