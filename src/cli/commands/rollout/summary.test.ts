import { describe, expect, it } from 'vitest';
import type { RolloutSummary } from '../../../rollout/config.js';
import { fmt, maskedLines } from './summary.js';

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

describe('maskedLines (the samples NeMo-RL would train nothing on)', () => {
  const base = { masked: { samples: 0, of: 8, byKind: {}, examples: [] } } as unknown as RolloutSummary;
  it('says nothing when none is masked, or when it was not checked', () => {
    expect(maskedLines(base)).toEqual([]);
    expect(maskedLines({} as RolloutSummary)).toEqual([]);
  });

  it('is loud for any split, names the kinds by count and gives an example', () => {
    const lines = maskedLines({
      masked: {
        samples: 2,
        of: 8,
        byKind: { timeout: 1, split: 2 },
        examples: [
          {
            sampleId: 's1',
            taskId: 'js-sum',
            reasons: "not append-only: the session's main agent merged into 2 traces (call #3 rewrote the history before it)",
          },
        ],
      },
    } as unknown as RolloutSummary).map(stripAnsi);
    expect(lines[0]).toBe(
      '  MASKED: 2 of 8 ended samples train nothing (masked in polar gym-agent, left out of export --format nemo-gym): 2 not append-only (the main agent split into several traces: compaction, history trimming, or a re-rendered history); 1 ran past their time budget',
    );
    expect(lines[1]).toMatch(/^ {4}e\.g\. s1 \(js-sum\): not append-only: .*call #3 rewrote the history/);
  });

  it('a quarter or less masked, and no split, is a quiet note', () => {
    const [line] = maskedLines({ masked: { samples: 2, of: 8, byKind: { timeout: 2 }, examples: [] } } as unknown as RolloutSummary).map(stripAnsi);
    expect(line).toMatch(/^ {2}masked: 2 of 8 ended samples train nothing/);
  });
});

function stripAnsi(s: string): string {
  return s.replace(/\x1b\[[0-9;]*m/g, '');
}
