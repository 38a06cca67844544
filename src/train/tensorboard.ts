import fs from 'node:fs';
import path from 'node:path';

/**
 * Scalars from the TensorBoard event files NeMo-RL writes, read as they grow. NeMo-RL logs its step
 * metrics (`advantages/*` among them, grpo.py:3439-3446 and :3762 with prefix `train`) to its logger
 * only, not to stdout; polar's config turns TensorBoard on, which writes them with torch's
 * SummaryWriter.add_scalar (utils/logger.py:134-190 at 7ea279a) under
 * `<log_dir>/exp_NNN/tensorboard/events.out.tfevents.*` (logger.py:997-1000; the experiment folder
 * is the next exp_NNN, run_grpo_nemo_gym.py:152 and logger.py:1614-1640, so a resumed run writes a new one). The format: TFRecord frames (uint64 length, uint32 CRC of the length, the
 * bytes, uint32 CRC of the bytes; little-endian), each an `Event` protobuf with `step` (field 2)
 * and `summary` (field 5), whose `value`s (field 1) carry `tag` (1) and a float `simple_value` (2).
 * A frame not yet written whole is left for the next read; CRCs are not checked (the file is local
 * and still being written).
 */
export interface Scalar {
  step: number;
  tag: string;
  value: number;
}

/** The whole frames in `buf`, and how many bytes they took. Pure. */
export function parseEvents(buf: Buffer): { scalars: Scalar[]; consumed: number } {
  const scalars: Scalar[] = [];
  let pos = 0;
  while (buf.length - pos >= 12) {
    const len = Number(buf.readBigUInt64LE(pos));
    if (buf.length - pos < 12 + len + 4) break;
    scalars.push(...eventScalars(buf.subarray(pos + 12, pos + 12 + len)));
    pos += 16 + len;
  }
  return { scalars, consumed: pos };
}

function eventScalars(event: Buffer): Scalar[] {
  let step = 0;
  const found: { tag: string; value: number }[] = [];
  for (const f of fields(event)) {
    if (f.no === 2 && typeof f.value === 'number') step = f.value;
    if (f.no === 5 && Buffer.isBuffer(f.value))
      for (const v of fields(f.value)) {
        if (v.no !== 1 || !Buffer.isBuffer(v.value)) continue;
        let tag: string | null = null;
        let value: number | null = null;
        for (const x of fields(v.value)) {
          if (x.no === 1 && Buffer.isBuffer(x.value)) tag = x.value.toString('utf8');
          if (x.no === 2 && x.fixed32) value = x.fixed32.readFloatLE(0);
        }
        if (tag !== null && value !== null) found.push({ tag, value });
      }
  }
  return found.map((s) => ({ step, ...s }));
}

/** A protobuf message's fields: varints as numbers, length-delimited as bytes, fixed32 kept raw. */
function* fields(buf: Buffer): Generator<{ no: number; value: number | Buffer | null; fixed32?: Buffer }> {
  let pos = 0;
  const varint = (): number => {
    let result = 0;
    let scale = 1;
    for (;;) {
      const b = buf[pos++]!;
      result += (b & 0x7f) * scale;
      if (b < 0x80) return result;
      scale *= 128;
    }
  };
  while (pos < buf.length) {
    const key = varint();
    const no = Math.floor(key / 8);
    const wire = key % 8;
    if (wire === 0) yield { no, value: varint() };
    else if (wire === 1) {
      pos += 8;
      yield { no, value: null };
    } else if (wire === 2) {
      const len = varint();
      yield { no, value: buf.subarray(pos, pos + len) };
      pos += len;
    } else if (wire === 5) {
      yield { no, value: null, fixed32: buf.subarray(pos, pos + 4) };
      pos += 4;
    } else return; // groups (3, 4) are not used by TensorBoard's protos
  }
}

/** Reads the scalars added since the last call, from every event file under `logDir`'s experiments. */
export class TensorboardScalars {
  private readonly offsets = new Map<string, number>();

  /** `since`: files last written before it (an earlier run's, before a resume) are not read. */
  constructor(
    private readonly logDir: string,
    private readonly since = 0,
  ) {}

  poll(): Scalar[] {
    const out: Scalar[] = [];
    for (const file of this.files()) {
      if (!this.offsets.has(file) && mtime(file) < this.since) continue;
      const from = this.offsets.get(file) ?? 0;
      let buf: Buffer;
      try {
        const fd = fs.openSync(file, 'r');
        try {
          const size = fs.fstatSync(fd).size;
          buf = Buffer.alloc(Math.max(0, size - from));
          fs.readSync(fd, buf, 0, buf.length, from);
        } finally {
          fs.closeSync(fd);
        }
      } catch {
        continue;
      }
      const { scalars, consumed } = parseEvents(buf);
      this.offsets.set(file, from + consumed);
      out.push(...scalars);
    }
    return out;
  }

  private files(): string[] {
    const list = (dir: string) => {
      try {
        return fs.readdirSync(dir);
      } catch {
        return [];
      }
    };
    return list(this.logDir)
      .filter((d) => /^exp_\d+$/.test(d))
      .flatMap((d) => {
        const tb = path.join(this.logDir, d, 'tensorboard');
        return list(tb)
          .filter((f) => f.startsWith('events.out.tfevents.'))
          .map((f) => path.join(tb, f));
      });
  }
}

/**
 * NeMo-RL's per-step advantage statistics from the scalars read so far (`train/advantages/mean`,
 * `/min`, `/max`), for the steps that have both min and max.
 */
export function stepAdvantages(scalars: readonly Scalar[]): Map<number, { mean: number | null; min: number | null; max: number | null }> {
  const by = new Map<number, { mean: number | null; min: number | null; max: number | null }>();
  for (const s of scalars) {
    const m = /^train\/advantages\/(mean|min|max)$/.exec(s.tag);
    if (!m) continue;
    const entry = by.get(s.step) ?? { mean: null, min: null, max: null };
    entry[m[1] as 'mean' | 'min' | 'max'] = s.value;
    by.set(s.step, entry);
  }
  return new Map([...by].filter(([, a]) => a.min !== null && a.max !== null));
}

/**
 * Each step's masked share from the Gym result fields polar's agent answers with: NeMo-RL logs every
 * numeric field of the first result's keys per agent as `<agent>/<key>/{mean,…}` (rollouts.py:2719-2742,
 * metric_utils.py:24-45: the mean is the sum over the agent's rows in the step / their count, so
 * `polar_masked`'s is the share masked), with prefix `train` (grpo.py:3022). `byKind`: the share of
 * each `polar_masked_<kind>`. With several agents (one per host) the shares are averaged, which is
 * exact when each ran as many rows. Steps without `polar_masked/mean` are left out.
 */
export function stepMasked(scalars: readonly Scalar[]): Map<number, { share: number; byKind: Record<string, number> }> {
  const by = new Map<number, Map<string, Map<string, number>>>();
  for (const s of scalars) {
    const m = /^train\/([^/]+)\/polar_masked(_\w+)?\/mean$/.exec(s.tag);
    if (!m) continue;
    const agents = by.get(s.step) ?? new Map<string, Map<string, number>>();
    const fields = agents.get(m[1]!) ?? new Map<string, number>();
    fields.set(m[2]?.slice(1) ?? '', s.value);
    agents.set(m[1]!, fields);
    by.set(s.step, agents);
  }
  const out = new Map<number, { share: number; byKind: Record<string, number> }>();
  for (const [step, agents] of by) {
    const withShare = [...agents.values()].filter((f) => f.has(''));
    if (withShare.length === 0) continue;
    const avg = (key: string) => withShare.reduce((a, f) => a + (f.get(key) ?? 0), 0) / withShare.length;
    const kinds = new Set(withShare.flatMap((f) => [...f.keys()].filter((k) => k !== '')));
    out.set(step, { share: avg(''), byKind: Object.fromEntries([...kinds].map((k) => [k, avg(k)])) });
  }
  return out;
}

function mtime(file: string): number {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}
