import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { migrateTo } from './db.js';
import { MIGRATIONS } from './migrations.js';
import { Store } from './store.js';
import { removeTree } from '../../test/support/remove-tree.js';

const dirs: string[] = [];
const stores: Store[] = [];

function tempDb(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-audit-'));
  dirs.push(dir);
  return path.join(dir, 'polar.db');
}

afterEach(() => {
  for (const s of stores.splice(0)) s.close();
  for (const d of dirs.splice(0)) removeTree(d);
});

const entry = (at: number, claimedSession: string | null, reason = 'bad-secret') => ({
  at,
  method: 'POST',
  path: '/s/x/v1/chat/completions',
  claimedSession,
  reason,
  remote: '127.0.0.1',
  requestHeaders: { authorization: '[redacted]' },
});

describe('audit table (migration 10)', () => {
  it('a database written before it gains the table on open; its sessions and calls are untouched', () => {
    const file = tempDb();
    const db = new Database(file);
    migrateTo(db, 9);
    db.prepare(`INSERT INTO sessions (id, created_at) VALUES ('s', 1)`).run();
    db.close();
    const store = Store.open(file);
    stores.push(store);
    expect(store.db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    expect(store.sessions.get('s')).toBeTruthy();
    expect(store.audit.list()).toEqual([]);
  });

  it('records refusals apart from sessions and lists them newest first, by session and time', () => {
    const store = Store.open(tempDb());
    stores.push(store);
    store.audit.record(entry(1000, 'victim'));
    store.audit.record(entry(2000, null, 'no-key'));
    store.audit.record(entry(3000, 'victim', 'wrong-session'));
    expect(store.audit.list().map((r) => r.at)).toEqual([3000, 2000, 1000]);
    expect(store.audit.list({ session: 'victim' }).map((r) => r.reason)).toEqual(['wrong-session', 'bad-secret']);
    expect(store.audit.list({ since: 2000, limit: 1 })).toMatchObject([
      { at: 3000, claimedSession: 'victim', requestHeaders: { authorization: '[redacted]' } },
    ]);
    expect(store.audit.count(2000)).toBe(2);
    expect(store.sessions.list()).toEqual([]);
    expect(store.sessions.get('victim')).toBeUndefined();
  });

  it('a read-only store over a file without the table reads it as empty', () => {
    const file = tempDb();
    const db = new Database(file);
    migrateTo(db, 9);
    db.close();
    fs.chmodSync(file, 0o400);
    const store = Store.open(file, { readonly: true });
    stores.push(store);
    // Root can write anyway and then reconcileFile migrates it; either way the answer is the same.
    expect(store.audit.list()).toEqual([]);
    expect(store.audit.count()).toBe(0);
  });
});
