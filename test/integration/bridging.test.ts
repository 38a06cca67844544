import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import type { RequestSummary } from '../../src/store/requests.js';
import { emptyStats, reconstruct } from '../../src/trajectory/reconstruct.js';
import { prefixMerging } from '../../src/trajectory/strategies/prefix-merging.js';
import type { Trajectory } from '../../src/trajectory/types.js';
import { samplingPolicy } from '../../src/upstream/sampling-policy.js';
import { verifySessions } from '../../src/trajectory/verify-sessions.js';
import { loadTokenText } from '../../src/trajectory/tokenizer.js';
import { BUNDLED_QWEN3 } from '../../src/upstream/tito/chat-template.js';
import { qwen3ModelDir } from '../../src/core/bundled-tokenizer.js';
import { float64Bits } from '../support/bits.js';
import { loadQwen3 } from '../support/reference-upstream/index.js';
import { REPLAY_PROVIDERS, REPLAY_TURNS, replayScript, replaySession, type ReplayProvider } from '../support/replay.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { patient } from '../support/patience.js';

/**
 * Bridging, proven on real harness recordings replayed through the proxy (see test/support/replay.ts):
 * thinking on, parallel tool calls, a length-cut turn, the sampler's non-canonical splits, and a
 * compaction. In token-in/token-out mode every call but the first and the one after the compaction
 * continues its parent byte for byte, strict prefix merging joins them, verify-faithfulness passes,
 * and the harness gets the same replies as with the server applying the template.
 */

const SESSION = 'replay';
const EXPECTED_RENDER = [
  { mode: 'full', reason: 'first-call' },
  { mode: 'bridged', reason: null },
  { mode: 'bridged', reason: null },
  { mode: 'bridged', reason: null },
  { mode: 'full', reason: 'history-rewritten' },
  { mode: 'bridged', reason: null },
];

interface Run {
  mock: MockServer;
  proxy: TestProxy;
  replies: Record<string, unknown>[];
  rows: RequestSummary[];
}

async function replay(provider: ReplayProvider, kind: string): Promise<Run> {
  const mock = await startMockServer({ script: replayScript, splitEvery: 3, ...(kind === 'nemo-rl' ? { nemoRl: { temperature: 1, topP: 1 } } : {}) });
  const proxy = await startTestProxy(mock.url, {
    upstreamKind: kind,
    upstreamOptions: kind.endsWith('-tito') ? { tokenizer: BUNDLED_QWEN3, checkBridges: true } : {},
    // Captured for training, as a rollout does: the harnesses' own top_p / top_k (Gemini CLI, Pi)
    // would otherwise make every call off-policy, and exports would leave them out.
    sampling: samplingPolicy('trainer', kind),
  });
  const replies = await replaySession(provider, proxy.proxy.url, SESSION);
  return { mock, proxy, replies, rows: proxy.store.requests.list(SESSION) };
}

function strictTraces(run: Run): { traces: Trajectory[]; stats: ReturnType<typeof emptyStats> } {
  const stats = emptyStats(prefixMerging.name);
  const traces = [...reconstruct(run.proxy.store, { strategy: prefixMerging, sessions: [SESSION], text: loadTokenText(qwen3ModelDir()) }, stats)];
  return { traces, stats };
}

const CASES = [
  ...REPLAY_PROVIDERS.map((provider) => ({ provider, harness: provider.harness, kind: 'vllm-tito' })),
  { provider: REPLAY_PROVIDERS.find((p) => p.harness === 'pi')!, harness: 'pi', kind: 'sglang-tito' },
  // NeMo-RL's server splices the ids polar hands back; polar renders nothing.
  ...REPLAY_PROVIDERS.filter((p) => p.harness === 'pi' || p.harness === 'claude-code').map((provider) => ({
    provider,
    harness: provider.harness,
    kind: 'nemo-rl',
  })),
];

describe.each(CASES)('bridging a replayed $harness session through $kind', ({ provider, kind }) => {
  let served: Run;
  let tito: Run;
  beforeAll(async () => {
    served = await replay(provider, 'vllm');
    tito = await replay(provider, kind);
  }, patient(60_000));
  afterAll(async () => {
    for (const r of [served, tito]) {
      await r?.proxy.close();
      await r?.mock.close();
    }
  });

  it('the harness gets the same replies as when the server applies the template', () => {
    expect(tito.replies).toHaveLength(REPLAY_TURNS.length);
    for (let i = 0; i < REPLAY_TURNS.length; i++) {
      const a = provider.content(served.replies[i]!);
      const b = provider.content(tito.replies[i]!);
      expect(b, `turn ${i}: ${REPLAY_TURNS[i]!.note}`).toEqual(a);
    }
    // The turns exercise what they say: parallel calls, thinking, a length cut.
    expect(provider.content(tito.replies[0]!).tools).toHaveLength(2);
    expect(tito.rows[2]!.finishReason).toBe('length');
    expect(tito.rows.every((r) => r.status === 'ok')).toBe(true);
  });

  it('bridges every call onto the one before, except the first and the compaction, and records why', () => {
    expect(tito.rows.map((r) => ({ mode: r.render?.mode, reason: r.render?.reason }))).toEqual(EXPECTED_RENDER);
    tito.rows.forEach((row, i) => {
      if (row.render?.mode === 'bridged') expect(row.render.parentCallId).toBe(tito.rows[i - 1]!.id);
    });
    expect(tito.proxy.store.sessions.summary(SESSION)).toMatchObject({ bridgedCalls: 4, fullRenders: 2 });
    expect(served.proxy.store.sessions.summary(SESSION)).toMatchObject({ bridgedCalls: 0, fullRenders: 0 });
    // A bridged prompt is the parent's prompt and sampled ids byte for byte (+ <|im_end|> after the length cut).
    const qwen = loadQwen3();
    for (let i = 1; i < tito.rows.length; i++) {
      if (tito.rows[i]!.render?.mode !== 'bridged') continue;
      const parent = tito.proxy.store.requests.get(tito.rows[i - 1]!.id)!;
      const child = tito.proxy.store.requests.get(tito.rows[i]!.id)!;
      const held = [...parent.promptIds!, ...parent.sampledIds!];
      expect(child.promptIds!.slice(0, held.length)).toEqual(held);
      if (parent.finishReason === 'length') expect(child.promptIds![held.length]).toBe(qwen.eosId);
    }
  });

  it('every call holds exactly what the server saw and sampled, splits included', () => {
    const qwen = loadQwen3();
    let resplit = 0;
    tito.rows.forEach((summary, i) => {
      const row = tito.proxy.store.requests.get(summary.id)!;
      const logged = tito.mock.calls[i]!;
      expect(row.tokenSource).toBe('upstream');
      expect(row.tokenError).toBeNull();
      expect(row.promptIds).toEqual(logged.promptIds);
      expect(row.sampledIds).toEqual(logged.reply.ids);
      expect(float64Bits(row.logprobs!)).toEqual(float64Bits(logged.reply.logprobs));
      if (qwen.encode(qwen.decode(row.sampledIds!)).join() !== row.sampledIds!.join()) resplit++;
      const sent = JSON.parse(row.upstreamRequest!) as { prompt?: number[]; input_ids?: number[]; messages?: Record<string, unknown>[] };
      if (kind === 'nemo-rl') {
        // Chat messages went upstream, the continued turn carrying its call's ids for the server to splice.
        const parent = tito.rows[i - 1] && row.render?.mode === 'bridged' ? tito.proxy.store.requests.get(tito.rows[i - 1]!.id)! : null;
        const pinned = sent.messages!.filter((m) => m.prompt_token_ids);
        expect(pinned.map((m) => m.generation_token_ids)).toEqual(parent ? [parent.sampledIds] : []);
        expect(sent).toMatchObject({ logprobs: true, top_logprobs: 0, temperature: 1, top_p: 1 });
      } else {
        // What went upstream was token ids, not messages.
        expect(sent.prompt ?? sent.input_ids).toEqual(row.promptIds);
      }
    });
    expect(resplit).toBeGreaterThan(0);
  });

  it('strict prefix merging joins every bridged call: one trace per stretch of unrewritten history', () => {
    const { traces, stats } = strictTraces(tito);
    expect(traces.map((t) => t.request_ids)).toEqual([tito.rows.slice(0, 4).map((r) => r.id), tito.rows.slice(4).map((r) => r.id)]);
    expect(stats.prompts).toEqual({ bridged: 4, full: 2, fullReasons: { 'first-call': 1, 'history-rewritten': 1 }, bridgedUnmerged: [] });
    // The one break is the compaction, classified as a rewrite of the history.
    expect(stats.breaks).toEqual({ template: 0, retoken: 0, rewrite: 1, other: 0 });
    expect(stats.contextDrift).toBe(0);
    // With the server re-rendering the history, the same session falls apart into more traces.
    expect(strictTraces(served).traces.length).toBeGreaterThan(traces.length);
  });

  it('verify-faithfulness passes with no context drift, with the tokenizer check too', () => {
    const summary = { sessions: 0, calls: 0, traces: 0, violations: 0 };
    const text = loadTokenText(qwen3ModelDir());
    const violations = [...verifySessions(tito.proxy.store, { strategy: prefixMerging, sessions: [SESSION], text }, summary)];
    expect(violations).toEqual([]);
    expect(summary).toMatchObject({ sessions: 1, calls: 6, traces: 2 });
  });
});
