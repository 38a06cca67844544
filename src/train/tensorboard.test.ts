import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseEvents, stepAdvantages, TensorboardScalars } from './tensorboard.js';

/**
 * Event files built here by the protobuf rules (tensorboard/compat/proto/event.proto, summary.proto):
 * Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5 },
 * Summary { repeated Value value = 1 }, Value { string tag = 1; float simple_value = 2 }, each in a
 * TFRecord frame. The CRCs are left 0: the reader does not check them.
 */
const varint = (n: number): number[] => {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 128) | 0x80);
    n = Math.floor(n / 128);
  }
  return [...out, n];
};
const field = (no: number, bytes: Buffer) => Buffer.concat([Buffer.from([...varint(no * 8 + 2), ...varint(bytes.length)]), bytes]);
const float = (no: number, v: number) => {
  const b = Buffer.alloc(4);
  b.writeFloatLE(v);
  return Buffer.concat([Buffer.from(varint(no * 8 + 5)), b]);
};
const wallTime = () => Buffer.concat([Buffer.from([9]), Buffer.alloc(8)]);
function frame(event: Buffer): Buffer {
  const head = Buffer.alloc(12);
  head.writeBigUInt64LE(BigInt(event.length));
  return Buffer.concat([head, event, Buffer.alloc(4)]);
}
const scalarEvent = (step: number, values: [string, number][]) =>
  frame(
    Buffer.concat([
      wallTime(),
      Buffer.from([16, ...varint(step)]),
      field(5, Buffer.concat(values.map(([tag, v]) => field(1, Buffer.concat([field(1, Buffer.from(tag)), float(2, v)]))))),
    ]),
  );
const versionEvent = () => frame(Buffer.concat([wallTime(), field(3, Buffer.from('brain.Event:2'))]));

let dir: string | null = null;
afterEach(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  dir = null;
});

describe('TensorBoard scalars (what NeMo-RL logs, advantages/* among them)', () => {
  it('parses whole frames and leaves a partial one for later', () => {
    const bytes = Buffer.concat([
      versionEvent(),
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
    fs.writeFileSync(file, Buffer.concat([versionEvent(), step1.subarray(0, 10)]));
    expect(reader.poll()).toEqual([]);
    fs.appendFileSync(file, Buffer.concat([step1.subarray(10), scalarEvent(2, [['train/advantages/min', -1]])]));
    const read = reader.poll();
    expect(read.map((s) => s.step)).toEqual([1, 1, 1, 2]);
    expect(reader.poll()).toEqual([]);
    expect([...stepAdvantages(read)]).toEqual([[1, { mean: 0, min: 0, max: 0 }]]);
  });
});
