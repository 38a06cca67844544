import { expect } from 'vitest';
import type { RequestRecord } from '../../src/store/requests.js';
import type { Store } from '../../src/store/store.js';
import { float64Bits } from './bits.js';
import { loadQwen3, type LoggedCall, type ReferenceUpstream } from './reference-upstream/index.js';

/** The session's most recent call, whole. */
export function lastCall(store: Store, session: string): RequestRecord {
  const calls = store.requests.list(session);
  return store.requests.get(calls[calls.length - 1]!.id)!;
}

/**
 * The most recent call must hold exactly what the upstream sampled: the same prompt and sampled
 * ids, the same logprob bits; and re-tokenizing its text must not give those ids back (the
 * reference upstream sampled non-canonical splits), so a recording made by re-tokenizing fails.
 */
export function expectExactCapture(store: Store, session: string, upstream: ReferenceUpstream): { row: RequestRecord; sampled: LoggedCall } {
  const sampled = upstream.calls[upstream.calls.length - 1]!;
  const row = lastCall(store, session);
  expect(row.status).toBe('ok');
  expect(row.tokenSource).toBe('upstream');
  expect(row.tokenError).toBeNull();
  expect(row.promptIds).toEqual(sampled.promptIds);
  expect(row.sampledIds).toEqual(sampled.reply.ids);
  expect(float64Bits(row.logprobs!)).toEqual(float64Bits(sampled.reply.logprobs));
  expect(sampled.reply.splits).toBeGreaterThan(0);
  const qwen = loadQwen3();
  expect(qwen.encode(qwen.decode(row.sampledIds!))).not.toEqual(row.sampledIds);
  return { row, sampled };
}
