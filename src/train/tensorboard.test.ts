import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
// Event files written as the NeMo-RL stand-in writes them (NeMo-RL's TensorboardLogger format): one writer for both.
import { fileVersionEvent, scalarEvent } from '../../test/support/tensorboard-events.mjs';
import { parseEvents, stepAdvantages, stepMasked, TensorboardScalars } from './tensorboard.js';
import { removeTree } from '../../test/support/remove-tree.js';

let dir: string | null = null;
afterEach(() => {
  if (dir) removeTree(dir);
  dir = null;
});

describe('TensorBoard scalars (what NeMo-RL logs, advantages/* among them)', () => {
  it('parses whole frames and leaves a partial one for later', () => {
    const bytes = Buffer.concat([
      fileVersionEvent(),
      scalarEvent(3, [
        ['train/advantages/min', -1.5],
        ['train/loss', 0.25],
      ]),
      scalarEvent(300, [['train/advantages/max', 2]]),
    ]);
    const whole = parseEvents(bytes);
    expect(whole.consumed).toBe(bytes.length);
    expect(whole.scalars).toEqual([
      { step: 3, tag: 'train/advantages/min', value: -1.5 },
      { step: 3, tag: 'train/loss', value: 0.25 },
      { step: 300, tag: 'train/advantages/max', value: 2 },
    ]);
    const cut = parseEvents(bytes.subarray(0, bytes.length - 3));
    expect(cut.scalars).toHaveLength(2);
    expect(cut.consumed).toBe(bytes.length - scalarEvent(300, [['train/advantages/max', 2]]).length);
  });

  it('reads each event file under exp_*/tensorboard as it grows, and gives each step whose min and max arrived', () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-tb-'));
    const tb = path.join(dir, 'exp_001', 'tensorboard');
    fs.mkdirSync(tb, { recursive: true });
    const file = path.join(tb, 'events.out.tfevents.1764000000.gpu-node.1.0');
    const reader = new TensorboardScalars(dir);
    expect(reader.poll()).toEqual([]);
    const step1 = scalarEvent(1, [
      ['train/advantages/mean', 0],
      ['train/advantages/min', 0],
      ['train/advantages/max', 0],
    ]);
    fs.writeFileSync(file, Buffer.concat([fileVersionEvent(), step1.subarray(0, 10)]));
    expect(reader.poll()).toEqual([]);
    fs.appendFileSync(file, Buffer.concat([step1.subarray(10), scalarEvent(2, [['train/advantages/min', -1]])]));
    const read = reader.poll();
    expect(read.map((s) => s.step)).toEqual([1, 1, 1, 2]);
    expect(reader.poll()).toEqual([]);
    expect([...stepAdvantages(read)]).toEqual([[1, { mean: 0, min: 0, max: 0 }]]);
  });
});

describe("stepMasked: each step's masked share from the agent's polar_masked fields", () => {
  it('reads <agent>/polar_masked/mean and each kind, per step; other stats and tags are not it', () => {
    const scalars = [
      { step: 1, tag: 'train/polar_agent/polar_masked/mean', value: 0.75 },
      { step: 1, tag: 'train/polar_agent/polar_masked/max', value: 1 },
      { step: 1, tag: 'train/polar_agent/polar_masked_split/mean', value: 0.5 },
      { step: 1, tag: 'train/polar_agent/polar_masked_timeout/mean', value: 0.25 },
      { step: 1, tag: 'train/polar_agent/polar_calls/mean', value: 12 },
      { step: 2, tag: 'train/polar_agent/polar_masked_split/mean', value: 0 },
      { step: 3, tag: 'train/polar_agent/polar_masked/mean', value: 0 },
    ];
    expect([...stepMasked(scalars)]).toEqual([
      [1, { share: 0.75, byKind: { split: 0.5, timeout: 0.25 } }],
      [3, { share: 0, byKind: {} }],
    ]);
  });

  it('averages the agents of a step (one per host)', () => {
    const scalars = [
      { step: 4, tag: 'train/polar_agent_a/polar_masked/mean', value: 1 },
      { step: 4, tag: 'train/polar_agent_a/polar_masked_split/mean', value: 1 },
      { step: 4, tag: 'train/polar_agent_b/polar_masked/mean', value: 0 },
      { step: 4, tag: 'train/polar_agent_b/polar_masked_split/mean', value: 0 },
    ];
    expect(stepMasked(scalars).get(4)).toEqual({ share: 0.5, byKind: { split: 0.5 } });
  });
});
