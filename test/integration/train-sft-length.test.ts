import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getKey } from '../../src/train/nemo-rl/config.js';
import { parseYaml } from '../../src/train/yaml.js';
import { makeTrainBench, trainEnv } from '../support/nemo-rl-train.js';
import { polarCli } from '../support/polar-cli.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * `polar train sft` sizes every example with the model's chat template before NeMo-RL sees it:
 * NeMo-RL gives an example of data.max_input_seq_length tokens or more loss_multiplier 0
 * (data/processors.py:171-178), so a long real session would train nothing, unsaid. Counted here
 * with the bundled Qwen3 template (the model is a hub id not in the cache).
 */
let dir: string;
let checkout: string;
let fakeBin: string;
let data: string;

beforeAll(() => {
  ({ dir, checkout, fakeBin } = makeTrainBench('polar-sft-length-'));
  const row = (text: string) =>
    JSON.stringify({
      messages: [
        { role: 'user', content: text },
        { role: 'assistant', content: 'done' },
      ],
    });
  data = path.join(dir, 'sft.jsonl');
  // A short example, and one longer than the default 16384 tokens.
  fs.writeFileSync(data, `${row('say done')}\n${row('word '.repeat(17_000))}\n`);
});
afterAll(() => removeTree(dir));

const env = () => trainEnv(fakeBin, { HF_HOME: path.join(dir, 'hf'), POLAR_STATE_DIR: path.join(dir, 'state') });
const sft = (runDir: string, ...extra: string[]) =>
  polarCli(['train', 'sft', '--nemo-rl', checkout, '--model', 'Qwen/Qwen3-0.6B', '--data', data, '--run-dir', runDir, ...extra], {
    env: env(),
    timeout: patient(120_000),
  });

describe('polar train sft: examples sized against --max-seq-len', () => {
  it('a --max-seq-len the user chose that an example does not fit: refused before NeMo-RL starts, naming the example and the length', {
    timeout: patient(150_000),
  }, async () => {
    const dry = await sft(path.join(dir, 'dry'), '--max-seq-len', '16384', '--dry-run', '--json');
    const out = JSON.parse(dry.stdout) as { ok: boolean; errors: string[] };
    expect(dry.code).toBe(2);
    expect(out.errors).toEqual([
      expect.stringMatching(
        /^1 of 2 SFT examples in sft\.jsonl are 16384 tokens or longer \(bundled:qwen3 template\): line 2 \(\d{5} tokens\)\. NeMo-RL keeps such an example with loss_multiplier 0, .*Use --max-seq-len 17408 or more/,
      ),
    ]);
    const runDir = path.join(dir, 'run');
    const real = await sft(runDir, '--max-seq-len', '16384');
    expect(real.code).toBe(2);
    expect(real.stderr).toMatch(/cannot start sft:\n {2}1 of 2 SFT examples in sft\.jsonl are 16384 tokens or longer/);
    expect(fs.existsSync(path.join(runDir, 'train.log'))).toBe(false);
  });

  it('left at its default, the sequence length grows to hold the longest example, said in a warning', { timeout: patient(150_000) }, async () => {
    const runDir = path.join(dir, 'raised');
    const dry = await sft(runDir, '--dry-run', '--json');
    const out = JSON.parse(dry.stdout) as { ok: boolean; errors: string[]; warnings: string[] };
    expect(out.errors).toEqual([]);
    expect(out.warnings).toContainEqual(
      expect.stringMatching(/^--max-seq-len raised from its default 16384 to 17408: the longest of 2 SFT examples is \d{5} tokens \(bundled:qwen3 template\)/),
    );
    expect(out.warnings).toContainEqual(expect.stringMatching(/SFT examples counted with polar's bundled Qwen3 tokenizer/));
    const config = parseYaml(fs.readFileSync(path.join(runDir, 'sft.yaml'), 'utf8'));
    expect(getKey(config, 'data.max_input_seq_length')).toBe(17408);
    expect(getKey(config, 'policy.max_total_sequence_length')).toBe(17408);
  });
});
