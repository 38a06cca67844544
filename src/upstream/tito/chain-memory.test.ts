import { describe, expect, it } from 'vitest';
import type { ChainEntry } from './bridge.js';
import { ChainMemory } from './chain-memory.js';

const entry = (callId: string, tokens: number): ChainEntry => ({
  callId,
  messagesKey: callId,
  messageCount: 1,
  contextKey: '',
  promptIds: new Array<number>(tokens).fill(1),
  sampledIds: [2],
  reply: { role: 'assistant', content: '' },
});

describe('ChainMemory', () => {
  it('keeps the newest calls of each agent, newest first, apart per session and agent', () => {
    const m = new ChainMemory(2, 1_000);
    m.remember('s', 'main', entry('a', 9));
    m.remember('s', 'main', entry('b', 9));
    m.remember('s', 'main', entry('c', 9));
    m.remember('s', 'sub', entry('d', 9));
    m.remember('t', 'main', entry('e', 9));
    expect(m.entries('s', 'main').map((e) => e.callId)).toEqual(['c', 'b']);
    expect(m.entries('s', 'sub').map((e) => e.callId)).toEqual(['d']);
    expect(m.entries('t', 'main').map((e) => e.callId)).toEqual(['e']);
    expect(m.size).toBe(40);
  });

  it('stays within its token budget by dropping the least recently active chains', () => {
    const m = new ChainMemory(8, 100);
    m.remember('s1', 'main', entry('a', 39));
    m.remember('s2', 'main', entry('b', 39));
    m.remember('s1', 'main', entry('c', 39)); // s1 is now the most recent
    expect(m.size).toBeLessThanOrEqual(100);
    expect(m.entries('s2', 'main')).toEqual([]);
    expect(m.entries('s1', 'main').map((e) => e.callId)).toEqual(['c', 'a']);
    // A single chain larger than the budget is still kept whole (its session is the active one).
    m.remember('s3', 'main', entry('big', 500));
    expect(m.entries('s3', 'main').map((e) => e.callId)).toEqual(['big']);
    expect(m.entries('s1', 'main')).toEqual([]);
    // A dropped chain is known as dropped (its next call is not mistaken for a first call).
    expect(m.wasDropped('s1', 'main')).toBe(true);
    expect(m.wasDropped('s3', 'main')).toBe(false);
    m.forget('s3');
    expect(m.size).toBe(0);
    expect(m.entries('s1', 'main')).toEqual([]);
  });
});
