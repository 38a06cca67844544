// What the NeMo-RL stand-in (launcher.mjs) computes from one GRPO step's NeMo Gym `/run` answers,
// as NeMo-RL 7ea279a does: the advantages (src/train/nemo-rl/advantages.ts, which cites each step),
// the per-agent rollout metrics, and what it logs. NeMo-RL sends `advantages/*` and the per-agent
// metrics to its logger (TensorBoard in polar's config, grpo.py:3762 `prefix="train"`), not to
// stdout; the stand-in prints the advantage statistics under the logger's names inside its
// "Training Results" block (polar train's progress reads them) and appends every logged value to
// `<log_dir>/exp_001/logged_metrics.jsonl` for tests to read. Nothing is trained: the printed loss is
// 0 when no sample in the loss has a non-zero advantage (NeMo-RL's policy-gradient loss is then
// zero apart from its KL term, which starts at zero), else a stand-in value.
import fs from 'node:fs';
import path from 'node:path';

const repo = path.resolve(import.meta.dirname, '../../..');
const { batchAdvantages, gymResultSample } = await import(path.join(repo, 'dist/train/nemo-rl/advantages.js'));

/**
 * NeMo-RL's per-agent rollout metrics (rollouts.py:2719-2740): for each key of the agent's first
 * result, its numeric values over the batch, as `<agent>/<key>/{mean,max,min}` (metric_utils.py:24-45,
 * mean = sum / number of results).
 */
export function perAgentMetrics(rows, answers) {
  const byAgent = new Map();
  rows.forEach((row, i) => byAgent.set(row.agent_ref.name, [...(byAgent.get(row.agent_ref.name) ?? []), answers[i]]));
  const metrics = {};
  for (const [agent, results] of byAgent) {
    for (const key of Object.keys(results[0])) {
      const values = results
        .map((r) => r[key])
        .filter((v) => typeof v === 'number' || typeof v === 'boolean')
        .map(Number);
      if (values.length === 0) continue;
      metrics[`${agent}/${key}/mean`] = values.reduce((a, b) => a + b, 0) / results.length;
      metrics[`${agent}/${key}/max`] = Math.max(...values);
      metrics[`${agent}/${key}/min`] = Math.min(...values);
    }
  }
  return metrics;
}

/** The step's advantages from its answers, with the config keys NeMo-RL reads for them. */
export function stepAdvantages(answers, get) {
  // Each answer as NeMo-RL reads it (gymResultSample); the launcher has checked each has a trainable item.
  return batchAdvantages(answers.map(gymResultSample), {
    leaveOneOut: get('grpo.use_leave_one_out_baseline') ?? true,
    normalize: get('grpo.normalize_rewards') ?? true,
    clipLow: get('grpo.advantage_clip_low') ?? null,
    clipHigh: get('grpo.advantage_clip_high') ?? null,
    maskFlagged: get('env.should_mask_flagged_samples') !== false,
  });
}

/** The lines the stand-in prints in its Training Results block for them (the logger's names). */
export function advantageLines(adv) {
  return Object.entries(adv.stats).map(([k, v]) => `  • ${k}: ${v.toFixed(4)}`);
}

/**
 * Appends one step's scalars to a TensorBoard event file, as NeMo-RL's TensorboardLogger does
 * (SummaryWriter.add_scalar: an Event with wall_time, step and a Summary of {tag, simple_value}, in
 * a TFRecord frame with masked CRC32C checksums), so polar train reads them as it reads NeMo-RL's.
 */
export function writeTensorboardStep(file, step, scalars) {
  const varint = (n) => {
    const out = [];
    while (n >= 0x80) {
      out.push((n % 128) | 0x80);
      n = Math.floor(n / 128);
    }
    return [...out, n];
  };
  const bytesField = (no, bytes) => Buffer.concat([Buffer.from([...varint(no * 8 + 2), ...varint(bytes.length)]), bytes]);
  const values = Object.entries(scalars).map(([tag, v]) => {
    const f = Buffer.alloc(4);
    f.writeFloatLE(v);
    return bytesField(1, Buffer.concat([bytesField(1, Buffer.from(tag)), Buffer.from([21]), f]));
  });
  const wall = Buffer.alloc(9);
  wall[0] = 9;
  wall.writeDoubleLE(Date.now() / 1000, 1);
  const event = Buffer.concat([wall, Buffer.from([16, ...varint(step)]), bytesField(5, Buffer.concat(values))]);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(event.length));
  const crc = (b) => {
    const out = Buffer.alloc(4);
    out.writeUInt32LE(maskedCrc32c(b));
    return out;
  };
  if (!fs.existsSync(file)) fs.writeFileSync(file, '');
  fs.appendFileSync(file, Buffer.concat([len, crc(len), event, crc(event)]));
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
