import { describe, expect, it } from 'vitest';
import { packUint32 } from '../core/token-packing.js';
import { resolvePrompts, type StoredTokens } from './delta-read.js';
import type { RequestStart } from './requests.js';
import { Store } from './store.js';

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** A row as the store keeps it: whole, or the first `take` tokens of `base`'s prompt + sampled ids, then `suffix`. */
function row(id: string, suffix: number[] | null, sampled: number[] | null, base?: { id: string; take: number }): StoredTokens {
  return {
    id,
    prompt_ids: suffix && packUint32(suffix),
    prompt_base: base?.id ?? null,
    prompt_base_len: base?.take ?? null,
    sampled_ids: sampled && packUint32(sampled),
  };
}

const plain = (r: { promptIds: Uint32Array | null; sampledIds: Uint32Array | null }) => ({
  prompt: r.promptIds && [...r.promptIds],
  sampled: r.sampledIds && [...r.sampledIds],
});

describe('resolvePrompts: each chain of deltas materialised once', () => {
  it('a linear chain: every prompt is its base + suffix, all views of one buffer (no prompt copied whole)', () => {
    const rows = [row('a', range(0, 40), [100, 101]), row('b', [7, 8], [102], { id: 'a', take: 42 }), row('c', [9], [103, 104], { id: 'b', take: 45 })];
    const out = resolvePrompts(rows, () => {
      throw new Error('nothing outside');
    });
    expect(out.map(plain)).toEqual([
      { prompt: range(0, 40), sampled: [100, 101] },
      { prompt: [...range(0, 40), 100, 101, 7, 8], sampled: [102] },
      { prompt: [...range(0, 40), 100, 101, 7, 8, 102, 9], sampled: [103, 104] },
    ]);
    expect(out[2]!.promptIds!.buffer).toBe(out[1]!.promptIds!.buffer);
  });

  it('two calls on one base (a retry, a sibling): neither overwrites the other', () => {
    const rows = [
      row('a', range(0, 40), [100]),
      row('b', [1, 2, 3], [200], { id: 'a', take: 41 }),
      // Also takes all of a: b already grew a's chain in place, so c must not write over b's tokens.
      row('c', [4, 5], [300], { id: 'a', take: 41 }),
      row('d', [6], [400], { id: 'b', take: 45 }),
    ];
    const out = resolvePrompts(rows, () => new Uint32Array());
    expect(out.map(plain)).toEqual([
      { prompt: range(0, 40), sampled: [100] },
      { prompt: [...range(0, 40), 100, 1, 2, 3], sampled: [200] },
      { prompt: [...range(0, 40), 100, 4, 5], sampled: [300] },
      { prompt: [...range(0, 40), 100, 1, 2, 3, 200, 6], sampled: [400] },
    ]);
  });

  it('a call that takes part of its base (history rewritten, the answer dropped) branches, and the base chain goes on intact', () => {
    const rows = [
      row('a', range(0, 40), [100, 101]),
      row('b', [50], [200], { id: 'a', take: 35 }),
      row('c', [60], [300], { id: 'a', take: 42 }),
      row('d', [70], [400], { id: 'b', take: 37 }),
    ];
    const out = resolvePrompts(rows, () => new Uint32Array());
    expect(out.map(plain)).toEqual([
      { prompt: range(0, 40), sampled: [100, 101] },
      { prompt: [...range(0, 35), 50], sampled: [200] },
      { prompt: [...range(0, 40), 100, 101, 60], sampled: [300] },
      { prompt: [...range(0, 35), 50, 200, 70], sampled: [400] },
    ]);
  });

  it('a base that comes later in sequence order (it ended first) is resolved first; one outside the rows is asked for', () => {
    const rows = [row('late', [9], [90], { id: 'early', take: 3 }), row('early', [1, 2], [3]), row('x', [5], [6], { id: 'elsewhere', take: 2 })];
    const out = resolvePrompts(rows, (id) => (id === 'elsewhere' ? Uint32Array.from([70, 71, 72]) : new Uint32Array()));
    expect(out.map(plain)).toEqual([
      { prompt: [1, 2, 3, 9], sampled: [90] },
      { prompt: [1, 2], sampled: [3] },
      { prompt: [70, 71, 5], sampled: [6] },
    ]);
  });

  it('an empty or missing suffix takes the base alone; a row without a length is whole; no ids stay null', () => {
    const rows = [row('a', [1, 2], [3]), row('b', [], [4], { id: 'a', take: 3 }), row('c', null, null, { id: 'b', take: 2 }), row('d', null, null)];
    rows[3]!.prompt_base = 'a';
    expect(resolvePrompts(rows, () => new Uint32Array()).map(plain)).toEqual([
      { prompt: [1, 2], sampled: [3] },
      { prompt: [1, 2, 3], sampled: [4] },
      { prompt: [1, 2], sampled: null },
      { prompt: null, sampled: null },
    ]);
  });

  it('a reference longer than its base, or a loop of references, is refused with the call named', () => {
    expect(() => resolvePrompts([row('a', [1], [2]), row('b', [3], [4], { id: 'a', take: 5 })], () => new Uint32Array())).toThrow(
      /call a holds 2 tokens, fewer than the 5/,
    );
    expect(() => resolvePrompts([row('a', [1], [2], { id: 'b', take: 1 }), row('b', [3], [4], { id: 'a', take: 1 })], () => new Uint32Array())).toThrow(
      /leads back to itself/,
    );
  });
});

function start(sessionId: string, id: string, agentId = 'main'): Omit<RequestStart, 'originalRequest' | 'upstreamRequest'> {
  return {
    id,
    sessionId,
    agentId,
    provider: 'openai-chat',
    method: 'POST',
    path: '/v1/chat/completions',
    startedAt: 0,
    streamed: false,
    requestHeaders: {},
    requestedModel: 'm',
    servedModel: 'm',
  };
}

describe('a session read whole gives the ids each call reads alone', () => {
  it('on branching sessions written by the store: retries, overlapping calls, rewritten history, sub-agents', () => {
    const store = Store.open(':memory:');
    store.sessions.ensure('s');
    const sampledOf = (k: number) => range(1000 + k * 10, 5);
    const end = (id: string, prompt: number[], k: number) =>
      store.requests.end(id, {
        endedAt: 1,
        status: 'ok',
        httpStatus: 200,
        reply: '',
        tokens: { source: 'upstream', promptIds: prompt, sampledIds: sampledOf(k), logprobs: sampledOf(k).map((x) => -x / 7) },
      });
    const call = (id: string, prompt: number[], k: number, agent = 'main') => {
      store.requests.begin(start('s', id, agent));
      end(id, prompt, k);
    };
    const p0 = range(0, 100);
    call('c0', p0, 0);
    const p1 = [...p0, ...sampledOf(0), 500, 501];
    call('c1', p1, 1);
    call('c1-retry', p1, 2); // the same prompt again: takes less than c1's whole sequence
    const p2 = [...p1, ...sampledOf(2), 502];
    call('c2', p2, 3);
    call('sub', [...range(0, 60), 9], 4, 'helper');
    // Two calls in flight at once; the later-started one ends first and becomes the earlier one's base.
    const p3 = [...p2, ...sampledOf(3), 503];
    const p4 = [...p3, 504, 505];
    store.requests.begin(start('s', 'c3'));
    store.requests.begin(start('s', 'c4'));
    end('c4', p4, 5);
    end('c3', p3, 6);
    call('compacted', [...range(0, 50), 777, 778], 7); // history rewritten: a branch from c3's first 50 tokens
    const p5 = [...p4, ...sampledOf(5), 506];
    call('c5', p5, 8);

    const expected: Record<string, number[]> = {
      c0: p0,
      c1: p1,
      'c1-retry': p1,
      c2: p2,
      sub: [...range(0, 60), 9],
      c3: p3,
      c4: p4,
      compacted: [...range(0, 50), 777, 778],
      c5: p5,
    };
    const stored = store.db.prepare(`SELECT id, prompt_base FROM requests WHERE prompt_base IS NOT NULL`).all() as { id: string }[];
    expect(stored.length).toBeGreaterThanOrEqual(6);
    const views = store.requests.tokenViews('s');
    const arrays = store.requests.tokens('s');
    expect(views.map((r) => r.id).sort()).toEqual(Object.keys(expected).sort());
    for (const [i, r] of views.entries()) {
      const alone = store.requests.get(r.id)!;
      expect([...r.promptIds!], r.id).toEqual(expected[r.id]);
      expect([...r.promptIds!], r.id).toEqual(alone.promptIds);
      expect([...r.sampledIds!]).toEqual(alone.sampledIds);
      expect([...r.logprobs!]).toEqual(alone.logprobs);
      expect(arrays[i]).toEqual({ ...r, promptIds: alone.promptIds, sampledIds: alone.sampledIds, logprobs: alone.logprobs });
      expect(Array.isArray(arrays[i]!.promptIds)).toBe(true);
    }
    store.close();
  });
});
