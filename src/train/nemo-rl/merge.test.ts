import { describe, expect, it } from 'vitest';
import { loadWithInheritance, mergeWithOverride } from './merge.js';

// A golden case for NeMo-RL's merge rule (nemo_rl/utils/config.py at 7ea279a, :31-49 and :52-99),
// worked out by hand from that source: files in memory, read through the same function polar uses.
const files: Record<string, string> = {
  '/rl/examples/configs/grand.yaml': `
grpo:
  seed: 1
  num_prompts_per_step: 32
data:
  shuffle: true
  num_workers: 1
  use_multiple_dataloader: false
  train:
    dataset_name: math
env:
  math:
    num_workers: 8
policy:
  generation:
    stop_strings: [a, b]
    vllm_cfg:
      max_model_len: 512
      gpu_memory_utilization: 0.6
`,
  // A relative `defaults` resolves against the folder of the file naming it, not the caller's.
  '/rl/examples/configs/parent.yaml': `
defaults: grand.yaml
grpo:
  num_prompts_per_step: 8
logger:
  log_dir: logs
`,
  '/rl/examples/configs/other.yaml': `
logger:
  log_dir: other
  wandb_enabled: false
`,
  '/run/child.yaml': `
defaults:
  - /rl/examples/configs/parent.yaml
  - /rl/examples/configs/other.yaml
grpo:
  seed: ???
data:
  _override_: true
  shuffle: false
  train:
    data_path: /run/train.jsonl
policy:
  generation:
    stop_strings: [c]
    vllm_cfg:
      _override_: true
      max_model_len: 16384
env: null
`,
};
const read = (f: string) => {
  const text = files[f];
  if (text === undefined) throw new Error(`no ${f}`);
  return text;
};

describe("NeMo-RL's config merge rule", () => {
  it('defaults chains depth-first (later parents win), top-level _override_ replaces, deeper _override_ stays a key, lists and null replace, ??? keeps the base', () => {
    expect(loadWithInheritance('/run/child.yaml', read)).toEqual({
      // `seed: ???` is mandatory-not-given: OmegaConf keeps the parent's value.
      grpo: { seed: 1, num_prompts_per_step: 8 },
      // Replaced whole: num_workers and use_multiple_dataloader are gone, which is the crash in issue 25.
      data: { shuffle: false, train: { data_path: '/run/train.jsonl' } },
      env: null,
      policy: {
        generation: {
          stop_strings: ['c'],
          // Only top-level sections are looked at: here the marker is merged in as a plain key.
          vllm_cfg: { _override_: true, max_model_len: 16384, gpu_memory_utilization: 0.6 },
        },
      },
      logger: { log_dir: 'other', wandb_enabled: false },
    });
  });

  it('an _override_ section with the base lacking it is just added; a false marker merges', () => {
    expect(mergeWithOverride({ a: { x: 1 } }, { b: { _override_: true, y: 2 } })).toEqual({ a: { x: 1 }, b: { y: 2 } });
    expect(mergeWithOverride({ a: { x: 1 } }, { a: { _override_: false, y: 2 } })).toEqual({ a: { x: 1, _override_: false, y: 2 } });
  });
});
