import { describe, expect, it } from 'vitest';
import { count } from './plural.js';

describe('count', () => {
  it('uses the singular for one only', () => {
    expect([0, 1, 2].map((n) => count(n, 'session'))).toEqual(['0 sessions', '1 session', '2 sessions']);
    expect(count(1, 'summary', 'summaries')).toBe('1 summary');
    expect(count(3, 'summary', 'summaries')).toBe('3 summaries');
  });
});
