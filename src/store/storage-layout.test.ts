import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { migrateTo } from './db.js';
import { MIGRATIONS } from './migrations.js';
import type { RequestStart } from './requests.js';
import { Store } from './store.js';
import { packUint32 } from '../core/token-packing.js';

/**
 * An agent session of n turns as harnesses make it: each body is the previous one with the new
 * turn added before the fields that follow `messages`, each prompt the previous prompt + its answer
 * + the new turn. Stored as deltas, it reads back exactly, and its size grows linearly.
 */
const TOOLS = `"tools":[${Array.from({ length: 30 }, (_, i) => `{"name":"tool_${i}","description":"${'describes the tool — naïve café 日本語 '.repeat(8)}"}`).join(',')}]`;
function turn(i: number): string {
  return `{"role":"user","content":"tool output ${i}: ${'src/módulo/file.ts 🚀 ok '.repeat(80)}"},{"role":"assistant","content":"step ${i}"}`;
}
function session(turns: number) {
  const calls: { original: string; upstream: string; prompt: number[]; sampled: number[]; logprobs: number[] }[] = [];
  let messages = '{"role":"system","content":"You are an agent."}';
  let prompt = Array.from({ length: 3000 }, (_, k) => (k * 7919) % 151000);
  for (let i = 0; i < turns; i++) {
    messages += `,${turn(i)}`;
    const sampled = Array.from({ length: 50 }, (_, k) => (i * 131 + k * 17) % 151000);
    const original = `{"model":"claude","messages":[${messages}],${TOOLS},"stream":true}`;
    const upstream = `{"model":"qwen","messages":[${messages}],${TOOLS},"logprobs":true}`;
    calls.push({ original, upstream, prompt: [...prompt], sampled, logprobs: sampled.map((_, k) => -((k + 1) / 7.3)) });
    prompt = [...prompt, ...sampled, ...Array.from({ length: 600 }, (_, k) => (i * 997 + k) % 151000)];
  }
  return calls;
}

function start(sessionId: string, id: string, agentId = 'main'): Omit<RequestStart, 'originalRequest' | 'upstreamRequest'> {
  return {
    id,
    sessionId,
    agentId,
    provider: 'anthropic-messages',
    method: 'POST',
    path: '/v1/messages',
    startedAt: Date.now(),
    streamed: false,
    requestHeaders: {},
    requestedModel: 'a',
    servedModel: 'b',
    toolCount: 30,
  };
}

function record(store: Store, sessionId: string, turns: number, agentId = 'main') {
  const calls = session(turns);
  calls.forEach((c, i) => {
    const id = `${sessionId}-${agentId}-${i}`;
    store.requests.begin(start(sessionId, id, agentId));
    store.requests.writeBodies(id, { originalRequest: c.original, upstreamRequest: c.upstream });
    store.requests.end(id, {
      endedAt: Date.now(),
      status: 'ok',
      httpStatus: 200,
      reply: '{}',
      tokens: { source: 'upstream', promptIds: c.prompt, sampledIds: c.sampled, logprobs: c.logprobs },
    });
  });
  return calls;
}

function bytes(db: Database.Database): number {
  const used = (db.pragma('page_count', { simple: true }) as number) - (db.pragma('freelist_count', { simple: true }) as number);
  return used * (db.pragma('page_size', { simple: true }) as number);
}

const tmp = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'polar-layout-')), 'polar.db');

describe('storage linear in a session’s length', () => {
  it('every call reads back exactly: prompt, sampled ids, logprobs and both bodies, by call and by session', () => {
    const store = Store.open(':memory:');
    store.sessions.ensure('s');
    const calls = record(store, 's', 12);
    const rows = store.requests.tokens('s');
    calls.forEach((c, i) => {
      const row = store.requests.get(`s-main-${i}`)!;
      expect(row.promptIds).toEqual(c.prompt);
      expect(rows[i]!.promptIds).toEqual(c.prompt);
      expect(row.sampledIds).toEqual(c.sampled);
      expect(row.logprobs).toEqual(c.logprobs);
      expect(row.originalRequest).toBe(c.original);
      expect(row.upstreamRequest).toBe(c.upstream);
      expect(rows[i]!.toolCount).toBe(30);
    });
    // Later rows hold a reference and only what is new.
    const raw = store.db
      .prepare(
        `SELECT r.prompt_base, length(r.prompt_ids) AS p, b.original_base, length(b.original_request) AS o FROM requests r JOIN request_bodies b ON b.request_id = r.id WHERE r.id = 's-main-11'`,
      )
      .get() as Record<string, unknown>;
    expect(raw).toMatchObject({ prompt_base: 's-main-10', original_base: 's-main-10' });
    expect(raw.p).toBe(600 * 4);
    expect(raw.o as number).toBeLessThan(turn(11).length + 8);
  });

  it('40 turns cost about four times 10 turns, not sixteen', () => {
    const sizes = [10, 40].map((turns) => {
      const file = tmp();
      const store = Store.open(file);
      store.sessions.ensure('s');
      const before = bytes(store.db);
      record(store, 's', turns);
      const size = bytes(store.db) - before;
      store.close();
      return size;
    });
    expect(sizes[1]! / sizes[0]!).toBeLessThan(5);
  });

  it('bytes bodies (the proxy’s) read back exactly when a conversation is compacted and grows past its longest again', () => {
    // The write side keeps each agent's latest body and sequence in memory it reuses: a shorter
    // call is written into it, then longer ones outgrow it. Each call is stored against the one
    // before, whatever its length; the caller's buffers are reused too, as a reader's would be.
    const store = Store.open(':memory:');
    store.sessions.ensure('s');
    const full = session(14);
    const compacted = session(2);
    const calls = [...full.slice(0, 6), compacted[1]!, ...full.slice(2, 14)].map((c, i) => ({ ...c, sampled: [...c.sampled, i] }));
    calls.forEach((c, i) => {
      const id = `s-main-${i}`;
      const original = Buffer.from(c.original);
      const upstream = Buffer.from(c.upstream);
      store.requests.begin(start('s', id));
      store.requests.writeBodies(id, { originalRequest: original, upstreamRequest: upstream });
      const prompt = Uint32Array.from(c.prompt);
      store.requests.end(id, {
        endedAt: Date.now(),
        status: 'ok',
        httpStatus: 200,
        reply: '{}',
        tokens: { source: 'upstream', promptIds: prompt, sampledIds: c.sampled, logprobs: c.logprobs },
      });
      original.fill(0x20);
      upstream.fill(0x20);
      prompt.fill(7);
    });
    calls.forEach((c, i) => {
      const row = store.requests.get(`s-main-${i}`)!;
      expect(row.originalRequest).toBe(c.original);
      expect(row.upstreamRequest).toBe(c.upstream);
      expect(row.promptIds).toEqual(c.prompt);
      expect(row.sampledIds).toEqual(c.sampled);
    });
    // The calls after the compacted one are stored against it and each other, not whole.
    const based = store.db
      .prepare(
        `SELECT count(*) AS n FROM requests r JOIN request_bodies b ON b.request_id = r.id WHERE r.prompt_base IS NOT NULL AND b.original_base IS NOT NULL`,
      )
      .get() as { n: number };
    expect(based.n).toBeGreaterThanOrEqual(calls.length - 3);
  });

  it('agents are stored against their own previous call, never each other’s', () => {
    const store = Store.open(':memory:');
    store.sessions.ensure('s');
    const a = record(store, 's', 3, 'main');
    const b = record(store, 's', 3, 'sub');
    const bases = store.db.prepare(`SELECT id, prompt_base FROM requests ORDER BY id`).all() as { id: string; prompt_base: string | null }[];
    for (const r of bases) if (r.prompt_base) expect(r.prompt_base.split('-')[1]).toBe(r.id.split('-')[1]);
    expect(store.requests.get('s-sub-2')!.promptIds).toEqual(b[2]!.prompt);
    expect(store.requests.get('s-main-2')!.originalRequest).toBe(a[2]!.original);
  });

  it('a database written whole (schema 7) converts on open, reads back the same, and shrinks', () => {
    const file = tmp();
    const db = new Database(file);
    migrateTo(db, 7);
    db.prepare(`INSERT INTO sessions (id, created_at) VALUES ('old', 1)`).run();
    const calls = session(20);
    calls.forEach((c, i) => {
      db.prepare(`INSERT INTO requests (id, session_id, agent_id, seq, provider, method, path, started_at, status, token_source, prompt_ids, sampled_ids, logprobs, prompt_token_count, sampled_token_count)
                  VALUES (?, 'old', 'main', ?, 'anthropic-messages', 'POST', '/v1/messages', 1, 'ok', 'upstream', ?, ?, ?, ?, ?)`).run(
        `c${i}`,
        i + 1,
        packUint32(c.prompt),
        packUint32(c.sampled),
        Buffer.from(new Float64Array(c.logprobs).buffer),
        c.prompt.length,
        c.sampled.length,
      );
      db.prepare(`INSERT INTO request_bodies (request_id, original_request, upstream_request) VALUES (?, ?, ?)`).run(`c${i}`, c.original, c.upstream);
    });
    const whole = bytes(db);
    db.close();
    const store = Store.open(file);
    expect(store.db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    calls.forEach((c, i) => {
      const row = store.requests.get(`c${i}`)!;
      expect(row.promptIds).toEqual(c.prompt);
      expect(row.originalRequest).toBe(c.original);
      expect(row.upstreamRequest).toBe(c.upstream);
    });
    // Tool counts that used to be read from the body at query time were stored first.
    expect(store.requests.tokens('old').every((r) => r.toolCount === 30)).toBe(true);
    store.db.exec('VACUUM');
    expect(bytes(store.db)).toBeLessThan(whole / 3);
    store.close();
  });
});
