import fs from 'node:fs';
import path from 'node:path';
import { PolarError } from '../../core/errors.js';
import { checkCheckout, describeReport, type CheckoutReport } from './check-checkout.js';
import { grpoConfig, sftConfig } from './config.js';
import { loadContract, type RunKind } from './contract.js';

/**
 * `polar train check-nemo-rl PATH`: a checkout read against the pinned list on its own, with the
 * configs polar writes by default (the sizes do not change which keys they hold), so an upgrade of
 * NeMo-RL can be judged before a run is prepared. `train grpo|sft` does the same in preflight with
 * the run's own config.
 */
export interface CheckoutCheck {
  checkout: string;
  reports: Record<RunKind, CheckoutReport>;
  errors: string[];
  warnings: string[];
}

export function checkNemoRlCheckout(checkout: string): CheckoutCheck {
  const rl = path.resolve(checkout);
  if (!fs.existsSync(rl))
    throw new PolarError('POLAR_USAGE', `no NeMo-RL checkout at ${rl}: clone it with \`git clone --recursive https://github.com/NVIDIA-NeMo/RL ${rl}\``);
  const contract = loadContract();
  const run = path.join(rl, '.polar-check');
  const configs = {
    grpo: grpoConfig({
      nemoRl: rl,
      model: 'Qwen/Qwen3-0.6B',
      runDir: run,
      gpus: 1,
      steps: 20,
      promptsPerStep: 2,
      groupSize: 4,
      maxSeqLen: 16384,
      lora: false,
      tasks: 2,
      trainData: path.join(run, 'train.jsonl'),
      agentConfig: path.join(run, 'polar_agent.yaml'),
      toolParser: 'hermes',
      savePeriod: 10,
    }),
    sft: sftConfig({
      nemoRl: rl,
      model: 'Qwen/Qwen3-0.6B',
      runDir: run,
      gpus: 1,
      steps: 20,
      maxSeqLen: 16384,
      lora: false,
      data: path.join(run, 'sft.jsonl'),
      batchSize: 32,
    }),
  };
  const reports = { grpo: checkCheckout(rl, 'grpo', configs.grpo, contract), sft: checkCheckout(rl, 'sft', configs.sft, contract) };
  const errors: string[] = [];
  const warnings: string[] = [];
  for (const kind of ['grpo', 'sft'] as const) {
    const described = describeReport(reports[kind], rl);
    errors.push(...described.errors.map((e) => `${kind}: ${e}`));
    warnings.push(...described.warnings.map((w) => `${kind}: ${w}`));
  }
  return { checkout: rl, reports, errors, warnings };
}
