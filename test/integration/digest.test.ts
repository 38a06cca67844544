import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUNDLED_QWEN3 } from '../../src/core/bundled-tokenizer.js';
import { migrateTo } from '../../src/store/db.js';
import { Store } from '../../src/store/store.js';
import { packUint32 } from '../../src/core/token-packing.js';
import { digestOfTokens } from '../../src/core/token-digest.js';
import { recordMixedSession } from '../support/mixed-session.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';

/**
 * Each call's token data carries a digest taken at capture, and verify-faithfulness recomputes it:
 * a planted change to the stored ids or logprobs — one flipped id in the prompt or the reply, a
 * swapped pair, a logprob changed in its last bit, an array cut short — fails verification, with no
 * tokenizer, on a database recorded by this polar and on one written as polar wrote them before
 * digests existed (schema 6) and then upgraded.
 */
const BIN = path.resolve(__dirname, '../../bin/polar.js');
const run = promisify(execFile);
let upstream: ReferenceUpstream;
let t: TestProxy;
let tito: TestProxy;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  t = await startTestProxy(upstream.url);
  await recordMixedSession(t, upstream, 'rec');
  tito = await startTestProxy(upstream.url, { upstreamKind: 'vllm-tito', upstreamOptions: { tokenizer: BUNDLED_QWEN3 }, defaultSession: 'tito' });
  const client = new OpenAI({ baseURL: tito.proxy.baseUrl('tito'), apiKey: 'x', maxRetries: 0 });
  const first = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Say something about café and 日本語.' }] });
  await client.chat.completions.create({
    model: 'm',
    messages: [{ role: 'user', content: 'Say something about café and 日本語.' }, first.choices[0]!.message, { role: 'user', content: 'Again.' }],
  });
});
afterAll(async () => {
  await t?.close();
  await tito?.close();
  await upstream?.close();
});

async function verify(
  db: string,
  extra: string[] = [],
): Promise<{ code: number; out: { ok: boolean; violations: { check: string; requestId?: string; message: string }[]; textChecked?: number } }> {
  try {
    const { stdout } = await run(process.execPath, [BIN, 'verify-faithfulness', '--db', db, '--json', ...extra]);
    return { code: 0, out: JSON.parse(stdout) };
  } catch (err) {
    const e = err as { code: number; stdout: string };
    return { code: e.code, out: JSON.parse(e.stdout) };
  }
}

/** A copy of the database, closed and checkpointed, to corrupt. */
function copyOf(src: string, name: string): string {
  const out = path.join(path.dirname(src), `${name}.db`);
  fs.rmSync(out, { force: true });
  const db = new Database(src, { readonly: true });
  db.exec(`VACUUM INTO '${out}'`);
  db.close();
  return out;
}

/** The same recording as polar wrote it before digests existed: schema 6, its columns only. */
function asSchema6(src: string, name: string): string {
  const out = path.join(path.dirname(src), `${name}.db`);
  fs.rmSync(out, { force: true });
  const db = new Database(out);
  migrateTo(db, 6);
  db.exec(`ATTACH '${src}' AS rec`);
  for (const table of ['owners', 'sessions', 'requests', 'request_bodies']) {
    const cols = (db.prepare(`SELECT name FROM pragma_table_info('${table}')`).pluck().all() as string[]).join(', ');
    db.exec(`INSERT INTO main.${table} (${cols}) SELECT ${cols} FROM rec.${table}`);
  }
  db.exec('DETACH rec');
  // Schema 6 kept every prompt and body whole: write them so, as read back through the store.
  const store = Store.open(src, { readonly: true });
  const ids = db.prepare('SELECT id FROM requests').pluck().all() as string[];
  for (const id of ids) {
    const row = store.requests.get(id)!;
    db.prepare('UPDATE requests SET prompt_ids = ? WHERE id = ?').run(row.promptIds ? packUint32(row.promptIds) : null, id);
    db.prepare('UPDATE request_bodies SET original_request = ?, upstream_request = ? WHERE request_id = ?').run(row.originalRequest, row.upstreamRequest, id);
  }
  store.close();
  db.close();
  return out;
}

/**
 * Corruptions planted where the database keeps the bytes, whatever its layout: in the stored
 * prompt ids (however much of the prompt the row holds itself), the sampled ids, the logprobs.
 */
type Blobs = { prompt_ids: Buffer; sampled_ids: Buffer; logprobs: Buffer };
const CORRUPTIONS: { name: string; apply(b: Blobs): Partial<Blobs> }[] = [
  { name: 'one prompt id flipped', apply: (b) => ({ prompt_ids: flipBit(b.prompt_ids, b.prompt_ids.length - 4) }) },
  { name: 'one sampled id flipped', apply: (b) => ({ sampled_ids: flipBit(b.sampled_ids, 0) }) },
  {
    name: 'two sampled ids swapped',
    apply: (b) => {
      const ids = b.sampled_ids;
      let i = 4;
      while (i < ids.length && ids.readUInt32LE(i) === ids.readUInt32LE(i - 4)) i += 4;
      const out = Buffer.from(ids);
      out.writeUInt32LE(ids.readUInt32LE(i), i - 4);
      out.writeUInt32LE(ids.readUInt32LE(i - 4), i);
      return { sampled_ids: out };
    },
  },
  { name: 'a logprob changed in its last bit', apply: (b) => ({ logprobs: flipBit(b.logprobs, 8) }) },
  { name: 'the prompt cut short', apply: (b) => ({ prompt_ids: b.prompt_ids.subarray(0, b.prompt_ids.length - 4) }) },
  { name: 'the logprobs cut short', apply: (b) => ({ logprobs: b.logprobs.subarray(0, b.logprobs.length - 8) }) },
];

function flipBit(buf: Buffer, at: number): Buffer {
  const out = Buffer.from(buf);
  out[at]! ^= 1;
  return out;
}

function corrupt(file: string, requestId: string, c: (typeof CORRUPTIONS)[number]): void {
  const db = new Database(file);
  const blobs = db.prepare('SELECT prompt_ids, sampled_ids, logprobs FROM requests WHERE id = ?').get(requestId) as Blobs;
  for (const [column, value] of Object.entries(c.apply(blobs))) db.prepare(`UPDATE requests SET ${column} = ? WHERE id = ?`).run(value, requestId);
  db.close();
}

describe('capture digests', () => {
  it('every call with tokens has a digest; an untouched recording verifies', async () => {
    const rows = t.store.requests.tokens('rec');
    expect(rows.filter((r) => r.promptIds).every((r) => /^[0-9a-f]{64}$/.test(r.tokenDigest!))).toBe(true);
    const clean = copyOf(t.dbPath, 'clean');
    expect((await verify(clean)).code).toBe(0);
  });

  describe.each(['recorded by this polar', 'written at schema 6 and upgraded'])('a database %s', (kind) => {
    const source = () => (kind.startsWith('recorded') ? copyOf(t.dbPath, 'src-now') : asSchema6(t.dbPath, 'src-6'));

    it.each(CORRUPTIONS.map((c) => [c.name, c] as const))('%s: verify-faithfulness fails, without a tokenizer, naming the call', async (_name, c) => {
      const db = source();
      const clean = await verify(db);
      expect(clean.code, JSON.stringify(clean.out.violations.slice(0, 3))).toBe(0);
      // A call in the middle of the main agent's chain: the one later calls build on.
      const target = t.store.requests.list('rec').filter((r) => r.agentId === 'main' && r.status === 'ok')[1]!.id;
      corrupt(db, target, c);
      const r = await verify(db);
      expect(r.code).toBe(1);
      expect(r.out.violations.filter((v) => v.check === 'digest').map((v) => v.requestId)).toContain(target);
      fs.rmSync(db, { force: true });
    });
  });

  it('a token-in session verifies its text with the tokenizer it recorded, without --tokenizer', async () => {
    expect(tito.store.sessions.get('tito')!.metadata.tokenizer).toBe(BUNDLED_QWEN3);
    const db = copyOf(tito.dbPath, 'tito');
    const ok = await verify(db);
    expect(ok.code).toBe(0);
    expect(ok.out.textChecked).toBe(1);
    // Change a sampled id and recompute the digest to match (as a careless rewrite would): only the
    // text check can see that the ids no longer decode to the reply the harness received.
    // The session's last call: no later call is stored against it.
    const call = tito.store.requests.list('tito').at(-1)!;
    const row = tito.store.requests.get(call.id)!;
    const sampled = [...row.sampledIds!];
    const k = sampled.length - 3; // inside the answer's text, before its end-of-turn
    sampled[k] = sampled[k] === 9707 ? 9708 : 9707;
    const raw = new Database(db);
    raw
      .prepare('UPDATE requests SET sampled_ids = ?, token_digest = ? WHERE id = ?')
      .run(packUint32(sampled), digestOfTokens({ promptIds: row.promptIds, sampledIds: sampled, logprobs: row.logprobs }), call.id);
    raw.close();
    const bad = await verify(db);
    expect(bad.code).toBe(1);
    expect(bad.out.violations.map((v) => v.check)).toContain('text');
    expect(bad.out.violations.map((v) => v.check)).not.toContain('digest');
  });
});
