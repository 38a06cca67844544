import { describe, expect, it } from 'vitest';
import { fmt } from './summary.js';

describe('fmt (rewards, means, advantages in rollout output)', () => {
  it('prints rounding noise around zero as 0, never -0.00', () => {
    expect(fmt(-1e-17, 2)).toBe('0.00');
    expect(fmt(-0.0004, 3)).toBe('0.000');
    expect(fmt(-0)).toBe('0');
  });

  it('keeps real signs, integers and missing values', () => {
    expect(fmt(-0.5, 2)).toBe('-0.50');
    expect(fmt(1.1547, 2)).toBe('1.15');
    expect(fmt(1)).toBe('1');
    expect(fmt(null)).toBe('-');
  });
});
