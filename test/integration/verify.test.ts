import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packFloat64, packUint32 } from '../../src/core/token-packing.js';
import { Store } from '../../src/store/store.js';
import { reconstruct } from '../../src/trajectory/reconstruct.js';
import { getStrategy } from '../../src/trajectory/registry.js';
import type { Trajectory } from '../../src/trajectory/types.js';
import { verifySessions } from '../../src/trajectory/verify-sessions.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy } from '../support/start-proxy.js';
import { removeTree } from '../support/remove-tree.js';

const run = promisify(execFile);
const BIN = path.resolve(__dirname, '../../bin/polar.js');
let dir: string;
let db: string;
let upstream: ReferenceUpstream;

/** A session whose calls chain exactly (each prompt = the previous prompt + its answer + context). */
function recordChain(store: Store): void {
  store.sessions.ensure('chain');
  const calls = [
    { id: 'c1', prompt: [1, 2, 3], sampled: [10, 11, 12] },
    { id: 'c2', prompt: [1, 2, 3, 10, 11, 12, 4, 5], sampled: [13, 14] },
    { id: 'c3', prompt: [1, 2, 3, 10, 11, 12, 4, 5, 13, 14, 6], sampled: [15] },
  ];
  calls.forEach((c, i) => {
    store.requests.begin({
      id: c.id,
      sessionId: 'chain',
      agentId: 'main',
      provider: 'openai-chat',
      method: 'POST',
      path: '/v1/chat/completions',
      startedAt: i,
      streamed: false,
      requestHeaders: {},
      requestedModel: 'm',
      servedModel: 'm',
    });
    store.requests.writeBodies(c.id, { originalRequest: '{}', upstreamRequest: JSON.stringify({ tools: [{ type: 'function' }] }) });
    store.requests.end(c.id, {
      endedAt: i + 1,
      status: 'ok',
      httpStatus: 200,
      reply: '{}',
      finishReason: 'stop',
      usage: { prompt_tokens: c.prompt.length, completion_tokens: c.sampled.length },
      tokens: { source: 'upstream', promptIds: c.prompt, sampledIds: c.sampled, logprobs: c.sampled.map((_, k) => -0.123456789 * (k + 1) - i) },
    });
  });
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-verify-'));
  db = path.join(dir, 'polar.db');
  // Real recordings too: two turns through the proxy against the reference upstream.
  upstream = await startReferenceUpstream();
  const t = await startTestProxy(upstream.url);
  const client = new OpenAI({ baseURL: t.proxy.baseUrl('real'), apiKey: 'x', maxRetries: 0 });
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'user', content: 'hello' }];
  for (let i = 0; i < 2; i++) {
    const reply = await client.chat.completions.create({ model: 'm', messages });
    messages.push({ role: 'assistant', content: reply.choices[0]!.message.content ?? '' }, { role: 'user', content: `more ${i}` });
  }
  await t.proxy.close(1000);
  await t.upstream.close();
  t.store.close();
  fs.copyFileSync(t.dbPath, db);
  const store = Store.open(db);
  recordChain(store);
  store.close();
});

afterAll(async () => {
  await upstream?.close();
  removeTree(dir);
});

function tracesOf(file: string, strategy = 'prefix-merging'): Trajectory[] {
  const store = Store.open(file, { readonly: true });
  try {
    return [...reconstruct(store, { strategy: getStrategy(strategy) })];
  } finally {
    store.close();
  }
}

function violations(file: string, traces?: Trajectory[]) {
  const store = Store.open(file, { readonly: true });
  try {
    return [...verifySessions(store, { strategy: getStrategy('prefix-merging'), ...(traces ? { traces } : {}) })];
  } finally {
    store.close();
  }
}

const clone = (t: Trajectory[]) => JSON.parse(JSON.stringify(t)) as Trajectory[];

describe('verify-faithfulness', () => {
  it('real recordings and a merged chain verify clean, with both strategies; the CLI exits 0', async () => {
    const merged = tracesOf(db);
    expect(merged.find((t) => t.session_id === 'chain')!.request_ids).toEqual(['c1', 'c2', 'c3']);
    expect(violations(db)).toEqual([]);
    expect(violations(db, tracesOf(db, 'per-request'))).toEqual([]);
    const file = path.join(dir, 'traces.jsonl');
    fs.writeFileSync(file, merged.map((t) => JSON.stringify(t)).join('\n'));
    const { stderr } = await run(process.execPath, [BIN, 'verify-faithfulness', '--db', db, '--traces', file], { env: { ...process.env, NO_COLOR: '1' } });
    // `real` and `chain`: the proxy's default session is made only when a call lands there.
    expect(stderr).toMatch(/faithful: 2 sessions, 5 calls, 3 traces checked/);
  });

  const chainIndex = (t: Trajectory[]) => t.findIndex((x) => x.session_id === 'chain');
  const corruptions: [string, (t: Trajectory[]) => void, string][] = [
    ['a flipped sampled token', (t) => void (t[chainIndex(t)]!.response_ids[1]! += 1), 'sampled'],
    ['a flipped context token', (t) => void (t[chainIndex(t)]!.response_ids[3]! += 1), 'context'],
    [
      'a shifted mask',
      (t) => {
        const m = t[chainIndex(t)]!.loss_mask;
        m[2] = 0;
        m[3] = 1;
      },
      'sampled',
    ],
    ['a dropped logprob', (t) => void t[chainIndex(t)]!.response_logprobs!.pop(), 'shape'],
    ['an altered logprob', (t) => void (t[chainIndex(t)]!.response_logprobs![0]! += 1e-12), 'logprob'],
    ['a logprob on a context token', (t) => void (t[chainIndex(t)]!.response_logprobs![3] = -0.5), 'mask'],
    ['a missing call', (t) => void t.splice(chainIndex(t), 1), 'coverage'],
    ['a duplicated call', (t) => void t.push(t[chainIndex(t)]!), 'coverage'],
    [
      'swapped call order',
      (t) => {
        const ids = t[chainIndex(t)]!.request_ids;
        [ids[0], ids[1]] = [ids[1]!, ids[0]!];
      },
      'prompt',
    ],
    ['a wrong first prompt', (t) => void t[chainIndex(t)]!.prompt_ids.push(99), 'prompt'],
  ];

  it.each(corruptions)('catches %s in the trajectory file', (_name, corrupt, check) => {
    const traces = clone(tracesOf(db));
    corrupt(traces);
    const found = violations(db, traces);
    expect(found.map((v) => v.check)).toContain(check);
    expect(found.every((v) => v.session === 'chain')).toBe(true);
  });

  const dbCorruptions: [string, string, unknown[], string][] = [
    ['a flipped token in the database', 'UPDATE requests SET sampled_ids = ? WHERE id = ?', [packUint32([10, 99, 12]), 'c1'], 'sampled'],
    ['a logprob array that lost an entry', 'UPDATE requests SET logprobs = ? WHERE id = ?', [packFloat64([-0.1, -0.2]), 'c1'], 'logprobs'],
    ['a positive logprob', 'UPDATE requests SET logprobs = ? WHERE id = ?', [packFloat64([0.5, -0.2, -0.3]), 'c1'], 'logprobs'],
    [
      'usage that disagrees with the ids',
      'UPDATE requests SET usage = ? WHERE id = ?',
      [JSON.stringify({ prompt_tokens: 3, completion_tokens: 7 }), 'c1'],
      'usage',
    ],
    ["a call whose ids were not the server's", "UPDATE requests SET token_source = 'none' WHERE id = ?", ['c2'], 'coverage'],
  ];

  it.each(dbCorruptions)('catches %s, checking traces made before it', (_name, sql, params, check) => {
    const traces = tracesOf(db);
    const copy = path.join(dir, `corrupt-${check}-${Math.random().toString(36).slice(2)}.db`);
    fs.copyFileSync(db, copy);
    const store = Store.open(copy);
    store.db.prepare(sql).run(...params);
    store.close();
    expect(violations(copy, traces).map((v) => v.check)).toContain(check);
  });

  it('the CLI names each violation and exits 1', async () => {
    const traces = clone(tracesOf(db));
    traces[chainIndex(traces)]!.response_ids[1]! += 1;
    const file = path.join(dir, 'bad.jsonl');
    fs.writeFileSync(file, traces.map((t) => JSON.stringify(t)).join('\n'));
    const err = await run(process.execPath, [BIN, 'verify-faithfulness', '--db', db, '--traces', file], { env: { ...process.env, NO_COLOR: '1' } }).catch(
      (e: unknown) => e as { code: number; stderr: string },
    );
    expect((err as { code: number }).code).toBe(1);
    expect((err as { stderr: string }).stderr).toMatch(/violation \[sampled\] session chain, trace 0, call c1, position 1/);
  });
});
