#!/usr/bin/env python3
"""Writes fixtures/nemo-rl/contract.json from a NeMo-RL checkout at the pinned commit.

    python3 scripts/nemo-rl-contract/build.py RL_CHECKOUT > fixtures/nemo-rl/contract.json

The unguarded reads and pydantic-required TypedDict fields come from extract.py (found by walking
the source); what a person decided by reading the source is below as data: which reads the run
polar starts never reaches (`off_path`, with why), which keys NeMo-RL fills itself before reading
them, the asserts a config or a /run answer must pass, and the /run fields. Re-run it and re-read
the `CURATED` facts when the pin moves. Facts only: paths, key names, line numbers, our words.
"""
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
NEMO_RL = '7ea279abfbeb698b092856d0dab61e7cf39bc909'
GYM = 'c3bac96314a59f28b896f597eb9845d175bb0252'

GRPO_FILES = [
    'examples/nemo_gym/run_grpo_nemo_gym.py', 'nemo_rl/algorithms/grpo.py', 'nemo_rl/environments/nemo_gym.py',
    'nemo_rl/experience/rollouts.py', 'nemo_rl/models/generation/vllm/vllm_worker_async.py',
    'nemo_rl/models/generation/vllm/vllm_worker.py', 'nemo_rl/models/generation/vllm/vllm_generation.py',
    'nemo_rl/models/generation/__init__.py', 'nemo_rl/data/utils.py',
    'nemo_rl/data/datasets/response_datasets/__init__.py', 'nemo_rl/data/datasets/raw_dataset.py',
    'nemo_rl/data/datasets/response_datasets/nemogym_dataset.py',
]
SFT_FILES = [
    'examples/run_sft.py', 'nemo_rl/algorithms/sft.py', 'nemo_rl/data/datasets/response_datasets/oai_format_dataset.py',
    'nemo_rl/data/datasets/response_datasets/__init__.py', 'nemo_rl/data/datasets/raw_dataset.py',
]
SHARED = ['nemo_rl/models/policy/lm_policy.py', 'nemo_rl/models/policy/workers/dtensor_policy_worker_v2.py', 'nemo_rl/utils/checkpoint.py', 'nemo_rl/utils/logger.py', 'nemo_rl/distributed/virtual_cluster.py']

# Reads the run polar starts does not reach, by (key, file): why, in our words.
OFF_PATH = {
    ('data.num_prompts_per_dataloader', 'nemo_rl/algorithms/grpo.py'): 'only with data.use_multiple_dataloader: true (polar writes false)',
    ('env.reward_model', 'nemo_rl/algorithms/grpo.py'): 'only when a task names the reward_model environment (polar: nemo_gym only)',
    ('env.reward_model.resources', 'nemo_rl/algorithms/grpo.py'): 'only when a task names the reward_model environment',
    ('env.reward_model.resources.num_nodes', 'nemo_rl/algorithms/grpo.py'): 'only when a task names the reward_model environment',
    ('env.reward_model.resources.gpus_per_node', 'nemo_rl/algorithms/grpo.py'): 'only when a task names the reward_model environment',
    ('policy.generation.trtllm_cfg.tensor_parallel_size', 'nemo_rl/algorithms/grpo.py'): 'only with policy.generation.backend trtllm (polar: vllm)',
    ('policy.generation.sglang_cfg', 'nemo_rl/algorithms/grpo.py'): 'only with policy.generation.backend sglang (polar: vllm)',
    ('data.val_data_paths', 'nemo_rl/data/utils.py'): 'setup_preference_data (DPO / reward model), not called by GRPO or SFT',
    ('policy.batch_size', 'nemo_rl/models/policy/workers/dtensor_policy_worker_v2.py'): 'score(): reward-model scoring, not called by GRPO or SFT',
    # extract.py takes the parameter name data_config for the data section; here it is one data.train entry.
    ('data.dataset_name', 'nemo_rl/data/datasets/response_datasets/__init__.py'): 'load_response_dataset(data_config) is given one data.train entry, not the data section: the read is listed as data.train[].dataset_name',
}
# The same, for one run only.
OFF_PATH_SFT = {
    ('policy.dynamic_batching.logprob_mb_tokens', 'nemo_rl/models/policy/lm_policy.py'): 'logprob sharding and FP8 calibration: SFT computes no logprobs (and sft.yaml has dynamic_batching off)',
    ('policy.sequence_packing.logprob_mb_tokens', 'nemo_rl/models/policy/lm_policy.py'): 'logprob sharding and FP8 calibration: SFT computes no logprobs (and sft.yaml has sequence_packing off)',
    ('policy.logprob_batch_size', 'nemo_rl/models/policy/workers/dtensor_policy_worker_v2.py'): 'get_logprobs / get_topk_logits: SFT computes no logprobs',
}
# Reads extract.py cannot see, by reading the source: each dataset entry of data.train (a map or a
# list of them, each filled from data.default first: data/utils.py:171-177, run_sft.py:72-78) is
# handed to load_response_dataset, which reads its dataset_name unguarded and passes the entry to the
# dataset class as keyword arguments, whose data_path has no default; set_processor reads processor
# behind a membership test; should_use_nemo_gym reads env.should_use_nemo_gym with .get. `match`:
# the text the pinned line holds (not a subscript); `guarded`: absent is no KeyError, and why it
# still matters (an assert below says what the value must be).
CURATED_READS = [
    {'run': 'grpo', 'key': 'env.should_use_nemo_gym', 'file': 'nemo_rl/environments/nemo_gym.py', 'lines': [85], 'match': '.get("should_use_nemo_gym")', 'guarded': 'absent reads as false: should_use_nemo_gym(config) is then false, and run_grpo_nemo_gym.py:195 asserts it'},
    *[{'run': run, 'key': 'data.train[].dataset_name', 'file': 'nemo_rl/data/datasets/response_datasets/__init__.py', 'lines': [111]} for run in ('grpo', 'sft')],
    {'run': 'grpo', 'key': 'data.train[].data_path', 'file': 'nemo_rl/data/datasets/response_datasets/nemogym_dataset.py', 'lines': [28], 'match': 'data_path: str', 'note': 'NemoGymDataset(**entry): a required parameter (TypeError without it)'},
    {'run': 'sft', 'key': 'data.train[].data_path', 'file': 'nemo_rl/data/datasets/response_datasets/oai_format_dataset.py', 'lines': [124], 'match': 'data_path: str', 'note': 'OpenAIFormatDataset(**entry): a required parameter (TypeError without it)'},
    # Gym takes env.nemo_gym whole as its initial global config (nemo_gym.py:1165, :1199, :619) and
    # reads config_paths from it with `.get(...) or []` (Gym c3bac96 nemo_gym/global_config.py:680):
    # absent, no server is configured and RunHelper.start raises NoServerInstancesError
    # (nemo_gym/cli/env.py:373, global_config.py:403-416) before any rollout. Required, like a subscript.
    {'run': 'grpo', 'key': 'env.nemo_gym.config_paths', 'file': 'nemo_rl/environments/nemo_gym.py', 'lines': [1165], 'match': 'dict(env_configs["nemo_gym"])', 'note': "handed to Gym as initial_global_config_dict (:1199, :619); Gym reads config_paths at 3rdparty/Gym-workspace/Gym/nemo_gym/global_config.py:680 (.get or []): absent, RunHelper.start raises NoServerInstancesError (nemo_gym/cli/env.py:373)"},
    # SFTConfig is pydantic (attribute reads): an absent sft.val_period is its default 10 (sft.py:83),
    # which the assert at sft.py:273 refuses when there is no validation set (see ASSERTS).
    {'run': 'sft', 'key': 'sft.val_period', 'file': 'nemo_rl/algorithms/sft.py', 'lines': [273, 405], 'match': '.val_period', 'guarded': 'absent: SFTConfig.val_period defaults to 10 (sft.py:83); with no validation set the first validation (val_at_start, default true, or step 10) then fails the assert at sft.py:273'},
    *[{'run': run, 'key': 'data.train[].processor', 'file': 'nemo_rl/data/datasets/raw_dataset.py', 'lines': [53, 55], 'match': '"processor"', 'guarded': "absent: the 'default' processor, math_hf_data_processor (data/processors.py:869), which reads math problems, not these rows"} for run in ('grpo', 'sft')],
]
# Reads the text scan of check-nemo-rl finds at the pin that extract.py does not resolve (a local
# `config` in main()), judged here: (key, file, line, why).
SCANNED_REVIEWED = [
    ('policy.draft.enabled', 'examples/nemo_gym/run_grpo_nemo_gym.py', 172, 'behind `"draft" in config.policy`'),
]
# Keys NeMo-RL writes into the config before it reads them: (key, file, line).
FILLED = [
    ('policy.generation.model_name', 'nemo_rl/algorithms/grpo.py', 1109, 'grpo'),
    ('policy.generation._pad_token_id', 'nemo_rl/models/generation/__init__.py', 42, 'grpo'),
    ('policy.generation.vllm_cfg.load_format', 'nemo_rl/models/generation/__init__.py', 49, 'grpo'),
    ('policy.generation.vllm_cfg.skip_tokenizer_init', 'nemo_rl/models/generation/__init__.py', 100, 'grpo'),
    ('policy.generation.vllm_cfg.async_engine', 'nemo_rl/environments/nemo_gym.py', 1116, 'grpo'),
    ('policy.generation.vllm_cfg.expose_http_server', 'nemo_rl/environments/nemo_gym.py', 1117, 'grpo'),
    ('policy.generation.stop_strings', 'nemo_rl/environments/nemo_gym.py', 1120, 'grpo'),
    ('policy.generation.stop_token_ids', 'nemo_rl/environments/nemo_gym.py', 1121, 'grpo'),
]
# Asserts and raises a config, the data or a /run answer must pass, in our words.
ASSERTS = [
    {'run': 'grpo', 'on': 'config', 'file': 'examples/nemo_gym/run_grpo_nemo_gym.py', 'line': 195, 'what': 'should_use_nemo_gym(config) holds after setup_nemo_gym_config (env.should_use_nemo_gym read at nemo_gym.py:85; async_engine and expose_http_server are set true at nemo_gym.py:1116-1117)', 'holds': [{'key': 'env.should_use_nemo_gym', 'is': True}]},
    {'run': 'grpo', 'on': 'config', 'file': 'examples/nemo_gym/run_grpo_nemo_gym.py', 'line': 206, 'what': 'grpo.max_val_samples must be null (raises ValueError)', 'holds': [{'key': 'grpo.max_val_samples', 'is': None}]},
    {'run': 'grpo', 'on': 'config', 'file': 'examples/nemo_gym/run_grpo_nemo_gym.py', 'line': 302, 'what': 'async GRPO refuses data.use_multiple_dataloader: true', 'when': [{'key': 'grpo.async_grpo.enabled', 'is': True}], 'holds': [{'key': 'data.use_multiple_dataloader', 'is': False}]},
    {'run': 'grpo', 'on': 'config', 'file': 'examples/nemo_gym/run_grpo_nemo_gym.py', 'line': 147, 'what': 'MasterConfig(**config): pydantic requires the TypedDict fields listed under typed_required', 'checked_by': 'typed_required: contract.ts missingKeys'},
    {'run': 'grpo', 'on': 'config', 'file': 'nemo_rl/environments/nemo_gym.py', 'line': 90, 'what': 'should_use_nemo_gym: with backend vllm, vllm_cfg.async_engine and expose_http_server must be true', 'holds': [{'key': 'policy.generation.backend', 'is': 'vllm'}], 'always': 'setup_nemo_gym_config sets async_engine and expose_http_server true first (nemo_gym.py:1116-1117); the backend is checked'},
    {'run': 'grpo', 'on': 'config', 'file': 'nemo_rl/algorithms/grpo.py', 'line': 511, 'what': 'val_temperature / val_top_p / val_top_k differing from the train values only with vLLM + NeMo Gym', 'always': "polar's GRPO runs are vLLM + NeMo Gym (the asserts at nemo_gym.py:90 and run_grpo_nemo_gym.py:195)"},
    {'run': 'grpo', 'on': 'config', 'file': 'nemo_rl/algorithms/grpo.py', 'line': 521, 'what': 'generation.val_top_k must be unset on the NeMo Gym path (asserted when validation sampling differs from training)', 'holds': [{'key': 'policy.generation.val_top_k', 'is': None}]},
    {'run': 'grpo', 'on': 'config', 'file': 'nemo_rl/algorithms/grpo.py', 'line': 571, 'what': 'grpo.batch_multiplier must be 1 without dynamic sampling', 'when': [{'key': 'grpo.use_dynamic_sampling', 'is': False}], 'holds': [{'key': 'grpo.batch_multiplier', 'is': 1}]},
    {'run': 'grpo', 'on': 'config', 'file': 'nemo_rl/data/datasets/raw_dataset.py', 'line': 53, 'what': "each data.train entry (data.default filled in) names the processor nemo_gym_data_processor; without one NeMo-RL takes 'default', math_hf_data_processor (data/processors.py:869), which does not read Gym rows", 'holds': [{'key': 'data.train[].processor', 'is': 'nemo_gym_data_processor'}]},
    {'run': 'sft', 'on': 'config', 'file': 'nemo_rl/data/datasets/raw_dataset.py', 'line': 53, 'what': "each data.train entry (data.default filled in) names the processor sft_processor; without one NeMo-RL takes 'default', math_hf_data_processor (data/processors.py:869), which does not read openai_format rows", 'holds': [{'key': 'data.train[].processor', 'is': 'sft_processor'}]},
    {'run': 'grpo', 'on': 'config', 'file': 'nemo_rl/algorithms/grpo.py', 'line': 639, 'what': 'validation enabled (val_period > 0, val_at_start or val_at_end) needs a validation dataset (polar gives none)', 'holds': [{'key': 'data.validation', 'is': None}, {'key': 'grpo.val_period', 'is': 0}, {'key': 'grpo.val_at_start', 'is': False}, {'key': 'grpo.val_at_end', 'is': False}]},
    {'run': 'grpo', 'on': 'data', 'file': 'nemo_rl/algorithms/grpo.py', 'line': 598, 'what': 'train dataloader: batch = num_prompts_per_step, drop_last=True (fewer rows than a batch: no step)', 'checked_by': 'src/train/preflight.ts: fewer tasks than --prompts-per-step is refused'},
    {'run': 'grpo', 'on': 'result', 'file': 'nemo_rl/environments/nemo_gym.py', 'line': 760, 'what': 'a /run answer must be a JSON object', 'checked_by': 'src/train/gym-agent/result.ts: every answer is built there'},
    {'run': 'grpo', 'on': 'result', 'file': 'nemo_rl/environments/nemo_gym.py', 'line': 840, 'what': 'each trainable item\'s prompt_token_ids must start with every token seen so far (one append-only chain)', 'checked_by': 'src/train/gym-agent/result.ts: one append-only chain per answer'},
    {'run': 'grpo', 'on': 'result', 'file': 'nemo_rl/environments/nemo_gym.py', 'line': 987, 'what': 'a result with no trainable item (non-empty generation_token_ids) raises ValueError', 'checked_by': 'src/train/gym-agent/result.ts: a failed sample answers one placeholder token item'},
    {'run': 'grpo', 'on': 'result', 'file': 'nemo_rl/environments/nemo_gym.py', 'line': 719, 'what': 'NaN generation logprobs raise RuntimeError', 'checked_by': 'src/train/gym-agent/result.ts'},
    {'run': 'grpo', 'on': 'result', 'file': 'nemo_rl/environments/nemo_gym.py', 'line': 1098, 'what': 'with reward_components, reward must equal their sum', 'always': 'polar answers no reward_components'},
    {'run': 'grpo', 'on': 'result', 'file': 'nemo_rl/models/generation/vllm/vllm_worker_async.py', 'line': 443, 'what': 'a prompt that fills max_model_len is refused (HTTP 400 to the agent)', 'checked_by': "src/train/first-prompt.ts: preflight sizes --max-seq-len to the harness's first prompt"},
    {'run': 'sft', 'on': 'config', 'file': 'nemo_rl/algorithms/sft.py', 'line': 273, 'what': 'validate() with no validation set (polar gives none) asserts sft.val_period <= 0; absent, SFTConfig defaults it to 10 (sft.py:83), so the first validation (val_at_start, or step val_period) crashes', 'holds': [{'key': 'sft.val_period', 'at_most': 0}]},
    # How a GRPO step's batch is split over the GPUs (DTensor policy; polar writes
    # train_global_batch_size = prompts x group size and cluster.gpus_per_node = --gpus).
    {'run': 'grpo', 'on': 'config', 'file': 'nemo_rl/models/policy/lm_policy.py', 'line': 233, 'what': 'the policy world size (cluster.gpus_per_node x num_nodes) must be a multiple of PP x CP x TP (ValueError; :225 when smaller); data-parallel size = world size / (PP x CP x TP)', 'checked_by': 'src/train/nemo-rl/batch-split.ts'},
    {'run': 'grpo', 'on': 'config', 'file': 'nemo_rl/models/generation/vllm/vllm_generation.py', 'line': 121, 'what': 'the world size must be a multiple of vLLM tensor_parallel_size x pipeline_parallel_size', 'checked_by': 'src/train/nemo-rl/batch-split.ts'},
    {'run': 'grpo', 'on': 'config', 'file': 'nemo_rl/distributed/batched_data_dict.py', 'line': 537, 'what': 'train: the step batch (num_prompts_per_step x num_generations_per_prompt) must be a multiple of policy.train_global_batch_size (lm_policy.py:779, :532-535)', 'checked_by': 'src/train/nemo-rl/batch-split.ts'},
    {'run': 'grpo', 'on': 'config', 'file': 'nemo_rl/distributed/batched_data_dict.py', 'line': 541, 'what': 'train: policy.train_global_batch_size must be a multiple of the data-parallel size (lm_policy.py:512-536); logprobs: the step batch too (batch_size None, lm_policy.py:470-496)', 'checked_by': 'src/train/nemo-rl/batch-split.ts'},
    {'run': 'grpo', 'on': 'config', 'file': 'nemo_rl/distributed/batched_data_dict.py', 'line': 1011, 'what': "without sequence packing or dynamic batching (automodel/data.py:227-245), each data-parallel rank's share must be whole micro-batches: train_global_batch_size / DP of policy.train_micro_batch_size (dtensor_policy_worker_v2.py:414-417, :496-499), the step batch / DP of policy.logprob_batch_size (:606-610, :632-635)", 'checked_by': 'src/train/nemo-rl/batch-split.ts'},
    {'run': 'grpo', 'on': 'config', 'file': 'nemo_rl/algorithms/grpo.py', 'line': 4669, 'what': 'async GRPO: num_prompts_per_step x num_generations_per_prompt must be a multiple of the data-parallel size (AssertionError)', 'checked_by': 'src/train/nemo-rl/batch-split.ts'},
    {'run': 'sft', 'on': 'data', 'file': 'nemo_rl/algorithms/sft.py', 'line': 164, 'what': 'train dataloader: batch = policy.train_global_batch_size, drop_last=True (fewer examples than a batch: zero steps)', 'checked_by': 'src/train/sft-batch.ts'},
    {'run': 'sft', 'on': 'data', 'file': 'nemo_rl/models/policy/workers/dtensor_policy_worker_v2.py', 'line': 417, 'what': 'the global batch is split evenly over data-parallel ranks (gbs // dp_size)', 'checked_by': 'src/train/sft-batch.ts'},
    {'run': 'sft', 'on': 'data', 'file': 'nemo_rl/distributed/batched_data_dict.py', 'line': 1011, 'what': 'each rank\'s share of the batch must be a whole number of micro-batches', 'checked_by': 'src/train/sft-batch.ts'},
    {'run': 'sft', 'on': 'data', 'file': 'nemo_rl/data/datasets/response_datasets/oai_format_dataset.py', 'line': 193, 'what': 'an openai_format row must end with an assistant message', 'checked_by': 'src/trajectory/export: polar exports SFT rows ending with the assistant'},
    {'run': 'sft', 'on': 'data', 'file': 'nemo_rl/data/processors.py', 'line': 174, 'what': 'an example of max_input_seq_length tokens or more is truncated and gets loss_multiplier 0: it leaves the loss', 'checked_by': 'src/train/sft-length.ts: preflight sizes every example with the chat template'},
]
# /run: what NeMo-RL and NeMo Gym send to the agent, and what they read of its answer.
GYM_RUN = {
    'request': [
        {'field': 'responses_create_params', 'repo': 'RL', 'file': 'nemo_rl/experience/rollouts.py', 'line': 2231, 'note': 'must be an object (TypeError otherwise)'},
        {'field': 'responses_create_params.temperature', 'repo': 'RL', 'file': 'nemo_rl/experience/rollouts.py', 'line': 2235, 'note': 'set from the sampling params'},
        {'field': 'responses_create_params.top_p', 'repo': 'RL', 'file': 'nemo_rl/experience/rollouts.py', 'line': 2236, 'note': 'set from the sampling params'},
        {'field': 'responses_create_params.max_output_tokens', 'repo': 'RL', 'file': 'nemo_rl/experience/rollouts.py', 'line': 2239, 'note': 'min(row value, policy.generation.max_new_tokens)'},
        {'field': '_rowidx', 'repo': 'RL', 'file': 'nemo_rl/experience/rollouts.py', 'line': 2244, 'note': 'the row index in the batch'},
        {'field': 'agent_ref.name', 'repo': 'Gym', 'file': 'nemo_gym/rollout_collection.py', 'line': 1038, 'note': 'the server the row is POSTed to at /run'},
    ],
    'response': [
        {'field': 'response', 'repo': 'RL', 'file': 'nemo_rl/environments/nemo_gym.py', 'line': 765, 'required': True},
        {'field': 'responses_create_params', 'repo': 'RL', 'file': 'nemo_rl/environments/nemo_gym.py', 'line': 766, 'required': True},
        {'field': 'response.output', 'repo': 'RL', 'file': 'nemo_rl/environments/nemo_gym.py', 'line': 830, 'required': True},
        {'field': 'response.output[].prompt_token_ids', 'repo': 'RL', 'file': 'nemo_rl/environments/nemo_gym.py', 'line': 849},
        {'field': 'response.output[].generation_token_ids', 'repo': 'RL', 'file': 'nemo_rl/environments/nemo_gym.py', 'line': 850},
        {'field': 'response.output[].generation_log_probs', 'repo': 'RL', 'file': 'nemo_rl/environments/nemo_gym.py', 'line': 851},
        {'field': 'responses_create_params.input', 'repo': 'RL', 'file': 'nemo_rl/environments/nemo_gym.py', 'line': 974, 'note': 'read when no item is trainable, to size the prompt for the error'},
        {'field': 'reward', 'repo': 'RL', 'file': 'nemo_rl/experience/rollouts.py', 'line': 2784, 'required': True},
        {'field': 'instance_config.mask_sample', 'repo': 'RL', 'file': 'nemo_rl/experience/rollouts.py', 'line': 271, 'note': 'optional; flagged samples leave the loss but count for advantages (:2791-2794)'},
    ],
}


def grouped(reads, run):
    files = (GRPO_FILES if run == 'grpo' else SFT_FILES) + SHARED
    rows = [r for r in reads if r['file'] in files and not r['guarded']]
    # cfg["a"]["b"] reads a and a.b on one line: keep the deepest.
    deepest = {(r['file'], r['line']): set() for r in rows}
    for r in rows:
        deepest[(r['file'], r['line'])].add(r['key'])
    out = {}
    for r in rows:
        if any(k != r['key'] and k.startswith(r['key'] + '.') for k in deepest[(r['file'], r['line'])]):
            continue
        e = out.setdefault((r['key'], r['file']), {'key': r['key'], 'file': r['file'], 'lines': []})
        if r['line'] not in e['lines']:
            e['lines'].append(r['line'])
    filled = {k for k, _, _, rr in FILLED if rr == run}
    entries = []
    for (key, file), e in sorted(out.items()):
        e['lines'].sort()
        why = OFF_PATH.get((key, file)) or (OFF_PATH_SFT.get((key, file)) if run == 'sft' else None)
        if key in filled:
            why = 'filled by NeMo-RL before it is read (see filled)'
        if run == 'sft' and key.startswith('policy.generation'):
            why = 'generation: SFT builds no generation engine'
        if why:
            e['off_path'] = why
        entries.append(e)
    for c in CURATED_READS:
        if c['run'] == run:
            entries.append({k: v for k, v in c.items() if k != 'run'})
    return entries


def reviewed(reads, run):
    """Reads behind a membership test of their key (guarded: no KeyError), and those judged in
    SCANNED_REVIEWED: known at the pin, so check-nemo-rl's scan reports only reads new since."""
    files = (GRPO_FILES if run == 'grpo' else SFT_FILES) + SHARED
    out = {}
    for r in reads:
        if r['file'] in files and r['guarded']:
            out.setdefault((r['key'], r['file']), set()).add(r['line'])
    for key, file, line, _why in SCANNED_REVIEWED:
        if file in files:
            out.setdefault((key, file), set()).add(line)
    return [{'key': k, 'file': f, 'lines': sorted(lines)} for (k, f), lines in sorted(out.items())]


def typed_required(typed, run):
    import re
    roots = {'policy': 'PolicyConfig', 'data': 'DataConfig', 'logger': 'GRPOLoggerConfig' if run == 'grpo' else 'LoggerConfig', 'cluster': 'ClusterConfig', 'checkpointing': 'CheckpointingConfig'}

    def fields(cls):
        c = typed[cls]
        inherited = [f for b in c['bases'] if b in typed for f in fields(b)]
        return inherited + [dict(f, file=c['file']) for f in c['fields']]

    out = []

    def walk(cls, prefix, seen):
        for f in fields(cls):
            inner = re.sub(r'^(NotRequired|Required)\[(.*)\]$', r'\2', f['type'])
            key = f'{prefix}.{f["name"]}'
            if f['required']:
                out.append({'key': key, 'file': f['file'], 'line': f['line']})
            names = [n for n in re.findall(r'[A-Za-z_]\w*', inner) if n in typed]
            if len(names) == 1 and not inner.startswith('list[') and names[0] not in seen:
                walk(names[0], key, seen | {cls})

    for key, cls in roots.items():
        walk(cls, key, set())
    return out


def main():
    root = Path(sys.argv[1])
    raw = json.loads(subprocess.run([sys.executable, str(HERE / 'extract.py'), str(root), *GRPO_FILES, *SFT_FILES, *SHARED], check=True, capture_output=True, text=True).stdout)
    contract = {
        'about': 'What NeMo-RL and NeMo Gym read on the paths polar runs, at the pinned commits (facts: key paths, file:line, our words). Regenerate with `python3 scripts/nemo-rl-contract/build.py <NeMo-RL checkout> > fixtures/nemo-rl/contract.json`, then re-read the curated facts in build.py. reads: unguarded subscripts found by walking the files listed per run; a read without off_path counts as required even when it sits behind a feature flag polar leaves off (only reads the merged config lacks were judged by hand).',
        'pinned': {'nemo_rl': {'repo': 'NVIDIA-NeMo/RL', 'commit': NEMO_RL}, 'gym': {'repo': 'NVIDIA-NeMo/Gym', 'commit': GYM, 'as': 'the submodule 3rdparty/Gym-workspace/Gym'}},
        'merge': {'file': 'nemo_rl/utils/config.py', 'lines': {'merge_with_override': [31, 49], 'load_config_with_inheritance': [52, 99]}, 'rule': 'defaults: chains resolve depth-first (relative paths against the file\'s folder); a top-level section with _override_ replaces the base section; everything else is OmegaConf.merge (maps deep-merge, other values replace, ??? keeps the base)'},
        'runs': {
            'grpo': {'entry': 'examples/nemo_gym/run_grpo_nemo_gym.py', 'base': 'examples/configs/grpo_math_1B.yaml', 'base_keys': 'grpo_math_1B.keys', 'files': GRPO_FILES + SHARED},
            'sft': {'entry': 'examples/run_sft.py', 'base': 'examples/configs/sft.yaml', 'base_keys': 'sft.keys', 'files': SFT_FILES + SHARED},
        },
        'reads': {run: grouped(raw['reads'], run) for run in ('grpo', 'sft')},
        'reviewed': {run: reviewed(raw['reads'], run) for run in ('grpo', 'sft')},
        'filled': [{'key': k, 'file': f, 'line': line, 'run': r} for k, f, line, r in FILLED],
        'typed_required': {run: typed_required(raw['typed_dicts'], run) for run in ('grpo', 'sft')},
        'asserts': ASSERTS,
        'gym_run': GYM_RUN,
        # Datasets polar names in data.train (registry at nemo_rl/data/datasets/response_datasets/__init__.py:92-93)
        # and the parameters their constructors take (each also takes **kwargs, so other keys are ignored).
        'datasets': [
            {'name': 'openai_format', 'run': 'sft', 'file': 'nemo_rl/data/datasets/response_datasets/oai_format_dataset.py', 'line': 122, 'params': ['data_path', 'chat_key', 'system_key', 'system_prompt', 'tool_key', 'use_preserving_dataset']},
            {'name': 'NemoGymDataset', 'run': 'grpo', 'file': 'nemo_rl/data/datasets/response_datasets/nemogym_dataset.py', 'line': 28, 'params': ['data_path', 'repeat']},
        ],
        # The Gym submodule NeMo-RL runs, and the files in it polar's GRPO run names or relies on.
        'gym': {'root': '3rdparty/Gym-workspace/Gym', 'files': [
            {'path': 'responses_api_models/vllm_model/configs/vllm_model_for_training.yaml', 'why': 'first entry of env.nemo_gym.config_paths (polar writes it)'},
            {'path': 'nemo_gym/rollout_collection.py', 'why': 'posts each row to <agent_ref.name>/run (:1038)'},
        ]},
    }
    json.dump(contract, sys.stdout, indent=1)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
