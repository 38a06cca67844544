// TensorBoard event files as NeMo-RL's TensorboardLogger writes them (torch's SummaryWriter,
// utils/logger.py:134-190 at 7ea279a): TFRecord frames (uint64 length, masked CRC-32C of the length,
// the bytes, masked CRC-32C of the bytes; little-endian), each an `Event` protobuf
// (tensorboard/compat/proto/event.proto, summary.proto): Event { double wall_time = 1; int64 step = 2;
// string file_version = 3; Summary summary = 5 }, Summary { repeated Value value = 1 },
// Value { string tag = 1; float simple_value = 2 }. The NeMo-RL stand-in (fake-nemo-rl/gym-step.mjs)
// writes its steps with it and src/train/tensorboard.test.ts builds its files with it, so the reader
// is tested against one writer. Plain Node, no dist/ import.
import fs from 'node:fs';

const varint = (n) => {
  const out = [];
  while (n >= 0x80) {
    out.push((n % 128) | 0x80);
    n = Math.floor(n / 128);
  }
  return [...out, n];
};
const bytesField = (no, bytes) => Buffer.concat([Buffer.from([...varint(no * 8 + 2), ...varint(bytes.length)]), bytes]);
const wallTimeField = (seconds) => {
  const wall = Buffer.alloc(9);
  wall[0] = 9; // field 1, wire type 1 (64-bit)
  wall.writeDoubleLE(seconds, 1);
  return wall;
};

/** One Event in its TFRecord frame. */
export function frame(event) {
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(event.length));
  const crc = (b) => {
    const out = Buffer.alloc(4);
    out.writeUInt32LE(maskedCrc32c(b));
    return out;
  };
  return Buffer.concat([len, crc(len), event, crc(event)]);
}

/** The first event of every file SummaryWriter opens: its file_version. */
export function fileVersionEvent(wallTime = Date.now() / 1000) {
  return frame(Buffer.concat([wallTimeField(wallTime), bytesField(3, Buffer.from('brain.Event:2'))]));
}

/** One step's scalars (`[tag, value]` pairs, as add_scalar calls give them) as one framed Event. */
export function scalarEvent(step, scalars, wallTime = Date.now() / 1000) {
  const values = scalars.map(([tag, v]) => {
    const f = Buffer.alloc(4);
    f.writeFloatLE(v);
    // Value { tag = 1 (bytes); simple_value = 2 (fixed32, key 21) }
    return bytesField(1, Buffer.concat([bytesField(1, Buffer.from(tag)), Buffer.from([21]), f]));
  });
  return frame(Buffer.concat([wallTimeField(wallTime), Buffer.from([16, ...varint(step)]), bytesField(5, Buffer.concat(values))]));
}

/** Appends one step's scalars (`{tag: value}`) to an event file, opening it with its file_version event. */
export function appendTensorboardStep(file, step, scalars) {
  if (!fs.existsSync(file)) fs.writeFileSync(file, fileVersionEvent());
  fs.appendFileSync(file, scalarEvent(step, Object.entries(scalars)));
}

/** TFRecord's checksum: CRC-32C, rotated and offset ((crc >>> 15 | crc << 17) + 0xa282ead8). */
function maskedCrc32c(buf) {
  let crc = 0xffffffff;
  for (const byte of buf) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  crc = (crc ^ 0xffffffff) >>> 0;
  return ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0;
}
