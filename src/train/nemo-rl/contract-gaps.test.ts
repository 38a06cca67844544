import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeFixtureCheckout } from '../../../test/support/nemo-rl-checkout.js';
import { smallGrpoConfig, smallSftConfig, withoutKey } from '../../../test/support/nemo-rl-config.js';
import { checkCheckout, describeReport } from './check-checkout.js';
import { applySet } from './config.js';
import { failedAsserts, loadContract, mergeOntoBaseKeys, missingKeys, valuesAt } from './contract.js';
import { scanConfigReads } from './scan-reads.js';
import type { Yaml } from '../yaml.js';
import { removeTree } from '../../../test/support/remove-tree.js';

/**
 * What `train check-nemo-rl` (and train's preflight) missed before issue 30: the per-dataset keys
 * NeMo-RL reads from each data.train entry, env.should_use_nemo_gym, the asserts it listed but never
 * evaluated, and reads that are new in a checkout. Each is planted as a removal and must be reported.
 */
const contract = loadContract();
const root = path.resolve(import.meta.dirname, '../../..');
const grpo = (nemoRl = '/rl') => smallGrpoConfig({ nemoRl });
const sft = (nemoRl = '/rl') => smallSftConfig({ nemoRl });

describe('the pinned list judges every assert it lists', () => {
  it('each is evaluated one way: as key = value (holds), as always true on polar’s path (why), or by the polar code named', () => {
    for (const a of contract.asserts) {
      const ways = [a.holds, a.always, a.checked_by].filter((w) => w !== undefined);
      expect(ways.length, `${a.file}:${a.line}`).toBeGreaterThan(0);
      if (a.checked_by?.startsWith('src/')) expect(fs.existsSync(path.join(root, a.checked_by.split(':')[0]!)), a.checked_by).toBe(true);
    }
  });

  it('the reads of issue 30, with file:line at the pin', () => {
    const at = (kind: 'grpo' | 'sft', key: string) => contract.reads[kind].filter((r) => r.key === key).map((r) => `${r.file}:${r.lines.join(',')}`);
    for (const kind of ['grpo', 'sft'] as const) {
      expect(at(kind, 'data.train[].dataset_name')).toEqual(['nemo_rl/data/datasets/response_datasets/__init__.py:111']);
      expect(at(kind, 'data.train[].processor')).toEqual(['nemo_rl/data/datasets/raw_dataset.py:53,55']);
    }
    expect(at('grpo', 'data.train[].data_path')).toEqual(['nemo_rl/data/datasets/response_datasets/nemogym_dataset.py:28']);
    expect(at('sft', 'data.train[].data_path')).toEqual(['nemo_rl/data/datasets/response_datasets/oai_format_dataset.py:124']);
    expect(at('grpo', 'env.should_use_nemo_gym')).toEqual(['nemo_rl/environments/nemo_gym.py:85']);
  });
});

describe('planted removals, on the config merged with the base keys', () => {
  it('each data.train entry needs dataset_name and data_path, data.default filled in (a map or a list of entries)', () => {
    for (const [kind, config] of [
      ['grpo', grpo()],
      ['sft', sft()],
    ] as const) {
      const merged = mergeOntoBaseKeys(kind, config, contract);
      expect(missingKeys(kind, contract, merged)).toEqual([]);
      const where = kind === 'grpo' ? 'data.default.dataset_name' : 'data.train.dataset_name';
      expect(missingKeys(kind, contract, mergeOntoBaseKeys(kind, withoutKey(config, where), contract))).toEqual([
        { key: 'data.train[].dataset_name', at: 'nemo_rl/data/datasets/response_datasets/__init__.py:111' },
      ]);
      expect(missingKeys(kind, contract, mergeOntoBaseKeys(kind, withoutKey(config, 'data.train.data_path'), contract)).map((m) => m.key)).toEqual([
        'data.train[].data_path',
      ]);
    }
    // A list of entries: one without data_path is enough to crash.
    const listed = applySet(grpo(), 'data.train=[{data_path: /a.jsonl}, {repeat: 2}]');
    expect(valuesAt(mergeOntoBaseKeys('grpo', listed, contract), 'data.train[].dataset_name')).toEqual(['NemoGymDataset', 'NemoGymDataset']);
    expect(missingKeys('grpo', contract, mergeOntoBaseKeys('grpo', listed, contract)).map((m) => m.key)).toEqual(['data.train[].data_path']);
  });

  it('a processor other than the run’s, env.should_use_nemo_gym missing, grpo.max_val_samples set: failed asserts', () => {
    const failed = (kind: 'grpo' | 'sft', config: Yaml) => failedAsserts(kind, contract, mergeOntoBaseKeys(kind, config, contract));
    expect(failed('grpo', grpo())).toEqual([]);
    expect(failed('sft', sft())).toEqual([]);
    expect(failed('grpo', withoutKey(grpo(), 'data.default.processor'))).toEqual([
      expect.stringMatching(
        /^nemo_rl\/data\/datasets\/raw_dataset\.py:53: .*math_hf_data_processor.*\(data\.train\[\]\.processor is missing, must be "nemo_gym_data_processor"\)$/,
      ),
    ]);
    expect(failed('sft', applySet(sft(), 'data.default.processor=math_hf_data_processor'))).toEqual([
      expect.stringMatching(/raw_dataset\.py:53: .*\(data\.train\[\]\.processor is "math_hf_data_processor", must be "sft_processor"\)$/),
    ]);
    expect(failed('grpo', withoutKey(grpo(), 'env.should_use_nemo_gym'))).toEqual([
      expect.stringMatching(/^examples\/nemo_gym\/run_grpo_nemo_gym\.py:195: should_use_nemo_gym.*\(env\.should_use_nemo_gym is missing, must be true\)$/),
    ]);
    expect(failed('grpo', applySet(grpo(), 'grpo.max_val_samples=16'))).toEqual([
      expect.stringMatching(
        /^examples\/nemo_gym\/run_grpo_nemo_gym\.py:206: grpo\.max_val_samples must be null.*\(grpo\.max_val_samples is 16, must be null\)$/,
      ),
    ]);
    // Conditions: batch_multiplier is judged only without dynamic sampling; a base value not known yet is not judged.
    expect(failed('grpo', applySet(applySet(grpo(), 'grpo.use_dynamic_sampling=false'), 'grpo.batch_multiplier=2'))).toEqual([
      expect.stringMatching(/grpo\.py:571: .*\(grpo\.batch_multiplier is 2, must be 1\)$/),
    ]);
    expect(failed('grpo', applySet(applySet(grpo(), 'grpo.use_dynamic_sampling=true'), 'grpo.batch_multiplier=2'))).toEqual([]);
    expect(failed('grpo', applySet(grpo(), 'policy.generation.val_top_k=${.top_k}'))).toEqual([]);
  });
});

describe('check-nemo-rl on a checkout: the planted removals are errors, and a read new upstream is one to review', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-nemo-rl-gaps-'));
  afterAll(() => removeTree(tmp));

  it('reports the failed assert and the missing per-dataset key as errors (they were not reported)', () => {
    const rl = writeFixtureCheckout(path.join(tmp, 'pinned'));
    const cases: [string, 'grpo' | 'sft', Yaml, RegExp][] = [
      ['max_val_samples', 'grpo', applySet(grpo(rl), 'grpo.max_val_samples=16'), /fails what NeMo-RL asserts at examples\/nemo_gym\/run_grpo_nemo_gym\.py:206/],
      [
        'should_use_nemo_gym',
        'grpo',
        withoutKey(grpo(rl), 'env.should_use_nemo_gym'),
        /fails what NeMo-RL asserts at examples\/nemo_gym\/run_grpo_nemo_gym\.py:195/,
      ],
      ['processor', 'grpo', withoutKey(grpo(rl), 'data.default.processor'), /fails what NeMo-RL asserts at nemo_rl\/data\/datasets\/raw_dataset\.py:53/],
      [
        'dataset_name',
        'grpo',
        withoutKey(grpo(rl), 'data.default.dataset_name'),
        /has no data\.train\[\]\.dataset_name, .*response_datasets\/__init__\.py:111.*--set data\.train\.dataset_name=/,
      ],
      ['data_path', 'sft', withoutKey(sft(rl), 'data.train.data_path'), /has no data\.train\[\]\.data_path, .*oai_format_dataset\.py:124/],
    ];
    for (const [name, kind, config, error] of cases) {
      const { errors } = describeReport(checkCheckout(rl, kind, config, contract), rl);
      expect(errors, name).toEqual([expect.stringMatching(error)]);
    }
  });

  it('a config read the list does not know, in a file the run reaches: "new reads to review", with file:line', () => {
    const rl = writeFixtureCheckout(path.join(tmp, 'newer'));
    const file = path.join(rl, 'nemo_rl/algorithms/grpo.py');
    fs.appendFileSync(
      file,
      [
        '    knob = master_config["grpo"]["brand_new_knob"]',
        '    depth = policy_config["generation"][',
        '        "brand_new_depth"',
        '    ]',
        '    fine = master_config["policy"].get("optional_knob")',
        '    master_config["grpo"]["written_here"] = 1',
        '    """A docstring naming master_config["grpo"]["in_prose"]."""',
        '    seen = master_config["policy"]["train_global_batch_size"]',
        '',
      ].join('\n'),
    );
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    const report = checkCheckout(rl, 'grpo', grpo(rl), contract);
    expect(report.newReads).toEqual([
      { key: 'grpo.brand_new_knob', file: 'nemo_rl/algorithms/grpo.py', line: lines.indexOf('    knob = master_config["grpo"]["brand_new_knob"]') + 1 },
      { key: 'policy.generation.brand_new_depth', file: 'nemo_rl/algorithms/grpo.py', line: lines.indexOf('        "brand_new_depth"') + 1 },
    ]);
    const { errors, warnings } = describeReport(report, rl);
    expect(errors).toEqual([]);
    expect(warnings).toEqual([
      expect.stringMatching(
        /^new reads to review: 2 config reads in .* that polar's pinned list \(NeMo-RL 7ea279a\) does not know: grpo\.brand_new_knob \(nemo_rl\/algorithms\/grpo\.py:\d+\); policy\.generation\.brand_new_depth/,
      ),
    ]);
    // SFT reaches no grpo.py: nothing new there.
    expect(checkCheckout(rl, 'sft', sft(rl), contract).newReads).toEqual([]);
  });

  it('the scan reads config chains the way extract.py names them', () => {
    expect(scanConfigReads('examples/run_sft.py', 'x = config["sft"]["val_period"]\ny = config.policy["generation"]["backend"]')).toEqual([
      { key: 'sft.val_period', line: 1 },
      { key: 'policy.generation.backend', line: 2 },
    ]);
    // `config` is the whole config only in the entry scripts; `self.cfg` is a section in the workers.
    expect(scanConfigReads('nemo_rl/algorithms/grpo.py', 'x = config["sft"]')).toEqual([]);
    expect(scanConfigReads('nemo_rl/models/generation/vllm/vllm_worker.py', 'n = self.cfg["vllm_cfg"]["max_model_len"]')).toEqual([
      { key: 'policy.generation.vllm_cfg.max_model_len', line: 1 },
    ]);
  });
});
