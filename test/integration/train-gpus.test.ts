import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTrainBench, trainEnv } from '../support/nemo-rl-train.js';
import { polarCli } from '../support/polar-cli.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * `--gpus` on a node with more GPUs than the run uses: the default stays 1 (a small batch cannot be
 * split over a whole node, NeMo-RL takes whole micro-batches per rank), so preflight says how many
 * sit idle and how to use them; and the devices are the user's CUDA_VISIBLE_DEVICES, not 0..n-1.
 */
let dir: string;
let checkout: string;
let fakeBin: string;
let data: string;

beforeAll(() => {
  ({ dir, checkout, fakeBin } = makeTrainBench('polar-train-gpus-'));
  // An 8-GPU node.
  fs.writeFileSync(
    path.join(fakeBin, 'nvidia-smi'),
    `#!/bin/sh\ncase "$*" in *memory.used*) for i in 0 1 2 3 4 5 6 7; do echo 2048; done ;; *) for i in 0 1 2 3 4 5 6 7; do echo "NVIDIA H100 80GB HBM3, 81559 MiB"; done ;; esac\n`,
    { mode: 0o755 },
  );
  const row = {
    messages: [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
    ],
  };
  data = path.join(dir, 'sft.jsonl');
  fs.writeFileSync(data, `${Array.from({ length: 8 }, () => JSON.stringify(row)).join('\n')}\n`);
});
afterAll(() => removeTree(dir));

const dryRun = async (runDir: string, extra: string[], env: Record<string, string> = {}) => {
  const { CUDA_VISIBLE_DEVICES: _ignored, ...base } = process.env;
  const r = await polarCli(
    [
      'train',
      'sft',
      '--nemo-rl',
      checkout,
      '--model',
      'Qwen/Qwen3-0.6B',
      '--data',
      data,
      '--batch-size',
      '8',
      '--run-dir',
      runDir,
      '--dry-run',
      '--json',
      ...extra,
    ],
    { env: trainEnv(fakeBin, env, base) },
  );
  return JSON.parse(r.stdout) as { ok: boolean; command: string; warnings: string[]; errors: string[] };
};

describe('polar train --gpus on a node with more GPUs', () => {
  it('says how many GPUs the run leaves idle, and trains on the devices CUDA_VISIBLE_DEVICES gives', { timeout: patient(60_000) }, async () => {
    const one = await dryRun(path.join(dir, 'one'), []);
    expect(one.ok).toBe(true);
    expect(one.command).toContain('CUDA_VISIBLE_DEVICES=0 ');
    expect(one.warnings).toContainEqual(
      expect.stringMatching(/^this run trains on 1 of the 8 GPUs nvidia-smi lists \(--gpus 1\): pass --gpus 8 to use them all/),
    );
    const all = await dryRun(path.join(dir, 'all'), ['--gpus', '8']);
    expect(all.warnings.filter((w) => /GPUs/.test(w))).toEqual([]);
    expect(all.command).toContain('CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 ');
    // The user was given GPUs 4-6: polar trains on the first two of those, not on 0 and 1.
    const mine = await dryRun(path.join(dir, 'mine'), ['--gpus', '2'], { CUDA_VISIBLE_DEVICES: '4,5,6' });
    expect(mine.command).toContain('CUDA_VISIBLE_DEVICES=4,5 ');
    expect(mine.warnings).toContainEqual(expect.stringMatching(/^this run trains on 2 of the 3 GPUs CUDA_VISIBLE_DEVICES=4,5,6 names/));
    const tooMany = await dryRun(path.join(dir, 'many'), ['--gpus', '4'], { CUDA_VISIBLE_DEVICES: '4,5,6' });
    expect(tooMany.warnings).toContainEqual(expect.stringMatching(/^--gpus 4, but CUDA_VISIBLE_DEVICES=4,5,6 names 3/));
  });
});
