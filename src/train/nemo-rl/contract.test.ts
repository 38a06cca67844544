import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeFixtureCheckout } from '../../../test/support/nemo-rl-checkout.js';
import { smallGrpoConfig, smallSftConfig, withoutKey } from '../../../test/support/nemo-rl-config.js';
import { checkCheckout, describeReport, headCommit } from './check-checkout.js';
import { failedAsserts, loadContract, mergeOntoBaseKeys, missingKeys, requiredKeys } from './contract.js';
import { removeTree } from '../../../test/support/remove-tree.js';

const contract = loadContract();
const grpo = (nemoRl = '/rl') => smallGrpoConfig({ nemoRl, lora: true });
const sft = (nemoRl = '/rl') => smallSftConfig({ nemoRl });

describe('the pinned list (fixtures/nemo-rl/contract.json)', () => {
  it('is pinned to NeMo-RL 7ea279a and Gym c3bac96, and holds the reads issue 25 found', () => {
    expect(contract.pinned.nemo_rl.commit).toBe('7ea279abfbeb698b092856d0dab61e7cf39bc909');
    expect(contract.pinned.gym.commit).toBe('c3bac96314a59f28b896f597eb9845d175bb0252');
    const read = (key: string, file: string) => contract.reads.grpo.find((r) => r.key === key && r.file === file);
    expect(read('data.use_multiple_dataloader', 'nemo_rl/algorithms/grpo.py')?.lines).toEqual([560, 583, 605, 2792, 2816, 3353, 3595]);
    expect(read('data.shuffle', 'nemo_rl/algorithms/grpo.py')?.lines).toEqual([596]);
    expect(read('data.num_workers', 'nemo_rl/algorithms/grpo.py')?.lines).toContain(599);
    expect(contract.reads.sft.find((r) => r.key === 'policy.train_global_batch_size' && r.file === 'nemo_rl/algorithms/sft.py')?.lines).toContain(161);
    // Reads the run never reaches say why, so they can be judged when the pin moves.
    expect(read('data.num_prompts_per_dataloader', 'nemo_rl/algorithms/grpo.py')?.off_path).toMatch(/use_multiple_dataloader/);
  });
});

describe("polar's config merged onto the base config by NeMo-RL's rule", () => {
  it('grpo: holds every key NeMo-RL reads unguarded on the Gym GRPO path, or that pydantic requires', () => {
    const merged = mergeOntoBaseKeys('grpo', grpo(), contract);
    expect(requiredKeys('grpo', contract, merged).length).toBeGreaterThan(80);
    expect(missingKeys('grpo', contract, merged)).toEqual([]);
    // And passes the config asserts the list can state as key = value (contract-gaps.test.ts: every assert is judged one way).
    expect(failedAsserts('grpo', contract, merged)).toEqual([]);
    const withValidation = mergeOntoBaseKeys('grpo', { ...(grpo() as object), grpo: { ...(grpo() as { grpo: object }).grpo, val_period: 10 } }, contract);
    expect(failedAsserts('grpo', contract, withValidation)).toEqual([expect.stringMatching(/^nemo_rl\/algorithms\/grpo\.py:639: validation enabled/)]);
  });

  it('sft: the same on the openai_format SFT path', () => {
    const merged = mergeOntoBaseKeys('sft', sft(), contract);
    expect(missingKeys('sft', contract, merged)).toEqual([]);
  });

  it('finds the setup() crash when data is replaced without use_multiple_dataloader (the config before this fix)', () => {
    const merged = mergeOntoBaseKeys('grpo', withoutKey(grpo(), 'data.use_multiple_dataloader'), contract);
    expect(missingKeys('grpo', contract, merged)).toEqual([
      { key: 'data.use_multiple_dataloader', at: 'nemo_rl/algorithms/grpo.py:560,583,605,2792,2816,3353,3595' },
    ]);
    // And pydantic's own required fields: a replaced data section without shuffle.
    const noShuffle = mergeOntoBaseKeys('grpo', withoutKey(grpo(), 'data.shuffle'), contract);
    expect(missingKeys('grpo', contract, noShuffle).map((m) => m.key)).toEqual(['data.shuffle']);
  });
});

describe('--check-nemo-rl: a checkout read against the pinned list', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-nemo-rl-check-'));
  afterAll(() => removeTree(tmp));

  it('a checkout as pinned: every file there, every pinned line still reads its key, nothing missing', () => {
    const rl = writeFixtureCheckout(path.join(tmp, 'pinned'));
    for (const kind of ['grpo', 'sft'] as const) {
      const report = checkCheckout(rl, kind, kind === 'grpo' ? grpo(rl) : sft(rl), contract);
      expect(report).toMatchObject({ missingFiles: [], moved: [], gone: [], missingKeys: [], baseUnreadable: null });
      if (kind === 'grpo')
        expect(report.gym).toEqual({
          root: '3rdparty/Gym-workspace/Gym',
          checkedOut: true,
          commit: null,
          pinned: contract.pinned.gym.commit,
          missingFiles: [],
        });
      expect(report.checkedReads).toBeGreaterThan(kind === 'grpo' ? 100 : 40);
      expect(describeReport(report, rl)).toEqual({ errors: [], warnings: [] });
    }
  });

  it('a base config without a key polar relies on: reported as the error NeMo-RL would crash on', () => {
    const rl = writeFixtureCheckout(path.join(tmp, 'no-key'), { omitKeys: ['policy.generation.max_new_tokens'] });
    const report = checkCheckout(rl, 'grpo', grpo(rl), contract);
    expect(report.missingKeys.map((m) => m.key)).toEqual(['policy.generation.max_new_tokens']);
    const { errors } = describeReport(report, rl);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(
      /has no policy\.generation\.max_new_tokens, which NeMo-RL reads unguarded \(nemo_rl\/.*:\d+.*\): set it with --set policy\.generation\.max_new_tokens=/,
    );
  });

  it('a checkout cloned without --recursive: no Gym, said with the fix', () => {
    const rl = writeFixtureCheckout(path.join(tmp, 'flat'));
    fs.rmSync(path.join(rl, '3rdparty/Gym-workspace/Gym'), { recursive: true });
    fs.mkdirSync(path.join(rl, '3rdparty/Gym-workspace/Gym'));
    const report = checkCheckout(rl, 'grpo', grpo(rl), contract);
    expect(report.gym).toMatchObject({ checkedOut: false, commit: null });
    expect(describeReport(report, rl).warnings).toEqual([
      expect.stringMatching(/has no NeMo Gym \(the submodule 3rdparty\/Gym-workspace\/Gym is empty or absent\).*submodule update --init --recursive/),
    ]);
  });

  it('moved lines, a read that is gone, a missing file and another commit: warnings naming each', () => {
    const rl = writeFixtureCheckout(path.join(tmp, 'drift'), { shift: { file: 'nemo_rl/algorithms/grpo.py', by: 2 } });
    fs.rmSync(path.join(rl, 'nemo_rl/utils/logger.py'));
    fs.rmSync(path.join(rl, '3rdparty/Gym-workspace/Gym/responses_api_models'), { recursive: true });
    // A submodule's .git is a file naming the superproject's module folder.
    fs.mkdirSync(path.join(rl, '.git/modules/Gym'), { recursive: true });
    fs.writeFileSync(path.join(rl, '.git/modules/Gym/HEAD'), `${'b'.repeat(40)}\n`);
    fs.writeFileSync(path.join(rl, '3rdparty/Gym-workspace/Gym/.git'), 'gitdir: ../../../.git/modules/Gym\n');
    const sftPy = path.join(rl, 'nemo_rl/algorithms/sft.py');
    fs.writeFileSync(sftPy, fs.readFileSync(sftPy, 'utf8').replace(/\["shuffle"\]/g, '.get("shuffle")'));
    fs.mkdirSync(path.join(rl, '.git/refs/heads'), { recursive: true });
    fs.writeFileSync(path.join(rl, '.git/HEAD'), 'ref: refs/heads/main\n');
    fs.writeFileSync(path.join(rl, '.git/refs/heads/main'), `${'a'.repeat(40)}\n`);
    expect(headCommit(rl)).toBe('a'.repeat(40));

    const g = checkCheckout(rl, 'grpo', grpo(rl), contract);
    expect(g.missingFiles).toEqual(['nemo_rl/utils/logger.py']);
    expect(g.moved.find((m) => m.key === 'data.use_multiple_dataloader')).toEqual({
      key: 'data.use_multiple_dataloader',
      file: 'nemo_rl/algorithms/grpo.py',
      from: [560, 583, 605, 2792, 2816, 3353, 3595],
      to: [562, 585, 607, 2794, 2818, 3355, 3597],
    });
    expect(g.moved.every((m) => m.file === 'nemo_rl/algorithms/grpo.py')).toBe(true);
    expect(g.gym).toEqual({
      root: '3rdparty/Gym-workspace/Gym',
      checkedOut: true,
      commit: 'b'.repeat(40),
      pinned: contract.pinned.gym.commit,
      missingFiles: ['responses_api_models/vllm_model/configs/vllm_model_for_training.yaml'],
    });
    expect(describeReport(g, rl).warnings.join('\n')).toMatch(
      /its Gym submodule is at bbbbbbb, polar's list was read at c3bac96; Gym files gone: responses_api_models\/vllm_model\/configs\/vllm_model_for_training\.yaml/,
    );
    const s = checkCheckout(rl, 'sft', sft(rl), contract);
    expect(s.gone).toEqual([
      {
        key: 'data.shuffle',
        file: 'nemo_rl/algorithms/sft.py',
        lines: contract.reads.sft.find((r) => r.key === 'data.shuffle' && r.file === 'nemo_rl/algorithms/sft.py')!.lines,
      },
    ]);
    const { errors, warnings } = describeReport(s, rl);
    expect(errors).toEqual([]);
    expect(warnings.join('\n')).toMatch(
      /checkout is at aaaaaaa, polar's list was read at 7ea279a; files gone: nemo_rl\/utils\/logger\.py; no longer read: data\.shuffle \(nemo_rl\/algorithms\/sft\.py:\d+/,
    );
  });
});
