import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { migrateTo } from './db.js';
import { MIGRATIONS } from './migrations.js';
import { currentProcess } from './owner.js';
import { OwnersTable } from './owners.js';
import { SessionsTable } from './sessions.js';
import { RequestsTable, type RequestStart } from './requests.js';
import { Store } from './store.js';
import { removeTree } from '../../test/support/remove-tree.js';

const dirs: string[] = [];
const stores: Store[] = [];

function tempDb(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-store-'));
  dirs.push(dir);
  return path.join(dir, 'polar.db');
}

function open(file: string): Store {
  const s = Store.open(file);
  stores.push(s);
  return s;
}

afterEach(() => {
  for (const s of stores.splice(0)) s.close();
  for (const d of dirs.splice(0)) removeTree(d);
});

function start(sessionId: string, id: string): RequestStart {
  return {
    id,
    sessionId,
    agentId: 'main',
    provider: 'openai-chat',
    method: 'POST',
    path: '/v1/chat/completions',
    startedAt: Date.now(),
    streamed: false,
    requestHeaders: { 'content-type': 'application/json' },
    originalRequest: '{}',
    upstreamRequest: '{}',
    requestedModel: 'a',
    servedModel: 'b',
  };
}

describe.each([
  ['in memory', () => ':memory:'],
  ['on a file', tempDb],
])('Store (%s)', (_name, location) => {
  it('migrates to the current schema version', () => {
    const store = open(location());
    expect(store.db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
  });

  it('records a call from begin to end with its token blobs', () => {
    const store = open(location());
    store.sessions.ensure('s1', { harness: 'custom', servedModel: 'b' });
    expect(store.requests.begin(start('s1', 'r1'))).toBe(1);
    expect(store.requests.list('s1')[0]).toMatchObject({ status: 'in_progress', seq: 1 });
    store.requests.writeBodies('r1', { originalRequest: '{"model":"a"}', upstreamRequest: '{"model":"b"}' });
    store.requests.end('r1', {
      endedAt: Date.now(),
      status: 'ok',
      httpStatus: 200,
      reply: '{"ok":true}',
      finishReason: 'stop',
      usage: { prompt_tokens: 3, completion_tokens: 2 },
      tokens: { source: 'upstream', promptIds: [1, 2, 3], sampledIds: [9, 151645], logprobs: [-0.5, -1e-7] },
    });
    const row = store.requests.get('r1')!;
    expect(row).toMatchObject({
      originalRequest: '{"model":"a"}',
      upstreamRequest: '{"model":"b"}',
      status: 'ok',
      tokenSource: 'upstream',
      promptIds: [1, 2, 3],
      sampledIds: [9, 151645],
      logprobs: [-0.5, -1e-7],
      promptTokenCount: 3,
      sampledTokenCount: 2,
      usage: { prompt_tokens: 3, completion_tokens: 2 },
    });
    expect(store.sessions.summary('s1')).toMatchObject({ requests: 1, failed: 0, promptTokens: 3, sampledTokens: 2 });
  });

  it('allocates sequence numbers per session', () => {
    const store = open(location());
    store.sessions.ensure('a');
    store.sessions.ensure('b');
    expect([store.requests.begin(start('a', 'x1')), store.requests.begin(start('b', 'y1')), store.requests.begin(start('a', 'x2'))]).toEqual([1, 1, 2]);
  });

  it('ends a session once; the first status wins', () => {
    const store = open(location());
    store.sessions.ensure('s');
    expect(store.sessions.end('s', 'timeout')).toBe(true);
    expect(store.sessions.end('s', 'completed')).toBe(false);
    expect(store.sessions.get('s')!.status).toBe('timeout');
  });

  it('records a tokenizer on a session made without one, and never replaces one already named', () => {
    const store = open(location());
    store.sessions.ensure('made-by-run', { metadata: { prompt: 'p' } });
    store.sessions.ensure('named', { metadata: { tokenizer: '/models/a' } });
    store.sessions.recordTokenizer('made-by-run', '/models/b');
    store.sessions.recordTokenizer('named', '/models/b');
    expect(store.sessions.get('made-by-run')!.metadata).toEqual({ prompt: 'p', tokenizer: '/models/b' });
    expect(store.sessions.get('named')!.metadata).toEqual({ tokenizer: '/models/a' });
  });

  it('refuses a request for a session that does not exist', () => {
    const store = open(location());
    expect(() => store.requests.begin(start('nope', 'r'))).toThrow(/FOREIGN KEY/);
  });
});

describe('Store on a shared file', () => {
  it('creates the database 0600 and keeps it so with WAL files', () => {
    const file = tempDb();
    const store = open(file);
    store.sessions.ensure('s');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(store.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(fs.statSync(`${file}-wal`).mode & 0o777).toBe(0o600);
  });

  it('two connections (two polar processes) share one file with monotonic sequence numbers', () => {
    const file = tempDb();
    const a = open(file);
    const b = open(file);
    a.sessions.ensure('shared');
    const seqs = [a, b, a, b].map((s, i) => s.requests.begin(start('shared', `r${i}`)));
    expect(seqs).toEqual([1, 2, 3, 4]);
    expect(b.requests.list('shared').map((r) => r.id)).toEqual(['r0', 'r1', 'r2', 'r3']);
  });

  it('reopening an existing file does not re-run migrations', () => {
    const file = tempDb();
    open(file).sessions.ensure('keep');
    const again = open(file);
    expect(again.sessions.get('keep')).toBeDefined();
  });

  it('a database from a newer polar is refused with advice', () => {
    const file = tempDb();
    const s = open(file);
    s.db.pragma(`user_version = ${MIGRATIONS.length + 1}`);
    expect(() => Store.open(file)).toThrow(/upgrade polar/);
  });
});

describe('owners and reconciliation (issue 10)', () => {
  const here = currentProcess();

  it('marks what a dead owner left unfinished interrupted; a live owner, a reused pid and another host are told apart', () => {
    const file = tempDb();
    const setup = open(file);
    const owners = new OwnersTable(setup.db);
    const dead = owners.register({ ...here, pid: 2 ** 22 + 7 }); // above Linux's pid_max default
    const reused = owners.register({ ...here, startTicks: (here.startTicks ?? 0) + 1 }); // this pid, another start time
    const alive = owners.register(here);
    const remote = owners.register({ ...here, host: 'another-machine', pid: 2 ** 22 + 8 });
    for (const [name, owner] of [
      ['dead', dead],
      ['reused', reused],
      ['alive', alive],
      ['remote', remote],
    ] as const) {
      new SessionsTable(setup.db, owner).ensure(`s-${name}`);
      new RequestsTable(setup.db, owner).begin(start(`s-${name}`, `r-${name}`));
    }
    const reader = open(file);
    const status = (name: string) => [reader.sessions.get(`s-${name}`)!.status, reader.requests.get(`r-${name}`)!.status];
    if (here.startTicks !== null) expect(status('reused')).toEqual(['interrupted', 'interrupted']);
    expect(status('dead')).toEqual(['interrupted', 'interrupted']);
    expect(status('alive')).toEqual(['active', 'in_progress']);
    expect(status('remote')).toEqual(['active', 'in_progress']);
    expect(reader.requests.get('r-dead')).toMatchObject({ errorCode: 'POLAR_INTERRUPTED', error: expect.stringMatching(/ended before it finished/) });
    expect(reader.reconciled.owners).toBe(here.startTicks !== null ? 2 : 1);
  });

  it('a checkpointed call keeps the tokens that arrived when it is interrupted', () => {
    const file = tempDb();
    const setup = open(file);
    const dead = new OwnersTable(setup.db).register({ ...here, pid: 2 ** 22 + 9 });
    new SessionsTable(setup.db, dead).ensure('s');
    const calls = new RequestsTable(setup.db, dead);
    calls.begin(start('s', 'r'));
    calls.checkpoint('r', { source: 'upstream', promptIds: [1, 2], sampledIds: [3], logprobs: [-0.25] }, 'data: {}\n\n');
    const row = open(file).requests.get('r')!;
    expect(row).toMatchObject({ status: 'interrupted', promptIds: [1, 2], sampledIds: [3], logprobs: [-0.25], reply: 'data: {}\n\n' });
  });

  it('a clean close completes the sessions it left open and ends its owner', () => {
    const file = tempDb();
    const s = Store.open(file);
    s.sessions.ensure('mine');
    s.close();
    const again = open(file);
    expect(again.sessions.get('mine')!.status).toBe('completed');
    expect(again.reconciled.owners).toBe(0);
  });

  it('an upgrade is all or nothing: a step that fails leaves the file at the version it had, not between', () => {
    const file = tempDb();
    const db = new Database(file);
    migrateTo(db, MIGRATIONS.length - 2);
    // The last migration creates this table: its step fails after the one before it has run.
    db.exec('CREATE TABLE audit (x)');
    db.close();
    expect(() => open(file)).toThrow(/audit already exists/);
    const after = new Database(file, { readonly: true });
    expect(after.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length - 2);
    after.close();
  });

  it('upgrading a database from before owners interrupts only leftovers over an hour old', () => {
    const file = tempDb();
    const db = new Database(file);
    migrateTo(db, 3);
    const now = Date.now();
    db.prepare(`INSERT INTO sessions (id, created_at) VALUES ('old', ?), ('new', ?)`).run(now - 7_200_000, now - 60_000);
    const insert = db.prepare(`INSERT INTO requests (id, session_id, seq, provider, method, path, started_at) VALUES (?, ?, 1, 'openai-chat', 'POST', '/', ?)`);
    insert.run('r-old', 'old', now - 7_200_000);
    insert.run('r-new', 'new', now - 60_000);
    db.close();
    const upgraded = open(file);
    expect(upgraded.db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    expect([upgraded.sessions.get('old')!.status, upgraded.requests.get('r-old')!.status]).toEqual(['interrupted', 'interrupted']);
    expect([upgraded.sessions.get('new')!.status, upgraded.requests.get('r-new')!.status]).toEqual(['active', 'in_progress']);
    expect(upgraded.db.pragma('foreign_key_check')).toEqual([]);
  });
});
