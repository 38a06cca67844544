import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeFixtureCheckout } from '../../../test/support/nemo-rl-checkout.js';
import { smallGrpoConfig, smallSftConfig, withoutKey } from '../../../test/support/nemo-rl-config.js';
import { removeTree } from '../../../test/support/remove-tree.js';
import { toYaml, type Yaml } from '../yaml.js';
import { batchAdvantages, type AdvantageSample } from './advantages.js';
import { batchSplitProblems } from './batch-split.js';
import { checkCheckout, describeReport } from './check-checkout.js';
import { applySet } from './config.js';
import { baseKeys, loadContract, treeOfKeys } from './contract.js';
import { contractChecks } from './preflight-contract.js';

/**
 * Issue 38 item 5, what `train check-nemo-rl` and `train`'s preflight still missed: NeMo Gym's
 * `env.nemo_gym.config_paths` and SFT's `sft.val_period` (each planted as a removal, from polar's
 * config and from the checkout's source), a GRPO batch that does not split over `--gpus`, and the
 * leave-one-out arithmetic behind the README's masked-sample sentence. File:line at NeMo-RL 7ea279a
 * (Gym c3bac96).
 */
const contract = loadContract();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-nemo-rl-leftovers-'));
afterAll(() => removeTree(tmp));

/** A stand-in checkout whose base config carries `values` (the pin's values) instead of placeholders. */
function checkoutWithBase(name: string, kind: 'grpo' | 'sft', values: Record<string, string>, opts: { omitKeys?: string[] } = {}): string {
  const rl = writeFixtureCheckout(path.join(tmp, name), opts);
  let base: Yaml = treeOfKeys(baseKeys(kind, contract).filter((k) => !(opts.omitKeys ?? []).includes(k)));
  for (const [k, v] of Object.entries(values)) base = applySet(base, `${k}=${v}`);
  fs.writeFileSync(path.join(rl, contract.runs[kind].base), toYaml(base));
  return rl;
}

/** grpo_math_1B.yaml at 7ea279a, the keys that decide how a step's batch is split (lines 132-135, 142-148, 325-334, 411-417, 520). */
const GRPO_BASE_SIZES = {
  'policy.train_micro_batch_size': '4',
  'policy.logprob_batch_size': "'${policy.train_micro_batch_size}'",
  'policy.dtensor_cfg.enabled': 'true',
  'policy.dtensor_cfg.tensor_parallel_size': '1',
  'policy.dtensor_cfg.context_parallel_size': '1',
  'policy.megatron_cfg.enabled': 'false',
  'policy.dynamic_batching.enabled': 'false',
  'policy.sequence_packing.enabled': 'true',
  'policy.generation.vllm_cfg.tensor_parallel_size': '1',
  'policy.generation.vllm_cfg.pipeline_parallel_size': '1',
  'policy.generation.colocated.enabled': 'true',
  'cluster.num_nodes': '1',
};

describe('the pinned list names env.nemo_gym.config_paths and sft.val_period, with file:line', () => {
  it('lists both reads and the sft.val_period assert', () => {
    const at = (kind: 'grpo' | 'sft', key: string) => contract.reads[kind].filter((r) => r.key === key).map((r) => `${r.file}:${r.lines.join(',')}`);
    expect(at('grpo', 'env.nemo_gym.config_paths')).toEqual(['nemo_rl/environments/nemo_gym.py:1165']);
    expect(at('sft', 'sft.val_period')).toEqual(['nemo_rl/algorithms/sft.py:273,405']);
    expect(contract.asserts.filter((a) => a.run === 'sft' && a.file === 'nemo_rl/algorithms/sft.py' && a.line === 273).map((a) => a.holds)).toEqual([
      [{ key: 'sft.val_period', at_most: 0 }],
    ]);
  });

  it('each batch-split assert at the pin is listed, checked by batch-split.ts', () => {
    const split = contract.asserts.filter((a) => a.checked_by === 'src/train/nemo-rl/batch-split.ts').map((a) => `${a.file}:${a.line}`);
    expect(split).toEqual([
      'nemo_rl/models/policy/lm_policy.py:233',
      'nemo_rl/models/generation/vllm/vllm_generation.py:121',
      'nemo_rl/distributed/batched_data_dict.py:537',
      'nemo_rl/distributed/batched_data_dict.py:541',
      'nemo_rl/distributed/batched_data_dict.py:1011',
      'nemo_rl/algorithms/grpo.py:4669',
    ]);
  });
});

describe('planted removals: check-nemo-rl fails naming the key', () => {
  it('GRPO without env.nemo_gym.config_paths: Gym would start no server (NoServerInstancesError)', () => {
    const rl = writeFixtureCheckout(path.join(tmp, 'gym'));
    const ok = describeReport(checkCheckout(rl, 'grpo', smallGrpoConfig({ nemoRl: rl }), contract), rl);
    expect(ok.errors).toEqual([]);
    const { errors } = describeReport(checkCheckout(rl, 'grpo', withoutKey(smallGrpoConfig({ nemoRl: rl }), 'env.nemo_gym.config_paths'), contract), rl);
    expect(errors).toEqual([
      expect.stringMatching(
        /has no env\.nemo_gym\.config_paths, .*\(nemo_rl\/environments\/nemo_gym\.py:1165\): set it with --set env\.nemo_gym\.config_paths=/,
      ),
    ]);
  });

  it('SFT without sft.val_period: the base’s 10 (or SFTConfig’s default 10) fails the assert at sft.py:273', () => {
    const sft = (rl: string) => smallSftConfig({ nemoRl: rl });
    // The real sft.yaml says val_period: 10 (examples/configs/sft.yaml:8).
    const rl = checkoutWithBase('sft-base', 'sft', { 'sft.val_period': '10' });
    expect(describeReport(checkCheckout(rl, 'sft', sft(rl), contract), rl).errors).toEqual([]);
    expect(describeReport(checkCheckout(rl, 'sft', withoutKey(sft(rl), 'sft.val_period'), contract), rl).errors).toEqual([
      expect.stringMatching(/fails what NeMo-RL asserts at nemo_rl\/algorithms\/sft\.py:273: .*\(sft\.val_period is 10, must be at most 0\)/),
    ]);
    // A base without the key: pydantic's default 10 then, so missing is a failure too.
    const bare = checkoutWithBase('sft-bare', 'sft', {}, { omitKeys: ['sft.val_period'] });
    expect(describeReport(checkCheckout(bare, 'sft', withoutKey(sft(bare), 'sft.val_period'), contract), bare).errors).toEqual([
      expect.stringMatching(/sft\.py:273: .*\(sft\.val_period is missing, must be at most 0\)/),
    ]);
    // NeMo-RL's rule is <= 0, not == 0.
    expect(describeReport(checkCheckout(rl, 'sft', applySet(sft(rl), 'sft.val_period=-1'), contract), rl).errors).toEqual([]);
    expect(describeReport(checkCheckout(rl, 'sft', applySet(sft(rl), 'sft.val_period=5'), contract), rl).errors).toEqual([
      expect.stringMatching(/\(sft\.val_period is 5, must be at most 0\)/),
    ]);
  });

  it('a checkout whose source no longer reads them: the reads are reported gone, by key', () => {
    const rl = writeFixtureCheckout(path.join(tmp, 'gone'));
    const drop = (file: string, lines: number[]) => {
      const text = fs.readFileSync(path.join(rl, file), 'utf8').split('\n');
      for (const n of lines) text[n - 1] = '#';
      fs.writeFileSync(path.join(rl, file), text.join('\n'));
    };
    drop('nemo_rl/environments/nemo_gym.py', [1165]);
    drop('nemo_rl/algorithms/sft.py', [273, 405]);
    expect(checkCheckout(rl, 'grpo', smallGrpoConfig({ nemoRl: rl }), contract).gone.map((g) => g.key)).toContain('env.nemo_gym.config_paths');
    const sft = checkCheckout(rl, 'sft', smallSftConfig({ nemoRl: rl }), contract);
    expect(sft.gone.map((g) => `${g.key} ${g.file}:${g.lines.join(',')}`)).toEqual(['sft.val_period nemo_rl/algorithms/sft.py:273,405']);
    expect(describeReport(sft, rl).warnings).toContainEqual(expect.stringMatching(/no longer read: sft\.val_period \(nemo_rl\/algorithms\/sft\.py:273,405\)/));
  });
});

describe('--gpus: a GRPO step batch that does not split over the GPUs is refused before anything starts', () => {
  const merged = (over: Parameters<typeof smallGrpoConfig>[0], sets: string[] = []) => {
    let base: Yaml = treeOfKeys(baseKeys('grpo', contract));
    for (const [k, v] of Object.entries(GRPO_BASE_SIZES)) base = applySet(base, `${k}=${v}`);
    let own = smallGrpoConfig(over);
    for (const s of sets) own = applySet(own, s);
    const { defaults: _d, ...rest } = own as Record<string, Yaml>;
    // A deep merge is enough here: none of these keys sits under an _override_ section.
    const merge = (a: Yaml, b: Yaml): Yaml =>
      typeof a === 'object' && a !== null && !Array.isArray(a) && typeof b === 'object' && b !== null && !Array.isArray(b)
        ? Object.fromEntries([...new Set([...Object.keys(a), ...Object.keys(b)])].map((k) => [k, k in b ? (k in a ? merge(a[k]!, b[k]!) : b[k]!) : a[k]!]))
        : b;
    return merge(base, rest);
  };

  it('sizes that split pass: the README runs, and 6 samples on 2 GPUs with sequence packing (the base’s) on', () => {
    expect(batchSplitProblems(merged({ gpus: 1, promptsPerStep: 2, groupSize: 4 }))).toEqual([]);
    expect(batchSplitProblems(merged({ gpus: 8, promptsPerStep: 8, groupSize: 4 }))).toEqual([]);
    expect(batchSplitProblems(merged({ gpus: 2, promptsPerStep: 2, groupSize: 3 }))).toEqual([]);
  });

  it('a batch the data-parallel GPUs do not divide: batched_data_dict.py:541, with the counts that fit', () => {
    expect(batchSplitProblems(merged({ gpus: 3, promptsPerStep: 2, groupSize: 4 }))).toEqual([
      expect.stringMatching(
        /^nemo_rl\/distributed\/batched_data_dict\.py:541: .*\(prompts × group size = 8\) evenly over the 3 data-parallel GPUs, and 8 does not divide by 3: make --prompts-per-step × --group-size a multiple of 3, or --gpus 1 \/ 2 \/ 4 \/ 8$/,
      ),
    ]);
  });

  it('with sequence packing off, each GPU’s share must be whole micro-batches: batched_data_dict.py:1011, GPUs × micro-batch', () => {
    expect(batchSplitProblems(merged({ gpus: 2, promptsPerStep: 2, groupSize: 3 }, ['policy.sequence_packing.enabled=false']))).toEqual([
      expect.stringMatching(
        /^nemo_rl\/distributed\/batched_data_dict\.py:1011: .*each of the 2 data-parallel GPUs gets 3 samples .*micro-batches of policy\.train_micro_batch_size 4 .*a multiple of GPUs × micro-batch = 8, --set policy\.train_micro_batch_size to a divisor of 3/,
      ),
      // logprob_batch_size is ${policy.train_micro_batch_size} in the base: followed.
      expect.stringMatching(/batched_data_dict\.py:1011: .*policy\.logprob_batch_size 4 \(dtensor_policy_worker_v2\.py:606-610, logprobs\)/),
    ]);
    expect(batchSplitProblems(merged({ gpus: 2, promptsPerStep: 4, groupSize: 2 }, ['policy.sequence_packing.enabled=false']))).toEqual([]);
  });

  it('parallel sizes and a global batch set by hand', () => {
    expect(batchSplitProblems(merged({ gpus: 3 }, ['policy.dtensor_cfg.tensor_parallel_size=2']))).toEqual([
      expect.stringMatching(
        /^nemo_rl\/models\/policy\/lm_policy\.py:233: the GPU count 3 .* tensor_parallel_size × context_parallel_size = 2: pass a --gpus that is a multiple of 2/,
      ),
    ]);
    expect(batchSplitProblems(merged({ gpus: 1, promptsPerStep: 2, groupSize: 3 }, ['policy.train_global_batch_size=4']))).toEqual([
      expect.stringMatching(
        /^nemo_rl\/distributed\/batched_data_dict\.py:537: the step's batch \(prompts × group size = 6\) is not a multiple of policy\.train_global_batch_size 4/,
      ),
    ]);
    // What the config cannot say (the key list's placeholders) is not judged.
    expect(batchSplitProblems(smallGrpoConfig({ gpus: 3, promptsPerStep: 2, groupSize: 4 }))).toEqual([]);
  });

  it('train’s preflight (contractChecks, before the run directory is launched) carries it as an error', () => {
    const rl = checkoutWithBase('split', 'grpo', GRPO_BASE_SIZES);
    const runDir = fs.mkdtempSync(path.join(tmp, 'run-'));
    const out = { errors: [] as string[], warnings: [] as string[] };
    contractChecks(rl, 'grpo', smallGrpoConfig({ nemoRl: rl, gpus: 3, promptsPerStep: 2, groupSize: 4 }), runDir, out);
    expect(out.errors).toEqual([
      expect.stringMatching(
        /^the batch does not split over the GPUs as NeMo-RL asserts at nemo_rl\/distributed\/batched_data_dict\.py:541: .*--gpus 1 \/ 2 \/ 4 \/ 8 \(polar's pinned list is NeMo-RL 7ea279a\)$/,
      ),
    ]);
    const fine = { errors: [] as string[], warnings: [] as string[] };
    contractChecks(rl, 'grpo', smallGrpoConfig({ nemoRl: rl, gpus: 2, promptsPerStep: 2, groupSize: 4 }), runDir, fine);
    expect(fine.errors).toEqual([]);
  });
});

describe('a masked sample in the baseline (the README’s sentence): leave-one-out, NeMo-RL’s default', () => {
  const sample = (reward: number, maskSample = false): AdvantageSample => ({ firstPrompt: [1, 2, 3], reward, maskSample, responseTokens: 1 });
  it('a masked 0 in a group of 4 whose others scored 1 raises each sibling’s raw advantage by 1/3 (0.25 only without leave-one-out)', () => {
    const raw = (leaveOneOut: boolean, rewards: AdvantageSample[]) => batchAdvantages(rewards, { leaveOneOut, normalize: false }).advantages;
    const withMasked = [sample(1), sample(1), sample(1), sample(0, true)];
    const without = [sample(1), sample(1), sample(1)];
    // Leave-one-out (grpo.py:253, advantage_estimator.py:50 default true): each 1 sees the others [1, 1, 0], baseline 2/3.
    expect(raw(true, withMasked).slice(0, 3)).toEqual([1, 1, 1].map(() => expect.closeTo(1 / 3, 12)));
    expect(raw(true, without)).toEqual([0, 0, 0]);
    // The plain group mean: baseline 3/4.
    expect(raw(false, withMasked).slice(0, 3)).toEqual([1, 1, 1].map(() => expect.closeTo(0.25, 12)));
  });
});
