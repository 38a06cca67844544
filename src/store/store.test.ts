import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS } from './migrations.js';
import type { RequestStart } from './requests.js';
import { Store } from './store.js';

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
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
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
    expect(row).toMatchObject({ originalRequest: '{"model":"a"}', upstreamRequest: '{"model":"b"}', status: 'ok', tokenSource: 'upstream', promptIds: [1, 2, 3], sampledIds: [9, 151645], logprobs: [-0.5, -1e-7], promptTokenCount: 3, sampledTokenCount: 2, usage: { prompt_tokens: 3, completion_tokens: 2 } });
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
