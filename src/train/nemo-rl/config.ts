import path from 'node:path';
import { PolarError } from '../../core/errors.js';
import { parseYaml, type Yaml } from '../yaml.js';

/**
 * NeMo-RL configuration files, as polar writes them for a run (pure). Key names are NeMo-RL's at
 * commit 7ea279a, checked both ways: every key written here exists in the base config
 * (fixtures/nemo-rl/*.keys), and the config merged onto that base by NeMo-RL's rule holds every key
 * NeMo-RL reads unguarded on the run's path (fixtures/nemo-rl/contract.json). Each file inherits the checkout's own defaults through an absolute `defaults:` (NeMo-RL
 * resolves a relative one against the file's folder, which is the run directory, not the checkout)
 * and overrides only what a polar run decides.
 */
export interface GrpoPlan {
  /** The NeMo-RL checkout, absolute. */
  nemoRl: string;
  model: string;
  runDir: string;
  gpus: number;
  steps: number;
  promptsPerStep: number;
  groupSize: number;
  maxSeqLen: number;
  lora: boolean;
  /** Tasks in the training set: the epochs needed for `steps` follow from it. */
  tasks: number;
  trainData: string;
  agentConfig: string;
  /** vLLM's tool parser for the exposed HTTP server (the chat endpoint polar's harness calls go to). */
  toolParser: string;
  /** Steps between checkpoints (NeMo-RL resumes from the newest). */
  savePeriod: number;
}

export const GRPO_BASE = 'examples/configs/grpo_math_1B.yaml';
export const GRPO_SCRIPT = 'examples/nemo_gym/run_grpo_nemo_gym.py';
export const SFT_BASE = 'examples/configs/sft.yaml';
export const SFT_SCRIPT = 'examples/run_sft.py';
/** Gym's model server for training, required in `config_paths` (its path inside the Gym checkout). */
export const GYM_MODEL_CONFIG = 'responses_api_models/vllm_model/configs/vllm_model_for_training.yaml';

/**
 * GRPO with NeMo Gym, polar's agent serving every rollout. On top of `grpo_math_1B.yaml` (small,
 * DTensor, one node): the sizes (`train_global_batch_size` = prompts × group size, so one optimizer
 * step per GRPO step), the async engine with its HTTP server exposed (NeMo Gym requires both), no
 * validation set (so `val_period: 0` and `max_val_samples: null`, which NeMo Gym's entry point
 * requires), and `data` and `env` replaced outright (`_override_`), since the base's math dataset
 * and environment would otherwise merge in.
 */
export function grpoConfig(p: GrpoPlan): Yaml {
  const stepsPerEpoch = Math.max(1, Math.floor(p.tasks / p.promptsPerStep));
  return {
    defaults: path.join(p.nemoRl, GRPO_BASE),
    grpo: {
      num_prompts_per_step: p.promptsPerStep,
      num_generations_per_prompt: p.groupSize,
      max_num_steps: p.steps,
      max_num_epochs: Math.ceil(p.steps / stepsPerEpoch),
      max_val_samples: null,
      val_batch_size: null,
      val_period: 0,
      val_at_start: false,
      val_at_end: false,
    },
    policy: {
      model_name: p.model,
      tokenizer: { name: p.model },
      train_global_batch_size: p.promptsPerStep * p.groupSize,
      max_total_sequence_length: p.maxSeqLen,
      dtensor_cfg: { lora_cfg: { enabled: p.lora } },
      generation: {
        temperature: 1.0,
        top_p: 1.0,
        top_k: null,
        vllm_cfg: {
          async_engine: true,
          expose_http_server: true,
          max_model_len: p.maxSeqLen,
          http_server_serving_chat_kwargs: { enable_auto_tools: true, tool_parser: p.toolParser },
        },
      },
    },
    checkpointing: { enabled: true, checkpoint_dir: path.join(p.runDir, 'checkpoints'), metric_name: null, save_period: p.savePeriod },
    logger: { log_dir: path.join(p.runDir, 'logs'), tensorboard_enabled: true, wandb_enabled: false, monitor_gpus: false },
    cluster: { gpus_per_node: p.gpus, num_nodes: 1 },
    data: {
      _override_: true,
      max_input_seq_length: null,
      shuffle: true,
      num_workers: 0,
      // Read unguarded in setup() and the train loop (grpo.py:560 and 6 more places; contract.json),
      // with no default: a replaced `data` section must carry it.
      use_multiple_dataloader: false,
      default: { dataset_name: 'NemoGymDataset', env_name: 'nemo_gym', prompt_file: null, system_prompt_file: null, processor: 'nemo_gym_data_processor' },
      train: { data_path: p.trainData },
      validation: null,
    },
    env: {
      _override_: true,
      should_use_nemo_gym: true,
      should_log_nemo_gym_responses: true,
      should_mask_flagged_samples: true,
      nemo_gym: { port_range_low: 5000, port_range_high: 5999, is_trajectory_collection: false, config_paths: [GYM_MODEL_CONFIG, p.agentConfig] },
    },
  };
}

export interface SftPlan {
  nemoRl: string;
  model: string;
  runDir: string;
  gpus: number;
  steps: number;
  maxSeqLen: number;
  lora: boolean;
  data: string;
  batchSize: number;
}

/**
 * SFT on openai_format examples (`{messages, tools}` per line), on top of `sft.yaml`: the model's own
 * chat template (`default`; the base has a SQuAD one), tool schemas kept per example
 * (`use_preserving_dataset`), and no validation set (`val_period: 0`, which `validation: null` needs).
 */
export function sftConfig(p: SftPlan): Yaml {
  return {
    defaults: path.join(p.nemoRl, SFT_BASE),
    sft: { max_num_steps: p.steps, max_num_epochs: 1000, val_period: 0, val_at_start: false, val_at_end: false },
    policy: {
      model_name: p.model,
      tokenizer: { name: p.model, chat_template: 'default' },
      train_global_batch_size: p.batchSize,
      max_total_sequence_length: p.maxSeqLen,
      dtensor_cfg: { lora_cfg: { enabled: p.lora } },
    },
    checkpointing: { enabled: true, checkpoint_dir: path.join(p.runDir, 'checkpoints'), metric_name: null, save_period: 10 },
    logger: { log_dir: path.join(p.runDir, 'logs'), tensorboard_enabled: true, wandb_enabled: false, monitor_gpus: false },
    cluster: { gpus_per_node: p.gpus, num_nodes: 1 },
    data: {
      _override_: true,
      max_input_seq_length: p.maxSeqLen,
      add_bos: true,
      add_eos: true,
      add_generation_prompt: false,
      shuffle: true,
      num_workers: 0,
      default: { prompt_file: null, system_prompt_file: null, processor: 'sft_processor' },
      train: {
        dataset_name: 'openai_format',
        data_path: p.data,
        chat_key: 'messages',
        tool_key: 'tools',
        system_key: null,
        system_prompt: null,
        use_preserving_dataset: true,
      },
      validation: null,
    },
  };
}

/** `--config extra.yaml` on top: a deep merge (maps merge, everything else replaces). */
export function mergeConfig(base: Yaml, extra: Yaml): Yaml {
  if (!isMap(base) || !isMap(extra)) return extra;
  const out: { [k: string]: Yaml } = { ...base };
  for (const [k, v] of Object.entries(extra)) out[k] = k in out ? mergeConfig(out[k]!, v) : v;
  return out;
}

/** `--set a.b.c=value` (value read as YAML: numbers, booleans, null, lists). */
export function applySet(config: Yaml, assignment: string): Yaml {
  const eq = assignment.indexOf('=');
  if (eq <= 0) throw new PolarError('POLAR_USAGE', `--set ${JSON.stringify(assignment)}: write key.path=value`);
  const keys = assignment.slice(0, eq).trim().split('.');
  if (keys.some((k) => k === '')) throw new PolarError('POLAR_USAGE', `--set ${JSON.stringify(assignment)}: empty key in the path`);
  let value: Yaml;
  try {
    value = parseYaml(`v: ${assignment.slice(eq + 1)}`) as Yaml;
    value = isMap(value) ? value.v! : value;
  } catch {
    value = assignment.slice(eq + 1);
  }
  const root: { [k: string]: Yaml } = isMap(config) ? { ...config } : {};
  let node = root;
  keys.forEach((k, i) => {
    if (i === keys.length - 1) node[k] = value;
    else {
      const next = node[k];
      node[k] = isMap(next) ? { ...next } : {};
      node = node[k] as { [k: string]: Yaml };
    }
  });
  return root;
}

/** A dotted key's value, or undefined. */
export function getKey(config: Yaml, dotted: string): Yaml | undefined {
  let node: Yaml | undefined = config;
  for (const k of dotted.split('.')) {
    if (!isMap(node)) return undefined;
    node = node[k];
  }
  return node;
}

/** Every leaf key path of a config (`_override_` markers and `defaults` left out). */
export function leafKeys(config: Yaml, prefix = ''): string[] {
  if (!isMap(config) || Object.keys(config).length === 0) return prefix ? [prefix] : [];
  return Object.entries(config).flatMap(([k, v]) => (k === '_override_' || (k === 'defaults' && !prefix) ? [] : leafKeys(v, prefix ? `${prefix}.${k}` : k)));
}

function isMap(v: Yaml | undefined): v is { [key: string]: Yaml } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
