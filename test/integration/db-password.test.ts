import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgpassLookup, readPasswordFile, withoutPassword } from '../../src/store/postgres/password.js';
import { trainGrpoArgs, writeBareCheckout, writeTaskFile } from '../support/nemo-rl-train.js';
import { POLAR_BIN as BIN, polarCli } from '../support/polar-cli.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * A PostgreSQL password never needs the command line, and never reaches a child's argv: PGPASSWORD,
 * ~/.pgpass (by libpq's rules) and --db-password-file each open a real PostgreSQL server (embedded,
 * password authentication) with a --db URL that holds no password; a password typed into --db still
 * works and is warned about once; polar train hands the agent NeMo Gym starts a --db without it.
 */
const run = promisify(execFile);
let server: TestPostgres;
let url: string;
let bare: string;
let dir: string;

beforeAll(async () => {
  server = await startTestPostgres();
  url = await server.database('pwtest');
  bare = withoutPassword(url);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-pw-'));
}, patient(120_000));
afterAll(async () => {
  await server?.close();
  removeTree(dir);
});

/** `polar db migrate` with `env` in place of the user's PG* variables and home. */
async function migrate(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PG')));
  return polarCli(['db', 'migrate', ...args, '--json'], { env: { ...base, HOME: dir, POLAR_STATE_DIR: path.join(dir, 'state'), NO_COLOR: '1', ...env } });
}

describe('PostgreSQL passwords', () => {
  it('a --db without a password is refused by the server when polar has none', async () => {
    const r = await migrate(['--db', bare]);
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toMatch(/password/i);
  });

  it('PGPASSWORD opens it, with nothing on the command line and no warning', async () => {
    const r = await migrate(['--db', bare], { PGPASSWORD: 'polar-test' });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(/warning/);
  });

  it("~/.pgpass opens it (libpq rules: wildcards, escapes; a file others can read is ignored), without pg's deprecation warning", async () => {
    const pgpass = path.join(dir, '.pgpass');
    const port = new URL(url).port;
    fs.writeFileSync(pgpass, `# comment\nother-host:*:*:*:nope\n127.0.0.1:${port}:*:postgres:polar-test\n`, { mode: 0o600 });
    const r = await migrate(['--db', bare]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(/deprecat/i);
    fs.chmodSync(pgpass, 0o644);
    expect((await migrate(['--db', bare])).code).not.toBe(0);
    fs.rmSync(pgpass);
  });

  it('--db-password-file opens it; a file others can read is refused', async () => {
    const file = path.join(dir, 'pw');
    fs.writeFileSync(file, 'polar-test\n', { mode: 0o600 });
    const r = await migrate(['--db', bare, '--db-password-file', file]);
    expect(r.code, r.stderr).toBe(0);
    fs.chmodSync(file, 0o640);
    const loose = await migrate(['--db', bare, '--db-password-file', file]);
    expect(loose.code).not.toBe(0);
    expect(loose.stdout + loose.stderr).toMatch(/readable by other users .*chmod 600/);
  });

  it('a password inside --db still works for this process, with one warning that ps shows it', async () => {
    const r = await migrate(['--db', url]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr.match(/visible to every user of this machine \(ps\)/g)).toHaveLength(1);
  });

  it('polar train grpo gives the agent NeMo Gym starts a --db without the password, and the password in a 0600 file', async () => {
    const tasks = writeTaskFile(
      path.join(dir, 'tasks.jsonl'),
      ['a', 'b'].map((id) => ({ id, prompt: 'p', workspace: { empty: true }, evaluator: { type: 'session-completed' } })),
    );
    const checkout = writeBareCheckout(path.join(dir, 'RL'));
    const runDir = path.join(dir, 'run');
    await run(
      process.execPath,
      [BIN, ...trainGrpoArgs({ checkout, model: 'm', tasks, harness: ['--harness', 'custom', '--command', 'true'], runDir, db: url, extra: ['--dry-run'] })],
      { env: { ...process.env, PATH: '/usr/bin:/bin' } },
    );
    const app = fs.readFileSync(path.join(runDir, 'gym/responses_api_agents/polar_agent/app.py'), 'utf8');
    expect(app).not.toContain('polar-test');
    const argv = JSON.parse(/os\.execv\([^,]+, (\[.*\])\)/.exec(app)![1]!) as string[];
    expect(argv[argv.indexOf('--db') + 1]).toBe(bare);
    const file = argv[argv.indexOf('--db-password-file') + 1]!;
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(readPasswordFile(file)).toBe('polar-test');
    // What the agent will be started with opens the server.
    expect((await migrate(['--db', bare, '--db-password-file', file])).code).toBe(0);
  });
});

describe('the password file lookup', () => {
  it('matches host, port, database and user with * and backslash escapes; the first match wins', () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'polar-pgpass-')), 'pgpass');
    fs.writeFileSync(file, 'db\\:host:5432:*:alice:first\n*:*:*:alice:se\\:cond\n*:*:*:*:any\n', { mode: 0o600 });
    const env = { PGPASSFILE: file };
    expect(pgpassLookup('postgres://alice@h:5432/x', env)).toBe('se:cond');
    expect(pgpassLookup('postgres://bob@h/x', env)).toBe('any');
    fs.chmodSync(file, 0o604);
    expect(pgpassLookup('postgres://bob@h/x', env)).toBeNull();
  });
});
