import { createHash } from 'node:crypto';
import { validate, version } from 'uuid';
import { describe, expect, it } from 'vitest';
import { jobId } from './boss.js';

/** The hand-made v5 UUID polar used before `uuid`: job ids already in PostgreSQL queues came from it. */
function handMadeJobId(sampleId: string): string {
  const h = createHash('sha1').update(`polar-sample:${sampleId}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h.slice(16, 18), 16) & 0x3f) | 0x80).toString(16)}${h.slice(18, 20)}-${h.slice(20, 32)}`;
}

describe('jobId', () => {
  const ids = ['::0', 'r:t:0', 'rollout-1:task-a:0', 'rollout-1:task-a:17', '0f1e2d3c:harbor/fix-the-bug:3', 'ünïcødé:täsk:9', `${'x'.repeat(300)}:t:1`];

  it('gives the ids the hand-made v5 gave, for the same sample ids', () => {
    for (const id of ids) expect(jobId(id)).toBe(handMadeJobId(id));
  });

  it('pins one id, so a change in both functions still shows', () => {
    expect(jobId('rollout-1:task-a:0')).toBe(handMadeJobId('rollout-1:task-a:0'));
    expect(jobId('rollout-1:task-a:0')).toBe('a583ae78-dfa8-512b-9a3e-643b7ac0c193');
  });

  it('is a valid v5 UUID, distinct per sample', () => {
    for (const id of ids) {
      expect(validate(jobId(id))).toBe(true);
      expect(version(jobId(id))).toBe(5);
    }
    expect(new Set(ids.map(jobId)).size).toBe(ids.length);
  });
});
