import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applySet } from '../../src/train/nemo-rl/config.js';
import { toYaml, type Yaml } from '../../src/train/yaml.js';
import { writeFixtureCheckout } from '../support/nemo-rl-checkout.js';
import { smallGrpoConfig, smallSftConfig, withoutKey } from '../support/nemo-rl-config.js';
import { polarCli } from '../support/polar-cli.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * The NeMo-RL stand-in (test/support/fake-nemo-rl/launcher.mjs) fails on the keys and asserts the
 * pinned list gained in issue 30, as NeMo-RL would (KeyError in setup, AssertionError), so a config
 * that lacks them cannot pass the stand-in runs either.
 */
const LAUNCHER = path.resolve(__dirname, '../support/fake-nemo-rl/launcher.mjs');
const run = promisify(execFile);
let dir: string;
let checkout: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-contract-gaps-'));
  checkout = writeFixtureCheckout(path.join(dir, 'RL'));
  fs.writeFileSync(
    path.join(dir, 'sft.jsonl'),
    `${JSON.stringify({
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'hello' },
      ],
    })}\n`,
  );
});
afterAll(() => removeTree(dir));

// Paths the stand-in can read: its checkout, and files in this test's folder.
const grpo = () =>
  smallGrpoConfig({
    nemoRl: checkout,
    runDir: path.join(dir, 'run'),
    steps: 2,
    tasks: 2,
    trainData: path.join(dir, 'train.jsonl'),
    agentConfig: path.join(dir, 'polar_agent.yaml'),
  });
const sft = () => smallSftConfig({ nemoRl: checkout, runDir: path.join(dir, 'run'), steps: 2, data: path.join(dir, 'sft.jsonl') });

/** The stand-in started as polar starts NeMo-RL, on this config: its exit code and output. */
async function launch(script: string, config: Yaml, name: string): Promise<{ code: number; stdout: string }> {
  const file = path.join(dir, `${name}.yaml`);
  fs.writeFileSync(file, toYaml(config));
  return run(process.execPath, [LAUNCHER, script, '--config', file], { cwd: checkout, timeout: patient(30_000) }).then(
    (r) => ({ code: 0, stdout: r.stdout }),
    (e: { code: number; stdout: string }) => ({ code: e.code, stdout: e.stdout }),
  );
}

describe('the NeMo-RL stand-in on the keys issue 30 added to the pinned list', () => {
  it('crashes as NeMo-RL would on a data.train entry without dataset_name or data_path, a wrong processor, max_val_samples', {
    timeout: patient(60_000),
  }, async () => {
    const grpoScript = 'examples/nemo_gym/run_grpo_nemo_gym.py';
    const sftScript = 'examples/run_sft.py';
    // As written by polar, the SFT config runs (one example, a batch of 32: NeMo-RL trains zero steps and ends).
    expect(await launch(sftScript, sft(), 'sft-ok')).toMatchObject({ code: 0 });
    const cases: [string, string, Yaml, RegExp][] = [
      [
        'no-dataset-name',
        grpoScript,
        withoutKey(grpo(), 'data.default.dataset_name'),
        /KeyError: 'dataset_name' \(data\.train\[\]\.dataset_name, read at nemo_rl\/data\/datasets\/response_datasets\/__init__\.py:111\)/,
      ],
      [
        'no-data-path',
        grpoScript,
        withoutKey(grpo(), 'data.train.data_path'),
        /KeyError: 'data_path' \(data\.train\[\]\.data_path, read at .*nemogym_dataset\.py:28\)/,
      ],
      [
        'sft-no-data-path',
        sftScript,
        withoutKey(sft(), 'data.train.data_path'),
        /KeyError: 'data_path' \(data\.train\[\]\.data_path, read at .*oai_format_dataset\.py:124\)/,
      ],
      [
        'no-processor',
        grpoScript,
        withoutKey(grpo(), 'data.default.processor'),
        /AssertionError: nemo_rl\/data\/datasets\/raw_dataset\.py:53: .*processor is missing/,
      ],
      [
        'sft-processor',
        sftScript,
        applySet(sft(), 'data.default.processor=default'),
        /AssertionError: nemo_rl\/data\/datasets\/raw_dataset\.py:53: .*processor is "default", must be "sft_processor"/,
      ],
      [
        'no-gym',
        grpoScript,
        withoutKey(grpo(), 'env.should_use_nemo_gym'),
        /AssertionError: examples\/nemo_gym\/run_grpo_nemo_gym\.py:195: should_use_nemo_gym/,
      ],
      [
        'max-val',
        grpoScript,
        applySet(grpo(), 'grpo.max_val_samples=16'),
        /AssertionError: examples\/nemo_gym\/run_grpo_nemo_gym\.py:206: grpo\.max_val_samples must be null/,
      ],
    ];
    for (const [name, script, config, says] of cases) {
      const r = await launch(script, config, name);
      expect(r.code, name).toBe(1);
      expect(r.stdout, name).toMatch(says);
    }
  });
});

describe('polar train check-nemo-rl on a checkout that reads a key the pinned list does not know', () => {
  it('warns with the new read and where it is (exit 0: a person reads it)', { timeout: patient(60_000) }, async () => {
    const newer = writeFixtureCheckout(path.join(dir, 'RL-newer'));
    fs.appendFileSync(path.join(newer, 'examples/run_sft.py'), 'x = config["sft"]["brand_new_knob"]\n');
    const r = await polarCli(['train', 'check-nemo-rl', newer], { env: { ...process.env, NO_COLOR: '1' } });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^sft: \d+ reads checked, 0 moved, 0 gone, 0 files missing, 0 keys missing after the merge, 0 asserts failed, 1 new reads to review$/m,
    );
    expect(r.stderr).toMatch(
      /warning: sft: new reads to review: 1 config read in .*RL-newer that polar's pinned list \(NeMo-RL 7ea279a\) does not know: sft\.brand_new_knob \(examples\/run_sft\.py:\d+\)/,
    );
  });
});
