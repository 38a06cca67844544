import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emptyStats, reconstruct, usableCalls } from '../../src/trajectory/reconstruct.js';
import { getStrategy } from '../../src/trajectory/registry.js';
import { loadTokenText } from '../../src/trajectory/tokenizer.js';
import type { Trajectory } from '../../src/trajectory/types.js';
import { verifySessions } from '../../src/trajectory/verify-sessions.js';
import { qwen3ModelDir, startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { recordMixedSession } from '../support/mixed-session.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';

/**
 * Real recordings: conversations through the proxy against the reference upstream (real Qwen3
 * template, thinking on so earlier <think> blocks are stripped from history, non-canonical sampled
 * splits), with tool calls, a length-cut turn, two interleaved sub-agents, a side call without tools
 * and a failed call. Reconstruction must keep every usable call exactly once, never mix agents,
 * and explain every break.
 */
let upstream: ReferenceUpstream;
let t: TestProxy;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  t = await startTestProxy(upstream.url);
  await recordMixedSession(t, upstream, 'rec');
});

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

function run(strategy: string, allowRerender = false) {
  const stats = emptyStats(strategy);
  const traces: Trajectory[] = [
    ...reconstruct(t.store, { strategy: getStrategy(strategy, { allowRerender }), sessions: ['rec'], text: loadTokenText(qwen3ModelDir()) }, stats),
  ];
  return { traces, stats };
}

describe('reconstruct on real recordings', () => {
  it('per-request: one trace per usable call, token-exact; failed and side calls excluded with reasons', () => {
    const { traces, stats } = run('per-request');
    expect(stats.calls).toBe(11);
    expect(stats.excluded.map((e) => e.reason).sort()).toEqual(['side call (no tools offered)', 'status error']);
    expect(traces).toHaveLength(9);
    for (const trace of traces) {
      const row = t.store.requests.get(trace.request_ids[0]!)!;
      expect(trace.prompt_ids).toEqual(row.promptIds);
      expect(trace.response_ids).toEqual(row.sampledIds);
      expect(trace.response_logprobs).toEqual(row.logprobs);
      expect(trace.loss_mask.every((m) => m === 1)).toBe(true);
    }
    expect(stats.mergeRatio).toBe(1);
  });

  it('prefix-merging: every usable call exactly once, agents never mixed, every break classified', () => {
    const { traces, stats } = run('prefix-merging');
    const used = traces.flatMap((tr) => tr.request_ids);
    expect(new Set(used).size).toBe(used.length);
    expect(used).toHaveLength(9);
    for (const trace of traces) {
      const agents = new Set(trace.request_ids.map((id) => t.store.requests.get(id)!.agentId));
      expect(agents).toEqual(new Set([trace.agent_id]));
      // Every mask-1 run is exactly one call's sampled ids, in order.
      const sampled = trace.request_ids.flatMap((id) => t.store.requests.get(id)!.sampledIds!);
      expect(trace.response_ids.filter((_, i) => trace.loss_mask[i] === 1)).toEqual(sampled);
      expect(trace.prompt_ids).toEqual(t.store.requests.get(trace.request_ids[0]!)!.promptIds);
    }
    // Server-side templates re-render history: Qwen3 strips earlier thinking and the sampler's
    // non-canonical splits never survive re-tokenization, so strict merging breaks, and says why.
    const breaks = Object.values(stats.breaks).reduce((a, b) => a + b, 0);
    // Each break starts a trace: four agents' first traces plus one per break.
    expect(stats.traces).toBe(4 + breaks);
    expect(breaks).toBeGreaterThan(0);
    expect(stats.breaks.other).toBe(0);
    expect(stats.breaks.rewrite + stats.breaks.retoken + stats.breaks.template).toBe(breaks);
    expect(stats.tokensMerged).toBeLessThanOrEqual(stats.tokensPerRequest);
    // The compaction rewrote the history: classified as such, at the first changed token.
    const compacted = t.store.requests.list('rec').filter((c) => c.agentId === 'compactor')[1]!;
    const { breaks: all } = getStrategy('prefix-merging').run(
      usableCalls(
        t.store.requests.tokens('rec').filter((r) => r.agentId === 'compactor'),
        true,
        emptyStats('prefix-merging'),
      ),
      loadTokenText(qwen3ModelDir()),
    );
    expect(all).toEqual([expect.objectContaining({ requestId: compacted.id, class: 'rewrite' })]);
    // With a tokenizer, examples show the two sides of a break in words.
    const example = stats.breakExamples[0]!;
    expect(example.expected).not.toBe(example.found);
    expect(typeof example.found).toBe('string');
  });

  it('--allow-rerender joins across re-rendered answers, counts the drift, and still verifies', () => {
    const strict = run('prefix-merging');
    const { traces, stats } = run('prefix-merging', true);
    expect(stats.traces).toBeLessThan(strict.stats.traces);
    expect(stats.contextDrift).toBeGreaterThan(0);
    const used = traces.flatMap((tr) => tr.request_ids);
    expect(new Set(used).size).toBe(9);
    const found = [...verifySessions(t.store, { strategy: getStrategy('prefix-merging', { allowRerender: true }), sessions: ['rec'], allowRerender: true })];
    expect(found).toEqual([]);
    // Without the allowance, the same traces fail the context check: the model never saw them.
    const strictCheck = [...verifySessions(t.store, { strategy: getStrategy('prefix-merging'), sessions: ['rec'], traces })];
    expect(strictCheck.map((v) => v.check)).toContain('context');
  });

  it('with the tokenizer, every call decodes to what the harness sent and received; a tampered reply is caught', () => {
    const text = loadTokenText(qwen3ModelDir());
    const check = () => [...verifySessions(t.store, { strategy: getStrategy('per-request'), sessions: ['rec'], text })];
    expect(check()).toEqual([]);
    const victim = t.store.requests.list('rec').find((c) => c.status === 'ok')!;
    const original = t.store.db.prepare('SELECT assistant_message FROM requests WHERE id = ?').get(victim.id) as { assistant_message: string };
    t.store.db
      .prepare('UPDATE requests SET assistant_message = ? WHERE id = ?')
      .run(JSON.stringify({ role: 'assistant', content: 'something the model never said', reasoning_content: 'nor thought' }), victim.id);
    try {
      expect(check().map((v) => [v.requestId, v.check])).toEqual([
        [victim.id, 'text'],
        [victim.id, 'text'],
      ]);
    } finally {
      t.store.db.prepare('UPDATE requests SET assistant_message = ? WHERE id = ?').run(original.assistant_message, victim.id);
    }
  });

  it('the CLI says in one line why server-rendered calls did not merge, and what to do', async () => {
    const { stderr } = await promisify(execFile)(
      process.execPath,
      [path.resolve(__dirname, '../../bin/polar.js'), 'reconstruct', '--db', t.dbPath, '--session', 'rec', '--out', path.join(t.dir, 'traces.jsonl')],
      { env: { ...process.env, NO_COLOR: '1' } },
    );
    expect(stderr).toMatch(/breaks: .*other \d+/);
    const why = stderr.split('\n').filter((l) => l.trim().startsWith('why:'));
    expect(why).toHaveLength(1);
    expect(why[0]).toMatch(/server rendered each prompt itself/);
    expect(why[0]).toMatch(/--tokenizer PATH/);
    expect(why[0]).toMatch(/--upstream-kind vllm-tito/);
  });
});
