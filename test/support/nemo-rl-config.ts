import { grpoConfig, sftConfig, type GrpoPlan, type SftPlan } from '../../src/train/nemo-rl/config.js';
import type { Yaml } from '../../src/train/yaml.js';

/**
 * The configs polar writes, in the small shape the contract tests read them in (a checkout at /rl,
 * the small Qwen3, one GPU, five steps of two prompts in groups of two, no LoRA), and a config with
 * one key planted as missing. Which keys a config holds does not depend on these sizes, so a test
 * changes only what it is about.
 */
export function smallGrpoConfig(over: Partial<GrpoPlan> = {}): Yaml {
  return grpoConfig({
    nemoRl: '/rl',
    model: 'Qwen/Qwen3-0.6B',
    runDir: '/run',
    gpus: 1,
    steps: 5,
    promptsPerStep: 2,
    groupSize: 2,
    maxSeqLen: 16384,
    lora: false,
    tasks: 3,
    trainData: '/run/train.jsonl',
    agentConfig: '/run/gym/polar_agent.yaml',
    toolParser: 'hermes',
    savePeriod: 10,
    ...over,
  });
}

/** `train sft`'s config in the same small shape (batches of 32 from /run/sft.jsonl). */
export function smallSftConfig(over: Partial<SftPlan> = {}): Yaml {
  return sftConfig({
    nemoRl: '/rl',
    model: 'Qwen/Qwen3-0.6B',
    runDir: '/run',
    gpus: 1,
    steps: 5,
    maxSeqLen: 16384,
    lora: false,
    data: '/run/sft.jsonl',
    batchSize: 32,
    ...over,
  });
}

/** A copy of `config` without the key at `dotted` (`a.b.c`): a planted removal, for a check to catch. */
export function withoutKey(config: Yaml, dotted: string): Yaml {
  const c = structuredClone(config) as { [k: string]: Yaml };
  const keys = dotted.split('.');
  let node = c;
  for (const k of keys.slice(0, -1)) node = node[k] as { [k: string]: Yaml };
  delete node[keys.at(-1)!];
  return c;
}
